"""``[slurm]`` probe: the batch job this runs in, from environment variables only.

Slurm sets ``SLURM_*`` variables in every job step (Slurm ``sbatch``/``srun`` manual pages,
"OUTPUT ENVIRONMENT VARIABLES"); PBS/Torque sets ``PBS_*`` and LSF ``LSB_*``.  Nothing is run
(``scontrol`` would be slow and may not exist on compute nodes).  Only the allow-listed
variables below are read and recorded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from envlock.manifest._model import freeze_mapping
from envlock.manifest.stacktables import SlurmInfo
from envlock.probes.world import World

__all__ = ["probe_slurm", "slurm_gpu_ids", "slurm_gpu_count", "visible_devices_fix", "SLURM_VARS",
           "PBS_VARS", "LSF_VARS"]

#: Slurm variables recorded in ``vars`` (allow-list).
SLURM_VARS: tuple[str, ...] = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_NAME",
    "SLURM_JOB_PARTITION",
    "SLURM_CLUSTER_NAME",
    "SLURM_JOB_NODELIST",
    "SLURMD_NODENAME",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_MEM_PER_NODE",
    "SLURM_MEM_PER_CPU",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_SUBMIT_DIR",
    "SLURM_STEP_ID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_JOB_QOS",
    "SLURM_JOB_ACCOUNT",
)
#: PBS/Torque/PBS Pro variables recorded.
PBS_VARS: tuple[str, ...] = (
    "PBS_JOBID",
    "PBS_JOBNAME",
    "PBS_QUEUE",
    "PBS_O_WORKDIR",
    "PBS_NODEFILE",
    "PBS_NUM_NODES",
    "PBS_NP",
    "NCPUS",
)
#: LSF variables recorded.
LSF_VARS: tuple[str, ...] = (
    "LSB_JOBID",
    "LSB_JOBNAME",
    "LSB_QUEUE",
    "LSB_HOSTS",
    "LSB_MCPU_HOSTS",
    "LSB_DJOB_NUMPROC",
    "LS_SUBCWD",
)

_MIB = 1024 * 1024


def _int(value: str | None) -> int | None:
    """Parse a plain or Slurm-style count: ``"8"``; ``"2(x3)"`` (per-node lists) → first number."""
    if value is None:
        return None
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _mem_bytes(value: str | None) -> int | None:
    """``SLURM_MEM_PER_NODE``/``_PER_CPU`` are MiB (Slurm's "MB" are 1024² bytes) → bytes.

    A unit suffix (``"16G"``, as some sites export) is honoured.
    """
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", value, re.I)
    if not m:
        return None
    scale = {"": _MIB, "K": 1024, "M": _MIB, "G": 1024 * _MIB, "T": 1024 * 1024 * _MIB}
    return int(m.group(1)) * scale[m.group(2).upper()]


def probe_slurm(world: World) -> SlurmInfo:
    """Describe the batch job from the job's environment (``world.environ``: Slurm's
    ``SLURM_*``, PBS's ``PBS_*``, LSF's ``LSB_*`` variables).

    :param world: what is observed (only :attr:`~envlock.probes.world.World.environ` is read).
    :returns: a :class:`SlurmInfo`; ``status="absent"`` outside a Slurm/PBS/LSF job.  Never raises.
    """
    env = world.environ
    g = env.get
    if g("SLURM_JOB_ID") or g("SLURM_JOBID"):
        job = g("SLURM_JOB_ID") or g("SLURM_JOBID")
        if g("SLURM_ARRAY_JOB_ID") and g("SLURM_ARRAY_TASK_ID"):
            job = f"{g('SLURM_ARRAY_JOB_ID')}_{g('SLURM_ARRAY_TASK_ID')}"
        return SlurmInfo(
            source="environment",
            scheduler="slurm",
            job_id=job,
            job_name=g("SLURM_JOB_NAME"),
            partition=g("SLURM_JOB_PARTITION"),
            cluster=g("SLURM_CLUSTER_NAME"),
            nodelist=g("SLURM_JOB_NODELIST") or g("SLURM_NODELIST"),
            node=g("SLURMD_NODENAME"),
            num_nodes=_int(g("SLURM_JOB_NUM_NODES") or g("SLURM_NNODES")),
            ntasks=_int(g("SLURM_NTASKS")),
            cpus_on_node=_int(g("SLURM_CPUS_ON_NODE")),
            cpus_per_task=_int(g("SLURM_CPUS_PER_TASK")),
            mem_per_node=_mem_bytes(g("SLURM_MEM_PER_NODE")),
            mem_per_cpu=_mem_bytes(g("SLURM_MEM_PER_CPU")),
            gpus=g("SLURM_JOB_GPUS"),
            step_gpus=g("SLURM_STEP_GPUS"),
            gpus_on_node=_int(g("SLURM_GPUS_ON_NODE")),
            submit_dir=g("SLURM_SUBMIT_DIR"),
            vars=freeze_mapping({k: env[k] for k in SLURM_VARS if k in env}),
        )
    if g("PBS_JOBID"):
        return SlurmInfo(
            source="environment",
            scheduler="pbs",
            job_id=g("PBS_JOBID"),
            job_name=g("PBS_JOBNAME"),
            partition=g("PBS_QUEUE"),
            num_nodes=_int(g("PBS_NUM_NODES")),
            cpus_on_node=_int(g("NCPUS")),
            submit_dir=g("PBS_O_WORKDIR"),
            vars=freeze_mapping({k: env[k] for k in PBS_VARS if k in env}),
        )
    if g("LSB_JOBID"):
        hosts = (g("LSB_HOSTS") or "").split()
        return SlurmInfo(
            source="environment",
            scheduler="lsf",
            job_id=g("LSB_JOBID"),
            job_name=g("LSB_JOBNAME"),
            partition=g("LSB_QUEUE"),
            nodelist=" ".join(dict.fromkeys(hosts)) or None,
            ntasks=_int(g("LSB_DJOB_NUMPROC")),
            submit_dir=g("LS_SUBCWD"),
            vars=freeze_mapping({k: env[k] for k in LSF_VARS if k in env}),
        )
    return SlurmInfo(status="absent", source="environment", error="not in a Slurm, PBS or LSF job")


def slurm_gpu_ids(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs Slurm gave this step (``SLURM_STEP_GPUS``, else ``SLURM_JOB_GPUS``), as the
    comma-separated ids it writes (indices, sometimes UUIDs)."""
    for var in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = environ.get(var, "").strip()
        if value:
            return tuple(v.strip() for v in value.split(",") if v.strip())
    return ()


