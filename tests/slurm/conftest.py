"""A real four-node Slurm cluster on this machine, for the tests of ``tests/slurm``.

The session fixture :func:`cluster` starts ``munged`` (its own key, socket, log, pid and seed
files in a temp dir: the machine's ``/etc/munge`` is neither read nor changed), one
``slurmctld`` and four ``slurmd`` (``-N n1`` … ``-N n4``, one port each, all on this host) from
a ``slurm.conf`` generated in the same temp dir, with free ports, ``KillWait=2``,
``MaxTime=2`` (minutes), ``JobAcctGatherParams=OverMemoryKill`` and a ``Prolog``/``TaskProlog``
that run the test's own hook scripts (``cluster.prolog(...)``, ``cluster.task_prolog(...)``).
It waits for ``sinfo`` to show the four nodes idle (with a deadline) and at the end cancels
every job, runs ``scontrol shutdown`` and kills each daemon still alive by its pid (from the
pid files Slurm and munged wrote): nothing is left running.

Slurm comes from Debian's packages (``slurm-wlm`` 22.05, ``munge``): when ``slurmctld`` is
missing and the tests run as root where ``apt-get`` exists, they are installed
(``apt-get update``, then ``apt-get install -y slurm-wlm munge``); elsewhere the tests skip in
one line.  Jobs run the envlock of the interpreter that runs the tests: its ``bin`` directory
is first on the ``PATH`` that ``sbatch``/``srun`` export to the job.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

NODES = ("n1", "n2", "n3", "n4")
#: the envlock that jobs and prologs run: the one of the venv the tests run in.
BIN = os.path.dirname(sys.executable)
ENVLOCK = os.path.join(BIN, "envlock")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/slurm/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.slurm)


def _install() -> str | None:
    """Install Slurm and munge from the machine's Debian registry; the reason when not."""
    if shutil.which("slurmctld") and shutil.which("munged"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "Slurm is not installed (slurmctld, munged) and cannot be: not root with apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"]):
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return f"{' '.join(cmd)}: no answer in 900 s"
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
            return f"{' '.join(cmd)} failed: {tail[0]}"
    if not (shutil.which("slurmctld") and shutil.which("munged")):
        return "apt-get installed slurm-wlm and munge but slurmctld/munged are not on PATH"
    return None


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


DISPATCH = """#!/bin/sh
# run the test's hook, if any, with this prolog's environment; its exit status is ours
h='{hook}'
[ -x "$h" ] || exit 0
exec "$h" "$@"
"""


