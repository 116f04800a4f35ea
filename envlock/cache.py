"""A small on-disk cache of computed answers, valid while the files they were computed from
are unchanged.

An entry holds a JSON payload and its *witnesses*: paths with their signature
``(st_dev, st_ino, st_size, st_mtime_ns)`` — ``None`` for a path that did not exist — taken
when the answer was computed.  :func:`load` returns the payload only while every witness still
has the same signature (a new file in a witnessed directory changes the directory's mtime),
so a cached answer is never older than its inputs.  A file rewritten in place within the
file system's timestamp granularity, keeping size and inode, would be missed; envlock accepts
that for answers that only save time (the loader model's results, a library's GPU
architectures).

Entries live under ``$XDG_CACHE_HOME/envlock/<namespace>/`` (``~/.cache`` by default), one
JSON file per key, written atomically.  Any problem reading or writing the cache is ignored:
the caller computes the answer instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["signature", "cache_dir", "entry_path", "load", "store"]


def signature(path: str) -> list[int] | None:
    """``[st_dev, st_ino, st_size, st_mtime_ns]`` of ``path`` (following links), or ``None``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def cache_dir(namespace: str, environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/envlock/<namespace>`` (``~/.cache/envlock/<namespace>`` by default)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envlock", namespace)


def entry_path(namespace: str, key: Any, environ: Mapping[str, str] | None = None) -> str:
    """The file of the entry for ``key`` (any JSON-serializable value) in ``namespace``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(namespace, environ), f"{digest}.json")


def load(path: str) -> Any | None:
    """The payload stored at ``path`` if every witness is unchanged, else ``None``."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if any(signature(p) != sig for p, sig in data["witness"]):
            return None
        return data["payload"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(path: str, witnesses: Iterable[str], payload: Any) -> None:
    """Store ``payload`` with the current signatures of ``witnesses``; errors are ignored."""
    import tempfile  # noqa: PLC0415

    data = {"witness": [[p, signature(p)] for p in sorted(set(witnesses))], "payload": payload}
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
