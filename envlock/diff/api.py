"""The diff pipeline behind the package face :mod:`envlock.diff` (which re-exports it lazily,
so that importing one of diff's modules — the impact model for ``verify`` — does not load the
whole engine).

Pipeline: :func:`load_inputs` reads each file (a manifest or a foreign format, see
:mod:`envlock.diff.foreign`) and flattens it into facts (:mod:`envlock.diff.facts`);
:func:`diff` compares two inputs pairwise or three and more through their majority
(:mod:`envlock.diff.engine`) and ranks explanations with the impact model
(:mod:`envlock.diff.impact`, :mod:`envlock.diff.rules`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from envlock.diff.engine import (
    ManyDiff,
    ManyTally,
    PairDiff,
    compare_many,
    compare_pair,
    unique_labels,
)
from envlock.diff.facts import FactSet, areas_of, extract
from envlock.diff.impact import KB, load_kb
from envlock._bounded import MAX_PACKAGES
from envlock.diff.fleet import read_text
from envlock.errors import EnvlockError, ManifestError
from envlock.manifest._schema import check_header
from envlock.manifest._toml import load_toml


class NothingToCompareError(EnvlockError):
    """The inputs share no fact that could be compared: not "identical" (exit status 2)."""

__all__ = ["diff", "load_inputs", "iter_inputs", "expand_paths", "PairDiff", "ManyDiff",
           "FactSet", "NothingToCompareError", "compare_many"]


PathLike = str | os.PathLike[str]


def expand_paths(paths: Iterable[PathLike]) -> list[str]:
    """Expand directories to the ``*.toml`` manifests they hold (sorted by name).

    :raises ManifestError: a directory holds no ``*.toml`` file, or a path does not exist.
    """
    out: list[str] = []
    for raw in paths:
        p = os.fspath(raw)
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".toml")
                           and os.path.isfile(os.path.join(p, n)))
            if not found:
                raise ManifestError(f"{p}: directory holds no *.toml manifest")
            out.extend(found)
        elif not os.path.exists(p):
            raise ManifestError(f"{p}: no such file")
        else:
            out.append(p)
    return out


def load_inputs(paths: Sequence[PathLike], kb: KB, *, extras: Sequence[str] = (),
                dev: bool | None = None, requested: Any = None) -> list[FactSet]:
    """Read and flatten each input.

    The label of a manifest is its ``[envlock] host`` (for many node manifests), else the
    file name; repeated labels get the path appended.

    :raises ManifestError: an input is unreadable, empty, malformed or of unknown format, or a
        value diff reads has the wrong type (:func:`envlock.diff.typecheck.check`).
    :raises ManifestVersionError: a manifest has a newer schema.
    """
    if len(paths) > 2:
        sets = list(iter_inputs(paths, kb))
        unique_labels(sets)
        return sets
    from envlock.diff.typecheck import check as check_shape

    readings = [_reading(p) for p in paths]
    for p, r in zip(paths, readings, strict=True):
        if r.kind == "manifest":
            check_shape(r.data, os.fspath(p))
    notes: list[list[str]] = [[] for _ in paths]
    if len(paths) == 2:  # a universal lock against a manifest: read for the manifest's target
        for i in (0, 1):
            if readings[i].lock is None and readings[i].marked:  # requirements with markers
                from envlock.diff import foreign

                narrowed, note = foreign.requirements_for_target(
                    readings[i], readings[1 - i], name=os.path.basename(paths[i]),
                    other_name=os.path.basename(paths[1 - i]))
                readings[i] = narrowed
                notes[i] += note.splitlines() if note else []
                continue
            if readings[i].lock is None:
                continue  # not a lock: foreign.for_target would return it as it is
            from envlock.diff import foreign

            narrowed, note = foreign.for_target(
                readings[i], readings[1 - i], name=os.path.basename(paths[i]),
                other_name=os.path.basename(paths[1 - i]), extras=extras, dev=dev,
                requested=requested, lock_path=os.fspath(paths[i]))
            readings[i] = narrowed
            if note:
                notes[i] += note.splitlines()
    sets = []
    for p, r, n in zip(paths, readings, notes, strict=True):
        fs = _facts(p, r, kb, many=False)
        fs.notes.extend(n)
        sets.append(fs)
    if len(sets) == 2:
        _drop_lock_projects(sets, readings)
    for i in range(1, len(sets)):
        _match_markers(sets[0], sets[i], readings[0], readings[i])
    unique_labels(sets)
    return sets


def _reading(p: PathLike) -> Any:
    """One input read: a manifest the short way (:func:`_manifest`), anything else (and a
    manifest that way refuses) by :func:`envlock.diff.foreign.reading`, which words errors."""
    got = _manifest(os.fspath(p))
    if got is not None:
        return got
    from envlock.diff import foreign

    return foreign.reading(p)


#: the first content line of a text (:func:`envlock.formats.envfiles.is_explicit`'s rule)
_FIRST = re.compile(r"^[ \t]*([^#\s].*)$", re.MULTILINE)


def _manifest(path: str) -> _Manifest | None:
    """The reading :func:`envlock.formats.read` gives a plain envlock manifest, without the
    readers of every other format (~10 ms of imports): a ``.toml``/``.json`` file whose first
    content line is not ``@EXPLICIT`` (the one format recognised before TOML is parsed), that
    parses (:func:`~envlock.manifest._toml.load_toml`), has an ``[envlock]`` table (the first
    TOML format :data:`envlock._kinds.FORMATS` tries), a header envlock reads
    (:func:`~envlock.manifest._schema.check_header`), no ``[run]`` and at most
    :data:`~envlock._bounded.MAX_PACKAGES` packages.  ``None`` for anything else: the full
    reader then reads it, or words why not."""
    if os.path.splitext(path)[1].lower() not in (".toml", ".json"):
        return None
    text = read_text(path)
    if text is None or not text.strip():
        return None
    first = _FIRST.search(text)
    if first and first.group(1).rstrip() == "@EXPLICIT":
        return None
    try:
        data = load_toml(text, path)
        if "envlock" not in data or "run" in data:
            return None
        check_header(data)
    except (EnvlockError, ValueError, RecursionError):
        return None
    tables = [data.get("pip"), data.get("conda")]
    if not all(t is None or (isinstance(t, dict) and isinstance(t.get("packages", []), list))
               for t in tables):
        return None
    if sum(len(t.get("packages") or ()) for t in tables if t is not None) > MAX_PACKAGES:
        return None
    return _Manifest(data)


def _facts(p: PathLike, r: Any, kb: KB, *, many: bool) -> FactSet:
    """The facts of one read input; the label of a manifest among many is its node or host."""
    return extract(r.data, label=_label(p, r.data, many), path=os.fspath(p), kind=r.kind,
                   aliases=kb.aliases, listing=r.listing)


def _label(p: PathLike, data: Any, many: bool) -> str:
    raw_head = data.get("envlock")
    head = raw_head if isinstance(raw_head, dict) else {}
    # several Slurm nodes may share a host (and a node is known by its Slurm name): the
    # node of [slurm] first, then the host
    raw_slurm = data.get("slurm")
    node = raw_slurm.get("node") if isinstance(raw_slurm, dict) else None
    name = node if isinstance(node, str) and node else head.get("host")
    return str(name) if many and name else os.path.basename(p)


def iter_inputs(paths: Sequence[PathLike], kb: KB) -> Iterator[FactSet]:
    """Read and flatten three or more inputs one at a time (for :class:`ManyTally`): only
    the first input's facts and reading are kept while the others are read, so a fleet of
    node manifests is read in memory bounded by one manifest (and equal tables of node
    manifests are read once: :class:`envlock.diff.fleet.FleetReader`).  Labels are not yet
    unique (:func:`unique_labels` on the inputs kept).

    :raises ManifestError, ManifestVersionError: as :func:`load_inputs`.
    """
    for fs, _ in _read_many(paths, kb):
        yield fs


def _read_many(paths: Sequence[PathLike], kb: KB, *, union: bool = True
               ) -> Iterator[tuple[FactSet, Any]]:
    """:func:`iter_inputs`, each input with the shared dicts its facts are the union of
    (:meth:`ManyTally.add`'s ``parts``), or ``None``.  Without ``union`` an input yielded
    with its ``parts`` has ``facts`` left empty but for the first input's (the caller reads
    the parts: :meth:`ManyTally.add`)."""
    from envlock.diff.fleet import FleetReader
    from envlock.diff.typecheck import check as check_shape

    fleet = FleetReader(kb.aliases)
    first: tuple[FactSet, Any] | None = None
    for p in paths:
        path = os.fspath(p)
        text = read_text(path)
        got = fleet.facts(path, text, union=union or first is None) if (
            text is not None and text.strip()) else None
        parts = None
        if got is not None:  # a node manifest, its equal tables read once for the fleet
            data, fs, parts = got
            fs.label = _label(p, data, True)
            r: Any = _Manifest(data)
        else:
            from envlock.diff import foreign

            r = foreign.reading(p)
            if r.kind == "manifest":
                check_shape(r.data, path)
            fs = _facts(p, r, kb, many=True)
        if first is None:
            first = (fs, r)
        elif (got is None or fleet.marked) and _match_markers(first[0], fs, first[1], r):
            parts = None  # keys renamed: the facts are no longer the shared dicts' union
        yield fs, parts


class _Manifest:
    """A manifest read by :class:`envlock.diff.fleet.FleetReader`: what the rest of
    :func:`iter_inputs` reads of a :class:`envlock.formats.Reading`."""

    kind = "manifest"
    listing = "complete"
    lock = None
    marked = ()

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


_MARKED = " ; "


def _match_markers(a: FactSet, b: FactSet, ra: Any, rb: Any) -> bool:
    """A package listed once per environment marker (``uv export``, pylock, a uv.lock fork) is
    keyed ``name ; marker``; two inputs that write one marker differently (``'`` or ``"``, a
    uv.lock's ``resolution-markers`` joined with ``or``, ``python_version`` for
    ``python_full_version``) still mean the same entry.  ``b``'s key is renamed to ``a``'s where
    the markers are equivalent (:func:`envlock.formats.markereq.markers_equivalent`, for the
    Python versions the locks allow).  Returns whether ``b`` has such keys (and so may have
    been renamed)."""
    if not any(_MARKED in key for _, key in b.facts):
        return False  # nothing of b's to rename (most inputs: one entry per package)
    from envlock.formats.markereq import markers_equivalent

    def marked(fs: FactSet) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for area, key in fs.facts:
            if area == "package" and _MARKED in key and ("package", key) not in other.facts:
                out.setdefault(key.split(_MARKED, 1)[0], []).append(key)
        return out

    other = b
    only_a = marked(a)
    other = a
    only_b = marked(b)
    rp = next((r.lock.requires_python for r in (ra, rb)
               if r.lock is not None and r.lock.requires_python), None)
    for name, keys_b in only_b.items():
        keys_a = only_a.get(name, [])
        for kb in keys_b:
            mb = kb.split(_MARKED, 1)[1]
            vb = getattr(b.facts[("package", kb)], "version", None)
            # the same version first: most pairs are found without a full comparison
            for ka in sorted(keys_a, key=lambda k: getattr(a.facts[("package", k)], "version",
                                                          None) != vb):
                if markers_equivalent(ka.split(_MARKED, 1)[1], mb, requires_python=rp):
                    keys_a.remove(ka)
                    for (area, key) in list(b.facts):
                        if key == kb or key.startswith(kb + "."):
                            b.facts[(area, ka + key[len(kb):])] = b.facts.pop((area, key))
                    break
    return True


def _drop_lock_projects(sets: list[FactSet], readings: list[Any]) -> None:
    """The project a lock is for (uv's workspace member, a pylock directory entry, an editable
    entry of poetry/pdm) is installed in the other input's environment but is no package of
    the lock: not compared, and said in the context."""
    for i in (0, 1):
        lock = readings[i].lock
        if lock is None or not lock.projects:
            continue
        other = sets[1 - i]
        gone = sorted(p for p in lock.projects if other.facts.pop(("package", p), None) is not None)
        if gone:
            other.notes.append(f"{', '.join(gone)}: the project {sets[i].label} locks (its "
                               f"own entry there), installed in {other.label}; not compared")
        # a spec's editable local project (`-e .`, as `uv export` writes the project itself)
        from envlock.diff.facts import normalize_name

        local = sorted(str(p["name"]) for p in (readings[1 - i].data.get("pip") or {}).get(
            "packages") or () if isinstance(p, dict) and p.get("local")
            and p.get("origin") == "editable"
            and other.facts.pop(("package", str(p["name"]) if p.get("unnamed") else
                                 normalize_name(str(p["name"]))), None) is not None)
        if local:
            other.notes.append(f"{', '.join(local)}: an editable local project of {other.label} "
                               f"(-e), as {sets[i].label} has its own project; not compared")


def diff(paths: Sequence[PathLike], *, kb_files: Sequence[PathLike] = (),
         only: Sequence[str] = (), ignore: Sequence[str] = (), extras: Sequence[str] = (),
         dev: bool | None = None, requested: Any = None) -> PairDiff | ManyDiff:
    """Compare two or more inputs.

    :param paths: manifest or foreign files, or directories of ``*.toml`` manifests.
    :param kb_files: extra impact-model files (``--kb``).
    :param only: areas to compare (``package``, ``env``, ``cpu``, …); empty: all.
    :param ignore: fnmatch patterns over ``area:key`` (or ``key``) to leave out.
    :param extras, dev: a lock compared with a manifest is read as its install with these
        optional groups (``-E NAME``, ``--no-dev``; :func:`envlock.formats.locks.for_install`).
    :param requested: the extras and groups a lock's install took, as ``uv sync`` takes them
        (:class:`envlock._selection.Requested`: ``--extra``/``--group``/``--all-extras``/
        ``--all-groups``/``--no-dev``); ``None``: inferred from the manifest compared with, as
        ``verify --lock`` does (:func:`envlock.formats.markers.select_install`).  Between two
        locks it applies to each ``uv.lock``/``pdm.lock``/``poetry.lock`` side, as ``uv
        export`` takes it; ``None``: inferred from the other side when that is an export
        (:func:`envlock.diff.lockpair.for_other_side`).
    :returns: a :class:`PairDiff` for two inputs, a :class:`ManyDiff` for more.
    :raises ManifestError: fewer than two inputs, or an input cannot be read.
    :raises EnvlockError: ``only`` names an area none of the inputs has.
    :raises NothingToCompareError: no fact could be compared (no table both inputs record,
        or all of them filtered out): that is not "identical", so it is an error.
    """
    files = expand_paths(paths)
    if len(files) < 2:
        raise ManifestError("need at least two inputs to compare")
    kb = load_kb(kb_files)
    tally: ManyTally | None = None
    if len(files) > 2:  # streamed: one input at a time, interned (memory: distinct facts)
        tally = ManyTally()
        for fs, parts in _read_many(files, kb, union=False):
            tally.add(fs, parts)
        unique_labels(tally.inputs)
        sets = tally.inputs
    else:
        sets = load_inputs(files, kb, extras=extras, dev=dev, requested=requested)
    known = areas_of(sets)
    unknown = [a for a in only if a not in known]
    if unknown:
        raise EnvlockError(f"unknown area {unknown[0]!r} for --only (these inputs have: "
                           f"{', '.join(known)})")
    globs = [*kb.noise, *ignore]
    if len(sets) == 2:
        pair = compare_pair(sets[0], sets[1], kb, only=only, ignore=globs)
        compared = bool(pair.changes or pair.identical or pair.satisfied or pair.unlisted
                        or pair.unknown)
        result: PairDiff | ManyDiff = pair
    else:
        assert tally is not None
        many = tally.result(kb, only=only, ignore=globs)
        compared = bool(many.varying or many.identical)
        result = many
    if not compared and isinstance(result, PairDiff) and _both_empty_listings(sets):
        return dataclasses.replace(result, context=(
            *result.context, "neither lists a package (a lock's own project is not one): the "
            "same, empty, environment"))
    if not compared:
        raise NothingToCompareError(_nothing(files, result.not_compared, only, ignore))
    return result


def _both_empty_listings(sets: Sequence[FactSet]) -> bool:
    """Two lockfiles, each a complete listing (a package it does not list is absent) that
    lists nothing: valid for their tools (an empty ``pixi.lock``, a ``uv.lock`` of a project
    without dependencies), and one empty environment each — identical, not "nothing to
    compare".  Manifests and specs are not: a manifest always records its target."""
    return all(fs.kind != "manifest" and fs.listing == "complete" and not fs.facts
               and not any(fs.areas.values()) for fs in sets)


def _nothing(files: Sequence[str], not_compared: Sequence[tuple[str, str]],
             only: Sequence[str], ignore: Sequence[str]) -> str:
    names = ", ".join(os.path.basename(f) for f in files)
    why = "; ".join(f"{area}: {reason}" for area, reason in not_compared)
    filters = " after --only/--ignore" if only or ignore else ""
    return (f"nothing to compare: {names} have no fact in common{filters}"
            + (f" (not compared: {why})" if why else " (no table envlock diff reads)"))
