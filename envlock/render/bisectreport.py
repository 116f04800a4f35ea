"""``envlock bisect`` results as text, markdown or JSON (plain strings; the CLI prints them)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from envlock.reproduce.model import NEVER_TOGGLED
import shlex

if TYPE_CHECKING:
    from envlock.reproduce import BisectResult, Step

__all__ = ["render_text", "render_markdown", "render_json"]


def _value(v: float | None) -> str:
    return "" if v is None else f"{v:.17g}"


def _row(s: Step, metric: bool) -> list[str]:
    applied = ", ".join(s.applied) if s.applied else "(nothing: GOOD)"
    if s.phase == "BAD":
        applied = "(everything: BAD)"
    env = ("built" if s.built else "reused") if s.env else "-"
    result = (_value(s.value) if metric else
              ",".join("timeout" if c is None else str(c) for c in s.codes)) or "-"
    return [str(s.number), s.phase, applied, env, result, s.verdict, s.outcome, s.note]


_HEAD = ["#", "phase", "applied to GOOD", "env", "result", "verdict", "as", "note"]


def _summary(r: BisectResult) -> list[str]:
    lines = []
    metric = r.judge.metric is not None
    if metric:
        lines.append(f"GOOD's value {_value(r.good_value)}, BAD's {_value(r.bad_value)} "
                     f"(--metric {shlex.quote(r.judge.metric or '')}, rtol {r.judge.rtol:g}, "
                     f"atol {r.judge.atol:g})")
    if r.status == "found":
        lines.append(f"Culprit ({len(r.culprit)} of {len(r.groups)} group(s)): "
                     + "; ".join(g.label for g in r.culprit))
        if len(r.culprit) > 1:  # ddmin's answer is 1-minimal: without any one, GOOD's result
            both = "both" if len(r.culprit) == 2 else f"all {len(r.culprit)}"
            lines.append(f"  only together: GOOD with {both} gives BAD's result; without any one "
                         "of them it gives GOOD's")
        culprit_step = next((s for s in reversed(r.steps) if s.outcome == "fail"
                             and tuple(g.label for g in r.culprit) == s.applied), None)
        if culprit_step is not None and metric:
            lines.append(f"  GOOD + culprit gives {_value(culprit_step.value)}")
    elif r.status == "same":
        lines.append("GOOD and BAD give the same result: the cause is not in the packages or "
                     "variables bisect can toggle.")
        lines.append("What bisect cannot toggle:" + ("" if r.not_toggled else
                                                    f" {', '.join(NEVER_TOGGLED)} (none "
                                                    "recorded as differing)"))
    else:
        lines.append("Unresolved: the steps that would decide were skipped (see the notes).")
    lines.append(f"{r.envs_built} environment(s) built, {r.runs} run(s) of "
                 f"{' '.join(r.command)}")
    return lines


def render_text(r: BisectResult) -> str:
    """A plain-text report: summary, the step table, notes, what cannot be toggled, commands."""
    metric = r.judge.metric is not None
    rows = [_HEAD] + [_row(s, metric) for s in r.steps]
    widths = [min(max(len(row[i]) for row in rows), 60) for i in range(len(_HEAD))]
    out = [f"envlock bisect: {r.good} → {r.bad}", ""]
    out += _summary(r)
    out += ["", "Steps:"]
    import textwrap

    for row in rows:  # a long cell wraps in its column, never cut (two steps must differ)
        cells = [textwrap.wrap(cell, w, break_long_words=True, break_on_hyphens=False) or [""]
                 for cell, w in zip(row, widths, strict=True)]
        for k in range(max(len(c) for c in cells)):
            out.append("  " + "  ".join((c[k] if k < len(c) else "").ljust(w)
                                        for c, w in zip(cells, widths, strict=True)).rstrip())
    if r.notes:
        out += ["", "Notes:"] + [f"  {n}" for n in r.notes]
    if r.not_toggled:
        out += ["", "Not toggled by bisect (differs, but no environment built from GOOD can "
                "change it):"] + [f"  {n}" for n in r.not_toggled]
        out.append(f"  and never: {', '.join(NEVER_TOGGLED)}")
    if r.rebuild:
        out += ["", "Rebuild the culprit's two environments:"] + [f"  {c}" for c in r.rebuild]
    where = "environments and " if r.kept else ""
    out += ["", f"The {where}output of every run: {r.workdir}"]
    return "\n".join(out) + "\n"


def render_markdown(r: BisectResult) -> str:
    """The report as markdown (a table of steps), for an issue or a lab notebook."""
    metric = r.judge.metric is not None
    out = [f"## envlock bisect: `{r.good}` → `{r.bad}`", ""]
    out += [f"- {line}" for line in _summary(r)]
    out += ["", "| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    for s in r.steps:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in _row(s, metric)) + " |")
    if r.notes:
        out += ["", "**Notes**", ""] + [f"- {n}" for n in r.notes]
    if r.not_toggled:
        out += ["", "**Not toggled by bisect**", ""] + [f"- {n}" for n in r.not_toggled]
    if r.rebuild:
        out += ["", "**Rebuild the culprit's two environments**", "", "```sh", *r.rebuild, "```"]
    return "\n".join(out) + "\n"


def render_json(r: BisectResult) -> str:
    """The JSON document (:meth:`envlock.reproduce.BisectResult.to_json`)."""
    return json.dumps(r.to_json(), indent=2) + "\n"
