"""The run's findings in plain words: resources used against what was granted, how it ended,
what it left behind.

Ids (stable, ``run.<what>``): ``run.memory`` (peak RSS of the granted memory; warning from
:data:`NEAR` of it), ``run.time`` (time used of the limit; warning from :data:`NEAR`),
``run.terminated``, ``run.slurm-ended`` (written by ``envlock.runs.supervise``),
``run.killed``, ``run.crashed``, ``run.output-closed``, ``run.failed``,
``run.visible-devices-unset``, ``run.gpu-unused``, ``run.leftover-children``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import replace

from envlock.manifest.processtables import Granted, Leftover, Resources, RunFinding

__all__ = ["NEAR", "run_findings", "fmt_bytes", "fmt_duration"]

#: fraction of a grant from which using it is a warning.
NEAR = 0.9


def fmt_bytes(n: int) -> str:
    """``16 GiB``, ``15.6 GiB``, ``812 MiB``, ``4 KiB`` (binary units, one decimal at most)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            v = n / scale
            text = f"{v:.1f}".rstrip("0").rstrip(".") if v < 100 else f"{v:.0f}"
            return f"{text} {unit}"
    return f"{n} B"


def fmt_duration(seconds: float) -> str:
    """``11 h 52 min``, ``12 h``, ``3 min 5 s``, ``42 s``, ``1.3 s``, ``2 d 4 h``."""
    if seconds < 10:
        return f"{seconds:.1f}".rstrip("0").rstrip(".") + " s"
    s = int(round(seconds))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{d} d" + (f" {h} h" if h else "")
    if h:
        return f"{h} h" + (f" {m} min" if m else "")
    if m:
        return f"{m} min" + (f" {sec} s" if sec else "")
    return f"{sec} s"


def _pct(a: float, b: float) -> str:
    return f"{round(100 * a / b)} %"


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return _dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_findings(
    *,
    outcome: str,
    exit_status: int | None,
    signal: str | None,
    received: tuple[str, ...],
    wall: float | None,
    end: str | None,
    resources: Resources | None,
    granted: Granted | None,
    children: tuple[Leftover, ...],
    keep_children: bool,
    forwarded: bool = True,
    faulthandler: bool = False,
) -> list[RunFinding]:
    """The findings of one run, most severe first within each topic.

    :param outcome: :attr:`RunInfo.outcome`; ``received``: names of the signals forwarded.
    :param wall: the command's wall time, seconds; ``end``: UTC end time (for the job's time).
    :param faulthandler: the command ran with ``PYTHONFAULTHANDLER`` set (a Python program
        then wrote the traceback of a crash to its stderr itself).
    """
    g = granted or Granted()
    r = resources or Resources()
    start, stop = _epoch(g.job_start), _epoch(end)
    used = (stop - start) if start is not None and stop is not None and stop >= start else wall
    out = [*_memory(g, r, outcome), *_time(g, used, whole_job=start is not None),
           *_ending(outcome, exit_status, signal, received, forwarded,
                    near=bool(g.time_limit and used is not None and used >= g.time_limit * NEAR),
                    faulthandler=faulthandler),
           *_gpus(g, r), *_children(children, keep_children)]
    return [replace(f, cause=f.cause or None) for f in out]


def _memory(g: Granted, r: Resources, outcome: str) -> list[RunFinding]:
    """``run.memory``: the peak RSS against the memory granted."""
    out: list[RunFinding] = []
    peak = r.peak_rss
    if peak is not None and g.memory:
        frac = peak / g.memory
        sev = "warning" if frac >= NEAR else "info"
        if outcome == "killed" and frac >= NEAR:
            sev = "error"
        out.append(RunFinding(
            id="run.memory", severity=sev,
            title=f"peak RSS {fmt_bytes(peak)} of {fmt_bytes(g.memory)} granted ({_pct(peak, g.memory)})",
            cause=("At the memory limit the kernel's out-of-memory killer ends the job (SIGKILL, "
                   "Slurm: 'oom-kill event'); the RSS here is sampled, so a short spike may have "
                   "been higher." if sev != "info" else ""),
            fix=(("Ask for more memory (--mem / --mem-per-cpu), or lower the program's peak "
                  "(smaller batches, fewer data-loader workers).",) if sev != "info" else ()),
        ))
    elif peak is not None:
        out.append(RunFinding(id="run.memory", severity="info",
                              title=f"peak RSS {fmt_bytes(peak)} (no memory limit known)"))
    return out


def _time(g: Granted, used: float | None, *, whole_job: bool) -> list[RunFinding]:
    """``run.time``: the time used (the job's since its start when ``whole_job``, else CMD's wall time) of the limit."""
    out: list[RunFinding] = []
    if g.time_limit and used is not None:
        frac = used / g.time_limit
        sev = "warning" if frac >= NEAR else "info"
        whose = "the job " if whole_job else ""
        out.append(RunFinding(
            id="run.time", severity=sev,
            title=f"{whose}ran {fmt_duration(used)} of a {fmt_duration(g.time_limit)} limit "
                  f"({_pct(used, g.time_limit)})",
            cause=("Slurm sends SIGTERM at the time limit and SIGKILL after KillWait (default 30 s): "
                   "'CANCELLED AT … DUE TO TIME LIMIT'." if sev != "info" else ""),
            fix=(("Ask for more time (--time), or checkpoint and resubmit; `#SBATCH --signal=USR1@300` "
                  "warns the program 5 min before the limit.",) if sev != "info" else ()),
        ))
    return out


