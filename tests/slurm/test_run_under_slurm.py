"""``envlock run`` in real Slurm jobs: what Slurm granted, as the record reads it."""

from __future__ import annotations


import time
import tomllib
from pathlib import Path

from tests.slurm.conftest import BIN, SIGNAL_LOGGER, Cluster, TimedJob


def test_the_grant_is_read_from_the_real_job(slurm: Cluster, tmp_path: Path) -> None:
    """--mem=300 (MiB), --time=2 (minutes) and an array task: the record's [run.granted] has
    300 MiB from SLURM_MEM_PER_NODE, 120 s from ``scontrol show job``, and the job id; the run
    directory's {job} is ``<array job>_<task>``; the array ids are in the snapshot."""
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              "exec envlock run --dir 'runs/{job}' -q -- python -c 'print(1)'\n")
    job = slurm.sbatch(script, "--mem=300", "--time=2", "--array=3", "--cpus-per-task=2",
                       cwd=tmp_path)
    info = slurm.wait_job(f"{job}_3")
    assert info["JobState"] == "COMPLETED", info
    rec = tomllib.loads((tmp_path / "runs" / f"{job}_3" / "run.toml").read_text())["run"]
    g = rec["granted"]
    assert rec["outcome"] == "succeeded"
    assert g["scheduler"] == "slurm" and g["memory"] == 300 * 2**20, g
    assert g["time-limit"] == 120 and g["time-limit-source"] == "scontrol show job", g
    # job-id is the task's own SLURM_JOB_ID (what scontrol knows it by); the array ids are in
    # the snapshot's [slurm.vars]
    assert g["job-id"] == info["JobId"], (g, info["JobId"])
    man = tomllib.loads((tmp_path / "runs" / f"{job}_3" / "manifest.toml").read_text())
    assert man["slurm"]["vars"]["SLURM_ARRAY_JOB_ID"] == job
    assert man["slurm"]["vars"]["SLURM_ARRAY_TASK_ID"] == "3"
    # --cpus-per-task and the node list, as Slurm granted them (scontrol is the oracle)
    assert man["slurm"]["cpus-per-task"] == 2 and info["NumCPUs"] == "2", (man["slurm"], info)
    assert man["slurm"]["cpus-on-node"] == 2
    assert man["slurm"]["nodelist"] == info["NodeList"], (man["slurm"], info["NodeList"])


def _log(path: Path) -> list[str]:
    return [ln.split()[1] for ln in path.read_text().splitlines()] if path.exists() else []


def _wait_for(pred, deadline: float = 30) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("not reached in time")


def _record(d: Path) -> dict:  # type: ignore[type-arg]
    return tomllib.loads((d / "run.toml").read_text())["run"]


def _shown_json(slurm: Cluster, d: Path) -> dict:  # type: ignore[type-arg]
    """``[run]`` as ``envlock show --format json`` reads it (a record still ``running`` whose
    supervisor is gone read as Slurm ended it: :mod:`envlock.runs.unfinished`)."""
    import json

    out = slurm.cmd(f"{BIN}/envlock", "show", "--format", "json", str(d / "run.toml")).stdout
    return json.loads(out)["run"]  # type: ignore[no-any-return]


def _show(slurm: Cluster, d: Path) -> str:
    out = slurm.cmd(f"{BIN}/envlock", "show", str(d / "run.toml"), check=False).stdout
    return " ".join(out.split())  # show wraps long lines at 80 columns


