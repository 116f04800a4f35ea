"""Extractors of the stack tables: ``[gpu]``, ``[cuda]``, ``[frameworks]``, ``[blas]``,
``[toolchain]``, ``[slurm]``.

They read the layout of ``envlock/stack_model.py`` (kebab-case keys as written to TOML):
``[[gpu.gpus]] compute-capability``, ``[[frameworks.packages]] build/cuda``,
``[[blas.libraries]] user/implementation/version/int64``, …  Unknown keys are ignored and a
missing key gives no fact, so older or newer manifests compare as far as they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock.diff.factset import Impl, Sink, normalize_name, put_fact, str_or_none

__all__ = ["gpu", "cuda", "frameworks", "blas", "toolchain", "slurm"]


def gpu(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[gpu]`` → ``gpu:driver``, ``driver-cuda``, ``compute-capability`` (a set over the GPUs),
    ``models`` (``"4 × NVIDIA A100-SXM4-80GB"``), ``visible-devices``, ``rocm``."""
    for key, name in (("vendor", "vendor"), ("driver-version", "driver"),
                      ("driver-kind", "driver-kind"), ("cuda-driver-version", "driver-cuda"),
                      ("visible-devices", "visible-devices"), ("rocm-version", "rocm")):
        put_fact(out, "gpu", name, str_or_none(t.get(key)))
    gpus = [g for g in t.get("gpus") or () if isinstance(g, Mapping)]
    if gpus:
        ccs = frozenset(str(g["compute-capability"]) for g in gpus if g.get("compute-capability"))
        put_fact(out, "gpu", "compute-capability", ccs)
        names: dict[str, int] = {}
        for g in gpus:
            names[str(g.get("name", "?"))] = names.get(str(g.get("name", "?")), 0) + 1
        put_fact(out, "gpu", "models", ", ".join(f"{n} × {k}" for k, n in sorted(names.items())))


def cuda(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[cuda]`` → ``cuda:nvcc``, ``cuda:toolkits`` and one ``cuda:<library>`` per library
    name, each a set of ``"<version> (<origin>)"`` over its copies."""
    put_fact(out, "cuda", "nvcc", str_or_none(t.get("nvcc-version")))
    kits = frozenset(
        f"{k.get('version', '?')} ({k.get('origin', '?')})"
        for k in t.get("toolkits") or () if isinstance(k, Mapping)
    )
    put_fact(out, "cuda", "toolkits", kits)
    libs: dict[str, set[str]] = {}
    for lib in t.get("libraries") or ():
        if isinstance(lib, Mapping) and lib.get("name"):
            libs.setdefault(str(lib["name"]), set()).add(
                f"{lib.get('version', '?')} ({lib.get('origin', '?')})")
    for name, versions in libs.items():
        put_fact(out, "cuda", name, frozenset(versions))


_FRAMEWORK_FIELDS = ("build", "cuda", "cudnn", "hip", "debug", "conda-build")
_RUNTIME_FIELDS = ("cuda-available", "device-count", "cudnn-version", "allow-tf32-matmul",
                   "allow-tf32-cudnn", "deterministic", "cudnn-benchmark")


def frameworks(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[frameworks]`` → ``frameworks:<name>.build/cuda/cudnn/hip/cuda-archs…``, the ``--import``
    runtime facts as ``frameworks:torch.runtime.*`` and threadpools as ``threads:<api> threads``."""
    for p in t.get("packages") or ():
        if not isinstance(p, Mapping) or not p.get("name"):
            continue
        name = aliases.get(normalize_name(str(p["name"])), normalize_name(str(p["name"])))
        for key in _FRAMEWORK_FIELDS:
            put_fact(out, "frameworks", f"{name}.{key}", p.get(key))
        archs = p.get("cuda-archs")
        if isinstance(archs, list):
            put_fact(out, "frameworks", f"{name}.cuda-archs", frozenset(map(str, archs)))
    rt = t.get("runtime")
    if isinstance(rt, Mapping) and rt.get("status", "ok") == "ok":
        for key in _RUNTIME_FIELDS:
            put_fact(out, "frameworks", f"torch.runtime.{key}", rt.get(key))
        for pool in rt.get("threadpools") or ():
            if isinstance(pool, Mapping) and pool.get("num-threads") is not None:
                api = pool.get("internal-api") or pool.get("user-api")
                put_fact(out, "threads", f"{api} threads", pool["num-threads"])


def blas(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[blas]`` → ``blas:<user>`` = :class:`Impl` (implementation, version, ``ilp64``) and
    ``blas:openmp <name> (<package>)``; ``scipy-openblas`` counts as OpenBLAS."""
    for lib in t.get("libraries") or ():
        if not isinstance(lib, Mapping) or not lib.get("user"):
            continue
        impl = str(lib.get("implementation") or "unknown").lower()
        impl = "openblas" if impl in ("scipy-openblas", "openblas64", "openblas64_") else impl
        detail = "ilp64" if lib.get("int64") else None
        put_fact(out, "blas", str(lib["user"]), Impl(impl, str_or_none(lib.get("version")), detail))
    for omp in t.get("openmp") or ():
        if isinstance(omp, Mapping) and omp.get("name"):
            where = omp.get("package") or "env"
            put_fact(out, "blas", f"openmp {omp['name']} ({where})",
                     str_or_none(omp.get("version")) or "present")


def toolchain(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[toolchain]`` → ``toolchain:<tool>`` version, ``libstdc++ (<origin>)`` GLIBCXX level and
    ``<package> built with`` compilers."""
    for tool in t.get("tools") or ():
        if isinstance(tool, Mapping) and tool.get("name") and tool.get("version"):
            vendor = f" ({tool['vendor']})" if tool.get("vendor") else ""
            put_fact(out, "toolchain", str(tool["name"]), f"{tool['version']}{vendor}")
    for lib in t.get("libstdcxx") or ():
        if isinstance(lib, Mapping) and lib.get("glibcxx"):
            put_fact(out, "toolchain", f"libstdc++ ({lib.get('origin', '?')})", str(lib["glibcxx"]))
    for bw in t.get("built-with") or ():
        if isinstance(bw, Mapping) and bw.get("package") and bw.get("compilers"):
            put_fact(out, "toolchain", f"{bw['package']} built with", frozenset(bw["compilers"]))


_SLURM_FIELDS = ("scheduler", "partition", "cluster", "num-nodes", "ntasks", "cpus-on-node",
                 "cpus-per-task", "mem-per-node", "mem-per-cpu", "gpus-on-node")


def slurm(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[slurm]`` → the allocation's shape (partition, cluster, CPUs, memory, GPUs); job ids and
    node names are not facts."""
    for key in _SLURM_FIELDS:
        put_fact(out, "slurm", key, t.get(key))
