"""``pixi.lock`` (YAML, ``version`` 3–7), read as rattler_lock (pixi's own lock crate; py-rattler
``LockFile.from_path``) reads it: ``environments.<env>.packages.<platform>`` list the
``conda``/``pypi`` package locations; ``packages`` holds their records."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envlock._io import one_line
from envlock._names import canonicalize
from envlock._untrusted import (GIT_SCHEMES, INDEX_SCHEMES, check_conda_file, check_dist_file,
                                check_url, is_archive)
from envlock.formats import conda as _conda
from envlock.formats.locks import Locked, LockFile, _err, _packages
from envlock.formats.pep508 import UNKNOWN, version_from_url
from envlock.formats.pixilegacy import is_legacy_pixi, upgraded

__all__ = ["PixiPlatform", "read_pixi_lock", "is_pixi_lock", "pypi_location",
           "conda_location", "CONDA_SCHEMES"]


def is_pixi_lock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a YAML document is a ``pixi.lock``: ``environments`` and ``packages`` — but
    not PEP 751's ``lock-version`` without a pixi ``version`` (a pylock written as JSON, which
    is YAML too, has both keys); or a conda-lock-shaped version 3
    (:func:`envlock.formats.pixilegacy.is_legacy_pixi`)."""
    return is_legacy_pixi(data) or "environments" in data and "packages" in data and (
        "version" in data or "lock-version" not in data)


#: The keys a pixi.lock ``packages`` record (v6+) or environment reference names its package by.
_PIXI_KEYS = ("conda", "conda_source", "pypi")
#: Fields a v6+ reference may add to tell apart records of one location (``conda: .`` built
#: for several subdirs), as rattler_lock's ``deserialize`` matches them.
_PIXI_DISAMBIGUATE = ("name", "version", "build", "subdir")


@dataclass(frozen=True, slots=True)
class PixiPlatform:
    """One platform of a ``pixi.lock``: ``name`` (the key of ``environments.*.packages``),
    the conda ``subdir`` it installs (``name`` itself before version 7 and when v7's
    ``platforms`` entry gives none) and its ``virtual-packages`` (v7: ``__cuda=12``, the
    machine it was solved for)."""

    name: str
    subdir: str
    virtual_packages: tuple[str, ...] = ()

    @property
    def cuda(self) -> str | None:
        """The ``__cuda`` version its virtual packages require (``"12"``), else ``None``."""
        for vp in self.virtual_packages:
            name, _, rest = vp.partition("=")
            if name.strip() == "__cuda":
                return rest.split("=")[0].strip() or None
        return None


def _pixi_platforms(data: Mapping[str, Any], version: int, name: str) -> dict[str, PixiPlatform]:
    """v7's top-level ``platforms`` (``name``, optional ``subdir``, ``virtual-packages``)."""
    if version < 7:
        return {}
    raw = data.get("platforms")
    if not isinstance(raw, list):
        raise _err(name, "pixi.lock version 7 needs a 'platforms' list")
    out: dict[str, PixiPlatform] = {}
    for i, p in enumerate(raw):
        if not isinstance(p, Mapping) or not isinstance(p.get("name"), str) or not p["name"]:
            raise _err(name, f"platforms[{i}] needs a name")
        sub = p.get("subdir", p["name"])
        vps = p.get("virtual-packages", [])
        if not isinstance(sub, str) or not sub:
            raise _err(name, f"platforms[{i}].subdir must be a string")
        if not isinstance(vps, list) or not all(isinstance(v, str) for v in vps):
            raise _err(name, f"platforms[{i}].virtual-packages must be a list of strings")
        if p["name"] in out:
            raise _err(name, f"platforms[{i}]: platform {one_line(p['name'])!r} is listed twice")
        out[p["name"]] = PixiPlatform(p["name"], sub, tuple(vps))
    return out