def test_scancel_signals_reach_the_command_once_and_are_recorded_once(slurm: Cluster,
                                                                     tmp_path: Path) -> None:
    """``scancel --signal=USR1`` of a job whose ``srun`` step runs envlock: Slurm signals every
    process of the step, so envlock records it (``forwarded = false``) and CMD gets it once;
    ``scancel -b --signal=USR2`` reaches the batch shell alone (envlock, exec'd): forwarded,
    once. Then a plain ``scancel``: SIGTERM once to each CMD, SIGKILL after KillWait, and each
    record on disk says so (``killed``, Slurm's CANCELLED), as ``show`` prints it."""
    (tmp_path / "logger.py").write_text(SIGNAL_LOGGER)
    head = f"#!/bin/bash\nsource {BIN}/activate\n"
    step = slurm.sbatch(head + f"srun envlock run --dir {tmp_path}/step -- python "
                        f"{tmp_path}/logger.py {tmp_path}/step.log\n", "--mem=100", cwd=tmp_path)
    batch = slurm.sbatch(head + f"exec envlock run --dir {tmp_path}/batch -- python "
                         f"{tmp_path}/logger.py {tmp_path}/batch.log\n", "--mem=100", cwd=tmp_path)
    for name in ("step", "batch"):
        _wait_for(lambda n=name: "start" in _log(tmp_path / f"{n}.log"))
    slurm.cmd("scancel", "--signal=USR1", step)
    slurm.cmd("scancel", "-b", "--signal=USR2", batch)
    _wait_for(lambda: "SIGUSR1" in _log(tmp_path / "step.log")
              and "SIGUSR2" in _log(tmp_path / "batch.log"))
    time.sleep(1.0)  # a second delivery (a forwarded copy) would be here by now
    assert _log(tmp_path / "step.log") == ["start", "SIGUSR1"]
    assert _log(tmp_path / "batch.log") == ["start", "SIGUSR2"]
    slurm.cmd("scancel", step, batch)
    for job in (step, batch):
        assert slurm.wait_job(job)["JobState"] == "CANCELLED"
    time.sleep(0.5)
    for name, first, forwarded in (("step", "SIGUSR1", False), ("batch", "SIGUSR2", True)):
        assert _log(tmp_path / f"{name}.log") == ["start", first, "SIGTERM"], name
        rec = _record(tmp_path / name)
        sigs = [(s["name"], s["forwarded"]) for s in rec["signals"]]
        assert sigs == [(first, forwarded), ("SIGTERM", False)], (name, sigs)
        assert rec["outcome"] == "killed" and rec["signal"] == "SIGKILL", (name, rec)
        ids = [f["id"] for f in rec["findings"]]
        assert "run.slurm-ended" in ids and "run.killed" in ids, ids
        [ended] = [f for f in rec["findings"] if f["id"] == "run.slurm-ended"]
        # at the SIGTERM a scancel'd job is COMPLETING, with no reason (not the time limit)
        assert "JobState COMPLETING" in ended["title"] and "KillWait 2 s" in ended["title"], ended
        assert "time limit" not in ended["title"], ended
        out = _show(slurm, tmp_path / name)
        assert "run: killed (SIGKILL)" in out and "Slurm ended the job (JobState" in out, out


def test_the_time_limit_sigterm_then_killwait_and_a_final_record(slurm: Cluster,
                                                                timed_job: TimedJob) -> None:
    """The job submitted when the suite started (``timed_job``: ``--time=1``,
    ``--signal=B:USR1@40``): SIGUSR1 reaches the batch shell, envlock, which forwards it
    (once); at the limit Slurm's SIGTERM reaches every process (recorded, not forwarded: CMD
    gets it once); KillWait (2 s) later SIGKILL ends CMD and envlock, and ``run.toml`` is
    final — ``killed``, Slurm's TIMEOUT named — not ``running``."""
    info = slurm.wait_job(timed_job.job, deadline=150)
    assert info["JobState"] == "TIMEOUT", info
    time.sleep(0.5)
    log = timed_job.dir / "signals.log"
    assert _log(log) == ["start", "SIGUSR1", "SIGTERM"], log.read_text()
    t_term = float(log.read_text().splitlines()[-1].split()[0])
    rec = _record(timed_job.dir / "run")
    assert rec["outcome"] == "killed" and rec["signal"] == "SIGKILL", rec
    sigs = [(s["name"], s["forwarded"]) for s in rec["signals"]]
    assert sigs == [("SIGUSR1", True), ("SIGTERM", False)], sigs
    [ended] = [f for f in rec["findings"] if f["id"] == "run.slurm-ended"]
    assert "Reason TimeLimit" in ended["title"] and "the time limit" in ended["title"], ended
    # the kill's time: KillWait after the SIGTERM (the record's end is in whole seconds)
    import datetime as dt

    end = dt.datetime.fromisoformat(rec["end"].replace("Z", "+00:00")).timestamp()
    assert abs(end - (t_term + 2)) <= 1.5, (end, t_term)
    out = _show(slurm, timed_job.dir / "run")
    assert "run: killed (SIGKILL)" in out and "the time limit" in out, out


