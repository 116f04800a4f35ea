"""Allocation checks: ``CUDA_VISIBLE_DEVICES`` against Slurm's GPU allocation, and GPUs already
busy with other processes.

Slurm (``--gpus``/``--gres=gpu``) sets ``SLURM_JOB_GPUS``/``SLURM_STEP_GPUS`` (the allocated
GPU ids), ``SLURM_GPUS_ON_NODE`` (their number on this node) and ``CUDA_VISIBLE_DEVICES``
(Slurm ``gres.conf``/``sbatch`` manual pages).  With cgroup device constraint the job sees only
its GPUs, renumbered from 0, so indices are not compared across the two; counts are.

Finding ids: ``allocation.visible-devices-unset``, ``allocation.no-visible-devices``,
``allocation.gpu-count-mismatch``, ``allocation.invalid-visible-devices``,
``allocation.gpu-busy``, ``allocation.query-failed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
from typing import Any

from envlock.findings import Finding
from envlock.probes.slurm import slurm_gpu_ids, visible_devices_fix
from envlock.verify.checks.gpucompat import visible_gpus

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["check_visible_devices", "check_gpu_processes"]


def _slurm_evidence(environ: Any) -> tuple[str, ...]:
    return tuple(f"{k}={environ[k]}" for k in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE")
                 if k in environ)


def check_visible_devices(ctx: Context) -> list[Finding]:
    """``CUDA_VISIBLE_DEVICES`` consistent with the Slurm GPU allocation and the GPUs present."""
    env = ctx.environ
    allocated = ctx.gpus_allocated()
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    out: list[Finding] = []
    if allocated:
        ev = _slurm_evidence(env)
        if cvd is None:
            out.append(Finding(
                id="allocation.visible-devices-unset",
                severity="warning",
                title=f"Slurm allocated {allocated} GPU(s) ({','.join(slurm_gpu_ids(env)) or '?'}) but "
                      "CUDA_VISIBLE_DEVICES is unset",
                cause="Every CUDA process then sees all GPUs of the node and starts on GPU 0, which may "
                      "belong to another job; the GPUs allocated to this job sit idle.",
                evidence=(*ev, "CUDA_VISIBLE_DEVICES: unset"),
                fix=(visible_devices_fix(slurm_gpu_ids(env), len(ctx.live.gpu.gpus) or None),
                     "Find what removed it between Slurm and the job (an `unset "
                     "CUDA_VISIBLE_DEVICES` in the script or a module it loads, a launcher that "
                     "passes on only some variables)."),
            ))
            return out
        items = [s.strip() for s in cvd.split(",") if s.strip()]
        if not items or cvd.strip() in ("NoDevFiles", "-1"):
            out.append(Finding(
                id="allocation.no-visible-devices",
                severity="error",
                title=f"Slurm allocated {allocated} GPU(s) but CUDA_VISIBLE_DEVICES={cvd!r} hides them all",
                cause="CUDA sees no device: torch.cuda.is_available() is False and the job runs on the CPU.",
                evidence=(*ev, f"CUDA_VISIBLE_DEVICES={cvd}"),
                fix=("Remove the line that sets CUDA_VISIBLE_DEVICES in the job script or module.",),
            ))
            return out
        if len(items) != allocated:
            out.append(Finding(
                id="allocation.gpu-count-mismatch",
                severity="warning",
                title=f"CUDA_VISIBLE_DEVICES names {len(items)} GPU(s); Slurm allocated {allocated}",
                cause=("Fewer visible than allocated: some allocated GPUs stay idle."
                       if len(items) < allocated else
                       "More visible than allocated: processes may use GPUs of other jobs."),
                evidence=(*ev, f"CUDA_VISIBLE_DEVICES={cvd}"),
                fix=("Let Slurm set CUDA_VISIBLE_DEVICES (do not override it), or match --gpus to what the "
                     "program uses.",),
            ))
    if cvd and cvd.strip() not in ("NoDevFiles", "-1"):
        gpu = ctx.live.gpu
        if gpu.gpus:
            bad = []
            for item in (s.strip() for s in cvd.split(",") if s.strip()):
                if item.isdigit():
                    ok = any(g.index == int(item) for g in gpu.gpus)
                else:
                    ok = any(g.uuid and g.uuid.startswith(item) for g in gpu.gpus)
                if not ok:
                    bad.append(item)
            if bad:
                out.append(Finding(
                    id="allocation.invalid-visible-devices",
                    severity="error",
                    title=f"CUDA_VISIBLE_DEVICES={cvd} names GPU(s) this node does not have: {', '.join(bad)}",
                    cause="The CUDA runtime stops reading the list at the first invalid entry: that GPU and "
                          "every one after it are invisible.",
                    evidence=(f"GPUs present: {', '.join(str(g.index) for g in gpu.gpus)} ({gpu.source})",
                              f"CUDA_VISIBLE_DEVICES={cvd}"),
                    fix=("Let Slurm set CUDA_VISIBLE_DEVICES, or use indices/UUIDs from `nvidia-smi -L`.",),
                ))
    return out


def check_gpu_processes(ctx: Context) -> list[Finding]:
    """Processes other than this one already holding memory on the job's GPUs (leftovers of an
    earlier job, or a neighbour on a shared GPU)."""
    gpu = ctx.live.gpu
    if not gpu.gpus:
        return []
    apps = ctx.live.compute_apps
    if apps.status == "absent":
        return []
    if apps.status != "ok":
        return [Finding(
            id="allocation.query-failed", severity="warning",
            title=f"could not list the processes on the GPUs: {apps.error}",
            cause="nvidia-smi --query-compute-apps failed or timed out.",
            evidence=(apps.error or apps.status,),
            fix=("Check the node with nvidia-smi.",),
        )]
    mine = {g.uuid: g for g in visible_gpus(gpu.gpus, ctx.environ) if g.uuid}
    me = os.getpid()
    out = []
    for uuid, g in mine.items():
        procs = [a for a in apps.apps if a.gpu_uuid == uuid and a.pid != me]
        if not procs:
            continue
        used = sum(a.used_memory or 0 for a in procs)
        out.append(Finding(
            id="allocation.gpu-busy",
            severity="warning",
            title=f"GPU {g.index} ({uuid}) is already used by {len(procs)} process(es) holding "
                  f"{used // (1024 * 1024)} MiB",
            cause="Memory held by another process (a leftover of an earlier job, or a job sharing the "
                  "GPU) is not available to this job: out-of-memory errors, slower kernels.",
            evidence=tuple(f"pid {a.pid}: {(a.used_memory or 0) // (1024 * 1024)} MiB on {a.gpu_uuid}" for a in procs),
            fix=("Kill your leftover processes (e.g. `pkill -u $USER -f python` on this node after "
                 "checking them), or report the node to the admins.",),
        ))
    return out
