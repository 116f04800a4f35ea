"""Lockfiles: conda-lock, PEP 751 ``pylock.toml``, ``uv.lock``, ``poetry.lock``, ``pdm.lock``,
``pixi.lock``.

Each is read into :class:`Locked` entries (manager, name, version, platform, build, source,
marker, hashes), validated by the reference parser where one exists:

* ``conda-lock.yml`` — conda-lock's own pydantic model (``conda_lock.lockfile.v1.models.Lockfile``
  then ``lockfile_v1_to_v2``, as ``parse_conda_lock_file`` does), when conda-lock is installed;
  otherwise a structural check of the same required keys and types;
* ``pylock.toml`` — :meth:`packaging.pylock.Pylock.from_dict` (packaging >= 25), which also
  refuses a ``lock-version`` it does not support (PEP 751);
* ``uv.lock`` (uv's "lockfile" docs: ``version``, ``[[package]]`` with ``name``, ``version``,
  ``source`` = ``registry``/``git``/``path``/``directory``/``editable``/``virtual``/``url``,
  ``resolution-markers``, ``sdist``/``wheels`` with ``hash``), ``poetry.lock``
  (``[[package]]`` ``name``, ``version``, ``files`` ``[{file, hash}]``, ``[package.source]``
  ``type``/``url``/``reference``/``resolved_reference``; ``[metadata]`` ``lock-version``,
  ``content-hash``) and ``pdm.lock`` (``[metadata]`` ``lock_version``, ``content_hash``;
  ``[[package]]`` ``name``, ``version``, ``marker``, ``files``, ``git``/``revision``,
  ``path``/``editable``) have no reference parser in Python: read with a TOML parser and their
  documented keys, each key type-checked;
* ``pixi.lock`` (YAML, ``version`` 4–7): ``environments.<env>.packages.<platform>`` list the
  ``conda``/``pypi`` package URLs; ``packages`` holds their records.

Editable, virtual and local-directory entries are the project itself, not packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from envlock._io import one_line
from envlock._names import canonicalize
from envlock.errors import ManifestError
from envlock.formats import conda as _conda
from envlock.formats.pep508 import UNKNOWN, version_from_url

__all__ = ["Locked", "LockFile", "check_conda_lock_layout", "read_conda_lock", "read_pylock", "read_uv_lock",
           "read_poetry_lock", "read_pdm_lock", "read_pixi_lock", "validate_conda_lock",
           "validate_pylock"]


@dataclass(frozen=True, slots=True)
class Locked:
    """One locked package.

    :ivar manager: ``"conda"`` or ``"pip"``; ``name``: exact for conda, PEP 503 for pip.
    :ivar version: the pinned version (:data:`~envlock.formats.pep508.UNKNOWN` when none).
    :ivar platform: the conda subdir it is locked for (conda-lock, pixi), else ``None``.
    :ivar build, md5, cuda: conda build string, md5 and ``__cuda`` requirement.
    :ivar marker: the PEP 508 marker under which it applies (pylock, uv, pdm), else ``None``.
    :ivar vcs, commit: a VCS source and its commit.
    :ivar groups: which installs need it, as ``(group, marker)`` pairs: group ``""`` is the
        default install (``uv sync --no-dev``, poetry's ``main``, pdm's ``default``), others
        a dependency group or ``extra:<name>``; the marker (``None``: always) is the condition
        of the dependency edges that reach it (``colorama`` only where
        ``sys_platform == 'win32'``).  ``()``: the format does not say (every entry is needed).
    """

    manager: str
    name: str
    version: str
    platform: str | None = None
    build: str | None = None
    channel: str | None = None
    md5: str | None = None
    sha256: str | None = None
    cuda: str | None = None
    marker: str | None = None
    vcs: str | None = None
    commit: str | None = None
    groups: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class LockFile:
    """A lockfile read: its ``kind``, the platforms it locks (conda subdirs; ``()`` for the pip
    lockfiles, which lock for every platform through markers) and its packages."""

    kind: str
    platforms: tuple[str, ...]
    packages: tuple[Locked, ...]


def _err(name: str, what: str) -> ManifestError:
    return ManifestError(f"{name}: {what}")


# -- conda-lock ------------------------------------------------------------------------------

def _first_pydantic(exc: Any) -> str:
    try:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{first['msg']} at {where}"
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def validate_conda_lock(data: Any, name: str) -> Any:
    """Validate a parsed conda-lock document as conda-lock's own parser does.

    :returns: conda-lock's v2 ``Lockfile`` model when conda-lock is installed, else ``None``
        (after the structural check of the version-1 layout).
    :raises ManifestError: ``<name>: not a valid conda-lock file (<reason>)``.
    """
    def bad(reason: str) -> ManifestError:
        return _err(name, f"not a valid conda-lock file ({one_line(reason)})")

    if not isinstance(data, Mapping):
        raise bad("top level is not a mapping")
    try:
        import pydantic  # noqa: PLC0415
        from conda_lock.lockfile import lockfile_v1_to_v2  # noqa: PLC0415
        from conda_lock.lockfile.v1.models import Lockfile as LockfileV1  # noqa: PLC0415
        from conda_lock.lockfile.v2prelim.models import Lockfile  # noqa: PLC0415
    except ImportError:
        _structural_conda_lock(data, bad)
        return None
    content = dict(data)
    version = content.pop("version", None)
    try:
        if version == 1 and not isinstance(version, bool):
            lock = lockfile_v1_to_v2(LockfileV1.model_validate(content))
        elif version == 2 and not isinstance(version, bool):
            lock = Lockfile.model_validate(content)
        elif version is None:
            raise bad("no version")
        else:
            raise bad(f"unknown version {version!r}")
        in_file_order = list(lock.package)
        lock.toposort_inplace()  # as parse_conda_lock_file does (it can refuse a file too)
        lock.package = in_file_order
    except pydantic.ValidationError as exc:
        raise bad(_first_pydantic(exc)) from None
    except ManifestError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise bad(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return lock


def _structural_conda_lock(data: Mapping[str, Any], bad: Any) -> None:
    if data.get("version") != 1:
        raise bad(f"version {data.get('version')!r} is not 1")
    meta = data.get("metadata")
    if not isinstance(meta, Mapping):
        raise bad("no metadata mapping")
    for key, typ in (("content_hash", Mapping), ("channels", list), ("platforms", list),
                     ("sources", list)):
        if not isinstance(meta.get(key), typ):
            raise bad(f"metadata.{key} missing or of the wrong type")
    pkgs = data.get("package")
    if not isinstance(pkgs, list):
        raise bad("no package list")
    for i, p in enumerate(pkgs):
        if not isinstance(p, Mapping):
            raise bad(f"package[{i}] is not a mapping")
        for key in ("name", "version", "manager", "platform", "url"):
            if not isinstance(p.get(key), str):
                raise bad(f"package[{i}].{key} missing or not a string")
        if p["manager"] not in ("conda", "pip"):
            raise bad(f"package[{i}].manager must be conda or pip")
        if not isinstance(p.get("hash"), Mapping):
            raise bad(f"package[{i}].hash missing")
        if p["manager"] == "conda" and not p["hash"].get("md5"):
            raise bad(f"package[{i}]: conda package hashes must use MD5")
        if "optional" not in p:
            raise bad(f"package[{i}].optional missing")


def check_conda_lock_layout(data: Any, name: str) -> None:
    """The structural check used without conda-lock: the keys and types conda-lock's version-1
    model requires (``metadata.content_hash/channels/platforms/sources``; each package's
    ``name``, ``version``, ``manager`` (conda or pip), ``platform``, ``url``, ``hash`` with an
    md5 for conda packages, ``optional``).

    :raises ManifestError: ``<name>: not a valid conda-lock file (<reason>)``.
    """
    def bad(reason: str) -> ManifestError:
        return _err(name, f"not a valid conda-lock file ({one_line(reason)})")

    if not isinstance(data, Mapping):
        raise bad("top level is not a mapping")
    _structural_conda_lock(data, bad)


def read_conda_lock(data: Any, name: str) -> LockFile:
    """The packages of a conda-lock file (every platform), validated by
    :func:`validate_conda_lock`; the conda build string comes from the record or its URL."""
    model = validate_conda_lock(data, name)
    out: list[Locked] = []
    if model is not None:
        rows = [(p.manager, p.name, p.version, p.platform, p.url, p.hash.md5, p.hash.sha256,
                 dict(p.dependencies), p.build) for p in model.package]
        platforms = tuple(str(p) for p in model.metadata.platforms)
    else:
        rows = [(p["manager"], p["name"], p["version"], p["platform"], p["url"],
                 p["hash"].get("md5"), p["hash"].get("sha256"),
                 p.get("dependencies") if isinstance(p.get("dependencies"), Mapping) else {},
                 p.get("build")) for p in data["package"]]
        platforms = tuple(str(p) for p in data["metadata"]["platforms"])
    for manager, pname, version, platform, url, md5, sha256, deps, build in rows:
        channel = None
        if manager == "conda":
            try:
                parsed = _conda.parse_url(url)
                build = build or parsed["build"]
                channel = parsed["channel"]
            except ManifestError:
                pass
        cuda = str(deps["__cuda"] or "").strip() if "__cuda" in deps else None
        out.append(Locked(manager=manager, name=pname if manager == "conda" else canonicalize(pname),
                          version=str(version), platform=str(platform), build=build,
                          channel=channel, md5=md5 if manager == "conda" else None, sha256=sha256,
                          cuda=cuda))
    return LockFile("conda-lock", platforms, tuple(out))


# -- pylock (PEP 751) ------------------------------------------------------------------------

def validate_pylock(data: Any, name: str) -> Any:
    """Validate a parsed ``pylock.toml`` with :mod:`packaging.pylock` (packaging >= 25).

    :returns: the ``Pylock`` object, or ``None`` with packaging < 25 (after checking
        ``lock-version`` 1.x and a ``packages`` array).
    :raises ManifestError: ``<name>: not a valid PEP 751 lock file (<reason>)``.
    """
    if not isinstance(data, Mapping):
        raise _err(name, "not a valid PEP 751 lock file (top level is not a table)")
    try:
        from packaging.pylock import Pylock, PylockValidationError  # noqa: PLC0415
    except ImportError:
        version = str(data.get("lock-version", ""))
        if version.split(".")[0] != "1" or not isinstance(data.get("packages"), list):
            raise _err(name, f"not a valid PEP 751 lock file (lock-version "
                             f"{one_line(version) or 'missing'}, or no packages array)") from None
        return None
    try:
        return Pylock.from_dict(dict(data))
    except PylockValidationError as exc:
        raise _err(name, f"not a valid PEP 751 lock file ({one_line(str(exc))})") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise _err(name, f"not a valid PEP 751 lock file ({one_line(str(exc) or type(exc).__name__)})") from None


def read_pylock(data: Any, name: str) -> LockFile:
    """The packages of a ``pylock.toml``; directory (project) entries are left out."""
    lock = validate_pylock(data, name)
    out = []
    if lock is not None:
        for p in lock.packages:
            if p.directory is not None:
                continue  # the project (or a local directory) itself
            version = str(p.version) if p.version else None
            if version is None and p.archive is not None:
                version = version_from_url(p.archive.url or p.archive.path or "")
            if version is None and p.wheels:
                version = version_from_url(p.wheels[0].name or p.wheels[0].url or "")
            out.append(Locked("pip", canonicalize(str(p.name)), version or UNKNOWN,
                              marker=str(p.marker) if p.marker else None,
                              vcs=p.vcs.type if p.vcs else None,
                              commit=p.vcs.commit_id if p.vcs else None))
    else:
        for p in data["packages"]:
            if not isinstance(p, Mapping) or not isinstance(p.get("name"), str) or "directory" in p:
                continue
            raw_vcs = p.get("vcs")
            vcs = raw_vcs if isinstance(raw_vcs, Mapping) else {}
            out.append(Locked("pip", canonicalize(p["name"]), str(p.get("version") or UNKNOWN),
                              marker=str(p["marker"]) if p.get("marker") else None,
                              vcs=vcs.get("type"), commit=vcs.get("commit-id")))
    return LockFile("pylock", (), tuple(out))


# -- uv.lock, poetry.lock, pdm.lock ----------------------------------------------------------

@overload
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: Literal[True] = True) -> str: ...
@overload
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: bool) -> str | None: ...
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: bool = True) -> str | None:
    v = p.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise _err(name, f"{where}.{key} must be a non-empty string")
    return v


def _packages(data: Mapping[str, Any], key: str, name: str) -> list[Mapping[str, Any]]:
    pkgs = data.get(key, [])
    if not isinstance(pkgs, list):
        raise _err(name, f"'{key}' must be an array of tables")
    for i, p in enumerate(pkgs):
        if not isinstance(p, Mapping):
            raise _err(name, f"{key}[{i}] is not a table")
    return pkgs


def _sha(hash_text: Any) -> str | None:
    return hash_text[7:] if isinstance(hash_text, str) and hash_text.startswith("sha256:") else None


def read_uv_lock(data: Mapping[str, Any], name: str) -> LockFile:
    """The packages of a ``uv.lock`` (``version`` 1).

    Entries whose ``source`` is ``editable``, ``virtual`` or ``directory`` are the workspace's
    own projects and left out; a project locked in several versions for different
    ``resolution-markers`` gives one entry per version, with those markers.  Which installs
    need each entry (:attr:`Locked.groups`) is read from the dependency graph as ``uv sync``
    walks it (:func:`_uv_reach`).
    """
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != 1:
        raise _err(name, f"uv.lock version {one_line(repr(version))} is not supported (1)")
    out = []
    entries = _packages(data, "package", name)
    reach = _uv_reach(entries, data.get("manifest"), name)
    for i, p in enumerate(entries):
        where = f"package[{i}]"
        pname = _str(p, "name", where, name)
        source = p.get("source", {})
        if not isinstance(source, Mapping):
            raise _err(name, f"{where}.source must be a table")
        if {"editable", "virtual", "directory"} & set(source):
            continue
        pversion = _str(p, "version", where, name, required=False)
        vcs = commit = None
        if "git" in source:
            git = str(source["git"])
            vcs, commit = "git", (git.rsplit("#", 1)[1] if "#" in git else None)
        markers = p.get("resolution-markers")
        if markers is not None and (not isinstance(markers, list)
                                    or not all(isinstance(m, str) for m in markers)):
            raise _err(name, f"{where}.resolution-markers must be an array of strings")
        marker = " or ".join(f"({m})" for m in markers) if markers else None
        raw_sdist = p.get("sdist")
        sdist = raw_sdist if isinstance(raw_sdist, Mapping) else {}
        out.append(Locked("pip", canonicalize(pname), pversion or UNKNOWN, marker=marker,
                          vcs=vcs, commit=commit, sha256=_sha(sdist.get("hash")),
                          groups=reach.get(i, ()) if reach is not None else ()))
    return LockFile("uv.lock", (), tuple(out))


#: at most this many distinct edge conditions are kept per package and group; beyond it the
#: package counts as needed always (the conservative answer: verify then asks for it).
_MAX_CONDITIONS = 16
#: the "extra" of a walk state that stands for a member's ``dev-dependencies`` group
_DEV = "\0dev:"


def _uv_edges(p: Mapping[str, Any], key: str, name: str) -> dict[str, list[Mapping[str, Any]]]:
    """``{group: [edge, ...]}`` of ``p[key]`` (``dependencies``: group ``""``; the tables
    ``optional-dependencies`` / ``dev-dependencies``: one list per extra or group)."""
    raw = p.get(key)
    if raw is None:
        return {}
    if key == "dependencies":
        raw = {"": raw}
    if not isinstance(raw, Mapping):
        raise _err(name, f"package {p.get('name')!r}: {key} must be a table")
    out: dict[str, list[Mapping[str, Any]]] = {}
    for group, edges in raw.items():
        if not isinstance(edges, list) or not all(isinstance(e, Mapping) and isinstance(e.get("name"), str)
                                                  for e in edges):
            raise _err(name, f"package {p.get('name')!r}: {key} entries must be tables with a name")
        out[str(group)] = edges
    return out


def _uv_reach(entries: list[Mapping[str, Any]], manifest: Any,
              name: str) -> dict[int, tuple[tuple[str, str | None], ...]] | None:
    """For each entry index, the installs that need it: ``(group, marker)`` pairs, group ``""``
    for the default install (the workspace members' ``dependencies``), ``<group>`` for a
    ``[package.dev-dependencies]`` group, ``extra:<name>`` for an extra of a member; markers
    of the edges on the way are joined with ``and``, alternatives with ``or``.

    The rule is uv's: ``uv sync`` installs the members, their dependencies and, transitively,
    the extras each edge names (``{ name = "x", extra = ["y"] }`` pulls in x's
    ``optional-dependencies.y``); an edge's ``marker`` limits it to where the marker holds.
    ``None`` when the lock names no member (the format then does not say).
    """
    members: set[str] = set()
    if isinstance(manifest, Mapping) and isinstance(manifest.get("members"), list):
        members = {canonicalize(str(m)) for m in manifest["members"]}
    by_name: dict[str, list[int]] = {}
    for i, p in enumerate(entries):
        if isinstance(p.get("name"), str):
            by_name.setdefault(canonicalize(p["name"]), []).append(i)
    roots = []
    for i, p in enumerate(entries):
        source = p.get("source")
        if not isinstance(source, Mapping) or not isinstance(p.get("name"), str):
            continue
        local = {"editable", "virtual"} & set(source)
        if canonicalize(p["name"]) in members or any(source.get(k) == "." for k in local):
            roots.append(i)
    if not roots:
        return None
    # state: (entry, extra or None, group); value: the conditions (frozensets of markers,
    # joined with "and") under which it is reached.  An empty frozenset: always.
    reached: dict[tuple[int, str | None, str], set[frozenset[str]]] = {}
    todo: list[tuple[int, str | None, str, frozenset[str]]] = []

    def visit(i: int, extra: str | None, group: str, cond: frozenset[str]) -> None:
        have = reached.setdefault((i, extra, group), set())
        if frozenset() in have or cond in have:
            return
        if not cond or len(have) >= _MAX_CONDITIONS:
            have.clear()
            cond = frozenset()
        have.add(cond)
        todo.append((i, extra, group, cond))

    for r in roots:
        p = entries[r]
        visit(r, None, "", frozenset())
        for ex in _uv_edges(p, "optional-dependencies", name):
            visit(r, ex, f"extra:{ex}", frozenset())
        for group in _uv_edges(p, "dev-dependencies", name):
            visit(r, _DEV + group, group, frozenset())
    steps = 0
    while todo:
        steps += 1
        if steps > 200_000:  # a pathological lock: stop refining, say "always" for the rest
            for key in reached:
                reached[key] = {frozenset()}
            break
        i, extra, group, cond = todo.pop()
        p = entries[i]
        if extra is None:
            edges = _uv_edges(p, "dependencies", name).get("", [])
        elif extra.startswith(_DEV):
            edges = _uv_edges(p, "dev-dependencies", name).get(extra[len(_DEV):], [])
        else:
            edges = _uv_edges(p, "optional-dependencies", name).get(extra, [])
        for e in edges:
            em = e.get("marker")
            c = cond | {em} if isinstance(em, str) and em.strip() else cond
            targets = by_name.get(canonicalize(e["name"]), [])
            if "version" in e and len(targets) > 1:
                targets = [t for t in targets if entries[t].get("version") == e["version"]] or targets
            raw_extras = e.get("extra")
            extras = raw_extras if isinstance(raw_extras, list) else []
            for t in targets:
                visit(t, None, group, c)
                for x in extras:
                    visit(t, str(x), group, c)
    out: dict[int, dict[str, set[frozenset[str]]]] = {}
    for (i, _extra, group), conds in reached.items():
        out.setdefault(i, {}).setdefault(group, set()).update(conds)

    def marker(conds: set[frozenset[str]]) -> str | None:
        if frozenset() in conds:
            return None
        alts = sorted(" and ".join(f"({m})" for m in sorted(c)) for c in conds)
        if len(alts) == 1:
            return alts[0]
        return " or ".join(f"({a})" if " and " in a else a for a in alts)

    return {i: tuple((g, marker(c)) for g, c in sorted(groups.items())) for i, groups in out.items()}


def read_poetry_lock(data: Mapping[str, Any], name: str) -> LockFile:
    """The packages of a ``poetry.lock`` (``[metadata] lock-version`` 1.x or 2.x).

    ``[package.source] type = "directory"`` (a path dependency, often the project) is left
    out; ``type = "git"`` keeps ``resolved_reference`` as the commit.
    """
    meta = data.get("metadata")
    if not isinstance(meta, Mapping):
        raise _err(name, "poetry.lock has no [metadata] table")
    lv = meta.get("lock-version")
    if lv is not None and (not isinstance(lv, str) or lv.split(".")[0] not in ("1", "2")):
        raise _err(name, f"poetry.lock lock-version {one_line(repr(lv))} is not supported (1.x, 2.x)")
    out = []
    for i, p in enumerate(_packages(data, "package", name)):
        where = f"package[{i}]"
        pname = _str(p, "name", where, name)
        pversion = _str(p, "version", where, name)
        source = p.get("source", {})
        if not isinstance(source, Mapping):
            raise _err(name, f"{where}.source must be a table")
        kind = source.get("type")
        if kind in ("directory",) or p.get("develop") is True:
            continue
        commit = source.get("resolved_reference") if kind == "git" else None
        out.append(Locked("pip", canonicalize(pname), pversion,
                          vcs="git" if kind == "git" else None,
                          commit=str(commit) if commit else None,
                          groups=_poetry_groups(p, where, name)))
    return LockFile("poetry.lock", (), tuple(out))


def _poetry_groups(p: Mapping[str, Any], where: str, name: str) -> tuple[tuple[str, str | None], ...]:
    """:attr:`Locked.groups` of a poetry.lock entry: lock-version 2 lists ``groups``
    (``"main"`` is the default install), 1.x a ``category`` (``"main"``/``"dev"``);
    ``optional = true`` means only an extra pulls it in (``poetry install -E``).  A
    ``markers`` string (lock-version 2) is the condition; a per-group table of markers keeps
    each group's."""
    optional = p.get("optional") is True
    groups = p.get("groups")
    if groups is None:
        cat = p.get("category")
        groups = [cat] if isinstance(cat, str) else []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _err(name, f"{where}.groups must be an array of strings")
    if not groups:
        return (("extra:*", None),) if optional else ()
    markers = p.get("markers")
    out = []
    for g in groups:
        m = markers.get(g) if isinstance(markers, Mapping) else markers
        m = m if isinstance(m, str) and m.strip() else None
        group = "" if g == "main" else g
        if optional and group == "":
            group = "extra:*"
        out.append((group, m))
    return tuple(sorted(set(out), key=lambda x: (x[0], x[1] or "")))


def read_pdm_lock(data: Mapping[str, Any], name: str) -> LockFile:
    """The packages of a ``pdm.lock`` (``[metadata] lock_version`` 4.x).

    ``editable = true`` or a ``path`` entry is a local project, left out; ``git`` +
    ``revision`` keeps the commit.
    """
    meta = data.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("lock_version"), str):
        raise _err(name, "pdm.lock has no [metadata] lock_version")
    if meta["lock_version"].split(".")[0] != "4":
        raise _err(name, f"pdm.lock lock_version {one_line(meta['lock_version'])} is not supported (4.x)")
    out = []
    for i, p in enumerate(_packages(data, "package", name)):
        where = f"package[{i}]"
        pname = _str(p, "name", where, name)
        pversion = _str(p, "version", where, name, required=False)
        if p.get("editable") is True or "path" in p:
            continue
        marker = p.get("marker")
        if marker is not None and not isinstance(marker, str):
            raise _err(name, f"{where}.marker must be a string")
        git = p.get("git")
        groups = p.get("groups")
        if groups is not None and (not isinstance(groups, list)
                                   or not all(isinstance(g, str) for g in groups)):
            raise _err(name, f"{where}.groups must be an array of strings")
        out.append(Locked("pip", canonicalize(pname), pversion or UNKNOWN, marker=marker or None,
                          vcs="git" if git else None,
                          commit=str(p["revision"]) if git and p.get("revision") else None,
                          # pdm's "default" group is what `pdm install --prod` installs
                          groups=tuple(sorted(("" if g == "default" else g, None)
                                              for g in set(groups or ())))))
    return LockFile("pdm.lock", (), tuple(out))


