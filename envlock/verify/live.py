"""The live facts verify checks, gathered cheaply and lazily, each at most once.

:class:`Live` is shared by all checks (which run in threads): each fact is computed the first
time a check asks for it, under a per-fact lock, so the interpreter query or ``nvidia-smi``
runs once however many checks need it, and a check that needs nothing slow never waits.

The GPU and framework facts come from the stack probes (:func:`envlock.probes.gpu.probe_gpu`,
:func:`envlock.probes.frameworks.probe_frameworks`) when they are installed; otherwise from
the small readers here (:func:`read_gpu`, :func:`read_torch_build`), which produce records
with the same attribute names (``driver_version``, ``gpus[i].compute_capability``,
``build``, ``cuda``, ``cuda_archs`` …), so the checks work with either.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from envlock._run import DEFAULT_TIMEOUT, Runner, run

__all__ = [
    "Live",
    "GpuDevice",
    "GpuFacts",
    "BuildFacts",
    "ComputeApp",
    "AppsFacts",
    "read_gpu",
    "read_torch_build",
    "read_compute_apps",
    "parse_proc_driver_version",
    "local_label",
    "SMI_FIELDS",
]

#: Fields asked of ``nvidia-smi --query-gpu`` (the same as the stack probe's).
SMI_FIELDS: tuple[str, ...] = (
    "index", "name", "uuid", "memory.total", "compute_cap", "mig.mode.current", "driver_version",
)

# /proc/driver/nvidia/version, both the proprietary and the open kernel module's line
# (reference §4.4).
_PROC_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+){1,2})\b")


class GpuDevice(NamedTuple):
    """A GPU as the driver lists it (attribute names of ``stack_model.Gpu``)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    memory: int | None = None
    compute_capability: str | None = None


class GpuFacts(NamedTuple):
    """The driver and GPUs (attribute names of ``stack_model.GpuInfo``).

    :ivar status: ``"ok"``, ``"absent"`` (no NVIDIA driver), ``"error"`` or ``"timeout"``.
    :ivar nvidia_smi: the ``nvidia-smi`` used, if any.
    """

    status: str = "ok"
    source: str = ""
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    gpus: tuple[GpuDevice, ...] = ()
    nvidia_smi: str | None = None


class BuildFacts(NamedTuple):
    """How a framework was built (attribute names of ``stack_model.FrameworkBuild``)."""

    name: str
    version: str | None = None
    location: str | None = None
    build: str | None = None
    cuda: str | None = None
    evidence: str | None = None
    conda_build: str | None = None
    cuda_archs: tuple[str, ...] = ()
    cuda_archs_source: str | None = None
    error: str | None = None


class ComputeApp(NamedTuple):
    """One process using a GPU (``nvidia-smi --query-compute-apps``); memory in bytes."""

    pid: int
    used_memory: int | None
    gpu_uuid: str


class AppsFacts(NamedTuple):
    """The compute processes on the GPUs; ``status`` as for :class:`GpuFacts`."""

    status: str = "ok"
    error: str | None = None
    apps: tuple[ComputeApp, ...] = ()


def parse_proc_driver_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version`` text (both module flavours).

    >>> parse_proc_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build")
    '580.95.05'
    """
    m = _PROC_RE.search(text)
    return m.group(1) if m else None


def local_label(version: str | None) -> str | None:
    """The PEP 440 local label: ``"2.13.0+cpu"`` → ``"cpu"``; ``None`` without one."""
    if not version or "+" not in version:
        return None
    return version.split("+", 1)[1]


def _read(path: str, limit: int = 65536) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _under(root: str, path: str) -> str:
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def find_nvidia_smi(environ: Mapping[str, str], root: str = "/") -> str | None:
    """``nvidia-smi`` on the job's ``PATH``, else in ``/usr/bin`` (real root only)."""
    found = shutil.which("nvidia-smi", path=environ.get("PATH", ""))
    if found is None and root in ("", "/"):
        found = shutil.which("nvidia-smi", path="/usr/bin:/usr/local/nvidia/bin")
    return found


