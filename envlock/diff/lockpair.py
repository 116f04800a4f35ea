"""A project lock (``uv.lock``, ``pdm.lock``, ``poetry.lock``) compared with another lock or an
export: read for one install, as its own tool takes ``--extra``/``--group``/``--all-extras``/
``--all-groups``/``--no-dev`` (``uv sync``/``uv export``, ``pdm install``, ``poetry install``:
:mod:`envlock.formats.lockchoice`; issue 23).

A project lock holds every extra's and group's packages — with uv's conflicting extras (its
PyTorch ``cpu``/``cu124`` recipe) several builds of one package, told apart by conflict markers
(``extra == 'extra-7-project-cu124'``); an export (``uv export --extra cpu --format
pylock.toml``, a requirements file) holds one install's, those markers decided.  So the lock is
read for the selection given, or, given none, for the one under which it and a flat listing on
the other side differ least (:func:`envlock.formats.markers.least_costly`, the search ``verify``
infers an install with); the entries' markers keep every other comparison (platform, Python),
compared as markers by :func:`envlock.diff.api._match_markers`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from envlock._selection import Chosen, Selection
from envlock.formats import Reading, reading_of_lock
from envlock.formats.locks import Locked, LockFile

__all__ = ["for_other_side", "PROJECT_LOCKS"]

_DEFAULT = ((), (("", None),))
#: the locks whose extras and groups are ``uv sync``'s (:class:`envlock._selection.Selection`);
#: conda-lock's categories (conda entries too) and Pipfile.lock's sections are read whole
PROJECT_LOCKS = ("uv.lock", "pdm.lock", "poetry.lock")


def for_other_side(lock_reading: Reading, other: Reading, *, name: str, other_name: str,
                   requested: Any = None, given: Chosen | None = None
                   ) -> tuple[Reading, str | None]:
    """``lock_reading``'s lock read for one install, to compare with ``other`` (a lock or an
    export, not a manifest: :func:`envlock.diff.foreign.for_target` reads that).

    :param requested: :class:`envlock._selection.Requested`, the options given; ``None`` or
        nothing given: inferred from ``other`` when it says nothing of extras and groups itself
        (an export), else the lock is read whole, as before.
    :param given: the install those options choose, as the lock's own tool takes them
        (:func:`envlock.formats.lockchoice.given_choice`: ``uv sync``, ``pdm install``,
        ``poetry install``); ``None`` with options given: as
        :meth:`~envlock._selection.Requested.resolve` (``uv sync``'s reading) takes them.
    :returns: the reading to compare, and the sentence saying which install was read (``None``
        when the lock has no extras or groups, or is read whole).
    """
    lock = lock_reading.lock
    if lock is None or lock.kind not in PROJECT_LOCKS:
        return lock_reading, None
    pip = [x for x in lock.packages if x.manager == "pip"]
    choices = sorted({g for x in pip for g, _m in x.groups if g})
    if not choices:
        return lock_reading, None
    if given is not None:
        selection, how = given.selection, "as given"
    elif requested is not None and requested.given:
        selection, how = requested.resolve(choices), "as given"
    else:
        listed = _listed(other)
        if listed is None:
            return lock_reading, None
        from envlock.formats.markers import least_costly

        selection = least_costly(choices, lambda sel: len(_pairs(lock, sel) ^ listed),
                                 conflicts=lock.conflicts)
        how = f"inferred from {other_name}"
    narrowed = replace(lock, packages=_narrowed(lock, selection))
    read_for = given.said if given is not None and given.tool != "uv sync" else selection.label()
    return reading_of_lock(narrowed, name), f"{name} read for {read_for} ({how})"


def _listed(other: Reading) -> set[tuple[str, str]] | None:
    """``{(name, version)}`` of a flat listing's pip packages; ``None`` when ``other`` is a
    project lock itself (its extras and groups are its own to read) or lists no pip table."""
    lock = other.lock
    if lock is not None and (lock.kind in PROJECT_LOCKS or any(
            x.groups not in _DEFAULT for x in lock.packages if x.manager == "pip")):
        return None
    table = other.data.get("pip")
    if not isinstance(table, dict) or not isinstance(table.get("packages"), list):
        return None
    from envlock._names import canonicalize

    return {(canonicalize(str(p["name"])), str(p.get("version") or ""))
            for p in table["packages"] if isinstance(p, dict) and p.get("name")}


def _pairs(lock: LockFile, selection: Selection) -> set[tuple[str, str]]:
    """``{(name, version)}`` of the pip entries :func:`_narrowed` keeps (the inference's cost:
    no marker written)."""
    from envlock.formats.markers import with_selection

    chosen = {"", *selection.chosen}

    def possible(marker: str | None) -> bool:
        try:
            return not marker or with_selection(marker, selection) is not False
        except ValueError:
            return True

    return {(x.name, x.version) for x in lock.packages if x.manager == "pip" and (
        not x.groups or (possible(x.marker) and any(g in chosen and possible(m)
                                                    for g, m in x.groups)))}


def _narrowed(lock: LockFile, selection: Selection) -> tuple[Locked, ...]:
    """The entries the install of ``selection`` takes on some platform, each with its marker
    for that install: its own and its edges' (of the default install and the selected extras
    and groups), the extras and groups decided (:func:`~envlock.formats.markers.with_selection`);
    an entry listed twice in one version (two forks) once, its markers joined."""
    from envlock.formats.markers import with_selection

    chosen = {"", *selection.chosen}

    def decided(marker: str | None) -> str | bool:
        if not marker:
            return True
        try:
            return with_selection(marker, selection)
        except ValueError:
            return marker  # read_lock refuses a bad package marker; a bad edge's: kept as is

    out: list[Locked] = []
    where: dict[tuple[str, str, str | None, str | None], int] = {}
    for x in lock.packages:
        if x.manager != "pip" or not x.groups:
            out.append(x)
            continue
        reach = [decided(m) for g, m in x.groups if g in chosen]
        reach = [r for r in reach if r is not False]
        own = decided(x.marker)
        if not reach or own is False:
            continue
        parts = [] if own is True else [own]
        ways = [str(r) for r in dict.fromkeys(reach)]
        if True not in reach and ways != parts:
            parts.append(ways[0] if len(ways) == 1 else " or ".join(f"({r})" for r in ways))
        marker = " and ".join(f"({p})" for p in parts) if len(parts) > 1 else (
            parts[0] if parts else None)
        key = (x.name, x.version, x.vcs, x.commit)
        if key in where:
            first = out[where[key]]
            joined = None if first.marker is None or marker is None else \
                f"({first.marker}) or ({marker})"
            out[where[key]] = replace(first, marker=joined)
            continue
        where[key] = len(out)
        out.append(replace(x, marker=marker, groups=()))
    return tuple(out)
