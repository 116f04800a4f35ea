"""conda's virtual packages as a build or a solve on this node sees them: ``__cuda`` against
what packages and locks need, and every ``CONDA_OVERRIDE_*`` that fakes one (conda docs,
"Managing virtual packages").  One of the build checks (:data:`envlock.verify.checks.build.
BUILD_CHECKS`).

Finding ids: ``build.cuda-override``, ``build.no-virtual-cuda``, ``build.glibc-override``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envlock.findings import Finding
from envlock.nvidia import max_cuda_for_driver, vtuple
from envlock.verify.checks.buildfacts import gpu_of
from envlock.verify.checks.gpucompat import _needs_cuda_from_conda

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["check_build_virtual"]


def _claims_more(claimed: str, real: str) -> bool:
    """Whether an override (``CONDA_OVERRIDE_CUDA``/``_GLIBC``) claims a newer version than the
    node really has; ``False`` where either is no version (nothing can be compared then)."""
    try:
        return vtuple(claimed) > vtuple(real)
    except ValueError:
        return False


def _glibc_override(ctx: Context, override: str) -> list[Finding]:
    """``build.glibc-override``: ``CONDA_OVERRIDE_GLIBC`` (``override``, as set) claims a newer
    glibc than this node's."""
    from envlock.libs.glibc import detect_glibc

    found = detect_glibc(ctx.live.root or "/")
    real = found.version if found else None
    if real is None or not _claims_more(override, real):
        return []
    return [Finding(
        id="build.glibc-override", severity="warning",
        title=f"CONDA_OVERRIDE_GLIBC={override.strip()} claims a newer glibc than this node's ({real})",
        cause="Packages solved for the override may need GLIBC_ symbols this node lacks: \"version "
              "`GLIBC_2.xx' not found\".",
        evidence=(f"CONDA_OVERRIDE_GLIBC={override.strip()}",
                  f"glibc {real} ({found.source if found else 'this node'})"),
        fix=("unset CONDA_OVERRIDE_GLIBC in the job script of jobs that run here",),
    )]


def check_build_virtual(ctx: Context) -> list[Finding]:
    """conda's ``__cuda`` as the solver sees it here against what packages and locks need, and
    every ``CONDA_OVERRIDE_*`` that fakes a virtual package (conda docs, "Managing virtual
    packages")."""
    env = ctx.environ
    override = env.get("CONDA_OVERRIDE_CUDA")
    glibc_override = env.get("CONDA_OVERRIDE_GLIBC")
    needs = _needs_cuda_from_conda(ctx)
    if override is None and not needs and not glibc_override:
        return []
    out: list[Finding] = []
    gpu = gpu_of(ctx)
    driver = gpu.driver_version
    supports = gpu.cuda_driver_version or (max_cuda_for_driver(driver) if driver else None)
    need_ev = tuple(f"{who} depends on __cuda {spec}".rstrip() for who, spec in needs)
    node = (f"driver {driver} (supports CUDA {supports or '?'})" if driver
            else f"no NVIDIA driver ({gpu.error or 'no /proc/driver/nvidia/version'})")
    if override is not None and override.strip():
        v = override.strip()
        if not driver:
            out.append(Finding(
                id="build.cuda-override", severity="warning" if needs else "info",
                title=f"CONDA_OVERRIDE_CUDA={v} makes conda's solver believe in CUDA {v}; "
                      "this node has no NVIDIA driver",
                cause="conda's __cuda virtual package is the CUDA the driver supports; the override replaces it, so "
                      "solves here pick CUDA builds that cannot run on this node.",
                evidence=(f"CONDA_OVERRIDE_CUDA={v} → __cuda={v}", node, *need_ev),
                fix=("`unset CONDA_OVERRIDE_CUDA` in jobs that run here (setting it is fine for "
                     "solving on a login node for GPU nodes)",),
            ))
        elif supports and _claims_more(v, supports):
            out.append(Finding(
                id="build.cuda-override", severity="warning",
                title=f"CONDA_OVERRIDE_CUDA={v} claims more CUDA than driver {driver} supports ({supports})",
                cause="The solver picks packages built for CUDA up to the override; those needing more than "
                      "the driver gives fail with cudaErrorInsufficientDriver.",
                evidence=(f"CONDA_OVERRIDE_CUDA={v} → __cuda={v}", node, *need_ev),
                fix=(f"`unset CONDA_OVERRIDE_CUDA`, or `export CONDA_OVERRIDE_CUDA={supports}` "
                     "(what the driver supports)",),
            ))
    elif override is not None and driver:
        out.append(Finding(
            id="build.cuda-override", severity="warning",
            title="CONDA_OVERRIDE_CUDA is empty: conda's solver sees no CUDA although driver "
                  f"{driver} supports CUDA {supports or '?'}",
            cause="An empty override removes __cuda: solves pick CPU-only builds and packages needing __cuda "
                  "are unsatisfiable.",
            evidence=("CONDA_OVERRIDE_CUDA=''", node, *need_ev),
            fix=("unset CONDA_OVERRIDE_CUDA",),
        ))
    elif not driver and needs:
        low = next((m.group(1) for _w, spec in needs if (m := re.search(r"(\d+(?:\.\d+)?)", spec or ""))), None)
        out.append(Finding(
            id="build.no-virtual-cuda", severity="warning",
            title="conda's solver sees no __cuda on this node, but " + "; ".join(need_ev[:2]),
            cause="Without a driver there is no __cuda virtual package: a solve or install of these packages "
                  "here (conda install/update, conda-lock install) fails with \"nothing provides __cuda\".",
            evidence=(node, "CONDA_OVERRIDE_CUDA: unset", *need_ev),
            fix=((f"To solve here for GPU nodes: CONDA_OVERRIDE_CUDA={low or '<version>'} conda … "
                 "(the override is then what makes the solver believe in CUDA)"),
                 "or solve on a GPU node"),
        ))
    if glibc_override and glibc_override.strip():
        out += _glibc_override(ctx, glibc_override)
    return out
