"""Manifest tables of the *stack*: GPUs, CUDA, frameworks, BLAS, toolchain, batch job.

These are the records written by the probes in :mod:`envlock.probes` (``gpu``, ``cuda``,
``frameworks``, ``blas``, ``toolchain``, ``slurm``) and stored as the manifest tables
``[gpu]``, ``[cuda]``, ``[frameworks]``, ``[blas]``, ``[toolchain]`` and ``[slurm]``.
``docs/stack.md`` describes every field and where its value comes from.

Conventions are those of :mod:`envlock.manifest`: every area table starts with ``status``
(``"ok"``, ``"absent"``, ``"error"``, ``"timeout"``), ``source`` and ``error``; sizes are bytes;
versions are strings exactly as the tool or file states them; ``None`` means "not known" and
is not written.

This module imports only :mod:`dataclasses`, :mod:`typing` and :mod:`envlock.manifest._model`, so that
the manifest can be read without loading any probe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Literal

from envlock.manifest import _model
from envlock.manifest._model import Status

__all__ = [
    "Gpu",
    "GpuInfo",
    "CudaToolkit",
    "CudaLibrary",
    "CudaInfo",
    "FrameworkBuild",
    "ThreadPool",
    "FrameworkRuntime",
    "FrameworksInfo",
    "BlasLibrary",
    "OpenMPRuntime",
    "BlasInfo",
    "Tool",
    "ToolStatus",
    "Libstdcxx",
    "BuiltWith",
    "ToolchainInfo",
    "SlurmInfo",
]

_EMPTY: Mapping[str, str] = _model.freeze_mapping({})


# -- [gpu] -----------------------------------------------------------------------------------
@_model.table
class Gpu:
    """One ``[[gpu.gpus]]`` entry: a GPU as the driver enumerates it.

    :ivar index: the driver's index (``nvidia-smi`` order; not affected by
        ``CUDA_VISIBLE_DEVICES``).
    :ivar name: product name, e.g. ``"NVIDIA H100 80GB HBM3"``.
    :ivar uuid: ``"GPU-…"`` (``"MIG-…"`` for a MIG instance).
    :ivar memory: total memory in bytes.
    :ivar compute_capability: ``"major.minor"``, e.g. ``"9.0"``.
    :ivar mig_mode: ``"Enabled"``, ``"Disabled"``, or ``None`` when the GPU has no MIG.
    """

    index: int
    name: str | None = None
    uuid: str | None = None
    memory: int | None = None
    compute_capability: str | None = None
    mig_mode: str | None = None


@_model.table
class GpuInfo:
    """``[gpu]``: the GPU driver and devices of the machine.

    :ivar vendor: ``"nvidia"`` or ``"amd"``.
    :ivar driver_version: NVIDIA kernel driver version, e.g. ``"550.54.14"``.
    :ivar driver_kind: ``"proprietary"`` or ``"open"`` (open kernel modules), from ``/proc``.
    :ivar cuda_driver_version: newest CUDA version the driver supports, ``"major.minor"``.
    :ivar cuda_driver_source: where that came from: ``"nvml"``, ``"nvidia-smi"`` or
        ``"driver table"`` (NVIDIA's toolkit/driver table, see ``docs/stack.md``).
    :ivar gpus: the devices, by index.
    :ivar visible_devices: ``CUDA_VISIBLE_DEVICES`` as set (``None`` when unset).
    :ivar rocm_version: the ROCm release of ``/opt/rocm`` (AMD), e.g. ``"6.0.2-115"``.
    :ivar rocm_visible_devices: ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    vendor: str | None = None
    driver_version: str | None = None
    driver_kind: str | None = None
    cuda_driver_version: str | None = None
    cuda_driver_source: str | None = None
    gpus: tuple[Gpu, ...] = ()
    visible_devices: str | None = None
    rocm_version: str | None = None
    rocm_visible_devices: str | None = None


# -- [cuda] ----------------------------------------------------------------------------------
@_model.table
class CudaToolkit:
    """One ``[[cuda.toolkits]]`` entry: a CUDA toolkit directory or a toolkit meta-package.

    :ivar path: its directory (``None`` for a pip/conda meta-package).
    :ivar version: toolkit version, e.g. ``"12.4.1"`` or ``"13.0"``.
    :ivar origin: how it was found: ``"CUDA_HOME"``, ``"CUDA_PATH"``, ``"/usr/local"``,
        ``"pip"`` (``cuda-toolkit``), ``"conda"`` (``cuda-version``/``cudatoolkit``) or ``"nvcc"``.
    :ivar source: the file or command the version was read from.
    """

    path: str | None = None
    version: str | None = None
    origin: str
    source: str | None = None


@_model.table
class CudaLibrary:
    """One ``[[cuda.libraries]]`` entry: one copy of a CUDA library the target can use.

    :ivar name: the component: ``"cudart"``, ``"cudnn"``, ``"nccl"``, ``"cublas"``, ``"cufft"``,
        ``"cusparse"``, ``"cusolver"``, ``"nvjitlink"``, ``"nvrtc"``, ``"cupti"``, ``"curand"``, …
    :ivar version: its version as the source states it.
    :ivar origin: ``"pip"`` (a wheel's dist-info), ``"conda"`` (a ``conda-meta`` record),
        ``"header"`` (``cudnn_version.h``/``nccl.h``), ``"toolkit"`` (a toolkit directory's
        metadata) or ``"file"`` (a versioned library file name).
    :ivar package: the pip distribution or conda package providing it.
    :ivar cuda: the CUDA major it is built for, when the package name says (``-cu12``).
    :ivar path: the directory holding the library (or the header read).
    :ivar files: library file names found there (``libcudnn.so.9``, …).
    """

    name: str
    version: str | None = None
    origin: str
    package: str | None = None
    cuda: str | None = None
    path: str | None = None
    files: tuple[str, ...] = ()


@_model.table
class CudaInfo:
    """``[cuda]``: every CUDA toolkit and library copy the target can use, with its origin.

    :ivar toolkits: toolkit directories and meta-packages.
    :ivar nvcc: path of the ``nvcc`` the target's ``PATH`` finds first.
    :ivar nvcc_version: its full version (``"13.0.88"``); ``nvcc_release``: ``"13.0"``.
    :ivar libraries: library copies, sorted by name then origin.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    toolkits: tuple[CudaToolkit, ...] = ()
    nvcc: str | None = None
    nvcc_version: str | None = None
    nvcc_release: str | None = None
    libraries: tuple[CudaLibrary, ...] = ()

    def find(self, name: str) -> tuple[CudaLibrary, ...]:
        """Return the library copies named ``name`` (e.g. ``"cudnn"``), in recorded order."""
        return tuple(lib for lib in self.libraries if lib.name == name)


# -- [frameworks] ----------------------------------------------------------------------------
@_model.table
class FrameworkBuild:
    """One ``[[frameworks.packages]]`` entry: how a framework was built, read without importing.

    :ivar name: normalized distribution name (``"torch"``, ``"jaxlib"``, ``"jax-cuda12-plugin"``,
        ``"tensorflow"``, ``"cupy-cuda12x"``, ``"numba"``, …).
    :ivar version: the installed version (with any local label, e.g. ``"2.5.1+cu124"``).
    :ivar location: the directory holding the package.
    :ivar build: ``"cuda"``, ``"rocm"``, ``"xpu"``, ``"cpu"``, or ``None`` when it cannot be told.
    :ivar cuda: CUDA version it was built for; ``cudnn``: cuDNN version; ``hip``: HIP version.
    :ivar git_version: source commit (torch).
    :ivar debug: a debug build (torch).
    :ivar evidence: the facts ``build`` rests on, e.g. ``"torch/version.py cuda='13.0'"``.
    :ivar requires: its ``nvidia-*`` / CUDA ``Requires-Dist`` pins (markers removed).
    :ivar conda_build: the conda build string, when conda installed it.
    :ivar cuda_archs: GPU code in its main CUDA library: ``"sm_XY"`` (SASS), ``"compute_XY"`` (PTX).
    :ivar cuda_archs_source: the library those were read from.
    :ivar error: what could not be read.
    """

    name: str
    version: str | None = None
    location: str | None = None
    build: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    hip: str | None = None
    git_version: str | None = None
    debug: bool | None = None
    evidence: str | None = None
    requires: tuple[str, ...] = ()
    conda_build: str | None = None
    cuda_archs: tuple[str, ...] = ()
    cuda_archs_source: str | None = None
    error: str | None = None


@_model.table
class ThreadPool:
    """One threadpool (BLAS/OpenMP) as ``threadpoolctl.threadpool_info()`` reports it.

    :ivar user_api: ``"blas"`` or ``"openmp"``; ``internal_api``: ``"openblas"``, ``"mkl"``, …
    :ivar prefix: library file prefix; ``filepath``: the loaded file.
    :ivar version: library version; ``num_threads``: threads it will use.
    """

    user_api: str
    internal_api: str | None = None
    prefix: str | None = None
    filepath: str | None = None
    version: str | None = None
    num_threads: int | None = None


@_model.table
class FrameworkRuntime:
    """``[frameworks.runtime]``: facts that need the target to import torch (``--import``).

    :ivar torch_version: ``torch.__version__``.
    :ivar cuda_available: ``torch.cuda.is_available()``.
    :ivar device_count: ``torch.cuda.device_count()``.
    :ivar cudnn_version: ``torch.backends.cudnn.version()``, an int such as ``90100``.
    :ivar arch_list: ``torch.cuda.get_arch_list()`` (empty without a usable GPU).
    :ivar allow_tf32_matmul: ``torch.backends.cuda.matmul.allow_tf32``.
    :ivar allow_tf32_cudnn: ``torch.backends.cudnn.allow_tf32``.
    :ivar deterministic: ``torch.are_deterministic_algorithms_enabled()``.
    :ivar cudnn_benchmark: ``torch.backends.cudnn.benchmark``.
    :ivar threadpools: ``threadpoolctl`` view after importing numpy and torch, when installed.
    :ivar duration: seconds the import run took.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    torch_version: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    cudnn_version: int | None = None
    arch_list: tuple[str, ...] = ()
    allow_tf32_matmul: bool | None = None
    allow_tf32_cudnn: bool | None = None
    deterministic: bool | None = None
    cudnn_benchmark: bool | None = None
    threadpools: tuple[ThreadPool, ...] = ()
    duration: float | None = None


@_model.table
class FrameworksInfo:
    """``[frameworks]``: deep-learning/array frameworks and how they were built.

    :ivar packages: one entry per framework distribution found, sorted by name.
    :ivar runtime: the ``--import`` facts, when asked for.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    packages: tuple[FrameworkBuild, ...] = ()
    runtime: FrameworkRuntime | None = None

    def get(self, name: str) -> FrameworkBuild | None:
        """Return the entry of distribution ``name`` (normalized), or ``None``."""
        for pkg in self.packages:
            if pkg.name == name:
                return pkg
        return None


# -- [blas] ----------------------------------------------------------------------------------
@_model.table
class BlasLibrary:
    """One ``[[blas.libraries]]`` entry: the BLAS/LAPACK a package uses.

    :ivar user: who uses it: ``"numpy"``, ``"scipy"``, or ``"conda"`` for the env-wide
        ``libblas``/``liblapack``.
    :ivar implementation: ``"openblas"``, ``"mkl"``, ``"blis"``, ``"netlib"``, ``"accelerate"``,
        ``"flexiblas"``, or the build's own name when unknown.
    :ivar version: the implementation's version, e.g. ``"0.3.30"``.
    :ivar int64: an ILP64 (64-bit integer) interface.
    :ivar config: the implementation's build configuration line, when recorded.
    :ivar path: the library file used (a bundled copy) or the file the facts came from.
    :ivar origin: where the facts came from: ``"build config"`` (the package's
        ``__config__.py``), ``"bundled file"``, ``"pip"`` (a ``scipy-openblas*`` distribution),
        ``"conda"`` (a build string).
    :ivar package: the distribution/conda package that ships it, with its version.
    """

    user: str
    implementation: str | None = None
    version: str | None = None
    int64: bool | None = None
    config: str | None = None
    path: str | None = None
    origin: str
    package: str | None = None


@_model.table
class OpenMPRuntime:
    """One ``[[blas.openmp]]`` entry: an OpenMP runtime library shipped in the env.

    :ivar name: ``"libgomp"`` (GNU), ``"libiomp5"`` (Intel) or ``"libomp"`` (LLVM).
    :ivar path: the file; ``package``: what ships it (``"torch"``, ``"scipy.libs"``, conda name).
    :ivar version: the version when the file name or package says.
    """

    name: str
    path: str
    package: str | None = None
    version: str | None = None


@_model.table
class BlasInfo:
    """``[blas]``: BLAS/LAPACK implementations of the numerical packages, and OpenMP runtimes."""

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    libraries: tuple[BlasLibrary, ...] = ()
    openmp: tuple[OpenMPRuntime, ...] = ()


# -- [toolchain] -----------------------------------------------------------------------------
#: A tool's status: a table's :data:`~envlock.manifest._model.Status`, or ``"failed"`` (the runner's
#: status for a non-zero exit, kept as the runner says it).
ToolStatus = Literal["ok", "failed", "absent", "timeout", "error"]


@_model.table
class Tool:
    """One ``[[toolchain.tools]]`` entry: a compiler or build tool found on the target's ``PATH``.

    :ivar name: the command (``"gcc"``, ``"nvcc"``, ``"mpicc"``, ``"mpirun"``, ``"cmake"``, …).
    :ivar path: where ``PATH`` finds it first.
    :ivar version: the version it reports, e.g. ``"12.2.0"``.
    :ivar vendor: the implementation, when one name has several: ``"gcc"``/``"clang"`` for
        ``cc``-like tools, ``"Open MPI"``/``"MPICH"``/``"Intel MPI"`` for MPI.
    :ivar wraps: for MPI compiler wrappers, the compiler command they run.
    :ivar status: ``"ok"``, or the runner's status (``"failed"``, ``"timeout"``, …).
    :ivar error: why the version could not be read.
    """

    name: str
    path: str
    version: str | None = None
    vendor: str | None = None
    wraps: str | None = None
    status: ToolStatus = "ok"
    error: str | None = None


@_model.table
class Libstdcxx:
    """One ``[[toolchain.libstdcxx]]`` entry: a ``libstdc++.so.6`` the target can load.

    :ivar path: the file (symlinks resolved).
    :ivar origin: ``"env"`` (``<prefix>/lib``) or ``"system"``.
    :ivar glibcxx: highest ``GLIBCXX_*`` version it defines, e.g. ``"3.4.30"``.
    :ivar cxxabi: highest ``CXXABI_*`` version it defines.
    :ivar error: why its versions could not be read.
    """

    path: str
    origin: str
    glibcxx: str | None = None
    cxxabi: str | None = None
    error: str | None = None


@_model.table
class BuiltWith:
    """One ``[[toolchain.built-with]]`` entry: the compilers named in a binary's ``.comment``.

    :ivar package: the package the binary belongs to (``"torch"``, ``"numpy"``).
    :ivar path: the binary.
    :ivar compilers: distinct ``.comment`` strings, e.g. ``"GCC: (GNU) 13.3.1 20240522 …"``.
    """

    package: str
    path: str
    compilers: tuple[str, ...] = ()


@_model.table
class ToolchainInfo:
    """``[toolchain]``: compilers, MPI, glibc and libstdc++ versions.

    :ivar tools: tools found, in a fixed order (``gcc``, ``g++``, … ``cmake``).
    :ivar glibc: the C library version, e.g. ``"2.36"``; ``glibc_source``: where it was read.
    :ivar libstdcxx: each ``libstdc++.so.6`` the target can load, env first.
    :ivar built_with: compilers that built key binaries of the target.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    tools: tuple[Tool, ...] = ()
    glibc: str | None = None
    glibc_source: str | None = None
    libstdcxx: tuple[Libstdcxx, ...] = ()
    built_with: tuple[BuiltWith, ...] = ()

    def tool(self, name: str) -> Tool | None:
        """Return the tool named ``name``, or ``None``."""
        for t in self.tools:
            if t.name == name:
                return t
        return None


# -- [slurm] ---------------------------------------------------------------------------------
@_model.table
class SlurmInfo:
    """``[slurm]``: the batch job this ran in (Slurm, PBS or LSF), from the environment only.

    ``status`` is ``"absent"`` outside a batch job.

    :ivar scheduler: ``"slurm"``, ``"pbs"`` or ``"lsf"``.
    :ivar job_id: the job id (for a Slurm array task, ``<array-job>_<task>``).
    :ivar job_name, partition, cluster: as the scheduler names them (``partition``: the PBS/LSF
        queue).
    :ivar nodelist: the job's nodes in the scheduler's compact form (``"gpu[01-04]"``).
    :ivar node: this node (``SLURMD_NODENAME``).
    :ivar num_nodes: nodes of the job; ``ntasks``: tasks of the job.
    :ivar cpus_on_node: CPUs allocated on this node; ``cpus_per_task``: ``--cpus-per-task``.
    :ivar mem_per_node, mem_per_cpu: memory allocated, bytes (Slurm states MiB).
    :ivar gpus: GPUs allocated to the job (``SLURM_JOB_GPUS``); ``step_gpus``: to this step;
        ``gpus_on_node``: count on this node.
    :ivar submit_dir: directory the job was submitted from.
    :ivar vars: the scheduler variables read (allow-listed names only).
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    scheduler: str | None = None
    job_id: str | None = None
    job_name: str | None = None
    partition: str | None = None
    cluster: str | None = None
    nodelist: str | None = None
    node: str | None = None
    num_nodes: int | None = None
    ntasks: int | None = None
    cpus_on_node: int | None = None
    cpus_per_task: int | None = None
    mem_per_node: int | None = None
    mem_per_cpu: int | None = None
    gpus: str | None = None
    step_gpus: str | None = None
    gpus_on_node: int | None = None
    submit_dir: str | None = None
    vars: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
