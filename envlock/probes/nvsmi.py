"""The one ``nvidia-smi`` reader: where it is, what ``--query-gpu`` and ``--query-compute-apps``
print, parsed (``--format=csv,noheader,nounits``; memory in MiB, returned in bytes).

The ``[gpu]`` probe and verify's live facts both come through here.  Every call runs through an
:data:`envlock._run.Runner` with a timeout; nothing here raises on a bad answer.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from envlock._run import DEFAULT_TIMEOUT, Runner, run
from envlock.manifest.stacktables import Gpu

__all__ = ["SMI_FIELDS", "find_nvidia_smi", "na", "query_gpu_argv", "parse_query_gpu",
           "ComputeApp", "AppsFacts", "read_compute_apps"]

#: Fields asked of ``nvidia-smi --query-gpu``, in this order.
SMI_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "memory.total",
    "compute_cap",
    "mig.mode.current",
    "driver_version",
)

_MIB = 1024 * 1024
_VERSION_RE = re.compile(r"^\d+(?:\.\d+){1,2}$")
#: where drivers install nvidia-smi when it is not on PATH
_DRIVER_BIN_DIRS = ("/usr/bin", "/usr/local/nvidia/bin")


def find_nvidia_smi(path_dirs: Sequence[str], *, root: str = "/") -> str | None:
    """``nvidia-smi`` in ``path_dirs`` (the target's ``PATH``), else in the driver's usual
    directories on the real machine (``root == "/"``); ``None`` when there is none."""
    found = shutil.which("nvidia-smi", path=os.pathsep.join(d for d in path_dirs if d))
    if found is None and root in ("", "/"):
        found = shutil.which("nvidia-smi", path=os.pathsep.join(_DRIVER_BIN_DIRS))
    return found


def na(value: str) -> str | None:
    """``None`` for an empty, ``[N/A]``, ``[Not Supported]``-style value, else the stripped value."""
    value = value.strip()
    if not value or value.startswith("[") or value.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    return value


def query_gpu_argv(smi: str, fields: Sequence[str] = SMI_FIELDS) -> list[str]:
    """The ``nvidia-smi --query-gpu`` command line for ``fields``."""
    return [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def parse_query_gpu(
    text: str, fields: Sequence[str] = SMI_FIELDS
) -> tuple[list[Gpu], str | None]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` output.

    :param text: the command's standard output.
    :param fields: the queried fields, in order (must include ``index``).
    :returns: ``(gpus, driver_version)``; lines that do not have one value per field or
        whose index is not an integer are skipped.  ``memory.total`` (MiB) becomes bytes;
        ``[N/A]``/``[Not Supported]`` values become ``None``.
    """
    gpus: list[Gpu] = []
    driver: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        row = dict(zip(fields, values))
        try:
            index = int(row["index"])
        except (KeyError, ValueError):
            continue
        memory = None
        mem = na(row.get("memory.total", ""))
        if mem is not None:
            try:
                memory = int(float(mem.split()[0]) * _MIB)
            except ValueError:
                memory = None
        cc = na(row.get("compute_cap", ""))
        if cc is not None and not re.fullmatch(r"\d+\.\d+", cc):
            cc = None
        gpus.append(
            Gpu(
                index=index,
                name=na(row.get("name", "")),
                uuid=na(row.get("uuid", "")),
                memory=memory,
                compute_capability=cc,
                mig_mode=na(row.get("mig.mode.current", "")),
            )
        )
        dv = na(row.get("driver_version", ""))
        if dv and _VERSION_RE.match(dv):
            driver = driver or dv
    gpus.sort(key=lambda g: g.index)
    return gpus, driver


class ComputeApp(NamedTuple):
    """One process using a GPU (``nvidia-smi --query-compute-apps``); memory in bytes."""

    pid: int
    used_memory: int | None
    gpu_uuid: str


class AppsFacts(NamedTuple):
    """The compute processes on the GPUs; ``status`` ``"ok"``, ``"absent"`` (no nvidia-smi),
    ``"error"`` or ``"timeout"``."""

    status: str = "ok"
    error: str | None = None
    apps: tuple[ComputeApp, ...] = ()


def read_compute_apps(
    smi: str, *, environ: Mapping[str, str], runner: Runner = run, timeout: float = DEFAULT_TIMEOUT
) -> AppsFacts:
    """Processes holding GPU memory: ``nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid
    --format=csv,noheader,nounits`` (memory in MiB, returned in bytes).  Never raises."""
    res = runner([smi, "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"],
                 timeout=timeout, env={**environ, "LC_ALL": "C"})
    if not res.ok:
        return AppsFacts(status="timeout" if res.status == "timeout" else "error", error=res.detail)
    apps = []
    for line in res.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        mem = na(parts[1])
        apps.append(ComputeApp(
            pid=int(parts[0]),
            used_memory=int(mem) * 1024 * 1024 if mem and mem.isdigit() else None,
            gpu_uuid=parts[2],
        ))
    return AppsFacts(apps=tuple(apps))


