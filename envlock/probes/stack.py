"""Run the stack probes (gpu, cuda, frameworks, blas, toolchain, slurm) concurrently, one budget.

:func:`probe_stack` is what ``envlock snapshot`` calls.  Each probe runs in its own daemon
thread; the caller waits until all are done or the budget is spent.  A probe still running
then is recorded with ``status="timeout"`` and left behind: its external commands are killed
by their own timeouts, and as a daemon thread it cannot keep the process alive (an NVML call
into a hung driver must not hang the snapshot, nor envlock's exit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from envlock._kinds import STACK_AREAS as _AREAS
from envlock.manifest import PipPackage
from envlock.manifest import buildtable as _build_records
from envlock.manifest import stacktables as _stack_records
from envlock.probes.blas import probe_blas
from envlock.probes.buildenv import probe_build
from envlock.probes.condameta import CondaMetaRecord, list_conda_meta
from envlock.probes.cuda import probe_cuda
from envlock.probes.frameworks import probe_frameworks
from envlock.probes.gpu import probe_gpu
from envlock.probes.pip import scan_distributions
from envlock.probes.slurm import probe_slurm
from envlock.probes.toolchain import probe_toolchain
from envlock.probes.world import World

__all__ = ["probe_stack", "STACK_AREAS"]

#: Manifest tables filled by :func:`probe_stack`, with their record class
#: (the registry :data:`envlock._kinds.STACK_AREAS`).
STACK_AREAS: Mapping[str, type] = {
    a.name: getattr({"stack": _stack_records, "build": _build_records}[a.record.split(":")[0]],
                    a.record.split(":")[1])
    for a in _AREAS
}


def probe_stack(
    world: World,
    *,
    budget: float = 10.0,
    dists: Sequence[PipPackage] | Callable[[], Sequence[PipPackage]] | None = None,
    conda: Sequence[CondaMetaRecord] | None = None,
    do_import: bool = False,
    import_timeout: float = 60.0,
    areas: Sequence[str] | None = None,
    use_nvml: bool = True,
    read_archs: bool = True,
) -> dict[str, Any]:
    """Observe the GPU/CUDA/framework/BLAS/toolchain/batch-job stack of a target.

    :param world: what is observed (:class:`~envlock.probes.world.World`), handed to every
        probe; each command gets at most ``min(budget / 2, world.timeout)`` seconds (the probes
        see a copy with that ``timeout`` only when it is smaller than ``world.timeout``).
    :param budget: overall budget in seconds (float).
    :param dists: the distributions of ``world.site_dirs`` already read by
        :func:`~envlock.probes.pip.scan_distributions` (a snapshot's ``[pip]`` packages), or a
        function returning them, called once in the first probe thread that needs them (so the
        GPU probe need not wait for a scan still under way); ``None`` scans ``site_dirs`` once,
        shared by the probes.
    :param conda: the records of ``<prefix>/conda-meta`` already listed by
        :func:`~envlock.probes.condameta.list_conda_meta`; ``None`` lists them once.
    :param do_import: also run the target interpreter (``world.python``) to import torch
        (``--import``); the frameworks probe then gets ``import_timeout`` more seconds.
    :param import_timeout: seconds allowed for the import run.
    :param areas: the subset of :data:`STACK_AREAS` to probe (all by default).
    :param use_nvml: let the GPU probe try NVML (``pynvml``) before ``nvidia-smi``.
    :param read_archs: read the GPU architectures of ``libtorch_cuda.so`` (``.nv_fatbin``
        entry headers: a few thousand small reads, ~0.07 s warm, ~0.5 s on a cold page cache).
    :returns: ``{area: record}`` for each area, in :data:`STACK_AREAS` order; a probe that did
        not finish within the budget gives ``cls(status="timeout", error=…)``, one that
        failed unexpectedly ``cls(status="error", error=…)``.  Never raises.
    """
    # Half the budget per command: a probe may run two commands in a row (nvidia-smi's retry)
    # and still report what its commands said before the overall budget runs out.
    per_cmd = min(budget / 2, world.timeout)
    w = world if per_cmd == world.timeout else replace(world, timeout=per_cmd)
    # Read inside the probe threads (under the budget: a hung file system times out like a hung
    # command), once for all probes.
    get_dists: Callable[[], Sequence[PipPackage]]
    if dists is None:
        get_dists = _once(lambda: scan_distributions(world.site_dirs).packages)
    elif callable(dists):
        get_dists = _once(dists)
    else:
        get_dists = _once(lambda: dists)
    get_conda = _once((lambda: list_conda_meta(world.prefix)) if conda is None else (lambda: conda))
    calls: dict[str, Callable[[], Any]] = {
        "gpu": lambda: probe_gpu(w, use_nvml=use_nvml),
        "cuda": lambda: probe_cuda(w, dists=get_dists(), conda=get_conda()),
        "frameworks": lambda: probe_frameworks(w, dists=get_dists(), conda=get_conda(), do_import=do_import,
                                               import_timeout=import_timeout, read_archs=read_archs),
        "blas": lambda: probe_blas(w, dists=get_dists(), conda=get_conda()),
        "toolchain": lambda: probe_toolchain(w, dists=get_dists()),
        "slurm": lambda: probe_slurm(w),
        "build": lambda: probe_build(w),
    }
    wanted = [a for a in STACK_AREAS if areas is None or a in areas]
    extra = {"frameworks": import_timeout} if do_import else {}
    return _run_under_budget(calls, wanted, budget, extra)


def _run_under_budget(
    calls: Mapping[str, Callable[[], Any]], wanted: Sequence[str], budget: float,
    extra: Mapping[str, float],
) -> dict[str, Any]:
    """Run each wanted area's probe in a thread of its own and collect what finished in time.

    :param budget: seconds every probe may take, counted from the start of all of them, plus
        ``extra[area]`` seconds for an area given more.
    :returns: ``{area: record}`` in ``wanted`` order; a probe that raised gives
        ``cls(status="error", …)``, one that did not finish ``cls(status="timeout", …)``.
    """
    results: dict[str, Any] = {}
    lock = threading.Lock()
    done = {a: threading.Event() for a in wanted}

    def worker(area: str) -> None:
        try:
            rec = calls[area]()
        except Exception as exc:  # noqa: BLE001 - a probe bug must not lose the other areas
            rec = STACK_AREAS[area](
                status="error", error=f"internal error: {type(exc).__name__}: {exc}"
            )
        with lock:
            results[area] = rec
        done[area].set()

    start = time.monotonic()
    for area in wanted:
        threading.Thread(
            target=worker, args=(area,), name=f"envlock-probe-{area}", daemon=True
        ).start()
    out: dict[str, Any] = {}
    for area in wanted:
        allowed = budget + extra.get(area, 0.0)
        left = start + allowed - time.monotonic()
        if done[area].wait(max(0.0, left)):
            with lock:
                out[area] = results[area]
        else:
            out[area] = STACK_AREAS[area](
                status="timeout", error=f"{area} probe did not finish within {allowed:g} s"
            )
    return out


_T = TypeVar("_T")


def _once(compute: Callable[[], _T]) -> Callable[[], _T]:
    """Return a thread-safe getter that calls ``compute`` on first use and then reuses its value.

    A call that raises leaves nothing cached (the next caller tries again).
    """
    lock = threading.Lock()
    box: list[_T] = []

    def get() -> _T:
        with lock:
            if not box:
                box.append(compute())
            return box[0]

    return get
