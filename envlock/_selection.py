"""Which extras and dependency groups of a lock an install took (``uv sync``'s words).

Kept out of :mod:`envlock.formats` (whose package imports every reader) so that the CLI's
``--extra``/``--group`` options can build a :class:`Requested` on every ``verify`` without
importing the lockfile readers (issue 26); :mod:`envlock.formats.markers` re-exports both names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envlock._names import canonicalize

__all__ = ["Selection", "Requested", "Chosen"]


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

    def resolve(self, choices: Iterable[str],
                default_groups: Iterable[str] = ("dev",)) -> Selection:
        """The :class:`Selection` of a lock whose extras and groups are ``choices``, as ``uv
        sync`` takes them: ``default_groups`` (uv's ``[tool.uv] default-groups``, ``dev``
        when unset) that the lock has are in; ``--no-dev`` (uv's ``--no-group dev``) leaves
        ``dev`` out, also when named."""
        have = set(choices)
        chosen = {f"extra:{canonicalize(x)}" for x in self.extras}
        chosen |= {canonicalize(g) for g in self.groups}
        if self.all_extras:
            chosen |= {g for g in have if g.startswith("extra:")}
        if self.all_groups:
            chosen |= {g for g in have if g and not g.startswith("extra:")}
        chosen |= {canonicalize(g) for g in default_groups} & have
        if self.no_dev:
            chosen.discard("dev")
        return Selection(frozenset(chosen))


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
