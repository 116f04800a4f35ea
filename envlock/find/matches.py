"""Answer a query over the index: which results match, with the facts that matched.

A condition is evaluated on the *distinct values* of each fact it reads (a few per fact, even
over 100,000 results): each value is compared once in its own order
(:func:`envlock.find.values.compare`), then the results holding a matching value are looked
up.  A fact other than a result's own (``result:*``: host, time, …) is held by fact sets, so a
condition on such facts is decided once per set, and ``and``/``or``/``not`` of them stay on
sets; results are looked up where a condition on their own facts meets them, or at the end
(:class:`_Eval`).  A short name that reads several facts (``torch.tf32.matmul``: the ``[process]`` table of
``envlock.record()``, else the ``--import`` runtime facts of a snapshot) is decided for each
result by the first of them the result records.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from envlock.find.index import Index
from envlock.find.operands import check_static, check_values
from envlock.find.query import And, Cond, Node, Not, Or, Target, parse, resolve
from envlock.find.values import compare, decode
from envlock.find.query import QueryError
from envlock.find.values import encode
from envlock.diff.factset import display

__all__ = ["Match", "Answer", "evaluate", "search"]


class Match(NamedTuple):
    """One matching result.

    :ivar path: the file; ``kind``: ``manifest``, ``run`` or ``record``; ``time``: when it was
        recorded (UTC ISO-8601); ``host``/``node``: where.
    :ivar facts: ``(area:key, value as shown)`` of the facts the query read, for this result.
    """

    path: str
    kind: str
    time: str
    host: str
    node: str
    facts: tuple[tuple[str, str], ...]


@dataclass
class Answer:
    """The answer of one query: the matches (sorted by time, then path; the first ``limit``
    when one was asked for), ``count`` (how many matched), how many results were searched, the
    files that could not be read (path, one line each) and the matching file ids."""

    query: str
    matches: list[Match]
    searched: int
    errors: list[tuple[str, str]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    count: int = 0


#: an evaluated node: whether ``ids`` are fact sets (``True``: the results holding one of those
#: sets) or results, and the ids
_Sel = tuple[bool, set[int]]


class _Eval:
    """The evaluation of one query.  A condition that reads only facts of the shared sets (every
    fact but a result's own ``result:*``) is decided once per fact set — a few hundred sets for
    100,000 results — and ``and``/``or``/``not`` of such conditions stay on sets; results are
    looked up (in SQLite) only where a condition on their own facts meets them, or at the end."""

    def __init__(self, index: Index, roots: Sequence[str]) -> None:
        self.index = index
        self.roots = roots
        self.names = index.names()
        #: per fact a condition read: (on sets?, fact, value id → the ids that hold it, values)
        self.hits: list[tuple[bool, str, dict[int, set[int]], dict[int, Any]]] = []
        self.unset: list[tuple[bool, str, set[int]]] = []
        self._values: dict[str, list[tuple[int, Any]]] = {}
        self._universe: dict[bool, set[int]] = {}
        self._covers: bool | None = None

    def universe(self, on_sets: bool) -> set[int]:
        """Every fact set (``on_sets``), or every readable result under the roots."""
        got = self._universe.get(on_sets)
        if got is None:
            got = self._universe[on_sets] = (self.index.all_sets() if on_sets
                                             else self.index.scope_ids(self.roots))
        return got

    def facts(self, t: Target) -> list[str]:
        if "*" in t.fact or "?" in t.fact:
            area = t.fact.split(":", 1)[0]
            return [n for n in self.names if fnmatch.fnmatchcase(n, t.fact)
                    and not any(fnmatch.fnmatchcase(n.split(":", 1)[1], x) for x in t.exclude)
                    and n.startswith(area + ":")]
        return [t.fact]

    def values(self, name: str) -> list[tuple[int, Any]]:
        got = self._values.get(name)
        if got is None:
            got = [(vid, decode(enc)) for vid, enc in self.index.values(name)]
            self._values[name] = got
        return got

    def _good(self, c: Cond, t: Target, name: str) -> tuple[list[int], list[int], dict[int, Any]]:
        """(value ids that match, value ids that do not, value id → value) of one fact."""
        if name.startswith("result:") and c.op == "==" and t.kind != "time" and not any(
                ch in c.value for ch in "*?["):
            # a result's own text fact (host, node, …): one look-up, not every value

            vid = self.index.lookup(name, encode(c.value))
            return ([vid] if vid is not None else []), [], {vid: c.value} if vid is not None else {}
        vals = dict(self.values(name))
        check_values(c, t, name, vals.values())
        if c.op in ("set", "unset"):
            good = [vid for vid, v in vals.items() if v != "unset"]
        else:
            good = [vid for vid, v in vals.items() if compare(v, c.op, c.value, part=t.part, kind=t.kind)]
        gs = set(good)
        return good, [vid for vid in vals if vid not in gs], vals

    def _held(self, val_ids: list[int], decided: set[int], on_sets: bool) -> dict[int, set[int]]:
        """``{value id: the ids in scope, not ``decided``, holding it}`` (values none of them
        hold left out).  Every set is in scope; so is every result that holds a fact when the
        roots hold the whole index (only a readable result has facts)."""
        out = {}
        held = self.index.sets_holding(val_ids) if on_sets else self.index.held_by(val_ids)
        whole = on_sets or self._whole()
        for vid, ids in held.items():
            if not whole:
                ids &= self.universe(False)
            ids -= decided
            if ids:
                out[vid] = ids
        return out

    def _whole(self) -> bool:
        if self._covers is None:
            self._covers = self.index.covers_all(self.roots)
        return self._covers

    def cond(self, c: Cond) -> _Sel:
        """What satisfies ``c``: for each target in turn, the ids that record one of its facts
        are decided by it (the first target a result records decides)."""
        names = [self.facts(t) for t in c.targets]
        on_sets = not any(n.startswith("result:") for ns in names for n in ns)
        decided: set[int] = set()
        hit: set[int] = set()
        for t, facts in zip(c.targets, names, strict=True):
            has: set[int] = set()
            for name in facts:
                good, bad, vals = self._good(c, t, name)
                matched = self._held(good, decided, on_sets)
                held = set().union(*matched.values())
                has |= held
                if c.op == "unset":  # a recorded value decides; the literal "unset" is unset
                    continue
                if len(c.targets) > 1:
                    has.update(*self._held(bad, decided, on_sets).values())
                hit |= held
                self.hits.append((on_sets, name, matched, vals))
            decided |= has
        if c.op == "unset":
            out = self.universe(on_sets) - decided
            self.unset.append((on_sets, c.targets[0].fact if len(c.targets) == 1 else c.name, out))
            return on_sets, out
        return on_sets, hit

    def results(self, sel: _Sel) -> set[int]:
        """The results (under the roots) of an evaluated node."""
        on_sets, ids = sel
        return self.index.files_in_sets(ids, self.roots) if on_sets else ids

    def node(self, n: Node) -> _Sel:
        if isinstance(n, Cond):
            return self.cond(n)
        if isinstance(n, Not):
            on_sets, ids = self.node(n.child)
            return on_sets, self.universe(on_sets) - ids
        assert isinstance(n, (And, Or))
        got: list[_Sel] = []
        for child in n.children:
            sel = self.node(child)
            if isinstance(n, And) and not sel[1]:
                return sel
            got.append(sel)
        if not all(on_sets for on_sets, _ in got):  # results meet: sets become their results
            got = [(False, self.results(sel)) for sel in got]
        first = got[0][1]
        ids = first.intersection(*(i for _, i in got[1:])) if isinstance(n, And) \
            else first.union(*(i for _, i in got[1:]))
        return got[0][0], ids

    def shown(self, sets: dict[int, int]) -> dict[int, tuple[tuple[str, str], ...]]:
        """The facts each result of ``sets`` (file id → its fact set) matched, sorted
        ``(area:key, value as shown)``: a result's own facts looked up for it, the shared ones
        once per fact set (and one tuple for the results of a set that match nothing of their own)."""
        own: dict[int, dict[str, str]] = {}
        by_set: dict[int, dict[str, str]] = {}
        ids = sets.keys()
        for on_sets, name, matched, vals in self.hits:
            for vid, held in matched.items():
                v = vals[vid]
                text = v if isinstance(v, str) and name.startswith("result:") else display(v)
                for f in held if on_sets else ids & held:
                    (by_set if on_sets else own).setdefault(f, {})[name] = text
        for on_sets, label, unset in self.unset:
            for f in unset if on_sets else ids & unset:
                (by_set if on_sets else own).setdefault(f, {}).setdefault(label, "(unset)")
        shared = {sid: tuple(sorted(facts.items())) for sid, facts in by_set.items()}
        out: dict[int, tuple[tuple[str, str], ...]] = {}
        for f, sid in sets.items():
            if f in own:
                out[f] = tuple(sorted({**by_set.get(sid, {}), **own[f]}.items()))
            elif sid in shared:
                out[f] = shared[sid]
        return out


def evaluate(index: Index, node: Node, roots: Sequence[str]) -> tuple[set[int], dict[int, dict[str, str]]]:
    """The results under ``roots`` (file ids) that satisfy the resolved query ``node``, and per
    result the facts (``area:key`` → value shown) its conditions matched."""
    ev = _Eval(index, roots)
    ids = ev.results(ev.node(node))
    sets = {r[0]: r[6] for r in index.brief(ids)}
    return ids, {f: dict(facts) for f, facts in ev.shown(sets).items()}


def search(index: Index, roots: Sequence[str], query: str | None, *,
           strict: bool = True, limit: int | None = None) -> Answer:
    """Run ``query`` over the indexed results under ``roots`` (the index is not updated here:
    see :meth:`Index.update`).

    :param query: the query text (docs/find.md); ``None`` or empty: every result.
    :param strict: a name no result records is an error (``False``: it matches nothing;
        advisories run so).
    :param limit: build only the first ``limit`` matches (``count`` and ``ids`` are all).
    :raises QueryError: a syntax error, or (``strict``) an unknown fact name, with the nearest.
    """
    ev: _Eval | None = None
    if query and query.strip():
        node = parse(query)
        check_static(node)
        try:
            node = resolve(node, index.names())
        except QueryError:
            if strict:
                raise
            return Answer(query, [], index.count_in(roots))  # count 0
        ev = _Eval(index, roots)
        ids = ev.results(ev.node(node))
    else:
        ids = index.scope_ids(roots)
    rows = index.brief(ids, limit)
    shown = ev.shown({r[0]: r[6] for r in rows}) if ev is not None else {}
    matches = [Match(path, kind or "", when or "", host or "", node or "", shown.get(fid, ()))
               for fid, path, kind, when, host, node, _ in rows]
    return Answer(query or "", matches, index.count_in(roots), ids=sorted(ids), count=len(ids))
