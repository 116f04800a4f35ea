"""Output of ``envlock find``: text (a table of matches, clusters, advisories) and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from envlock.diff.factset import display

__all__ = ["matches_text", "matches_json", "clusters_text", "clusters_json", "advisories_text",
           "advisories_json", "skipped_lines"]


def _match_doc(m: Any) -> dict[str, Any]:
    return {"path": m.path, "kind": m.kind, "time": m.time, "host": m.host, "node": m.node,
            "facts": dict(m.facts)}


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return [fmt.format(*head).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def matches_text(answer: Any, *, limit: int | None = None) -> str:
    """``N of M results match 'query'`` and a table: path, time, host/node, matching facts."""
    n, total = answer.count, answer.searched
    what = f"match {answer.query!r}" if answer.query else "indexed"
    lines = [f"{n} of {total} result{'s' if total != 1 else ''} {what}"]
    shown = answer.matches if limit is None else answer.matches[:limit]  # built for the limit
    if shown:
        rows = [[m.path, m.time or "-", m.node if m.node and m.node != m.host else (m.host or "-"),
                 "; ".join(f"{k} = {v}" for k, v in m.facts) or "-"] for m in shown]
        lines += _table(rows, ["PATH", "TIME", "HOST/NODE", "MATCHED"])
    if limit is not None and n > limit:
        lines.append(f"… {n - limit} more (--limit 0 shows all, --format json lists all)")
    return "\n".join(lines) + "\n"


def matches_json(answer: Any) -> str:
    """The answer as JSON: query, searched, matches (path, kind, time, host, node, facts),
    skipped (path, error)."""
    doc = {"query": answer.query, "searched": answer.searched, "count": answer.count,
           "matches": [_match_doc(m) for m in answer.matches],
           "skipped": [{"path": p, "error": e} for p, e in answer.errors]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _changes(cluster: Any) -> list[dict[str, Any]]:
    if cluster.diff is None:
        return []
    return [{"fact": f"{c.area}:{c.key}", "largest": display(c.values[0]), "this": display(c.values[1]),
             "class": c.cls} for c in cluster.diff.changes]


def clusters_text(clusters: Sequence[Any], *, members: int = 5) -> str:
    """One block per cluster: size, members, and (but for the largest) how it differs."""
    total = sum(c.size for c in clusters)
    lines = [f"{len(clusters)} environment{'s' if len(clusters) != 1 else ''} among {total} results"]
    for i, c in enumerate(clusters):
        names = [lab or p for lab, p in zip(c.labels, c.paths, strict=True)]
        who = ", ".join(names[:members]) + (f", … {len(names) - members} more" if len(names) > members else "")
        tag = " (largest)" if i == 0 else ""
        lines.append(f"environment {i + 1}{tag}: {c.size} result{'s' if c.size != 1 else ''} "
                     f"[{c.fingerprint[:12]}]: {who}")
        if i == 0:
            continue
        for e in c.explanations:
            lines.append(f"  {e.title}")
        if not c.explanations:
            for ch in _changes(c):
                lines.append(f"  {ch['fact']}: {ch['this']} (largest: {ch['largest']})")
    return "\n".join(lines) + "\n"


def clusters_json(clusters: Sequence[Any]) -> str:
    """The clusters as JSON: fingerprint, size, members, labels, differences, explanations."""
    doc = [{"fingerprint": c.fingerprint, "size": c.size, "members": c.paths, "labels": c.labels,
            "largest": i == 0, "differences": _changes(c),
            "explanations": [e.title for e in c.explanations]} for i, c in enumerate(clusters)]
    return json.dumps({"clusters": doc}, indent=2, ensure_ascii=False) + "\n"


def advisories_text(results: Sequence[tuple[Any, Any]], *, limit: int = 10) -> str:
    """Per advisory: title, source, query, and the affected results."""
    lines: list[str] = []
    for adv, answer in results:
        n = len(answer.matches)
        lines.append(f"{adv.id}: {n} affected result{'s' if n != 1 else ''} — {adv.title}")
        lines.append(f"  source: {adv.source}")
        lines.append(f"  query: {adv.query}")
        for m in answer.matches[:limit]:
            lines.append(f"  {m.path}" + (f" ({m.node or m.host})" if m.node or m.host else ""))
        if n > limit:
            lines.append(f"  … {n - limit} more (--format json lists all)")
    return "\n".join(lines) + "\n"


def advisories_json(results: Sequence[tuple[Any, Any]]) -> str:
    """The advisories as JSON: id, title, summary, source, query, matches."""
    doc = [{"id": a.id, "title": a.title, "summary": a.summary, "source": a.source, "also": list(a.also),
            "query": a.query, "matches": [_match_doc(m) for m in ans.matches]} for a, ans in results]
    return json.dumps({"advisories": doc}, indent=2, ensure_ascii=False) + "\n"


def skipped_lines(errors: Sequence[tuple[str, str]]) -> list[str]:
    """One line per file that could not be read: ``envlock find: skipped PATH: why``."""
    return [f"envlock find: skipped {p}: {e}" for p, e in errors]
