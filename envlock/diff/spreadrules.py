"""Explanations of the facts of a many-input diff that have no majority value.

Such a fact makes no input "the odd one", so no per-input comparison
(:mod:`envlock.diff.pairrules`, :mod:`envlock.diff.rules`) explains it; here each gets one
explanation, and torch's build, when the inputs hold different ones, one ``torch-variant``
explanation that names the inputs of each build.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.facts import FactSet
from envlock.diff.impact import KB, change_size
from envlock.diff.ruleparts import _fmt, _plainv, _score, accounted, torch_variant

__all__ = ["explain_spread"]


def _who(labels: Sequence[str]) -> str:
    """``a``, ``a, b, c`` or ``a, b and 7 others``."""
    if len(labels) <= 3:
        return ", ".join(labels)
    return f"{labels[0]}, {labels[1]} and {len(labels) - 2} others"


def _missing(area: str) -> str:
    return {"package": "not installed", "env": "unset"}.get(area, "not recorded")


def explain_spread(inputs: Sequence[FactSet], spread: Sequence[Any], kb: KB) -> list[Explanation]:
    """Explain the facts of a many-input diff that have no majority value.

    Such a fact makes no input "the odd one" (so it is in no per-input comparison), yet it
    may be the cause: a package that bisect found, at another version in every input, or
    the one CPU torch among five CUDA ones.  Each fact gets one explanation, scored as the
    impact model scores its largest change against its most common value; torch's build is
    told per input (:func:`torch_variant`) and, when the inputs hold different builds, its
    facts are one ``torch-variant`` explanation that names the inputs of each build, the
    fewest first (the same rank as the pairwise rule).

    :param inputs: every input (for torch's build); ``spread``: their
        :class:`~envlock.diff.engine.Varying` facts without a majority.
    :returns: the explanations, most likely first.
    """
    changes = _worst_changes(inputs, spread, kb)
    out: list[Explanation] = []
    used: set[int] = set()
    torch = _torch_builds(kb, changes, *_torch_variants(inputs, spread))
    if torch is not None:
        out.append(torch)
        used.update(id(c) for c in torch.changes)
    out.extend(_fact_spread(kb, c, v) for c, v in changes
               if id(c) not in used and kb.explains(c.cls))
    out.sort(key=lambda e: (-e.score, e.title))
    return out


def _worst_changes(inputs: Sequence[FactSet], spread: Sequence[Any], kb: KB
                   ) -> list[tuple[Change, Any]]:
    """Each fact with its largest change against its most common value (by the model's score)."""
    generic = {a for s in inputs for a in s.generic}
    changes: list[tuple[Change, Any]] = []
    for v in spread:
        first = v.values[0][0]
        comp = kb.component(v.area, v.key)
        worst = max((Change(v.area, v.key, (first, x), change_size(first, x), comp.id, comp.cls,
                            None, v.area in generic) for x, _, _ in v.values[1:]),
                    key=lambda c: _score(kb, c))
        changes.append((worst, v))
    return changes


def _torch_variants(inputs: Sequence[FactSet], spread: Sequence[Any]
                    ) -> tuple[dict[str, list[str]], list[str]]:
    """When torch's version is spread: the inputs of each torch build, and those with torch
    whose build cannot be told."""
    by_variant: dict[str, list[str]] = {}
    untold: list[str] = []
    if any(v.area == "package" and v.key == "torch" for v in spread):
        for s in inputs:
            variant = torch_variant(s.facts)
            if variant:
                by_variant.setdefault(variant, []).append(s.label)
            elif ("package", "torch") in s.facts:
                untold.append(s.label)
    return by_variant, untold


def _torch_builds(kb: KB, changes: list[tuple[Change, Any]], by_variant: dict[str, list[str]],
                  untold: list[str]) -> Explanation | None:
    """One ``torch-variant`` explanation when the inputs hold different torch builds, naming
    the inputs of each build, the fewest first; it accounts for the facts the model's edges
    link to the build."""
    # builds of one kind (CPU-only, CUDA, ROCm) together: the odd kind is the cause
    kinds: dict[str, dict[str, list[str]]] = {}
    for variant, labels in by_variant.items():
        kinds.setdefault(variant.split()[0], {})[variant] = labels
    if len(by_variant) <= 1 or "CUDA" in by_variant:  # "CUDA": version unknown
        return None
    absorbed = accounted(kb, "torch-variant", [c for c, _ in changes])
    causes = [c for c in absorbed if (c.area, c.key) == ("package", "torch")
              or c.key in ("torch.build", "torch.cuda", "torch.hip")]
    if not causes:
        return None
    absorbed = causes + [c for c in absorbed if all(c is not k for k in causes)]  # cause first
    spec = kb.rules.get("torch-variant", {})
    ordered = sorted(kinds.items(), key=lambda kv: sum(map(len, kv[1].values())))

    def said(variants: dict[str, list[str]]) -> str:
        return "; ".join(f"{v} on {_who(ls)}" for v, ls in variants.items())

    what = "; ".join(said(vs) for _, vs in ordered)
    if untold:
        what += f"; build not told on {_who(untold)}"
    odd_kind, odd = ordered[0]
    odd_labels = [lab for ls in odd.values() for lab in ls]
    if len(ordered) > 1:
        common = ordered[-1][0]
        do = (f"Install a {common} build of torch where {_who(odd_labels)} has its "
              f"{'/'.join(odd)} build (the build the other inputs run), or the same "
              f"{odd_kind} build everywhere; then check torch.version.cuda on each.")
    else:
        do = ("Install one torch build on every input (one CUDA version for all), "
              "then check torch.version.cuda on each.")
    why = str(spec.get("why" if len(ordered) > 1 else "why-cuda", ""))
    return Explanation("torch-variant", f"torch builds differ: {what}",
                       str(spec.get("class", "platform")),
                       int(spec.get("rank", 100)) * 10 + kb.sizes.get("variant", 9),
                       why, do, tuple(absorbed), tuple(causes))


def _fact_spread(kb: KB, c: Change, v: Any) -> Explanation:
    """The explanation of one fact without a majority value: each value with its inputs."""
    comp = kb.component(c.area, c.key)
    name = c.key if c.area == "package" else f"{c.area} {c.key}"
    parts = "; ".join(f"{_missing(c.area) if x is None else _plainv(x)} on {_who(labels)}"
                      for x, _, labels in v.values)
    every = all(n == 1 for _, n, _ in v.values)
    title = (f"{name} differs on every input: {parts}" if every else
             f"{name} has no value most inputs share: {parts}")
    kw = {"a": _plainv(c.values[0]), "b": _plainv(c.values[1]), "key": c.key}
    do = (f"Install one version of {c.key} on every input, then compare again."
          if c.area == "package" else f"Make {name} the same on every input.")
    return Explanation(f"{comp.id}:{c.area}:{c.key}", title, comp.cls, _score(kb, c),
                       _fmt(comp.why, **kw), do, (c,), (c,))
