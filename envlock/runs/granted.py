"""What the scheduler granted the job: memory, time limit, GPUs.

Sources, as Slurm documents them (``sbatch(1)`` "OUTPUT ENVIRONMENT VARIABLES", ``scontrol(1)``):

* memory: ``SLURM_MEM_PER_NODE`` (``--mem``, MiB), else ``SLURM_MEM_PER_CPU`` (``--mem-per-cpu``,
  MiB) × ``SLURM_CPUS_ON_NODE``;
* time limit: ``TimeLimit`` of ``scontrol show job -o $SLURM_JOB_ID`` (``[days-]hours:minutes:
  seconds``, ``minutes:seconds`` or ``UNLIMITED``) with its ``StartTime`` (local time), else
  ``SLURM_JOB_END_TIME - SLURM_JOB_START_TIME`` (epoch seconds, Slurm ≥ 23.02);
* GPUs: ``SLURM_GPUS_ON_NODE``, else the ids of ``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``; and the
  job's ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
import time
from collections.abc import Mapping

from envlock._run import Runner, run
from envlock.manifest.processtables import Granted
from envlock.probes.slurm import _mem_bytes, slurm_gpu_count, slurm_gpu_ids

__all__ = ["granted", "parse_time_limit", "parse_scontrol"]


def parse_time_limit(text: str) -> float | None:
    """Seconds of a Slurm time (``1-12:00:00``, ``12:00:00``, ``30:00``, ``45``: minutes);
    ``None`` for ``UNLIMITED``, ``NONE`` or anything else (``sbatch(1)`` ``--time``)."""
    text = text.strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        return None
    days, a, b, c = m.groups()
    d = int(days or 0)
    if days is not None:  # days-hours[:minutes[:seconds]]
        h, mi, s = int(a), int(b or 0), int(c or 0)
    elif c is not None:  # hours:minutes:seconds
        h, mi, s = int(a), int(b), int(c)
    elif b is not None:  # minutes:seconds
        h, mi, s = 0, int(a), int(b)
    else:  # minutes
        h, mi, s = 0, int(a), 0
    return float(((d * 24 + h) * 60 + mi) * 60 + s)


def parse_scontrol(text: str) -> dict[str, str]:
    """``Key=Value`` pairs of ``scontrol show job -o`` output (one line, space separated)."""
    out: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key and key not in out:
            out[key] = value
    return out


def _utc(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).replace(microsecond=0) \
        .isoformat().replace("+00:00", "Z")


def granted(environ: Mapping[str, str], *, runner: Runner = run, timeout: float = 5.0) -> Granted:
    """The grant of the job this runs in (``scheduler="none"`` outside Slurm). Never raises;
    ``scontrol`` runs only inside a Slurm job and when it is on ``PATH``, with ``timeout``."""
    g = environ.get
    job = g("SLURM_JOB_ID") or g("SLURM_JOBID")
    if not job:
        return Granted(visible_devices=g("CUDA_VISIBLE_DEVICES"))
    memory = _mem_bytes(g("SLURM_MEM_PER_NODE"))
    memory_source: str | None = "SLURM_MEM_PER_NODE"
    if memory is None:
        per_cpu = _mem_bytes(g("SLURM_MEM_PER_CPU"))
        cpus = g("SLURM_CPUS_ON_NODE", "").strip()
        m = re.match(r"\d+", cpus)
        if per_cpu is not None and m:
            memory = per_cpu * int(m.group(0))
            memory_source = f"SLURM_MEM_PER_CPU × SLURM_CPUS_ON_NODE ({m.group(0)})"
        else:
            memory_source = None
    limit = start = None
    source = None
    scontrol = shutil.which("scontrol", path=g("PATH", ""))
    if scontrol:
        res = runner([scontrol, "show", "job", "-o", job], timeout=timeout, env=dict(environ))
        if res.ok:
            fields = parse_scontrol(res.stdout)
            limit = parse_time_limit(fields.get("TimeLimit", ""))
            if limit is not None:
                source = "scontrol show job"
                st = fields.get("StartTime", "")
                try:
                    start = time.mktime(time.strptime(st, "%Y-%m-%dT%H:%M:%S"))
                except ValueError:
                    start = None
    if limit is None:
        s, e = g("SLURM_JOB_START_TIME", ""), g("SLURM_JOB_END_TIME", "")
        if s.isdigit() and e.isdigit() and int(e) > int(s):
            limit, start = float(int(e) - int(s)), float(s)
            source = "SLURM_JOB_END_TIME - SLURM_JOB_START_TIME"
    if start is None and g("SLURM_JOB_START_TIME", "").isdigit():
        start = float(g("SLURM_JOB_START_TIME", "0"))
    return Granted(
        scheduler="slurm", job_id=job, memory=memory, memory_source=memory_source,
        time_limit=limit, time_limit_source=source,
        job_start=_utc(start) if start is not None else None,
        gpus=slurm_gpu_count(environ), gpu_ids=slurm_gpu_ids(environ),
        visible_devices=g("CUDA_VISIBLE_DEVICES"),
    )
