"""The placeholders of an output path (``snapshot -o``, ``run --dir``, ``envlock.record``), filled
in one place so that ``{job}`` or ``{node}`` means the same in every command.

``{host}`` is the short host name; ``{node}`` Slurm's node name (``SLURMD_NODENAME``, set by
slurmd in every step; several nodes may share one host), else the short host name; ``{job}`` the
batch job id (``SLURM_JOB_ID``, then ``PBS_JOBID``, ``LSB_JOBID``; ``nojob`` outside a job; a Slurm
array task is ``<array job>_<task>``); ``{time}`` the UTC time as ``YYYYmmddTHHMMSSZ``.  A run
also has ``{rank}`` (the caller's rank, ``0`` when unset) and ``{pid}``.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
from collections.abc import Mapping

from envlock.errors import EnvlockError

__all__ = ["PATH_PLACEHOLDERS", "expand_path"]

#: the placeholders every output path may hold
PATH_PLACEHOLDERS = ("host", "node", "job", "time")


def expand_path(template: str, environ: Mapping[str, str] | None = None,
                extra: Mapping[str, object] | None = None) -> str:
    """Fill :data:`PATH_PLACEHOLDERS` (and ``extra``'s, e.g. ``{"rank": 0, "pid": 42}``) in
    ``template``.

    :param environ: the environment to read the job and node from (``os.environ`` when ``None``).
    :raises EnvlockError: an unknown placeholder (the message names the known ones).
    """
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("PBS_JOBID") or env.get("LSB_JOBID") or "nojob"
    if env.get("SLURM_ARRAY_TASK_ID"):
        job = f"{env.get('SLURM_ARRAY_JOB_ID', job)}_{env['SLURM_ARRAY_TASK_ID']}"
    host = socket.gethostname().split(".")[0]
    values: dict[str, object] = {
        "host": host, "node": env.get("SLURMD_NODENAME") or host, "job": job,
        "time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"), **(extra or {}),
    }
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        known = ", ".join("{" + k + "}" for k in values)
        raise EnvlockError(f"unknown placeholder {exc} in {template!r} (use {known})") from None
