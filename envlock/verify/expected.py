"""The expected facts verify compares against: a manifest and lockfiles.

Lockfiles are read with small private readers (the ``lock`` area's readers use conda-lock's
pydantic models, too slow to import in a job prologue):

* ``pylock.toml`` (PEP 751) with :mod:`tomllib`: ``[[packages]]`` ``name`` and ``version``;
  entries whose ``marker`` does not hold for the target are dropped (markers are evaluated
  with :mod:`packaging.markers`, imported only when a marker is present);
* ``conda-lock.yml`` (conda-lock's format, version 1) with PyYAML: the ``package`` entries of
  this platform, ``manager`` ``conda`` or ``pip``; the conda build string is taken from the
  ``url`` file name (``<name>-<version>-<build>.conda``), the ``__cuda`` virtual package from
  ``dependencies``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from envlock.errors import ManifestError

__all__ = ["LockedPackage", "Lock", "Expected", "read_lock", "current_conda_platform", "canonical"]


def canonical(name: str) -> str:
    """PEP 503 normalized project name."""
    from envlock.probes.pip import canonicalize  # noqa: PLC0415

    return canonicalize(name)


class LockedPackage(NamedTuple):
    """A package a lockfile pins.

    :ivar manager: ``"pip"`` or ``"conda"``.
    :ivar build: the conda build string; ``md5``: the archive's md5 (conda).
    :ivar cuda: the ``__cuda`` requirement (``">=12"``, ``""`` for any) when the package
        depends on the ``__cuda`` virtual package.
    """

    name: str
    version: str | None
    manager: str
    build: str | None = None
    md5: str | None = None
    cuda: str | None = None


class Lock(NamedTuple):
    """One lockfile: ``path``, ``kind`` (``"pylock"``/``"conda-lock"``) and its packages."""

    path: str
    kind: str
    platform: str | None = None
    packages: tuple[LockedPackage, ...] = ()


def current_conda_platform() -> str:
    """conda's subdir for this machine: ``linux-64``, ``linux-aarch64``, ``osx-arm64``, …"""
    import platform as _platform  # noqa: PLC0415

    system = _platform.system().lower()
    machine = _platform.machine().lower()
    osname = {"linux": "linux", "darwin": "osx", "windows": "win"}.get(system, system)
    arch = {"x86_64": "64", "amd64": "64", "aarch64": "aarch64", "arm64": "arm64" if osname == "osx" else "aarch64",
            "ppc64le": "ppc64le", "s390x": "s390x"}.get(machine, machine)
    return f"{osname}-{arch}"


def _conda_build_from_url(url: str, name: str, version: str) -> str | None:
    fn = url.rsplit("/", 1)[-1]
    for ext in (".conda", ".tar.bz2"):
        if fn.endswith(ext):
            fn = fn[: -len(ext)]
            break
    prefix = f"{name}-{version}-"
    return fn[len(prefix):] if fn.startswith(prefix) else None


def _read_conda_lock(path: Path, platform: str) -> Lock:
    try:
        import yaml  # noqa: PLC0415
    except ImportError:
        raise ManifestError(f"{path}: reading conda-lock.yml needs PyYAML (pip install pyyaml)") from None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: {exc.strerror or exc}") from None
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ManifestError(f"{path}: malformed YAML ({first})") from None
    if not isinstance(data, dict) or not isinstance(data.get("package"), list):
        raise ManifestError(f"{path}: not a conda-lock file (no 'package' list)")
    packages = []
    for i, p in enumerate(data["package"]):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise ManifestError(f"{path}: package[{i}] has no name")
        if p.get("platform") not in (None, platform):
            continue
        manager = str(p.get("manager") or "conda")
        version = str(p["version"]) if p.get("version") is not None else None
        deps = p.get("dependencies") if isinstance(p.get("dependencies"), dict) else {}
        cuda = None
        if "__cuda" in deps:
            cuda = str(deps["__cuda"] or "").strip()
        hashes = p.get("hash") if isinstance(p.get("hash"), dict) else {}
        build = None
        if manager == "conda" and isinstance(p.get("url"), str) and version:
            build = _conda_build_from_url(p["url"], p["name"], version)
        packages.append(LockedPackage(
            name=p["name"] if manager == "conda" else canonical(p["name"]),
            version=version,
            manager=manager,
            build=build,
            md5=hashes.get("md5") if manager == "conda" else None,
            cuda=cuda,
        ))
    return Lock(path=str(path), kind="conda-lock", platform=platform, packages=tuple(packages))


def _read_pylock(path: Path, marker_env: Mapping[str, str] | None) -> Lock:
    from envlock.manifest._toml import load_file  # noqa: PLC0415

    data = load_file(path)
    pkgs = data.get("packages")
    if "lock-version" not in data or not isinstance(pkgs, list):
        raise ManifestError(f"{path}: not a PEP 751 lock file (no lock-version / [[packages]])")
    out = []
    for i, p in enumerate(pkgs):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise ManifestError(f"{path}: packages[{i}] has no name")
        marker = p.get("marker")
        if isinstance(marker, str) and marker.strip():
            from packaging.markers import InvalidMarker, Marker  # noqa: PLC0415

            try:
                if not Marker(marker).evaluate(dict(marker_env) if marker_env else None):
                    continue
            except InvalidMarker as exc:
                raise ManifestError(f"{path}: packages[{i}] has a bad marker ({exc})") from None
        version = p.get("version")
        out.append(LockedPackage(name=canonical(p["name"]), version=str(version) if version else None,
                                 manager="pip"))
    return Lock(path=str(path), kind="pylock", packages=tuple(out))


def read_lock(path: str | os.PathLike[str], *, platform: str | None = None,
              marker_env: Mapping[str, str] | None = None) -> Lock:
    """Read a ``pylock.toml``/``pylock.*.toml`` or ``conda-lock.yml``/``*.conda-lock.yml``.

    :param platform: conda subdir whose packages to keep (default: this machine's).
    :param marker_env: PEP 508 marker environment of the target (default: envlock's own).
    :raises ManifestError: the file is missing, malformed, or of an unknown kind.
    """
    p = Path(path)
    if not p.is_file():
        raise ManifestError(f"{p}: no such lockfile")
    name = p.name
    if name.endswith((".yml", ".yaml")):
        return _read_conda_lock(p, platform or current_conda_platform())
    if name.endswith(".toml"):
        return _read_pylock(p, marker_env)
    raise ManifestError(f"{p}: unknown lockfile kind (expected pylock.toml or conda-lock.yml)")


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the environment should be.

    :ivar manifest: the loaded manifest, or ``None``.
    :ivar manifest_path: its path.
    :ivar locks: the lockfiles given with ``--lock``.
    """

    manifest: Any = None
    manifest_path: str | None = None
    locks: tuple[Lock, ...] = ()
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
                from envlock.manifest import _model  # noqa: PLC0415

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
