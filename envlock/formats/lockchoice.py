"""Which install of a project lock the selection options mean, as each lock's own tool takes
them — the one rule of ``restore``, ``verify --lock`` and ``diff`` (issue 23: every lockfile
means what its own tool would install).

The options are :class:`envlock._selection.Requested`'s (``--extra``, ``--group``,
``--all-extras``, ``--all-groups``, ``--no-dev``), read per tool (its install docs the source):

* ``uv.lock``: as ``uv sync`` (docs.astral.sh/uv, "Locking and syncing", "Default groups") —
  the default groups (``[tool.uv] default-groups`` of the ``pyproject.toml`` beside the lock,
  else ``dev``) are in; ``--no-dev`` is uv's ``--no-group dev``, which wins over ``--group
  dev``, ``--all-groups`` and the default groups; two members of one of the lock's
  ``conflicts`` sets chosen together are refused, as ``uv sync`` refuses them;
* ``pdm.lock``: as ``pdm install``/``pdm sync`` (pdm.fming.dev, "Manage dependencies":
  "Select a subset of dependency groups"): the default group and every dev group; ``--extra
  NAME``/``--group NAME`` are ``-G NAME`` (an extra and a group are both a pdm group);
  ``--all-extras``/``--all-groups``: ``-G :all``; ``--no-dev``: ``--prod`` (no dev group); a
  dev group named with ``--no-dev`` is refused, as pdm refuses it;
* ``poetry.lock``: as ``poetry install`` (python-poetry.org, "Managing dependencies",
  "Installing group dependencies"; "CLI", ``install``): main and every group not declared
  ``optional = true``; ``--group NAME`` is ``--with NAME`` (an optional group too),
  ``--extra NAME`` is ``-E NAME``, ``--all-groups``/``--all-extras`` poetry's own,
  ``--no-dev`` is ``--without dev``, which wins.

No option: what each tool installs with none (``restore``; ``verify``/``diff`` infer the
install from what is installed instead): ``uv sync`` (the default groups), ``pdm install``
(the groups the lock was made with, its ``[metadata] groups``, that the pyproject.toml still
declares; a lock that records none: the default group and every dev group), ``poetry install``
(main and every group not optional).  Where the pyproject.toml that tells pdm's dev groups or
poetry's optional groups is not beside the lock, a note says what was assumed.  A name the
lock does not declare, or conflicting ones, is one ``Error:`` line naming what the lock has
(:func:`envlock._selection.check_requested`); ``restore`` adds that nothing was run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock._names import canonicalize
from envlock._selection import Chosen, Requested, Selection, check_requested
from envlock.errors import ManifestError

__all__ = ["TOOLS", "choose", "given_choice"]

#: the project lock kinds, and the installer whose reading of the options each one follows
TOOLS = {"uv.lock": "uv sync", "pdm.lock": "pdm install", "poetry.lock": "poetry install"}


def given_choice(path: str | os.PathLike[str], lock: Any,
                 requested: Requested | None) -> Chosen | None:
    """The install ``requested`` chooses of the project lock at ``path`` (``lock``: its reading,
    with ``kind``, ``packages`` and their ``groups``, ``conflicts``), as :func:`choose` takes
    it; ``None`` when no option is given or ``lock`` is not a uv, pdm or poetry lock (its
    install is then inferred, or its own tool's categories read).

    :raises ManifestError: as :func:`choose`; the lock cannot be read again as TOML.
    """
    if requested is None or not requested.given or lock.kind not in TOOLS:
        return None
    from envlock.manifest._toml import load_file

    return choose(Path(path), lock.kind, lock, load_file(Path(path)), requested)


def choose(path: Path, kind: str, lock: Any, data: Mapping[str, Any],
           requested: Requested | None) -> Chosen:
    """The install of project lock ``path`` (``kind``: a key of :data:`TOOLS`; ``lock``: its
    reading, ``data``: its TOML) that ``requested`` asks for (``None`` or nothing given: the
    tool's own no-option install), as its tool installs it (module docstring): the
    :class:`Selection`, the words that say it (:attr:`Chosen.said`: ``"default install as uv
    sync takes it: groups dev"``, ``"--extra cpu as uv sync takes it: extras cpu; groups
    dev"``), and notes of what was assumed.

    The names the lock declares are :attr:`envlock.formats.locks.LockFile.choices`; what the
    tool would refuse of them is refused first (:func:`envlock._selection.check_requested`).

    :raises ManifestError: a name the lock does not declare (one line listing those it has),
        two members of one of a uv.lock's conflict sets chosen together, a pdm dev group named
        with ``--no-dev``, or a pyproject.toml beside the lock that cannot be read.
    """
    from envlock.formats.projectlocks import uv_default_groups

    requested = requested or Requested()
    have, where = set(lock.choices or ()), str(path)  # every name the lock declares
    pdm = kind == "pdm.lock"  # a pdm group is an extra or a dev group alike
    defaults = uv_default_groups(path, have) if kind == "uv.lock" else ()
    check_requested(requested, lock, where, defaults)  # as the tool refuses: one Error line
    notes: list[str] = []
    if kind == "uv.lock":  # uv sync's reading; its default groups may conflict too
        chosen = set(requested.resolve(have, defaults, conflicts=lock.conflicts,
                                       where=where).chosen)
    else:
        chosen = requested.named(have, where, groups_are_extras=pdm)
        if pdm:
            meta = data.get("metadata")
            locked = meta.get("groups") if isinstance(meta, Mapping) else None
            chosen |= _pdm_more(path, have, chosen, requested, [str(g) for g in locked]
                                if isinstance(locked, list) else [], notes)
        else:
            chosen = _poetry_groups(path, have, chosen, requested, notes)
    words, took = _label(kind, chosen, requested)
    return Chosen(Selection(frozenset(chosen)), TOOLS[kind], words, took, tuple(notes))


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
                            "refuses them together")
    out: set[str] = set()
    if requested.all_extras or requested.all_groups:
        out |= {g for g in have if canonicalize(g) not in dev} if doc is not None else set(have)
    if not requested.no_dev and not {canonicalize(g) for g in named} & dev:
        out |= {by_norm[g] for g in dev if g in by_norm}
    return out


def _label(kind: str, chosen: set[str], requested: Requested) -> tuple[str, str]:
    """The options in the tool's words (``"--extra cpu"``, ``"-G security --prod"``; ``""``
    with none) and what they took (``"extras cpu; groups dev"``)."""
    extras = sorted(g[6:] for g in chosen if g.startswith("extra:"))
    groups = sorted(g for g in chosen if not g.startswith("extra:"))
    took = "; ".join([*([f"extras {', '.join(extras)}"] if extras else []),
                      *([f"groups {', '.join(groups)}"] if groups else [])]) \
        or "no extra or group"
    if not requested.given:
        return "", took
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
    return " ".join(words), took


