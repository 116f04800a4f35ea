"""The process tree of a run, read from ``/proc`` (proc(5)).

* children: ``/proc/<pid>/task/<tid>/children`` (every thread's list: a child is listed under
  the thread that forked it; Linux ≥ 3.5 with ``CONFIG_PROC_CHILDREN``), else a scan of
  ``/proc/*/stat`` for the parent pid (field 4);
* resident set: ``/proc/<pid>/statm`` field 2 (pages) × the page size;
* identity: ``/proc/<pid>/stat`` field 22 (start time in clock ticks since boot), so that a pid
  reused by an unrelated process is never mistaken for one of the run's;
* command line: ``/proc/<pid>/cmdline`` (NUL-separated), URL credentials removed.

``envlock run`` makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, prctl(2)),
so a process whose parent exits is re-parented to envlock instead of init: the whole tree,
orphans included, stays below envlock's pid.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from envlock.redact import redact_text_urls

__all__ = ["PAGE", "children", "descendants", "rss", "start_time", "cmdline", "alive",
           "set_subreaper", "terminate"]

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_HAS_CHILDREN_FILE: bool | None = None


def set_subreaper() -> bool:
    """Make this process the child subreaper of its descendants; ``False`` when the kernel (or
    libc) does not offer it (Linux ≥ 3.4)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (empty when it is gone)."""
    global _HAS_CHILDREN_FILE  # probed once per process
    if _HAS_CHILDREN_FILE is None:
        _HAS_CHILDREN_FILE = os.path.exists(f"/proc/self/task/{os.getpid()}/children")
    if not _HAS_CHILDREN_FILE:
        return _children_by_scan(pid)
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            out.extend(int(x) for x in text.split())
    return out


def _children_by_scan(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _read(f"/proc/{name}/stat")
            if stat:
                fields = stat.rsplit(")", 1)[-1].split()
                if len(fields) > 1 and fields[1] == str(pid):
                    out.append(int(name))
    return out


def descendants(pids: Iterable[int]) -> list[int]:
    """``pids`` and everything below them, breadth first (each pid once)."""
    seen: dict[int, None] = {}
    todo = list(pids)
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen[p] = None
        todo.extend(children(p))
    return list(seen)


def rss(pid: int) -> int | None:
    """Resident set size of ``pid`` in bytes; ``None`` when it is gone (a zombie has 0)."""
    text = _read(f"/proc/{pid}/statm")
    if not text:
        return None
    parts = text.split()
    return int(parts[1]) * PAGE if len(parts) > 1 else None


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot (``/proc/<pid>/stat`` field 22)."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); field 22 is fields[19]
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def boot_id() -> str | None:
    """This boot's id (``/proc/sys/kernel/random/boot_id``, random(4)); ``None`` unreadable."""
    text = _read("/proc/sys/kernel/random/boot_id")
    return text.strip() or None if text else None


def state(pid: int) -> str | None:
    """The state letter of ``pid`` (``R``, ``S``, ``Z`` …), ``None`` when gone."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def cmdline(pid: int, limit: int = 300) -> str:
    """The command line of ``pid`` as one string (arguments joined by spaces, URL credentials
    removed, at most ``limit`` characters); ``[comm]`` for kernel-less or gone processes."""
    raw = _read(f"/proc/{pid}/cmdline")
    if raw:
        text = " ".join(a for a in raw.split("\0") if a)
    else:
        comm = (_read(f"/proc/{pid}/comm") or "?").strip()
        text = f"[{comm}]"
    text = redact_text_urls(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` still runs and is the same process (same start time); zombies are not
    alive."""
    st = state(pid)
    if st is None or st in ("Z", "X"):
        return False
    return started is None or start_time(pid) == started


def terminate(pids: dict[int, int | None], grace: float) -> dict[int, str]:
    """SIGTERM each of ``pids`` (pid → start time), SIGKILL those still alive after ``grace``
    seconds, reaping any that are envlock's children.

    :returns: pid → ``"killed"`` (it was signalled and is gone) or ``"gone"`` (it had ended
        before it was signalled); a process that survives SIGKILL (uninterruptible sleep) is
        ``"killed"`` too, as nothing more can be done.
    """
    out: dict[int, str] = {}
    for pid, started in pids.items():
        if not alive(pid, started):
            out[pid] = "gone"
            continue
        try:
            os.kill(pid, signal.SIGTERM)
            out[pid] = "killed"
        except ProcessLookupError:
            out[pid] = "gone"
    deadline = time.monotonic() + grace
    pending = [p for p, v in out.items() if v == "killed"]
    while pending and time.monotonic() < deadline:
        reap()
        pending = [p for p in pending if alive(p, pids[p])]
        if pending:
            time.sleep(0.05)
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + 2.0
    while pending and time.monotonic() < end:
        reap()
        pending = [p for p in pending if alive(p, pids[p])]
        if pending:
            time.sleep(0.02)
    reap()
    return out


def reap() -> None:
    """Collect every exited child of this process (re-parented orphans become envlock's
    children under the subreaper and must be waited for)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
