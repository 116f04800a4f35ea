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
from typing import Any

from envlock.find.index import Index
from envlock.find.query import And, Cond, Node, Not, Or, Target, parse, resolve
from envlock.find.values import compare, decode

__all__ = ["Match", "Answer", "evaluate", "search"]


@dataclass(frozen=True)
class Match:
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
    """The answer of one query: the matches (sorted by time, then path), how many results were
    searched, and the files that could not be read (path, one line each)."""

    query: str
    matches: list[Match]
    searched: int
    errors: list[tuple[str, str]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)


class _Eval:
    def __init__(self, index: Index, scope: set[int]) -> None:
        self.index = index
        self.scope = scope
        self.names = index.names()
        self.shown: dict[int, dict[str, str]] = {}
        self._holders: dict[str, list[tuple[int, int]]] = {}
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

    def holders(self, name: str) -> list[tuple[int, int]]:
        got = self._holders.get(name)
        if got is None:
            got = self.index.holders([vid for vid, _ in self.values(name)])
            self._holders[name] = got
        return got

    def cond(self, c: Cond) -> set[int]:
        from envlock.diff.factset import display  # noqa: PLC0415

        decided: set[int] = set()
        hit: set[int] = set()
        for t in c.targets:
            names = self.facts(t)
            has: set[int] = set()
            here: dict[int, list[tuple[str, str]]] = {}
            for name in names:
                if (name.startswith("result:") and c.op == "==" and t.kind != "time" and not any(ch in c.value for ch in "*?[")):
                    # a result's own text fact (host, time, …): one look-up, not every value
                    from envlock.find.values import encode  # noqa: PLC0415

                    vid = self.index.lookup(name, encode(c.value))
                    for fid, _ in self.index.holders([vid] if vid is not None else []):
                        if fid in self.scope and fid not in decided:
                            has.add(fid)
                            here.setdefault(fid, []).append((name, c.value))
                    continue
                vals = dict(self.values(name))
                if c.op in ("set", "unset"):
                    good = {vid for vid, v in vals.items() if not (c.op == "unset" and v == "unset")
                            and not (c.op == "set" and v == "unset")}
                else:
                    good = {vid for vid, v in vals.items() if compare(v, c.op, c.value, part=t.part,
                                                                      kind=t.kind)}
                for fid, vid in self.holders(name):
                    if fid not in self.scope or fid in decided:
                        continue
                    if c.op == "unset" and vid not in good:
                        here.setdefault(fid, []).append((name, display(vals[vid])))
                        continue
                    has.add(fid)
                    if vid in good:
                        here.setdefault(fid, []).append((name, display(vals[vid])))
            if c.op == "unset":
                decided |= has
                continue
            matched = {f for f in here if f in has}
            hit |= matched
            for fid in matched:
                for name, shown in here[fid]:
                    self.shown.setdefault(fid, {})[name] = shown
            decided |= has
        if c.op == "unset":
            out = self.scope - decided
            label = c.targets[0].fact if len(c.targets) == 1 else c.name
            for fid in out:
                self.shown.setdefault(fid, {}).setdefault(label, "(unset)")
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


def evaluate(index: Index, node: Node, scope: set[int]) -> tuple[set[int], dict[int, dict[str, str]]]:
    """The file ids of ``scope`` that satisfy the resolved query ``node``, and per file the
    facts (``area:key`` → value shown) its conditions matched."""
    ev = _Eval(index, scope)
    ids = ev.node(node)
    return ids, ev.shown


def search(index: Index, roots: Sequence[str], query: str | None, *,
           strict: bool = True) -> Answer:
    """Run ``query`` over the indexed results under ``roots`` (the index is not updated here:
    see :meth:`Index.update`).

    :param query: the query text (docs/find.md); ``None`` or empty: every result.
    :param strict: a name no result records is an error (``False``: it matches nothing;
        advisories run so).
    :raises QueryError: a syntax error, or (``strict``) an unknown fact name, with the nearest.
    """
    from envlock.find.query import QueryError  # noqa: PLC0415

    files = index.scope(roots)
    scope = set(files)
    if query and query.strip():
        node = parse(query)
        try:
            node = resolve(node, index.names())
        except QueryError:
            if strict:
                raise
            return Answer(query, [], len(scope))
        ids, shown = evaluate(index, node, scope)
    else:
        ids, shown = scope, {}
    rows = sorted(index.brief(ids, roots), key=lambda r: (r[3] or "", r[1]))
    empty: dict[str, str] = {}
    matches = [Match(path, kind or "", when or "", host or "", node or "",
                     tuple(sorted(shown.get(fid, empty).items())))
               for fid, path, kind, when, host, node in rows]
    return Answer(query or "", matches, len(scope), ids=[r[0] for r in rows])
