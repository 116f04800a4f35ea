"""Compare fact sets: two inputs pairwise, or many against their majority.

:func:`compare_pair` lists every differing fact (a :class:`Change`), ranks the explanations
(:mod:`envlock.diff.rules` plus the impact model) and counts what is identical and what
could not be compared.  :func:`compare_many` (three or more inputs) builds the majority value
of each fact and compares each deviating input with it, so that 32 nodes give "node17 has
driver 535 while 31 nodes have 550" rather than 496 pairs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envlock.diff.facts import FactSet, areas_of, same
from envlock.diff.changes import Change, Explanation
from envlock.diff.impact import KB, Globs, change_size

__all__ = ["Change", "Explanation", "PairDiff", "ManyDiff", "compare_pair", "compare_many"]


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
    varying: list[tuple[str, str, Any, int, dict[str, Any]]]
    identical: dict[str, int]
    not_compared: list[tuple[str, str]]

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
    packages; an explicit list (listing ``"conda"``) never lists pip packages."""
    if fs.listing == "partial":
        return True
    return fs.listing == "conda" and getattr(other, "manager", None) == "pip"


def compare_pair(a: FactSet, b: FactSet, kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = (), counts: dict[tuple[str, str], int] | None = None
                 ) -> PairDiff:
    """Compare two fact sets.

    :param only: compare these areas only (empty: all).
    :param ignore: fnmatch patterns over ``area:key`` or ``key`` to leave out.
    :param counts: for a majority comparison, how many inputs hold ``a``'s value of each fact.
    :returns: the changes (ordered by area, then key), ranked explanations and counts.
    """
    from envlock.diff import rules  # noqa: PLC0415

    areas = areas_of([a, b])
    compared = {x for x in areas if a.areas.get(x) == "" and b.areas.get(x) == ""}
    not_compared = [(x, _reason(a, x) if a.areas.get(x) != "" and not (
        a.areas.get(x) is None and b.areas.get(x)) else _reason(b, x))
                    for x in areas if x not in compared and (not only or x in only)]
    identical: Counter[str] = Counter()
    unlisted: Counter[str] = Counter()
    changes: list[Change] = []
    fa, fb = a.facts, b.facts
    keep = _Filter(only, ignore).keep
    for key in fa.keys() | fb.keys():
        area = key[0]
        if area not in compared or not keep(area, key[1]):
            continue
        va, vb = fa.get(key), fb.get(key)
        if area == "package" and ((a.listing == "conda" and _manager(vb) == "pip")
                                  or (b.listing == "conda" and _manager(va) == "pip")):
            unlisted[area] += 1  # an explicit list says nothing about pip packages
            continue
        if va is not None and vb is not None and same(va, vb):
            identical[area] += 1
            continue
        if area == "package" and ((va is None and _unlisted(a, vb))
                                  or (vb is None and _unlisted(b, va))):
            unlisted[area] += 1
            continue
        comp = kb.component(*key)
        size = change_size(va, vb)
        changes.append(Change(area, key[1], (va, vb), size, comp.id, comp.cls,
                              counts.get(key) if counts else None,
                              area in a.generic or area in b.generic))
    order = {x: i for i, x in enumerate(areas)}
    changes.sort(key=lambda c: (order.get(c.area, 99), c.key))
    explanations = rules.explain(a, b, changes, kb)
    return PairDiff(a, b, changes, explanations, dict(identical), not_compared, dict(unlisted))


def compare_many(inputs: Sequence[FactSet], kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = ()) -> ManyDiff:
    """Compare three or more fact sets through the majority value of each fact.

    An input deviates in a fact when its value is not the most common one (absent counts as a
    value).  Each deviating input is compared with the majority by :func:`compare_pair`.
    """
    n = len(inputs)
    areas = areas_of(inputs)
    majority_areas = {x: "" for x in areas
                      if sum(1 for s in inputs if s.areas.get(x) == "") * 2 > n}
    not_compared = [(x, (f"{n - sum(1 for s in inputs if s.areas.get(x) == '')} of {n} inputs "
                     "lack it")) for x in areas if x not in majority_areas
                    and (not only or x in only)]
    facts: dict[tuple[str, str], Any] = {}
    counts: dict[tuple[str, str], int] = {}
    varying: list[tuple[str, str, Any, int, dict[str, Any]]] = []
    identical: Counter[str] = Counter()
    keys: set[tuple[str, str]] = set()
    for s in inputs:
        keys.update(s.facts)
    order = {x: i for i, x in enumerate(areas)}
    keep = _Filter(only, ignore).keep
    for key in sorted(keys, key=lambda k: (order.get(k[0], 99), k[1])):
        if key[0] not in majority_areas or not keep(key[0], key[1]):
            continue
        holders = [s for s in inputs if s.areas.get(key[0]) == ""]
        tally = Counter(s.facts.get(key) for s in holders)
        value, count = _most_common(tally)
        if value is not None:
            facts[key] = value
        counts[key] = count
        if count == len(holders):
            identical[key[0]] += 1
        else:
            odd = {s.label: s.facts.get(key) for s in holders if s.facts.get(key) != value}
            varying.append((key[0], key[1], value, count, odd))
    majority = FactSet(label="the majority", path="", kind="majority", facts=facts,
                       areas=majority_areas,
                       generic={a for s in inputs for a in s.generic})
    deviants = []
    for s in inputs:
        if any(s.label in odd for *_, odd in varying):
            deviants.append(compare_pair(majority, s, kb, only=only, ignore=ignore,
                                         counts=counts))
    return ManyDiff(list(inputs), majority, deviants, varying, dict(identical), not_compared)


def _most_common(tally: Counter[Any]) -> tuple[Any, int]:
    best = max(tally.values())
    tied = [v for v, c in tally.items() if c == best]
    # deterministic choice among ties: a present value before absence, then by text
    tied.sort(key=lambda v: (v is None, str(v)))
    return tied[0], best


def unique_labels(sets: Iterable[FactSet]) -> None:
    """Make labels unique in place: a repeated host name gets its file name appended."""
    sets = list(sets)
    seen = Counter(s.label for s in sets)
    for s in sets:
        if seen[s.label] > 1:
            s.label = s.path if s.path.endswith(s.label) else f"{s.label} ({s.path})"