def test_a_requeued_job_records_each_run_with_its_restart_count(slurm: Cluster,
                                                               tmp_path: Path) -> None:
    """``scontrol requeue`` of a running job: its first run is ended by Slurm (the record on
    disk final: ``killed`` after Slurm's SIGTERM), the job runs again with
    ``SLURM_RESTART_COUNT=1`` in its snapshot, and that run succeeds in its own directory."""
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              'n=${SLURM_RESTART_COUNT:-0}\n'
              'exec envlock run --dir "runs/{job}-run$n" -q -- '
              'python -c "import sys, time; time.sleep(60 if sys.argv[1] == \'0\' else 0)" "$n"\n')
    job = slurm.sbatch(script, "--mem=100", "--requeue", cwd=tmp_path)
    _wait_for(lambda: (tmp_path / "runs" / f"{job}-run0" / "run.toml").exists()
              and slurm.job(job).get("JobState") == "RUNNING")
    time.sleep(1.0)
    slurm.cmd("scontrol", "requeue", job)
    # a requeued job waits 120 s (BeginTime) before it may start again: release it now
    slurm.wait_job(job, deadline=30, states=("PENDING",))
    slurm.cmd("scontrol", "update", f"JobId={job}", "StartTime=now")
    info = slurm.wait_job(job, deadline=60, states=("COMPLETED", "FAILED"))
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", info
    first = _record(tmp_path / "runs" / f"{job}-run0")
    assert first["outcome"] in ("killed", "terminated"), first
    assert [s["name"] for s in first["signals"]] == ["SIGTERM"], first["signals"]
    assert any(f["id"] == "run.slurm-ended" for f in first["findings"]), first["findings"]
    second = _record(tmp_path / "runs" / f"{job}-run1")
    assert second["outcome"] == "succeeded" and second["granted"]["job-id"] == job, second
    man = tomllib.loads((tmp_path / "runs" / f"{job}-run1" / "manifest.toml").read_text())
    assert man["slurm"]["vars"]["SLURM_RESTART_COUNT"] == "1"


def test_the_over_memory_kill_is_in_the_record(slurm: Cluster, tmp_path: Path) -> None:
    """``--mem=100`` and a command that grows by 10 MiB every 0.1 s: Slurm's OverMemoryKill
    (the cluster's ``JobAcctGatherParams``) SIGKILLs the step — envlock too, with no SIGTERM
    first ("StepId=….batch exceeded memory limit" in the job's log). The record on disk says
    so when envlock's own sample saw the excess first (``killed``, SIGKILL, a ``run.memory``
    error naming the grant); when Slurm's sample came first nothing could write after the
    SIGKILL and the file says ``running`` — then ``show`` and ``diff`` read it as Slurm ended
    it (``scontrol show job``: FAILED, ExitCode 0:9; the job's log: "exceeded
    memory limit"), a ``run.unfinished`` finding
    saying so. Either way what the reader shows is final: ``killed``, the over-memory kill."""
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              "exec envlock run --dir r -- python -c 'import time\nx = []\nfor i in range(60):\n"
              "    x.append(bytearray(10 << 20)); time.sleep(0.1)\ntime.sleep(30)'\n")
    job = slurm.sbatch(script, "--mem=100", cwd=tmp_path)
    info = slurm.wait_job(job, deadline=60)
    assert info["ExitCode"] == "0:9", info  # SIGKILL
    out = next(tmp_path.glob("slurm-*.out")).read_text()
    assert "exceeded memory limit" in out, out
    time.sleep(0.5)
    on_disk = _record(tmp_path / "r")
    assert on_disk["outcome"] in ("killed", "running"), on_disk
    rec = _shown_json(slurm, tmp_path / "r")
    assert rec["outcome"] == "killed" and rec["signal"] == "SIGKILL", rec
    [mem] = [f for f in rec["findings"] if f["id"] == "run.memory"]
    assert mem["severity"] == "error" and "100 MiB granted" in mem["title"], mem
    if on_disk["outcome"] == "running":  # Slurm's sample first: Slurm's word, said to be so
        [late] = [f for f in rec["findings"] if f["id"] == "run.unfinished"]
        assert "ExitCode 0:9" in late["title"] and "over-memory kill" in late["title"], late
        assert "exceeded memory limit" in mem["cause"], mem
    out = _show(slurm, tmp_path / "r")
    assert "run: killed (SIGKILL)" in out and "over-memory kill" in out, out
    diff = slurm.cmd(f"{BIN}/envlock", "diff", str(tmp_path / "r" / "run.toml"),
                     str(tmp_path / "r" / "run.toml"), check=False)
    assert "Traceback" not in diff.stderr, diff.stderr


