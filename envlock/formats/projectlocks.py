"""The project lockfiles of uv, poetry and pdm: ``uv.lock``, ``poetry.lock``, ``pdm.lock``.

None has a reference parser in Python; each is read with a TOML parser and its documented keys
(uv's "lockfile" docs, poetry's and pdm's lock layouts), each key type-checked, into
:class:`~envlock.formats.locks.Locked` entries — with which installs need each package
(:attr:`~envlock.formats.locks.Locked.groups`): uv's dependency graph walked as ``uv sync``
walks it, poetry's and pdm's per-package ``groups``.  Editable, virtual and local-directory
entries are the project itself, not packages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from envlock._io import one_line
from envlock._names import canonicalize
from envlock.formats.lockfields import lock_entries
from envlock.formats.locks import (Locked, LockFile, _err, _name, _sha, _str,
                                   sniff_toml_lock)
from envlock.formats.pep508 import UNKNOWN

__all__ = ["read_uv_lock", "read_poetry_lock", "read_pdm_lock", "is_uv_lock", "is_poetry_lock",
           "is_pdm_lock", "uv_default_groups", "declared_choices"]


def is_uv_lock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a TOML document is a ``uv.lock`` (``version`` + ``[[package]]``)."""
    return sniff_toml_lock(data) == "uv.lock"


def is_poetry_lock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a TOML document is a ``poetry.lock`` (``[metadata]`` ``content-hash`` or
    ``lock-version``)."""
    return sniff_toml_lock(data) == "poetry.lock"


def is_pdm_lock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a TOML document is a ``pdm.lock`` (``[metadata] lock_version``)."""
    return sniff_toml_lock(data) == "pdm.lock"


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
    projects: list[str] = []
    entries = lock_entries(data, name)
    names = [_name(p, f"package[{i}]", name) for i, p in enumerate(entries)]  # before the graph
    reach = _uv_reach(entries, data.get("manifest"), name)
    for i, (p, pname) in enumerate(zip(entries, names)):
        where = f"package[{i}]"
        source = p.get("source", {})
        if not isinstance(source, Mapping):
            raise _err(name, f"{where}.source must be a table")
        if {"editable", "virtual", "directory"} & set(source):
            projects.append(canonicalize(pname))
            continue
        pversion = _str(p, "version", where, name, required=False)
        vcs = commit = None
        if "git" in source:
            vcs, commit = "git", _uv_git_commit(str(source["git"]), f"{where}.source", name)
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
    rp = data.get("requires-python")
    envs = data.get("supported-markers") or data.get("environments")
    return LockFile("uv.lock", (), tuple(out), projects=tuple(projects),
                    requires_python=rp if isinstance(rp, str) and rp.strip() else None,
                    environments=tuple(e for e in envs if isinstance(e, str))
                    if isinstance(envs, list) else (),
                    conflicts=_uv_conflicts(data.get("conflicts"), name),
                    choices=declared_choices("uv.lock", data, out))


_FULL_COMMIT = re.compile(r"[0-9a-f]{40}")


def _uv_git_commit(git: str, where: str, name: str) -> str | None:
    """The commit of a uv.lock ``source = { git = "URL?rev=REF#COMMIT" }``.  uv refuses the
    lock when ``rev`` is itself a full commit that is not the precise one (uv-git's
    ``GitUrl::from_commit``: "Exact Git revision … does not match precise commit …").

    :raises ManifestError: that mismatch (the URL's credentials left out).
    """
    url, _, commit = git.partition("#")
    query = url.partition("?")[2]
    rev = next((v for k, _, v in (q.partition("=") for q in query.split("&")) if k == "rev"), "")
    if commit and _FULL_COMMIT.fullmatch(rev.lower()) and rev.lower() != commit.lower():
        raise _err(name, f"{where}: exact Git revision {rev} does not match precise commit "
                         f"{commit} (uv refuses the lock)")
    return commit or None


