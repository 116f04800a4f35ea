"""The end of a job that Slurm ends, as ``envlock run`` records it before Slurm's SIGKILL:
the time limit, ``scancel``, a node set down, the over-memory kill."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from envlock._run import Runner
from envlock.errors import EnvlockError
from envlock.manifest.processtables import Granted, Resources, RunFinding, RunInfo
from envlock.runs import proctree
from envlock.runs.sampler import INTERVAL, Sampler

__all__ = ["KILL_MARGIN", "SlurmEnding", "dt_utc"]

#: seconds before Slurm's SIGKILL (KillWait after its SIGTERM) at which the record of the kill
#: is written: envlock is killed with the step and cannot write it afterwards.
KILL_MARGIN = 0.5


#: the fix of ``run.slurm-ended`` when a node of the job went down (the job's time is not
#: the cause), and otherwise
_NODE_FIX = ("Resubmit the job, or let Slurm requeue it after a node failure (sbatch "
             "--requeue) and checkpoint on SIGTERM; `scontrol show node NODE` says why the "
             "node was set DOWN (Reason).")
_TIME_FIX = ("Ask for more time (--time) and checkpoint on SIGTERM, or on an earlier "
             "--signal=B:USR1@300 warning; the program has KillWait seconds after SIGTERM.")


class SlurmEnding:
    """The end of a job that Slurm ends (time limit, ``scancel``, node failure, preemption):
    SIGTERM to every process of the step, then SIGKILL ``KillWait`` seconds later, to envlock
    too (``KillWait`` of ``scontrol show config``).

    On the first SIGTERM a thread asks Slurm why (``scontrol show job``: ``JobState``,
    ``Reason``) and what ``KillWait`` is, writes the record at once (``terminated``, the
    SIGTERM in ``[[run.signals]]``, a ``run.slurm-ended`` finding naming the cause), and, when
    CMD is still running :data:`KILL_MARGIN` seconds before the SIGKILL, writes the record of
    the kill (``killed``, ``SIGKILL``, ``end`` the time Slurm kills it): the record on disk is
    final whether or not envlock outlives the step.  When CMD ends first, the normal final
    record replaces both."""

    def __init__(self, environ: Mapping[str, str], runner: Runner,
                 write: Callable[[RunInfo], Any]) -> None:
        self.environ, self.runner, self.write = environ, runner, write
        self.lock = threading.Lock()
        self.finished = False
        self.job: dict[str, str] = {}
        self.kill_wait: float | None = None
        self.t_term: float | None = None
        self._thread: threading.Thread | None = None
        self._asked = threading.Event()

    def arm(self, base: RunInfo, state: dict[str, Any], sampler: Sampler,
            granted: Granted | None) -> None:
        """Watch for the first SIGTERM from now on (``state["on_signal"]``), and each of the
        sampler's samples against the memory granted (:meth:`memory`)."""
        self.base, self.state, self.sampler, self.granted = base, state, sampler, granted

        def on_signal(signum: int) -> None:
            if signum == signal.SIGTERM and self._thread is None:
                self.t_term = time.monotonic()
                self._thread = threading.Thread(target=self._run, name="envlock-run-slurm-end",
                                                daemon=True)
                self._thread.start()

        state["on_signal"] = on_signal
        if granted is not None and granted.memory:
            sampler.on_sample = self.memory
        if any(s.name == "SIGTERM" for s in state["signals"]):  # one before CMD started
            on_signal(signal.SIGTERM)

    def memory(self, tree: int) -> None:
        """Slurm's over-memory kill (``JobAcctGatherParams=OverMemoryKill``) SIGKILLs the whole
        step, envlock too and without a SIGTERM first, once the step's RSS — envlock's own
        included — passes the memory granted (``slurmstepd``: "StepId=… exceeded memory limit
        (… > …), being killed"). When a sample sees that sum above the grant, the record of
        that kill is written at once; a CMD that survives it (no OverMemoryKill) gets its
        normal final record later."""
        limit = self.granted.memory if self.granted is not None else None
        own = proctree.rss(os.getpid()) or 0
        if not limit or tree + own <= limit or getattr(self, "_oom_written", False):
            return
        self._oom_written = True
        from envlock.runs.outcome import fmt_bytes

        found = RunFinding(
            id="run.memory", severity="error",
            title=f"the step's RSS {fmt_bytes(tree + own)} (envlock's {fmt_bytes(own)} included) "
                  f"passed the {fmt_bytes(limit)} granted: Slurm's over-memory kill ends the step",
            cause=("Slurm samples the RSS of every process of the step (JobAcctGatherParams="
                   "OverMemoryKill) and SIGKILLs the step past --mem; envlock is killed with it, "
                   "so this record was written when its sample saw the sum past the grant."),
            fix=("Ask for more memory (--mem), or lower the program's peak.",))
        with self.lock:
            if self.finished:
                return
            with contextlib.suppress(OSError, EnvlockError):
                self.write(self._snapshot(outcome="killed", signal="SIGKILL", exit_code=137,
                                          end=dt_utc(time.time()),
                                          wall=round(time.monotonic() - self.state["t0"], 3),
                                          findings=(found,)))

    def done(self) -> None:
        """CMD has ended: the normal final record follows; no provisional one after this."""
        with self.lock:
            self.finished = True

    def _ask(self) -> None:
        import shutil

        from envlock.runs.granted import parse_scontrol

        scontrol = shutil.which("scontrol", path=self.environ.get("PATH", ""))
        job = self.environ.get("SLURM_JOB_ID") or self.environ.get("SLURM_JOBID") or ""
        if not scontrol:
            return
        res = self.runner([scontrol, "show", "job", "-o", job], timeout=5.0, env=dict(self.environ))
        if res.ok:
            self.job = parse_scontrol(res.stdout)
        res = self.runner([scontrol, "show", "config"], timeout=5.0, env=dict(self.environ))
        if res.ok:
            for line in res.stdout.splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "KillWait":
                    num = (value.split() or [""])[0]
                    self.kill_wait = float(num) if num.isdigit() else None

    def cause(self) -> str:
        """``the time limit``, … from ``Reason`` or ``JobState`` (``""``: not known).  At the
        SIGTERM a real Slurm 22.05 shows ``JobState=COMPLETING``; the time limit is
        ``Reason=TimeLimit`` then, a ``scancel`` leaves ``Reason=None``."""
        reason = self.job.get("Reason", "")
        by_reason = {"TimeLimit": "the time limit", "NodeDown": "a node set DOWN",
                     "NodeFail": "a node failure", "Preempted": "preemption",
                     "DeadLine": "the deadline"}
        by_state = {"TIMEOUT": "the time limit", "CANCELLED": "scancel",
                    "NODE_FAIL": "a node failure", "PREEMPTED": "preemption",
                    "DEADLINE": "the deadline", "OUT_OF_MEMORY": "the memory limit"}
        return by_reason.get(reason) or by_state.get(self.job.get("JobState", ""), "")

    def findings(self) -> list[RunFinding]:
        """``run.slurm-ended``: who ended the job and how (empty before a SIGTERM)."""
        if self.t_term is None:
            return []
        self._asked.wait(11.0)
        st, why = self.job.get("JobState"), self.cause()
        wait = f"KillWait {self.kill_wait:g} s" if self.kill_wait is not None else "KillWait"
        said = ", ".join(f"{k} {self.job[k]}" for k in ("JobState", "Reason") if self.job.get(k))
        title = (f"Slurm ended the job{' (' + said + ')' if said else ''}"
                 f"{': ' + why if why else ''}; SIGTERM to every process of the step, "
                 f"SIGKILL after {wait}")
        return [RunFinding(
            id="run.slurm-ended", severity="warning", title=title,
            cause=f"Slurm's JobState {st or '?'}, Reason {self.job.get('Reason', '?')} "
                  f"(scontrol show job at the SIGTERM), {wait} (scontrol show config).",
            fix=(_NODE_FIX if why in ("a node set DOWN", "a node failure") else _TIME_FIX,))]

    def _snapshot(self, **changes: Any) -> RunInfo:
        s = self.sampler
        res = Resources(peak_rss_tree=s.peak_tree or None, peak_rss=s.peak_tree or None,
                        samples=s.samples, interval=INTERVAL, sampler_cpu=round(s.cpu, 4),
                        gpu_status=s.gpu_status, gpu_error=s.gpu_error)
        return replace(self.base, signals=tuple(self.state["signals"]), resources=res, **changes)

    def _run(self) -> None:
        try:
            self._ask()
        except Exception:  # noqa: BLE001, S110 - never let this thread end the job
            pass
        finally:
            self._asked.set()
        with contextlib.suppress(Exception):
            found = self.findings()
            with self.lock:
                if self.finished:
                    return
                with contextlib.suppress(OSError, EnvlockError):
                    self.write(self._snapshot(outcome="terminated", findings=tuple(found)))
            if self.kill_wait is None or self.t_term is None:
                return
            kill_at = self.t_term + self.kill_wait
            time.sleep(max(0.0, kill_at - KILL_MARGIN - time.monotonic()))
            with self.lock:
                if self.finished:
                    return
                end = dt_utc(time.time() + (kill_at - time.monotonic()))
                killed = RunFinding(
                    id="run.killed", severity="error",
                    title=f"killed by Slurm's SIGKILL, {self.kill_wait:g} s (KillWait) after its SIGTERM",
                    cause=(f"CMD was still running {KILL_MARGIN:g} s before Slurm's SIGKILL; "
                           "envlock is killed with the step, so this record was written then."),
                    fix=("End the program within KillWait of SIGTERM (save the checkpoint "
                         "first), or ask Slurm for a warning signal earlier (--signal).",))
                with contextlib.suppress(OSError, EnvlockError):
                    self.write(self._snapshot(outcome="killed", signal="SIGKILL", exit_code=137,
                                              end=end, wall=round(kill_at - self.state["t0"], 3),
                                              findings=(*found, killed)))


def dt_utc(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).replace(microsecond=0) \
        .isoformat().replace("+00:00", "Z")