def test_an_over_memory_kill_envlock_could_not_see_is_read_from_slurm(slurm: Cluster,
                                                                      tmp_path: Path) -> None:
    """The memory is taken by a process of the batch script beside envlock, not below it (a
    background job of the script): Slurm counts it in the step, envlock's sampler cannot, so
    Slurm's SIGKILL comes first and, as a rule, the file stays ``running`` (nothing writes after
    a SIGKILL). ``show`` and ``diff`` read it as Slurm ended it: ``killed`` (SIGKILL, Slurm's
    ExitCode 0:9), the over-memory kill from slurmstepd's line in the job's log, and a
    ``run.unfinished`` finding saying that this is Slurm's word, not envlock's.

    Slurm signals the step's processes one by one (proctrack/linuxproc here): now and then the
    command dies first and envlock writes its final record before its own SIGKILL arrives
    (seen once in four runs). That record is final and says the same death: ``killed`` by
    SIGKILL, as the file holds it."""
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              "python -c 'import time\ntime.sleep(3)\nx = bytearray(150 << 20)\ntime.sleep(60)' &\n"
              "envlock run --dir r -q -- sleep 60\nwait\n")
    job = slurm.sbatch(script, "--mem=100", cwd=tmp_path)
    info = slurm.wait_job(job, deadline=60)
    assert info["ExitCode"] == "0:9", info  # SIGKILL
    assert "exceeded memory limit" in next(tmp_path.glob("slurm-*.out")).read_text()
    raw = _record(tmp_path / "r")
    rec = _shown_json(slurm, tmp_path / "r")
    assert rec["outcome"] == "killed" and rec["signal"] == "SIGKILL", rec
    if raw["outcome"] == "killed":  # envlock saw the command's SIGKILL before its own came
        assert raw.get("signal") == "SIGKILL", raw
        assert "run: killed (SIGKILL)" in _show(slurm, tmp_path / "r")
        return
    assert raw["outcome"] == "running", raw  # as envlock left it
    [mem] = [f for f in rec["findings"] if f["id"] == "run.memory"]
    assert "100 MiB granted" in mem["title"] and f"StepId={job}.batch exceeded memory limit" \
        in mem["cause"], mem
    [late] = [f for f in rec["findings"] if f["id"] == "run.unfinished"]
    assert "ExitCode 0:9" in late["title"] and "over-memory kill" in late["title"], late
    out = _show(slurm, tmp_path / "r")
    assert "run: killed (SIGKILL)" in out and "over-memory kill" in out, out
    d = slurm.cmd(f"{BIN}/envlock", "diff", str(tmp_path / "r" / "run.toml"),
                  str(tmp_path / "r" / "run.toml"), check=False)
    assert "Traceback" not in d.stderr, d.stderr


def test_a_node_set_down_mid_run_is_in_the_record(slurm: Cluster, tmp_path: Path) -> None:
    """``scontrol update nodename=n2 state=down reason=test`` while a job's ``envlock run``
    runs there (``--no-requeue``): Slurm ends the job (``NODE_FAIL``) and its processes;
    the record, as ``show`` and ``diff`` read it, is final and names the node set DOWN as the
    cause. The node is resumed afterwards (and by the fixture's reset if this test fails)."""
    (tmp_path / "logger.py").write_text(SIGNAL_LOGGER)
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              f"exec envlock run --dir r -- python {tmp_path}/logger.py {tmp_path}/sig.log\n")
    job = slurm.sbatch(script, "--mem=100", "-w", "n2", "--no-requeue", cwd=tmp_path)
    try:
        _wait_for(lambda: "start" in _log(tmp_path / "sig.log"))
        assert _record(tmp_path / "r")["outcome"] == "running"
        slurm.cmd("scontrol", "update", "nodename=n2", "state=down", "reason=test")
        info = slurm.wait_job(job, deadline=60)
        assert info["JobState"] == "NODE_FAIL" and info["Reason"] == "NodeDown", info
        time.sleep(3.0)  # KillWait (2 s) for the step's processes
        # Slurm's SIGTERM reached CMD once (recorded, not forwarded), then its SIGKILL
        assert _log(tmp_path / "sig.log") == ["start", "SIGTERM"]
        on_disk = _record(tmp_path / "r")
        assert on_disk["outcome"] in ("killed", "running"), on_disk
        rec = _shown_json(slurm, tmp_path / "r")
        assert rec["outcome"] == "killed" and rec["signal"] == "SIGKILL", rec
        said = " ".join(f["title"] for f in rec["findings"])
        assert "NODE_FAIL" in said and "a node set DOWN" in said, rec["findings"]
        fixes = " ".join(" ".join(f.get("fix") or ()) for f in rec["findings"]
                         if f["id"] in ("run.slurm-ended", "run.unfinished"))
        assert "--requeue" in fixes and "more time" not in fixes, fixes  # not the time limit
        out = _show(slurm, tmp_path / "r")
        assert "run: killed (SIGKILL)" in out and "a node set DOWN" in out, out
        d = slurm.cmd(f"{BIN}/envlock", "diff", str(tmp_path / "r" / "run.toml"),
                      str(tmp_path / "r" / "run.toml"), check=False)
        assert "Traceback" not in d.stderr, d.stderr
    finally:
        slurm.cmd("scontrol", "update", "nodename=n2", "state=resume", check=False)
    slurm.wait_nodes("idle", nodes=("n2",), also=("mixed",))
