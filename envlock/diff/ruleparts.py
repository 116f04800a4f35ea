"""What the explanation rules share: the model's texts filled in, a change's score, the cause
graph's edges (:func:`accounted`), torch's build (:func:`torch_variant`) and a change in words.

:mod:`envlock.diff.pairrules` (the rules that combine facts of two inputs),
:mod:`envlock.diff.spreadrules` (facts of many inputs without a majority value) and
:mod:`envlock.diff.rules` (one explanation per component or fact) use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.facts import Pkg, display
from envlock.diff.impact import KB, version_in
from envlock.variants import build_variant

__all__ = ["accounted", "torch_variant", "GENERIC_RANK"]

Facts = Mapping[tuple[str, str], Any]


class _Keep(dict[str, Any]):
    """Placeholders :func:`_fmt` has no value for stay as written (``{key}``)."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fmt(text: str, **kw: Any) -> str:
    return text.format_map(_Keep(kw))


def _rule(kb: KB, rid: str, changes: list[Change], size: str = "value", *,
          causes: list[Change] | None = None, why: str = "why", **kw: Any) -> Explanation:
    spec = kb.rules.get(rid, {})
    rank = int(spec.get("rank", 90))
    text = spec.get(why) or spec.get("why", "")
    return Explanation(rid, _fmt(str(spec.get("title", rid)), **kw),
                       str(spec.get("class", "numerical-core")),
                       rank * 10 + kb.sizes.get(size, 1), _fmt(str(text), **kw),
                       _fmt(str(spec.get("do", "")), **kw), tuple(changes),
                       tuple(causes if causes is not None else changes))


def accounted(kb: KB, cause: str, changes: Iterable[Change],
              moved: Callable[[Change], bool] | None = None) -> list[Change]:
    """The changes that the ``[[edge]]`` entries of ``cause`` account for (its consequences).

    :param moved: for ``when = "moved"`` edges, whether a change went through the cause.
    """
    edges = kb.edges_of(cause)
    out = []
    for c in changes:
        fact = f"{c.area}:{c.key}"
        for e in edges:
            if not e.matches(fact):
                continue
            if e.when == "one-side" and None not in c.values:
                continue
            if e.when == "moved" and (moved is None or not moved(c)):
                continue
            if e.when == "same-version" and not _same_version(c):
                continue
            out.append(c)
            break
    return out


def _same_version(c: Change) -> bool:
    """Whether a package change keeps its version on both sides (only the build string or
    the channel differ), as a package rebuilt for another conda platform does."""
    a, b = c.values
    return (isinstance(a, Pkg) and isinstance(b, Pkg) and not a.constraint and not b.constraint
            and bool(a.version) and a.version == b.version)


def _spec_ok(version: str | None, spec: str) -> bool:
    return version_in(version, spec)


def _pkg_version(facts: Facts, name: str) -> str | None:
    p = facts.get(("package", name))
    return p.version if isinstance(p, Pkg) and p.version else None


def _plainv(v: Any) -> str:
    if v is None:
        return "(absent)"
    return v.version if isinstance(v, Pkg) and v.version else display(v)


#: rank of a fact from a table without an extractor (raw generic keys): below every
#: explained class of the shipped model (plumbing is 20), above tooling (0).
GENERIC_RANK = 10


def _score(kb: KB, c: Change) -> int:
    if c.generic:
        return GENERIC_RANK * 10 + kb.sizes.get(c.size, 1)
    comp = kb.of(c.area, c.key, c.component)
    if comp.size is not None:
        return kb.rank(c.cls) * 10 + int(comp.size)
    if c.size == "build" and comp.build_size is not None:
        return kb.rank(c.cls) * 10 + int(comp.build_size)
    return kb.score(c.cls, c.size)