@dataclass
class Cluster:
    """The running cluster: ``conf`` (slurm.conf), ``root`` (its temp dir), ``env`` (for
    the clients: ``SLURM_CONF``, the venv's ``bin`` first on ``PATH``)."""

    root: Path
    conf: Path
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)
    #: jobs that run across tests (submitted early, checked at the end): reset() spares them
    kept: set[str] = field(default_factory=set)

    # -- clients -----------------------------------------------------------------------------
    def cmd(self, *args: str, timeout: float = 30, check: bool = True, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (or any command) with the cluster's environment."""
        r = subprocess.run(list(args), env={**self.env, **(env or {})}, capture_output=True,
                           text=True, timeout=timeout, cwd=cwd)
        if check and r.returncode != 0:
            raise AssertionError(f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def sbatch(self, script: str, *opts: str, cwd: Path,
               env: Mapping[str, str] | None = None) -> str:
        """Submit ``script`` (its text) from ``cwd``; the job id."""
        path = cwd / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        r = self.cmd("sbatch", "--parsable", "-o", str(cwd / "slurm-%j.out"), *opts, str(path),
                     cwd=cwd, env=env)
        return r.stdout.strip().split(";")[0]

    def job(self, job: str) -> dict[str, str]:
        """``scontrol show job -o`` of ``job`` as a dict (the first record: an array's first task)."""
        r = self.cmd("scontrol", "show", "job", "-o", job, check=False)
        line = (r.stdout.strip().splitlines() or [""])[0]
        return dict(m.groups() for m in re.finditer(r"(\S+?)=(\S*)", line))

    def wait_job(self, job: str, *, deadline: float = 60,
                 states: Sequence[str] = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED",
                                          "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED")) -> dict[str, str]:
        """Poll until ``job`` is in one of ``states`` (with a deadline); its record."""
        end = time.monotonic() + deadline
        info: dict[str, str] = {}
        while time.monotonic() < end:
            info = self.job(job)
            if info.get("JobState") in states:
                return info
            time.sleep(0.2)
        raise AssertionError(f"job {job} not in {states} after {deadline} s: {info}")

    def node_state(self, node: str) -> str:
        """``sinfo``'s state of ``node`` (``idle``, ``drained``, …)."""
        return self.cmd("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()

    def wait_nodes(self, state: str = "idle", nodes: Sequence[str] = NODES,
                   deadline: float = 30, also: Sequence[str] = ()) -> None:
        """Poll ``sinfo`` until every one of ``nodes`` is in ``state``."""
        end = time.monotonic() + deadline
        seen = ""
        while time.monotonic() < end:
            r = self.cmd("sinfo", "-h", "-N", "-o", "%N %T", check=False)
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            seen = r.stdout + r.stderr
            if all(states.get(n) in (state, *also) for n in nodes):
                return
            time.sleep(0.2)
        raise AssertionError(f"nodes {nodes} not {state} after {deadline} s: {seen}")

    # -- the prolog hooks --------------------------------------------------------------------
    def prolog(self, text: str | None) -> None:
        """Make ``text`` (a script) the Prolog that runs on every node; ``None``: none."""
        self._hook("prolog-hook", text)

    def task_prolog(self, text: str | None) -> None:
        """Make ``text`` (a script) the TaskProlog that runs before every task; ``None``: none."""
        self._hook("task-prolog-hook", text)

    def _hook(self, name: str, text: str | None) -> None:
        p = self.root / name
        if text is None:
            p.unlink(missing_ok=True)
            return
        tmp = p.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o755)
        tmp.replace(p)

    def reset(self) -> None:
        """After a test: no hooks, no job left, every node idle again."""
        self.prolog(None)
        self.task_prolog(None)
        def others() -> list[str]:
            ids = self.cmd("squeue", "-h", "-o", "%i %F", check=False).stdout.split("\n")
            return [i.split()[0] for i in ids if i.split() and not
                    ({i.split()[0], i.split()[-1]} & self.kept)]

        if not self.kept:
            self.cmd("scancel", "--quiet", "--user=root", check=False)
        elif others():
            self.cmd("scancel", "--quiet", *others(), check=False)
        end = time.monotonic() + 30
        while time.monotonic() < end and others():
            time.sleep(0.2)
        r = self.cmd("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        for line in r.stdout.splitlines():
            node, st = line.split()
            if st not in ("idle", "allocated", "mixed", "completing"):
                self.cmd("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        self.wait_nodes("idle", also=("mixed",) if self.kept else ())


def _conf(root: Path, sock: Path, ports: list[int]) -> str:
    host = socket.gethostname().split(".")[0]
    lines = [
        "ClusterName=envlocktest",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={sock}",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=task=1",
        "JobAcctGatherParams=OverMemoryKill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "KillWait=2",
        "MinJobAge=600",
        "DefMemPerNode=500",
        "ReturnToService=2",
        "InactiveLimit=0",
        "MpiDefault=none",
        "OverTimeLimit=0",
        f"Prolog={root}/prolog.sh",
        f"TaskProlog={root}/task-prolog.sh",
    ]
    lines += [f"NodeName={n} NodeHostname={host} Port={p} CPUs=2 RealMemory=4000"
              for n, p in zip(NODES, ports[2:], strict=True)]
    lines.append("PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=2 State=UP OverSubscribe=FORCE")
    return "\n".join(lines) + "\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is gone
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _read_pid(p: Path, deadline: float = 10) -> int:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError):
            return int(p.read_text().strip())
        time.sleep(0.05)
    raise AssertionError(f"{p}: no pid after {deadline} s")


def _stepds(root: Path) -> list[int]:
    """The slurmstepd processes of this cluster (their environment names its ``SLURM_CONF``)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if not (d / "cmdline").read_bytes().startswith(b"slurmstepd"):
                continue
            if f"SLURM_CONF={root}/slurm.conf".encode() in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


def _stop(c: Cluster) -> None:
    c.kept.clear()
    with contextlib.suppress(Exception):
        c.reset()
    with contextlib.suppress(Exception):
        c.cmd("scontrol", "shutdown", check=False, timeout=15)
    slurm = {k: v for k, v in c.pids.items() if k != "munged"}
    end = time.monotonic() + 15
    while time.monotonic() < end and any(_alive(p) for p in slurm.values()):
        time.sleep(0.1)
    for pid in [*slurm.values(), *_stepds(c.root)]:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    munged = c.pids.get("munged")
    if munged and _alive(munged):
        os.kill(munged, signal.SIGTERM)
        end = time.monotonic() + 10
        while time.monotonic() < end and _alive(munged):
            time.sleep(0.05)
        if _alive(munged):
            os.kill(munged, signal.SIGKILL)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Start the cluster (see the module docstring), yield it, stop it."""
    why = _install()
    if why:
        pytest.skip(f"no Slurm: {why}")
    root = tmp_path_factory.mktemp("slurm")
    root.chmod(0o711)
    for d in ("state", "spool", "log", "munge"):
        (root / d).mkdir()
    munge = root / "munge"
    munge.chmod(0o711)
    (munge / "munge.key").write_bytes(os.urandom(1024))
    (munge / "munge.key").chmod(0o400)
    sock = munge / "sock"
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, sock, _free_ports(2 + len(NODES))))
    for name, hook in (("prolog.sh", "prolog-hook"), ("task-prolog.sh", "task-prolog-hook")):
        (root / name).write_text(DISPATCH.format(hook=root / hook))
        (root / name).chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    for k in list(env):
        if k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")) and k != "SLURM_CONF":
            del env[k]
    c = Cluster(root=root, conf=conf, env=env)
    try:
        subprocess.run(["munged", "--force", f"--socket={sock}", f"--key-file={munge}/munge.key",
                        f"--log-file={munge}/munged.log", f"--pid-file={munge}/munged.pid",
                        f"--seed-file={munge}/munged.seed"], check=True, timeout=20,
                       capture_output=True)
        c.pids["munged"] = _read_pid(munge / "munged.pid")
        subprocess.run(["slurmctld", "-f", str(conf)], env=env, check=True, timeout=20,
                       capture_output=True)
        c.pids["slurmctld"] = _read_pid(root / "slurmctld.pid")
        for n in NODES:
            subprocess.run(["slurmd", "-N", n, "-f", str(conf)], env=env, check=True, timeout=20,
                           capture_output=True)
            c.pids[n] = _read_pid(root / f"slurmd-{n}.pid")
        c.wait_nodes("idle", deadline=60)
    except BaseException:
        _stop(c)
        raise
    try:
        yield c
    finally:
        _stop(c)


