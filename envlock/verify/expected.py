"""The expected facts verify compares against: a manifest and lockfiles.

Lockfiles are read with the readers ``diff`` and ``restore`` use (:mod:`envlock.formats`), so
that what verify accepts is what conda-lock and packaging accept:

* ``pylock.toml`` (PEP 751) through :mod:`packaging.pylock`; ``uv.lock``, ``poetry.lock``,
  ``pdm.lock`` through their documented schemas; entries whose ``marker`` does not hold for the
  target are dropped (:mod:`packaging.markers`);
* ``conda-lock.yml`` through conda-lock's own model (when conda-lock is installed; ~0.8 s of
  imports), and ``pixi.lock``: the entries of this platform, ``manager`` ``conda`` or ``pip``,
  the conda build string, md5 and the ``__cuda`` requirement from ``dependencies``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from envlock._selection import Chosen
from envlock.errors import ManifestError

__all__ = ["LockedPackage", "Lock", "Expected", "read_lock", "canonical"]


def canonical(name: str) -> str:
    """PEP 503 normalized project name."""
    from envlock.probes.pip import canonicalize

    return canonicalize(name)


class LockedPackage(NamedTuple):
    """A package a lockfile pins.

    :ivar manager: ``"pip"`` or ``"conda"``.
    :ivar build: the conda build string; ``md5``: the archive's md5 (conda).
    :ivar cuda: the ``__cuda`` requirement (``">=12"``, ``""`` for any) when the package
        depends on the ``__cuda`` virtual package.
    :ivar marker: the PEP 508 marker under which the lock applies it, when :func:`read_lock`
        was not given a marker environment (verify evaluates it for the target).
    :ivar groups: :attr:`envlock.formats.locks.Locked.groups` — which installs need it.
    """

    name: str
    version: str | None
    manager: str
    build: str | None = None
    md5: str | None = None
    cuda: str | None = None
    marker: str | None = None
    groups: tuple[tuple[str, str | None], ...] = ()


class Lock(NamedTuple):
    """One lockfile: ``path``, ``kind`` (``"pylock"``/``"conda-lock"``) and its packages.

    :ivar platform: the conda subdir whose entries were taken (when the lock has platforms).
    :ivar platforms: every conda subdir the lock is for (``()``: a pip lock, any platform).
    :ivar projects, requires_python, environments, conflicts: as
        :class:`envlock.formats.locks.LockFile`.
    :ivar chosen: the install the selection options given choose of a uv.lock, pdm.lock or
        poetry.lock, as its own tool takes them (set by ``verify``:
        :func:`envlock.formats.lockchoice.given_choice`, ``restore``'s rule); ``None``: none
        given, the install is inferred from what is installed.
    :ivar cuda: the ``__cuda`` version the taken platform's virtual packages require (a v7
        ``pixi.lock`` platform solved for ``__cuda=12``), compared with the driver like a
        package's ``__cuda`` dependency; ``lock_platform``: that platform's name (``p2``).
    :ivar pixi_environment: the pixi.lock environment read; ``selection``: evidence lines
        saying which environment and platform were read when the lock has several
        (:class:`envlock.verify.pixichoice.PixiChoice`).
    :ivar choices: the extras and groups a project lock declares
        (:attr:`envlock.formats.locks.LockFile.choices`, as read: before ``-E`` took any).
    """

    path: str
    kind: str
    platform: str | None = None
    packages: tuple[LockedPackage, ...] = ()
    platforms: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    conflicts: tuple[frozenset[str], ...] = ()
    cuda: str | None = None
    lock_platform: str | None = None
    chosen: Chosen | None = None
    pixi_environment: str | None = None
    selection: tuple[str, ...] = ()
    choices: frozenset[str] | None = None


def _lock_names() -> str:
    from envlock._kinds import LOCK_KINDS  # the names, not the readers

    return ", ".join(LOCK_KINDS[:-1]) + " or " + LOCK_KINDS[-1]


_LOCK_NAMES = _lock_names()


def _read_any(p: Path) -> Any:
    """``p`` read by the shared reader of its format, as a lock (:func:`read_lock`).

    :raises ManifestError: missing, malformed, or not a lockfile (one line).
    """
    from envlock import formats

    if not os.path.lexists(p):
        raise ManifestError(f"{p}: no such lockfile")
    try:
        r = formats.read(p, exact=True)  # as conda-lock / packaging parse it
    except ManifestError as exc:
        if "unknown format" not in str(exc):
            raise
        if p.name.endswith(".toml"):
            raise ManifestError(f"{p}: not a PEP 751 lock file (no lock-version / [[packages]])"
                                ) from None
        if p.name.endswith((".yml", ".yaml")):
            raise ManifestError(f"{p}: not a conda-lock file (no 'package' list)") from None
        raise ManifestError(f"{p}: unknown lockfile kind (expected {_LOCK_NAMES})") from None
    if r.lock is None and r.kind == "conda-explicit":  # conda-lock's `conda-<subdir>.lock`
        r = dataclasses.replace(r, lock=formats.read_lock(p))
    if r.lock is None:
        raise ManifestError(f"{p}: unknown lockfile kind (expected {_LOCK_NAMES}; this is "
                            f"{r.kind})")
    return r


def read_lock(path: str | os.PathLike[str], *, platform: str | None = None,
              marker_env: Mapping[str, str] | None = None, extras: Sequence[str] = (),
              dev: bool | None = None, environment: str | None = None,
              lock_platform: str | None = None) -> Lock:
    """Read a lockfile with the shared reader of its format (:func:`envlock.formats.read_lock`:
    conda-lock's model, :mod:`packaging.pylock`, the uv/poetry/pdm/pixi schemas), recognised by
    its content.

    :param platform: conda subdir whose packages to keep (default: this machine's).
    :param marker_env: PEP 508 marker environment of the target; entries whose marker does
        not hold are dropped.  ``None``: every entry is kept with its marker, for the caller to
        evaluate against the target (:func:`envlock.formats.markers.marker_holds`).
    :param extras, dev: the optional groups the install took (``conda-lock install -E NAME
        --no-dev``): :func:`envlock.formats.locks.for_install`; entries of other groups keep
        their groups, and not installed they are a choice, not a missing package.  A uv.lock's,
        pdm.lock's and poetry.lock's are left to :attr:`Lock.chosen` (their own tool's reading,
        :func:`envlock.formats.lockchoice.given_choice`).
    :param environment, lock_platform: a ``pixi.lock``'s environment (``pixi install -e
        NAME``; default ``default``) and platform entry (``p2``; default: the one named as
        ``platform``, else the first of that subdir): :func:`envlock.verify.pixichoice.choose_pixi`;
        other kinds of lock ignore them.
    :raises ManifestError: the file is missing, not a regular file, malformed, invalid for its
        own tool, or not a lockfile; no such pixi environment or platform (one line).
    """
    from envlock import formats
    from envlock.formats.conda import current_subdir

    p = Path(path)
    r = _read_any(p)
    plat = platform or current_subdir()
    taken, env_name = plat, None
    note: tuple[str, ...] = ()
    if r.kind == "pixi.lock":  # v7 names its platforms (``p2`` = linux-64 with __cuda=12)
        from envlock.verify.pixichoice import choose_pixi

        chosen = choose_pixi(p, r.lock, plat, environment, lock_platform)
        r = dataclasses.replace(r, lock=chosen.lock)
        taken, plat, note, env_name = chosen.platform, chosen.subdir, chosen.note, chosen.environment
    pixi = {q.name: q for q in r.lock.pixi_platforms}
    out = []
    from envlock.formats.lockchoice import TOOLS

    own = r.lock if r.kind in TOOLS else formats.locks.for_install(r.lock, extras=extras, dev=dev)
    for x in own.packages:
        if x.platform is not None and x.platform != taken:
            continue
        marker = x.marker
        if marker:
            try:
                from envlock.formats.markers import marker_holds

                holds = marker_holds(marker, marker_env if marker_env is not None else {})
                holds = holds or marker_env is None  # parsed now; evaluated for the target later
            except ValueError as exc:
                raise ManifestError(f"{p}: {x.name} has a bad marker ({exc})") from None
            if not holds:
                continue
            if marker_env is not None:
                marker = None
        version = None if x.version == formats.UNKNOWN else x.version
        out.append(LockedPackage(name=x.name, version=version, manager=x.manager, build=x.build,
                                 md5=x.md5, cuda=x.cuda, marker=marker, groups=x.groups))
    kind = "pylock" if r.kind == "pylock" else r.kind
    has_platform = any(x.platform for x in r.lock.packages)
    platforms = r.lock.platforms or tuple(dict.fromkeys(
        x.platform for x in r.lock.packages if x.platform))
    if pixi:
        platforms = tuple(dict.fromkeys(pixi[n].subdir if n in pixi else n for n in platforms))
    return Lock(path=str(p), kind=kind, platform=plat if has_platform else None,
                packages=tuple(out), platforms=tuple(platforms), projects=r.lock.projects,
                requires_python=r.lock.requires_python, environments=r.lock.environments,
                conflicts=r.lock.conflicts,
                cuda=pixi[taken].cuda if taken in pixi else None,
                lock_platform=taken if taken in pixi else None,
                pixi_environment=env_name, selection=note, choices=r.lock.choices)


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the environment should be.

    :ivar manifest: the loaded manifest, or ``None``.
    :ivar manifest_path: its path.
    :ivar locks: the lockfiles given with ``--lock``.
    :ivar requested: the extras and groups the install took (``--extra``, ``--group``,
        ``--all-extras``, ``--no-dev``); none given: inferred from what is installed.
    """

    manifest: Any = None
    manifest_path: str | None = None
    locks: tuple[Lock, ...] = ()
    requested: Any = None
    _tables: dict[str, Any] = field(default_factory=dict, repr=False)

    def table(self, name: str) -> Any:
        """A manifest table as plain data (``dict``), whether this envlock models it or keeps
        it in ``extra`` (``[gpu]``, ``[frameworks]`` … before the stack model is merged)."""
        if self.manifest is None:
            return None
        if name not in self._tables:
            value = getattr(self.manifest, name, None)
            if value is None:
                value = self.manifest.extra.get(name)
            elif not isinstance(value, Mapping):
                from envlock.manifest import _model

                value = _model.to_dict(value)
            self._tables[name] = value
        return self._tables[name]

    def framework(self, name: str) -> Mapping[str, Any] | None:
        """The manifest's ``[[frameworks.packages]]`` entry for ``name``, as a dict."""
        fw = self.table("frameworks")
        if not isinstance(fw, Mapping):
            return None
        for p in fw.get("packages") or ():
            if isinstance(p, Mapping) and p.get("name") == name:
                return p
        return None

    def pip_packages(self) -> Sequence[Any]:
        m = self.manifest
        return m.pip.packages if m is not None and m.pip is not None else ()

    def conda_packages(self) -> Sequence[Any]:
        m = self.manifest
        return m.conda.packages if m is not None and m.conda is not None else ()
