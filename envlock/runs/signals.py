"""Signals in ``envlock run``: which are forwarded to CMD's process group (and the rule under
Slurm), recorded once, and the job control of a command on a terminal."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from envlock.manifest.processtables import ReceivedSignal

__all__ = ["FORWARDED", "STOPPING", "signame", "slurm_context", "forwards", "forwarding",
           "foreground", "tcset", "wait_job"]

#: signals forwarded to the command's process group (Slurm sends SIGTERM before the time limit,
#: ``--signal=USR1@secs`` a warning; Ctrl-C is SIGINT; a closed terminal or ``kill -HUP`` is
#: SIGHUP; Ctrl-\ is SIGQUIT).  Without a handler SIGHUP and SIGQUIT would end envlock and
#: leave the command unsupervised, its record stuck at ``running``.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP,
             signal.SIGQUIT)
#: forwarded signals that ask the job to stop: a run that received one is ``terminated``.
STOPPING = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")

def signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"

def slurm_context(environ: Mapping[str, str]) -> str | None:
    """Where envlock runs in a Slurm job: ``"step"`` (a task of an ``srun`` step:
    ``SLURM_STEP_ID`` is set), ``"batch"`` (the batch script's step: ``SLURM_JOB_ID`` without
    ``SLURM_STEP_ID``), ``None`` outside Slurm."""
    if not (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")):
        return None
    return "step" if environ.get("SLURM_STEP_ID", "").strip().isdigit() else "batch"


def forwards(sig: int, context: str | None) -> bool:
    """Whether envlock forwards ``sig`` to CMD's process group, so that CMD gets it exactly once.

    The rule, seen on a real Slurm 22.05 (``tests/slurm``, docs/run.md "Signals under Slurm"):
    Slurm signals every process of a step itself — the time limit's and a plain ``scancel``'s
    SIGTERM in the batch step and in ``srun`` steps, ``scancel --signal=SIG`` and
    ``--signal=SIG@N`` in ``srun`` steps (and ``srun``'s own forwarding of Ctrl-C) — so such a
    signal reached CMD already: it is recorded, not forwarded.  Only the batch script's own
    process gets ``--signal=B:SIG@N`` and ``scancel -b --signal=SIG``: in the batch step
    every signal but SIGTERM is forwarded.  Outside Slurm every signal is forwarded."""
    if context == "step":
        return False
    if context == "batch":
        return sig != signal.SIGTERM
    return True


@contextlib.contextmanager
def forwarding(state: dict[str, Any]) -> Any:
    """Install handlers that forward :data:`FORWARDED` signals to ``state["pgid"]`` and record
    them; a signal envlock was started with ignored stays ignored (the child inherits that)."""
    old: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        # Recorded before it is forwarded: the handler of a signal that arrives while this one
        # runs (CPython runs it between two bytecodes of this one) must land after it in the list.
        pgid = state.get("pgid")
        forward = forwards(signum, state.get("slurm"))
        entry = ReceivedSignal(name=signame(signum), after=round(time.monotonic() - state["t0"], 3),
                               forwarded=forward)
        received: list[ReceivedSignal] = state["signals"]
        received.append(entry)
        on_signal = state.get("on_signal")
        if on_signal is not None:
            on_signal(signum)
        if not forward:
            return
        if pgid is None:
            state.setdefault("pending", []).append(signum)
            return
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            for i, r in enumerate(received):
                if r is entry:
                    received[i] = replace(entry, forwarded=False)
                    break

    for sig in FORWARDED:
        cur = signal.getsignal(sig)
        if cur is signal.SIG_IGN:
            continue
        old[sig] = cur
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def foreground(pgid: int | None) -> int | None:
    """Give the controlling terminal to ``pgid`` when envlock is its foreground group (so the
    command can read the terminal and Ctrl-C reaches it); returns the group to give it back to."""
    try:
        if not os.isatty(0) or os.tcgetpgrp(0) != os.getpgrp():
            return None
        mine = os.getpgrp()
        if pgid is not None:
            tcset(pgid)
        return mine
    except OSError:
        return None


def tcset(pgid: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, pgid)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def wait_job(pid: int, term_owner: int | None) -> tuple[int, Any]:
    """Wait for ``pid`` to end.  On a terminal, act as a job-control proxy: when the command is
    stopped (Ctrl-Z) take the terminal back and stop envlock too, so the shell regains control;
    on ``fg`` give the terminal to the command again and continue it (what a shell does,
    POSIX "Job Control")."""
    while True:
        _, status, usage = os.wait4(pid, os.WUNTRACED if term_owner is not None else 0)
        if not os.WIFSTOPPED(status):
            return status, usage
        tcset(term_owner)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGSTOP)
        with contextlib.suppress(OSError):  # resumed: in the foreground (fg) or not (bg)
            if os.tcgetpgrp(0) == os.getpgrp():
                tcset(pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)


