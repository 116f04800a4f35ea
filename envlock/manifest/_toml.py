"""Reading and writing manifest files: the only module that touches TOML/JSON text.

TOML is read with :mod:`tomllib` (``tomli`` before Python 3.11) and written with ``tomli_w``;
JSON with :mod:`json` (sorted as the model orders it, two-space indent).  Writing is atomic
and, without ``force``, create-or-fail (:func:`atomic_write`): a killed job never leaves a
half-written manifest nor a temporary file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from envlock.errors import ManifestError
from envlock.redact import redact_tree

__all__ = ["atomic_write", "dumps", "load_file", "loads", "read_text"]


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


#: the tables that describe an environment (a run record alone has none of them)
_ENVIRONMENT_TABLES = ("python", "pip", "conda", "platform", "cpu")


def with_run_environment(data: dict[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run record (``run.toml`` of ``envlock run``: ``[envlock]``, ``[target]``, ``[run]``)
    with the environment tables of the manifest it names (``[run] manifest``, beside it) added,
    when that file still has the ``manifest-sha256`` the record holds; ``data`` unchanged
    otherwise.  The record's own tables win.  ``show`` and ``diff`` of a run record then see
    the environment the run ran in.
    """
    run = data.get("run")
    if not isinstance(run, dict) or any(k in data for k in _ENVIRONMENT_TABLES):
        return data
    ref = run.get("manifest")
    if not isinstance(ref, str) or not ref or os.path.isabs(ref) or ".." in Path(ref).parts:
        return data
    sibling = Path(path).parent / ref
    try:
        raw = read_text(sibling)
    except (OSError, ValueError):
        return data
    import hashlib  # noqa: PLC0415

    want = run.get("manifest-sha256")
    if isinstance(want, str) and hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest() != want:
        return data  # changed since the run: not the environment the run ran in
    try:
        env = loads(raw, name=str(sibling))
    except ValueError:
        return data
    merged = {k: v for k, v in env.items() if k not in data}
    return {**data, **merged}


def dumps(data: dict[str, Any], fmt: str = "toml") -> str:
    """Serialize ``data`` as ``"toml"`` or ``"json"``; key order is kept as given.

    Every string passes :func:`envlock.redact.redact_tree` first (secrets out, undecodable
    bytes as ``\\xNN``): whatever a probe missed, no secret reaches a manifest file.
    """
    data = redact_tree(data)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt != "toml":
        raise ValueError(f"unknown format {fmt!r} (expected 'toml' or 'json')")
    import tomli_w  # noqa: PLC0415 - only needed when writing TOML

    return tomli_w.dumps(data, multiline_strings=False)


def atomic_write(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; without ``force``, create-or-fail.

    :func:`envlock._io.write_file` with ``special=True``, the one safe-write path (see there):
    a symbolic link at ``path`` is refused even with ``force`` (never written through); with
    ``force`` an existing FIFO or character device (``-o /dev/full``) is written into.

    :raises OutputExistsError: ``path`` exists and ``force`` is false, or it is a symbolic link.
    :raises OSError: the directory is not writable; the disk is full — naming inodes when the
        file system has none left (``statvfs`` ``f_favail``) — with ``filename`` the output path.
    """
    from envlock._io import write_file  # noqa: PLC0415

    write_file(path, text, force=force, special=True)
