"""Write a diff as JSON (schema 1) or markdown; :mod:`envlock.render.difftext` writes it as text.

Every format has the same sections in the same order: the code, the most likely
explanations (at most ten unless ``show_all``), the differences by area, what is identical
(counts) and what could not be compared.  Each is drawn from the JSON document
(:func:`to_json`), whose layout is documented in ``docs/diff.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envlock.diff.engine import Change, Explanation, InputFacts, ManyDiff, PairDiff
from envlock.diff.facts import display

__all__ = ["to_json", "render_json", "render_markdown", "JSON_SCHEMA", "varying_cells"]

#: version of the JSON output layout (``"schema"`` key).
JSON_SCHEMA = 1

#: explanations shown without ``--all``.
LIMIT = 10


def _v(value: Any) -> str | None:
    return None if value is None else display(value)


def _code_rows(result: PairDiff | ManyDiff) -> list[dict[str, Any]]:
    if any(area == "code" for area, _ in result.not_compared):
        return []
    facts: list[Mapping[tuple[str, str], Any]]
    if isinstance(result, PairDiff):
        facts = [result.a.facts, result.b.facts]
        labels = [result.a.label, result.b.label]
    else:  # an input of many holds its facts by area: read its code facts only
        facts = [s.facts.in_area("code") if isinstance(s.facts, InputFacts) else s.facts
                 for s in result.inputs]
        labels = [s.label for s in result.inputs]
    scopes = sorted({k.rsplit(".", 1)[0] for f in facts for (a, k) in f if a == "code"},
                    key=lambda s: (s != "repository", s))
    rows = []
    for scope in scopes:
        row: dict[str, Any] = {"scope": scope, "differs": False}
        parts = []
        for what in ("commit", "url", "uncommitted", "untracked", "branch"):
            vals = [f.get(("code", f"{scope}.{what}")) for f in facts]
            if what == "url" and all(v is None for v in vals):
                continue  # only a VCS requirement without a commit has a URL fact
            row[what] = [_v(v) for v in vals]
            distinct = list(dict.fromkeys(display(v) for v in vals))
            if len(distinct) == 1:
                if vals[0] is not None:
                    parts.append(_SAME[what].format(_short(distinct[0])))
                continue
            tracked_same = what == "untracked" and not row["differs"] and _clean_or_hashed(
                [f.get(("code", f"{scope}.uncommitted")) for f in facts])
            if what != "branch" and not tracked_same:
                row["differs"] = True
            if len(vals) == 2 and tracked_same:
                parts.append(f"untracked files {display(vals[0])} → {display(vals[1])} "
                             "(new manifests count too)")
            elif len(vals) == 2:
                parts.append(f"{_WHAT[what]} differ: {_short(display(vals[0]))} → "
                             f"{_short(display(vals[1]))}")
            else:
                parts.append(_many_code(what, labels, vals))
        row["text"] = "; ".join(parts)
        rows.append(row)
    return rows


#: what a code fact of many inputs is, in the "differ" sentence (N-way): the number of
#: untracked files is a count, so it is said as one.
_WHAT_MANY = {"untracked": "numbers of untracked files"}


def _many_code(what: str, labels: list[str], vals: list[Any]) -> str:
    """One code fact over three or more inputs, in plain words: ``commits differ: 1a2b3c4d5e6f
    on 31 of 32 inputs; 9f8e7d6c5b4a on node17`` (a value held by more than half first, then
    the others), or, when no value is held by more than half, each value with its inputs
    (``numbers of untracked files differ: 2 on n1; 5 on n2; 3 on n3``)."""
    tally: dict[str, list[str]] = {}
    for label, v in zip(labels, vals, strict=True):
        tally.setdefault("not recorded" if v is None else display(v), []).append(label)
    ranked = sorted(tally.items(), key=lambda kv: -len(kv[1]))
    noun = _WHAT_MANY.get(what, _WHAT[what])
    common, held = ranked[0]
    if len(held) * 2 > len(labels):
        rest = [f"{_short(k)} on {', '.join(ls)}" for k, ls in ranked[1:]]
        return (f"{noun} differ: {_short(common)} on {len(held)} of {len(labels)} inputs; "
                + "; ".join(rest))
    return f"{noun} differ: " + "; ".join(f"{_short(k)} on {', '.join(ls)}" for k, ls in ranked)


def _clean_or_hashed(values: list[Any]) -> bool:
    """Whether every input has the same known uncommitted state (clean, or one diff hash)."""
    first = values[0]
    return isinstance(first, str) and all(v == first for v in values) and (
        first == "none" or first.startswith("sha256:"))


_SAME = {"commit": "same commit {}", "url": "same source {}", "uncommitted": "same uncommitted changes ({})",
         "untracked": "same number of untracked files ({})", "branch": "branch {}"}
_WHAT = {"commit": "commits", "url": "sources (VCS URL and ref)", "uncommitted": "uncommitted changes",
         "untracked": "untracked files", "branch": "branches"}


def _short(text: str) -> str:
    if len(text) == 40 and all(c in "0123456789abcdef" for c in text):
        return text[:12]
    return text[:19] + "…" if text.startswith("sha256:") and len(text) > 19 else text


def _change(c: Change) -> dict[str, Any]:
    out: dict[str, Any] = {"area": c.area, "key": c.key, "values": [_v(x) for x in c.values],
                           "change": c.size, "component": c.component, "class": c.cls}
    if c.majority_count is not None:
        out["majority_count"] = c.majority_count
    return out


def _explanation(rank: int, e: Explanation) -> dict[str, Any]:
    roots = {id(c) for c in e.causes}
    facts = []
    for c in e.changes:
        fact = _change(c)
        fact["role"] = "cause" if id(c) in roots else "consequence"
        facts.append(fact)
    return {"rank": rank, "id": e.id, "title": e.title, "class": e.cls, "score": e.score,
            "why": e.why, "do": e.do, "facts": facts}


def _pair(p: PairDiff, show_all: bool) -> dict[str, Any]:
    shown = p.explanations if show_all else p.explanations[:LIMIT]
    return {
        "context": list(p.context),
        "explanations": [_explanation(i + 1, e) for i, e in enumerate(shown)],
        "more_explanations": len(p.explanations) - len(shown),
        "differences": [_change(c) for c in p.changes],
        "identical": {"total": sum(p.identical.values()),
                      "areas": dict(sorted(p.identical.items()))},
        "satisfied": {"total": sum(p.satisfied.values()),
                      "areas": dict(sorted(p.satisfied.items()))},
        "unknown": list(p.unknown),
        "not_compared": [{"area": a, "reason": r} for a, r in p.not_compared],
        "unlisted": p.unlisted,
    }


def to_json(result: PairDiff | ManyDiff, *, show_all: bool = False) -> dict[str, Any]:
    """Return the JSON document (a dict) for ``result``; see ``docs/diff.md`` for the layout."""
    if isinstance(result, PairDiff):
        inputs = [result.a, result.b]
        doc: dict[str, Any] = {"schema": JSON_SCHEMA, "mode": "pair", "differ": result.differ}
        doc["inputs"] = [{"label": s.label, "path": s.path, "kind": s.kind} for s in inputs]
        doc["code"] = _code_rows(result)
        doc.update(_pair(result, show_all))
        return doc
    doc = {"schema": JSON_SCHEMA, "mode": "majority", "differ": result.differ,
           "inputs": [{"label": s.label, "path": s.path, "kind": s.kind} for s in result.inputs],
           "code": _code_rows(result), "context": list(result.context)}
    doc["deviants"] = []
    # the deviant whose likeliest explanation ranks highest first (ties: input order)
    for d in sorted(result.deviants, key=lambda d: -_top(d.explanations)):
        entry = {"label": d.b.label, "path": d.b.path}
        entry.update(_pair(d, show_all))
        entry.pop("identical")
        entry.pop("satisfied")
        entry.pop("unknown")
        entry.pop("context")
        doc["deviants"].append(entry)
    spread = result.spread if show_all else result.spread[:LIMIT]
    doc["no_majority"] = {
        "explanations": [_explanation(i + 1, e) for i, e in enumerate(spread)],
        "more_explanations": len(result.spread) - len(spread)}
    doc["varying"] = [{"area": v.area, "key": v.key,
                       "majority": _v(v.majority) if v.has_majority else None,
                       "majority_count": v.count if v.has_majority else None,
                       "has_majority": v.has_majority,
                       "values": [{"value": _v(x), "count": n, "inputs": list(labels)}
                                  for x, n, labels in v.values],
                       "deviants": {lab: _v(x) for lab, x in v.deviants.items()}}
                      for v in result.varying]
    doc["identical"] = {"total": sum(result.identical.values()),
                        "areas": dict(sorted(result.identical.items()))}
    doc["not_compared"] = [{"area": a, "reason": r} for a, r in result.not_compared]
    return doc


def _top(exps: Sequence[Explanation]) -> int:
    return exps[0].score if exps else 0


def _spread_first(doc: dict[str, Any]) -> bool:
    """Whether the facts without a majority hold the likeliest explanation of a many-input
    diff (then their section comes before the deviants')."""
    spread = doc["no_majority"]["explanations"]
    best = max((d["explanations"][0]["score"] for d in doc["deviants"] if d["explanations"]),
               default=-1)
    return bool(spread) and spread[0]["score"] >= best


#: the section of a many-input diff for facts without a majority value.
NO_MAJORITY = "Facts with no majority value"


def render_json(result: PairDiff | ManyDiff, *, show_all: bool = False) -> str:
    """The JSON document as text (two-space indent, keys in a fixed order)."""
    import json  # the text output never needs it

    return json.dumps(to_json(result, show_all=show_all), indent=2, ensure_ascii=False) + "\n"


# -- markdown ---------------------------------------------------------------------------------
def _no_code(doc: dict[str, Any]) -> str:
    why = next((x["reason"] for x in doc["not_compared"] if x["area"] == "code"), None)
    return f"not compared ({why})" if why else "not recorded (no git checkout in the inputs)"


def _cell(value: str | None) -> str | None:
    """A table cell: commit ids and diff hashes shortened (JSON keeps them whole)."""
    return None if value is None else _short(value)


def _md_cell(text: Any) -> str:
    return str(text if text is not None else "(absent)").replace("|", "\\|")


def _md_summary(doc: dict[str, Any]) -> list[str]:
    out = []
    ident = doc["identical"]
    areas = ", ".join(f"{a} {n}" for a, n in ident["areas"].items())
    noun = "fact" if ident["total"] == 1 else "facts"
    out.append(f"**Identical:** {ident['total']} {noun}" + (f" ({areas})" if areas else ""))
    sat = doc.get("satisfied") or {"total": 0, "areas": {}}
    if sat["total"]:
        areas = ", ".join(f"{a} {n}" for a, n in sat["areas"].items())
        noun = "constraint" if sat["total"] == 1 else "constraints"
        out.append(f"**Satisfied:** {sat['total']} {noun} of a spec input ({areas})")
    unknown = doc.get("unknown") or []
    if unknown:
        shown = ", ".join(unknown[:8]) + (f", … {len(unknown) - 8} more" if len(unknown) > 8 else "")
        out.append(f"**Version unknown:** {len(unknown)} package entries an input records "
                   f"without a version (`name @ file:///…/work`), not compared: {shown}")
    for a, n in doc.get("unlisted", {}).items():
        out.append(f"**Not listed in one input** (a spec, or a listing of one manager only): "
                   f"{n} {a} entries (not compared)")
    if doc["not_compared"]:
        out.append("**Not compared:** " + "; ".join(
            f"{x['area']} ({x['reason']})" for x in doc["not_compared"]))
    return out


def _md_explanations(exps: list[dict[str, Any]], more: int) -> list[str]:
    out = []
    for e in exps:
        out += [f"{e['rank']}. **{e['title']}**", f"   - why: {e['why']}", f"   - do: {e['do']}"]
    if more:
        out.append(f"\n({more} more; use --all)")
    return out or ["(none)"]


def _md_table(rows: list[list[Any]], head: list[str]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def render_markdown(result: PairDiff | ManyDiff, *, show_all: bool = False) -> str:
    """The diff as GitHub-flavoured markdown."""
    doc = to_json(result, show_all=show_all)
    names = [i["label"] for i in doc["inputs"]]
    out = [f"# envlock diff: {' → '.join(names) if len(names) == 2 else f'{len(names)} inputs'}",
           "", "## The code", ""]
    out += [f"- **{r['scope']}**: {r['text'] or 'not recorded'}" for r in doc["code"]] or [
        f"- {_no_code(doc)}"]
    if doc["context"]:
        out += ["", "## Context", ""] + [f"- {c}" for c in doc["context"]]
    if doc["mode"] == "pair":
        out += ["", "## Most likely explanations", ""]
        out += _md_explanations(doc["explanations"], doc["more_explanations"])
        out += ["", "## Differences", ""]
        rows = [[d["area"], d["key"], _cell(d["values"][0]), _cell(d["values"][1]), d["change"],
                 d["class"]] for d in doc["differences"]]
        out += _md_table(rows, ["area", "key", names[0], names[1], "change", "class"]) if rows \
            else ["(none)"]
    else:
        nm = doc["no_majority"]
        spread = ["", f"## {NO_MAJORITY}", ""] + _md_explanations(
            nm["explanations"], nm["more_explanations"]) if nm["explanations"] else []
        first = _spread_first(doc)
        if first:
            out += spread
        out += ["", "## Inputs that deviate from the majority", ""]
        for d in doc["deviants"]:
            out += [f"### {_named(d)}", ""]
            out += _md_explanations(d["explanations"], d["more_explanations"])
            out.append("")
        if not doc["deviants"]:
            out.append("(none)")
        if spread and not first:
            out += spread[1:] + [""]
        out += ["## Facts that vary", ""]
        rows = [varying_cells(v) for v in doc["varying"]]
        out += _md_table(rows, ["area", "key", "majority (count)", "deviants"]) if rows \
            else ["(none)"]
    out += [""] + _md_summary(doc)
    return "\n".join(out) + "\n"


def _named(d: dict[str, Any]) -> str:
    """A deviant input by its label and, where that is a host name, its file."""
    name = d["path"].rsplit("/", 1)[-1]
    # a label made unique with its path ("vm (runs/n2.toml)") already names the file
    return d["label"] if not name or name in d["label"] else f"{d['label']} ({name})"


def varying_cells(v: dict[str, Any]) -> list[str]:
    """The cells of one "facts that vary" row: area, key, the majority (or "N distinct
    values: x (3), y (1), z (1)" when no value has more than half) and who holds what, by
    input; each value stays next to its own inputs."""
    def val(x: str | None) -> str:
        return "(absent)" if x is None else x

    if v["has_majority"]:
        head = f"{val(v['majority'])} ({v['majority_count']})"
        rest = [x for x in v["values"][1:]]
    else:
        head = f"{len(v['values'])} distinct values: " + ", ".join(
            f"{val(x['value'])} ({x['count']})" for x in v["values"])
        rest = v["values"]
    who = "; ".join(f"{', '.join(x['inputs'])}: {val(x['value'])}" for x in rest)
    return [v["area"], v["key"], head, who]
