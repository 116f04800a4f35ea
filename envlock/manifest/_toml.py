"""Reading and writing manifest files: the only module that touches TOML/JSON text.

TOML is read with :mod:`tomllib` (``tomli`` before Python 3.11) and written with ``tomli_w``;
JSON with :mod:`json` (sorted as the model orders it, two-space indent).  Writing is atomic:
a temporary file in the destination directory, ``fsync``, then ``os.replace``, so a killed
job never leaves a half-written manifest.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from envlock.errors import ManifestError, OutputExistsError

__all__ = ["read_text", "loads", "load_file", "dumps", "atomic_write"]


def _tomllib() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415

        return tomllib
    import tomli  # noqa: PLC0415

    return tomli


def loads(text: str, *, name: str = "<string>") -> dict[str, Any]:
    """Parse TOML or JSON text (JSON when it starts with ``{``).

    :param name: file name used in error messages.
    :raises ManifestError: malformed text, with the parser's reason.
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{name}: malformed JSON ({exc})") from None
        except RecursionError:
            raise ManifestError(f"{name}: malformed JSON (nested too deeply)") from None
        if not isinstance(data, dict):
            raise ManifestError(f"{name}: top level is not an object")
        return data
    tomllib = _tomllib()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{name}: malformed TOML ({exc})") from None
    except RecursionError:
        raise ManifestError(f"{name}: malformed TOML (nested too deeply)") from None


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file that must not be empty.

    :raises ManifestError: missing, not a regular file (a FIFO, a device, a directory), larger
        than 64 MiB, unreadable, not UTF-8, or empty (one line naming the file).
    """
    from envlock._io import InputError  # noqa: PLC0415
    from envlock._io import read_text as read_bounded  # noqa: PLC0415

    p = Path(path)
    try:  # regular files only, at most 64 MiB, strict UTF-8 (envlock._io)
        text = read_bounded(p)
    except InputError as exc:
        if "invalid UTF-8" in str(exc):  # the wording manifests and --kb files always had
            raise ManifestError(f"{p}: not a text file (invalid UTF-8)") from None
        raise ManifestError(str(exc)) from None
    if not text.strip():
        raise ManifestError(f"{p}: empty file")
    return text


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse a TOML/JSON file.

    :raises ManifestError: the file cannot be read, is not UTF-8, is empty or is malformed.
    """
    return loads(read_text(path), name=str(Path(path)))


def dumps(data: dict[str, Any], fmt: str = "toml") -> str:
    """Serialize ``data`` as ``"toml"`` or ``"json"``; key order is kept as given."""
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt != "toml":
        raise ValueError(f"unknown format {fmt!r} (expected 'toml' or 'json')")
    import tomli_w  # noqa: PLC0415 - only needed when writing TOML

    return tomli_w.dumps(data, multiline_strings=False)


def atomic_write(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` to ``path`` atomically.

    A symbolic link is written through (its target is replaced, the link kept).  A path that
    exists but is not a regular file (``/dev/stdout``, a FIFO, a device) is written to directly,
    with ``--force`` only: it cannot be replaced by a rename.

    :raises OutputExistsError: ``path`` exists and ``force`` is false.
    :raises OSError: the directory is not writable, the disk is full, …
    """
    if path.exists() or path.is_symlink():
        if not force:
            raise OutputExistsError(f"{path} exists; use --force to replace it")
        if path.is_symlink():
            path = Path(os.path.realpath(path))
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
            return
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
