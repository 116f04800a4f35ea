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

No option given: what each tool installs with no option (issue 23: every lockfile means what
its own tool would install): ``uv sync`` (the default groups), ``pdm install`` (the groups the
lock was made with, its ``[metadata] groups``, that the pyproject.toml still declares; a lock
that records none: the default group and every dev group), ``poetry install`` (main and every
group not declared ``optional = true``), ``pixi install`` (the ``default`` environment).  Where
the pyproject.toml that tells pdm's groups or poetry's optional groups is not beside the lock,
a note says what was assumed.  A name the lock does not have, or an option that applies to no input, is one line
naming what the lock has.
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
                  environment: str | None, platform: str | None = None) -> None:
    """Refuse selection options that no input takes.

    :param kinds: the inputs' kinds (:func:`envlock.lock._restore._kind_of`; ``None``: a manifest).
    :raises ManifestError: ``--extra``/``--group``/… without a uv.lock, pdm.lock or poetry.lock
        among the inputs, or ``--environment``/``--platform`` without a pixi.lock (one line).
    """
    have = [k or "manifest" for k in kinds]
    if requested is not None and requested.given and not set(have) & set(_TOOL):
        raise ManifestError("--extra, --group, --all-extras, --all-groups and --no-dev choose "
                            "the install of a uv.lock, pdm.lock or poetry.lock; the inputs are "
                            f"{', '.join(dict.fromkeys(have))}; nothing was run")
    for option, value, what in (("--environment", environment, "environment"),
                                ("--platform", platform, "platform entry")):
        if value is not None and "pixi.lock" not in have:
            raise ManifestError(f"{option} chooses the {what} of a pixi.lock; the inputs "
                                f"are {', '.join(dict.fromkeys(have))}; nothing was run")


def choose(path: Path, kind: str, lock: Any, data: Mapping[str, Any],
           requested: Requested | None) -> tuple[Selection, str, list[str]]:
    """The :class:`Selection` of project lock ``path`` (``kind``: a key of
    :data:`envlock.lock._projectlocks.PROJECT_LOCKS`) that ``requested`` asks for (``None`` or
    nothing given: the tool's own no-option install), as its tool installs it (module
    docstring), the words that say it (``"default install as uv sync takes it: groups dev"``,
    ``"--extra cpu as uv sync takes it: extras cpu; groups dev"``), and notes of what was assumed.

    :raises ManifestError: a name the lock does not have (one line listing those it has), for a
        uv.lock two members of one of its conflict sets chosen together, or a pyproject.toml
        beside the lock that cannot be read.
    """
    from envlock.formats.projectlocks import uv_default_groups

    requested = requested or Requested()
    have = set(lock.choices or ())
    pdm = kind == "pdm.lock"  # a pdm group is an extra or a dev group alike
    try:
        chosen = requested.named(have, str(path), groups_are_extras=pdm)
        if kind == "uv.lock":  # the shared rule of verify --lock and diff, with the defaults
            chosen = set(requested.resolve(have, uv_default_groups(path, have),
                                           conflicts=lock.conflicts, where=str(path)).chosen)
    except ManifestError as exc:
        raise ManifestError(f"{exc}; nothing was run") from None
    notes: list[str] = []
    if pdm:
        meta = data.get("metadata")
        locked = meta.get("groups") if isinstance(meta, Mapping) else None
        chosen |= _pdm_more(path, have, chosen, requested, [str(g) for g in locked]
                            if isinstance(locked, list) else [], notes)
    elif kind == "poetry.lock":
        chosen = _poetry_groups(path, have, chosen, requested, notes)
    return Selection(frozenset(chosen)), _label(kind, chosen, requested), notes


def _pyproject(path: Path) -> Mapping[str, Any] | None:
    """The pyproject.toml beside ``path`` (untrusted: :func:`envlock.manifest._toml.load_file`
    bounds it), or ``None`` when there is none."""
    from envlock.manifest._toml import load_file

    pyproject = path.parent / "pyproject.toml"
    return load_file(pyproject) if pyproject.is_file() else None


def _table(doc: Mapping[str, Any] | None, *keys: str) -> Mapping[str, Any]:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, Mapping) else None
    return doc if isinstance(doc, Mapping) else {}


def _poetry_groups(path: Path, have: set[str], named: set[str], requested: Requested,
                   notes: list[str]) -> set[str]:
    """``poetry install [--with G] [-E X] [--all-groups] [--all-extras] [--without dev]``:
    main, every group not declared optional, the groups and extras named; ``--without``
    wins (poetry's documented rule, python-poetry.org "Managing dependencies": "Optional
    groups").  Optional groups are ``[tool.poetry.group.NAME] optional = true`` of the
    pyproject.toml beside the lock; without one every group is taken as not optional (poetry's
    default for a group), and a note says so."""
    doc = _pyproject(path)
    groups = {g for g in have if not g.startswith("extra:")}
    declared = _table(doc, "tool", "poetry", "group")
    optional = {canonicalize(str(g)) for g, t in declared.items()
                if isinstance(t, Mapping) and t.get("optional") is True}
    if doc is None and groups and not requested.all_groups:
        notes.append(f"{path.name}: no pyproject.toml beside it to tell poetry's optional "
                     f"groups: {', '.join(sorted(groups))} taken as not optional (poetry's "
                     "default), installed as poetry install installs them")
    out = named | {g for g in groups if canonicalize(g) not in optional}
    out |= {g for g in have if g.startswith("extra:")} if requested.all_extras else set()
    out |= groups if requested.all_groups else set()
    if requested.no_dev:
        out -= {g for g in out if canonicalize(g) == "dev"}
    return out


