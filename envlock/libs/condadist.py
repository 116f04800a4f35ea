"""Which Python distribution a conda package owns: the one owner rule of the manifest
(``envlock.probes.condameta``, ``[pip]`` ``origin = "conda"``) and of ``envlock libs``
(:class:`envlock.libs.owners.OwnerIndex`).  Kept alone so that reading conda-meta costs one
regular expression, not the owner indexes."""

from __future__ import annotations

import re

__all__ = ["conda_dist_dir"]

_DIST_IN_FILES = re.compile(r"^(?P<dir>(?:.*/)?site-packages/[^/]+\.(?:dist-info|egg-info))/")


def conda_dist_dir(rel: str) -> str | None:
    """The dist-info/egg-info directory a conda record's ``files`` entry lies in
    (``lib/python3.11/site-packages/mpi4py-3.1.5.dist-info``), or ``None``.

    The one owner rule of envlock, for the manifest and for ``libs``: a Python distribution
    whose dist-info a conda package lists in its ``files`` is that conda package's, whatever
    its ``INSTALLER`` says; its files (RECORD) are then conda-owned.
    """
    m = _DIST_IN_FILES.match(rel)
    return m.group("dir") if m else None
