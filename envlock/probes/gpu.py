"""``[gpu]`` probe: the NVIDIA driver and GPUs (and AMD ROCm), without CUDA or any framework.

Sources, in order:

1. the driver version from ``<root>/proc/driver/nvidia/version`` (the loaded kernel module;
   inside a container it is the host's), else ``<root>/sys/module/nvidia/version``;
2. the devices from NVML through the optional ``nvidia-ml-py`` binding (``pynvml``), when the
   kernel module is loaded (step 1 found it), the binding imports and ``libnvidia-ml.so.1``
   loads (only for the real machine, ``root == /``);
3. else ``nvidia-smi``'s ``--query-gpu`` answer (:mod:`envlock.probes.nvsmi`), found on the target's PATH
   (drivers before the ``compute_cap`` field existed are asked again without it).

The newest CUDA version the driver supports comes from NVML when used, else from NVIDIA's
table of toolkit driver versions (CUDA Toolkit release notes, Table 3), see
:func:`cuda_for_driver`.
"""

from __future__ import annotations

import re
from pathlib import Path

from envlock.nvidia import max_cuda_for_driver
from envlock.probes._stackutil import read_text, under_root
from envlock.manifest import Status
from envlock.manifest.stacktables import Gpu, GpuInfo
from envlock.probes.nvsmi import SMI_FIELDS, find_nvidia_smi, parse_query_gpu, query_gpu_argv
from envlock.probes.world import World

__all__ = ["probe_gpu", "cuda_for_driver", "SMI_FIELDS"]

_MIB = 1024 * 1024

_PROC_RE = re.compile(
    r"NVRM version:.*?(?P<open>Open )?Kernel Module(?:\s+for\s+\S+)?\s+(?P<ver>\d+(?:\.\d+){1,2})\b"
)
_VERSION_RE = re.compile(r"^\d+(?:\.\d+){1,2}$")


def _vtuple(version: str) -> tuple[int, ...] | None:
    if not _VERSION_RE.match(version.strip()):
        return None
    return tuple(int(p) for p in version.strip().split("."))


def cuda_for_driver(driver_version: str) -> str | None:
    """The newest CUDA ``"major.minor"`` a Linux driver supports: :func:`envlock.nvidia.max_cuda_for_driver`
    (NVIDIA's toolkit driver table, the one table envlock has), for a well-formed driver version.

    :param driver_version: e.g. ``"550.54.14"``.
    :returns: e.g. ``"12.4"``; ``None`` for a driver older than CUDA 7.0's or an unparsable version.
    """
    if not _VERSION_RE.match(driver_version.strip()):
        return None
    return max_cuda_for_driver(driver_version.strip())


def _parse_proc_driver_version(text: str) -> tuple[str, str] | None:
    """Parse ``/proc/driver/nvidia/version``.

    Both formats of the ``NVRM version:`` line are understood: the proprietary
    ``NVIDIA UNIX x86_64 Kernel Module  550.54.14  <date>`` and the open kernel module's
    ``NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build …``.

    :returns: ``(version, kind)`` with kind ``"proprietary"`` or ``"open"``, or ``None``.
    """
    m = _PROC_RE.search(text)
    if not m:
        return None
    return m.group("ver"), "open" if m.group("open") else "proprietary"


def _parse_rocm_version(text: str) -> str | None:
    """Parse ``/opt/rocm/.info/version`` (e.g. ``"6.0.2-115"``); ``None`` if it is not a version."""
    first = (text.strip().splitlines() or [""])[0].strip()
    return first if re.fullmatch(r"\d+\.\d+(?:\.\d+)?(?:-\w+)?", first) else None


def _query_nvml() -> tuple[str, str | None, list[Gpu]] | None:
    """Ask NVML (``pynvml`` from nvidia-ml-py) for driver, CUDA version and devices.

    :returns: ``None`` when the binding is not installed or NVML does not initialise.
    """
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, …
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        cuda_int = pynvml.nvmlSystemGetCudaDriverVersion()
        cuda = f"{cuda_int // 1000}.{cuda_int % 1000 // 10}" if cuda_int else None
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            try:
                current, _pending = pynvml.nvmlDeviceGetMigMode(h)
                mig = "Enabled" if current else "Disabled"
            except Exception:  # noqa: BLE001 - NVMLError_NotSupported on non-MIG GPUs
                mig = None
            gpus.append(
                Gpu(
                    index=i,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    memory=int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                    compute_capability=f"{major}.{minor}",
                    mig_mode=mig,
                )
            )
        return driver, cuda, gpus
    except Exception:  # noqa: BLE001 - any NVML failure: fall back to nvidia-smi
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110
            pass


def _kernel_driver(root: Path, sources: list[str]) -> tuple[str | None, str | None]:
    """``(driver version, kind)`` from the loaded kernel module (``/proc/driver/nvidia/version``,
    else ``/sys/module/nvidia/version``); the file read is appended to ``sources``."""
    for rel in ("/proc/driver/nvidia/version", "/sys/module/nvidia/version"):
        text = read_text(under_root(root, rel), 8192)
        if text is None:
            continue
        parsed = _parse_proc_driver_version(text)
        if parsed is None and rel.startswith("/sys") and _vtuple(text.strip()):
            parsed = (text.strip(), None)  # type: ignore[assignment]
        if parsed:
            sources.append(rel)
            return parsed
    return None, None


