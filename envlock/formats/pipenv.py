"""pipenv's ``Pipfile.lock`` (a lock, JSON) and ``Pipfile`` (a spec, TOML), read as pipenv reads
them (pipenv's ``plette`` models; ``pipenv requirements``: ``requirement_from_lockfile`` and
``requirement_from_pipfile`` in ``pipenv/utils/dependencies.py``).

``Pipfile.lock``: ``_meta`` (``hash.sha256`` of the Pipfile it was locked from,
``pipfile-spec``, ``requires`` — ``python_version``/``python_full_version`` —, ``sources``: the
indexes) and one object per category: ``default`` (``pipenv install``), ``develop``
(``pipenv install --dev``) and any other category a Pipfile names.  Each entry maps a name to
``version`` (``"==1.2"``), ``hashes``, ``markers``, ``index``, ``extras``, or a VCS source
(``git``/``hg``/``svn``/``bzr`` + ``ref``), a ``file`` URL, a local ``path`` (``editable``: the
project itself).

``Pipfile``: ``[[source]]``, ``[requires]``, ``[packages]``, ``[dev-packages]`` and other
categories; an entry is ``"*"``, a specifier (``">=1"``, ``"==1.0"``; a bare version is
``==``), or a table (``version``, ``markers``, PEP 508 marker variables as keys —
``sys_platform = "== 'win32'"`` —, ``extras``, a VCS/``file``/``path`` source).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envlock._io import one_line
from envlock._names import canonicalize
from envlock._untrusted import check_hash, check_name, check_version
from envlock.errors import ManifestError
from envlock.formats._reading import Reading, Source, partial
from envlock.formats.locks import Locked, LockFile
from envlock.formats.pep508 import UNKNOWN, version_from_url

__all__ = ["is_pipfile", "is_pipfile_lock", "read_pipfile", "read_pipfile_lock",
           "pipfile_lock_reading", "pipfile_reading", "pip_marker"]

_VCS = ("git", "hg", "svn", "bzr")

#: PEP 508 marker variables pipenv accepts as keys of a Pipfile entry.
_MARKER_KEYS = ("os_name", "sys_platform", "platform_machine", "platform_python_implementation",
                "platform_release", "platform_system", "platform_version", "python_version",
                "python_full_version", "implementation_name", "implementation_version")

#: Pipfile tables that are not package categories.
_NOT_CATEGORIES = frozenset({"source", "requires", "pipenv", "scripts"})


def is_pipfile_lock(data: Mapping[str, Any], src: Any = None) -> bool:
    """Whether a JSON document is a ``Pipfile.lock``: ``_meta`` and a ``default``/``develop``."""
    return isinstance(data.get("_meta"), Mapping) and ("default" in data or "develop" in data)


def is_pipfile(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a TOML document is a ``Pipfile``: its name (``src``: a
    :class:`~envlock.formats._reading.Source`, or the file name), or ``[packages]``/
    ``[dev-packages]`` with only Pipfile tables besides."""
    base = src if isinstance(src, str) else src.base
    if "envlock" in data or "project" in data or "tool" in data:
        return False
    return base == "Pipfile" or base.endswith(".Pipfile") or (
        ("packages" in data or "dev-packages" in data) and isinstance(
            data.get("packages", data.get("dev-packages")), Mapping)
        and ("source" in data or "requires" in data))


def _err(name: str, what: str) -> ManifestError:
    return ManifestError(f"{name}: {what}")


def _vcs_version(vcs: str, ref: str | None) -> str:
    return f"{vcs} {ref}" if ref and re.fullmatch(r"[0-9a-f]{40}", ref) else UNKNOWN


