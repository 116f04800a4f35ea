"""``--group-by environment``: results clustered by environment fingerprint, each cluster
explained against the largest one as ``envlock diff`` explains a deviant node.

The fingerprint of a result (:func:`envlock.find.index.in_fingerprint`) is the hash of its
facts that diff's impact model ranks as able to change numbers.  Results of one fingerprint
form a cluster.  Each other cluster is compared with the largest by
:func:`envlock.diff.engine.compare_pair` — the comparison ``compare_many`` makes of each
deviant with the majority, with the largest cluster's size as the count behind each value —
over the fingerprint facts of one representative of each (the first by path: every member
holds the same fingerprint facts), so a cluster's differences and ranked explanations are
those the N-way diff gives its deviant nodes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envlock.find.entry import in_fingerprint
from envlock.find.index import Index
from envlock.find.values import decode
from envlock.find.values import encode

__all__ = ["Cluster", "group_by_environment", "factset_of"]


@dataclass
class Cluster:
    """Results of one environment fingerprint.

    :ivar fingerprint: the hash (20 hex digits); ``paths``/``labels``: its members (sorted by
        path); ``diff``: the :class:`~envlock.diff.engine.PairDiff` of the largest cluster
        against this one (``None`` for the largest itself).
    """

    fingerprint: str
    paths: list[str]
    labels: list[str]
    diff: Any = None
    explanations: tuple[Any, ...] = ()

    @property
    def size(self) -> int:
        """How many results the cluster holds."""
        return len(self.paths)


def factset_of(index: Index, file_id: int, row: dict[str, Any], *, only_fingerprint: bool) -> Any:
    """The :class:`~envlock.diff.facts.FactSet` of an indexed result, rebuilt from the index
    (with ``only_fingerprint``: its fingerprint facts alone)."""
    from envlock.diff.facts import FactSet

    facts: dict[tuple[str, str], Any] = {}
    for name, enc in index.facts_of(file_id):
        area, _, key = name.partition(":")
        if only_fingerprint and not in_fingerprint(area, key):
            continue
        facts[(area, key)] = decode(enc)
    areas = json.loads(row["areas"] or "{}")
    return FactSet(label=row["label"] or row["path"], path=row["path"], kind="manifest",
                   facts=facts, areas=areas, listing=row["listing"] or "complete")


def _holding(index: Index, scope: set[int], name: str, value: Any) -> int:
    """How many results of ``scope`` hold ``value`` for fact ``name`` (``None``: lack it)."""
    vals = index.values(name)
    if value is None:
        return len(scope) - len({f for f, _ in index.holders([v for v, _ in vals]) if f in scope})
    enc = encode(value)
    return sum(1 for f, _ in index.holders([v for v, e in vals if e == enc]) if f in scope)


def group_by_environment(index: Index, ids: Sequence[int]) -> list[Cluster]:
    """Cluster the results ``ids`` by fingerprint, largest first (ties: by first path), each
    other cluster with its differences from the largest (see the module docstring)."""
    from envlock.diff.engine import compare_pair
    from envlock.diff.impact import load_kb

    rows = index.files(ids)
    seen: dict[str, int] = {}
    for r in rows.values():
        seen[r["label"]] = seen.get(r["label"], 0) + 1
    for r in rows.values():  # a label many results share (one host) is no name: the path is
        if not r["label"] or seen[r["label"]] > 1:
            r["label"] = r["path"]
    by_fp: dict[str, list[int]] = {}
    for fid, r in sorted(rows.items(), key=lambda kv: kv[1]["path"]):
        by_fp.setdefault(r["fp"] or "", []).append(fid)
    ordered = sorted(by_fp.items(), key=lambda kv: (-len(kv[1]), rows[kv[1][0]]["path"]))
    clusters = [Cluster(fp, [rows[f]["path"] for f in members], [rows[f]["label"] for f in members])
                for fp, members in ordered]
    if len(clusters) < 2:
        return clusters
    kb = load_kb()
    big_id = ordered[0][1][0]
    big = factset_of(index, big_id, rows[big_id], only_fingerprint=True)
    big.label, big.kind = "the majority", "majority"  # as compare_many's reference
    scope = set(rows)
    counts: dict[tuple[str, str], int] = {}
    for cluster, (_, members) in zip(clusters[1:], ordered[1:], strict=True):
        rep = factset_of(index, members[0], rows[members[0]], only_fingerprint=True)
        if len(members) > 1:
            rep.label = f"{rep.label} and {len(members) - 1} more"
        first = compare_pair(big, rep, kb, counts={}, ignore=kb.noise)
        for c in first.changes:  # as compare_many counts: the results holding the largest's value
            key = (c.area, c.key)
            if key not in counts:
                counts[key] = _holding(index, scope, f"{c.area}:{c.key}", big.facts.get(key))
        pair = compare_pair(big, rep, kb, counts=counts, ignore=kb.noise)
        cluster.diff = pair
        cluster.explanations = pair.explanations
    return clusters
