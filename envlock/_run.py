"""The one way envlock runs an external command.

Every probe that needs a program (``git``, ``nvidia-smi``, ``nvcc``, the target interpreter)
calls :func:`run`.  It always has a timeout, never uses a shell, never raises for a missing
program, a non-zero exit or a timeout, and returns a :class:`RunResult` that says which of
these happened.  Probes take a ``runner`` parameter of the same signature so that tests can
put fake programs on a test ``PATH`` or inject a different runner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_TIMEOUT", "RunResult", "Runner", "cancel_all", "resume", "run"]

#: Default timeout of one external command, in seconds.
DEFAULT_TIMEOUT = 5.0

Status = Literal["ok", "failed", "absent", "timeout", "error"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """What happened when a command was run.

    :ivar argv: the command line, as run.
    :ivar status: ``"ok"`` (exit 0), ``"failed"`` (non-zero exit), ``"absent"`` (program not
        found), ``"timeout"`` (killed after ``timeout`` seconds) or ``"error"`` (could not start,
        e.g. permission denied).
    :ivar returncode: the exit status, or ``None`` when the program did not finish.
    :ivar stdout: standard output decoded as UTF-8 (invalid bytes replaced); ``""`` if none.
    :ivar stderr: standard error, likewise.
    :ivar detail: a one-line human explanation for any status but ``"ok"``.
    """

    argv: tuple[str, ...]
    status: Status
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        """``True`` when the command exited with status 0."""
        return self.status == "ok"


Runner = Callable[..., RunResult]

# The children running now (each leads its own process group), so that Ctrl-C can end them
# at once, and a flag that stops new ones from starting once cancelled.
_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()
_CANCELLED = threading.Event()
# The thread that handles the interrupt and carries on (a library caller that caught
# KeyboardInterrupt): :func:`cancel_all` with ``spare_caller`` leaves its later commands alone.
_SPARED: set[int] = set()


def cancel_all(*, spare_caller: bool = False) -> None:
    """Kill the process group of every command :func:`run` is waiting on, and make later calls
    return ``status="error"`` ("cancelled") without starting anything — for Ctrl-C.

    :param spare_caller: later commands of the calling thread still run (the caller handles the
        interrupt and goes on, while its abandoned worker threads must start nothing more until
        :func:`resume`).
    """
    with _LIVE_LOCK:
        if spare_caller:
            _SPARED.add(threading.get_ident())
        else:
            _SPARED.clear()
    _CANCELLED.set()
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def resume() -> None:
    """Allow :func:`run` to start commands again after :func:`cancel_all`."""
    _CANCELLED.clear()
    with _LIVE_LOCK:
        _SPARED.clear()


def _cancelled() -> bool:
    """Whether a command started now from this thread is cancelled."""
    return _CANCELLED.is_set() and threading.get_ident() not in _SPARED


def run(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input_text: str | None = None,
) -> RunResult:
    """Run ``argv`` (no shell) and capture its output.

    :param argv: program and arguments; the program is looked up on ``env["PATH"]`` when it has
        no slash (``os.environ`` when ``env`` is ``None``).
    :param timeout: seconds after which the process is killed; the result is then ``"timeout"``.
    :param env: the complete environment of the child, or ``None`` to inherit envlock's.
    :param cwd: working directory of the child.
    :param input_text: text written to the child's stdin (stdin is ``/dev/null`` otherwise).
    :returns: a :class:`RunResult`; this function does not raise for failures of the command.
    """
    args = tuple(str(a) for a in argv)
    if _cancelled():
        return RunResult(argv=args, status="error", detail=f"{args[0]}: cancelled")
    try:
        # A new session, so that on timeout the whole process group (a shell script's
        # children included) is killed and cannot keep our pipes open.
        proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError:
        return RunResult(argv=args, status="absent", detail=f"{args[0]}: command not found")
    except OSError as exc:
        return RunResult(argv=args, status="error", detail=f"{args[0]}: {exc.strerror or exc}")
    with _LIVE_LOCK:
        _LIVE.add(proc)
    if _cancelled():
        _kill_group(proc)
    try:
        stdout, stderr = proc.communicate(
            input=input_text.encode() if input_text is not None else None, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return RunResult(
            argv=args, status="timeout", detail=f"{args[0]}: no answer within {timeout:g} s"
        )
    except ValueError:  # pipes closed by a cancel
        return RunResult(argv=args, status="error", detail=f"{args[0]}: cancelled")
    except BaseException:
        # Ctrl-C reaches only envlock: the child runs in its own session, so end it too.
        _kill_group(proc)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    if _cancelled() and proc.returncode is not None and proc.returncode < 0:
        return RunResult(argv=args, status="error", detail=f"{args[0]}: cancelled")
    out = stdout.decode("utf-8", "replace")
    err = stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        last = (err.strip().splitlines() or out.strip().splitlines() or [""])[-1]
        return RunResult(
            argv=args,
            status="failed",
            returncode=proc.returncode,
            stdout=out,
            stderr=err,
            detail=f"{args[0]} exited with status {proc.returncode}" + (f": {last}" if last else ""),
        )
    return RunResult(argv=args, status="ok", returncode=0, stdout=out, stderr=err)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s whole process group and reap it, without waiting on its pipes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None:
            stream.close()
    try:
        proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        pass