def _rocm_version(root: Path, sources: list[str]) -> str | None:
    """ROCm's version from ``/opt/rocm/.info/version`` (appended to ``sources`` when read)."""
    rocm = None
    rocm_text = read_text(under_root(root, "/opt/rocm/.info/version"), 4096)
    if rocm_text is not None:
        rocm = _parse_rocm_version(rocm_text)
        if rocm:
            sources.append("/opt/rocm/.info/version")
    return rocm


def _smi_gpus(world: World, env: dict[str, str], driver: str | None, sources: list[str]
              ) -> tuple[list[Gpu], str | None, Status, str | None]:
    """``(GPUs, driver, status, error)`` from ``nvidia-smi --query-gpu`` (retried without
    ``compute_cap`` for drivers before ~510); ``driver`` is the kernel module's, or ``None``."""
    gpus: list[Gpu] = []
    status: Status = "ok"
    error: str | None = None
    smi = find_nvidia_smi(world.path_dirs, root=str(world.root))
    if smi is not None:
        child_env = {**env, "LC_ALL": "C"}
        fields = SMI_FIELDS
        res = world.runner(query_gpu_argv(smi, fields), timeout=world.timeout, env=child_env)
        if res.status == "failed" and "compute_cap" in (res.stdout + res.stderr):
            # Drivers before ~510 do not know the compute_cap field.
            fields = tuple(f for f in SMI_FIELDS if f != "compute_cap")
            res = world.runner(query_gpu_argv(smi, fields), timeout=world.timeout, env=child_env)
        if res.ok:
            gpus, smi_driver = parse_query_gpu(res.stdout, fields)
            driver = driver or smi_driver
            sources.append(smi)
            if not gpus:
                status, error = "error", f"{smi}: no GPU in its output"
        elif driver is None:
            detail = res.detail or res.status
            if res.status == "timeout":
                status, error = "timeout", detail
            else:
                status, error = "absent", f"no NVIDIA driver: {detail}"
        else:
            status = "timeout" if res.status == "timeout" else "error"
            error = f"GPUs not listed: {res.detail}"
    elif driver is not None:
        status, error = "error", "NVIDIA driver loaded but nvidia-smi not found on PATH"
    return gpus, driver, status, error


def probe_gpu(world: World, *, use_nvml: bool = True) -> GpuInfo:
    """Observe the GPU driver and devices.

    :param world: what is observed: ``root`` (``/proc/driver/nvidia``, ``/opt/rocm``),
        ``environ`` (``CUDA_VISIBLE_DEVICES`` is read from it; ``nvidia-smi`` runs with it),
        ``path_dirs`` (searched for ``nvidia-smi``), ``runner`` and ``timeout`` (seconds for
        each ``nvidia-smi`` call).
    :param use_nvml: try NVML first (ignored unless ``world.root`` is ``/``).
    :returns: a :class:`GpuInfo`; ``status="absent"`` with ``error`` starting
        ``"no NVIDIA driver"`` when neither the kernel module nor ``nvidia-smi`` answers.
        Never raises for a missing or failing tool.
    """
    root, env = world.root, dict(world.environ)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    rocm_visible = env.get("ROCR_VISIBLE_DEVICES") or env.get("HIP_VISIBLE_DEVICES")
    sources: list[str] = []

    driver, kind = _kernel_driver(root, sources)
    rocm = _rocm_version(root, sources)
    cuda_ver = cuda_src = None
    gpus: list[Gpu] = []
    status: Status = "ok"
    error: str | None = None

    # NVML talks to the loaded kernel module: without /proc/driver/nvidia (or /sys/module/nvidia)
    # it cannot answer, so its binding is not even imported.
    nvml = _query_nvml() if use_nvml and root == Path("/") and driver is not None else None
    if nvml is not None:
        nvml_driver, cuda_ver, gpus = nvml
        driver = driver or nvml_driver
        cuda_src = "nvml" if cuda_ver else None
        sources.append("nvml")
    else:
        gpus, driver, status, error = _smi_gpus(world, env, driver, sources)

    if driver is None and status == "ok" and not gpus:
        if rocm:
            return GpuInfo(
                status="ok",
                source=", ".join(sources),
                vendor="amd",
                rocm_version=rocm,
                rocm_visible_devices=rocm_visible,
                visible_devices=visible,
            )
        status = "absent"
        error = "no NVIDIA driver (no /proc/driver/nvidia/version, no nvidia-smi on PATH)"

    if driver and not cuda_ver:
        cuda_ver = cuda_for_driver(driver)
        cuda_src = "driver table" if cuda_ver else None
    return GpuInfo(
        status=status,
        source=", ".join(sources),
        error=error,
        vendor="nvidia" if driver or gpus else ("amd" if rocm else None),
        driver_version=driver,
        driver_kind=kind,
        cuda_driver_version=cuda_ver,
        cuda_driver_source=cuda_src,
        gpus=tuple(gpus),
        visible_devices=visible,
        rocm_version=rocm,
        rocm_visible_devices=rocm_visible,
    )


#: the query-gpu parser, under the name the tests knew
_parse_nvidia_smi_csv = parse_query_gpu
