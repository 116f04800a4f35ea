"""The live-process tables: ``[process]`` (what only the running program knows, written by
:func:`envlock.record`) and ``[run]`` (the run record ``run.toml`` of ``envlock run``).

Both are frozen dataclasses mapped to TOML by :mod:`envlock.manifest._model` like every other
table.  They are not fields of :class:`~envlock.manifest.Manifest`: a manifest keeps them among
its ``extra`` tables (read and written back unchanged), and :func:`process_from_dict` /
:func:`run_from_dict` build the typed view.  Conventions as in the manifest: sizes in **bytes**,
durations in **seconds**, times UTC ISO-8601 with ``Z`` (``docs/run.md`` lists every key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from envlock.manifest import _model
from envlock.errors import ManifestError, ManifestVersionError

__all__ = [
    "RUN_SCHEMA", "PROCESS_SCHEMA",
    "TorchState", "SeedState", "ThreadPool", "MappedLibrary", "GpuDevice", "ProcessInfo",
    "ReceivedSignal", "GpuUse", "Resources", "Granted", "Leftover", "RunFinding", "RunInfo",
    "process_from_dict", "run_from_dict",
]

#: Version of the ``[run]`` table layout (``[run] schema``); a reader refuses a newer one.
RUN_SCHEMA = 1
#: Version of the ``[process]`` table layout.
PROCESS_SCHEMA = 1

_EMPTY: Mapping[str, Any] = _model.freeze_mapping({})


# -- [process] ------------------------------------------------------------------------------
@_model.table
class TorchState:
    """``[process.torch]``: torch's determinism, precision and thread settings as the program
    left them (read from the imported module; never imported by envlock).

    :ivar version: ``torch.__version__``.
    :ivar cudnn_benchmark: ``torch.backends.cudnn.benchmark`` (autotuner picks kernels by timing).
    :ivar cudnn_deterministic: ``torch.backends.cudnn.deterministic``.
    :ivar deterministic_algorithms: ``torch.are_deterministic_algorithms_enabled()``.
    :ivar deterministic_warn_only: ``torch.is_deterministic_algorithms_warn_only_enabled()``.
    :ivar allow_tf32_matmul: ``torch.backends.cuda.matmul.allow_tf32``.
    :ivar allow_tf32_cudnn: ``torch.backends.cudnn.allow_tf32``.
    :ivar float32_matmul_precision: ``torch.get_float32_matmul_precision()`` (``highest``,
        ``high``, ``medium``).
    :ivar num_threads: ``torch.get_num_threads()`` (intra-op pool); ``num_interop_threads``:
        ``at::get_num_interop_threads()`` as ``torch.__config__.parallel_info()`` reports it.
    :ivar initial_seed: ``torch.initial_seed()`` of the CPU generator.
    :ivar seed_is_default: the CPU generator still has torch's built-in seed
        (``default_rng_seed_val`` = 67280421310721, ``c10/core/GeneratorImpl.h``): no
        ``torch.manual_seed`` was called.
    :ivar rng_state_sha256: sha256 of ``torch.get_rng_state()`` (the CPU generator's state).
    :ivar parallel_backend: the ``ATen parallel backend`` line of ``torch.__config__.parallel_info()``.
    :ivar cuda_initialized: ``torch.cuda.is_initialized()``.
    """

    version: str | None = None
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    deterministic_algorithms: bool | None = None
    deterministic_warn_only: bool | None = None
    allow_tf32_matmul: bool | None = None
    allow_tf32_cudnn: bool | None = None
    float32_matmul_precision: str | None = None
    num_threads: int | None = None
    num_interop_threads: int | None = None
    initial_seed: str | None = None
    seed_is_default: bool | None = None
    rng_state_sha256: str | None = None
    parallel_backend: str | None = None
    cuda_initialized: bool | None = None


@_model.table
class SeedState:
    """``[process.seeds]``: fingerprints of the global random generators (sha256 of their state,
    read without drawing): two runs with the same fingerprints at the same point drew from the
    same streams.  ``None`` when that module was not imported by the program.

    :ivar python: sha256 of ``random.getstate()``.
    :ivar numpy: sha256 of ``numpy.random.get_state()`` (the legacy global ``RandomState``).
    :ivar pythonhashseed: ``PYTHONHASHSEED`` of the process, if set.
    """

    python: str | None = None
    numpy: str | None = None
    pythonhashseed: str | None = None


@_model.table
class ThreadPool:
    """One native thread pool (threadpoolctl's ``threadpool_info()`` fields, or envlock's own
    reading of ``/proc/self/maps`` plus the library's ``*_get_num_threads`` call).

    :ivar user_api: ``blas`` or ``openmp``; ``internal_api``: ``openblas``, ``mkl``, ``blis``,
        ``openmp`` (``libgomp``/``libiomp``/``libomp``).
    :ivar path: the library file; ``version``: as the library reports it.
    :ivar num_threads: threads it will use; ``None`` when it could not be asked.
    :ivar source: ``threadpoolctl`` or ``maps``.
    """

    user_api: str
    internal_api: str
    path: str
    version: str | None = None
    num_threads: int | None = None
    source: str = "maps"


@_model.table
class MappedLibrary:
    """A shared object mapped into the process (``/proc/self/maps``), with its owner package when
    it lies inside a distribution's directory on ``sys.path``."""

    path: str
    owner: str | None = None


@_model.table
class GpuDevice:
    """A CUDA device as torch sees it (recorded only when CUDA was already initialised)."""

    index: int
    name: str
    capability: str | None = None


@_model.table
class ProcessInfo:
    """``[process]``: what only the running program knows (:func:`envlock.record`).

    :ivar schema: :data:`PROCESS_SCHEMA`.
    :ivar pid: the process id; ``rank``: ``RANK``/``SLURM_PROCID`` (``None`` outside a job).
    :ivar created: UTC time of the observation.
    :ivar modules: the framework modules the program had imported (``torch``, ``numpy``, …).
    :ivar cublas_workspace_config: ``CUBLAS_WORKSPACE_CONFIG`` in the process's own environment
        (a program may set it in ``os.environ``).
    :ivar threads: OS threads of the process (``/proc/self/status`` ``Threads``).
    :ivar cost: seconds the ``[process]`` observation took (not counting the snapshot).
    :ivar extra: values the program passed as ``extra=``.
    """

    schema: int = PROCESS_SCHEMA
    status: str = "ok"
    source: str = "in-process"
    error: str | None = None
    pid: int | None = None
    rank: int | None = None
    created: str | None = None
    modules: tuple[str, ...] = ()
    torch: TorchState | None = None
    seeds: SeedState | None = None
    cublas_workspace_config: str | None = None
    threads: int | None = None
    threadpools: tuple[ThreadPool, ...] = ()
    gpus: tuple[GpuDevice, ...] = ()
    libraries: tuple[MappedLibrary, ...] = ()
    cost: float | None = None
    warnings: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


# -- [run] ----------------------------------------------------------------------------------
@_model.table
class ReceivedSignal:
    """A signal ``envlock run`` received and forwarded to the command's process group.

    :ivar name: ``SIGTERM``, ``SIGINT``, ``SIGUSR1``; ``after``: seconds after the start.
    """

    name: str
    after: float
    forwarded: bool = True


@_model.table
class GpuUse:
    """GPU memory a process of the run held (``nvidia-smi --query-compute-apps``), peak of the
    samples, bytes."""

    pid: int
    memory: int
    gpu_uuid: str | None = None
    command: str | None = None


@_model.table
class Resources:
    """``[run.resources]``: what the run used.

    :ivar max_rss: the largest resident set of one process of the run, bytes: the kernel's
        ``ru_maxrss`` from ``wait4`` (what ``getrusage(RUSAGE_CHILDREN)`` and ``/usr/bin/time -v``
        report).
    :ivar peak_rss_tree: the largest sum of RSS over the process tree, sampled from ``/proc``.
    :ivar peak_rss: the larger of the two: the figure compared with the memory granted.
    :ivar cpu_user, cpu_system: CPU seconds of the command and its waited-for descendants.
    :ivar samples: number of ``/proc`` samples; ``interval``: seconds between them.
    :ivar sampler_cpu: CPU seconds the sampler itself used (its overhead).
    :ivar gpu_status: ``ok``, ``absent`` (no NVIDIA driver/nvidia-smi), ``error`` or ``timeout``.
    """

    max_rss: int | None = None
    peak_rss_tree: int | None = None
    peak_rss: int | None = None
    cpu_user: float | None = None
    cpu_system: float | None = None
    samples: int = 0
    interval: float | None = None
    sampler_cpu: float | None = None
    gpu_status: str = "absent"
    gpu_error: str | None = None
    gpu_memory: tuple[GpuUse, ...] = ()


@_model.table
class Granted:
    """``[run.granted]``: what the scheduler granted (absent keys: not known).

    :ivar scheduler: ``slurm`` or ``none``; ``job_id``: ``SLURM_JOB_ID``.
    :ivar memory: bytes on this node; ``memory_source`` says from which variables.
    :ivar time_limit: seconds; ``time_limit_source``: ``scontrol show job`` or
        ``SLURM_JOB_END_TIME - SLURM_JOB_START_TIME``.
    :ivar job_start: UTC start time of the job (for the time used of the limit).
    :ivar gpus: GPUs allocated on this node; ``gpu_ids``: their ids as Slurm lists them.
    :ivar visible_devices: ``CUDA_VISIBLE_DEVICES`` of the job (``None``: unset).
    """

    scheduler: str = "none"
    job_id: str | None = None
    memory: int | None = None
    memory_source: str | None = None
    time_limit: float | None = None
    time_limit_source: str | None = None
    job_start: str | None = None
    gpus: int | None = None
    gpu_ids: tuple[str, ...] = ()
    visible_devices: str | None = None


@_model.table
class Leftover:
    """``[[run.children]]``: a process of the run still alive when the command ended.

    :ivar action: ``killed`` (SIGTERM, then SIGKILL after the grace period), ``kept``
        (``--keep-children``) or ``gone`` (it ended by itself before it was killed).
    """

    pid: int
    command: str
    rss: int | None = None
    gpu_memory: int | None = None
    action: str = "killed"


@_model.table
class RunFinding:
    """``[[run.findings]]``: one plain-words finding about the run (ids ``run.*``)."""

    id: str
    severity: str
    title: str
    cause: str | None = None
    fix: tuple[str, ...] = ()


@_model.table
class RunInfo:
    """``[run]``: one run of a command under ``envlock run``.

    :ivar schema: :data:`RUN_SCHEMA`.
    :ivar outcome: ``running`` (the record written at the start; still so if envlock was
        killed), ``succeeded`` (exit 0), ``failed`` (exit status ≠ 0), ``terminated`` (a
        SIGTERM/SIGINT/SIGHUP/SIGQUIT was forwarded, whatever the exit), ``output-closed``
        (SIGPIPE: the reader of its output went away, ``| head``), ``killed`` (SIGKILL that envlock did
        not send, e.g. the out-of-memory killer), ``crashed`` (another signal: SIGSEGV,
        SIGABRT …), ``not-started`` (verify failed, or the command could not be started);
        ``unknown`` only as a reader states a ``running`` record whose supervisor is gone
        (:mod:`envlock.runs.unfinished`), never written by envlock.
    :ivar command: the command line, URL credentials removed; ``cwd``: its working directory.
    :ivar start, end: UTC times; ``wall``: seconds.
    :ivar exit_status: the command's exit status; ``signal``: the signal that ended it.
    :ivar exit_code: what ``envlock run`` returned (``128 + n`` for signal ``n``, as shells do).
    :ivar pid: the command's process id (and process group id).
    :ivar manifest: the snapshot's file name in the run directory; ``manifest_sha256``: its
        digest (hex).
    :ivar verify: the ``--verify`` policy; ``verify_exit``: verify's exit status.
    :ivar supervisor: envlock's own process id (the supervisor that writes this record);
        ``supervisor_start``: its start time, clock ticks after boot (``/proc/PID/stat`` field
        22); ``boot_id``: ``/proc/sys/kernel/random/boot_id``.  A reader of a record still
        ``running`` tells from them whether the supervisor is gone (:mod:`envlock.runs.unfinished`).
    """

    schema: int = RUN_SCHEMA
    outcome: str
    command: tuple[str, ...] = ()
    cwd: str | None = None
    start: str | None = None
    end: str | None = None
    wall: float | None = None
    exit_status: int | None = None
    signal: str | None = None
    exit_code: int | None = None
    pid: int | None = None
    error: str | None = None
    manifest: str | None = None
    manifest_sha256: str | None = None
    verify: str | None = None
    verify_exit: int | None = None
    keep_children: bool = False
    signals: tuple[ReceivedSignal, ...] = ()
    resources: Resources | None = None
    granted: Granted | None = None
    children: tuple[Leftover, ...] = ()
    findings: tuple[RunFinding, ...] = ()
    supervisor: int | None = None
    supervisor_start: int | None = None
    boot_id: str | None = None


def _check_schema(data: Mapping[str, Any], table: str, known: int) -> None:
    if not isinstance(data, Mapping):
        raise ManifestError(f"[{table}] is not a table")
    schema = data.get("schema", known)
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise ManifestError(f"[{table}] schema must be an integer, got {schema!r}")
    if schema > known:
        raise ManifestVersionError(
            f"[{table}] schema {schema} is newer than this envlock reads ({known}); upgrade envlock")


def process_from_dict(data: Mapping[str, Any]) -> ProcessInfo:
    """Build a :class:`ProcessInfo` from a parsed ``[process]`` table.

    :raises ManifestError: not a table, or a value of the wrong type (key path in the message).
    :raises ManifestVersionError: its ``schema`` is newer than :data:`PROCESS_SCHEMA`.
    """
    _check_schema(data, "process", PROCESS_SCHEMA)
    return _model.from_dict(ProcessInfo, data, "process")


def run_from_dict(data: Mapping[str, Any]) -> RunInfo:
    """Build a :class:`RunInfo` from a parsed ``[run]`` table.

    :raises ManifestError: not a table, or a value of the wrong type (key path in the message).
    :raises ManifestVersionError: its ``schema`` is newer than :data:`RUN_SCHEMA`.
    """
    _check_schema(data, "run", RUN_SCHEMA)
    return _model.from_dict(RunInfo, data, "run")
