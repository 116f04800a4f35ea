"""Which extras and dependency groups of a lock an install took (``uv sync``'s words).

Kept out of :mod:`envlock.formats` (whose package imports every reader) so that the CLI's
``--extra``/``--group`` options can build a :class:`Requested` on every ``verify`` without
importing the lockfile readers (issue 26); :mod:`envlock.formats.markers` re-exports both names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from envlock._names import canonicalize
from envlock.errors import ManifestError

__all__ = ["Selection", "Requested", "Chosen", "refuse_conflicts", "check_requested"]


@dataclass(frozen=True)
class Selection:
    """The extras and dependency groups one install took, as ``uv sync --extra X --group G``
    (``--no-dev`` leaves ``dev`` out), in :attr:`envlock.formats.locks.Locked.groups`' words:
    ``"extra:<name>"`` for an extra, ``"<group>"`` for a group; names PEP 685-normalized.

    :ivar chosen: the selected extras and groups (the default install ``""`` is always in).
    :ivar inferred: ``True`` when :func:`infer_selection` chose it from what is installed.
    """

    chosen: frozenset[str] = frozenset()
    inferred: bool = False

    def items(self) -> frozenset[tuple[str, str]]:
        """``{("extra", name), ("group", name)}`` of :attr:`chosen`, as conflict markers ask."""
        return frozenset(("extra", canonicalize(g[6:])) if g.startswith("extra:")
                         else ("group", canonicalize(g)) for g in self.chosen)

    def label(self) -> str:
        """``"--extra cu124 --group dev"`` (``uv sync``'s words), or ``"no extra or group"``."""
        parts = [f"--extra {g[6:]}" for g in sorted(self.chosen) if g.startswith("extra:")]
        parts += [f"--group {g}" for g in sorted(self.chosen) if not g.startswith("extra:")]
        return " ".join(parts) or "no extra or group"


@dataclass(frozen=True)
class Requested:
    """The extras and groups asked for on the command line, as ``uv sync`` takes them:
    ``--extra`` / ``--group`` (repeatable), ``--all-extras``, ``--all-groups``, ``--no-dev``.
    uv's default groups (``dev``) are in unless ``--no-dev``; nothing given at all means
    "infer it from what is installed" (:func:`infer_selection`)."""

    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    all_extras: bool = False
    all_groups: bool = False
    no_dev: bool = False

    @property
    def given(self) -> bool:
        """Whether any option was given."""
        return bool(self.extras or self.groups or self.all_extras or self.all_groups or self.no_dev)

    def named(self, have: Iterable[str], where: str, *, groups_are_extras: bool = False
              ) -> set[str]:
        """The lock's own names (of ``have``, :class:`Selection`'s words) of the extras and
        groups named with ``--extra``/``--group``, PEP 685-normalized.  The one rule of
        ``verify --lock``, ``diff`` and ``restore``: ``uv sync`` refuses a name its lock lacks
        ("Extra `x` is not defined in the project's `optional-dependencies` table"), as do
        ``pdm install -G`` and ``poetry install -E/--with``.

        :param where: the lock's path, said first in the error.
        :param groups_are_extras: a pdm.lock, whose extras and groups are both pdm groups
            (``--extra x`` names group ``x``).
        :raises ManifestError: a name the lock does not have (one line listing those it has).
        """
        have = set(have)
        by_norm = {(g[:6] + canonicalize(g[6:])) if g.startswith("extra:") else canonicalize(g): g
                   for g in have}
        asked = [("extra", x) for x in self.extras] + [("group", g) for g in self.groups]
        chosen: set[str] = set()
        unknown = []
        for what, name in asked:
            key = canonicalize(name) if groups_are_extras or what == "group" \
                else f"extra:{canonicalize(name)}"
            if key in by_norm:
                chosen.add(by_norm[key])
            else:
                unknown.append(f"{what} {name!r}")
        if unknown:
            extras = sorted(g[6:] for g in have if g.startswith("extra:"))
            groups = sorted(g for g in have if g and not g.startswith("extra:"))
            raise ManifestError(
                f"{where}: no {', '.join(unknown)} in this lock (its extras: "
                f"{', '.join(extras) or 'none'}; its groups: {', '.join(groups) or 'none'})")
        return chosen

    def resolve(self, choices: Iterable[str], default_groups: Iterable[str] = ("dev",), *,
                conflicts: Iterable[frozenset[str]] = (), where: str | None = None,
                groups_are_extras: bool = False) -> Selection:
        """The :class:`Selection` of a lock whose extras and groups are ``choices``, as ``uv
        sync`` takes them: ``default_groups`` (uv's ``[tool.uv] default-groups``, ``dev``
        when unset) that the lock has are in; ``--no-dev`` (uv's ``--no-group dev``) leaves
        ``dev`` out, also when named.

        :param where: the path of a lock whose ``choices`` are every extra and group it
            declares (:attr:`envlock.formats.locks.LockFile.choices`): a name it lacks is
            refused (:meth:`named`); ``None``: a lock that declares none of its own (a
            conda-lock's categories), whose names are taken as given; ``groups_are_extras``:
            a pdm.lock's names (:meth:`named`).
        :param conflicts: the lock's conflict sets: two members chosen together are refused
            (:func:`refuse_conflicts`), as ``uv sync`` refuses them.
        :raises ManifestError: an unknown name, or conflicting extras or groups (one line).
        """
        have = set(choices)
        if where is not None:
            chosen = self.named(have, where, groups_are_extras=groups_are_extras)
        else:
            chosen = {f"extra:{canonicalize(x)}" for x in self.extras}
            chosen |= {canonicalize(g) for g in self.groups}
        if self.all_extras:
            chosen |= {g for g in have if g.startswith("extra:")}
        if self.all_groups:
            chosen |= {g for g in have if g and not g.startswith("extra:")}
        chosen |= {canonicalize(g) for g in default_groups} & have
        if self.no_dev:
            chosen.discard("dev")
        refuse_conflicts(where or "the lock", chosen, conflicts)
        return Selection(frozenset(chosen))


def refuse_conflicts(where: str, chosen: Iterable[str],
                     conflicts: Iterable[frozenset[str]]) -> None:
    """Refuse two members of one of a uv.lock's ``conflicts`` sets chosen together, as ``uv
    sync`` does ("Extras `cpu` and `cu124` are incompatible with the declared conflicts";
    uv's ``tool.uv.conflicts``).

    :param chosen: the extras and groups chosen, in :class:`Selection`'s words.
    :raises ManifestError: one line naming them and the conflict set.
    """
    chosen = set(chosen)

    def said(gs: Iterable[str], sep: str) -> str:
        return sep.join(f"extra {g[6:]}" if g.startswith("extra:") else f"group {g}"
                        for g in sorted(gs))

    for c in conflicts:
        if len(chosen & c) >= 2:
            raise ManifestError(f"{where}: {said(chosen & c, ' and ')} are declared conflicting "
                                f"(the lock's conflict set: {said(c, ', ')}); uv sync refuses "
                                "them together, choose one")


def check_requested(requested: Requested | None, lock: Any, where: str,
                    default_groups: Iterable[str] = ("dev",)) -> None:
    """Refuse what ``uv sync`` (``pdm install -G``, ``poetry install -E/--with``) would refuse
    of ``requested`` for ``lock``, before its install is read: a name the lock does not
    declare, or two members of one of its ``conflicts`` sets (:meth:`Requested.resolve`).
    The refusal of :func:`envlock.formats.lockchoice.choose`, the one rule ``restore``,
    ``verify --lock`` and ``diff`` read a project lock's options with (each tool's own
    reading follows it there).

    :param lock: a :class:`envlock.formats.locks.LockFile` or ``verify``'s
        :class:`envlock.verify.expected.Lock` (its ``kind``, ``choices``, ``conflicts``); a
        lock whose ``choices`` is ``None`` declares none of its own, and is not checked.
    :param where: the lock's path, said first in the error.
    :raises ManifestError: one line naming the fault and what the lock has.
    """
    if requested is None or not requested.given or getattr(lock, "choices", None) is None:
        return
    requested.resolve(lock.choices, default_groups, conflicts=lock.conflicts, where=where,
                      groups_are_extras=lock.kind == "pdm.lock")


@dataclass(frozen=True)
class Chosen:
    """The install of a project lock that :class:`Requested` options choose, as the lock's own
    tool takes them (:func:`envlock.formats.lockchoice.choose`): one value for ``restore``,
    ``verify --lock`` and ``diff``.

    :ivar selection: the extras and groups taken (:class:`Selection`).
    :ivar tool: the installer whose reading it is (``"uv sync"``, ``"pdm install"``,
        ``"poetry install"``).
    :ivar words: the options in that tool's words (``"-G security --prod"``; ``""``: none
        given).
    :ivar took: what they took (``"extras cpu; groups dev"``, ``"no extra or group"``).
    :ivar notes: what was assumed (no pyproject.toml beside the lock to tell its groups).
    """

    selection: Selection
    tool: str
    words: str
    took: str
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> str:
        """``"-G security as pdm install takes it: groups security, tests"``, or with no option
        ``"default install as uv sync takes it: groups dev"``."""
        return f"{self.words or 'default install'} as {self.tool} takes it: {self.took}"