# -- torch build variant ----------------------------------------------------------------------
def torch_variant(facts: Facts) -> str | None:
    """Tell torch's build from the facts: ``"CPU-only"``, ``"CUDA 13.0"``, ``"ROCm 6.1"``.

    Evidence, first that exists: ``[frameworks]`` (``build``/``cuda``/``hip``, read from
    ``torch/version.py``); the PEP 440 local label of the pip version (``+cpu``, ``+cu130``,
    ``+rocm6.1``); the conda build string (``py3.8_cpu_0``, ``*cuda12.1*``, ``cuda120_*``);
    on macOS (an ``osx-*`` subdir or a macOS platform) every build is CPU-only (the
    ``pytorch`` channel's ``py3.10_0`` names no variant); for a PyPI wheel without a label,
    the ``nvidia-cuda-runtime`` wheel beside it.

    :returns: the variant, or ``None`` when torch is absent or its build cannot be told.
    """
    build = facts.get(("frameworks", "torch.build"))
    if build == "cpu":
        return "CPU-only"
    if build == "cuda" and facts.get(("frameworks", "torch.cuda")):
        return f"CUDA {facts[('frameworks', 'torch.cuda')]}"
    if build == "rocm":
        return f"ROCm {facts.get(('frameworks', 'torch.hip')) or ''}".strip()
    pkg = facts.get(("package", "torch"))
    if not isinstance(pkg, Pkg):
        return None
    local = pkg.version.partition("+")[2]
    if local == "cpu":
        return "CPU-only"
    m = re.fullmatch(r"cu(\d+)(\d)", local)
    if m:
        return f"CUDA {int(m.group(1))}.{m.group(2)}"

    conda_variant = build_variant(pkg.build)
    if conda_variant:
        return conda_variant
    if _macos(facts):  # no CUDA build of torch exists for macOS (pytorch.org: "MacOS Binaries
        return "CPU-only"  # dont support CUDA"); its wheels and osx-* conda builds are CPU/MPS
    if local.startswith("rocm"):
        return f"ROCm {local[4:]}"
    if build == "cuda":
        return "CUDA"
    for rt in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"):
        v = _pkg_version(facts, rt)
        if v:
            return "CUDA " + ".".join(v.split(".")[:2])
    return None


def _macos(facts: Facts) -> bool:
    """Whether the facts are of macOS: an ``osx-*`` conda subdir, or a macOS platform."""
    subdir = facts.get(("subdir", "platform"))
    os_ = facts.get(("platform", "os"))
    return (isinstance(subdir, str) and subdir.startswith("osx-")) or (
        isinstance(os_, str) and os_.lower().startswith(("macos", "darwin", "mac os")))


# -- a change in words ------------------------------------------------------------------------
def _describe(c: Change, label: str = "") -> str:
    va, vb = c.values
    if c.majority_count is not None:
        return _against_majority(c, label)
    if va is None:
        return f"{c.key} {display(vb)} added"
    if vb is None:
        return f"{c.key} {display(va)} removed"
    if c.size == "violation":  # a spec's constraint the other side does not satisfy
        spec, got = (va, vb) if isinstance(va, Pkg) and va.constraint else (vb, va)
        return (f"{c.key} {_plainv(got)} violates the constraint "
                f"{_plainv(spec) or '(any)'}{' ' + spec.build if spec.build else ''}")
    if isinstance(va, Pkg) and isinstance(vb, Pkg) and va.version != vb.version:
        return f"{c.key} {va.version} → {vb.version}"
    return f"{c.key} {display(va)} → {display(vb)}"


def _against_majority(c: Change, label: str) -> str:
    """One input against the majority, in plain words: ``n3 has numpy 2.3.5 while 31 others
    have 2.4.1``; a package one side lacks is "not installed" there (a variable "unset", any
    other fact "not recorded")."""
    va, vb = c.values
    n = c.majority_count
    name = c.key if c.area == "package" else f"{c.area} {c.key}"
    if va is not None and vb is not None:
        return f"{label} has {name} {display(vb)} while {n} others have {display(va)}"
    if c.area == "package":
        if vb is None:
            return f"{label} does not have {name} installed while {n} others have {display(va)}"
        return f"{label} has {name} {display(vb)} while {n} others do not have it installed"
    missing = "unset" if c.area == "env" else "not recorded"
    if vb is None:
        return f"{label} has {name} {missing} while {n} others have {display(va)}"
    return f"{label} has {name} {display(vb)} while {n} others have it {missing}"
