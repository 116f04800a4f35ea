"""The ``[process]`` table: what only the running program knows, observed without perturbing it.

Rules of the observer (each asserted by ``tests/record``):

* it reads modules the program has **already imported** (``sys.modules``); it never imports a
  framework, nor a submodule of one (``torch.backends.cudnn`` is read only if loaded);
* it never initialises CUDA: GPU names are read only when ``torch.cuda.is_initialized()``;
* it never draws from a random generator: states are read (``random.getstate()``,
  ``numpy.random.get_state()``, ``torch.get_rng_state()``) and hashed;
* it never changes a thread pool: counts come from threadpoolctl's ``threadpool_info()`` when
  threadpoolctl is installed (it opens libraries with ``RTLD_NOLOAD``), else from the library's
  own getter (``openblas_get_num_threads``, ``omp_get_max_threads``, ``MKL_Get_Max_Threads``,
  ``bli_thread_get_num_threads``) on a library already mapped, opened with ``RTLD_NOLOAD`` so
  that nothing new is loaded;
* shared objects: ``/proc/self/maps`` (proc(5)), owners from the distributions' ``RECORD`` files
  (:class:`envlock.libs.owners.OwnerIndex`, cached on disk).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from envlock.manifest import _model
from envlock.manifest.processtables import (
    GpuDevice,
    MappedLibrary,
    ProcessInfo,
    SeedState,
    ThreadPool,
    TorchState,
)

__all__ = ["FRAMEWORKS", "observe", "mapped_libraries", "native_threadpools", "openblas_version",
           "TORCH_DEFAULT_SEED"]

#: modules whose presence is recorded in ``[process] modules``.
FRAMEWORKS = ("torch", "numpy", "scipy", "jax", "tensorflow", "cupy", "numba", "sklearn",
              "threadpoolctl", "mkl")
#: torch's built-in CPU generator seed (``default_rng_seed_val``, c10/core/GeneratorImpl.h).
TORCH_DEFAULT_SEED = 67280421310721

_SO = re.compile(r"\.so(\.[0-9.]+)?$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _safe(fn: Callable[..., Any], notes: list[str], what: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:  # noqa: BLE001 - one unreadable flag must not lose the others
        notes.append(f"{what}: {type(exc).__name__}: {exc}")
        return None


def _torch(torch: Any, notes: list[str]) -> tuple[TorchState, tuple[GpuDevice, ...]]:
    mods = sys.modules
    cudnn = mods.get("torch.backends.cudnn")
    cuda_backend = mods.get("torch.backends.cuda")
    info = _safe(lambda: str(torch.__config__.parallel_info()), notes, "torch.__config__.parallel_info")
    backend = interop = None
    if info:
        m = re.search(r"^ATen parallel backend: (.+)$", info, re.M)
        backend = m.group(1).strip() if m else None
        m = re.search(r"at::get_num_interop_threads\(\) : (\d+)", info)
        interop = int(m.group(1)) if m else None
    seed = _safe(lambda: int(torch.initial_seed()), notes, "torch.initial_seed")
    state = _safe(lambda: bytes(torch.get_rng_state().tolist()), notes, "torch.get_rng_state")
    initialized = _safe(lambda: bool(torch.cuda.is_initialized()), notes, "torch.cuda.is_initialized")
    gpus: list[GpuDevice] = []
    if initialized:
        n = _safe(lambda: int(torch.cuda.device_count()), notes, "torch.cuda.device_count") or 0
        for i in range(n):
            name = _safe(lambda i=i: str(torch.cuda.get_device_name(i)), notes, "get_device_name")
            cap = _safe(lambda i=i: tuple(torch.cuda.get_device_capability(i)), notes,
                        "get_device_capability")
            gpus.append(GpuDevice(index=i, name=name or "?",
                                  capability=f"{cap[0]}.{cap[1]}" if cap else None))
    ts = TorchState(
        version=str(getattr(torch, "__version__", "")) or None,
        cudnn_benchmark=_safe(lambda: bool(cudnn.benchmark), notes, "cudnn.benchmark") if cudnn else None,
        cudnn_deterministic=_safe(lambda: bool(cudnn.deterministic), notes,
                                  "cudnn.deterministic") if cudnn else None,
        deterministic_algorithms=_safe(lambda: bool(torch.are_deterministic_algorithms_enabled()),
                                       notes, "are_deterministic_algorithms_enabled"),
        deterministic_warn_only=_safe(
            lambda: bool(torch.is_deterministic_algorithms_warn_only_enabled()), notes,
            "is_deterministic_algorithms_warn_only_enabled"),
        allow_tf32_matmul=_safe(lambda: bool(cuda_backend.matmul.allow_tf32), notes,
                                "cuda.matmul.allow_tf32") if cuda_backend else None,
        allow_tf32_cudnn=_safe(lambda: bool(cudnn.allow_tf32), notes, "cudnn.allow_tf32") if cudnn else None,
        float32_matmul_precision=_safe(lambda: str(torch.get_float32_matmul_precision()), notes,
                                       "get_float32_matmul_precision"),
        num_threads=_safe(lambda: int(torch.get_num_threads()), notes, "get_num_threads"),
        num_interop_threads=interop,
        initial_seed=str(seed) if seed is not None else None,
        seed_is_default=(seed == TORCH_DEFAULT_SEED) if seed is not None else None,
        rng_state_sha256=_sha(state) if state is not None else None,
        parallel_backend=backend,
        cuda_initialized=initialized,
    )
    return ts, tuple(gpus)


def _seeds(environ: Mapping[str, str], notes: list[str]) -> SeedState:
    rnd = sys.modules.get("random")
    py = _safe(lambda: _sha(repr(rnd.getstate()).encode()), notes, "random.getstate") if rnd else None
    nprand = sys.modules.get("numpy.random")
    np_state = None
    if nprand is not None:
        def read() -> str:
            st = nprand.get_state(legacy=True)
            return _sha(repr((st[0], st[1].tobytes(), *st[2:])).encode())

        np_state = _safe(read, notes, "numpy.random.get_state")
    return SeedState(python=py, numpy=np_state, pythonhashseed=environ.get("PYTHONHASHSEED"))


def mapped_libraries(maps: str | None = None) -> list[str]:
    """Paths of the shared objects mapped into this process, in order of first mapping
    (``/proc/self/maps``: the sixth field of file-backed mappings)."""
    if maps is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                maps = f.read()
        except OSError:
            return []
    out: dict[str, None] = {}
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6:
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if path.startswith("/") and _SO.search(path):
                out.setdefault(path, None)
    return list(out)


#: (internal api, user api, basename pattern, thread getters, version getter)
_POOLS: tuple[tuple[str, str, re.Pattern[str], tuple[str, ...], str | None], ...] = (
    ("openblas", "blas", re.compile(r"lib(scipy_)?openblas"),
     ("openblas_get_num_threads", "openblas_get_num_threads64_", "openblas_get_num_threads_64",
      "scipy_openblas_get_num_threads", "scipy_openblas_get_num_threads64_"),
     "openblas_get_config"),
    ("mkl", "blas", re.compile(r"libmkl_rt"), ("MKL_Get_Max_Threads",), None),
    ("blis", "blas", re.compile(r"libblis"), ("bli_thread_get_num_threads",), None),
    ("openmp", "openmp", re.compile(r"lib(gomp|iomp5|omp)[-.]"), ("omp_get_max_threads",), None),
)


def openblas_version(config: bytes) -> str | None:
    """The version in ``openblas_get_config()``'s answer (``b"OpenBLAS 0.3.23.dev DYNAMIC_ARCH
    …"`` → ``"0.3.23.dev"``): the word after ``OpenBLAS``, as threadpoolctl reads it, a dev or
    rc suffix included."""
    m = re.search(rb"OpenBLAS ([0-9][^\s]*)", config)
    return m.group(1).decode("ascii", "replace").rstrip(".,") if m else None


def _native_pool(path: str, getters: Iterable[str], version_fn: str | None) -> tuple[int | None, str | None]:
    import ctypes

    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None, None
    n = version = None
    for name in getters:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            n = int(fn())
            break
    for name in ([f"{pre}{version_fn}{suf}" for pre in ("", "scipy_") for suf in ("", "64_", "_64")]
                 if version_fn else []):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            raw = fn() or b""
            version = openblas_version(raw)
            break
    return n, version


def native_threadpools(libraries: Iterable[str]) -> list[ThreadPool]:
    """The BLAS and OpenMP pools of the mapped ``libraries``, asking each library itself
    (``RTLD_NOLOAD``: a library that is not mapped is never loaded)."""
    out = []
    for path in libraries:
        base = os.path.basename(path)
        for internal, user, rx, getters, version_fn in _POOLS:
            if rx.match(base):
                n, version = _native_pool(path, getters, version_fn)
                out.append(ThreadPool(user_api=user, internal_api=internal, path=path,
                                      version=version, num_threads=n, source="maps"))
                break
    return out


def _threadpoolctl_pools(notes: list[str]) -> list[ThreadPool] | None:
    """threadpoolctl's view, when it is installed (imported if need be: it loads nothing and
    changes nothing; ``threadpool_info()`` only reads). When envlock imported it, it is taken out
    of ``sys.modules`` again, so the program's imports (``[process] modules``) stay the program's."""
    mod: Any = sys.modules.get("threadpoolctl")
    ours = mod is None
    if ours:
        import importlib.util

        if importlib.util.find_spec("threadpoolctl") is None:
            return None
        import threadpoolctl

        mod = threadpoolctl
    try:
        info = _safe(mod.threadpool_info, notes, "threadpoolctl.threadpool_info")
    finally:
        if ours:  # the program had not imported it: leave sys.modules as it was
            for name in [m for m in sys.modules
                         if m == "threadpoolctl" or m.startswith("threadpoolctl.")]:
                del sys.modules[name]
    if info is None:
        return None
    return [ThreadPool(user_api=str(p.get("user_api")), internal_api=str(p.get("internal_api")),
                       path=str(p.get("filepath")), version=p.get("version") or None,
                       num_threads=p.get("num_threads"), source="threadpoolctl")
            for p in info]


def _threads_of_process() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def observe(
    *,
    environ: Mapping[str, str] | None = None,
    sys_path: Iterable[str] | None = None,
    prefix: str | None = None,
    rank: int | None = None,
    extra: Mapping[str, Any] | None = None,
    owners: bool = True,
) -> ProcessInfo:
    """Observe this process (see the module docstring for what is read and how).

    :param environ: the process's environment (``os.environ``).
    :param sys_path: where distributions are looked for to name library owners (``sys.path``).
    :param prefix: the environment prefix for conda owners (``sys.prefix``).
    :param rank: the rank recorded (:func:`envlock.runs.job.rank_of` by default).
    :param extra: values to record in ``[process.extra]`` (str, int, float, bool, lists of them).
    :param owners: name the package owning each mapped library.
    :returns: the :class:`ProcessInfo`; a value that could not be read is absent and its reason
        is in ``warnings``. Never raises.
    """
    from envlock.probes.assemble import utc_now
    from envlock.runs.job import rank_of

    t0 = time.perf_counter()
    program_modules = tuple(m for m in FRAMEWORKS if m in sys.modules)  # before envlock imports any
    env = os.environ if environ is None else environ
    notes: list[str] = []
    torch = sys.modules.get("torch")
    torch_state: TorchState | None = None
    gpus: tuple[GpuDevice, ...] = ()
    if torch is not None and hasattr(torch, "get_num_threads"):
        torch_state, gpus = _torch(torch, notes)
    libs = mapped_libraries()
    pools = _threadpoolctl_pools(notes)
    if pools is None:
        pools = native_threadpools(libs)
    mapped = [MappedLibrary(path=p) for p in libs]
    if owners:
        try:
            from envlock import cache as _cache
            from envlock.libs.owners import OwnerIndex

            index = OwnerIndex(sys.path if sys_path is None else sys_path,
                               prefix=prefix or sys.prefix, cache_dir=_cache.cache_dir("owners-v1"))
            mapped = []
            for p in libs:
                o = index.owner(p)
                mapped.append(MappedLibrary(path=p, owner=f"{o.name} {o.version}".strip()
                                            if o and o.version else (o.name if o else None)))
        except Exception as exc:  # noqa: BLE001
            notes.append(f"owners: {type(exc).__name__}: {exc}")
    return ProcessInfo(
        pid=os.getpid(), rank=rank if rank is not None else rank_of(env), created=utc_now(),
        modules=program_modules,
        torch=torch_state, seeds=_seeds(env, notes),
        cublas_workspace_config=env.get("CUBLAS_WORKSPACE_CONFIG"),
        threads=_threads_of_process(), threadpools=tuple(pools), gpus=gpus,
        libraries=tuple(mapped), cost=round(time.perf_counter() - t0, 4),
        warnings=tuple(notes), extra=_model.freeze_mapping(dict(extra or {})),
    )
