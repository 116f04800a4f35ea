"""The run's findings in plain words, and the parsers of what Slurm granted."""

from __future__ import annotations

import pytest

from envlock.manifest.processtables import Granted, Leftover, Resources
from envlock.runs.outcome import fmt_bytes, fmt_duration, run_findings
from envlock.runs.granted import granted, parse_scontrol, parse_time_limit
from envlock.runs.supervise import exit_code_of

GIB = 2**30


def _f(**kw):
    base = dict(outcome="succeeded", exit_status=0, signal=None, received=(), wall=10.0,
                end=None, resources=None, granted=None, children=(), keep_children=False)
    base.update(kw)
    return {f.id: f for f in run_findings(**base)}


def test_the_issue_sentences() -> None:
    found = _f(
        resources=Resources(peak_rss=int(0.976 * 16 * GIB)),  # 15.62 GiB
        granted=Granted(scheduler="slurm", memory=16 * GIB, time_limit=12 * 3600.0,
                        job_start="2026-12-01T00:00:00Z", gpus=4),
        end="2026-12-01T11:52:00Z",
        children=(Leftover(pid=11, command="python worker.py", gpu_memory=3 * GIB),
                  Leftover(pid=12, command="sleep 100")),
    )
    assert found["run.memory"].title == "peak RSS 15.6 GiB of 16 GiB granted (98 %)"
    assert found["run.memory"].severity == "warning" and found["run.memory"].fix
    assert found["run.time"].title == "the job ran 11 h 52 min of a 12 h limit (99 %)"
    assert found["run.visible-devices-unset"].title == \
        "GPU allocated (4) but CUDA_VISIBLE_DEVICES unset in the job"
    assert found["run.leftover-children"].title == (
        "2 child processes outlived CMD (11 python worker.py [3 GiB GPU]; 12 sleep 100): killed")


def test_quiet_when_far_from_limits() -> None:
    found = _f(resources=Resources(peak_rss=2 * GIB),
               granted=Granted(scheduler="slurm", memory=16 * GIB, time_limit=3600.0,
                               visible_devices="0", gpus=1))
    assert found["run.memory"].severity == "info" and found["run.memory"].cause is None
    assert found["run.time"].title == "ran 10 s of a 1 h limit (0 %)"  # no job start: the command's wall
    assert set(found) == {"run.memory", "run.time"}


def test_outcomes() -> None:
    assert _f(outcome="killed", resources=Resources(peak_rss=16 * GIB),
              granted=Granted(memory=16 * GIB))["run.memory"].severity == "error"
    t = _f(outcome="terminated", received=("SIGTERM",), wall=3550.0,
           granted=Granted(time_limit=3600.0))["run.terminated"]
    assert t.title == "terminated: SIGTERM forwarded to the command; it exited with status 0"
    assert "time limit" in t.cause
    assert _f(outcome="crashed", signal="SIGSEGV", exit_status=None)["run.crashed"].title == \
        "the command crashed: SIGSEGV"


@pytest.mark.parametrize(("n", "text"), [(16 * GIB, "16 GiB"), (int(15.6 * GIB), "15.6 GiB"),
                                         (812 * 2**20, "812 MiB"), (512, "512 B")])
def test_fmt_bytes(n: int, text: str) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(("s", "text"), [(42720, "11 h 52 min"), (43200, "12 h"), (185, "3 min 5 s"),
                                         (42, "42 s"), (1.25, "1.2 s"), (187200, "2 d 4 h")])
def test_fmt_duration(s: float, text: str) -> None:
    assert fmt_duration(s) == text


@pytest.mark.parametrize(("text", "secs"), [("12:00:00", 43200), ("1-12:00:00", 129600),
                                            ("30:00", 1800), ("45", 2700), ("2-0", 172800),
                                            ("UNLIMITED", None), ("", None)])
def test_parse_time_limit(text: str, secs: float | None) -> None:
    assert parse_time_limit(text) == secs


def test_parse_scontrol() -> None:
    f = parse_scontrol("JobId=7 JobName=a=b TimeLimit=1-00:00:00 StartTime=2026-12-01T08:00:00")
    assert f["TimeLimit"] == "1-00:00:00" and f["JobName"] == "a=b" and f["JobId"] == "7"


def test_granted_from_variables() -> None:
    env = {"SLURM_JOB_ID": "9", "SLURM_MEM_PER_CPU": "4096", "SLURM_CPUS_ON_NODE": "4",
           "SLURM_JOB_START_TIME": "1764576000", "SLURM_JOB_END_TIME": "1764619200",
           "SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1", "PATH": "/nonexistent"}
    g = granted(env)
    assert g.memory == 16 * GIB and g.memory_source.startswith("SLURM_MEM_PER_CPU")
    assert g.time_limit == 43200 and g.time_limit_source.startswith("SLURM_JOB_END_TIME")
    assert g.job_start == "2025-12-01T08:00:00Z"
    assert g.gpus == 2 and g.gpu_ids == ("2", "3") and g.visible_devices == "0,1"
    assert granted({"PATH": "/nonexistent"}).scheduler == "none"


def test_exit_code_of() -> None:
    assert exit_code_of(3 << 8) == (3, None, 3)
    assert exit_code_of(15) == (None, "SIGTERM", 143)


def test_openblas_version_keeps_its_dev_suffix() -> None:
    """numpy 1.26's OpenBLAS reports "OpenBLAS 0.3.23.dev …": recorded as "0.3.23." before."""
    from envlock.runs.processprobe import openblas_version

    assert openblas_version(b"OpenBLAS 0.3.23.dev DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64") == "0.3.23.dev"
    assert openblas_version(b"OpenBLAS 0.3.21 NO_AFFINITY Zen MAX_THREADS=64") == "0.3.21"
    assert openblas_version(b"no version here") is None