def read_pipfile_lock(data: Mapping[str, Any], name: str
                      ) -> tuple[LockFile, list[dict[str, Any]], dict[str, Any]]:
    """The packages of a ``Pipfile.lock``.

    :returns: ``(lock, entries, meta)``: the :class:`LockFile` (kind ``Pipfile.lock``; groups
        ``""`` for ``default``, else the category's name), the ``[pip]`` entries (``name``,
        ``version``, ``marker``, ``hashes``, ``index``, ``url``/``vcs``/``commit``; the
        category in ``category``) and ``meta`` (``sha256``, ``sources``, ``requires``,
        ``categories``).
    :raises ManifestError: ``_meta`` or an entry of the wrong shape (one line naming it).
    """
    meta = data["_meta"]
    spec = meta.get("pipfile-spec")
    if spec is not None and (not isinstance(spec, int) or isinstance(spec, bool) or spec > 6):
        raise _err(name, f"Pipfile.lock pipfile-spec {one_line(str(spec))} is not supported "
                         "(pipenv writes 6)")
    h = meta.get("hash")
    sha = h.get("sha256") if isinstance(h, Mapping) else None
    sources = meta.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(s, Mapping) and isinstance(
            s.get("url"), str) for s in sources):
        raise _err(name, "_meta.sources must be a list of {name, url, verify_ssl}")
    requires = meta.get("requires") or {}
    if not isinstance(requires, Mapping):
        raise _err(name, "_meta.requires must be a table")
    out: list[Locked] = []
    entries: list[dict[str, Any]] = []
    projects: list[str] = []
    categories = [k for k in data if k != "_meta"]
    for cat in categories:
        section = data[cat]
        if not isinstance(section, Mapping):
            raise _err(name, f"{cat!r} must be an object of packages")
        group = "" if cat == "default" else cat
        for pname, info in section.items():
            where = f"{cat}.{one_line(str(pname), 80)}"
            if isinstance(info, str):  # pipenv's requirement_from_lockfile accepts "1.0"/"*"
                info = {"version": info}
            if not isinstance(info, Mapping):
                raise _err(name, f"{where} must be an object")
            entry, locked = _lock_entry(str(pname), info, where, name, group)
            if entry is None:
                projects.append(canonicalize(str(pname)))
                continue
            entry["category"] = cat
            entries.append(entry)
            out.append(locked)
    rp = requires.get("python_full_version") or requires.get("python_version")
    lock = LockFile("Pipfile.lock", (), tuple(out), projects=tuple(projects),
                    requires_python=f"=={rp}.*" if isinstance(rp, str) and rp.count(".") == 1
                    else (f"=={rp}" if isinstance(rp, str) and rp else None))
    info_meta = {"sha256": sha, "sources": [dict(s) for s in sources],
                 "requires": dict(requires), "categories": categories}
    return lock, entries, info_meta


#: ``(<a condition naming dependency_groups>) and (<the rest>)``, as pipenv writes a marker
#: converted from a pylock.toml.
_GROUP_AND = re.compile(r"\(([^)]*)\)\s+and\s+\((?P<rest>.+)\)", re.DOTALL)


def pip_marker(marker: str | None) -> str | None:
    """The marker pipenv installs a ``Pipfile.lock`` entry under: its ``markers`` less the
    pylock-only ``dependency_groups`` condition pipenv has already applied by the entry's
    category (pipenv's ``Lockfile._pip_marker``, ``pipenv/utils/locking.py``):
    ``"('dev' in dependency_groups) and (python_version >= '3.10')"`` → ``"python_version >=
    '3.10'"``; any other marker naming ``dependency_groups`` (``"'dev' in dependency_groups"``)
    → ``None``; a marker without it unchanged."""
    if not marker or "dependency_groups" not in marker:
        return marker
    m = _GROUP_AND.fullmatch(marker.strip())
    if m and re.search(r"\bdependency_groups\b", m.group(1)):
        return m.group("rest")
    return None


def _lock_entry(pname: str, info: Mapping[str, Any], where: str, name: str, group: str
                ) -> tuple[dict[str, Any] | None, Locked]:
    for key in ("version", "markers", "index", "ref"):
        if key in info and info[key] is not None and not isinstance(info[key], str):
            raise _err(name, f"{where}.{key} must be a string")
    hashes = info.get("hashes") or []
    if not isinstance(hashes, list) or not all(isinstance(x, str) for x in hashes):
        raise _err(name, f"{where}.hashes must be a list of strings")
    check_name(pname, f"{name}: {where}")  # pipenv's own models take PEP 508 names only
    for j, h in enumerate(hashes):
        check_hash(h, f"{name}: {where}.hashes[{j}]")
    marker = pip_marker(info.get("markers") or None)
    cname = canonicalize(pname)
    entry: dict[str, Any] = {"name": cname}
    vcs = next((v for v in _VCS if v in info), None)
    commit = None
    if vcs is not None:
        url = str(info[vcs])
        ref = info.get("ref") or None
        commit = ref if ref and re.fullmatch(r"[0-9a-f]{7,40}", ref) else None
        version = _vcs_version(vcs, ref)
        entry.update(url=f"{vcs}+{url}" if not url.startswith(f"{vcs}+") else url, vcs=vcs)
        if commit:
            entry["commit"] = commit
        if info.get("editable"):
            entry["origin"] = "editable"
    elif "file" in info:
        entry["url"] = str(info["file"])
        version = version_from_url(str(info["file"]))
    elif "path" in info:
        return None, Locked("pip", cname, UNKNOWN)  # a local project (`-e .`): the project
    else:
        raw = str(info.get("version") or "")
        version = raw[2:] if raw.startswith("==") and not raw.startswith("===") else (
            raw[3:] if raw.startswith("===") else (raw or UNKNOWN))
        if raw and not raw.startswith("=="):
            raise _err(name, f"{where}.version {one_line(raw)} is not a pin (==)")
        if raw.startswith("==") and not raw.startswith("==="):  # === pins any string (PEP 440)
            check_version(version, f"{name}: {where}.version")
    entry["version"] = version
    if marker:
        entry["marker"] = marker
    if hashes:
        entry["hashes"] = sorted(hashes)
    if info.get("index"):
        entry["index"] = info["index"]
    locked = Locked("pip", cname, version, marker=marker, vcs=vcs, commit=commit,
                    sha256=next((x.split(":", 1)[1] for x in sorted(hashes)
                                 if x.startswith("sha256:")), None) if len(hashes) == 1 else None,
                    groups=((group, None),))
    return entry, locked


