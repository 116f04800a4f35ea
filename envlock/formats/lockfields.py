"""The fields of a project lock's entry that become a command line or a download check: its
``version``, its hashes and (uv) its registry, checked when the lock is read.

A lock from elsewhere is data (docs/trust.md): a version that is not PEP 440, a hash that is no
digest or a registry of another URL scheme is refused here, with one line naming the entry
(``package[5] (blinker).version``), not at restore with a message about a converted file.
uv (``uv-resolver``'s ``Lock`` deserializer), pdm and poetry refuse such values themselves
(each parses ``version`` with PEP 440 and hashes as ``<algorithm>:<hex>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock._io import one_line
from envlock._untrusted import check_hash, check_location, check_version
from envlock.formats.locks import _packages

__all__ = ["lock_entries", "check_entry_fields"]


def _label(p: Mapping[str, Any], where: str) -> str:
    pname = p.get("name")
    return f"{where} ({one_line(pname, 80)})" if isinstance(pname, str) else where


def check_entry_fields(p: Mapping[str, Any], where: str, name: str) -> None:
    """Check one ``[[package]]`` of a uv.lock, poetry.lock or pdm.lock: ``version`` (when it
    has one: a uv.lock's dynamic or virtual project may not) is PEP 440; each ``hash`` of its
    ``sdist``, ``wheels`` and ``files`` is ``<algorithm>:<hex>`` of the algorithm's length;
    a uv ``source.registry`` is an http/https/file URL or a path.

    :raises ManifestError: the first field that is not (``<name>: <where>.<key>: …``).
    """
    at = f"{name}: {_label(p, where)}"
    if isinstance(p.get("version"), str):
        check_version(p["version"], f"{at}.version")
    source = p.get("source")
    if isinstance(source, Mapping) and "registry" in source:
        check_location(source["registry"], f"{at}.source.registry")
    files: list[tuple[str, Any]] = []
    if isinstance(p.get("sdist"), Mapping):
        files.append(("sdist", p["sdist"]))
    for key in ("wheels", "files"):
        if isinstance(p.get(key), list):
            files += [(f"{key}[{j}]", f) for j, f in enumerate(p[key])]
    for key, f in files:
        if isinstance(f, Mapping) and "hash" in f:
            check_hash(f["hash"], f"{at}.{key}.hash")


def lock_entries(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    """The ``[[package]]`` tables of a uv.lock, poetry.lock or pdm.lock, each checked by
    :func:`check_entry_fields`, and a poetry lock-version 1 ``[metadata.files]``'s hashes.

    :raises ManifestError: not an array of tables, or a field :func:`check_entry_fields`
        refuses.
    """
    entries = _packages(data, "package", name)
    for i, p in enumerate(entries):
        check_entry_fields(p, f"package[{i}]", name)
    meta = data.get("metadata")
    files = meta.get("files") if isinstance(meta, Mapping) else None
    for pname, listed in (files.items() if isinstance(files, Mapping) else ()):
        for j, f in enumerate(listed if isinstance(listed, list) else ()):
            if isinstance(f, Mapping) and "hash" in f:
                check_hash(f["hash"], f"{name}: metadata.files.{one_line(str(pname), 80)}[{j}].hash")
    return entries
