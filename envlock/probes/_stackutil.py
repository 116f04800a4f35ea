"""Small file-system helpers shared by the stack probes (gpu, cuda, frameworks, blas, toolchain).

Private: the lead's pip/conda probes read distributions fully; these helpers read only what the
stack probes need (names, versions, a few METADATA headers, RECORD paths) and never raise for a
missing or unreadable file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from envlock.probes.pip import canonicalize, read_metadata_header

__all__ = [
    "Dist",
    "iter_dists",
    "read_headers",
    "read_record_paths",
    "which",
    "read_text",
    "under_root",
]


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
            key = canonicalize(name)
            if key in seen:
                continue
            seen.add(key)
            yield Dist(name=key, version=version, path=base / entry, site=base)


def read_headers(dist: Dist) -> dict[str, list[str]]:
    """Return the METADATA header of ``dist`` (see :func:`envlock.probes.pip.read_metadata_header`).

    Field names are lower-cased; undecodable bytes are replaced.  A missing or unreadable file
    gives ``{}``.
    """
    try:
        return read_metadata_header(dist.path / "METADATA", errors="replace")
    except OSError:
        return {}


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
