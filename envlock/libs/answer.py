"""A cache of whole ``envlock libs`` answers, valid exactly while their inputs are unchanged.

The loader model reads many things: directory listings (is there a ``libfoo.so.1`` in each
search directory?), ELF headers, ``ld.so.cache``, RECORD files, ``conda-meta``, dpkg lists,
``torch/__init__.py``.  While an answer is computed, :class:`InputTracer` records every path
it lists, stats or opens, with a signature (inode, size, modification time; ``None`` for a
path that did not exist).  The answer is kept by :mod:`envlock.cache` with those paths as
witnesses and returned only while every one of them is unchanged, so a new file in a search directory (the directory's
mtime changes), a replaced library, an upgraded package or a new ``ld.so.cache`` all force a
fresh computation.  Everything that is not a file — the command line, ``LD_LIBRARY_PATH`` and
the other variables, the working directory, the CPU's flags, envlock's own code — is part of
the key.

This exists for speed (the answer is then printed without loading the loader model); it is
used only by the command line, never with ``--runtime``, and ``--no-cache`` bypasses it.
"""

from __future__ import annotations

import builtins
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["InputTracer", "answer_entry"]

#: Environment variables that change an answer.
KEY_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE",
            "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "CONDA_PREFIX", "VIRTUAL_ENV", "PATH", "HOME")


def _sig(path: str, *, follow: bool = True) -> list[int] | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode]


class InputTracer:
    """Record the paths a block of code lists, stats and opens (single-threaded use only).

    :param ignore: path prefixes not to record (envlock's own cache; ``/proc``, ``/dev`` and
        ``/sys`` are never recorded).
    """

    def __init__(self, ignore: Sequence[str] = ()) -> None:
        self.ignore = (*(d.rstrip("/") + "/" for d in ignore), "/proc/", "/dev/", "/sys/")
        # The ignored directories themselves and their parents: creating the cache
        # directory changes them, and they say nothing about the answer.
        self.ignore_exact: set[str] = set()
        for d in ignore:
            d = d.rstrip("/")
            while d:
                self.ignore_exact.add(d)
                d = os.path.dirname(d) if d != "/" else ""
        self.inputs: dict[str, tuple[bool, list[int] | None]] = {}
        self._stat = os.stat
        self._lstat = os.lstat

    def _note(self, path: Any, follow: bool = True) -> None:
        if isinstance(path, int):
            return
        try:
            p = os.fsdecode(path)
        except TypeError:
            return
        if not p.startswith("/"):
            p = os.path.join(os.getcwd(), p)
        if p.startswith(self.ignore) or p in self.inputs or p in self.ignore_exact:
            return
        try:
            st = self._stat(p) if follow else self._lstat(p)
            sig: list[int] | None = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode]
        except (OSError, ValueError):
            sig = None
        self.inputs[p] = (follow, sig)

    @contextmanager
    def active(self) -> Iterator[InputTracer]:
        """Patch ``os.listdir``/``scandir``/``stat``/``lstat`` and ``open`` while inside."""
        real_listdir, real_scandir, real_open = os.listdir, os.scandir, builtins.open
        real_stat, real_lstat = self._stat, self._lstat = os.stat, os.lstat
        note = self._note

        def listdir(path: Any = ".") -> Any:
            note(path)
            return real_listdir(path)

        def scandir(path: Any = ".") -> Any:
            note(path)
            return real_scandir(path)

        def stat(path: Any, *a: Any, **k: Any) -> Any:
            note(path, follow=k.get("follow_symlinks", True))
            return real_stat(path, *a, **k)

        def lstat(path: Any, *a: Any, **k: Any) -> Any:
            note(path, follow=False)
            return real_lstat(path, *a, **k)

        def open_(file: Any, *a: Any, **k: Any) -> Any:
            note(file)
            return real_open(file, *a, **k)

        os.listdir, os.scandir, os.stat, os.lstat = listdir, scandir, stat, lstat  # type: ignore[assignment]
        builtins.open = open_  # type: ignore[assignment]
        try:
            yield self
        finally:
            os.listdir, os.scandir, os.stat, os.lstat = (  # type: ignore[assignment]
                real_listdir, real_scandir, real_stat, real_lstat)
            builtins.open = real_open


def _code_stamp() -> list[Any]:
    """envlock's version and the signature of every module file (code changes invalidate)."""
    from envlock._version import __version__

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out: list[Any] = [__version__]
    for base, _dirs, files in os.walk(pkg):
        for name in sorted(files):
            if name.endswith(".py"):
                p = os.path.join(base, name)
                out.append([p, _sig(p)])
    return out


def _cpu_key() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return ""
    keep = [line for line in text.splitlines()[:40] if line.startswith(("flags", "vendor_id"))]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:16]


def answer_entry(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The cache file (:mod:`envlock.cache`, namespace ``libs-answers``) of an
    ``envlock libs`` run, keyed by its arguments, variables, cwd, CPU, user and envlock's code.
    Store the answer there with :func:`envlock.cache.store`, the traced inputs as witnesses."""
    from envlock.cache import entry_path

    ident = {
        "argv": list(argv),
        "env": {k: environ.get(k) for k in KEY_VARS},
        "cwd": os.getcwd(),
        "cpu": _cpu_key(),
        "code": _code_stamp(),
        "uid": os.getuid(),
    }
    return entry_path("libs-answers", ident, environ)
