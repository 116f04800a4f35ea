"""The sampler of ``envlock run``: the process tree below envlock, its RSS, and GPU memory
(``nvidia-smi``), in a background thread within a CPU budget."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from envlock._run import Runner, run
from envlock.runs import proctree

__all__ = ["Sampler", "INTERVAL", "BUDGET", "GPU_INTERVAL"]

#: seconds between two samples of the tree; the first 10 s are sampled every 0.1 s.
INTERVAL = 0.5
#: at most this fraction of one core is spent sampling: a sample that cost ``c`` CPU seconds
#: waits at least ``c / BUDGET`` before the next.
BUDGET = 0.01
#: seconds between two GPU samples (``nvidia-smi`` costs ~50 ms of CPU).
GPU_INTERVAL = 15.0

@dataclass
class Sampler:
    """Samples the process tree below ``root`` (envlock, the subreaper) in a thread.

    :ivar peak_tree: largest sum of RSS over the tree, bytes.
    :ivar seen: pid → (start time, command line) of every process of the tree seen.
    :ivar peak_pid: pid → largest RSS seen of it.
    :ivar gpu: pid → (peak GPU memory bytes, GPU uuid) of the tree's processes.
    """

    root: int
    environ: Mapping[str, str]
    exclude: set[int] = field(default_factory=set)
    #: the launcher shell (:func:`_launcher`): its first child is CMD, ``cmd_pid``
    launcher: int | None = None
    cmd_pid: int | None = None
    #: called with each sample's RSS sum (bytes) from the sampling thread
    on_sample: Callable[[int], None] | None = None
    runner: Runner = run
    gpu_enabled: bool = True
    driver_file: str = "/proc/driver/nvidia/version"
    peak_tree: int = 0
    samples: int = 0
    seen: dict[int, tuple[int | None, str]] = field(default_factory=dict)
    peak_pid: dict[int, int] = field(default_factory=dict)
    gpu: dict[int, tuple[int, str]] = field(default_factory=dict)
    gpu_status: str = "absent"
    gpu_error: str | None = None
    cpu: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _smi: str | None = None
    _started: float = 0.0

    def start(self) -> None:
        """Start sampling (and find ``nvidia-smi`` when an NVIDIA driver is loaded)."""
        if self.gpu_enabled and os.path.exists(self.driver_file):
            from envlock.verify.live import find_nvidia_smi

            self._smi = find_nvidia_smi(self.environ)
            if self._smi is None:
                self.gpu_error = "NVIDIA driver loaded but nvidia-smi not found"
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="envlock-run-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (one sample at most)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)

    def tree(self) -> list[int]:
        """The pids below the root now (the root excluded)."""
        return [p for p in proctree.descendants([self.root]) if p != self.root
                and p not in self.exclude]

    def sample(self) -> list[int]:
        """One sample: the tree's RSS; returns its pids."""
        if self.launcher is not None and self.cmd_pid is None:
            kids = proctree.children(self.launcher)
            self.cmd_pid = kids[0] if kids else None
        pids = self.tree()
        total = 0
        for p in pids:
            r = proctree.rss(p)
            if r is None:
                continue
            total += r
            if p not in self.seen:
                self.seen[p] = (proctree.start_time(p), proctree.cmdline(p))
            if r > self.peak_pid.get(p, 0):
                self.peak_pid[p] = r
        self.peak_tree = max(self.peak_tree, total)
        self.samples += 1
        if self.on_sample is not None:
            self.on_sample(total)
        return pids

    def sample_gpu(self, pids: Sequence[int]) -> None:
        """One ``nvidia-smi --query-compute-apps`` sample; a failure stops GPU sampling."""
        if self._smi is None:
            return
        from envlock.verify.live import read_compute_apps

        apps = read_compute_apps(self._smi, environ=self.environ, runner=self.runner, timeout=5.0)
        if apps.status != "ok":
            self.gpu_status, self.gpu_error, self._smi = apps.status, apps.error, None
            return
        self.gpu_status = "ok"
        mine = set(pids)
        for a in apps.apps:
            if a.pid in mine and a.used_memory:
                if a.used_memory > self.gpu.get(a.pid, (0, ""))[0]:
                    self.gpu[a.pid] = (a.used_memory, a.gpu_uuid)

    def _loop(self) -> None:
        next_gpu = time.monotonic() + 1.0
        while not self._stop.is_set():
            c0 = time.thread_time()
            try:
                pids = self.sample()
                if self._smi is not None and time.monotonic() >= next_gpu:
                    w0 = time.monotonic()
                    self.sample_gpu(pids)
                    next_gpu = time.monotonic() + max(GPU_INTERVAL, (time.monotonic() - w0) / BUDGET)
            except Exception:  # noqa: BLE001, S110 - a sampler bug must not end the job
                pass
            cost = time.thread_time() - c0
            self.cpu += cost
            base = 0.1 if time.monotonic() - self._started < 10 else INTERVAL
            self._stop.wait(max(base, cost / BUDGET))


