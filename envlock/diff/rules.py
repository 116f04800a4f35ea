"""Explanations: rules that combine facts, then one explanation per component or fact.

Each rule looks at both inputs' facts (not only the differing ones: TF32 needs the torch
version even when it is the same on both sides), returns an :class:`Explanation` and the
changes it accounts for; those changes are not explained again.  The texts, ranks and
parameters of the rules are in the impact model (``[rules.*]`` of ``impact.toml``):

* ``code`` — a checkout's commit or uncommitted diff differs (case C13); when only the
  number of untracked files differs and the tracked code is the same (same commit and diff
  hash, or both clean), ``untracked`` explains it with a low rank (new manifests are
  untracked files too);
* ``torch-variant`` — torch is a CPU build on one side and a CUDA build on the other, or
  builds for different CUDA versions (case C05);
* ``tf32`` — GPU compute capability ≥ 8.0 with torch 1.7–1.11 on one side only: float32
  matmul on TF32 tensor cores by default (case C14; pytorch/pytorch#58434, torch 1.12 notes);
* ``blas-vendor`` — OpenBLAS vs MKL vs BLIS (case C10);
* ``simd`` — AVX-512 on one side only with numpy ≥ 1.22 (case C08; numpy/numpy#23289);
* ``threads`` — BLAS/OpenMP thread settings or, when unset, usable cores (case C09);
* ``loader-path`` — ``LD_LIBRARY_PATH``/``LD_PRELOAD`` differs and moved libraries of
  ``[libraries]`` (found through it by the loader model, or shadowed; case C01);
* ``scheduler`` — the allocation (nodes, tasks, GPUs and CPUs per task) differs.

The result is a cause graph: each explanation has its ``causes`` and the consequences the
model's ``[[edge]]`` entries link to them (:func:`accounted`: the CUDA build → the
``nvidia-*`` wheels and CUDA libraries; the driver → driver-CUDA and libcuda; the BLAS vendor →
the BLAS libraries; ``LD_LIBRARY_PATH`` → every library it moved).  A consequence is never an
explanation of its own, and a cause scores as high as its most important consequence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.conditions import unmet
from envlock.diff.facts import FactSet, Impl, Lib, Pkg, display
from envlock.diff.impact import KB, change_size, version_in
from envlock.formats.conda import build_variant

__all__ = ["explain", "explain_noted", "explain_spread", "torch_variant", "blas_vendors", "accounted",
           "context"]

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
            out.append(c)
            break
    return out


def _spec_ok(version: str | None, spec: str) -> bool:
    return version_in(version, spec)


def _pkg_version(facts: Facts, name: str) -> str | None:
    p = facts.get(("package", name))
    return p.version if isinstance(p, Pkg) and p.version else None


# -- code -------------------------------------------------------------------------------------
def _code(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    out = []
    by_scope: dict[str, list[Change]] = {}
    for c in changes:
        if c.area == "code" and not c.key.endswith(".branch"):
            by_scope.setdefault(c.key.rsplit(".", 1)[0], []).append(c)
    for scope, cs in by_scope.items():
        where = ("the repository" if scope == "repository" else
                 f"{scope} (VCS requirement)" if any(c.key.endswith(".url") for c in cs) else
                 f"{scope} (editable checkout)")
        if all(c.key.endswith(".untracked") for c in cs) and _tracked_same(a, b, scope):
            c = cs[0]
            va, vb = (_unset(v) for v in c.values)
            if c.majority_count is not None:
                va, vb = f"{va} on {c.majority_count} inputs", f"{vb} on {b.label}"
            out.append(_rule(kb, "untracked", cs, "value", where=where, a=va, b=vb))
            continue
        parts = []
        for c in cs:
            what = c.key.rsplit(".", 1)[1]
            va, vb = (_short(v) for v in c.values)
            if c.majority_count is not None:
                parts.append(f"{b.label} has {what} {vb} while {c.majority_count} others have {va}")
            else:
                parts.append(f"{what} {va} → {vb}")
        from envlock.diff.fixes import code_fix

        fix = (code_fix(cs, (a.label, b.label)) if scope == "repository" else
               "run the same version of the checkout on both sides")
        out.append(_rule(kb, "code", cs, "major", what=f"{where}: " + "; ".join(parts), fix=fix))
    return out


def _tracked_same(a: FactSet, b: FactSet, scope: str) -> bool:
    """Whether the tracked code of checkout ``scope`` is known to be the same on both sides:
    the same commit and the same uncommitted diff hash, or both clean (``git diff HEAD``
    empty).  Two dirty trees without a hash are not known to be the same."""
    commit = [f.get(("code", f"{scope}.commit")) for f in (a.facts, b.facts)]
    diff = [f.get(("code", f"{scope}.uncommitted")) for f in (a.facts, b.facts)]
    return (commit[0] is not None and commit[0] == commit[1] and diff[0] == diff[1]
            and isinstance(diff[0], str) and (diff[0] == "none" or diff[0].startswith("sha256:")))


def _short(v: Any) -> str:
    text = display(v)
    if re.fullmatch(r"[0-9a-f]{40}", text):
        return text[:12]
    if text.startswith("sha256:"):
        return text[:19] + "…"
    return text


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


def _torch(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    from envlock.diff.fixes import torch_fix

    va, vb = torch_variant(a.facts), torch_variant(b.facts)
    if not va or not vb or va == vb or "CUDA" in (va, vb):  # "CUDA": version unknown
        return []
    absorbed = accounted(kb, "torch-variant", changes)
    causes = [c for c in absorbed if (c.area, c.key) == ("package", "torch")
              or c.key in ("torch.build", "torch.cuda", "torch.hip")]
    version = next((c for c in absorbed if c.area == "package" and c.key == "torch"), None)
    pkgs = tuple(f.get(("package", "torch")) for f in (a.facts, b.facts))
    fix = torch_fix((va, vb), (a.label, b.label), pkgs)  # type: ignore[arg-type]
    both_gpu = "CPU-only" not in (va, vb)
    ex = _rule(kb, "torch-variant", absorbed, "variant", causes=causes,
               why="why-cuda" if both_gpu else "why", a=va, b=vb, la=a.label, lb=b.label,
               fix=fix)
    extra = []
    if version is not None:
        va_, vb_ = (v.version if isinstance(v, Pkg) else display(v) for v in version.values)
        if va_.split("+")[0] != vb_.split("+")[0]:
            extra.append(f"torch {va_} → {vb_}")
    cudnn = _both_differ(absorbed, ("frameworks", "torch.cudnn"), ("package", "cudnn"))
    if cudnn is not None:
        extra.append(f"cuDNN {_plainv(cudnn.values[0])} → {_plainv(cudnn.values[1])}")
    if extra:
        ex = replace(ex, title=f"{ex.title} ({'; '.join(extra)})")
    return [ex]


def _both_differ(changes: Iterable[Change], *keys: tuple[str, str]) -> Change | None:
    """The first change among ``keys`` that both sides have (a version bump, not an addition)."""
    by_key = {(c.area, c.key): c for c in changes}
    for k in keys:
        c = by_key.get(k)
        if c is not None and None not in c.values:
            return c
    return None


# -- TF32 -------------------------------------------------------------------------------------
def _tf32_on(facts: Facts, spec: str, min_cc: float, *, key: str = "allow-tf32-matmul",
             ) -> tuple[bool | None, str, str]:
    """Whether TF32 is on by default for an input (``None``: cannot be told), its GPUs'
    compute capabilities and torch version; ``key``: the ``--import`` flag that overrides the
    default when recorded (``allow-tf32-matmul`` or ``allow-tf32-cudnn``)."""
    ccs = facts.get(("gpu", "compute-capability"))
    best = max((float(c) for c in ccs if re.fullmatch(r"\d+\.\d+", c)), default=None) \
        if isinstance(ccs, frozenset) else None
    torch = _pkg_version(facts, "torch") or facts.get(("frameworks", "torch.version"))
    runtime = facts.get(("frameworks", f"torch.runtime.{key}"))
    cc_text = display(ccs) if ccs else "no GPU"
    if isinstance(runtime, bool) and best is not None:
        return runtime and best >= min_cc, cc_text, str(torch)
    if torch is None or torch_variant(facts) == "CPU-only":
        return (False if best is None and torch else None), cc_text, str(torch)
    if best is None:
        return False, cc_text, str(torch)
    return best >= min_cc and _spec_ok(torch, spec), cc_text, str(torch)


def _tf32(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    spec = kb.rules.get("tf32", {})
    torch_spec = str(spec.get("torch", ">=1.7,<1.12"))
    min_cc = float(spec.get("min-cc", "8.0"))
    on_a, cc_a, t_a = _tf32_on(a.facts, torch_spec, min_cc)
    on_b, cc_b, t_b = _tf32_on(b.facts, torch_spec, min_cc)
    rid = "tf32"
    if on_a is None or on_b is None or on_a == on_b:
        # torch >= 1.12: the matmul default is off, cuDNN's convolutions still use TF32
        cudnn = kb.rules.get("tf32-cudnn")
        if not cudnn:
            return []
        torch_spec = str(cudnn.get("torch", ">=1.12"))
        on_a, cc_a, t_a = _tf32_on(a.facts, torch_spec, min_cc, key="allow-tf32-cudnn")
        on_b, cc_b, t_b = _tf32_on(b.facts, torch_spec, min_cc, key="allow-tf32-cudnn")
        if on_a is None or on_b is None or on_a == on_b:
            return []
        rid = "tf32-cudnn"
    on, off, cc_on, torch_on = (a, b, cc_a, t_a) if on_a else (b, a, cc_b, t_b)
    absorbed = [c for c in changes if c.component == "gpu-arch"
                or c.key.startswith("torch.runtime.allow-tf32")]
    return [_rule(kb, rid, absorbed, "value", on=on.label, off=off.label, cc_on=cc_on,
                  torch_on=torch_on, spec=torch_spec)]


# -- BLAS vendor ------------------------------------------------------------------------------
_VENDOR_NAMES = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS", "netlib": "reference BLAS",
                 "accelerate": "Accelerate", "flexiblas": "FlexiBLAS"}


def blas_vendors(facts: Facts) -> frozenset[str]:
    """The BLAS implementations the facts show: ``[blas]`` entries, else conda's libblas build.

    conda-forge's ``libblas`` build string ends in ``_openblas``, ``_mkl``, ``_blis``,
    ``_accelerate`` or ``_netlib`` (the BLAS "mutex"); defaults' ``blas`` package build is
    ``mkl`` or ``openblas``.  An ``mkl`` package without ``libblas`` counts as MKL.
    """
    found = {v.name for (area, key), v in facts.items()
             if area == "blas" and isinstance(v, Impl) and not key.startswith("openmp")}
    if found:
        return frozenset(found - {"unknown"})
    for name in ("libblas", "blas"):
        pkg = facts.get(("package", name))
        if isinstance(pkg, Pkg) and pkg.build:
            for vendor in _VENDOR_NAMES:
                if re.search(rf"(^|_){vendor}($|_)", pkg.build):
                    return frozenset({vendor})
    if ("package", "mkl") in facts:
        return frozenset({"mkl"})
    if ("package", "libopenblas") in facts or ("package", "openblas") in facts:
        return frozenset({"openblas"})
    return frozenset()


def _blas(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    va, vb = blas_vendors(a.facts), blas_vendors(b.facts)
    if not va or not vb or va == vb:
        return []
    absorbed = accounted(kb, "blas-vendor", changes)

    def names(v: frozenset[str]) -> str:
        return " + ".join(sorted(_VENDOR_NAMES.get(x, x) for x in v))

    from envlock.diff.fixes import blas_fix

    causes = [c for c in absorbed if c.area == "blas"] or absorbed[:1]
    one = tuple(next(iter(v)) if len(v) == 1 else "" for v in (va, vb))
    pkgs = tuple(f.get(("package", "libblas")) or f.get(("package", "blas"))
                 for f in (a.facts, b.facts))
    return [_rule(kb, "blas-vendor", absorbed, "vendor", causes=causes, a=names(va), b=names(vb),
                  la=a.label, lb=b.label, fix=blas_fix(one, pkgs))]  # type: ignore[arg-type]


# -- SIMD -------------------------------------------------------------------------------------
def _simd_name(isa: frozenset[str]) -> str:
    if "avx512f" in isa:
        return "AVX-512"
    return "AVX2 (no AVX-512)" if "avx2" in isa else "no AVX-512"


def _simd(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    ia, ib = a.facts.get(("cpu", "isa")), b.facts.get(("cpu", "isa"))
    if not isinstance(ia, frozenset) or not isinstance(ib, frozenset):
        return []
    if ("avx512f" in ia) == ("avx512f" in ib):
        return []
    spec = str(kb.rules.get("simd", {}).get("numpy", ">=1.22"))
    numpy = [v for v in (_pkg_version(a.facts, "numpy"), _pkg_version(b.facts, "numpy")) if v]
    if not any(_spec_ok(v, spec) for v in numpy):
        return []
    absorbed = [c for c in changes if c.component == "cpu-isa"]
    return [_rule(kb, "simd", absorbed, "value", a=_simd_name(ia), b=_simd_name(ib),
                  la=a.label, lb=b.label, numpy=" / ".join(dict.fromkeys(numpy)))]


# -- threads ----------------------------------------------------------------------------------
def _threads(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    names = set(kb.rules.get("threads", {}).get("vars", ()))
    env = [c for c in changes if c.area == "env" and c.key in names]
    cores = [c for c in changes if c.component == "thread-count" and c.area != "env"]
    unset = any(("env", n) not in f for n in ("OMP_NUM_THREADS",) for f in (a.facts, b.facts))
    if not env and not (cores and unset):
        return []
    parts = [_describe(c, b.label) if c.majority_count is not None
             else f"{c.key} {_unset(c.values[0])} → {_unset(c.values[1])}" for c in env + cores]
    from envlock.diff.fixes import env_fix

    return [_rule(kb, "threads", env + cores, "value", what="; ".join(parts),
                  fix=env_fix(env, (a.label, b.label)))]


def _unset(v: Any) -> str:
    return "unset" if v is None else display(v)


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


# -- LD_LIBRARY_PATH / LD_PRELOAD ------------------------------------------------------------
_LOADER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH")


def _through(c: Change, rule: str) -> bool:
    """Whether either side of a ``libraries`` change was found through the variable whose
    loader-model rule is ``rule`` (``ld_library_path`` or ``preload``), or was shadowed."""
    return any(isinstance(v, Lib) and v.via in (rule, "shadowed") for v in c.values)


def _loader_path(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    out = []
    rest = list(changes)
    for var, rule in (("LD_PRELOAD", "preload"), ("LD_LIBRARY_PATH", "ld_library_path")):
        cause = next((c for c in rest if (c.area, c.key) == ("env", var)), None)
        if cause is None:
            continue
        moved = accounted(kb, "loader-path", rest, functools.partial(_through, rule=rule))
        if not moved:
            continue  # the variable changed nothing the loader model saw: plumbing
        rest = [c for c in rest if c not in moved and c is not cause]
        va, vb = cause.values
        side = b if vb is not None else a
        libs = ", ".join(c.key for c in moved)
        here = 1 if vb is not None else 0
        shown = ", ".join(f"{c.key} from {_where(c.values[here])}" for c in moved)
        la = a.label if cause.majority_count is None else f"{cause.majority_count} inputs"
        out.append(_rule(kb, "loader-path", [cause, *moved], "value", causes=[cause], var=var,
                         a=_unset(va), b=_unset(vb), la=la, lb=b.label, libs=libs,
                         moved=shown, lb_or_la=side.label))
    return out


def _where(v: Any) -> str:
    if isinstance(v, Lib):
        return v.where.removeprefix("unowned file ")
    return _plainv(v)


# -- scheduler --------------------------------------------------------------------------------
#: the few facts of an allocation that matter, each from [slurm] or a scheduler variable.
_ALLOCATION = (
    ("nodes", ("num-nodes", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "PBS_NUM_NODES")),
    ("tasks", ("ntasks", "SLURM_NTASKS", "SLURM_NPROCS", "PBS_NP")),
    ("GPUs per task", ("gpus-per-task", "SLURM_GPUS_PER_TASK")),
    ("CPUs per task", ("cpus-per-task", "SLURM_CPUS_PER_TASK", "PBS_NUM_PPN")),
)


def _scheduler(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    absorbed = accounted(kb, "scheduler", changes)
    if not absorbed:
        return []
    by_key = {c.key: c for c in absorbed}
    parts, causes = [], []
    for name, keys in _ALLOCATION:
        c = next((by_key[k] for k in keys if k in by_key), None)
        if c is not None:
            causes.append(c)
            parts.append(_describe(c, b.label).replace(c.key, name, 1))
    others = len(absorbed) - len(causes)
    if others:
        parts.append(f"{others} other scheduler setting{'s' if others > 1 else ''}")
    return [_rule(kb, "scheduler", absorbed, "value", causes=causes or absorbed,
                  what="; ".join(parts))]


RULES: tuple[Callable[[FactSet, FactSet, list[Change], KB], list[Explanation]], ...] = (
    _code, _torch, _tf32, _blas, _simd, _threads, _loader_path, _scheduler)


# -- facts without a majority value (three or more inputs) -----------------------------------
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
    generic = {a for s in inputs for a in s.generic}
    changes: list[tuple[Change, Any]] = []
    for v in spread:
        first = v.values[0][0]
        comp = kb.component(v.area, v.key)
        worst = max((Change(v.area, v.key, (first, x), change_size(first, x), comp.id, comp.cls,
                            None, v.area in generic) for x, _, _ in v.values[1:]),
                    key=lambda c: _score(kb, c))
        changes.append((worst, v))
    out: list[Explanation] = []
    used: set[int] = set()
    by_variant: dict[str, list[str]] = {}
    untold: list[str] = []
    if any(v.area == "package" and v.key == "torch" for v in spread):
        for s in inputs:
            variant = torch_variant(s.facts)
            if variant:
                by_variant.setdefault(variant, []).append(s.label)
            elif ("package", "torch") in s.facts:
                untold.append(s.label)
    # builds of one kind (CPU-only, CUDA, ROCm) together: the odd kind is the cause
    kinds: dict[str, dict[str, list[str]]] = {}
    for variant, labels in by_variant.items():
        kinds.setdefault(variant.split()[0], {})[variant] = labels
    if len(by_variant) > 1 and "CUDA" not in by_variant:  # "CUDA": version unknown
        absorbed = accounted(kb, "torch-variant", [c for c, _ in changes])
        causes = [c for c in absorbed if (c.area, c.key) == ("package", "torch")
                  or c.key in ("torch.build", "torch.cuda", "torch.hip")]
        if causes:
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
            out.append(Explanation("torch-variant", f"torch builds differ: {what}",
                                   str(spec.get("class", "platform")),
                                   int(spec.get("rank", 100)) * 10 + kb.sizes.get("variant", 9),
                                   why, do, tuple(absorbed), tuple(causes)))
            used.update(id(c) for c in absorbed)
    for c, v in changes:
        if id(c) in used or not kb.explains(c.cls):
            continue
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
        out.append(Explanation(f"{comp.id}:{c.area}:{c.key}", title, comp.cls, _score(kb, c),
                               _fmt(comp.why, **kw), do, (c,), (c,)))
    out.sort(key=lambda e: (-e.score, e.title))
    return out


# -- the rest: one explanation per component (grouped) or per fact ----------------------------
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


def _do(template: str, c: Change, label: tuple[str, str], kw: Mapping[str, Any]) -> str:
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

            cmd = (install_command(present, c.key)  # conda's own command for a conda record
                   if isinstance(present, Pkg) and present.manager == "conda"
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


def _plain(rest: Iterable[Change], kb: KB, label: str,
           labels: tuple[str, str] = ("the first input", "the second input")) -> list[Explanation]:
    groups: dict[str, list[Change]] = {}
    compilers: list[Change] = []
    rest = list(rest)
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
                         else package_fix(first, labels))
        if comp.group:
            shown = "; ".join(_describe(c, label) for c in cs[:4])
            more = f"; and {len(cs) - 4} more" if len(cs) > 4 else ""
            title = f"{comp.title or comp.id}: {shown}{more}"
        else:
            title = _describe(first, label) + (
                f" ({first.size})" if first.size in ("major", "minor", "patch") else "")
            if first.area != "package" and first.majority_count is None:
                title = f"{first.area} {title}"
        out.append(Explanation(gid, title, comp.cls, max(_score(kb, c) for c in cs),
                               _fmt(comp.why, **kw), _do(comp.do, first, labels, kw), tuple(cs),
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
