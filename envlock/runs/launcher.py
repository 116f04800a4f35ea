"""How ``envlock run`` starts CMD: through a small shell, so that CMD's max RSS is its own, and
the reporter that hands CMD's status and usage back."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["SHELL", "launcher", "reported"]

#: the shell that starts CMD (see :func:`launcher`).
SHELL = "/bin/sh"
#: the launcher script: ``$1`` the usage file, ``$2`` the Python that reports, then CMD.  The
#: traps keep the shell alive through signals sent to the whole group or step (Slurm signals
#: every process of a step); a trapped signal is reset to its default in the subshell, one
#: ignored when envlock started stays ignored there (POSIX ``trap``), so CMD sees the
#: dispositions envlock had.  ``(exec "$@")`` runs CMD as a program (never a shell builtin),
#: forked from the shell; its ``$?`` and the shell's RUSAGE_CHILDREN (CMD and what it waited
#: for, nothing else) are written by the reporter, which then exits with that status.
#: The shell's own stderr is ``/dev/null`` (dash prints "Segmentation fault" for a child a
#: signal ended, buffered until it exits); CMD and the reporter get the real one back from
#: descriptor ``{fd}``, a number no descriptor envlock inherited uses, closed for them.
_SCRIPT = ('trap : HUP INT QUIT TERM USR1 USR2 ALRM PIPE VTALRM PROF XCPU XFSZ; '
           'u=$1; py=$2; shift 2; exec {fd}>&2 2>/dev/null; (exec "$@" 2>&{fd} {fd}>&-); '
           'exec "$py" -S -I -c "$0" "$u" "$?" 2>&{fd} {fd}>&-')
_SCRIPT_NO_STDERR = ('trap : HUP INT QUIT TERM USR1 USR2 ALRM PIPE VTALRM PROF XCPU XFSZ; '
                     'u=$1; py=$2; shift 2; (exec "$@"); exec "$py" -S -I -c "$0" "$u" "$?"')
_REPORT = ("import resource, sys\n"
           "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "with open(sys.argv[1], 'w') as f:\n"
           "    f.write(f'{sys.argv[2]} {r.ru_maxrss} {r.ru_utime} {r.ru_stime}\\n')\n"
           "sys.exit(int(sys.argv[2]))\n")


def launcher(command: Sequence[str], usage_file: str) -> list[str]:
    """The argv that starts ``command``: through :data:`SHELL`, so that its max RSS is its own.

    Why: the kernel's ``ru_maxrss`` of a process counts every address space it had, and a
    process forked (or vforked, as CPython's ``subprocess`` does) from envlock starts in a copy
    of envlock's (~30 MB): ``exec`` then records that copy's high-water mark (Linux
    ``fs/exec.c``, ``exec_mmap``: ``setmax_mm_hiwater_rss``).  GNU time forks from its own
    small process; envlock does the same through ``/bin/sh`` (a few hundred KiB), whose
    ``RUSAGE_CHILDREN`` is read by the reporter it ``exec``\\ s after CMD ends.

    The program is looked up first, as ``execvp`` looks it up (``PATH``), so that a CMD that
    cannot be started still fails here with the ``OSError`` ``subprocess`` would raise.
    Without ``/bin/sh`` the command is started directly (its max RSS then includes envlock's).

    :raises FileNotFoundError: the program is not found; ``PermissionError``: not executable.
    """
    import shutil

    prog = command[0]
    path = prog if "/" in prog else shutil.which(prog, mode=os.F_OK) or ""
    if not path or not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", prog)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(13, "Permission denied", prog)
    free = [n for n in range(3, 10) if not _is_open(n)]  # the shell's redirections: 0-9
    if not os.access(SHELL, os.X_OK) or not free:
        return list(command)
    script = _SCRIPT.format(fd=free[-1])
    if not _inherited(2):  # stderr closed for CMD (``2>&-``, envlock._io.null_closed_streams)
        script = _SCRIPT_NO_STDERR
    return [SHELL, "-c", script, _REPORT, usage_file, sys.executable, *command]


def _inherited(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:
        return False


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class _Usage:
    """The ``ru_maxrss``, ``ru_utime``, ``ru_stime`` the reporter wrote (KiB, seconds)."""

    def __init__(self, maxrss: int, utime: float, stime: float) -> None:
        self.ru_maxrss, self.ru_utime, self.ru_stime = maxrss, utime, stime


def reported(usage_file: str, status: int, usage: Any) -> tuple[int, Any]:
    """CMD's wait status and usage from the launcher's reporter (:func:`launcher`).

    ``$?`` is the shell's: ``128 + n`` for a CMD ended by signal ``n`` (POSIX "Exit Status for
    Commands"), read back as that signal.  When the shell itself ended by a signal (SIGKILL to
    the whole step: Slurm's KillWait, the over-memory kill) there is no report: its own status
    stands, and the max RSS is not known (``None``) rather than envlock's."""
    try:
        with open(usage_file, encoding="ascii") as f:
            code_s, rss_s, ut_s, st_s = f.read().split()
        code, rss, ut, st = int(code_s), int(rss_s), float(ut_s), float(st_s)
    except (OSError, ValueError):
        return status, _Usage(0, usage.ru_utime, usage.ru_stime)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(usage_file)
    if 128 < code < 128 + 65 and code - 128 in set(map(int, signal.Signals)):
        wait_status = code - 128  # WIFSIGNALED, WTERMSIG = n
    else:
        wait_status = (code & 0xFF) << 8  # WIFEXITED, WEXITSTATUS = code
    return wait_status, _Usage(rss, ut, st)