# -- pixi.lock -------------------------------------------------------------------------------

def read_pixi_lock(data: Mapping[str, Any], name: str, environment: str = "default") -> LockFile:
    """The packages of ``environment`` in a ``pixi.lock`` (YAML, ``version`` 4–7), every platform.

    :raises ManifestError: not that layout, or no such environment.
    """
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 4 <= version <= 7:
        raise _err(name, f"pixi.lock version {one_line(repr(version))} is not supported (4-7)")
    envs = data.get("environments")
    if not isinstance(envs, Mapping) or not isinstance(envs.get(environment), Mapping):
        raise _err(name, f"pixi.lock has no environment {environment!r}")
    records: dict[str, Mapping[str, Any]] = {}
    for i, rec in enumerate(_packages(data, "packages", name)):
        url = rec.get("conda") or rec.get("pypi")
        if not isinstance(url, str):
            raise _err(name, f"packages[{i}] has no conda or pypi URL")
        records[url] = rec
    per_platform = envs[environment].get("packages")
    if not isinstance(per_platform, Mapping):
        raise _err(name, f"environments.{environment}.packages must be a mapping")
    out = []
    for platform, refs in per_platform.items():
        if not isinstance(refs, list):
            raise _err(name, f"environments.{environment}.packages.{one_line(str(platform))} must be a list")
        for ref in refs:
            if not isinstance(ref, Mapping):
                raise _err(name, f"an entry of environments.{environment}.packages is not a mapping")
            if "conda" in ref and isinstance(ref["conda"], str):
                rec = records.get(ref["conda"], {})
                try:
                    parsed = _conda.parse_url(ref["conda"])
                except ManifestError:
                    continue  # a source (path) package: the project
                out.append(Locked("conda", str(rec.get("name") or parsed["name"]),
                                  str(rec.get("version") or parsed["version"]),
                                  platform=str(platform), build=str(rec.get("build") or parsed["build"]),
                                  channel=parsed["channel"],
                                  md5=rec.get("md5") if isinstance(rec.get("md5"), str) else None))
            elif "pypi" in ref and isinstance(ref["pypi"], str):
                rec = records.get(ref["pypi"], {})
                if rec.get("editable") is True or not isinstance(rec.get("name"), str):
                    continue
                out.append(Locked("pip", canonicalize(rec["name"]),
                                  str(rec.get("version") or version_from_url(ref["pypi"])),
                                  platform=str(platform)))
    return LockFile("pixi.lock", tuple(str(p) for p in per_platform), tuple(out))


def sniff_toml_lock(data: Mapping[str, Any]) -> str | None:
    """Which TOML lockfile ``data`` is: ``"pylock"``, ``"uv.lock"``, ``"poetry.lock"``,
    ``"pdm.lock"``, or ``None``."""
    if "lock-version" in data and "packages" in data:
        return "pylock"
    meta = data.get("metadata")
    if isinstance(meta, Mapping):
        if "lock_version" in meta:
            return "pdm.lock"
        if "content-hash" in meta or "lock-version" in meta:
            return "poetry.lock"
    if "version" in data and "package" in data and ("requires-python" in data or "revision" in data
                                                     or isinstance(data.get("package"), list)):
        return "uv.lock"
    return None

