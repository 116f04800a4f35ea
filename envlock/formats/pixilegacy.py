"""rattler_lock's version 1–3 lock files (the conda-lock-shaped ``pixi.lock`` that pixi wrote
before version 4), read as rattler_lock reads them.

rattler_lock (``crates/rattler_lock/src/parse/v3.rs``, ``parse_v3_or_lower``) reads a
``version: 3`` document as a ``metadata`` mapping (``channels`` and ``platforms`` lists) and a
``package`` list whose entries each name their ``platform`` and ``manager`` (``conda``, or
``pypi``/``pip`` for a PyPI package), with ``name``, ``version`` and ``url``; a conda entry
needs a ``hash`` (``md5`` and/or ``sha256``), a PyPI entry may have one. conda-lock's own
fields (``category``, ``optional``) are not used: every entry is installed, in the one
environment ``default``. Its platforms are those the packages name, sorted by name.

:func:`upgraded` turns such a document into the version-5 layout (``environments.default``
referring to ``packages`` records by ``kind`` and ``url``) that
:func:`envlock.formats.pixilock.read_pixi_lock` reads, so the rest of envlock (verify,
restore) sees one pixi.lock model.  Versions 1 and 2 stay conda-lock's (conda-lock's
``parse_conda_lock_file`` reads them) unless an entry is rattler's ``manager: pypi``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock._io import one_line
from envlock.errors import ManifestError

__all__ = ["LEGACY_VERSIONS", "is_legacy_pixi", "upgraded"]

#: The ``version`` values read here (rattler's ``FileFormatVersion::V1``–``V3``).  Versions 1
#: and 2 are conda-lock's files as well: they are read here only when an entry has rattler's
#: ``manager: pypi``, which conda-lock's models refuse (``Literal["conda", "pip"]``).
LEGACY_VERSIONS = (1, 2, 3)

#: rattler_conda_types' ``Platform`` names a legacy entry's ``platform`` must be one of.
_PLATFORMS = frozenset({
    "noarch", "unknown", "linux-32", "linux-64", "linux-aarch64", "linux-armv6l", "linux-armv7l",
    "linux-loong64", "linux-ppc64le", "linux-ppc64", "linux-ppc", "linux-s390x", "linux-riscv32",
    "linux-riscv64", "osx-64", "osx-arm64", "win-32", "win-64", "win-arm64", "emscripten-wasm32",
    "wasi-wasm32", "zos-z"})


def is_legacy_pixi(data: Mapping[str, Any]) -> bool:
    """Whether a YAML document is a rattler_lock version 1–3 file that conda-lock does not
    read: conda-lock's ``metadata`` and ``package`` keys with ``version: 3``, or version 1–2
    with a ``manager: pypi`` entry."""
    v = data.get("version")
    if not (isinstance(v, int) and not isinstance(v, bool) and v in LEGACY_VERSIONS
            and "package" in data and "metadata" in data and "environments" not in data):
        return False
    pkgs = data["package"]
    return v == 3 or isinstance(pkgs, list) and any(
        isinstance(p, Mapping) and p.get("manager") == "pypi" for p in pkgs)


def upgraded(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """``data`` itself unless it is a legacy document (:func:`is_legacy_pixi`); else the same
    lock in the version-5 layout, validated as ``parse_v3_or_lower`` validates it.

    :param name: the file's name, for messages.
    :raises ManifestError: ``<name>: not a valid pixi.lock version 3 (<the first fault>)``.
    """
    if not is_legacy_pixi(data):
        return data

    def bad(what: str) -> ManifestError:
        return ManifestError(f"{name}: not a valid pixi.lock version {data.get('version')} "
                             f"({one_line(what)})")

    meta = data.get("metadata")
    if not isinstance(meta, Mapping):
        raise bad("metadata must be a mapping")
    for key in ("channels", "platforms"):
        if not isinstance(meta.get(key), list):
            raise bad(f"metadata.{key} must be a list")
    channels = [c for c in meta["channels"] if isinstance(c, (str, Mapping))]
    if len(channels) != len(meta["channels"]):
        raise bad("metadata.channels entries must be channel names or mappings")
    pkgs = data.get("package")
    if not isinstance(pkgs, list):
        raise bad("package must be a list")
    records: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str], int] = {}
    per_platform: dict[str, list[dict[str, str]]] = {}
    for i, p in enumerate(pkgs):
        platform, rec = _record(p, i, bad)
        at = (rec["kind"], rec["url"], str(rec.get("subdir", "")))
        if at not in seen:  # a noarch package is listed once per platform
            seen[at] = len(records)
            records.append(rec)
        refs = per_platform.setdefault(platform, [])
        ref = {rec["kind"]: rec["url"]}
        if ref not in refs:
            refs.append(ref)
    env = {"channels": [c if isinstance(c, Mapping) else {"url": c} for c in channels],
           "packages": {p: per_platform[p] for p in sorted(per_platform)}}
    return {"version": 5, "environments": {"default": env}, "packages": records}


def _record(p: Any, i: int, bad: Any) -> tuple[str, dict[str, Any]]:
    """``(platform, version-5 record)`` of legacy ``package[i]``."""
    if not isinstance(p, Mapping):
        raise bad(f"package[{i}] is not a mapping")
    platform = p.get("platform")
    if not isinstance(platform, str) or platform not in _PLATFORMS:
        raise bad(f"package[{i}].platform {one_line(repr(platform))} is not a conda platform")
    manager = p.get("manager")
    if manager not in ("conda", "pypi", "pip"):
        raise bad(f"package[{i}].manager must be conda, pypi or pip, not {one_line(repr(manager))}")
    for key in ("name", "url"):
        if not isinstance(p.get(key), str) or not p[key]:
            raise bad(f"package[{i}].{key} missing or not a string")
    if not isinstance(p.get("version"), (str, int, float)) or isinstance(p.get("version"), bool):
        raise bad(f"package[{i}].version missing or not a version")
    if "://" not in p["url"]:
        raise bad(f"package[{i}].url {one_line(p['url'])!r} is not a URL")
    hashes = p.get("hash")
    if hashes is not None and not isinstance(hashes, Mapping):
        raise bad(f"package[{i}].hash must be a mapping")
    md5 = hashes.get("md5") if hashes else None
    sha256 = hashes.get("sha256") if hashes else None
    for algo, value, size in (("md5", md5, 32), ("sha256", sha256, 64)):
        if value is not None and not (isinstance(value, str) and len(value) == size
                                      and all(c in "0123456789abcdefABCDEF" for c in value)):
            raise bad(f"package[{i}] ({one_line(p['name'])}): hash.{algo} is not a {size}-digit "
                      "hex digest")
    if manager == "conda" and not (isinstance(md5, str) or isinstance(sha256, str)):
        raise bad(f"package[{i}] ({one_line(p['name'])}): a conda entry needs an md5 or sha256 hash")
    kind = "conda" if manager == "conda" else "pypi"
    if kind == "pypi":
        _check_pypi(p, i, bad)
    rec: dict[str, Any] = {"kind": kind, "name": p["name"], "version": str(p["version"]),
                           "url": p["url"]}
    if isinstance(md5, str) and kind == "conda":
        rec["md5"] = md5
    if isinstance(sha256, str):
        rec["sha256"] = sha256
    for key in ("build", "subdir"):
        if isinstance(p.get(key), str):
            rec[key] = p[key]
    deps = p.get("dependencies")
    if isinstance(deps, Mapping):  # conda-lock's ``{name: spec}`` (rattler: MatchSpecMapOrVec)
        deps = [f"{k} {v}".strip() for k, v in deps.items()]
    if isinstance(deps, list) and kind == "conda":
        rec["depends"] = [d for d in deps if isinstance(d, str)]
    return platform, rec


def _check_pypi(p: Mapping[str, Any], i: int, bad: Any) -> None:
    """A PyPI entry's ``version`` is a PEP 440 version and its ``requires_dist`` (alias
    ``dependencies``) PEP 508 requirements, or a map of names to PEP 440 specifiers — rattler's
    ``pep440_rs::Version`` and ``Pep440MapOrVec``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        Version(str(p["version"]))
    except InvalidVersion:
        raise bad(f"package[{i}] ({one_line(p['name'])}): version "
                  f"{one_line(str(p['version']))!r} is not a PEP 440 version") from None
    deps = p.get("requires_dist", p.get("dependencies"))
    if deps is None:
        return
    items = deps.items() if isinstance(deps, Mapping) else deps if isinstance(deps, list) else None
    if items is None:
        raise bad(f"package[{i}] ({one_line(p['name'])}): requires_dist must be a list or a map")
    for item in items:
        try:
            if isinstance(deps, Mapping):
                Requirement(str(item[0]))
                SpecifierSet(str(item[1]))
            else:
                Requirement(str(item))
        except (InvalidRequirement, InvalidSpecifier):
            raise bad(f"package[{i}] ({one_line(p['name'])}): requirement "
                      f"{one_line(str(item if not isinstance(deps, Mapping) else ' '.join(map(str, item))))!r}"
                      " is not PEP 508") from None
