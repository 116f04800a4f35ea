"""Compare three or more fact sets through the majority value of each fact.

:class:`ManyTally` takes the inputs one at a time and interns their facts per area, so that a
fleet of nodes costs memory in proportion to its distinct facts; :func:`compare_many` builds
the majority value of each fact and compares each deviating input with it
(:func:`envlock.diff.pairwise.compare_pair`), so that 32 nodes give "node17 has driver 535
while 31 nodes have 550" rather than 496 pairs.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from envlock.diff.results import Explanation
from envlock.diff.facts import FactSet, Lib, Pkg, areas_of, same
from envlock.diff.impact import KB
from envlock.diff.pairwise import PairDiff, _Filter, compare_pair

__all__ = ["ManyDiff", "Varying", "compare_many", "ManyTally", "InputFacts", "unique_labels"]


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


@dataclass(frozen=True)
class ManyDiff:
    """Result of comparing three or more inputs through their majority."""

    inputs: tuple[FactSet, ...]
    majority: FactSet
    deviants: tuple[PairDiff, ...]
    varying: tuple[Varying, ...]
    identical: dict[str, int]
    not_compared: tuple[tuple[str, str], ...]
    context: tuple[str, ...] = ()
    #: explanations of the facts without a majority value (every input holds another torch,
    #: 2/2/1 of five): no input is the odd one, but the fact may be the cause; ranked.
    spread: tuple[Explanation, ...] = ()

    @property
    def differ(self) -> bool:
        """Whether any input deviates from the majority."""
        return bool(self.varying)


class InputFacts(Mapping[tuple[str, str], Any]):
    """The facts of one input of a many-input diff, kept as one dict per area.

    Inputs whose facts of an area are the same share that area's dict (see
    :class:`ManyTally`), so a fleet of nodes costs memory in proportion to its distinct
    facts, not its node count.  Read-only: a mapping ``(area, key) → value`` like
    :attr:`FactSet.facts`.
    """

    __slots__ = ("_by_area",)

    def __init__(self, by_area: Mapping[str, Mapping[tuple[str, str], Any]]) -> None:
        self._by_area = by_area

    def __getitem__(self, key: tuple[str, str]) -> Any:
        return self._by_area[key[0]][key]

    def get(self, key: tuple[str, str], default: Any = None) -> Any:  # type: ignore[override]
        d = self._by_area.get(key[0])
        return default if d is None else d.get(key, default)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or not key:
            return False
        d = self._by_area.get(key[0])
        return d is not None and key in d

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for d in self._by_area.values():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._by_area.values())

    def in_area(self, area: str) -> Mapping[tuple[str, str], Any]:
        """The facts of ``area`` only (empty when the input has none)."""
        return self._by_area.get(area, _EMPTY)


_EMPTY: Mapping[tuple[str, str], Any] = MappingProxyType({})


def _frozen(facts: dict[tuple[str, str], Any]) -> Any:
    """A hashable key for the facts of one area, or ``None`` when a value is unhashable."""
    key = tuple(facts.items())
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _bucket(v: Any) -> Any:
    """Values that :func:`same` may call equal share a bucket: a package by its version, a
    library by where it is found, any other value by itself; ``None``: a value that may
    equal values of any bucket (a spec's constraint, an unhashable value)."""
    if isinstance(v, Pkg):
        return None if v.constraint is not None else ("pkg", v.version)
    if isinstance(v, Lib):
        return ("lib", v.where)
    try:
        hash(v)
    except TypeError:
        return None
    return ("value", v)


def _group_values(held: list[tuple[Any, array[int]]]) -> dict[Any, list[array[int]]]:
    """Group one fact's values as :func:`compare_many` compares them: each value joins the
    first group (in order of appearance) whose value is :func:`same`, else starts one;
    absent (``None``) is a value of its own.  Candidates are looked up by :func:`_bucket`,
    so a fact with a distinct value on each of 4,096 nodes costs 4,096 look-ups, not
    4,096² comparisons."""
    groups: dict[Any, list[array[int]]] = {}
    order: dict[Any, int] = {}
    buckets: dict[Any, list[Any]] = {}
    wild: list[Any] = []
    for v, h in held:
        match = v
        if v is not None:
            b = _bucket(v)
            cands = list(groups) if b is None else buckets.get(b, []) + wild
            if b is not None and wild:
                cands.sort(key=order.__getitem__)
            match = next((x for x in cands if x is not None and same(x, v)), v)
        if match not in groups:
            order[match] = len(order)
            groups[match] = []
            if match is not None:
                b = _bucket(match)
                (wild if b is None else buckets.setdefault(b, [])).append(match)
        groups[match].append(h)
    return groups


class ManyTally:
    """Inputs of a many-input diff, added one at a time (:meth:`add`); :meth:`result` compares
    them through their majority.

    Each input is split by area and the facts of an area are interned: a fleet of 4,096
    nodes whose packages are the same keeps one dict of packages, and for it the list of
    the inputs that hold it.  What is kept per input is its label, path, kind, which
    interned dict it holds in each area, and how its areas were recorded — so memory grows
    with the distinct facts, and by a few machine words per input.
    """

    def __init__(self) -> None:
        self.inputs: list[FactSet] = []
        self._ids: dict[str, dict[Any, int]] = {}
        self._groups: dict[str, list[dict[tuple[str, str], Any]]] = {}
        self._holders: dict[str, list[array[int]]] = {}
        self._shared: dict[Any, Any] = {}
        self._parts: dict[int, tuple[Any, list[tuple[str, int]]]] = {}

    def _intern(self, value: Any) -> Any:
        return self._shared.setdefault(value, value)

    def add(self, fs: FactSet, parts: tuple[Sequence[Mapping[tuple[str, str], Any]],
                                            Mapping[tuple[str, str], Any]] | None = None) -> None:
        """Add one input (its facts are not kept as they are: see the class docstring).

        :param parts: ``(shared, rest)``, ``fs.facts`` split: dicts each holding whole areas
            and shared (the same object) by every input with those facts, each split and
            interned once (:class:`envlock.diff.fleet.FleetReader`'s units), and the rest,
            interned input by input.
        """
        i = len(self.inputs)
        placed: list[tuple[str, int]] = []
        if parts is None:
            placed = self._place(fs.facts)
        else:
            shared, rest = parts
            for part in shared:
                hit = self._parts.get(id(part))
                if hit is None or hit[0] is not part:
                    hit = self._parts[id(part)] = (part, self._place(part))
                placed.extend(hit[1])
            placed.extend(self._place(rest))
        have = {area for area, _ in placed}
        for area, why in fs.areas.items():
            if why == "" and area not in have:
                placed.extend(self._place({}, area))
        by_area: dict[str, dict[tuple[str, str], Any]] = {}
        for area, gid in placed:
            if fs.areas.get(area) == "":
                self._holders[area][gid].append(i)
            by_area[area] = self._groups[area][gid]
        areas = self._intern(tuple(fs.areas.items()))
        shared_areas = self._shared.setdefault(("areas", areas), dict(areas))
        generic = self._shared.setdefault(("generic", frozenset(fs.generic)), set(fs.generic))
        light = FactSet(label=fs.label, path=fs.path, kind=fs.kind,
                        facts=InputFacts(self._intern_areas(by_area)),  # type: ignore[arg-type]
                        areas=shared_areas, listing=fs.listing, generic=generic,
                        notes=fs.notes)
        self.inputs.append(light)

    def _place(self, facts: Mapping[tuple[str, str], Any], empty: str | None = None
               ) -> list[tuple[str, int]]:
        """Intern ``facts`` area by area: ``[(area, id of its interned dict)]`` (``empty``:
        the one area of an input that records it without facts)."""
        split: dict[str, dict[tuple[str, str], Any]] = {} if empty is None else {empty: {}}
        for k, v in facts.items():
            d = split.get(k[0])
            if d is None:
                d = split[k[0]] = {}
            d[k] = v
        out = []
        for area, sub in split.items():
            ids = self._ids.setdefault(area, {})
            groups = self._groups.setdefault(area, [])
            holders = self._holders.setdefault(area, [])
            key = _frozen(sub)
            gid = ids.get(key) if key is not None else None
            if gid is None:
                gid = len(groups)
                groups.append(sub)
                holders.append(array("I"))
                if key is not None:
                    ids[key] = gid
            out.append((area, gid))
        return out

    def _intern_areas(self, by_area: dict[str, dict[tuple[str, str], Any]]) -> Any:
        key = ("by-area", tuple((a, id(d)) for a, d in by_area.items()))
        return self._shared.setdefault(key, by_area)

    def result(self, kb: KB, *, only: Sequence[str] = (), ignore: Sequence[str] = ()
               ) -> ManyDiff:
        """Compare the inputs added so far through the majority value of each fact (the rules
        of :func:`compare_many`)."""
        from envlock.diff import rules

        inputs = self.inputs
        n = len(inputs)
        labels = [s.label for s in inputs]
        areas = areas_of(inputs)
        recorded = {x: sum(len(h) for h in self._holders.get(x, ())) for x in areas}
        majority_areas = {x: "" for x in areas if recorded[x] * 2 > n}
        not_compared = [(x, f"{n - recorded[x]} of {n} inputs lack it") for x in areas
                        if x not in majority_areas and (not only or x in only)]
        facts: dict[tuple[str, str], Any] = {}
        counts: dict[tuple[str, str], int] = {}
        varying: list[Varying] = []
        identical: Counter[str] = Counter()
        no_majority: set[tuple[str, str]] = set()
        keep = _Filter(only, ignore).keep
        order = {x: i for i, x in enumerate(areas)}
        keys: list[tuple[str, str]] = []
        for area in majority_areas:
            seen: dict[tuple[str, str], None] = {}
            for g in self._groups.get(area, ()):
                seen.update(dict.fromkeys(g))
            keys.extend(seen)
        keys.sort(key=lambda k: (order.get(k[0], 99), k[1]))
        for key in keys:
            if not keep(key[0], key[1]):
                continue
            area = key[0]
            # the inputs holding the area, one entry per interned dict, in input order of
            # the first input holding it (ties among values then fall as input by input)
            held = [(h[0], g, h) for g, h in zip(self._groups[area], self._holders[area],
                                                  strict=True) if h]
            held.sort(key=lambda t: t[0])
            total = sum(len(h) for _, _, h in held)
            groups = _group_values([(g.get(key), h) for _, g, h in held])
            if len(groups) == 1:
                value = next(iter(groups))
                identical[area] += 1
                if value is not None:
                    facts[key] = value
                counts[key] = total
                continue
            sized = [(v, sum(len(h) for h in hs), hs) for v, hs in groups.items()]
            # most common first; ties in the order of the inputs (stable sort)
            sized.sort(key=lambda t: -t[1])

            def who(hs: list[array[int]]) -> tuple[str, ...]:
                idx = hs[0] if len(hs) == 1 else sorted(i for h in hs for i in h)
                return tuple(labels[i] for i in idx)

            values = tuple((v, c, who(hs)) for v, c, hs in sized)
            value, count = sized[0][0], sized[0][1]
            if count * 2 > total:
                if value is not None:
                    facts[key] = value
                counts[key] = count
                odd = {lab: v for v, _, ls in values[1:] for lab in ls}
                varying.append(Varying(area, key[1], value, count, odd, values, True))
            else:
                no_majority.add(key)
                odd = {lab: v for v, _, ls in values for lab in ls}
                varying.append(Varying(area, key[1], None, count, odd, values, False))
        majority = FactSet(label="the majority", path="", kind="majority", facts=facts,
                           areas=majority_areas,
                           generic={a for s in inputs for a in s.generic})
        deviants = []
        skip = frozenset(no_majority)
        odd_ones = {lab for v in varying if v.has_majority for lab in v.deviants}
        for s in inputs:
            if s.label in odd_ones:
                deviants.append(compare_pair(majority, s, kb, only=only, ignore=ignore,
                                             counts=counts, skip=skip))
        spread = rules.explain_spread(inputs, [v for v in varying if not v.has_majority], kb)
        return ManyDiff(tuple(inputs), majority, tuple(deviants), tuple(varying), dict(identical),
                        tuple(not_compared), tuple(rules.context(inputs)), tuple(spread))


def compare_many(inputs: Iterable[FactSet], kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = ()) -> ManyDiff:
    """Compare three or more fact sets through the majority value of each fact.

    A value is the majority of a fact when more than half of the inputs that record its area
    hold it (absent counts as a value); an input deviates when its value is not the majority.
    A fact without a majority (2/2/1 of five) is listed with its distinct values and who
    holds each, and is left out of the per-input comparisons: no input is "the odd one";
    it is explained on its own (:attr:`ManyDiff.spread`, :func:`spreadrules.explain_spread`).
    Each deviating input is compared with the majority by :func:`compare_pair`.

    ``inputs`` may be a generator: each input is taken in (:class:`ManyTally`) and need not
    stay in memory, so a fleet of node manifests is compared in memory bounded by its
    distinct facts.
    """
    tally = ManyTally()
    for s in inputs:
        tally.add(s)
    return tally.result(kb, only=only, ignore=ignore)


def unique_labels(sets: Iterable[FactSet]) -> None:
    """Make labels unique in place: a repeated host name gets its file name appended."""
    sets = list(sets)
    seen = Counter(s.label for s in sets)
    for s in sets:
        if seen[s.label] > 1:
            s.label = s.path if s.path.endswith(s.label) else f"{s.label} ({s.path})"
