"""A run record still ``running`` whose supervisor is gone: what a reader can say of it.

``envlock run`` writes ``outcome = "running"`` at the start and the final record at the end.
A SIGKILL of the whole step — Slurm's over-memory kill (``JobAcctGatherParams=OverMemoryKill``,
no SIGTERM first), a node set DOWN, ``KillWait`` passed — can end envlock before it writes
the end; envlock's own sampler races Slurm's and loses sometimes (tests/slurm).  The record
on disk then says ``running`` forever.  :func:`settle` is what ``show`` and ``diff`` read
instead (nothing is written: the file stays what envlock wrote):

- the job is a Slurm job and ``scontrol show job`` (the controller, from any node) says it
  ended: the record is final as Slurm ended it — ``OUT_OF_MEMORY`` (the over-memory kill),
  ``NODE_FAIL``, ``TIMEOUT``, ``CANCELLED`` … with Slurm's ``ExitCode`` signal (``0:9``:
  SIGKILL) as the signal, and a ``run.unfinished`` finding saying that this is Slurm's word,
  read by the reader, because envlock was killed before it could write its own;
- the record was written on this host in this boot and its supervisor pid (same start time)
  is gone, and Slurm says nothing: ``unknown`` — envlock ended without its final record, and
  how the command ended is not known;
- otherwise (another host, no supervisor id in an older record, the supervisor alive): the
  record stands, with a note when whether it still runs cannot be told from here.
"""

from __future__ import annotations

import calendar
import os
import re
import shutil
import socket
import stat
import time
from collections.abc import Mapping
from typing import Any

from envlock._run import Runner, run
from envlock.manifest.processtables import RunFinding
from envlock.runs import proctree

__all__ = ["settle", "ENDED"]

#: Slurm job states after the job ended (``squeue``/``scontrol`` "JOB STATE CODES"), with the
#: cause in words.
ENDED = {
    "OUT_OF_MEMORY": "Slurm's over-memory kill", "NODE_FAIL": "a node failure (node set DOWN)",
    "TIMEOUT": "the time limit", "CANCELLED": "scancel", "PREEMPTED": "preemption",
    "DEADLINE": "the deadline", "BOOT_FAIL": "a node boot failure", "FAILED": "a failure",
    "COMPLETED": "the job's end",
}


def settle(data: dict[str, Any], *, environ: Mapping[str, str] | None = None,
           runner: Runner = run) -> dict[str, Any]:
    """``data`` (a parsed ``run.toml``) with its ``[run]`` as a reader can honestly state it
    (module docstring); ``data`` itself when its outcome is not ``running`` or nothing more is
    known.  Never raises for what it cannot read: an unreadable answer leaves the record as is.

    :param environ: where ``scontrol`` is found (``PATH``) and which cluster (``SLURM_CONF``);
        default ``os.environ``.
    :param runner: runs ``scontrol show job -o ID`` (5 s deadline).
    """
    t = data.get("run")
    if not isinstance(t, dict) or t.get("outcome") != "running":
        return data
    env = os.environ if environ is None else environ
    gone = _supervisor_gone(data, t)
    if gone is False:
        return data
    job = _slurm_job(t, env, runner)
    state = job.get("JobState", "")
    if state in ENDED:
        return {**data, "run": _ended_by_slurm(t, job, state)}
    if gone:
        sup = t.get("supervisor")
        note = (f"envlock's supervisor (pid {sup}) is gone and its final record was never "
                "written: it was killed (SIGKILL, or the machine stopped) with the command; "
                "how the command ended is not known")
        if state:
            note += f" (Slurm: job {t['granted']['job-id']} {state}, the step ended)"
        return {**data, "run": {**t, "outcome": "unknown", "findings": [
            *(t.get("findings") or ()), _finding("error", note)]}}
    host = (data.get("envlock") or {}).get("host", "?")
    why = ("it has no supervisor id (an older envlock)" if not isinstance(t.get("supervisor"), int)
           else f"it was written on {host}" if host != socket.gethostname()
           else "it was written before this machine's last boot")
    return {**data, "run": {**t, "findings": [*(t.get("findings") or ()), _finding(
        "info", f"the record says running; whether it still runs cannot be told here: {why}")]}}


def _supervisor_gone(data: Mapping[str, Any], t: Mapping[str, Any]) -> bool | None:
    """True/False: the supervisor is gone/alive; ``None``: not knowable here."""
    sup, boot = t.get("supervisor"), t.get("boot-id")
    host = (data.get("envlock") or {}).get("host")
    if not isinstance(sup, int) or host != socket.gethostname() or not boot \
            or boot != proctree.boot_id():
        return None
    started = t.get("supervisor-start")
    return not proctree.alive(sup, started if isinstance(started, int) else None)


