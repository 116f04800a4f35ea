"""Answer a query over the index: which results match, with the facts that matched.

A condition is evaluated on the *distinct values* of each fact it reads (a few per fact, even
over 100,000 results): each value is compared once in its own order
(:func:`envlock.find.values.compare`), then the results holding a matching value are looked
up.  A short name that reads several facts (``torch.tf32.matmul``: the ``[process]`` table of
``envlock.record()``, else the ``--import`` runtime facts of a snapshot) is decided for each
result by the first of them the result records.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from envlock.find.index import Index
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


class _Eval:
    def __init__(self, index: Index, scope: set[int]) -> None:
        self.index = index
        self.scope = scope
        self.names = index.names()
        #: per condition target, the (file → value id) of what matched, for showing
        self.hits: list[tuple[str, dict[int, int], dict[int, Any]]] = []
        self.unset: list[tuple[str, set[int]]] = []
        self._values: dict[str, list[tuple[int, Any]]] = {}

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
        if c.op in ("set", "unset"):
            good = [vid for vid, v in vals.items() if v != "unset"]
        else:
            good = [vid for vid, v in vals.items() if compare(v, c.op, c.value, part=t.part, kind=t.kind)]
        gs = set(good)
        return good, [vid for vid in vals if vid not in gs], vals

    def cond(self, c: Cond) -> set[int]:
        decided: set[int] = set()
        hit: set[int] = set()
        scope = self.scope
        for t in c.targets:
            has: set[int] = set()
            for name in self.facts(t):
                good, bad, vals = self._good(c, t, name)
                matched = {f: v for f, v in self.index.holders(good) if f in scope and f not in decided}
                others = {f for f, _ in self.index.holders(bad) if f in scope and f not in decided} \
                    if len(c.targets) > 1 or c.op == "unset" else set()
                has |= matched.keys() | others
                if c.op != "unset":
                    hit |= matched.keys()
                    self.hits.append((name, matched, vals))
                elif c.op == "unset":  # the literal "unset" counts as unset, not as recorded
                    has -= {f for f, v in self.index.holders(bad) if vals.get(v) == "unset"}
            decided |= has
        if c.op == "unset":
            out = scope - decided
            self.unset.append((c.targets[0].fact if len(c.targets) == 1 else c.name, out))
            return out
        return hit

    def node(self, n: Node) -> set[int]:
        if isinstance(n, Cond):
            return self.cond(n)
        if isinstance(n, Not):
            return self.scope - self.node(n.child)
        if isinstance(n, And):
            out: set[int] | None = None
            for child in n.children:
                got = self.node(child)
                out = got if out is None else out & got
                if not out:
                    return set()
            return out or set()
        assert isinstance(n, Or)
        acc: set[int] = set()
        for child in n.children:
            acc |= self.node(child)
        return acc

    def shown(self, ids: set[int]) -> dict[int, dict[str, str]]:
        """The facts each result of ``ids`` matched (area:key → value as shown)."""
        out: dict[int, dict[str, str]] = {}
        for name, matched, vals in self.hits:
            texts: dict[int, str] = {}
            for f in ids & matched.keys():
                vid = matched[f]
                text = texts.get(vid)
                if text is None:
                    text = texts[vid] = display(vals[vid]) if not isinstance(vals[vid], str) or \
                        not name.startswith("result:") else vals[vid]
                out.setdefault(f, {})[name] = text
        for label, unset in self.unset:
            for f in ids & unset:
                out.setdefault(f, {}).setdefault(label, "(unset)")
        return out


def evaluate(index: Index, node: Node, scope: set[int]) -> tuple[set[int], dict[int, dict[str, str]]]:
    """The file ids of ``scope`` that satisfy the resolved query ``node``, and per file the
    facts (``area:key`` → value shown) its conditions matched."""
    ev = _Eval(index, scope)
    ids = ev.node(node)
    return ids, ev.shown(ids)


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
    scope = index.scope_ids(roots)
    if query and query.strip():
        node = parse(query)
        try:
            node = resolve(node, index.names())
        except QueryError:
            if strict:
                raise
            return Answer(query, [], len(scope))  # count 0
        ids, shown = evaluate(index, node, scope)
    else:
        ids, shown = scope, {}
    rows = index.brief(ids, limit)
    matches = [Match(path, kind or "", when or "", host or "", node or "",
                     tuple(sorted(shown[fid].items())) if fid in shown else ())
               for fid, path, kind, when, host, node in rows]
    return Answer(query or "", matches, len(scope), ids=sorted(ids), count=len(ids))