def _uv_conflicts(raw: Any, name: str) -> tuple[frozenset[str], ...]:
    """uv.lock's ``conflicts = [[{ package, extra }|{ package, group }, ...], ...]`` as
    :attr:`LockFile.conflicts` (``"extra:<name>"`` / ``"<group>"``, PEP 685-normalized)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(s, list) for s in raw):
        raise _err(name, "conflicts must be an array of arrays")
    out = []
    for s in raw:
        items = set()
        for item in s:
            if not isinstance(item, Mapping):
                raise _err(name, "conflicts entries must be tables")
            if isinstance(item.get("extra"), str):
                items.add(f"extra:{canonicalize(item['extra'])}")
            elif isinstance(item.get("group"), str):
                items.add(canonicalize(item["group"]))
        if len(items) > 1:
            out.append(frozenset(items))
    return tuple(out)


def uv_default_groups(lock_path: str | os.PathLike[str],
                      choices: Iterable[str]) -> tuple[str, ...]:
    """The groups ``uv sync`` installs with no ``--group``/``--no-dev`` for the ``uv.lock`` at
    ``lock_path``: ``[tool.uv] default-groups`` of the ``pyproject.toml`` beside it (a list of
    names, or ``"all"``: every group of ``choices``), else ``dev`` (uv's documented default,
    docs.astral.sh/uv "Default groups").  The file is untrusted: read with
    :func:`envlock.manifest._toml.load_file` (a regular file, at most 64 MiB, nesting bounded).

    :param choices: the lock's extras (``extra:<name>``) and groups, in
        :class:`envlock._selection.Selection`'s words.
    :returns: PEP 685-normalized group names, sorted (those the lock lacks included: the
        caller intersects).
    :raises ManifestError: that pyproject.toml is unreadable or malformed, or its
        ``default-groups`` is neither ``"all"`` nor a list of strings (uv refuses it too).
    """
    from envlock.manifest._toml import load_file

    pyproject = Path(lock_path).parent / "pyproject.toml"
    if not pyproject.is_file():
        return ("dev",)
    doc = load_file(pyproject)
    tool = doc.get("tool")
    uv = tool.get("uv") if isinstance(tool, Mapping) else None
    raw = uv.get("default-groups", ["dev"]) if isinstance(uv, Mapping) else ["dev"]
    if raw == "all":
        return tuple(sorted(g for g in choices if g and not g.startswith("extra:")))
    if not isinstance(raw, list) or not all(isinstance(g, str) for g in raw):
        raise _err(str(pyproject), '[tool.uv] default-groups must be "all" or a list of group '
                                   "names (uv refuses any other value)")
    return tuple(sorted({canonicalize(g) for g in raw}))


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
    by_name: dict[str, list[int]] = {}
    for i, p in enumerate(entries):
        if isinstance(p.get("name"), str):
            by_name.setdefault(canonicalize(p["name"]), []).append(i)
    roots = _uv_roots(entries, manifest)
    seeds = _uv_manifest_groups(manifest, entries, by_name)
    if not roots and not seeds:
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
    for seed in seeds:
        visit(*seed)
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
            targets = _uv_targets(e, entries, by_name)
            raw_extras = e.get("extra")
            extras = raw_extras if isinstance(raw_extras, list) else []
            for t in targets:
                visit(t, None, group, c)
                for x in extras:
                    visit(t, str(x), group, c)
    out: dict[int, dict[str, set[frozenset[str]]]] = {}
    for (i, _extra, group), conds in reached.items():
        out.setdefault(i, {}).setdefault(group, set()).update(conds)
    return {i: tuple((g, _reach_marker(c)) for g, c in sorted(groups.items()))
            for i, groups in out.items()}


def _uv_manifest_groups(manifest: Any, entries: list[Mapping[str, Any]],
                        by_name: Mapping[str, list[int]]) -> list[tuple[int, str | None, str, frozenset[str]]]:
    """The ``(entry, extra, group, condition)`` states a non-project workspace root's
    ``[manifest.dependency-groups]`` reach first: each requirement of group ``g`` (``{ name,
    marker, extras }``) needs the entries of that name in ``g`` (``uv sync --group g``; ``dev``
    is one of uv's default groups), under its marker."""
    groups = manifest.get("dependency-groups") if isinstance(manifest, Mapping) else None
    if not isinstance(groups, Mapping):
        return []
    out: list[tuple[int, str | None, str, frozenset[str]]] = []
    for g, reqs in groups.items():
        for r in reqs if isinstance(reqs, list) else []:
            if not isinstance(r, Mapping) or not isinstance(r.get("name"), str):
                continue
            m = r.get("marker")
            cond = frozenset({m}) if isinstance(m, str) and m.strip() else frozenset()
            raw = r.get("extras") or r.get("extra")
            for t in _uv_targets(r, entries, by_name):
                out.append((t, None, canonicalize(str(g)), cond))
                out.extend((t, str(x), canonicalize(str(g)), cond)
                           for x in (raw if isinstance(raw, list) else []))
    return out


def _uv_roots(entries: list[Mapping[str, Any]], manifest: Any) -> list[int]:
    """The entries uv installs as the workspace: ``[manifest] members``, and editable/virtual
    sources at ``.``."""
    members: set[str] = set()
    if isinstance(manifest, Mapping) and isinstance(manifest.get("members"), list):
        members = {canonicalize(str(m)) for m in manifest["members"]}
    roots = []
    for i, p in enumerate(entries):
        source = p.get("source")
        if not isinstance(source, Mapping) or not isinstance(p.get("name"), str):
            continue
        local = {"editable", "virtual"} & set(source)
        if canonicalize(p["name"]) in members or any(source.get(k) == "." for k in local):
            roots.append(i)
    return roots


def _uv_targets(e: Mapping[str, Any], entries: list[Mapping[str, Any]],
                by_name: Mapping[str, list[int]]) -> list[int]:
    """The entries an edge names: by name, then its ``version`` and ``source`` where the lock
    has more than one (one version from two indexes: PyTorch's cpu and cu124)."""
    targets = by_name.get(canonicalize(e["name"]), [])
    if "version" in e and len(targets) > 1:
        targets = [t for t in targets if entries[t].get("version") == e["version"]] or targets
    if "source" in e and len(targets) > 1:
        targets = [t for t in targets if entries[t].get("source") == e["source"]] or targets
    return targets


def _reach_marker(conds: set[frozenset[str]]) -> str | None:
    """The marker of a set of conditions (each an ``and`` of edge markers); ``None``: always."""
    if frozenset() in conds:
        return None
    alts = sorted(" and ".join(f"({m})" for m in sorted(c)) for c in conds)
    if len(alts) == 1:
        return alts[0]
    return " or ".join(f"({a})" if " and " in a else a for a in alts)


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
    projects: list[str] = []
    extras = _poetry_extras(data.get("extras"), name)
    # lock-version 2.1: poetry installs from the locked groups and markers alone (its
    # ``Locker.is_locked_groups_and_markers``); ``optional`` no longer decides
    locked_markers = isinstance(lv, str) and tuple(
        int(x) if x.isdigit() else 0 for x in lv.split(".")[:2]) >= (2, 1)
    for i, p in enumerate(lock_entries(data, name)):
        where = f"package[{i}]"
        pname = _name(p, where, name)
        pversion = _str(p, "version", where, name)
        source = p.get("source", {})
        if not isinstance(source, Mapping):
            raise _err(name, f"{where}.source must be a table")
        kind = source.get("type")
        if kind in ("directory",) or p.get("develop") is True:
            projects.append(canonicalize(pname))
            continue
        commit = source.get("resolved_reference") if kind == "git" else None
        out.append(Locked("pip", canonicalize(pname), pversion,
                          vcs="git" if kind == "git" else None,
                          commit=str(commit) if commit else None,
                          groups=_poetry_groups(p, where, name, extras.get(canonicalize(pname), ()),
                                                locked_markers=locked_markers)))
    return LockFile("poetry.lock", (), tuple(out), projects=tuple(projects),
                    choices=declared_choices("poetry.lock", data, out))


def _poetry_extras(raw: Any, name: str) -> dict[str, tuple[str, ...]]:
    """``{package: (extra, ...)}`` of a poetry.lock's ``[extras]`` table (``foo = ["A"]``, or
    ``"a (>=1.0)"`` in old locks: the name is the first word), names PEP 685-normalized.

    :raises ManifestError: ``[extras]`` is not a table of string arrays.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in raw.values()):
        raise _err(name, "[extras] must be a table of string arrays")
    out: dict[str, set[str]] = {}
    for extra, members in raw.items():
        for m in members:
            if m.split():
                out.setdefault(canonicalize(m.split()[0]), set()).add(canonicalize(str(extra)))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _poetry_groups(p: Mapping[str, Any], where: str, name: str, extras: tuple[str, ...] = (),
                   *, locked_markers: bool = False) -> tuple[tuple[str, str | None], ...]:
    """:attr:`Locked.groups` of a poetry.lock entry: lock-version 2 lists ``groups``
    (``"main"`` is the default install), 1.x a ``category`` (``"main"``/``"dev"``);
    ``optional = true`` means only an extra pulls it in (``poetry install -E``): each of
    ``extras`` (the ``[extras]`` that list it) is then a group ``extra:<name>``, and
    ``extra:*`` when none does.  A
    ``markers`` string (lock-version 2) is the condition; a per-group table of markers keeps
    each group's.  With ``locked_markers`` (lock-version 2.1) the markers decide, as poetry's
    ``Transaction`` installs a locked package whose marker for the chosen groups holds:
    poetry writes ``extra == "x"`` into the marker of a package only an extra pulls in, and
    an ``optional = true`` package whose markers name no extra is installed without one."""
    raw = p.get("markers")
    texts = raw.values() if isinstance(raw, Mapping) else [raw]
    optional = p.get("optional") is True and (not locked_markers or any(
        isinstance(t, str) and re.search(r"\bextra\b", t) for t in texts))
    groups = p.get("groups")
    if groups is None:
        cat = p.get("category")
        groups = [cat] if isinstance(cat, str) else []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _err(name, f"{where}.groups must be an array of strings")
    by_extra = [f"extra:{e}" for e in extras] or ["extra:*"]
    if not groups:
        return tuple((g, None) for g in by_extra) if optional else ()
    markers = p.get("markers")
    out: list[tuple[str, str | None]] = []
    for g in groups:
        m = markers.get(g) if isinstance(markers, Mapping) else markers
        m = m if isinstance(m, str) and m.strip() else None
        group = "" if g == "main" else g
        out.extend([(e, m) for e in by_extra] if optional and group == "" else [(group, m)])
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
    projects: list[str] = []
    for i, p in enumerate(lock_entries(data, name)):
        where = f"package[{i}]"
        pname = _name(p, where, name)
        pversion = _str(p, "version", where, name, required=False)
        if p.get("editable") is True or "path" in p:
            projects.append(canonicalize(pname))
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
    targets = meta.get("targets")
    rps = [t.get("requires_python") for t in targets if isinstance(t, Mapping)] \
        if isinstance(targets, list) else []
    # one target: its requires_python; several: any of them may apply (no PEP 440 "or")
    rp = rps[0] if len(rps) == 1 and isinstance(rps[0], str) and rps[0].strip() else None
    return LockFile("pdm.lock", (), tuple(out), projects=tuple(projects), requires_python=rp,
                    choices=declared_choices("pdm.lock", data, out))


def declared_choices(kind: str, data: Mapping[str, Any], packages: Iterable[Locked]
                     ) -> frozenset[str]:
    """Every extra (``extra:<name>``) and dependency group the project lock ``data`` of
    ``kind`` declares, in :class:`envlock._selection.Selection`'s words: those its
    ``packages`` need, and — ``uv.lock`` — its project entries' ``optional-dependencies``,
    ``dev-dependencies``, ``[package.metadata] provides-extras`` and ``requires-dev`` (uv's
    lock schema: an extra or group that needs nothing is still one ``uv sync`` takes);
    ``pdm.lock``: its ``[metadata] groups``; ``poetry.lock``: its ``[extras]`` table."""
    out = {g for p in packages for g, _m in p.groups if g and g != "extra:*"}
    entries = data.get("package") if kind == "uv.lock" else None
    for p in entries if isinstance(entries, list) else ():
        source = p.get("source") if isinstance(p, Mapping) else None
        if not isinstance(source, Mapping) or not {"editable", "virtual"} & set(source):
            continue
        meta = p.get("metadata") if isinstance(p.get("metadata"), Mapping) else {}
        provides = meta.get("provides-extras")
        extras = [*_keys(p.get("optional-dependencies")),
                  *(provides if isinstance(provides, list) else ())]
        out |= {f"extra:{canonicalize(str(x))}" for x in extras}
        out |= {canonicalize(str(g)) for g in (*_keys(p.get("dev-dependencies")),
                                               *_keys(meta.get("requires-dev")))}
    meta = data.get("metadata")
    if kind == "pdm.lock" and isinstance(meta, Mapping) and isinstance(meta.get("groups"), list):
        out |= {str(g) for g in meta["groups"] if g != "default"}
    if kind == "poetry.lock":
        out |= {f"extra:{canonicalize(str(x))}" for x in _keys(data.get("extras"))}
    return frozenset(out)


def _keys(table: Any) -> list[str]:
    return [str(k) for k in table] if isinstance(table, Mapping) else []