#: CMD of the jobs that Slurm ends: it logs each signal it gets (time, name) to ``$1`` and
#: runs on (its SIGTERM handler does not exit), so only Slurm's SIGKILL ends it.
SIGNAL_LOGGER = """import os, signal, sys, time
log = open(sys.argv[1], 'a', buffering=1)
def h(n, f):
    log.write(f'{time.time():.3f} {signal.Signals(n).name}\\n')
for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):
    signal.signal(s, h)
log.write(f'{time.time():.3f} start\\n')
while True:
    time.sleep(0.05)
"""


@dataclass
class TimedJob:
    """A batch job that reaches its time limit (1 min, the shortest Slurm has; its timer
    looks every 30 s): submitted when the first test starts, checked by the last ones, so the
    minute and a half runs alongside the other tests."""

    job: str
    dir: Path


@pytest.fixture(scope="session")
def timed_job(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> TimedJob:
    """``exec envlock run`` of :data:`SIGNAL_LOGGER` with ``--time=1``, ``--signal=B:USR1@40``
    (the batch shell, envlock, gets SIGUSR1 about 20 s in), on n4 with 100 MiB."""
    d = tmp_path_factory.mktemp("timed")
    (d / "logger.py").write_text(SIGNAL_LOGGER)
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              f"exec envlock run --dir {d}/run -- python {d}/logger.py {d}/signals.log\n")
    job = cluster.sbatch(script, "--time=1", "--signal=B:USR1@40", "--mem=100", "-w", "n4",
                         cwd=d)
    cluster.kept.add(job)
    return TimedJob(job=job, dir=d)


@pytest.fixture()
def slurm(cluster: Cluster, timed_job: TimedJob) -> Iterator[Cluster]:
    """The cluster, reset after the test (no hooks, no jobs, every node idle)."""
    try:
        yield cluster
    finally:
        cluster.reset()