def _pixi_record_key(rec: Mapping[str, Any], i: int, version: int, name: str) -> tuple[str, str]:
    """``(kind, location)`` of a ``packages`` record: v4/v5 ``kind`` + ``url``/``path``;
    v6+ the value of its ``conda``/``conda_source``/``pypi`` key."""
    if version <= 5:
        kind = rec.get("kind")
        if kind not in ("conda", "pypi"):
            raise _err(name, f"packages[{i}].kind must be conda or pypi (pixi.lock version {version})")
        loc = rec.get("url", rec.get("path"))
        if not isinstance(loc, str) or not loc:
            raise _err(name, f"packages[{i}] ({kind} {one_line(str(rec.get('name', '?')))}) has no url or path")
        return str(kind), loc
    found = [k for k in _PIXI_KEYS if k in rec]  # both conda and pypi: rattler takes conda
    if not found or not isinstance(rec[found[0]], str) or not rec[found[0]]:
        keys = "conda, conda_source or pypi" if version >= 7 else "conda or pypi"
        raise _err(name, f"packages[{i}] needs a {keys} location string")
    if found[0] == "conda_source" and version < 7:
        raise _err(name, f"packages[{i}]: conda_source records are pixi.lock version 7")
    return found[0], rec[found[0]]


def _pixi_ref_key(ref: Mapping[str, Any], where: str, version: int, name: str) -> tuple[str, str]:
    found = [k for k in _PIXI_KEYS if k in ref]
    if not found or not isinstance(ref[found[0]], str) or not ref[found[0]]:
        raise _err(name, f"{where} needs a conda"
                         f"{', conda_source' if version >= 7 else ''} or pypi location string")
    return found[0], ref[found[0]]


#: URL schemes of a pixi.lock conda package: conda's own (https, http, file) and the object
#: stores pixi reads channels from (pixi's docs, "S3"; rattler_networking's s3/gcs middleware).
CONDA_SCHEMES = INDEX_SCHEMES | {"s3", "gcs"}
#: A location that begins with a URL scheme — two characters or more, for ``E:\\…`` is a
#: Windows path (rattler_lock's ``UrlOrPath`` reads a location as a URL when it parses as one).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def pypi_location(loc: str, field: str) -> str:
    """What the location of a pixi.lock PyPI package is, checked, as pixi writes and installs
    it (rattler_lock's ``UrlOrPath``; pixi's ``direct+`` mark of a direct URL removed):

    * ``"git"``: ``git+URL[?rev=…]#COMMIT``, the URL of a git transport (:data:`GIT_SCHEMES`);
    * ``"url"``: an https, http or file URL of a wheel or sdist
      (:func:`envlock._untrusted.check_dist_file`: PEP 427 wheel names, ``.tar.gz``/``.zip``…);
    * ``"archive"``: a local path to a wheel or sdist (the same file-name rule);
    * ``"directory"``: any other path — a local project (``./minimal-project``, ``E:\\…``).

    :param field: how an error names the entry (``"pixi.lock: packages[3] (pypi click) location"``).
    :raises UntrustedValueError: a URL of another scheme (``javascript:``, ``ftp:``), or one
        that names no wheel or sdist (``file:///etc/passwd``): one line naming both.
    """
    url = loc.removeprefix("direct+")
    if url.startswith("git+"):
        check_url(url[4:].split("#", 1)[0].split("?", 1)[0], field, GIT_SCHEMES)
        return "git"
    if _SCHEME.match(url):
        check_url(url, field, INDEX_SCHEMES)
        check_dist_file(url, field)
        return "url"
    if is_archive(url):
        check_dist_file(url, field)
        return "archive"
    return "directory"


def conda_location(loc: str, field: str, schemes: frozenset[str] = CONDA_SCHEMES) -> bool:
    """Whether the location of a pixi.lock conda package is a URL — then checked: one of
    ``schemes``, of a package archive ``<name>-<version>-<build>.conda``/``.tar.bz2``
    (:func:`envlock._untrusted.check_conda_file`) — rather than a path (``conda: .``, a package
    built from source, as rattler_lock reads it).

    :raises UntrustedValueError: a URL of another scheme or file (one line naming it).
    """
    if not _SCHEME.match(loc):
        return False
    check_url(loc, field, schemes)
    check_conda_file(loc, field)
    return True