def slurm_gpu_count(environ: Mapping[str, str]) -> int | None:
    """``SLURM_GPUS_ON_NODE`` as an int, else the number of ids in :func:`slurm_gpu_ids`, else
    ``None`` (no GPU allocation known)."""
    raw = environ.get("SLURM_GPUS_ON_NODE", "").strip()
    if raw.isdigit():
        return int(raw)
    ids = slurm_gpu_ids(environ)
    return len(ids) if ids else None


#: the bash expression of the job's GPU ids: a step's (``srun``), else the job's (the batch step)
GPU_IDS_EXPR = "${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"


def visible_devices_fix(ids: tuple[str, ...], seen: int | None) -> str:
    """The fix line for a GPU allocation whose ``CUDA_VISIBLE_DEVICES`` is gone: the
    ``export`` that gives it back, or the choice between two when the numbering is not known.

    Slurm's ids (``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``) are the node's GPU indices; under
    cgroup device constraint (``ConstrainDevices=yes``) the job sees only its own GPUs,
    numbered from 0, and Slurm sets ``CUDA_VISIBLE_DEVICES`` to those (Slurm documentation,
    "Generic Resource (GRES) Scheduling", "GPU Management").  Ids ``0…n-1`` (or UUIDs) are
    right either way; ``${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}`` is a step's ids, else the batch
    step's.

    :param ids: the allocated GPU ids (:func:`slurm_gpu_ids`); empty when only a count is known.
    :param seen: the number of GPUs the job sees (``nvidia-smi``), ``None`` when not known.
    :returns: one fix line; its commands in backticks.
    """
    if not ids:
        return ("Export the job's GPU ids as CUDA_VISIBLE_DEVICES: the environment names none "
                "(no SLURM_STEP_GPUS or SLURM_JOB_GPUS); `scontrol show job -d $SLURM_JOB_ID` "
                "lists them (IDX)")
    own = f"`export CUDA_VISIBLE_DEVICES={GPU_IDS_EXPR}`"
    relative = ",".join(str(i) for i in range(len(ids)))
    if ",".join(ids) == relative or not all(i.isdigit() for i in ids) or (
            seen is not None and seen > len(ids)):
        return f"{own} in the job script"
    renumbered = f"`export CUDA_VISIBLE_DEVICES={relative}`"
    if seen == len(ids):
        return (f"{renumbered} in the job script (the job sees only its {seen} GPU(s), numbered "
                f"from 0; Slurm's ids {','.join(ids)} are the node's)")
    return (f"Choose by what the job sees (`nvidia-smi -L`): all the node's GPUs — {own}; only "
            f"its own {len(ids)}, numbered from 0 (cgroup ConstrainDevices) — {renumbered}")
