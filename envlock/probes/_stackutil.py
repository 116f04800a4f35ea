"""Small file-system helpers shared by the stack probes (gpu, cuda, frameworks, blas, toolchain).

Private: the lead's pip/conda probes read distributions fully; these helpers read only what the
stack probes need (names, versions, a few METADATA headers, RECORD paths) and never raise for a
missing or unreadable file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Dist",
    "CondaRecord",
    "normalize",
    "iter_dists",
    "read_headers",
    "read_record_paths",
    "conda_records",
    "which",
    "read_text",
    "under_root",
]

_NORMALIZE = re.compile(r"[-_.]+")


def normalize(name: str) -> str:
    """Return the PEP 503 normalized form of a project name."""
    return _NORMALIZE.sub("-", name).lower()


@dataclass(frozen=True, slots=True)
class Dist:
    """An installed distribution found by its ``.dist-info`` directory.

    :ivar name: normalized project name (from the directory name).
    :ivar version: version from the directory name (PEP 427/491 escaping).
    :ivar path: the ``.dist-info`` directory.
    :ivar site: the ``sys.path`` entry holding it.
    """

    name: str
    version: str
    path: Path
    site: Path


@dataclass(frozen=True, slots=True)
class CondaRecord:
    """A ``conda-meta/<name>-<version>-<build>.json`` record, from its file name only."""

    name: str
    version: str
    build: str
    path: Path


def iter_dists(site_dirs: Iterable[str | os.PathLike[str]]) -> Iterator[Dist]:
    """Yield every ``*.dist-info`` of ``site_dirs``, first copy of a project first.

    Later copies of a project already seen (shadowed on ``sys.path``) are skipped.
    """
    seen: set[str] = set()
    for site in site_dirs:
        base = Path(site)
        try:
            entries = sorted(os.listdir(base))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            stem = entry[: -len(".dist-info")]
            name, sep, version = stem.partition("-")
            if not sep:
                continue
            key = normalize(name)
            if key in seen:
                continue
            seen.add(key)
            yield Dist(name=key, version=version, path=base / entry, site=base)


def read_headers(dist_info: Path, limit: int = 65536) -> dict[str, list[str]]:
    """Return the header fields of ``dist_info/METADATA`` (core metadata), by field name.

    Only the header block is parsed (up to the first blank line, at most ``limit`` bytes).
    A missing or unreadable file gives ``{}``.
    """
    try:
        with open(dist_info / "METADATA", "rb") as fh:
            raw = fh.read(limit)
    except OSError:
        return {}
    return parse_headers(raw.decode("utf-8", "replace"))


def parse_headers(text: str) -> dict[str, list[str]]:
    """Parse RFC 822-style header lines (``Key: value``, continuation lines indented)."""
    out: dict[str, list[str]] = {}
    last: str | None = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t") and last is not None:
            out[last][-1] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        last = key.strip()
        out.setdefault(last, []).append(value.strip())
    return out


def read_record_paths(dist_info: Path, limit: int = 4 << 20) -> list[str]:
    """Return the file paths listed in ``dist_info/RECORD`` (relative to the site dir)."""
    try:
        with open(dist_info / "RECORD", "rb") as fh:
            raw = fh.read(limit)
    except OSError:
        return []
    paths = []
    for line in raw.decode("utf-8", "replace").splitlines():
        path = line.split(",", 1)[0].strip().strip('"')
        if path:
            paths.append(path)
    return paths


def conda_records(prefix: str | os.PathLike[str] | None) -> list[CondaRecord]:
    """Return the conda packages of ``prefix`` from the names of ``conda-meta/*.json``.

    conda names each record ``<name>-<version>-<build>.json``; version and build never contain
    ``-``, so the last two dashes split it.  A prefix without ``conda-meta`` gives ``[]``.
    """
    if not prefix:
        return []
    meta = Path(prefix) / "conda-meta"
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return []
    out = []
    for fname in names:
        if not fname.endswith(".json"):
            continue
        parts = fname[: -len(".json")].rsplit("-", 2)
        if len(parts) != 3 or not all(parts):  # noqa: PLR2004
            continue
        out.append(CondaRecord(name=parts[0], version=parts[1], build=parts[2], path=meta / fname))
    return out


def which(name: str, path_dirs: Sequence[str]) -> str | None:
    """Return the first executable ``name`` in ``path_dirs`` (the target's ``PATH`` order)."""
    for d in path_dirs:
        if not d:
            continue
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def read_text(path: str | os.PathLike[str], limit: int = 1 << 20) -> str | None:
    """Return the first ``limit`` bytes of ``path`` as text, or ``None`` when unreadable."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def under_root(root: Path, path: str | os.PathLike[str]) -> Path:
    """Return absolute ``path`` re-rooted under ``root`` (``/usr/x`` → ``<root>/usr/x``)."""
    p = Path(path)
    if root == Path("/"):
        return p
    return root / p.relative_to(p.anchor) if p.is_absolute() else root / p
