"""The rules that combine facts of two inputs into one explanation each.

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
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.facts import FactSet, Impl, Lib, Pkg, display
from envlock.diff.impact import KB
from envlock.diff.ruleparts import (Facts, _describe, _pkg_version, _plainv,
                                    _rule, _spec_ok, accounted, torch_variant)

__all__ = ["RULES", "blas_vendors"]


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


def _torch(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    from envlock.diff.fixes import torch_fix

    va, vb = torch_variant(a.facts), torch_variant(b.facts)
    if not va or not vb or va == vb or "CUDA" in (va, vb):  # "CUDA": version unknown
        return []
    absorbed = accounted(kb, "torch-variant", changes)
    causes = [c for c in absorbed if (c.area, c.key) == ("package", "torch")
              or c.key in ("torch.build", "torch.cuda", "torch.hip")]
    absorbed = causes + [c for c in absorbed if all(c is not k for k in causes)]  # cause first
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


# -- LD_LIBRARY_PATH / LD_PRELOAD ------------------------------------------------------------
_LOADER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH")


def _through(c: Change, rule: str) -> bool:
    """Whether either side of a ``libraries`` change was found through the variable whose
    loader-model rule is ``rule`` (``ld_library_path`` or ``preload``), or was shadowed."""
    return any(isinstance(v, Lib) and v.via in (rule, "shadowed") for v in c.values)


def _loader_path(a: FactSet, b: FactSet, changes: list[Change], kb: KB) -> list[Explanation]:
    from envlock.diff.fixes import env_fix

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
                         moved=shown, lb_or_la=side.label, fix=env_fix([cause], (la, b.label))))
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
