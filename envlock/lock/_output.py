"""What a lock produced, and writing it: all files or none.

Every lockfile's text is computed before the first one is written, then each is written
atomically (temporary file, fsync, rename; :func:`envlock._io.write_file`), so a failed
solve or an interrupted job never leaves a partial lockfile behind.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.lock._pip import Skipped, validate_pylock
from envlock._io import check_writable, write_file
from envlock.errors import LockError
from envlock.probes.pip import canonicalize

__all__ = ["LockResult", "write_all", "pylock_text"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LockResult:
    """The outcome of one ``envlock lock``.

    :ivar files: the lockfiles written, in the order written.
    :ivar skipped: packages that are in no lockfile, each with its reason.
    :ivar notes: one line per fact the user should know (where index options came from,
        stale conda records, which solver ran).
    """

    files: tuple[Path, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()


def write_all(texts: Mapping[Path, str], *, force: bool = False) -> tuple[Path, ...]:
    """Write several files, refusing before the first write if any exists (without ``force``).

    :raises OutputExistsError: one of the paths exists and ``force`` is false, or is a
        symbolic link (never written through, even with ``force``: :func:`envlock._io.write_file`).
    :raises OSError: a directory is not writable.
    :returns: the paths written.
    """
    for path in texts:  # before the first write: a link planted at any of them, or (without
        check_writable(path, force=force)  # force) an existing file, stops them all
    for path, text in texts.items():
        write_file(path, text, force=True)
    return tuple(texts)


def pylock_text(
    uv_output: str,
    *,
    tool: Mapping[str, Any],
    header: str,
    expected: Mapping[str, str] | None = None,
) -> str:
    """Add envlock's ``[tool.envlock]`` table to uv's pylock.toml, check it, and serialize it.

    :param uv_output: the pylock.toml text uv wrote.
    :param tool: the ``[tool.envlock]`` table (how the lock was made, what was left out).
    :param header: comment lines put at the top (without ``#``).
    :param expected: normalized name → version that must be in the lock (a freeze).
    :raises LockError: uv locked a different version than the one installed.
    :raises ManifestError: packaging's PEP 751 parser rejects the result.
    :returns: the TOML text.
    """
    import tomli_w

    from envlock.manifest._toml import loads

    data = loads(uv_output, name="uv's pylock.toml")
    if expected:
        got = {canonicalize(p["name"]): p.get("version") for p in data.get("packages", [])}
        wrong = [
            f"{name} {version} (uv locked {got.get(name) or 'nothing'})"
            for name, version in expected.items()
            if not _same_version(got.get(name), version)
        ]
        if wrong:
            raise LockError("uv did not lock the installed versions of: " + ", ".join(wrong))
    data.setdefault("tool", {})["envlock"] = dict(tool)
    validate_pylock(data)
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lines + tomli_w.dumps(data)


def _same_version(a: str | None, b: str) -> bool:
    if a is None:
        return False
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def now() -> str:
    """UTC time, ISO-8601 with ``Z``, to the second."""
    stamp = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    return stamp.isoformat().replace("+00:00", "Z")
