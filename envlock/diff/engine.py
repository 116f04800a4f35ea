"""Compare fact sets: two inputs pairwise, or many against their majority.

:func:`compare_pair` lists every differing fact (a :class:`Change`), ranks the explanations
(:mod:`envlock.diff.rules` plus the impact model) and counts what is identical and what
could not be compared.  :func:`compare_many` (three or more inputs) builds the majority value
of each fact and compares each deviating input with it, so that 32 nodes give "node17 has
driver 535 while 31 nodes have 550" rather than 496 pairs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from envlock.diff.facts import FactSet, areas_of, same
from envlock.diff.changes import Change, Explanation
from envlock.diff.impact import KB, Globs, change_size

__all__ = ["Change", "Explanation", "PairDiff", "ManyDiff", "Varying", "compare_pair",
           "compare_many"]


class Varying(NamedTuple):
    """A fact that is not the same in every input of a many-input diff.

    :ivar majority: the value more than half of the inputs that record the area hold, or
        ``None`` when no value has more than half (then ``has_majority`` is false; ``None``
        with ``has_majority`` true means the majority lacks the fact).
    :ivar count: how many inputs hold ``majority`` (the largest count when there is none).
    :ivar deviants: ``{label: value}`` of the inputs that do not hold the majority value
        (every input when there is no majority).
    :ivar values: every distinct value, most common first: ``(value, count, labels)``.
    """

    area: str
    key: str
    majority: Any
    count: int  # type: ignore[assignment]  # a field named like tuple.count, on purpose (public API)
    deviants: dict[str, Any]
    values: tuple[tuple[Any, int, tuple[str, ...]], ...] = ()
    has_majority: bool = True


@dataclass
class PairDiff:
    """Result of comparing input ``a`` with ``b`` (``a`` may be a synthetic majority)."""

    a: FactSet
    b: FactSet
    changes: list[Change]
    explanations: list[Explanation]
    identical: dict[str, int]
    not_compared: list[tuple[str, str]]
    unlisted: dict[str, int]
    context: list[str] = field(default_factory=list)
    #: per area, a spec's constraints the other side satisfies (``torch >=2.0`` against a
    #: lock's 2.3.1): equal in what the spec says, so not differences, but not "identical".
    satisfied: dict[str, int] = field(default_factory=dict)
    #: keys of the facts not compared because an input does not record the version (a pip
    #: freeze's ``name @ file:///…/work`` of a conda build): neither equal nor different.
    unknown: list[str] = field(default_factory=list)

    @property
    def differ(self) -> bool:
        """Whether any compared fact differs."""
        return bool(self.changes)


@dataclass
class ManyDiff:
    """Result of comparing three or more inputs through their majority."""

    inputs: list[FactSet]
    majority: FactSet
    deviants: list[PairDiff]
    varying: list[Varying]
    identical: dict[str, int]
    not_compared: list[tuple[str, str]]
    context: list[str] = field(default_factory=list)

    @property
    def differ(self) -> bool:
        """Whether any input deviates from the majority."""
        return bool(self.varying)


class _Filter:
    """``--only`` areas and ``--ignore`` globs (over ``area:key`` or ``key``), compiled once."""

    def __init__(self, only: Sequence[str], ignore: Sequence[str]) -> None:
        self.only = frozenset(only)
        self.globs = Globs(ignore) if ignore else None

    def keep(self, area: str, key: str) -> bool:
        if self.only and area not in self.only:
            return False
        g = self.globs
        return g is None or not (g.match(f"{area}:{key}") or g.match(key))


def _reason(fs: FactSet, area: str) -> str:
    why = fs.areas.get(area)
    if why is None:
        return f"{fs.label} lacks it"
    return f"{fs.label}: {why}"


def _manager(value: Any) -> str | None:
    return getattr(value, "manager", None)


def _unlisted(fs: FactSet, other: Any) -> bool:
    """Whether ``fs`` is silent about the package ``other`` holds: a spec lists only some
    packages; an explicit list (listing ``"conda"``) never lists pip packages, a ``pip freeze``
    (listing ``"pip"``) never lists conda packages that are not Python distributions
    (``cuda-cudart``, ``libgcc``)."""
    if fs.listing == "partial":
        return True
    manager = getattr(other, "manager", None)
    if fs.listing == "conda":  # an explicit list never lists pip packages
        return manager == "pip"
    # A pip freeze lists Python distributions, conda's among them, never the other conda
    # packages: those whose build string has no ``py`` (conda-forge's and Anaconda's builds of
    # Python packages are ``py311h…``, ``pyhd8ed1ab_0``, ``py_0``; ``cuda-cudart`` is ``0``).
    build = getattr(other, "build", None)
    return (fs.listing == "pip" and manager == "conda" and isinstance(build, str) and bool(build)
            and "py" not in build.lower())


def compare_pair(a: FactSet, b: FactSet, kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = (), counts: dict[tuple[str, str], int] | None = None,
                 skip: frozenset[tuple[str, str]] = frozenset()) -> PairDiff:
    """Compare two fact sets.

    :param only: compare these areas only (empty: all).
    :param ignore: fnmatch patterns over ``area:key`` or ``key`` to leave out.
    :param counts: for a majority comparison, how many inputs hold ``a``'s value of each fact.
    :param skip: facts not to compare (in a majority comparison: those without a majority).
    :returns: the changes (ordered by area, then key), ranked explanations and counts.
    """
    from envlock.diff import rules  # noqa: PLC0415

    areas = areas_of([a, b])
    compared = {x for x in areas if a.areas.get(x) == "" and b.areas.get(x) == ""}
    not_compared = [(x, _reason(a, x) if a.areas.get(x) != "" and not (
        a.areas.get(x) is None and b.areas.get(x)) else _reason(b, x))
                    for x in areas if x not in compared and (not only or x in only)]
    identical: Counter[str] = Counter()
    satisfied: Counter[str] = Counter()
    unlisted: Counter[str] = Counter()
    unknown: list[str] = []
    changes: list[Change] = []
    fa, fb = a.facts, b.facts
    keep = _Filter(only, ignore).keep
    for key in fa.keys() | fb.keys():
        area = key[0]
        if area not in compared or key in skip or not keep(area, key[1]):
            continue
        va, vb = fa.get(key), fb.get(key)
        if area == "package" and ((a.listing == "conda" and _manager(vb) == "pip")
                                  or (b.listing == "conda" and _manager(va) == "pip")):
            unlisted[area] += 1  # an explicit list says nothing about pip packages
            continue
        if va is not None and vb is not None and same(va, vb):
            if (getattr(va, "constraint", None) is None) != (getattr(vb, "constraint", None) is None):
                satisfied[area] += 1
            else:
                identical[area] += 1
            continue
        if area == "package" and ((va is None and _unlisted(a, vb))
                                  or (vb is None and _unlisted(b, va))):
            unlisted[area] += 1
            continue
        if va is not None and vb is not None and "unknown" in (
                getattr(va, "version", None), getattr(vb, "version", None)):
            unknown.append(key[1])  # cannot be told: not shown equal, not a difference
            continue
        comp = kb.component(*key)
        size = change_size(va, vb)
        if comp.id == "python-version" and size not in ("major", "minor") and _same_minor(va, vb):
            comp = kb.component("package", "python")  # 3.11.8 → 3.11.9: the interpreter's rank
        changes.append(Change(area, key[1], (va, vb), size, comp.id, comp.cls,
                              counts.get(key) if counts else None,
                              area in a.generic or area in b.generic))
    order = {x: i for i, x in enumerate(areas)}
    changes.sort(key=lambda c: (order.get(c.area, 99), c.key))
    explanations, notes = rules.explain_noted(a, b, changes, kb)
    return PairDiff(a, b, changes, explanations, dict(identical), not_compared, dict(unlisted),
                    (rules.context([a, b]) if counts is None else []) + notes, dict(satisfied),
                    sorted(unknown))


def _same_minor(va: Any, vb: Any) -> bool:
    """Whether two Python versions (or a version and a spec's ``3.11.9.*``) share major.minor:
    a patch move ranks as the interpreter, a minor move as a numerical package (impact.toml,
    ``python-version``)."""

    def mm(v: Any) -> str | None:
        m = re.search(r"(\d+)\.(\d+)", str(getattr(v, "version", v) or ""))
        return f"{m.group(1)}.{m.group(2)}" if m else None

    return mm(va) is not None and mm(va) == mm(vb)


def compare_many(inputs: Sequence[FactSet], kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = ()) -> ManyDiff:
    """Compare three or more fact sets through the majority value of each fact.

    A value is the majority of a fact when more than half of the inputs that record its area
    hold it (absent counts as a value); an input deviates when its value is not the majority.
    A fact without a majority (2/2/1 of five) is listed with its distinct values and who
    holds each, and is left out of the per-input comparisons: no input is "the odd one".
    Each deviating input is compared with the majority by :func:`compare_pair`.
    """
    from envlock.diff import rules  # noqa: PLC0415

    n = len(inputs)
    areas = areas_of(inputs)
    majority_areas = {x: "" for x in areas
                      if sum(1 for s in inputs if s.areas.get(x) == "") * 2 > n}
    not_compared = [(x, (f"{n - sum(1 for s in inputs if s.areas.get(x) == '')} of {n} inputs "
                     "lack it")) for x in areas if x not in majority_areas
                    and (not only or x in only)]
    facts: dict[tuple[str, str], Any] = {}
    counts: dict[tuple[str, str], int] = {}
    varying: list[Varying] = []
    identical: Counter[str] = Counter()
    keys: set[tuple[str, str]] = set()
    no_majority: set[tuple[str, str]] = set()
    for s in inputs:
        keys.update(s.facts)
    order = {x: i for i, x in enumerate(areas)}
    keep = _Filter(only, ignore).keep
    for key in sorted(keys, key=lambda k: (order.get(k[0], 99), k[1])):
        if key[0] not in majority_areas or not keep(key[0], key[1]):
            continue
        holders = [s for s in inputs if s.areas.get(key[0]) == ""]
        groups: dict[Any, list[str]] = {}
        for s in holders:
            v = s.facts.get(key)
            match = next((g for g in groups if g is not None and v is not None and same(g, v)),
                         v)
            groups.setdefault(match, []).append(s.label)
        # most common first; ties in the order of the inputs (stable sort)
        ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        value, labels = ranked[0]
        count = len(labels)
        if count == len(holders):
            identical[key[0]] += 1
            if value is not None:
                facts[key] = value
            counts[key] = count
            continue
        values = tuple((v, len(ls), tuple(ls)) for v, ls in ranked)
        if count * 2 > len(holders):
            if value is not None:
                facts[key] = value
            counts[key] = count
            odd = {lab: v for v, ls in ranked[1:] for lab in ls}
            varying.append(Varying(key[0], key[1], value, count, odd, values, True))
        else:
            no_majority.add(key)
            odd = {lab: v for v, ls in ranked for lab in ls}
            varying.append(Varying(key[0], key[1], None, count, odd, values, False))
    majority = FactSet(label="the majority", path="", kind="majority", facts=facts,
                       areas=majority_areas,
                       generic={a for s in inputs for a in s.generic})
    deviants = []
    skip = frozenset(no_majority)
    for s in inputs:
        if any(s.label in v.deviants for v in varying if v.has_majority):
            deviants.append(compare_pair(majority, s, kb, only=only, ignore=ignore,
                                         counts=counts, skip=skip))
    return ManyDiff(list(inputs), majority, deviants, varying, dict(identical), not_compared,
                    rules.context(inputs))


def unique_labels(sets: Iterable[FactSet]) -> None:
    """Make labels unique in place: a repeated host name gets its file name appended."""
    sets = list(sets)
    seen = Counter(s.label for s in sets)
    for s in sets:
        if seen[s.label] > 1:
            s.label = s.path if s.path.endswith(s.label) else f"{s.label} ({s.path})"
