"""``envlock run``: run a job's command as a child and record the run (``run.toml``).

The command runs in its own process group with envlock's stdin, stdout, stderr and
environment, unchanged (``close_fds=False``: other inherited descriptors pass too).  envlock
becomes the *child subreaper* of the tree (prctl(2)), forwards SIGTERM, SIGINT, SIGUSR1, SIGHUP and
SIGQUIT to the command's process group and records them, and samples the tree from ``/proc`` in a
background thread (:class:`Sampler`).  When the command ends, the processes still alive
below envlock outlived it: they are killed (SIGTERM, then SIGKILL after a grace period) unless
``keep_children``.  The run record is written twice, atomically: at the start
(``outcome = "running"``, so that a SIGKILL of envlock itself leaves an honest record) and at
the end.

The exit status is the command's; a command ended by signal ``n`` gives ``128 + n`` (as shells
report it); a command that cannot be started gives 127 (not found) or 126 (not executable),
as ``env`` and ``timeout`` do.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import tempfile
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from envlock._run import Runner, run
from envlock.errors import EnvlockError
from envlock.manifest.processtables import (
    Granted,
    GpuUse,
    Leftover,
    Resources,
    RunFinding,
    RunInfo,
)
from envlock.runs import proctree
from envlock.runs.launcher import SHELL, launcher, reported
from envlock.runs.sampler import INTERVAL, Sampler
from envlock.runs.signals import FORWARDED, STOPPING, foreground, forwarding, signame, \
    slurm_context, tcset, wait_job
from envlock.runs.slurmend import SlurmEnding
from envlock.redact import redact_argv

__all__ = ["FORWARDED", "Sampler", "RunResult", "supervise", "write_record", "exit_code_of"]

#: seconds leftover processes get between SIGTERM and SIGKILL.
GRACE = 5.0


@dataclass(frozen=True)
class RunResult:
    """What :func:`supervise` did: the record written (``write_error`` when it could not be:
    the exit code is still the command's) and the exit code to return."""

    record: RunInfo
    path: str
    exit_code: int
    write_error: str | None = None


def exit_code_of(status: int) -> tuple[int | None, str | None, int]:
    """``(exit status, signal name, shell-style exit code)`` of a ``wait`` status."""
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        return None, signame(n), 128 + n
    code = os.WEXITSTATUS(status)
    return code, None, code


def _utc() -> str:
    from envlock.probes.assemble import utc_now

    return utc_now()


def write_record(path: str, info: RunInfo, *, target: Mapping[str, Any] | None,
                 command: Sequence[str]) -> str:
    """Write ``run.toml`` atomically: ``[envlock]`` (schema, version, created, host, command),
    ``[target]`` (from the snapshot), ``[run]``.  Returns the path.

    :raises OutputExistsError: ``path`` is a symbolic link (never written through).
    :raises OSError: it cannot be written (a full disk names inodes when none is left).
    """
    from envlock._version import __version__
    from envlock._io import write_file
    from envlock.manifest import _model, _toml
    from envlock.manifest._schema import SCHEMA

    doc = {
        "envlock": {"schema": SCHEMA, "version": __version__, "created": _utc(),
                    "host": socket.gethostname(),
                    "command": list(redact_argv(command))},
        "target": dict(target) if target else {"kind": "system", "prefix": sys.prefix,
                                               "chosen-by": "none"},
        "run": _model.to_dict(info),
    }
    # replaced (prepare_dir refused an earlier record without --force); a symbolic link planted
    # at run.toml is refused, never written through (envlock._io.write_file)
    write_file(path, _toml.dumps(doc, "toml"), force=True)
    return path


def _sha256(path: str) -> str | None:
    from envlock._io import InputError, read_bytes

    try:
        return hashlib.sha256(read_bytes(path)).hexdigest()
    except InputError:
        return None

def _outcome(exit_status: int | None, sig: str | None, received: Sequence[str]) -> str:
    """``[run] outcome`` (docs/run.md).  SIGPIPE is ``output-closed``: the reader of the
    command's output went away (``envlock run -- yes | head -1``) and the kernel ended the
    writer, the normal end of a producer in a pipeline (POSIX ``write()``: EPIPE and SIGPIPE
    when no process has the pipe open for reading) — not a crash."""
    if any(s in STOPPING for s in received):
        return "terminated"
    if sig is not None:
        if sig == "SIGPIPE":
            return "output-closed"
        return "killed" if sig == "SIGKILL" else (
            "terminated" if sig in ("SIGTERM", "SIGINT", "SIGHUP") else "crashed")
    return "succeeded" if exit_status == 0 else "failed"


def supervise(
    command: Sequence[str],
    *,
    record_path: str,
    target: Mapping[str, Any] | None = None,
    manifest_path: str | None = None,
    verify: str | None = None,
    verify_exit: int | None = None,
    keep_children: bool = False,
    environ: Mapping[str, str] | None = None,
    runner: Runner = run,
    granted: Granted | None = None,
    grace: float = GRACE,
    gpu: bool = True,
    driver_file: str = "/proc/driver/nvidia/version",
    envlock_command: Sequence[str] = (),
    on_findings: Callable[[Sequence[RunFinding]], None] | None = None,
) -> RunResult:
    """Run ``command`` as described in the module docstring and write its record.

    :param command: program and arguments (no shell; use ``bash -c`` for one).
    :param record_path: where ``run.toml`` goes (replaced).
    :param target: the snapshot's ``[target]`` table, copied into the record.
    :param manifest_path: the snapshot file; its sha256 is recorded.
    :param verify: the verify policy used; ``verify_exit``: its exit status.
    :param keep_children: leave processes that outlive the command running.
    :param environ: the environment for the grant and ``nvidia-smi`` (``os.environ``); the
        command itself always gets envlock's own environment, unchanged.
    :param granted: the grant (default: read now, :func:`envlock.runs.granted.granted`).
    :param grace: seconds between SIGTERM and SIGKILL for leftover processes.
    :param gpu: sample GPU memory when an NVIDIA driver (``driver_file`` exists) and
        ``nvidia-smi`` (on ``PATH`` of ``environ``) are present.
    :param on_findings: called with the findings before the record is written (printing).
    :returns: a :class:`RunResult`; never raises for the command's failures.
    """
    env = os.environ if environ is None else environ
    if granted is None:
        from envlock.runs.granted import granted as read_granted

        granted = read_granted(env, runner=runner)
    base = replace(_running(command, manifest_path), verify=verify, verify_exit=verify_exit,
                   keep_children=keep_children, granted=granted)
    write = lambda info: write_record(record_path, info, target=target,  # noqa: E731
                                      command=envlock_command)
    state: dict[str, Any] = {"t0": time.monotonic(), "signals": [], "pgid": None,
                             "slurm": slurm_context(env)}
    ending = SlurmEnding(env, runner, write) if state["slurm"] else None
    subreaper = proctree.set_subreaper()
    with forwarding(state):
        term_owner = foreground(None)
        t0 = time.monotonic()
        # 0700: nobody else writes there
        usage_file = os.path.join(tempfile.mkdtemp(prefix="envlock-run-"), "rusage")
        try:
            argv = launcher(command, usage_file)
            proc = _start(argv)
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            info = replace(base, outcome="not-started", end=_utc(), exit_code=code,
                           error=f"{command[0]}: {exc.strerror or exc}")
            return _written(write, info, record_path, code)
        _hand_over(proc.pid, term_owner, state)
        sampler = _sampler(proc.pid, argv[0] == SHELL, env, runner, gpu, driver_file)
        base = replace(base, pid=sampler.cmd_pid or proc.pid)
        with contextlib.suppress(OSError, EnvlockError):
            write(base)
        if ending is not None:
            ending.arm(base, state, sampler, granted)  # and its memory watch (OverMemoryKill)
        status, usage = _ended(proc, argv[0] == SHELL, term_owner, usage_file, ending)
        wall = time.monotonic() - t0
        end = _utc()
        sampler.stop()
        children = _leftovers(sampler, proc.pid, subreaper=subreaper,
                              keep_children=keep_children, grace=grace)
    info = _final(base, status, usage, sampler, state, wall=wall, end=end, children=children,
                  slurm_end=ending.findings() if ending is not None else [])
    if on_findings is not None:
        on_findings(info.findings)
    return _written(write, info, record_path, info.exit_code or 0)


def _running(command: Sequence[str], manifest_path: str | None) -> RunInfo:
    """The record written at the start (``running``): the command (credentials removed), where
    and when, the snapshot's digest, and the supervisor — envlock's own pid, start time and
    boot — by which a reader tells a supervisor gone (:mod:`envlock.runs.unfinished`)."""
    return RunInfo(
        outcome="running", command=redact_argv(command), cwd=os.getcwd(), start=_utc(),
        manifest=os.path.basename(manifest_path) if manifest_path else None,
        manifest_sha256=_sha256(manifest_path) if manifest_path else None,
        supervisor=os.getpid(), supervisor_start=proctree.start_time(os.getpid()),
        boot_id=proctree.boot_id(),
    )


def _final(base: RunInfo, status: int, usage: Any, sampler: Sampler, state: dict[str, Any], *,
           wall: float, end: str, children: tuple[Leftover, ...],
           slurm_end: list[RunFinding]) -> RunInfo:
    """The final record: how CMD ended (its wait ``status``), its resources and findings
    (Slurm's ``slurm_end`` first)."""
    exit_status, sig, code = exit_code_of(status)
    received = tuple(s.name for s in state["signals"])
    resources = _resources(usage, sampler)
    outcome = _outcome(exit_status, sig, received)
    from envlock.runs.outcome import run_findings

    findings = run_findings(outcome=outcome, exit_status=exit_status, signal=sig,
                            received=received, wall=wall, end=end, resources=resources,
                            granted=base.granted, children=children,
                            keep_children=base.keep_children,
                            forwarded=all(s.forwarded for s in state["signals"]),
                            faulthandler=bool(os.environ.get("PYTHONFAULTHANDLER")))
    return replace(base, pid=sampler.cmd_pid or base.pid, outcome=outcome, end=end,
                   wall=round(wall, 3), exit_status=exit_status, signal=sig, exit_code=code,
                   signals=tuple(state["signals"]), resources=resources, children=children,
                   findings=tuple(slurm_end + findings))


def _ended(proc: subprocess.Popen[bytes], shell: bool, term_owner: int | None,
           usage_file: str, ending: SlurmEnding | None) -> tuple[int, Any]:
    """Wait for CMD's launcher ``proc``: CMD's wait status and usage (from the launcher's
    reporter when ``shell``), the terminal taken back."""
    status, usage = wait_job(proc.pid, term_owner)
    if ending is not None:
        ending.done()
    proc.returncode = exit_code_of(status)[2]  # waited for here; Popen must not wait again
    if shell:
        status, usage = reported(usage_file, status, usage)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(usage_file))
    if term_owner is not None:
        tcset(term_owner)
    return status, usage


