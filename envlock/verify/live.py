"""The live facts verify checks, gathered cheaply and lazily, each at most once.

:class:`Live` is shared by all checks (which run in threads): each fact is computed the first
time a check asks for it, under a per-fact lock, so the interpreter query or ``nvidia-smi``
runs once however many checks need it, and a check that needs nothing slow never waits.

The GPU and framework facts come from the stack probes (:func:`envlock.probes.gpu.probe_gpu`:
``/proc/driver/nvidia/version``, NVML or ``nvidia-smi``; :func:`envlock.probes.frameworks.
probe_frameworks`: ``torch/version.py``, local version labels, conda build strings, the
``.nv_fatbin`` architectures), as :class:`~envlock.manifest.stacktables.GpuInfo` and
:class:`~envlock.manifest.stacktables.FrameworkBuild` records.  The processes using the GPUs come from
``nvidia-smi --query-compute-apps`` (:func:`read_compute_apps`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from envlock._run import DEFAULT_TIMEOUT, Runner, run
from envlock.probes.nvsmi import AppsFacts, ComputeApp, read_compute_apps
from envlock.probes.nvsmi import find_nvidia_smi as _find_smi
from envlock._run import RunResult

__all__ = [
    "AppsFacts",
    "ComputeApp",
    "Live",
    "driver_loaded",
    "find_nvidia_smi",
    "local_label",
    "read_compute_apps",
]


def find_nvidia_smi(environ: Mapping[str, str], root: str = "/") -> str | None:
    """``nvidia-smi`` on the job's ``PATH``, else where drivers install it (real root only);
    see :func:`envlock.probes.nvsmi.find_nvidia_smi`."""
    return _find_smi(environ.get("PATH", "").split(os.pathsep), root=root)


def local_label(version: str | None) -> str | None:
    """The PEP 440 local label: ``"2.13.0+cpu"`` → ``"cpu"``; ``None`` without one."""
    if not version or "+" not in version:
        return None
    return version.split("+", 1)[1]


def driver_loaded(root: str = "/") -> bool:
    """``True`` when the NVIDIA kernel module is loaded: ``/proc/driver/nvidia/version`` or
    ``/sys/module/nvidia`` exists (under ``root``).  Without it ``nvidia-smi`` can only fail,
    and on a node where it hangs instead, verify would wait for nothing."""
    base = root.rstrip("/")
    return any(os.path.exists(base + p) for p in ("/proc/driver/nvidia/version", "/sys/module/nvidia"))


_NO_DRIVER = "nvidia-smi not run: no NVIDIA kernel module loaded (no /proc/driver/nvidia/version)"


def _no_smi(runner: Runner) -> Runner:
    """``runner``, except that ``nvidia-smi`` is not started (``status="absent"``)."""
    def wrapped(argv: Any, **kwargs: Any) -> Any:
        if os.path.basename(str(argv[0])) == "nvidia-smi":
            return RunResult(argv=tuple(str(a) for a in argv), status="absent", detail=_NO_DRIVER)
        return runner(argv, **kwargs)
    return wrapped


class Live:
    """The live facts of one verify run, each computed at most once (thread-safe).

    :param target: the resolved target (:class:`envlock.probes.target.ResolvedTarget`).
    :param environ: the job's environment.
    :param root: file-system root for ``/proc`` files (a directory in tests).
    :param runner: the command runner.
    :param deadline: ``time.monotonic()`` value by which everything must be done; commands get
        at most the time left.
    :param preset: facts given instead of observed, by name (``"gpu"``: a ``GpuInfo``,
        ``"frameworks"``/``"frameworks+archs"``: ``FrameworkBuild`` tuples); for callers that
        already hold them, e.g. an earlier snapshot in the same process.
    """

    def __init__(
        self,
        target: Any,
        *,
        environ: Mapping[str, str],
        root: str = "/",
        runner: Runner = run,
        deadline: float | None = None,
        preset: Mapping[str, Any] | None = None,
    ) -> None:
        self.target = target
        self.environ = dict(environ)
        self.root = root
        self.runner = runner
        self.deadline = deadline if deadline is not None else time.monotonic() + 60.0
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
            from envlock.probes.target import query_interpreter

            return query_interpreter(self.target, runner=self.runner, environ=self.environ,
                                     timeout=self.command_timeout(10.0))
        return self._get("python", compute)

    @property
    def conda_read(self) -> Any:
        """:class:`~envlock.probes.condameta.CondaRead` of a conda target, else ``None``."""
        def compute() -> Any:
            if self.target.kind != "conda":
                return None
            from envlock.probes.condameta import read_conda_prefix

            return read_conda_prefix(self.target.prefix)
        return self._get("conda_read", compute)

    def _attributed(self) -> tuple[Any, Any]:
        def compute() -> Any:
            from envlock.probes.pip import scan_distributions

            pip = scan_distributions(self.python.path)
            conda_read = self.conda_read
            if conda_read is None:
                return pip, None
            # The snapshot's cross-check of dist-infos and conda records (C11, C12); imported
            # only for conda targets (it brings the whole snapshot machinery).
            from envlock.probes.assemble import attribute_conda

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
        """The driver and GPUs: :class:`~envlock.manifest.stacktables.GpuInfo` (``status="absent"``
        without an NVIDIA driver)."""
        def compute() -> Any:
            from envlock.probes.gpu import probe_gpu
            from envlock.probes.world import World

            path_dirs = [d for d in self.environ.get("PATH", "").split(os.pathsep) if d]
            runner = self.runner if driver_loaded(self.root) else _no_smi(self.runner)
            world = World(root=self.root, environ=self.environ, path_dirs=path_dirs, runner=runner,
                          timeout=self.command_timeout())
            return probe_gpu(world, use_nvml=self.root in ("", "/"))
        return self._get("gpu", compute)

    @property
    def compute_apps(self) -> AppsFacts:
        """Processes using the GPUs (``status="absent"`` without ``nvidia-smi``)."""
        def compute() -> AppsFacts:
            smi = find_nvidia_smi(self.environ, self.root)
            if smi is None:
                return AppsFacts(status="absent", error="nvidia-smi not found")
            if not driver_loaded(self.root):
                return AppsFacts(status="absent", error=_NO_DRIVER)
            return read_compute_apps(smi, environ=self.environ, runner=self.runner,
                                     timeout=self.command_timeout())
        return self._get("compute_apps", compute)

    def frameworks(self, *, archs: bool = False) -> tuple[Any, ...]:
        """How the target's frameworks (torch, jax, tensorflow, cupy, numba) were built, as
        :class:`~envlock.manifest.stacktables.FrameworkBuild` records.

        :param archs: also read the GPU architectures from the CUDA libraries (costly: only
            when there is a GPU to compare them with).
        """
        key = "frameworks+archs" if archs else "frameworks"
        if not archs and "frameworks+archs" in self._values:
            return self._values["frameworks+archs"]

        def compute() -> tuple[Any, ...]:
            from envlock.probes.frameworks import probe_frameworks
            from envlock.probes.world import World

            site = [p for p in self.python.path if os.path.isdir(p)]
            world = World(environ=self.environ, prefix=self.target.prefix, site_dirs=site)
            info = probe_frameworks(world, read_archs=archs)
            return tuple(info.packages)
        return self._get(key, compute)