def read_pipfile(data: Mapping[str, Any], name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The requirements of a ``Pipfile`` (a spec: what someone asked for).

    :returns: ``(entries, meta)``: ``[pip]`` entries (a pin ``==`` is a version, any other
        specifier a constraint; ``"*"`` any version; ``marker``; ``category``) and ``meta``
        (``sources``, ``requires``, ``categories``).
    :raises ManifestError: an entry of the wrong shape (one line naming it).
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    entries: list[dict[str, Any]] = []
    categories = [k for k, v in data.items() if k not in _NOT_CATEGORIES and isinstance(v, Mapping)]
    for cat in categories:
        for pname, spec in data[cat].items():
            where = f"[{cat}] {one_line(str(pname), 80)}"
            if isinstance(spec, str):
                spec = {"version": spec}
            if not isinstance(spec, Mapping):
                raise _err(name, f"{where} must be a version string or a table")
            entry: dict[str, Any] = {"name": canonicalize(str(pname)), "category": cat}
            markers = [str(spec["markers"])] if spec.get("markers") else []
            markers += [f"{k} {spec[k]}" for k in _MARKER_KEYS if spec.get(k)]
            if markers:
                entry["marker"] = " and ".join(markers if len(markers) == 1
                                               else [f"({m})" for m in markers])
            vcs = next((v for v in _VCS if v in spec), None)
            if vcs is not None:
                url = str(spec[vcs])
                ref = spec.get("ref")
                entry.update(url=(url if url.startswith(f"{vcs}+") else f"{vcs}+{url}")
                             + (f"@{ref}" if ref else ""), vcs=vcs,
                             version=_vcs_version(vcs, str(ref) if ref else None))
            elif "file" in spec:
                entry.update(url=str(spec["file"]), version=version_from_url(str(spec["file"])))
            elif "path" in spec:
                continue  # a local project (`path = "."`): the project itself
            else:
                raw = str(spec.get("version") or "*").strip()
                if raw == "*" or not raw:
                    entry["version"] = ""
                    entry["constraint"] = {"kind": "pep440", "version": ""}
                else:
                    text = raw if raw[0] in "=<>!~" else f"=={raw}"
                    try:
                        specs = list(SpecifierSet(text))
                    except InvalidSpecifier:
                        raise _err(name, f"{where}: {one_line(raw)} is not a version "
                                         "specifier (PEP 440)") from None
                    if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
                        entry["version"] = specs[0].version
                    else:
                        entry["version"] = str(SpecifierSet(text))
                        entry["constraint"] = {"kind": "pep440", "version": entry["version"]}
            entries.append(entry)
    sources = data.get("source") or []
    requires = data.get("requires") or {}
    meta = {"sources": [dict(s) for s in sources if isinstance(s, Mapping)] if isinstance(
        sources, list) else [], "requires": dict(requires) if isinstance(requires, Mapping) else {},
            "categories": categories}
    return entries, meta


def pipfile_lock_reading(data: Mapping[str, Any], src: Source) -> Reading:
    """The :class:`Reading` of a ``Pipfile.lock`` (:func:`read_pipfile_lock`): complete.

    :raises ManifestError: as :func:`read_pipfile_lock`.
    """
    lock, entries, meta = read_pipfile_lock(data, src.name)
    out = partial([], entries, "Pipfile.lock")
    out.setdefault("pip", {"status": "ok", "source": "Pipfile.lock", "packages": []})
    return Reading("Pipfile.lock", out, "complete", (), lock, meta)


def pipfile_reading(data: Mapping[str, Any], src: Source) -> Reading:
    """The :class:`Reading` of a ``Pipfile`` (:func:`read_pipfile`): a spec.

    :raises ManifestError: as :func:`read_pipfile`.
    """
    entries, meta = read_pipfile(data, src.name)
    out = partial([], entries, "Pipfile")
    out.setdefault("pip", {"status": "ok", "source": "Pipfile", "packages": []})
    return Reading("Pipfile", out, "partial", (), None, meta)