def _check_record(kind: str, loc: str, rec: Mapping[str, Any], i: int, name: str) -> None:
    """A ``packages`` record's location, checked before anything of it is used."""
    label = f" {one_line(str(rec['name']), 80)}" if isinstance(rec.get("name"), str) else ""
    if kind == "pypi":
        pypi_location(loc, f"{name}: packages[{i}] (pypi{label}) location")
    elif kind == "conda":
        conda_location(loc, f"{name}: packages[{i}] (conda{label}) location")


def read_pixi_lock(data: Mapping[str, Any], name: str, environment: str = "default") -> LockFile:
    """The packages of ``environment`` in a ``pixi.lock`` (YAML, ``version`` 3–7), every platform,
    read as rattler_lock (pixi's own lock crate; py-rattler ``LockFile.from_path``) reads them.

    * v4/v5: ``packages`` records have ``kind: conda|pypi`` and a ``url`` (or a pypi
      ``path``); v6: each record is keyed by its ``conda:``/``pypi:`` location; v7 adds
      ``conda_source:`` records (a package built from source: the project) and a top-level
      ``platforms`` list whose names (``p1``) key the environments, each with its ``subdir``
      (``win-64``) and ``virtual-packages`` (``__cuda=12``: :class:`PixiPlatform`).
    * An environment lists per platform references to those records (``conda: URL``); a
      location several records share (``conda: .`` built per subdir) is told apart by the
      reference's ``name``/``version``/``build``/``subdir``, then by the platform's subdir
      (v4/v5 repeat a noarch record once per subdir).
    * Editable and local-directory pypi entries and conda source packages are the project
      (:attr:`LockFile.projects`), not packages.

    :returns: a :class:`LockFile` whose ``platforms`` are the lock's platform names, each
        package's ``platform`` its platform name; :attr:`LockFile.pixi_platforms` maps them.
    :raises ManifestError: not that layout (the first fault, naming where), or no such
        environment.
    """
    data = upgraded(data, name)  # version 3: rattler's conda-lock shape, in the v5 layout
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 4 <= version <= 7:
        raise _err(name, f"pixi.lock version {one_line(repr(version))} is not supported (3-7)")
    platforms = _pixi_platforms(data, version, name)
    envs = data.get("environments")
    if not isinstance(envs, Mapping):
        raise _err(name, "pixi.lock has no 'environments' mapping")
    if not isinstance(envs.get(environment), Mapping):
        raise _err(name, f"pixi.lock has no environment {environment!r}")
    records = _pixi_records(data, version, name)
    per_platform = envs[environment].get("packages", {})
    if not isinstance(per_platform, Mapping):
        raise _err(name, f"environments.{environment}.packages must be a mapping")
    out: list[Locked] = []
    projects: list[str] = []
    sources: list[Locked] = []
    for platform, refs in per_platform.items():
        plat = one_line(str(platform))
        if platforms and platform not in platforms:
            raise _err(name, f"environments.{environment} uses platform {plat!r}, which is not in "
                             "'platforms'")
        subdir = platforms[platform].subdir if platform in platforms else str(platform)
        if not isinstance(refs, list):
            raise _err(name, f"environments.{environment}.packages.{plat} must be a list")
        for j, ref in enumerate(refs):
            where = f"environments.{environment}.packages.{plat}[{j}]"
            if not isinstance(ref, Mapping):
                raise _err(name, f"{where} is not a mapping")
            kind, loc = _pixi_ref_key(ref, where, version, name)
            candidates = records.get((kind, loc), [])
            if len(candidates) > 1:
                candidates = [r for r in candidates if all(
                    str(r.get(k)) == str(ref[k]) for k in _PIXI_DISAMBIGUATE if k in ref)]
            if len(candidates) > 1:  # v4/v5 repeat a noarch record per subdir: this one's
                candidates = [r for r in candidates if r.get("subdir") == subdir] or candidates
            if not candidates:
                raise _err(name, f"{where}: {kind} {one_line(loc)} is not in packages")
            rec = candidates[0]
            entry = _pixi_entry(kind, loc, rec, str(platform), subdir, name, where)
            if isinstance(entry, str):
                projects.append(entry)
                if kind != "pypi":  # a conda package built from source: rattler's package too
                    sources.append(Locked("conda", entry, str(rec.get("version") or UNKNOWN),
                                          platform=str(platform), build=_str_or_none(rec, "build"),
                                          subdir=str(rec.get("subdir") or subdir)))
            else:
                out.append(entry)
    return LockFile("pixi.lock", tuple(str(p) for p in per_platform), tuple(out),
                    projects=tuple(dict.fromkeys(projects)), sources=tuple(sources),
                    pixi_platforms=tuple(platforms[p] if p in platforms else PixiPlatform(str(p), str(p))
                                         for p in per_platform))


