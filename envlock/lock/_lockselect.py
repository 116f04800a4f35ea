"""Which install of a project lock ``envlock restore`` converts: the extras, dependency groups
and pixi environment asked for, as each tool's own installer takes them.

The options are ``verify --lock``'s and ``diff``'s (:class:`envlock._selection.Requested`:
``--extra``, ``--group``, ``--all-extras``, ``--all-groups``, ``--no-dev``), read per tool:

* ``uv.lock``: as ``uv sync`` — the default groups (``[tool.uv] default-groups`` of the
  ``pyproject.toml`` beside the lock, else ``dev``) are in; ``--no-dev`` is uv's ``--no-group
  dev``, which wins over ``--group dev``, ``--all-groups`` and the default groups; two members
  of one of the lock's ``conflicts`` sets chosen together are refused, as ``uv sync`` refuses
  them;
* ``pdm.lock``: as ``pdm install -G NAME`` (an extra and a group are both a pdm group;
  ``--all-extras``/``--all-groups``: ``-G :all``; ``--no-dev``: ``--prod``): the dev groups
  of the pyproject.toml beside the lock come too unless one is named or ``--no-dev``;
* ``poetry.lock``: as ``poetry install --with GROUP -E EXTRA`` (``--all-groups``: ``--all-groups``,
  ``--all-extras``: ``--all-extras``; ``--no-dev``: ``--without dev``);
* ``pixi.lock``: ``--environment NAME``, as ``pixi install -e NAME``.

No option given: the project's default install (h-B's rule: ``uv sync --no-dev``, ``pdm
install --prod``, ``poetry install --only main``; pixi's ``default`` environment).  A name the
lock does not have, or an option that applies to no input, is one line naming what the lock
has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock._names import canonicalize
from envlock._selection import Requested, Selection
from envlock.errors import ManifestError

__all__ = ["choose", "check_applies", "pixi_environment"]

#: the installer whose words each project lock's selection is said in
_TOOL = {"uv.lock": "uv sync", "pdm.lock": "pdm install", "poetry.lock": "poetry install"}


def check_applies(kinds: Iterable[str | None], requested: Requested | None,
                  environment: str | None) -> None:
    """Refuse selection options that no input takes.

    :param kinds: the inputs' kinds (:func:`envlock.lock._restore._kind_of`; ``None``: a manifest).
    :raises ManifestError: ``--extra``/``--group``/… without a uv.lock, pdm.lock or poetry.lock
        among the inputs, or ``--environment`` without a pixi.lock (one line).
    """
    have = [k or "manifest" for k in kinds]
    if requested is not None and requested.given and not set(have) & set(_TOOL):
        raise ManifestError("--extra, --group, --all-extras, --all-groups and --no-dev choose "
                            "the install of a uv.lock, pdm.lock or poetry.lock; the inputs are "
                            f"{', '.join(dict.fromkeys(have))}; nothing was run")
    if environment is not None and "pixi.lock" not in have:
        raise ManifestError("--environment chooses the environment of a pixi.lock; the inputs "
                            f"are {', '.join(dict.fromkeys(have))}; nothing was run")


def _names(lock: Any, kind: str, data: Mapping[str, Any]) -> set[str]:
    """The lock's extras (``extra:<name>``) and groups, in :class:`Selection`'s words."""
    out = {g for p in lock.packages for g, _m in p.groups if g and g != "extra:*"}
    if kind == "uv.lock":  # the project's own entries declare them, even with no package
        for p in data.get("package", []):
            if not isinstance(p, Mapping) or not isinstance(p.get("source"), Mapping) or not \
                    {"editable", "virtual"} & set(p["source"]):
                continue
            for x in p.get("optional-dependencies", {}) or {}:
                out.add(f"extra:{canonicalize(str(x))}")
            for g in p.get("dev-dependencies", {}) or {}:
                out.add(canonicalize(str(g)))
    if kind == "pdm.lock":
        meta = data.get("metadata", {})
        out |= {str(g) for g in meta.get("groups", []) if g != "default"} \
            if isinstance(meta, Mapping) and isinstance(meta.get("groups"), list) else set()
    if kind == "poetry.lock" and isinstance(data.get("extras"), Mapping):
        out |= {f"extra:{canonicalize(str(x))}" for x in data["extras"]}
    return out


def _uv_default_groups(path: Path, groups: set[str]) -> set[str]:
    """uv's default groups: ``[tool.uv] default-groups`` of the pyproject.toml beside the lock
    (a list, or ``"all"``), else ``dev``."""
    from envlock.manifest._toml import load_file

    pyproject = path.parent / "pyproject.toml"
    raw: Any = None
    if pyproject.is_file():
        tool = load_file(pyproject).get("tool", {})
        uv = tool.get("uv", {}) if isinstance(tool, Mapping) else {}
        raw = uv.get("default-groups") if isinstance(uv, Mapping) else None
    if raw == "all":
        return {g for g in groups if not g.startswith("extra:")}
    if isinstance(raw, list):
        return {canonicalize(str(g)) for g in raw}
    return {"dev"}


def choose(path: Path, kind: str, lock: Any, data: Mapping[str, Any],
           requested: Requested | None) -> tuple[Selection, str]:
    """The :class:`Selection` of project lock ``path`` (``kind``: a key of
    :data:`envlock.lock._projectlocks.PROJECT_LOCKS`) that ``requested`` asks for, as its tool
    installs it (module docstring), and the words that say it (``"default install and
    --extra cpu (as uv sync takes them)"``).

    :raises ManifestError: a name the lock does not have (one line listing those it has), or,
        for a uv.lock, two members of one of its conflict sets chosen together.
    """
    if requested is None or not requested.given:
        return Selection(), "default install (no extra or group)"
    have = _names(lock, kind, data)
    by_norm = {(g[:6] + canonicalize(g[6:])) if g.startswith("extra:") else canonicalize(g): g
               for g in have}
    pdm = kind == "pdm.lock"  # a pdm group is an extra or a dev group alike
    asked = [("extra", x) for x in requested.extras] + [("group", g) for g in requested.groups]
    chosen: set[str] = set()
    unknown = []
    for what, name in asked:
        key = canonicalize(name) if pdm or what == "group" else f"extra:{canonicalize(name)}"
        if key not in by_norm:
            unknown.append(f"{what} {name!r}")
        else:
            chosen.add(by_norm[key])
    if unknown:
        extras = sorted(g[6:] for g in have if g.startswith("extra:"))
        groups = sorted(g for g in have if not g.startswith("extra:"))
        raise ManifestError(
            f"{path}: no {', '.join(unknown)} in this lock (its extras: "
            f"{', '.join(extras) or 'none'}; its groups: {', '.join(groups) or 'none'}); "
            "nothing was run")
    if kind == "uv.lock":  # the shared rule of verify --lock and diff, with the lock's defaults
        chosen = set(requested.resolve(have, _uv_default_groups(path, have)).chosen)
    elif pdm:
        chosen |= _pdm_more(path, have, chosen, requested)
    else:  # poetry install --with G -E X [--all-groups] [--all-extras] [--without dev]
        xs = {g for g in have if g.startswith("extra:")}
        chosen |= (xs if requested.all_extras else set()) | (
            have - xs if requested.all_groups else set())
        if requested.no_dev:
            chosen -= {g for g in chosen if canonicalize(g) == "dev"}
    _refuse_conflicts(path, chosen, lock.conflicts)
    return Selection(frozenset(chosen)), _label(kind, chosen)


def _pdm_more(path: Path, have: set[str], named: set[str], requested: Requested) -> set[str]:
    """The groups ``pdm install -G NAMED`` adds (pdm's ``GroupSelection``): with ``-G :all``
    (``--all-extras``/``--all-groups``) every optional group; and, unless ``--prod``
    (``--no-dev``) or a dev group is named, every dev group — dev groups as the pyproject.toml
    beside the lock declares them (``[dependency-groups]``, ``[tool.pdm.dev-dependencies]``);
    without one, every group is taken as named only."""
    from envlock.manifest._toml import load_file

    pyproject = path.parent / "pyproject.toml"
    doc = load_file(pyproject) if pyproject.is_file() else {}
    tool = doc.get("tool", {}) if isinstance(doc.get("tool"), Mapping) else {}
    pdm = tool.get("pdm", {}) if isinstance(tool.get("pdm"), Mapping) else {}
    dev = {canonicalize(str(g)) for table in (doc.get("dependency-groups"),
                                               pdm.get("dev-dependencies"))
           if isinstance(table, Mapping) for g in table}
    by_norm = {canonicalize(g): g for g in have}
    if requested.no_dev and {canonicalize(g) for g in named} & dev:
        raise ManifestError(f"{path}: --no-dev (pdm's --prod) with the dev group(s) "
                            f"{', '.join(sorted({canonicalize(g) for g in named} & dev))}: pdm "
                            "refuses them together; nothing was run")
    out: set[str] = set()
    if requested.all_extras or requested.all_groups:
        out |= {g for g in have if canonicalize(g) not in dev} if dev or pyproject.is_file() \
            else set(have)
    if not requested.no_dev and not {canonicalize(g) for g in named} & dev:
        out |= {by_norm[g] for g in dev if g in by_norm}
    return out


def _refuse_conflicts(path: Path, chosen: set[str], conflicts: Sequence[frozenset[str]]) -> None:
    for c in conflicts:
        def said(gs: Iterable[str], sep: str) -> str:
            return sep.join(f"extra {g[6:]}" if g.startswith("extra:") else f"group {g}"
                            for g in sorted(gs))

        if len(chosen & c) >= 2:
            raise ManifestError(f"{path}: {said(chosen & c, ' and ')} are declared conflicting "
                                f"(the lock's conflict set: {said(c, ', ')}); uv sync refuses "
                                "them together, choose one; nothing was run")


def _label(kind: str, chosen: set[str]) -> str:
    if not chosen:
        return "default install (no extra or group)"
    extras = sorted(g[6:] for g in chosen if g.startswith("extra:"))
    groups = sorted(g for g in chosen if not g.startswith("extra:"))
    if kind == "pdm.lock":
        words = " ".join(f"-G {g}" for g in sorted(chosen))
    elif kind == "poetry.lock":
        words = " ".join([*(f"--with {g}" for g in groups), *(f"-E {x}" for x in extras)])
    else:
        words = " ".join([*(f"--extra {x}" for x in extras), *(f"--group {g}" for g in groups)])
    return f"default install and {words} (as {_TOOL[kind]} takes them)"


def pixi_environment(path: Path, data: Mapping[str, Any], environment: str | None) -> str:
    """The pixi.lock environment to convert: ``environment`` (``pixi install -e NAME``), else
    ``default``.

    :raises ManifestError: the lock has no such environment (one line listing those it has).
    """
    name = environment or "default"
    envs = data.get("environments")
    if isinstance(envs, Mapping) and name not in envs:
        raise ManifestError(f"{path}: no environment {name!r} in this lock (its environments: "
                            f"{', '.join(sorted(str(e) for e in envs)) or 'none'}); nothing was "
                            "run")
    return name
