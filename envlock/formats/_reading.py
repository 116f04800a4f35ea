"""What every reader of :mod:`envlock.formats` returns — a :class:`Reading` — and the pieces
readers share to build one: the :class:`Source` they are handed, the partial manifest
(:func:`partial`) and the reading of a :class:`~envlock.formats.locks.LockFile`
(:func:`from_lock`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envlock._bounded import MAX_PACKAGES
from envlock.errors import ManifestError
from envlock.formats import conda, locks

__all__ = ["Reading", "Source", "partial", "from_lock", "MAX_PACKAGES", "bounded"]



@dataclass(frozen=True)
class Reading:
    """One input file, read.

    :ivar kind: one of :data:`envlock._kinds.KINDS`.
    :ivar data: the partial manifest (``dict`` in a manifest's layout).
    :ivar listing: ``"complete"`` (a package it does not list is absent), ``"partial"`` (a spec:
        unlisted packages are not compared), ``"conda"`` (complete for conda packages, silent
        about pip: an explicit list) or ``"pip"`` (complete for Python distributions, silent
        about conda packages: a ``pip freeze``).
    :ivar platforms: the conda subdirs the file is for (locks: all they lock).
    :ivar lock: the :class:`~envlock.formats.locks.LockFile` of a lockfile, else ``None``.
    :ivar meta: what the format says besides packages, for ``show`` (``Pipfile.lock``: its
        ``sha256``, ``sources``, ``requires``, ``categories``); ``{}`` for most kinds.
    :ivar marked: a requirements file's (or ``pip:`` section's) entries as read, markers kept
        (:func:`partial` drops the marker of a project listed once), when any has a marker:
        ``diff`` evaluates them for one target (:func:`envlock.diff.foreign.requirements_for_target`);
        ``()`` otherwise.
    """

    kind: str
    data: dict[str, Any]
    listing: str = "complete"
    platforms: tuple[str, ...] = ()
    lock: Any = field(default=None, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    marked: tuple[dict[str, Any], ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Source:
    """The file a detector or reader is handed.

    :ivar path: as given; ``name``: its printable form for messages; ``base``: its file name.
    :ivar text: its whole text (strict UTF-8).
    :ivar platform: the conda subdir asked for (``read(platform=)``), or ``None``.
    :ivar exact: parse as the installing tool does (see :func:`envlock.formats.read`).
    :ivar includes: follow a requirements file's ``-r``/``-c`` includes.
    :ivar parse: the TOML/JSON parser in place of :func:`envlock.manifest._toml.load_toml`
        (``parse(text, name)``, its contract; ``None``: ``load_toml`` itself).
    """

    path: str
    name: str
    base: str
    text: str
    platform: str | None = None
    exact: bool = False
    includes: bool = True
    parse: Callable[[str, str], dict[str, Any]] | None = None


def bounded(reading: Reading) -> Reading:
    """``reading``, unless it lists more than :data:`MAX_PACKAGES` packages.

    :raises ManifestError: one line saying how many it lists and the bound.
    """
    lock = reading.lock
    if lock is not None and hasattr(lock, "packages"):
        count = len(lock.packages)
    else:
        count = sum(len(t.get("packages") or ()) for t in (reading.data.get("pip"), reading.data.get("conda"))
                    if isinstance(t, Mapping))
    if count > MAX_PACKAGES:
        raise ManifestError(f"lists {count} packages; envlock reads at most {MAX_PACKAGES} from one file")
    return reading


def _pip_entries(pkgs: list[Any]) -> list[dict[str, Any]]:
    """One entry per (name, marker set); the marker is part of the key only where a project is
    listed more than once (``uv export`` splits by environment marker)."""
    counts: dict[str, int] = {}
    for e in pkgs:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    out = []
    seen: set[tuple[str, str | None]] = set()
    for e in pkgs:
        if "marker" in e and (counts[e["name"]] < 2 or not e["marker"]):
            e = {k: v for k, v in e.items() if k != "marker"}  # a copy: the caller's stays
        key = (e["name"], e.get("marker"))
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def partial(conda_pkgs: list[dict[str, Any]], pip_pkgs: list[dict[str, Any]], source: str, *,
            subdir: str | None = None, pip_status: str = "ok") -> dict[str, Any]:
    """The partial manifest of a file's packages: ``[conda]``, ``[pip]`` (one entry per name and
    marker set), ``[subdir]`` and ``[python]`` (from a conda ``python`` package).

    :param source: the words the tables' ``source`` says (``"environment.yml"``).
    :param pip_status: ``"ok"``, or why the format never lists pip packages.
    """
    out: dict[str, Any] = {}
    if conda_pkgs:
        out["conda"] = {"status": "ok", "source": source, "packages": conda_pkgs}
    if pip_status != "ok":
        out["pip"] = {"status": pip_status, "source": source,
                      "error": f"a {source} never lists pip packages"}
    elif pip_pkgs:
        out["pip"] = {"status": "ok", "source": source, "packages": _pip_entries(pip_pkgs)}
    if subdir:
        out["subdir"] = {"status": "ok", "subdir": subdir}
    for pkg in conda_pkgs:
        v = pkg.get("version") or ""
        if pkg["name"] == "python":  # conda's python package is CPython (PyPy is `pypy`)
            out["python"] = {"status": "ok", "source": "python package",
                             "implementation": "cpython"}
            if re.match(r"\d", v) and not pkg.get("constraint"):
                out["python"]["version"] = v
    return out


def from_lock(lock: locks.LockFile, platform: str | None, name: str) -> Reading:
    """The :class:`Reading` of a lock: its packages of ``platform`` (default ``linux-64`` when
    locked, else the first platform)."""
    platforms = lock.platforms or tuple(dict.fromkeys(
        x.platform for x in lock.packages if x.platform))
    chosen = platform or ("linux-64" if "linux-64" in platforms else
                          (platforms[0] if platforms else None))
    conda_pkgs, pip_pkgs = [], []
    for x in lock.packages:
        if x.platform is not None and chosen is not None and x.platform != chosen:
            continue
        if x.manager == "conda":
            conda_pkgs.append(conda.package_entry(x.name, x.version, x.build, x.channel))
        else:
            e: dict[str, Any] = {"name": x.name, "version": x.version}
            marker = _install_marker(x)
            if marker:
                e["marker"] = marker
            if x.vcs:
                e["vcs"] = x.vcs
            if x.commit:
                e["commit"] = x.commit
            pip_pkgs.append(e)
    source = f"{lock.kind} ({chosen})" if chosen else lock.kind
    subdir = next((q.subdir for q in lock.pixi_platforms if q.name == chosen), chosen)
    data = partial(conda_pkgs, pip_pkgs, source, subdir=subdir if lock.platforms or chosen else None)
    if not conda_pkgs and not pip_pkgs:
        data.setdefault("pip", {"status": "ok", "source": source, "packages": []})
    return Reading(lock.kind, data, "complete", tuple(platforms), lock)


def _install_marker(x: locks.Locked) -> str | None:
    """Where an entry is installed: its own marker (a uv.lock's ``resolution-markers``: the
    fork it belongs to) and, where the lock says which installs reach it
    (:attr:`locks.Locked.groups`), the markers of those edges — what ``uv export`` writes as
    the entry's ``marker``."""
    if not x.groups or any(m is None for _g, m in x.groups):
        return x.marker
    reach = " or ".join(f"({m})" for m in dict.fromkeys(m for _g, m in x.groups if m))
    return f"({x.marker}) and ({reach})" if x.marker else reach