def _ending(outcome: str, exit_status: int | None, signal: str | None,
            received: tuple[str, ...], forwarded: bool, *, near: bool,
            faulthandler: bool = False) -> list[RunFinding]:
    """How the command ended (``run.terminated``, ``run.killed``, ``run.crashed``,
    ``run.output-closed``, ``run.failed``); ``near``: the time limit was near;
    ``faulthandler``: ``PYTHONFAULTHANDLER`` was set for the command."""
    out: list[RunFinding] = []
    if outcome == "terminated":
        how = f"it exited with status {exit_status}" if exit_status is not None else f"it ended by {signal}"
        out.append(RunFinding(
            id="run.terminated", severity="warning",
            title=(f"terminated: {', '.join(received)} forwarded to the command; {how}" if forwarded
                   else f"terminated: {', '.join(received)} (Slurm signals every process of the "
                        f"step, the command too); {how}"),
            cause=("The time limit was near: most likely Slurm's time limit." if near else
                   "Someone or something (scancel, the scheduler, Ctrl-C) asked the job to stop."),
            fix=("Check that the program wrote its checkpoint (it has until SIGKILL, KillWait "
                 "seconds later).",),
        ))
    elif outcome == "killed":
        out.append(RunFinding(
            id="run.killed", severity="error",
            title="killed by SIGKILL, which envlock did not send",
            cause="The out-of-memory killer (memory limit) or the scheduler (time limit passed, "
                  "scancel --signal=KILL) ends a process this way; it could not save anything.",
            fix=("Look for 'oom-kill' in the job's log or `sacct -j $SLURM_JOB_ID -o State,MaxRSS`.",),
        ))
    elif outcome == "crashed":
        out.append(RunFinding(
            id="run.crashed", severity="error", title=f"the command crashed: {signal}",
            cause="A native library or the interpreter died (SIGSEGV: invalid memory access; SIGABRT: "
                  "an assertion or an uncaught C++ exception; SIGBUS: a file truncated under mmap).",
            fix=(("A Python program's traceback of the crash is in its stderr (PYTHONFAULTHANDLER "
                  "was set): the last frames name the call that crashed.",) if faulthandler else
                 ("For a Python program, run it again after `export PYTHONFAULTHANDLER=1`: it "
                  "then writes the Python traceback of the crash to its stderr.",)),
        ))
    elif outcome == "output-closed":
        out.append(RunFinding(
            id="run.output-closed", severity="info",
            title="the command's output was closed by its reader (SIGPIPE): it stopped writing",
            cause="The program that read its output ended first (`| head`, a pager quit); the "
                  "kernel then ends the writer with SIGPIPE, the normal end of a producer in a "
                  "pipeline.",
        ))
    elif outcome == "failed":
        out.append(RunFinding(id="run.failed", severity="warning",
                              title=f"the command failed: exit status {exit_status}"))
    return out


def _gpus(g: Granted, r: Resources) -> list[RunFinding]:
    """``run.visible-devices-unset``, ``run.gpu-unused``: GPUs allocated and their use."""
    out: list[RunFinding] = []
    if g.gpus:
        if g.visible_devices is None:
            from envlock.probes.slurm import visible_devices_fix

            out.append(RunFinding(
                id="run.visible-devices-unset", severity="warning",
                title=f"GPU allocated ({g.gpus}) but CUDA_VISIBLE_DEVICES unset in the job",
                cause="Every CUDA process then sees all GPUs of the node and starts on GPU 0, "
                      "which may belong to another job.",
                fix=(visible_devices_fix(g.gpu_ids, None),
                     "Find what removed it between Slurm and the job (an `unset "
                     "CUDA_VISIBLE_DEVICES` in the script or a module it loads, a launcher that "
                     "passes on only some variables)."),
            ))
        if r.gpu_status == "ok" and not r.gpu_memory:
            out.append(RunFinding(
                id="run.gpu-unused", severity="warning",
                title=f"{g.gpus} GPU(s) allocated but no process of the run held GPU memory",
                cause="The program ran on the CPU (a CPU-only build, no .cuda()/.to(device)), or "
                      "on GPUs outside the allocation.",
                fix=("Check torch.cuda.is_available() in the job, or drop --gpus.",),
            ))
    return out


def _children(children: tuple[Leftover, ...], keep_children: bool) -> list[RunFinding]:
    """``run.leftover-children``: processes that outlived CMD."""
    out: list[RunFinding] = []
    if children:
        n = len(children)
        actions = {c.action for c in children}
        done = ("killed" if actions <= {"killed", "gone"} else
                "kept (--keep-children)" if actions == {"kept"} else "/".join(sorted(actions)))
        listed = "; ".join(
            f"{c.pid} {c.command}" + (f" [{fmt_bytes(c.gpu_memory)} GPU]" if c.gpu_memory else "")
            for c in children[:5])
        more = f"; and {n - 5} more" if n > 5 else ""
        out.append(RunFinding(
            id="run.leftover-children", severity="warning",
            title=f"{n} child process{'es' if n != 1 else ''} outlived CMD ({listed}{more}): {done}",
            cause="Left running, they keep CPU, memory and GPU memory: the next job on the node "
                  "may run out of GPU memory.",
            fix=(("Kill them (the pids above) or end them in the program (join workers, "
                  "terminate subprocesses).",) if keep_children else
                 ("Let the program end its workers (join DataLoader workers, terminate "
                  "subprocesses) before it exits.",)),
        ))
    return out
