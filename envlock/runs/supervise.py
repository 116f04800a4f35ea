"""``envlock run``: run a job's command as a child and record the run (``run.toml``).

The command runs in its own process group with envlock's stdin, stdout, stderr and
environment, unchanged (``close_fds=False``: other inherited descriptors pass too).  envlock
becomes the *child subreaper* of the tree (prctl(2)), forwards SIGTERM, SIGINT, SIGUSR1, SIGHUP and
SIGQUIT to the command's process group and records them, and samples the tree from ``/proc`` in a
background thread (:class:`Sampler`).  When the command ends, the processes still alive
below envlock outlived it: they are killed (SIGTERM, then SIGKILL after a grace period) unless
``keep_children``.  The run record is written twice, atomically: at the start
(``outcome = "running"``, so that a SIGKILL of envlock itself leaves an honest record) and at
the end.

The exit status is the command's; a command ended by signal ``n`` gives ``128 + n`` (as shells
report it); a command that cannot be started gives 127 (not found) or 126 (not executable),
as ``env`` and ``timeout`` do.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from envlock._run import Runner, run
from envlock.errors import EnvlockError
from envlock.manifest.processtables import (
    Granted,
    GpuUse,
    Leftover,
    ReceivedSignal,
    Resources,
    RunFinding,
    RunInfo,
)
from envlock.runs import proctree
from envlock.redact import redact_argv
import datetime as _dt

__all__ = ["FORWARDED", "Sampler", "RunResult", "supervise", "write_record", "exit_code_of"]

#: signals forwarded to the command's process group (Slurm sends SIGTERM before the time limit,
#: ``--signal=USR1@secs`` a warning; Ctrl-C is SIGINT; a closed terminal or ``kill -HUP`` is
#: SIGHUP; Ctrl-\ is SIGQUIT).  Without a handler SIGHUP and SIGQUIT would end envlock and
#: leave the command unsupervised, its record stuck at ``running``.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP,
             signal.SIGQUIT)
#: forwarded signals that ask the job to stop: a run that received one is ``terminated``.
STOPPING = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
#: seconds between two samples of the tree; the first 10 s are sampled every 0.1 s.
INTERVAL = 0.5
#: at most this fraction of one core is spent sampling: a sample that cost ``c`` CPU seconds
#: waits at least ``c / BUDGET`` before the next.
BUDGET = 0.01
#: seconds between two GPU samples (``nvidia-smi`` costs ~50 ms of CPU).
GPU_INTERVAL = 15.0
#: seconds leftover processes get between SIGTERM and SIGKILL.
GRACE = 5.0


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


@dataclass(frozen=True)
class RunResult:
    """What :func:`supervise` did: the record written (``write_error`` when it could not be:
    the exit code is still the command's) and the exit code to return."""

    record: RunInfo
    path: str
    exit_code: int
    write_error: str | None = None


def exit_code_of(status: int) -> tuple[int | None, str | None, int]:
    """``(exit status, signal name, shell-style exit code)`` of a ``wait`` status."""
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        return None, _signame(n), 128 + n
    code = os.WEXITSTATUS(status)
    return code, None, code


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _utc() -> str:
    from envlock.probes.assemble import utc_now

    return utc_now()


def write_record(path: str, info: RunInfo, *, target: Mapping[str, Any] | None,
                 command: Sequence[str]) -> str:
    """Write ``run.toml`` atomically: ``[envlock]`` (schema, version, created, host, command),
    ``[target]`` (from the snapshot), ``[run]``.  Returns the path.

    :raises OutputExistsError: ``path`` is a symbolic link (never written through).
    :raises OSError: it cannot be written (a full disk names inodes when none is left).
    """
    from envlock._version import __version__
    from envlock._io import write_file
    from envlock.manifest import _model, _toml
    from envlock.manifest._schema import SCHEMA

    doc = {
        "envlock": {"schema": SCHEMA, "version": __version__, "created": _utc(),
                    "host": socket.gethostname(),
                    "command": list(redact_argv(command))},
        "target": dict(target) if target else {"kind": "system", "prefix": sys.prefix,
                                               "chosen-by": "none"},
        "run": _model.to_dict(info),
    }
    # replaced (prepare_dir refused an earlier record without --force); a symbolic link planted
    # at run.toml is refused, never written through (envlock._io.write_file)
    write_file(path, _toml.dumps(doc, "toml"), force=True)
    return path


def _sha256(path: str) -> str | None:
    from envlock._io import InputError, read_bytes

    try:
        return hashlib.sha256(read_bytes(path)).hexdigest()
    except InputError:
        return None


def slurm_context(environ: Mapping[str, str]) -> str | None:
    """Where envlock runs in a Slurm job: ``"step"`` (a task of an ``srun`` step:
    ``SLURM_STEP_ID`` is set), ``"batch"`` (the batch script's step: ``SLURM_JOB_ID`` without
    ``SLURM_STEP_ID``), ``None`` outside Slurm."""
    if not (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")):
        return None
    return "step" if environ.get("SLURM_STEP_ID", "").strip().isdigit() else "batch"


def forwards(sig: int, context: str | None) -> bool:
    """Whether envlock forwards ``sig`` to CMD's process group, so that CMD gets it exactly once.

    The rule, seen on a real Slurm 22.05 (``tests/slurm``, docs/run.md "Signals under Slurm"):
    Slurm signals every process of a step itself — the time limit's and a plain ``scancel``'s
    SIGTERM in the batch step and in ``srun`` steps, ``scancel --signal=SIG`` and
    ``--signal=SIG@N`` in ``srun`` steps (and ``srun``'s own forwarding of Ctrl-C) — so such a
    signal reached CMD already: it is recorded, not forwarded.  Only the batch script's own
    process gets ``--signal=B:SIG@N`` and ``scancel -b --signal=SIG``: in the batch step
    every signal but SIGTERM is forwarded.  Outside Slurm every signal is forwarded."""
    if context == "step":
        return False
    if context == "batch":
        return sig != signal.SIGTERM
    return True


@contextlib.contextmanager
def _forwarding(state: dict[str, Any]) -> Any:
    """Install handlers that forward :data:`FORWARDED` signals to ``state["pgid"]`` and record
    them; a signal envlock was started with ignored stays ignored (the child inherits that)."""
    old: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        # Recorded before it is forwarded: the handler of a signal that arrives while this one
        # runs (CPython runs it between two bytecodes of this one) must land after it in the list.
        pgid = state.get("pgid")
        forward = forwards(signum, state.get("slurm"))
        entry = ReceivedSignal(name=_signame(signum), after=round(time.monotonic() - state["t0"], 3),
                               forwarded=forward)
        received: list[ReceivedSignal] = state["signals"]
        received.append(entry)
        on_signal = state.get("on_signal")
        if on_signal is not None:
            on_signal(signum)
        if not forward:
            return
        if pgid is None:
            state.setdefault("pending", []).append(signum)
            return
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            for i, r in enumerate(received):
                if r is entry:
                    received[i] = replace(entry, forwarded=False)
                    break

    for sig in FORWARDED:
        cur = signal.getsignal(sig)
        if cur is signal.SIG_IGN:
            continue
        old[sig] = cur
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _foreground(pgid: int | None) -> int | None:
    """Give the controlling terminal to ``pgid`` when envlock is its foreground group (so the
    command can read the terminal and Ctrl-C reaches it); returns the group to give it back to."""
    try:
        if not os.isatty(0) or os.tcgetpgrp(0) != os.getpgrp():
            return None
        mine = os.getpgrp()
        if pgid is not None:
            _tcset(pgid)
        return mine
    except OSError:
        return None


def _tcset(pgid: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, pgid)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def _wait(pid: int, term_owner: int | None) -> tuple[int, Any]:
    """Wait for ``pid`` to end.  On a terminal, act as a job-control proxy: when the command is
    stopped (Ctrl-Z) take the terminal back and stop envlock too, so the shell regains control;
    on ``fg`` give the terminal to the command again and continue it (what a shell does,
    POSIX "Job Control")."""
    while True:
        _, status, usage = os.wait4(pid, os.WUNTRACED if term_owner is not None else 0)
        if not os.WIFSTOPPED(status):
            return status, usage
        _tcset(term_owner)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGSTOP)
        with contextlib.suppress(OSError):  # resumed: in the foreground (fg) or not (bg)
            if os.tcgetpgrp(0) == os.getpgrp():
                _tcset(pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)


def _outcome(exit_status: int | None, sig: str | None, received: Sequence[str]) -> str:
    """``[run] outcome`` (docs/run.md).  SIGPIPE is ``output-closed``: the reader of the
    command's output went away (``envlock run -- yes | head -1``) and the kernel ended the
    writer, the normal end of a producer in a pipeline (POSIX ``write()``: EPIPE and SIGPIPE
    when no process has the pipe open for reading) — not a crash."""
    if any(s in STOPPING for s in received):
        return "terminated"
    if sig is not None:
        if sig == "SIGPIPE":
            return "output-closed"
        return "killed" if sig == "SIGKILL" else (
            "terminated" if sig in ("SIGTERM", "SIGINT", "SIGHUP") else "crashed")
    return "succeeded" if exit_status == 0 else "failed"


def supervise(
    command: Sequence[str],
    *,
    record_path: str,
    target: Mapping[str, Any] | None = None,
    manifest_path: str | None = None,
    verify: str | None = None,
    verify_exit: int | None = None,
    keep_children: bool = False,
    environ: Mapping[str, str] | None = None,
    runner: Runner = run,
    granted: Granted | None = None,
    grace: float = GRACE,
    gpu: bool = True,
    driver_file: str = "/proc/driver/nvidia/version",
    envlock_command: Sequence[str] = (),
    on_findings: Callable[[Sequence[RunFinding]], None] | None = None,
) -> RunResult:
    """Run ``command`` as described in the module docstring and write its record.

    :param command: program and arguments (no shell; use ``bash -c`` for one).
    :param record_path: where ``run.toml`` goes (replaced).
    :param target: the snapshot's ``[target]`` table, copied into the record.
    :param manifest_path: the snapshot file; its sha256 is recorded.
    :param verify: the verify policy used; ``verify_exit``: its exit status.
    :param keep_children: leave processes that outlive the command running.
    :param environ: the environment for the grant and ``nvidia-smi`` (``os.environ``); the
        command itself always gets envlock's own environment, unchanged.
    :param granted: the grant (default: read now, :func:`envlock.runs.granted.granted`).
    :param grace: seconds between SIGTERM and SIGKILL for leftover processes.
    :param gpu: sample GPU memory when an NVIDIA driver (``driver_file`` exists) and
        ``nvidia-smi`` (on ``PATH`` of ``environ``) are present.
    :param on_findings: called with the findings before the record is written (printing).
    :returns: a :class:`RunResult`; never raises for the command's failures.
    """
    env = os.environ if environ is None else environ
    if granted is None:
        from envlock.runs.granted import granted as read_granted

        granted = read_granted(env, runner=runner)
    base = RunInfo(
        outcome="running", command=tuple(command), cwd=os.getcwd(), start=_utc(),
        manifest=os.path.basename(manifest_path) if manifest_path else None,
        manifest_sha256=_sha256(manifest_path) if manifest_path else None,
        verify=verify, verify_exit=verify_exit, keep_children=keep_children, granted=granted,
        supervisor=os.getpid(), supervisor_start=proctree.start_time(os.getpid()),
        boot_id=proctree.boot_id(),
    )

    base = replace(base, command=redact_argv(command))
    write = lambda info: write_record(record_path, info, target=target,  # noqa: E731
                                      command=envlock_command)
    state: dict[str, Any] = {"t0": time.monotonic(), "signals": [], "pgid": None,
                             "slurm": slurm_context(env)}
    ending = _SlurmEnding(env, runner, write) if state["slurm"] else None
    subreaper = proctree.set_subreaper()
    with _forwarding(state):
        term_owner = _foreground(None)
        t0 = time.monotonic()
        import tempfile

        usage_dir = tempfile.mkdtemp(prefix="envlock-run-")  # 0700: nobody else writes there
        usage_file = os.path.join(usage_dir, "rusage")
        try:
            argv = _launcher(command, usage_file)
            if sys.version_info >= (3, 11):
                proc = subprocess.Popen(argv, close_fds=False, process_group=0)  # noqa: S603
            else:  # Python 3.10's Popen has no process_group: setpgid(0, 0) in the child, as 3.11 does
                proc = subprocess.Popen(argv, close_fds=False,  # noqa: S603
                                        preexec_fn=lambda: os.setpgid(0, 0))
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            info = replace(base, outcome="not-started", end=_utc(), exit_code=code,
                           error=f"{command[0]}: {exc.strerror or exc}")
            try:
                write(info)
            except (OSError, EnvlockError) as err:
                return RunResult(info, record_path, code, write_error=_why(record_path, err))
            return RunResult(info, record_path, code)
        state["pgid"] = proc.pid
        if term_owner is not None:
            _tcset(proc.pid)
            # a read of the terminal before the hand-over stopped it (SIGTTIN): resume it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
        for sig in state.pop("pending", []):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        sampler = Sampler(root=os.getpid(), environ=env, runner=runner, gpu_enabled=gpu,
                          driver_file=driver_file,
                          exclude={proc.pid} if argv[0] == SHELL else set(),
                          launcher=proc.pid if argv[0] == SHELL else None)
        if argv[0] == SHELL:
            with contextlib.suppress(Exception):
                sampler.sample()  # CMD's pid for the record written at the start
        sampler.start()
        base = replace(base, pid=sampler.cmd_pid or proc.pid)
        with contextlib.suppress(OSError, EnvlockError):
            write(base)
        if ending is not None:
            ending.arm(base, state, sampler, granted)
            if granted is not None and granted.memory:
                sampler.on_sample = ending.memory
        status, usage = _wait(proc.pid, term_owner)
        if ending is not None:
            ending.done()
        proc.returncode = exit_code_of(status)[2]  # waited for here; Popen must not wait again
        if argv[0] == SHELL:
            status, usage = _reported(usage_file, status, usage)
        with contextlib.suppress(OSError):
            os.rmdir(usage_dir)
        wall = time.monotonic() - t0
        if term_owner is not None:
            _tcset(term_owner)
        end = _utc()
        sampler.stop()
        # what outlived the command: the tree below envlock now (orphans are re-parented to
        # envlock, the subreaper), and without a subreaper every process seen that still runs
        left = sampler.tree()
        if not subreaper:
            left += [p for p, (st, _c) in sampler.seen.items()
                     if p not in left and p != proc.pid and proctree.alive(p, st)]
        left = [p for p in left if proctree.alive(p, None)]
        if left:
            sampler.sample()
            sampler.sample_gpu(left)
        ids = {p: (sampler.seen.get(p) or (proctree.start_time(p), proctree.cmdline(p))) for p in left}
        if left and not keep_children:
            actions = proctree.terminate({p: ids[p][0] for p in left}, grace)
        else:
            actions = dict.fromkeys(left, "kept")
        proctree.reap()
    children = tuple(Leftover(pid=p, command=ids[p][1], rss=sampler.peak_pid.get(p),
                              gpu_memory=sampler.gpu.get(p, (None, ""))[0],
                              action=actions[p]) for p in left)
    exit_status, sig, code = exit_code_of(status)
    received = tuple(s.name for s in state["signals"])
    max_rss = usage.ru_maxrss * 1024 if usage.ru_maxrss else None  # KiB on Linux (getrusage(2))
    resources = Resources(
        max_rss=max_rss, peak_rss_tree=sampler.peak_tree or None,
        peak_rss=max(max_rss or 0, sampler.peak_tree) or None,
        cpu_user=round(usage.ru_utime, 3), cpu_system=round(usage.ru_stime, 3),
        samples=sampler.samples, interval=INTERVAL, sampler_cpu=round(sampler.cpu, 4),
        gpu_status=sampler.gpu_status, gpu_error=sampler.gpu_error,
        gpu_memory=tuple(GpuUse(pid=p, memory=m, gpu_uuid=u or None,
                                command=(sampler.seen.get(p) or (None, None))[1])
                         for p, (m, u) in sorted(sampler.gpu.items())),
    )
    outcome = _outcome(exit_status, sig, received)
    slurm_end = ending.findings() if ending is not None else []
    from envlock.runs.outcome import run_findings

    findings = run_findings(outcome=outcome, exit_status=exit_status, signal=sig,
                            received=received, wall=wall, end=end, resources=resources,
                            granted=granted, children=children, keep_children=keep_children,
                            forwarded=all(s.forwarded for s in state["signals"]))
    findings = slurm_end + findings
    if sampler.cmd_pid:
        base = replace(base, pid=sampler.cmd_pid)
    info = replace(base, outcome=outcome, end=end, wall=round(wall, 3), exit_status=exit_status,
                   signal=sig, exit_code=code, signals=tuple(state["signals"]),
                   resources=resources, children=children, findings=tuple(findings))
    if on_findings is not None:
        on_findings(findings)
    try:
        write(info)
    except (OSError, EnvlockError) as exc:  # the command's exit status matters more than its record
        return RunResult(info, record_path, code, write_error=_why(record_path, exc))
    return RunResult(info, record_path, code)


#: the shell that starts CMD (see :func:`_launcher`).
SHELL = "/bin/sh"
#: the launcher script: ``$1`` the usage file, ``$2`` the Python that reports, then CMD.  The
#: traps keep the shell alive through signals sent to the whole group or step (Slurm signals
#: every process of a step); a trapped signal is reset to its default in the subshell, one
#: ignored when envlock started stays ignored there (POSIX ``trap``), so CMD sees the
#: dispositions envlock had.  ``(exec "$@")`` runs CMD as a program (never a shell builtin),
#: forked from the shell; its ``$?`` and the shell's RUSAGE_CHILDREN (CMD and what it waited
#: for, nothing else) are written by the reporter, which then exits with that status.
#: The shell's own stderr is ``/dev/null`` (dash prints "Segmentation fault" for a child a
#: signal ended, buffered until it exits); CMD and the reporter get the real one back from
#: descriptor ``{fd}``, a number no descriptor envlock inherited uses, closed for them.
_SCRIPT = ('trap : HUP INT QUIT TERM USR1 USR2 ALRM PIPE VTALRM PROF XCPU XFSZ; '
           'u=$1; py=$2; shift 2; exec {fd}>&2 2>/dev/null; (exec "$@" 2>&{fd} {fd}>&-); '
           'exec "$py" -S -I -c "$0" "$u" "$?" 2>&{fd} {fd}>&-')
_SCRIPT_NO_STDERR = ('trap : HUP INT QUIT TERM USR1 USR2 ALRM PIPE VTALRM PROF XCPU XFSZ; '
                     'u=$1; py=$2; shift 2; (exec "$@"); exec "$py" -S -I -c "$0" "$u" "$?"')
_REPORT = ("import resource, sys\n"
           "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "with open(sys.argv[1], 'w') as f:\n"
           "    f.write(f'{sys.argv[2]} {r.ru_maxrss} {r.ru_utime} {r.ru_stime}\\n')\n"
           "sys.exit(int(sys.argv[2]))\n")


def _launcher(command: Sequence[str], usage_file: str) -> list[str]:
    """The argv that starts ``command``: through :data:`SHELL`, so that its max RSS is its own.

    Why: the kernel's ``ru_maxrss`` of a process counts every address space it had, and a
    process forked (or vforked, as CPython's ``subprocess`` does) from envlock starts in a copy
    of envlock's (~30 MB): ``exec`` then records that copy's high-water mark (Linux
    ``fs/exec.c``, ``exec_mmap``: ``setmax_mm_hiwater_rss``).  GNU time forks from its own
    small process; envlock does the same through ``/bin/sh`` (a few hundred KiB), whose
    ``RUSAGE_CHILDREN`` is read by the reporter it ``exec``\\ s after CMD ends.

    The program is looked up first, as ``execvp`` looks it up (``PATH``), so that a CMD that
    cannot be started still fails here with the ``OSError`` ``subprocess`` would raise.
    Without ``/bin/sh`` the command is started directly (its max RSS then includes envlock's).

    :raises FileNotFoundError: the program is not found; ``PermissionError``: not executable.
    """
    import shutil

    prog = command[0]
    path = prog if "/" in prog else shutil.which(prog, mode=os.F_OK) or ""
    if not path or not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", prog)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(13, "Permission denied", prog)
    free = [n for n in range(3, 10) if not _is_open(n)]  # the shell's redirections: 0-9
    if not os.access(SHELL, os.X_OK) or not free:
        return list(command)
    script = _SCRIPT.format(fd=free[-1])
    if not _inherited(2):  # stderr closed for CMD (``2>&-``, envlock._io.null_closed_streams)
        script = _SCRIPT_NO_STDERR
    return [SHELL, "-c", script, _REPORT, usage_file, sys.executable, *command]


def _inherited(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:
        return False


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class _Usage:
    """The ``ru_maxrss``, ``ru_utime``, ``ru_stime`` the reporter wrote (KiB, seconds)."""

    def __init__(self, maxrss: int, utime: float, stime: float) -> None:
        self.ru_maxrss, self.ru_utime, self.ru_stime = maxrss, utime, stime


def _reported(usage_file: str, status: int, usage: Any) -> tuple[int, Any]:
    """CMD's wait status and usage from the launcher's reporter (:func:`_launcher`).

    ``$?`` is the shell's: ``128 + n`` for a CMD ended by signal ``n`` (POSIX "Exit Status for
    Commands"), read back as that signal.  When the shell itself ended by a signal (SIGKILL to
    the whole step: Slurm's KillWait, the over-memory kill) there is no report: its own status
    stands, and the max RSS is not known (``None``) rather than envlock's."""
    try:
        with open(usage_file, encoding="ascii") as f:
            code_s, rss_s, ut_s, st_s = f.read().split()
        code, rss, ut, st = int(code_s), int(rss_s), float(ut_s), float(st_s)
    except (OSError, ValueError):
        return status, _Usage(0, usage.ru_utime, usage.ru_stime)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(usage_file)
    if 128 < code < 128 + 65 and code - 128 in set(map(int, signal.Signals)):
        wait_status = code - 128  # WIFSIGNALED, WTERMSIG = n
    else:
        wait_status = (code & 0xFF) << 8  # WIFEXITED, WEXITSTATUS = code
    return wait_status, _Usage(rss, ut, st)


#: seconds before Slurm's SIGKILL (KillWait after its SIGTERM) at which the record of the kill
#: is written: envlock is killed with the step and cannot write it afterwards.
KILL_MARGIN = 0.5


class _SlurmEnding:
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
        """Watch for the first SIGTERM from now on (``state["on_signal"]``)."""
        self.base, self.state, self.sampler, self.granted = base, state, sampler, granted

        def on_signal(signum: int) -> None:
            if signum == signal.SIGTERM and self._thread is None:
                self.t_term = time.monotonic()
                self._thread = threading.Thread(target=self._run, name="envlock-run-slurm-end",
                                                daemon=True)
                self._thread.start()

        state["on_signal"] = on_signal
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
                                          end=_dt_utc(time.time()),
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
            fix=("Ask for more time (--time) and checkpoint on SIGTERM, or on an earlier "
                 "--signal=B:USR1@300 warning; the program has KillWait seconds after SIGTERM.",))]

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
                end = _dt_utc(time.time() + (kill_at - time.monotonic()))
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


def _dt_utc(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).replace(microsecond=0) \
        .isoformat().replace("+00:00", "Z")


def _why(path: str, exc: BaseException) -> str:
    """One line: why the record could not be written (an OutputExistsError names the path)."""
    if isinstance(exc, OSError):
        return f"{path}: {exc.strerror or exc}"
    return str(exc)