def _pdm_more(path: Path, have: set[str], named: set[str], requested: Requested,
              locked: Sequence[str], notes: list[str]) -> set[str]:
    """The groups ``pdm install [-G NAMED]`` adds, as pdm's ``GroupSelection`` takes them.

    No option: the groups the lock was made with (its ``[metadata] groups``, ``locked``) that
    the pyproject.toml beside it still declares; without one, every locked group, and a note
    says so.  Options (or a lock that records no groups): with ``-G :all``
    (``--all-extras``/``--all-groups``) every optional group; and, unless ``--prod``
    (``--no-dev``) or a dev group is named, every dev group — dev groups as the pyproject.toml
    beside the lock declares them (``[dependency-groups]``, ``[tool.pdm.dev-dependencies]``);
    without one, every group is taken as optional (installed only when named), and a note says
    so.  (pdm 2.x ``pdm/cli/filters.py``.)
    """
    doc = _pyproject(path)
    by_norm = {canonicalize(g): g for g in have}
    if not requested.given and locked:
        declared = {"default", *(str(g) for g in _table(doc, "project", "optional-dependencies")),
                    *(str(g) for g in _table(doc, "dependency-groups")),
                    *(str(g) for g in _table(doc, "tool", "pdm", "dev-dependencies"))}
        taken = [canonicalize(g) for g in locked if canonicalize(g) != "default"
                 and (doc is None or canonicalize(g) in {canonicalize(d) for d in declared})]
        if doc is None and taken:
            notes.append(f"{path.name}: no pyproject.toml beside it to tell which of the groups "
                         f"it was locked with the project still declares: {', '.join(taken)} "
                         "taken as declared, installed as pdm install installs them")
        return {by_norm[g] for g in taken if g in by_norm}
    dev = {canonicalize(str(g)) for table in (_table(doc, "dependency-groups"),
                                               _table(doc, "tool", "pdm", "dev-dependencies"))
           for g in table}
    if doc is None and have - named and not (requested.all_extras or requested.all_groups):
        notes.append(f"{path.name}: no pyproject.toml beside it to tell pdm's dev groups from "
                     f"its optional ones: {', '.join(sorted(have - named))} taken as optional, "
                     "not installed (pdm install installs every dev group; --group NAME takes "
                     "one)")
    if requested.no_dev and {canonicalize(g) for g in named} & dev:
        raise ManifestError(f"{path}: --no-dev (pdm's --prod) with the dev group(s) "
                            f"{', '.join(sorted({canonicalize(g) for g in named} & dev))}: pdm "
                            "refuses them together; nothing was run")
    out: set[str] = set()
    if requested.all_extras or requested.all_groups:
        out |= {g for g in have if canonicalize(g) not in dev} if doc is not None else set(have)
    if not requested.no_dev and not {canonicalize(g) for g in named} & dev:
        out |= {by_norm[g] for g in dev if g in by_norm}
    return out


def _label(kind: str, chosen: set[str], requested: Requested) -> str:
    """``"default install as uv sync takes it: groups dev"`` with no option, else the options in
    the tool's words and what they took (``"--extra cpu as uv sync takes it: extras cpu;
    groups dev"``)."""
    extras = sorted(g[6:] for g in chosen if g.startswith("extra:"))
    groups = sorted(g for g in chosen if not g.startswith("extra:"))
    took = "; ".join([*([f"extras {', '.join(extras)}"] if extras else []),
                      *([f"groups {', '.join(groups)}"] if groups else [])]) \
        or "no extra or group"
    if not requested.given:
        return f"default install as {_TOOL[kind]} takes it: {took}"
    r = requested
    if kind == "pdm.lock":
        words = [*(f"-G {g}" for g in (*r.extras, *r.groups)),
                 *(["-G :all"] if r.all_extras or r.all_groups else []),
                 *(["--prod"] if r.no_dev else [])]
    elif kind == "poetry.lock":
        words = [*(f"--with {g}" for g in r.groups), *(f"-E {x}" for x in r.extras),
                 *(["--all-extras"] if r.all_extras else []),
                 *(["--all-groups"] if r.all_groups else []),
                 *(["--without dev"] if r.no_dev else [])]
    else:
        words = [*(f"--extra {x}" for x in r.extras), *(f"--group {g}" for g in r.groups),
                 *(["--all-extras"] if r.all_extras else []),
                 *(["--all-groups"] if r.all_groups else []), *(["--no-dev"] if r.no_dev else [])]
    return f"{' '.join(words)} as {_TOOL[kind]} takes it: {took}"


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