def _pixi_records(data: Mapping[str, Any], version: int, name: str
                  ) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """The ``packages`` records of a pixi.lock by ``(kind, location)``, each checked
    (:func:`_check_record`); several may share a location (told apart by the reference).

    :raises ManifestError: a record of no known shape, or a pypi record with no name.
    """
    records: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for i, rec in enumerate(_packages(data, "packages", name)):
        key = _pixi_record_key(rec, i, version, name)
        if key[0] == "pypi" and not isinstance(rec.get("name"), str):
            raise _err(name, f"packages[{i}] (pypi {one_line(key[1])}) has no name")
        _check_record(key[0], key[1], rec, i, name)
        records.setdefault(key, []).append(rec)
    return records


def _pixi_entry(kind: str, loc: str, rec: Mapping[str, Any], platform: str, subdir: str,
                name: str, where: str) -> Locked | str:
    """The :class:`Locked` of one referenced record, or the project's name (a string) for a
    conda source package or an editable / local-directory pypi entry."""
    if kind == "pypi":
        pname = canonicalize(rec["name"])
        what = pypi_location(loc, f"{name}: {where} (pypi {pname}) location")
        if rec.get("editable") is True or what == "directory":
            return pname
        v = rec.get("version")
        vcs = "git" if what == "git" else None
        commit = loc.rsplit("#", 1)[1] if vcs and "#" in loc else None
        return Locked("pip", pname, str(v) if v is not None else version_from_url(loc) or UNKNOWN,
                      platform=platform, vcs=vcs, commit=commit, sha256=_str_or_none(rec, "sha256"),
                      url=loc)
    is_url = kind == "conda" and conda_location(loc, f"{name}: {where} location")
    # a path: a package built from source (v6 ``conda: .``)
    parsed: Mapping[str, Any] | None = _conda.parse_url(loc) if is_url else None
    if parsed is None:
        if not isinstance(rec.get("name"), str):
            if kind == "conda_source":  # ``name[hash] @ path``
                return loc.split("[", 1)[0].split(" @ ", 1)[0].strip()
            raise _err(name, f"{where}: source package {one_line(loc)} has no name")
        return str(rec["name"])
    for key in ("name", "version", "build", "subdir"):
        if key in rec and not isinstance(rec[key], (str, int, float)):
            raise _err(name, f"{where}: {key} of {one_line(loc)} must be a string")
    return Locked("conda", str(rec.get("name") or parsed["name"]),
                  str(rec.get("version") or parsed["version"]), platform=platform,
                  build=str(rec.get("build") or parsed["build"]), channel=parsed["channel"],
                  md5=_str_or_none(rec, "md5"), sha256=_str_or_none(rec, "sha256"),
                  cuda=_cuda_dep(rec.get("depends")), url=loc,
                  subdir=str(rec.get("subdir") or parsed.get("subdir") or subdir))


def _str_or_none(rec: Mapping[str, Any], key: str) -> str | None:
    v = rec.get(key)
    return v if isinstance(v, str) else None


def _cuda_dep(depends: Any) -> str | None:
    """The ``__cuda`` requirement among a conda record's ``depends`` (``"__cuda >=12"``)."""
    for dep in depends if isinstance(depends, list) else ():
        if isinstance(dep, str):
            head, _, spec = dep.strip().partition(" ")
            if head == "__cuda":
                return spec.strip()
    return None


