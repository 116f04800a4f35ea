"""Small file-system helpers shared by the stack probes (gpu, cuda, frameworks, blas, toolchain).

Private.  The distributions come from :func:`envlock.probes.pip.scan_distributions` (the same
scan as the ``[pip]`` table: a snapshot reads them once and hands them to the stack), and the
conda packages from :func:`envlock.probes.condameta.list_conda_meta`; these helpers add what only
the stack needs (a view of the ``.dist-info`` distributions in ``sys.path`` order, RECORD
paths, small text files, ``PATH`` look-ups) and never raise for a missing or unreadable file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envlock.manifest import PipPackage
from envlock.probes.pip import read_metadata_header, scan_distributions
import stat

__all__ = [
    "Dist",
    "read_headers",
    "read_record_paths",
    "read_text",
    "site_dists",
    "under_root",
    "which",
]


@dataclass(frozen=True, slots=True)
class Dist:
    """An installed distribution with a ``.dist-info`` directory, as the stack probes see it.

    :ivar name: normalized project name (PEP 503).
    :ivar version: version from METADATA (from the directory name when METADATA is unreadable).
    :ivar path: the ``.dist-info`` directory.
    :ivar site: the ``sys.path`` entry holding it.
    """

    name: str
    version: str
    path: Path
    site: Path


def site_dists(
    site_dirs: Sequence[str | os.PathLike[str]],
    packages: Sequence[PipPackage] | None = None,
) -> list[Dist]:
    """Return the ``.dist-info`` distributions of ``site_dirs``, in ``sys.path`` order.

    :param site_dirs: the target's site directories, in ``sys.path`` order.
    :param packages: the distributions already read by
        :func:`~envlock.probes.pip.scan_distributions` on these directories (the ``[pip]``
        packages of a snapshot); ``None`` scans ``site_dirs`` now.
    :returns: one :class:`Dist` per project, the first copy on ``sys.path`` (later copies are
        shadowed), ordered by site directory and then ``.dist-info`` directory name; ``.egg-info``
        entries (no METADATA/RECORD layout) are left out.
    """
    if packages is None:
        packages = scan_distributions([os.fspath(d) for d in site_dirs]).packages
    rank: dict[str, int] = {}
    for i, d in enumerate(site_dirs):
        rank.setdefault(os.fspath(d), i)
    chosen = [p for p in packages if p.dist_info and p.dist_info.endswith(".dist-info")]
    chosen.sort(key=lambda p: (rank.get(p.location, len(rank)), p.location, p.dist_info or ""))
    return [
        Dist(
            name=p.name,
            version=p.version,
            path=Path(p.location, p.dist_info or ""),
            site=Path(p.location),
        )
        for p in chosen
    ]


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
    raw = _head(dist_info / "RECORD", limit)
    if raw is None:
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


def _head(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The first ``limit`` bytes of the *regular* file ``path``: opened ``O_NONBLOCK`` and
    checked with ``fstat`` (as :mod:`envlock._io`), so a FIFO or device is never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while total < limit:
            chunk = os.read(fd, min(1 << 20, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = 1 << 20) -> str | None:
    """Return the first ``limit`` bytes of ``path`` as text, or ``None`` when unreadable or not
    a regular file (a FIFO standing in for a hung network file)."""
    raw = _head(path, limit)
    return None if raw is None else raw.decode("utf-8", "replace")


def under_root(root: Path, path: str | os.PathLike[str]) -> Path:
    """Return absolute ``path`` re-rooted under ``root`` (``/usr/x`` → ``<root>/usr/x``)."""
    p = Path(path)
    if root == Path("/"):
        return p
    return root / p.relative_to(p.anchor) if p.is_absolute() else root / p
