"""Explanations of a diff: the rules that combine facts (:mod:`envlock.diff.pairrules`), then
one explanation per component or fact (:func:`explain`, :func:`explain_noted`), and the facts
that frame them (:func:`context`).

Facts of many inputs without a majority value are explained in :mod:`envlock.diff.spreadrules`;
what the rules share (texts, scores, the cause graph's edges, torch's build) is in
:mod:`envlock.diff.ruleparts`.  Each explanation is a cause graph: its ``causes`` and the
consequences the model's ``[[edge]]`` entries link to them (:func:`accounted`); a consequence
is never an explanation of its own, and a cause scores as high as its most important
consequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.conditions import unmet
from envlock.diff.facts import FactSet, Pkg, display
from envlock.diff.impact import KB
from envlock.diff.pairrules import RULES, blas_vendors
from envlock.diff.ruleparts import (GENERIC_RANK, _describe, _fmt, _plainv, _score, accounted,
                                    torch_variant)
from envlock.diff.spreadrules import explain_spread

__all__ = ["explain", "explain_noted", "explain_spread", "torch_variant", "blas_vendors", "accounted",
           "context", "GENERIC_RANK"]


def _do(template: str, c: Change, label: tuple[str, str], kw: Mapping[str, Any],
        same_platform: bool = True) -> str:
    """The component's fix text, unless the change is not a version move that its ``{a}``/``{b}``
    placeholders can name: a package on one side only, or a spec's constraint (``>=2``) against a
    version — then a fix that says what to do with it."""
    if c.area == "package" and c.majority_count is None and (
            ("{a}" in template and "{b}" in template) or "{fix}" in template):
        a, b = c.values
        if a is None or b is None:
            have, lacks = (label[1], label[0]) if a is None else (label[0], label[1])
            present = b if a is None else a
            if isinstance(present, Pkg) and present.constraint:  # a spec asks for it
                want = " ".join(x for x in present.constraint[1:] if x and x != "*") or "any version"
                return (f"{have} asks for {c.key} ({want}) and {lacks} does not have it: install it "
                        f"there, or drop it from {have} if the code does not use it.")
            ver = _plainv(present)
            from envlock.diff.fixes import install_command

            cmd = (install_command(present, c.key, same_platform)  # conda's own command
                   if isinstance(present, Pkg) and present.manager == "conda"
                   else f"pip install '{present.name}'"  # unnamed: its URL or local path
                   if isinstance(present, Pkg) and ver == "unknown" and "/" in present.name
                   else f"pip install '{c.key}=={ver}'")
            return (f"{c.key} is only in {have} ({ver}): install it in {lacks} too "
                    f"(`{cmd}`) or remove it from {have}, so both run the same code.")
        if any(isinstance(v, Pkg) and v.constraint for v in (a, b)):
            spec = next(v for v in (a, b) if isinstance(v, Pkg) and v.constraint)
            other = b if spec is a else a
            parts = spec.constraint[1:] if spec.constraint else ()
            want = " ".join(x for x in parts if x and x != "*") or spec.version
            return (f"Install a {c.key} that satisfies {want} on both sides "
                    f"(the other side has {_plainv(other)}).")
    return _fmt(template, **kw)


def _plain(rest: Iterable[Change], kb: KB, label: str,
           labels: tuple[str, str] = ("the first input", "the second input")) -> list[Explanation]:
    groups: dict[str, list[Change]] = {}
    compilers: list[Change] = []
    rest = list(rest)
    cross_platform = any(c.area == "subdir" for c in rest)  # conda builds do not carry over
    # a component that is the cause of [[edge]]s takes its consequences into its explanation
    causes: dict[str, list[Change]] = {}
    pulled: set[int] = set()
    for cause in dict.fromkeys(e.cause for e in kb.edges):
        roots = [c for c in rest if c.component == cause and not accounted(kb, cause, [c])]
        if roots:
            found = [c for c in accounted(kb, cause, rest) if id(c) not in pulled]
            causes[cause] = roots
            pulled.update(id(c) for c in roots + found)
            groups[cause] = roots + found
    rest = [c for c in rest if id(c) not in pulled]
    for c in rest:
        if not kb.explains(c.cls):
            continue
        if c.area == "toolchain" and c.key.endswith(" built with"):
            compilers.append(c)
            continue
        comp = kb.of(c.area, c.key, c.component)
        groups.setdefault(comp.id if comp.group else f"{comp.id}:{c.area}:{c.key}", []).append(c)
    # a package rebuilt with another compiler because its version changed: one explanation
    by_package = {cs[0].key: cs for cs in groups.values() if cs[0].area == "package"}
    for c in compilers:
        owner = by_package.get(c.key[: -len(" built with")])
        if owner is not None:
            owner.append(c)
        else:
            comp = kb.component(c.area, c.key)
            groups[f"{comp.id}:{c.area}:{c.key}"] = [c]
    out = []
    for gid, cs in groups.items():
        comp = kb.of(cs[0].area, cs[0].key, cs[0].component)
        if gid in causes:
            comp = next(c for c in kb.components if c.id == gid)
        first = cs[0]
        kw = {"a": _plainv(first.values[0]), "b": _plainv(first.values[1]), "key": first.key}
        if "{fix}" in comp.do:
            from envlock.diff.fixes import env_fix, package_fix

            kw["fix"] = (env_fix(cs, labels) if first.area in ("env", "cpu", "threads")
                         else package_fix(first, labels, not cross_platform))
        if comp.group:
            shown = "; ".join(_describe(c, label) for c in cs[:4])
            more = f"; and {len(cs) - 4} more" if len(cs) > 4 else ""
            title = f"{comp.title or comp.id}: {shown}{more}"
        else:
            title = _describe(first, label) + (
                f" ({first.size})" if first.size in ("major", "minor", "patch") else "")
            if first.area != "package" and first.majority_count is None:
                title = f"{first.area} {title}"
        do = _do(comp.do, first, labels, kw, not cross_platform)
        out.append(Explanation(gid, title, comp.cls, max(_score(kb, c) for c in cs),
                               _fmt(comp.why, **kw), do, tuple(cs),
                               tuple(causes.get(gid, cs[:1] if not comp.group else cs))))
    return out


def explain(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    """Rank the likely causes of the differences ``a → b``, most likely first.

    :returns: every explanation (the caller shows the first ten); changes of classes with
        ``explain = false`` (tooling) are never among them.
    """
    return explain_noted(a, b, changes, kb)[0]


def _not_here(ex: Explanation, kb: KB, sides: tuple[FactSet, FactSet]) -> str | None:
    """The note for an explanation whose condition (``needs``) holds on neither side."""
    cond = unmet(kb.needs(ex.id.split(":", 1)[0]), sides)
    if cond is None:
        return None
    return (f"not a cause here: {ex.title} — it can change numbers only with {cond.text}, "
            f"and {cond.absent}")


def _release_move(c: Change) -> bool:
    """A package on both sides whose release (the version without its local label) moved."""
    va, vb = c.values
    return (c.area == "package" and isinstance(va, Pkg) and isinstance(vb, Pkg)
            and va.version.split("+", 1)[0] != vb.version.split("+", 1)[0])


def explain_noted(a: FactSet, b: FactSet, changes: list[Change], kb: KB
                  ) -> tuple[list[Explanation], list[str]]:
    """:func:`explain`, and the notes of the differences that cannot be causes here.

    Each rule and component may name the conditions under which it can change numbers
    (``needs``, :mod:`envlock.diff.conditions`); one whose condition holds on neither side is
    not an explanation but a note (``CUBLAS_WORKSPACE_CONFIG`` with no GPU on either side).
    A rule set aside so leaves its facts to the components (torch's version move is still
    explained when the CUDA build is not).

    :returns: ``(explanations, notes)``.
    """
    out: list[Explanation] = []
    notes: list[str] = []
    used: set[int] = set()
    for rule in RULES:
        for ex in rule(a, b, [c for c in changes if id(c) not in used], kb):
            note = _not_here(ex, kb, (a, b))
            if note is not None:  # its facts are accounted for, but a release move stays
                notes.append(note)
                used.update(id(c) for c in ex.changes if not _release_move(c))
                continue
            used.update(id(c) for c in ex.changes)
            out.append(ex)
    for ex in _plain((c for c in changes if id(c) not in used), kb, b.label, (a.label, b.label)):
        note = _not_here(ex, kb, (a, b))
        if note is None:
            out.append(ex)
        else:
            notes.append(note)
    # a cause is as likely to change results as its most important consequence (one that can
    # change numbers here)
    for i, ex in enumerate(out):
        roots = {id(c) for c in ex.causes}
        score, cls = ex.score, ex.cls
        for c in ex.changes:
            if id(c) in roots or not kb.explains(c.cls) or unmet(kb.needs(c.component), (a, b)):
                continue
            if _score(kb, c) > score:
                score, cls = _score(kb, c), c.cls
        if (score, cls) != (ex.score, ex.cls):
            out[i] = replace(ex, score=score, cls=cls)
    # an explanation accounts for facts that are shown: with --only/--ignore leaving out all
    # of them, or all of its causes, it is not shown either (its consequences stay in the
    # table, explained by nothing else)
    out = [ex for ex in out if ex.changes and ex.causes]
    out.sort(key=lambda e: (-e.score, e.title))
    return out, notes


def context(sets: Sequence[FactSet]) -> list[str]:
    """Facts that hold for every input and frame the explanations, most important first.

    "neither side has a GPU" (or "no input has a GPU"): every input recorded ``[gpu]`` and
    none lists a GPU, so every run computed on the CPU whatever its torch build.
    """
    out = []
    recorded = all(s.areas.get("gpu") == "" for s in sets)
    gpus = [s for s in sets if ("gpu", "models") in s.facts
            or ("gpu", "compute-capability") in s.facts]
    if recorded and not gpus:
        who = "neither side has" if len(sets) == 2 else "no input has"
        out.append(f"{who} a GPU (no NVIDIA driver or device recorded): every run computed "
                   "on the CPU, whatever its torch build")
    elif recorded and len(gpus) < len(sets):
        names = ", ".join(s.label for s in gpus)
        out.append(f"only {names} {'has' if len(gpus) == 1 else 'have'} a GPU")
    for area, key, what in (("platform", "machine", "machine"), ("python", "version", "Python")):
        vals = {s.facts.get((area, key)) for s in sets}
        if len(vals) == 1 and None not in vals:
            out.append(f"same {what}: {display(vals.pop())}")  # a spec's Python: a constraint
    for s in sets:
        out.extend(n for n in s.notes if n not in out)  # `diff F F`: each sentence once
    return out