def _slurm_job(t: Mapping[str, Any], env: Mapping[str, str], runner: Runner) -> dict[str, str]:
    g = t.get("granted")
    if not isinstance(g, Mapping) or g.get("scheduler") != "slurm" or not g.get("job-id"):
        return {}
    scontrol = shutil.which("scontrol", path=env.get("PATH", os.defpath))
    if not scontrol:
        return {}
    from envlock.runs.granted import parse_scontrol

    try:
        res = runner([scontrol, "show", "job", "-o", str(g["job-id"])], timeout=5.0, env=dict(env))
    except OSError:
        return {}
    return parse_scontrol(res.stdout) if res.ok else {}


def _ended_by_slurm(t: dict[str, Any], job: Mapping[str, str], state: str) -> dict[str, Any]:
    code, _, sig = job.get("ExitCode", "").partition(":")
    signame = None
    if sig.isdigit() and int(sig):
        import signal as _signal

        try:
            signame = _signal.Signals(int(sig)).name
        except ValueError:
            signame = f"signal {sig}"
    said = ", ".join(f"{k} {job[k]}" for k in ("JobState", "Reason", "ExitCode") if job.get(k))
    found = [*(t.get("findings") or ())]
    oom = _memory_line(job, str((t.get("granted") or {}).get("job-id", "")))
    cause = ENDED[state]
    if oom or state == "OUT_OF_MEMORY":
        cause = "Slurm's over-memory kill"
        if not any(f.get("id") == "run.memory" for f in found):
            from envlock.runs.outcome import fmt_bytes

            mem = (t.get("granted") or {}).get("memory")
            grant = f" the {fmt_bytes(mem)} granted" if isinstance(mem, int) else " its --mem"
            found.append(_table(RunFinding(
                id="run.memory", severity="error",
                title=f"the step passed{grant}: Slurm's over-memory kill ended the step",
                cause=f"scontrol show job: {said}"
                      + (f"; the job's log ({job.get('StdErr')}): {oom!r}" if oom else "") + ".",
                fix=("Ask for more memory (--mem), or lower the program's peak.",))))
    found.append(_finding("warning", (
        f"Slurm ended the job ({said}): {cause}; envlock was killed with the step before it "
        "wrote its final record, so this outcome is Slurm's, read from scontrol show job"
        + (" and the job's log" if oom else "") + " by the reader of this record")))
    out = {**t, "outcome": "killed" if signame == "SIGKILL" else (
        "unknown" if signame is None else "crashed"), "findings": found}
    if signame:
        out["signal"], out["exit-code"] = signame, 128 + int(sig)
    end = _utc(job.get("EndTime", ""))
    if end:
        out["end"] = end
        start = _epoch(str(t.get("start", "")))
        if start is not None:
            out["wall"] = max(0.0, float(_epoch(end) or 0) - start)
    return out


#: slurmstepd's line when OverMemoryKill ends a step (src/slurmd/slurmstepd, 22.05):
#: ``StepId=12.batch exceeded memory limit (106893312 > 104857600), being killed``
_OOM = re.compile(r"StepId=(\d+)\.(\S+) exceeded memory limit \((\d+) > (\d+)\), being killed")
#: bytes read from the end of the job's log
_TAIL = 256 * 1024


def _memory_line(job: Mapping[str, str], job_id: str) -> str | None:
    """slurmstepd's over-memory line for ``job_id`` in the job's log (``StdErr``, then
    ``StdOut`` of ``scontrol show job``; its last :data:`_TAIL` bytes), ``None`` when absent."""
    for key in ("StdErr", "StdOut"):
        text = _tail(job.get(key, ""))
        for m in _OOM.finditer(text or ""):
            if m.group(1) == job_id or not job_id:
                return m.group(0)
    return None


def _tail(path: str) -> str | None:
    """The last :data:`_TAIL` bytes of the regular file ``path`` (opened non-blocking: a FIFO
    never waits), ``None`` for anything else."""
    if not path.startswith("/"):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.lseek(fd, max(0, st.st_size - _TAIL), os.SEEK_SET)
        return os.read(fd, _TAIL).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _finding(severity: str, title: str) -> dict[str, Any]:
    return _table(RunFinding(
        id="run.unfinished", severity=severity, title=title,
        cause=("envlock run writes outcome running at the start and the final record at the "
               "end; a SIGKILL of envlock itself (the whole step) leaves the first."),
        fix=("Nothing to run: read the job's log (slurm-JOB.out) and ask for more memory or "
             "time when Slurm says it ended the job for that.",)))


def _table(f: RunFinding) -> dict[str, Any]:
    from envlock.manifest import _model

    return _model.to_dict(f)  # type: ignore[no-any-return]


def _utc(local: str) -> str | None:
    """Slurm's ``EndTime`` (local time, no zone: ``2026-12-03T08:01:02``) as UTC ``…Z``."""
    try:
        epoch = time.mktime(time.strptime(local, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _epoch(utc: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(utc, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None
