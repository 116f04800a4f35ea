"""The walk of ``envlock find``: every ``.toml``/``.json`` file under some roots, with its stat
signature, and why one that is no readable regular file is skipped.

The walk never opens a file: it tells a FIFO, a socket or a device (which a read could block
on) and a file over :data:`envlock._io.MAX_INPUT_BYTES` from its ``stat`` alone, so such a file
is reported (one line, "skipped", with why) and never read.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Iterator

__all__ = ["walk", "SKIP_DIRS"]

#: directories never entered (version control, caches, virtual environments).
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv"})


@functools.lru_cache(maxsize=1)
def _max_bytes() -> int:
    from envlock._io import MAX_INPUT_BYTES

    return MAX_INPUT_BYTES


def _why(path: str, st: os.stat_result) -> str | None:
    """Why a file of this ``stat`` is not read, or ``None``: for a file that is not regular or
    is over the limit, :func:`envlock._io.read_bytes`'s own reason (it opens non-blocking and
    refuses from ``fstat`` before reading a byte, so a FIFO never waits)."""
    if stat.S_ISREG(st.st_mode) and st.st_size <= _max_bytes():
        return None
    from envlock._io import InputError, one_line, read_bytes

    try:
        read_bytes(path)
    except InputError as exc:
        msg, shown = str(exc), one_line(path)
        return msg[len(shown) + 2:] if msg.startswith(shown + ": ") else msg
    return None  # it became a readable file meanwhile: read it


def _sig(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def walk(roots: Iterable[str]) -> Iterator[tuple[str, list[int] | None, str | None]]:
    """``(path, signature, why)`` of every ``.toml``/``.json`` file under ``roots`` (symbolic
    links to files followed, to directories not: no loops; a dangling link is no file), sorted
    within each directory.

    ``signature`` is :func:`envlock.cache.signature`'s (``None`` when the file cannot be
    stat'ed); ``why`` is ``None`` for a regular file to read, else the one-line reason it is
    skipped (``"is a FIFO (named pipe), not a regular file"``, ``"too large (…)"``,
    ``"cannot stat (Permission denied)"``).  A root that is a file is yielded as itself.
    """
    stack: list[str] = []
    for root in (os.path.abspath(r) for r in roots):
        try:
            st = os.stat(root)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            stack.append(root)
        else:
            yield root, _sig(st), _why(root, st)
    stack.reverse()
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in SKIP_DIRS:
                        subdirs.append(e.path)
                    continue
            except OSError:
                continue
            if not e.name.endswith((".toml", ".json")):
                continue
            try:
                st = e.stat()
            except FileNotFoundError:
                continue  # a dangling link, or gone meanwhile
            except OSError as exc:
                yield e.path, None, f"cannot stat ({exc.strerror})"
                continue
            yield e.path, _sig(st), _why(e.path, st)
        stack.extend(reversed(subdirs))
