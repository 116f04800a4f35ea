"""A cache of whole ``envlock libs`` answers, valid exactly while their inputs are unchanged.

The loader model reads many things: directory listings (is there a ``libfoo.so.1`` in each
search directory?), ELF headers, ``ld.so.cache``, RECORD files, ``conda-meta``, dpkg lists,
``torch/__init__.py``.  Each report it produces says what it read (every object loaded, every
file tried and its directory); the command records those explicitly
(:func:`envlock.libs.cachekey.record_report`), together with the target interpreter's answer,
whose own inputs are inherited (:func:`envlock.cache.memo` nests).  Everything that is not a
file — the command line, ``LD_LIBRARY_PATH`` and the other variables, the working directory,
the CPU's flags, the user, envlock's own code — is part of the key (:func:`answer_key`).

This exists for speed (the answer is then printed without loading the loader model); it is
used only by the command line, never with ``--runtime``, and ``--no-cache`` (or
``ENVLOCK_NO_CACHE=1``) bypasses it.  An answer printed with a warning is not kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from envlock.cache import Recorder
from envlock import cache as _cache

__all__ = ["KEY_VARS", "NAMESPACE", "answer_key", "memo_answer"]

#: The namespace of :func:`envlock.cache.memo` the answers are kept in.
NAMESPACE = "libs-answers"

#: Environment variables that change an answer: the loader's (``LD_*``, ``GLIBC_TUNABLES``),
#: the interpreter's (``PYTHON*``, ``HOME``), and those that choose the target.
KEY_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "LD_ASSUME_KERNEL", "LD_HWCAP_MASK",
            "GLIBC_TUNABLES", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE",
            "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "CONDA_PREFIX", "VIRTUAL_ENV", "PATH", "HOME")


def answer_key(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """The key of an ``envlock libs`` run: its arguments, the :data:`KEY_VARS` and every other
    ``LD_*``/``PYTHON*`` variable, the working directory, the CPU's flags and the user."""
    from envlock.libs.cachekey import cpu_key

    names = set(KEY_VARS) | {k for k in environ if k.startswith(("LD_", "PYTHON"))}
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    return {
        "argv": list(argv),
        "env": {k: environ.get(k) for k in sorted(names)},
        "cwd": cwd,
        "cpu": cpu_key(),
        "uid": os.getuid(),
        "euid": os.geteuid(),
    }


def memo_answer(
    argv: Sequence[str], environ: Mapping[str, str],
    compute: Callable[[Recorder], tuple[str, str, int]], *, enabled: bool = True,
) -> tuple[str, str, int]:
    """``(stdout, stderr, exit status)`` of an ``envlock libs`` run, kept by
    :func:`envlock.cache.memo` under :func:`answer_key`; ``compute`` records its inputs through
    the recorder it is given.  An answer with anything on stderr is not kept."""
    def run(rec: Recorder) -> tuple[str, str, int]:
        out, err, code = compute(rec)
        if err:
            rec.uncacheable("warnings on stderr")
        return out, err, code

    def decode(v: Any) -> tuple[str, str, int]:
        if not (isinstance(v, dict) and isinstance(v.get("stdout"), str) and isinstance(v.get("exit"), int)):
            raise ValueError("bad entry")
        return v["stdout"], "", v["exit"]

    return _cache.memo(NAMESPACE, answer_key(argv, environ), run, enabled=enabled, environ=environ,
                       encode=lambda r: {"stdout": r[0], "exit": r[2]}, decode=decode)
