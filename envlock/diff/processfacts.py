"""Extractors of the live-process tables: ``[process]`` (:func:`envlock.record`) and ``[run]``
(``run.toml`` of ``envlock run``); layouts in ``envlock/manifest/processtables.py`` and docs/run.md.

Facts (area ``process``): ``torch.cudnn.benchmark``, ``torch.cudnn.deterministic``,
``torch.deterministic-algorithms``, ``torch.allow-tf32-matmul``/``-cudnn``,
``torch.float32-matmul-precision``, ``torch.num-threads``, ``cublas-workspace-config``,
``threads.<api> (<directory>)`` per native pool, ``blas libraries mapped`` and
``openmp libraries mapped`` (sets of file names: a second copy shows as a second member),
``seed.*`` (fingerprints, shortened), ``gpus``, ``extra.<key>``.

Facts (area ``run``): ``command``, ``outcome``, ``exit-status``, ``signal``, ``peak-rss``
(GiB, one decimal, so that noise of a few MiB is not a difference), ``wall`` (minutes),
``granted memory``, ``time limit``, ``gpus granted``, ``visible-devices``, ``leftover children``.
Wrong types give no fact (``envlock.diff.typecheck`` words the errors).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from envlock.diff.factset import Sink, put_fact, str_or_none
from envlock.redact import redact_argv

__all__ = ["EXTRACTORS", "process", "run"]

_TORCH = ("cudnn-benchmark", "cudnn-deterministic", "deterministic-algorithms",
          "deterministic-warn-only", "allow-tf32-matmul", "allow-tf32-cudnn",
          "float32-matmul-precision", "num-threads", "num-interop-threads")
_BLAS = re.compile(r"lib(scipy_)?openblas|libmkl_rt|libmkl_core|libblis|libflexiblas|libcblas|libblas\.")
_OMP = re.compile(r"lib(gomp|iomp5|omp)[-.]")


def _key(name: str) -> str:
    """``cudnn-benchmark`` → ``torch.cudnn.benchmark`` (the attribute's own dotted name)."""
    return "torch." + (name.replace("cudnn-", "cudnn.") if name.startswith("cudnn-") else name)


def _scalar(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) else None


def process(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[process]`` → ``process:*`` facts (see the module docstring)."""
    torch = t.get("torch")
    if isinstance(torch, Mapping):
        for name in _TORCH:
            put_fact(out, "process", _key(name), _scalar(torch.get(name)))
        if torch.get("seed-is-default") is True:
            put_fact(out, "process", "seed.torch", "not set (torch's default seed)")
        else:
            put_fact(out, "process", "seed.torch", str_or_none(torch.get("initial-seed")))
        put_fact(out, "process", "seed.torch-state", _short(torch.get("rng-state-sha256")))
    put_fact(out, "process", "cublas-workspace-config",
             str_or_none(t.get("cublas-workspace-config")) or (
                 "unset" if isinstance(torch, Mapping) else None))
    seeds = t.get("seeds")
    if isinstance(seeds, Mapping):
        put_fact(out, "process", "seed.python-state", _short(seeds.get("python")))
        put_fact(out, "process", "seed.numpy-state", _short(seeds.get("numpy")))
    blas: set[str] = set()
    omp: set[str] = set()
    for pool in t.get("threadpools") or ():
        if not isinstance(pool, Mapping) or not isinstance(pool.get("path"), str):
            continue
        path = pool["path"]
        api = str(pool.get("internal-api") or pool.get("user-api") or "?")
        where = os.path.basename(os.path.dirname(path)) or "?"
        n = pool.get("num-threads")
        put_fact(out, "process", f"threads.{api} ({where})",
                 n if isinstance(n, int) and not isinstance(n, bool) else None)
    for lib in t.get("libraries") or ():
        path = lib.get("path") if isinstance(lib, Mapping) else None
        if isinstance(path, str):
            base = os.path.basename(path)
            if _BLAS.match(base):
                blas.add(base)
            elif _OMP.match(base):
                omp.add(base)
    if t.get("libraries"):
        put_fact(out, "process", "blas libraries mapped", frozenset(blas) or frozenset({"none"}))
        put_fact(out, "process", "openmp libraries mapped", frozenset(omp) or frozenset({"none"}))
    gpus = [g for g in t.get("gpus") or () if isinstance(g, Mapping)]
    if gpus:
        put_fact(out, "process", "gpus", frozenset(
            f"{g.get('name', '?')} (cc {g.get('capability', '?')})" for g in gpus))
    extra = t.get("extra")
    if isinstance(extra, Mapping):
        for k, v in extra.items():
            put_fact(out, "process", f"extra.{k}", _scalar(v) if not isinstance(v, list)
                     else frozenset(map(str, v)))


def _short(digest: Any) -> str | None:
    return f"sha256:{digest[:12]}" if isinstance(digest, str) and digest else None


def _gib(n: Any) -> str | None:
    if isinstance(n, bool) or not isinstance(n, int):
        return None
    return f"{n / 2**30:.1f} GiB"


def run(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """``[run]`` → ``run:*`` facts (see the module docstring)."""
    cmd = t.get("command")
    if isinstance(cmd, list):
        put_fact(out, "run", "command", " ".join(redact_argv(map(str, cmd))))
    for key in ("outcome", "signal"):
        put_fact(out, "run", key, str_or_none(t.get(key)))
    put_fact(out, "run", "exit-status", _scalar(t.get("exit-status")))
    wall = t.get("wall")
    if isinstance(wall, (int, float)) and not isinstance(wall, bool):
        put_fact(out, "run", "wall", f"{round(wall / 60)} min" if wall >= 60 else "< 1 min")
    res = t.get("resources")
    if isinstance(res, Mapping):
        put_fact(out, "run", "peak-rss", _gib(res.get("peak-rss")))
        gpu = [g for g in res.get("gpu-memory") or () if isinstance(g, Mapping)]
        if res.get("gpu-status") == "ok":
            total = sum(int(g.get("memory") or 0) for g in gpu)
            put_fact(out, "run", "gpu memory", _gib(total))
    g = t.get("granted")
    if isinstance(g, Mapping):
        put_fact(out, "run", "granted memory", _gib(g.get("memory")))
        limit = g.get("time-limit")
        if isinstance(limit, (int, float)) and not isinstance(limit, bool):
            from envlock.runs.outcome import fmt_duration

            put_fact(out, "run", "time limit", fmt_duration(float(limit)))
        put_fact(out, "run", "gpus granted", _scalar(g.get("gpus")))
        if g.get("scheduler") == "slurm":
            put_fact(out, "run", "visible-devices", str_or_none(g.get("visible-devices")) or "unset")
    children = t.get("children")
    put_fact(out, "run", "leftover children",
             len(children) if isinstance(children, list) else 0)


#: table → (area, extractor), merged into :data:`envlock.diff.facts.EXTRACTORS`.
EXTRACTORS = {"process": ("process", process), "run": ("run", run)}