def _na(value: str) -> str | None:
    value = value.strip()
    if not value or value.startswith("[") or value.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    return value


def read_gpu(
    *, root: str = "/", environ: Mapping[str, str], runner: Runner = run, timeout: float = DEFAULT_TIMEOUT
) -> GpuFacts:
    """Read the NVIDIA driver version and GPUs (the fallback when the stack probe is absent).

    Sources: ``<root>/proc/driver/nvidia/version`` (else ``/sys/module/nvidia/version``), then
    ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` (one run, with
    ``timeout``).  Never raises.
    """
    from envlock.verify.cudacompat import max_cuda_for_driver  # noqa: PLC0415

    driver = None
    sources = []
    text = _read(_under(root, "/proc/driver/nvidia/version"), 8192)
    if text:
        driver = parse_proc_driver_version(text)
        if driver:
            sources.append("/proc/driver/nvidia/version")
    if driver is None:
        text = _read(_under(root, "/sys/module/nvidia/version"), 256)
        if text and re.fullmatch(r"\d+(\.\d+){1,2}", text.strip()):
            driver = text.strip()
            sources.append("/sys/module/nvidia/version")
    smi = find_nvidia_smi(environ, root)
    gpus: list[GpuDevice] = []
    status, error = "ok", None
    if smi is not None:
        env = {**environ, "LC_ALL": "C"}
        res = runner([smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                     timeout=timeout, env=env)
        if res.ok:
            sources.append(smi)
            for line in res.stdout.splitlines():
                values = [v.strip() for v in line.split(",")]
                if len(values) != len(SMI_FIELDS):
                    continue
                row = dict(zip(SMI_FIELDS, values))
                try:
                    index = int(row["index"])
                except ValueError:
                    continue
                mem = _na(row["memory.total"])
                cc = _na(row["compute_cap"])
                gpus.append(GpuDevice(
                    index=index,
                    name=_na(row["name"]),
                    uuid=_na(row["uuid"]),
                    memory=int(float(mem)) * 1024 * 1024 if mem and mem.replace(".", "").isdigit() else None,
                    compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
                ))
                driver = driver or _na(row["driver_version"])
        else:
            status = "timeout" if res.status == "timeout" else ("error" if driver else "absent")
            error = res.detail
    if driver is None and not gpus and status == "ok":
        status, error = "absent", "no NVIDIA driver (no /proc/driver/nvidia/version, no nvidia-smi on PATH)"
    elif driver is not None and smi is None:
        status, error = "error", "NVIDIA driver loaded but nvidia-smi not found on PATH"
    return GpuFacts(
        status=status,
        source=", ".join(sources),
        error=error,
        driver_version=driver,
        cuda_driver_version=max_cuda_for_driver(driver) if driver else None,
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
        nvidia_smi=smi,
    )


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
        if len(parts) != 3 or not parts[0].isdigit():  # noqa: PLR2004
            continue
        mem = _na(parts[1])
        apps.append(ComputeApp(
            pid=int(parts[0]),
            used_memory=int(mem) * 1024 * 1024 if mem and mem.isdigit() else None,
            gpu_uuid=parts[2],
        ))
    return AppsFacts(apps=tuple(apps))


def _version_py(text: str) -> dict[str, object]:
    """Constant assignments of a generated ``torch/version.py`` (read with :mod:`ast`, never run)."""
    import ast  # noqa: PLC0415

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            out[target.id] = value.value
    return out


def read_torch_build(pip_packages: Sequence[Any], conda_packages: Sequence[Any]) -> BuildFacts | None:
    """How torch was built, from ``torch/version.py``, the local version and the conda build
    string (the fallback when the stack probe is absent; GPU architectures are not read).

    :param pip_packages: the target's ``PipPackage`` records.
    :param conda_packages: its ``CondaPackage`` records (``pytorch``'s build string, C05).
    :returns: ``None`` when torch is not installed.
    """
    dist = next((p for p in pip_packages if p.name == "torch"), None)
    conda = next((c for c in conda_packages if c.name == "pytorch"), None)
    if dist is None and conda is None:
        return None
    version = dist.version if dist else conda.version
    evidence: list[str] = []
    info: dict[str, object] = {}
    location = None
    if dist is not None:
        location = os.path.join(dist.location, "torch")
        text = _read(os.path.join(location, "version.py"))
        if text is not None:
            info = _version_py(text)
    label = local_label(version)
    conda_build = conda.build if conda else None
    build = None
    cuda = info.get("cuda") if isinstance(info.get("cuda"), str) else None
    if info:
        if isinstance(info.get("hip"), str) and info.get("hip"):
            build = "rocm"
            evidence.append(f"torch/version.py hip={info['hip']!r}")
        elif cuda:
            build = "cuda"
            evidence.append(f"torch/version.py cuda={cuda!r}")
        else:
            build = "cpu"
            evidence.append("torch/version.py cuda=None hip=None")
    if label:
        evidence.append(f"local version +{label}")
        if build is None:
            build = "cpu" if label.startswith("cpu") else ("cuda" if label.startswith("cu") else None)
            m = re.fullmatch(r"cu(\d+)(\d)", label)
            if m and cuda is None:
                cuda = f"{m.group(1)}.{m.group(2)}"
    if conda_build:
        evidence.append(f"conda build {conda_build}")
        if build is None:
            build = "cpu" if "cpu" in conda_build else ("cuda" if "cuda" in conda_build else None)
            m = re.search(r"cuda(\d+)\.(\d+)", conda_build)
            if m and cuda is None:
                cuda = f"{m.group(1)}.{m.group(2)}"
    return BuildFacts(
        name="torch",
        version=str(info.get("__version__") or version),
        location=location,
        build=build,
        cuda=cuda,
        evidence="; ".join(evidence) or None,
        conda_build=conda_build,
        error=None if build else "torch/version.py unreadable and nothing else tells the build",
    )


class Live:
    """The live facts of one verify run, each computed at most once (thread-safe).

    :param target: the resolved target (:class:`envlock.target.ResolvedTarget`).
    :param environ: the job's environment.
    :param root: file-system root for ``/proc`` files (a directory in tests).
    :param runner: the command runner.
    :param deadline: ``time.monotonic()`` value by which everything must be done; commands get
        at most the time left.
    :param use_stack: use the stack probes when importable (tests may force the fallback).
    :param preset: facts given instead of observed (``{"gpu": GpuFacts(...)}``); used by callers
        that already hold them, e.g. an earlier snapshot in the same process.
    """

    def __init__(
        self,
        target: Any,
        *,
        environ: Mapping[str, str],
        root: str = "/",
        runner: Runner = run,
        deadline: float | None = None,
        use_stack: bool = True,
        preset: Mapping[str, Any] | None = None,
    ) -> None:
        self.target = target
        self.environ = dict(environ)
        self.root = root
        self.runner = runner
        self.deadline = deadline if deadline is not None else time.monotonic() + 60.0
        self.use_stack = use_stack
        self._values: dict[str, Any] = dict(preset or {})
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # -- machinery ---------------------------------------------------------------------------
    def _get(self, name: str, compute: Callable[[], Any]) -> Any:
        if name in self._values:
            return self._values[name]
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._values:
                self._values[name] = compute()
            return self._values[name]

    def command_timeout(self, cap: float = DEFAULT_TIMEOUT) -> float:
        """Seconds a command may take now: ``cap``, or less so it ends before the deadline."""
        return max(0.05, min(cap, self.deadline - time.monotonic() - 0.1))

    # -- facts -------------------------------------------------------------------------------
    @property
    def python(self) -> Any:
        """The target interpreter's :class:`~envlock.manifest.PythonInfo`."""
        def compute() -> Any:
            from envlock.target import query_interpreter  # noqa: PLC0415

            return query_interpreter(self.target, runner=self.runner, environ=self.environ,
                                     timeout=self.command_timeout(10.0))
        return self._get("python", compute)

    @property
    def conda_read(self) -> Any:
        """:class:`~envlock.probes.conda.CondaRead` of a conda target, else ``None``."""
        def compute() -> Any:
            if self.target.kind != "conda":
                return None
            from envlock.probes.conda import read_conda_prefix  # noqa: PLC0415

            return read_conda_prefix(self.target.prefix)
        return self._get("conda_read", compute)

    def _attributed(self) -> tuple[Any, Any]:
        def compute() -> Any:
            from envlock.probes.pip import scan_distributions  # noqa: PLC0415

            pip = scan_distributions(self.python.path)
            conda_read = self.conda_read
            if conda_read is None:
                return pip, None
            # The snapshot's cross-check of dist-infos and conda records (C11, C12); imported
            # only for conda targets (it brings the whole snapshot machinery).
            from envlock.capture import attribute_conda  # noqa: PLC0415

            new_pip, conda, _warnings = attribute_conda(pip, conda_read)
            return new_pip, conda
        return self._get("attributed", compute)

    @property
    def pip(self) -> Any:
        """:class:`~envlock.manifest.PipInfo`: what the target's ``sys.path`` imports."""
        return self._attributed()[0]

    @property
    def conda(self) -> Any:
        """:class:`~envlock.manifest.CondaInfo` with ``overwritten_by_pip`` set (C11), or ``None``."""
        return self._attributed()[1]

    @property
    def gpu(self) -> Any:
        """The driver and GPUs (:class:`GpuFacts` or the stack's ``GpuInfo``)."""
        def compute() -> Any:
            timeout = self.command_timeout()
            if self.use_stack:
                try:
                    from envlock.probes.gpu import probe_gpu  # noqa: PLC0415
                except ImportError:
                    pass
                else:
                    from pathlib import Path  # noqa: PLC0415

                    path_dirs = [d for d in self.environ.get("PATH", "").split(os.pathsep) if d]
                    return probe_gpu(root=Path(self.root), env=self.environ, path_dirs=path_dirs,
                                     runner=self.runner, timeout=timeout, use_nvml=self.root in ("", "/"))
            return read_gpu(root=self.root, environ=self.environ, runner=self.runner, timeout=timeout)
        return self._get("gpu", compute)

    @property
    def compute_apps(self) -> AppsFacts:
        """Processes using the GPUs (``status="absent"`` without ``nvidia-smi``)."""
        def compute() -> AppsFacts:
            smi = find_nvidia_smi(self.environ, self.root)
            if smi is None:
                return AppsFacts(status="absent", error="nvidia-smi not found")
            return read_compute_apps(smi, environ=self.environ, runner=self.runner,
                                     timeout=self.command_timeout())
        return self._get("compute_apps", compute)

    def frameworks(self, *, archs: bool = False) -> tuple[Any, ...]:
        """How the target's frameworks were built (torch, and with the stack probe also jax,
        tensorflow, cupy), as ``FrameworkBuild``/:class:`BuildFacts` records.

        :param archs: also read the GPU architectures from the CUDA libraries (costly: only
            when there is a GPU to compare them with).
        """
        key = "frameworks+archs" if archs else "frameworks"
        if not archs and "frameworks+archs" in self._values:
            return self._values["frameworks+archs"]

        def compute() -> tuple[Any, ...]:
            if self.use_stack:
                try:
                    from envlock.probes.frameworks import probe_frameworks  # noqa: PLC0415
                except ImportError:
                    pass
                else:
                    site = [p for p in self.python.path if os.path.isdir(p)]
                    info = probe_frameworks(prefix=self.target.prefix, site_dirs=site,
                                            read_archs=archs, env=self.environ)
                    return tuple(info.packages)
            conda = self.conda.packages if self.conda else ()
            torch = read_torch_build(self.pip.packages, conda)
            return (torch,) if torch else ()
        return self._get(key, compute)