def _sampler(launched: int, shell: bool, env: Mapping[str, str], runner: Runner, gpu: bool,
             driver_file: str) -> Sampler:
    """The started :class:`Sampler` of the tree; through the launcher shell (``shell``) it
    is left out and its first child is CMD, whose pid the first sample finds."""
    sampler = Sampler(root=os.getpid(), environ=env, runner=runner, gpu_enabled=gpu,
                      driver_file=driver_file, exclude={launched} if shell else set(),
                      launcher=launched if shell else None)
    if shell:
        with contextlib.suppress(Exception):
            sampler.sample()  # CMD's pid for the record written at the start
    sampler.start()
    return sampler


def _written(write: Callable[[RunInfo], Any], info: RunInfo, path: str, code: int) -> RunResult:
    """Write the record ``info``; the result says why when it could not be (the command's
    exit status matters more than its record)."""
    try:
        write(info)
    except (OSError, EnvlockError) as exc:
        return RunResult(info, path, code, write_error=_why(path, exc))
    return RunResult(info, path, code)


def _start(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, envlock's descriptors inherited.

    :raises OSError: it cannot be started."""
    if sys.version_info >= (3, 11):
        return subprocess.Popen(argv, close_fds=False, process_group=0)  # noqa: S603
    # Python 3.10's Popen has no process_group: setpgid(0, 0) in the child, as 3.11 does
    return subprocess.Popen(argv, close_fds=False,  # noqa: S603
                            preexec_fn=lambda: os.setpgid(0, 0))


def _hand_over(pgid: int, term_owner: int | None, state: dict[str, Any]) -> None:
    """CMD's group ``pgid`` started: give it the terminal, and the signals received before."""
    state["pgid"] = pgid
    if term_owner is not None:
        tcset(pgid)
        # a read of the terminal before the hand-over stopped it (SIGTTIN): resume it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)
    for sig in state.pop("pending", []):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)


