"""Read inputs of ``envlock diff``: manifests and foreign environment descriptions.

The readers are :mod:`envlock.formats` (one per format, shared with ``verify --lock``,
``restore`` and ``lock -f``); this module keeps diff's view of them: ``(kind, partial manifest,
listing)``, where the partial manifest has the tables the format can tell and ``listing`` says
whether a package it does not list is absent (``"complete"``), unknown (``"partial"``: a spec),
or unknown for pip only (``"conda"``: an explicit list).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from envlock.formats import KINDS, Reading
from envlock.formats import read as _read
from envlock.formats.conda import parse_url as parse_conda_url
from envlock.manifest._schema import SCHEMA
from dataclasses import replace
from envlock._names import canonicalize
from envlock._selection import Chosen
from envlock.diff.lockpair import for_other_side
from envlock.formats import reading_of_lock
from envlock.formats.locks import for_install
from envlock.manifest._toml import load_toml

__all__ = ["read", "reading", "for_target", "requirements_for_target", "parse_conda_url",
           "parse_toml", "KINDS", "SCHEMA"]


def read(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any], str]:
    """Read one input file.

    :returns: ``(kind, data, listing)``: one of :data:`KINDS`, the (partial) manifest dict, and
        ``"complete"``, ``"partial"`` or ``"conda"``.
    :raises ManifestError: unreadable, empty, malformed or of an unknown format (one line).
    :raises ManifestVersionError: a manifest of a newer schema.
    """
    r = reading(path)
    return r.kind, r.data, r.listing


def reading(path: str | os.PathLike[str], *,
            parse: Callable[[str, str], dict[str, Any]] | None = None) -> Reading:
    """The whole :class:`envlock.formats.Reading` of one input (its lock too, for a lockfile).

    A run record still ``running`` is read as a reader can state it (its supervisor gone,
    Slurm's word on the job: :func:`envlock.runs.unfinished.settle`).

    :param parse: the TOML parser :func:`envlock.formats.read` takes (``envlock find``'s).
    :raises ManifestError: as :func:`read`.
    """
    r = _read(path, parse=parse)
    run = r.data.get("run") if r.kind == "manifest" else None
    if isinstance(run, dict) and run.get("outcome") == "running":
        import dataclasses

        from envlock.runs.unfinished import settle

        r = dataclasses.replace(r, data=settle(r.data))
    return r


def for_target(lock_reading: Reading, other: Reading, *, name: str, other_name: str,
               extras: Sequence[str] = (), dev: bool | None = None, requested: Any = None,
               lock_path: str | None = None) -> tuple[Reading, str | None]:
    """A universal lock (``uv.lock``, ``pylock.toml``, ``pdm.lock``, …) read for the Python and
    platform of the manifest it is compared with; compared with another lock or an export,
    read for one install instead (:func:`envlock.diff.lockpair.for_other_side`).

    The lock holds every platform's, Python version's, group's and extra's packages; the
    manifest records one environment.  Entries whose markers do not hold for the manifest's
    interpreter (:func:`envlock.formats.markers.applicable`) are left out, as are entries only
    a dependency group, an extra or a conda-lock category needs that the manifest does not have
    installed: neither is a difference between the two.

    :param lock_reading: the lock's reading (``lock`` set); ``other``: the manifest's.
    :param extras, dev: the groups the install took (``-E NAME``, ``--no-dev``), as
        :func:`envlock.formats.locks.for_install`: their entries are compared, installed or not.
    :param requested: the extras and groups of a lock with several installs
        (:class:`envlock._selection.Requested`), read as the lock's own tool takes them
        (``uv sync``, ``pdm install``, ``poetry install``: :func:`_given`); without it the
        install closest to what the manifest has installed, as ``verify --lock`` reads it
        (:func:`envlock.formats.markers.select_install`: uv's conflict markers need one).
    :param lock_path: the lock's path: the pyproject.toml beside it tells a uv.lock's
        ``[tool.uv] default-groups``, pdm's dev groups and poetry's optional groups; ``None``:
        the options are read as ``uv sync`` takes them, with ``dev`` its default group.
    :returns: the reading to compare, and the sentences (one a line) saying which install was
        read and what was left out (``None`` when nothing was, or when the manifest records no
        Python version).
    :raises ManifestError: ``requested`` names an extra or group a project lock lacks, or
        conflicting ones, as its tool refuses them (:func:`_given`:
        :func:`envlock.formats.lockchoice.choose`, :func:`envlock._selection.check_requested`).
    """
    lock = lock_reading.lock
    if lock is None:
        return lock_reading, None  # two manifests: no marker is evaluated (nor imported)
    given = _given(lock, lock_path, requested)  # refused here, before either side is read
    if other.kind != "manifest":  # another lock or an export: read for one install
        reading, said = for_other_side(lock_reading, other, name=name, other_name=other_name,
                                       requested=requested, given=given)
        return reading, _with_notes(said, given)
    from envlock.formats.markers import applicable, marker_holds, select_install, target_marker_env

    if given is None or dev:  # options given of a project lock: its own tool's (``given``)
        lock = for_install(lock, extras=extras, dev=dev)
    conda_optional = _conda_optional(lock, other, applicable)
    pip = [x for x in lock.packages if x.manager == "pip"]
    py, plat = _table(other.data, "python"), _table(other.data, "platform")
    version = py.get("version") if isinstance(py.get("version"), str) else None
    if not any(x.marker or x.groups not in ((), (("", None),)) for x in pip) or not version:
        if not conda_optional:
            return lock_reading, None
        narrowed = tuple(x for x in lock.packages
                         if x.manager != "conda" or x.name not in conda_optional)
        return reading_of_lock(replace(lock, packages=narrowed), name), _left_out_note(
            name, other_name, None, [], sorted(conda_optional))
    impl = py.get("implementation") if isinstance(py.get("implementation"), str) else None
    machine = plat.get("machine") if isinstance(plat.get("machine"), str) else None
    env = target_marker_env(version, impl, machine=machine)
    table = _table(other.data, "pip")
    installed = {canonicalize(str(p.get("name"))): str(p.get("version") or "")
                 for p in table.get("packages") or () if isinstance(p, dict) and p.get("name")}
    present = set(installed)
    selection, how = select_install(pip, env, installed, requested, conflicts=lock.conflicts,
                                    given=given)
    needed, optional = applicable(pip, env, selection, conflicts=lock.conflicts)
    chose = _with_notes(_read_for(name, selection, how, given), given)
    keep = {n for n in needed if n not in optional or n in present}
    kept = _kept(lock, keep, needed, conda_optional, lambda m: marker_holds(
        m, env, selection=selection))
    platform_only = sorted({x.name for x in pip} - set(needed))
    groups_only = sorted({n for n in optional if n not in present} | conda_optional)
    if not platform_only and not groups_only:
        return reading_of_lock(replace(lock, packages=tuple(kept)), name), chose
    where = f"Python {version}" + (f" on {machine}" if machine else "")
    note = _left_out_note(name, other_name, where, platform_only, groups_only)
    return reading_of_lock(replace(lock, packages=tuple(kept)), name), (
        f"{chose}\n{note}" if chose else note)


def _given(lock: Any, lock_path: str | None, requested: Any) -> Chosen | None:
    """The install the options ``requested`` choose of a uv.lock, pdm.lock or poetry.lock at
    ``lock_path``, as its own tool takes them (:func:`envlock.formats.lockchoice.given_choice`,
    ``restore``'s and ``verify --lock``'s rule); ``None``: no option, no path, or another
    kind of lock."""
    if lock_path is None or requested is None or not requested.given:
        return None
    from envlock.formats.lockchoice import given_choice

    return given_choice(lock_path, lock, requested)


def _read_for(name: str, selection: Any, how: str, given: Chosen | None) -> str | None:
    """``"uv.lock read for --extra cpu (as given)"``: a uv.lock's selection in ``uv sync``'s
    words, a pdm.lock's or poetry.lock's given in its own tool's (:attr:`Chosen.said`)."""
    if selection is None:
        return None
    if given is not None and given.tool != "uv sync":
        return f"{name} read for {given.said} ({how})"
    return f"{name} read for {selection.label()} ({how})"


def _with_notes(said: str | None, given: Chosen | None) -> str | None:
    """``said`` and, a line each, what was assumed to read the options (:attr:`Chosen.notes`)."""
    lines = [*([said] if said else []), *(given.notes if given is not None else ())]
    return "\n".join(lines) or None


def _kept(lock: Any, keep: set[str], needed: dict[str, Any], conda_optional: set[str],
          holds_for: Any) -> list[Any]:
    """The lock's entries the install takes: conda ones not optional, and of the pip ones in
    ``keep`` the one fork whose version is ``needed`` and whose marker ``holds_for`` the target
    (an unparsable marker counts as holding), its marker dropped."""
    kept, seen = [], set()
    for x in lock.packages:
        if x.manager != "pip":
            if x.name not in conda_optional:
                kept.append(x)
            continue
        if x.name not in keep or x.name in seen:
            continue
        if needed.get(x.name) not in (None, x.version):
            continue  # another fork of it: the one the install's edges reach (uv's conflicts)
        try:
            holds = not x.marker or holds_for(x.marker)
        except ValueError:
            holds = True
        if holds:
            seen.add(x.name)
            kept.append(replace(x, marker=None))
    return kept


def requirements_for_target(spec: Reading, other: Reading, *, name: str, other_name: str
                            ) -> tuple[Reading, str | None]:
    """A requirements file (or an ``environment.yml``'s ``pip:`` section) read for the Python
    and platform of the manifest it is compared with, as pip reads it there: a line whose
    environment marker does not hold is not installed (pip's ``InstallRequirement.match_markers``:
    ``Requirement.marker.evaluate(env)``, :mod:`packaging.markers`, ``extra`` empty), with
    ``env`` the manifest's interpreter (:func:`envlock.formats.markers.target_marker_env`).

    :param spec: the requirements reading (:attr:`envlock.formats.Reading.marked` set);
        ``other``: the manifest's.
    :returns: the reading to compare (the lines that hold, their markers dropped: one entry
        per project, the first), and the sentence saying what was left out (``None`` when
        nothing was, or the manifest records no Python version).
    """
    if not spec.marked or other.kind != "manifest":
        return spec, None
    py, plat = _table(other.data, "python"), _table(other.data, "platform")
    version = py.get("version") if isinstance(py.get("version"), str) else None
    if not version:
        return spec, None
    from packaging.markers import Marker

    from envlock.formats.markers import target_marker_env

    impl = py.get("implementation") if isinstance(py.get("implementation"), str) else None
    machine = plat.get("machine") if isinstance(plat.get("machine"), str) else None
    env = target_marker_env(version, impl, machine=machine)
    kept: dict[str, dict[str, Any]] = {}
    left: list[str] = []
    for e in spec.marked:
        if "marker" in e and not Marker(e["marker"]).evaluate({**env, "extra": ""}):
            left.append(str(e["name"]))
            continue
        kept.setdefault(str(e["name"]), {k: v for k, v in e.items() if k != "marker"})
    left = sorted(set(left) - set(kept))
    table = {**_table(spec.data, "pip"), "packages": list(kept.values())}
    narrowed = replace(spec, data={**spec.data, "pip": table}, marked=())
    if not left:
        return narrowed, None
    where = f"Python {version}" + (f" on {machine}" if machine else "")
    return narrowed, _left_out_note(name, other_name, where, left, [])


def _conda_optional(lock: Any, other: Reading, applicable: Any) -> set[str]:
    """Conda entries of ``lock`` only a category the install did not take needs, that the
    manifest ``other`` does not have installed."""
    conda_entries = [x for x in lock.packages if x.manager == "conda"]
    if all(x.groups in ((), (("", None),)) for x in conda_entries):
        return set()
    _, optional = applicable(conda_entries, {})
    table = _table(other.data, "conda")
    present = {str(p.get("name")) for p in table.get("packages") or () if isinstance(p, dict)}
    return {n for n in optional if n not in present}


def _left_out_note(name: str, other_name: str, where: str | None, platform_only: list[str],
                   groups_only: list[str]) -> str:
    parts = []
    if platform_only:
        parts.append(f"{_n(platform_only)} for other platforms or Python versions "
                     f"({_some(platform_only)})")
    if groups_only:
        parts.append(f"{_n(groups_only)} needed only by dependency groups or extras "
                     f"{other_name} does not have installed ({_some(groups_only)})")
    head = f"{name} read for {other_name}'s {where}" if where else f"{name} read for {other_name}"
    return f"{head}: left out " + "; ".join(parts)


def _n(names: list[str]) -> str:
    return f"{len(names)} entry" if len(names) == 1 else f"{len(names)} entries"


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    t = data.get(key)
    return t if isinstance(t, dict) else {}


def _some(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … {len(names) - limit} more" if len(names) > limit else "")


def parse_toml(text: str, name: str) -> dict[str, Any]:
    """Parse TOML (or JSON, starting with ``{``) text with bounded nesting
    (:func:`envlock.manifest._toml.load_toml`, envlock's one TOML reader).

    :raises ManifestError: malformed text.
    """
    return load_toml(text, name)