def _leftovers(sampler: Sampler, launched: int, *, subreaper: bool, keep_children: bool,
               grace: float) -> tuple[Leftover, ...]:
    """What outlived the command, killed (SIGTERM, SIGKILL after ``grace`` s) unless
    ``keep_children``: the tree below envlock now (orphans are re-parented to envlock, the
    subreaper), and without a subreaper every process seen that still runs."""
    left = sampler.tree()
    if not subreaper:
        left += [p for p, (st, _c) in sampler.seen.items()
                 if p not in left and p != launched and proctree.alive(p, st)]
    left = [p for p in left if proctree.alive(p, None)]
    if left:
        sampler.sample()
        sampler.sample_gpu(left)
    ids = {p: (sampler.seen.get(p) or (proctree.start_time(p), proctree.cmdline(p))) for p in left}
    if left and not keep_children:
        actions = proctree.terminate({p: ids[p][0] for p in left}, grace)
    else:
        actions = dict.fromkeys(left, "kept")
    proctree.reap()
    return tuple(Leftover(pid=p, command=ids[p][1], rss=sampler.peak_pid.get(p),
                          gpu_memory=sampler.gpu.get(p, (None, ""))[0],
                          action=actions[p]) for p in left)


def _resources(usage: Any, sampler: Sampler) -> Resources:
    """``[run.resources]``: CMD's own usage (``ru_maxrss`` KiB on Linux, getrusage(2)) and
    what the sampler saw of the tree."""
    max_rss = usage.ru_maxrss * 1024 if usage.ru_maxrss else None
    return Resources(
        max_rss=max_rss, peak_rss_tree=sampler.peak_tree or None,
        peak_rss=max(max_rss or 0, sampler.peak_tree) or None,
        cpu_user=round(usage.ru_utime, 3), cpu_system=round(usage.ru_stime, 3),
        samples=sampler.samples, interval=INTERVAL, sampler_cpu=round(sampler.cpu, 4),
        gpu_status=sampler.gpu_status, gpu_error=sampler.gpu_error,
        gpu_memory=tuple(GpuUse(pid=p, memory=m, gpu_uuid=u or None,
                                command=(sampler.seen.get(p) or (None, None))[1])
                         for p, (m, u) in sorted(sampler.gpu.items())),
    )

def _why(path: str, exc: BaseException) -> str:
    """One line: why the record could not be written (an OutputExistsError names the path)."""
    if isinstance(exc, OSError):
        return f"{path}: {exc.strerror or exc}"
    return str(exc)

