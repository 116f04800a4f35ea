"""``envlock diff`` of [process] tables and run records: cudnn.benchmark ranks first among the
[process] facts, with its fix; a second BLAS copy, thread counts; run outcomes and resources."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from envlock.manifest import _model, _toml
from envlock.manifest.processtables import (
    Granted,
    Leftover,
    MappedLibrary,
    ProcessInfo,
    Resources,
    RunInfo,
    ThreadPool,
    TorchState,
)

SITE = "/venv/lib/python3.11/site-packages"
NUMPY_BLAS = f"{SITE}/numpy.libs/libopenblas64_p-r0-15028c96.3.21.so"
SCIPY_BLAS = f"{SITE}/scipy.libs/libopenblasp-r0-41284840.3.18.so"


def _write(path: Path, table: str, body: object) -> str:
    doc = {"envlock": {"schema": 1, "version": "0", "created": "2026-12-01T00:00:00Z", "host": "h"},
           "target": {"kind": "venv", "prefix": "/venv", "chosen-by": "VIRTUAL_ENV"},
           table: _model.to_dict(body)}
    path.write_text(_toml.dumps(doc, "toml"))
    return str(path)


def _proc(bench: bool, *, det: bool = True, tf32: bool = False, threads: int = 4,
          scipy: bool = False) -> ProcessInfo:
    libs = [MappedLibrary(path=NUMPY_BLAS, owner="numpy 1.24.4")]
    pools = [ThreadPool(user_api="blas", internal_api="openblas", path=NUMPY_BLAS, num_threads=threads)]
    if scipy:
        libs.append(MappedLibrary(path=SCIPY_BLAS, owner="scipy 1.10.1"))
        pools.append(ThreadPool(user_api="blas", internal_api="openblas", path=SCIPY_BLAS,
                                num_threads=threads))
    return ProcessInfo(pid=1, torch=TorchState(version="2.13.0", cudnn_benchmark=bench,
                                               cudnn_deterministic=det, deterministic_algorithms=det,
                                               allow_tf32_matmul=tf32, allow_tf32_cudnn=tf32,
                                               num_threads=threads, initial_seed="0"),
                       threadpools=tuple(pools), libraries=tuple(libs))


def _diff(a: str, b: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", "--format", "json", a, b],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    return json.loads(r.stdout)


def _process_explanations(doc: dict) -> list[dict]:
    return [e for e in doc["explanations"] if any(f["area"] == "process" for f in e["facts"])]


def test_cudnn_benchmark_ranks_first_with_its_fix(tmp_path: Path) -> None:
    a = _write(tmp_path / "on.toml", "process", _proc(True, det=False, tf32=True, threads=8,
                                                      scipy=True))
    b = _write(tmp_path / "off.toml", "process", _proc(False))
    exps = _process_explanations(_diff(a, b))
    assert exps[0]["title"] == "process torch.cudnn.benchmark yes → no"
    assert "torch.backends.cudnn.benchmark = False" in exps[0]["do"]
    titles = [e["title"] for e in exps]
    order = [next(i for i, t in enumerate(titles) if word in t)
             for word in ("cudnn.benchmark", "determinism", "TF32", "thread pools", "blas libraries")]
    assert order == sorted(order), titles
    [blas] = [e for e in exps if "blas libraries mapped" in e["title"]]
    assert "libopenblasp-r0-41284840.3.18.so" in blas["title"]  # the second copy, named
    assert "oversubscribe" in blas["why"]


def test_run_records_compare_outcomes_and_resources(tmp_path: Path) -> None:
    g = Granted(scheduler="slurm", memory=16 * 2**30, time_limit=43200.0, gpus=1,
                visible_devices="0")
    ok = RunInfo(outcome="succeeded", command=("python", "train.py"), exit_status=0, wall=3600.0,
                 resources=Resources(peak_rss=8 * 2**30), granted=g)
    bad = RunInfo(outcome="killed", command=("python", "train.py"), signal="SIGKILL", wall=600.0,
                  resources=Resources(peak_rss=16 * 2**30), granted=g,
                  children=(Leftover(pid=5, command="python worker.py"),))
    doc = _diff(_write(tmp_path / "a.toml", "run", ok), _write(tmp_path / "b.toml", "run", bad))
    keys = {f["key"]: f["values"] for f in doc["differences"]}
    assert keys["outcome"] == ["succeeded", "killed"]
    assert keys["peak-rss"] == ["8.0 GiB", "16.0 GiB"]
    assert keys["leftover children"] == ["0", "1"]
    assert "command" not in keys and "granted memory" not in keys  # the same on both sides
    [run] = [e for e in doc["explanations"] if e["title"].startswith("the run")]
    assert "outcome succeeded → killed" in run["title"]


def test_show_reads_process_and_run_tables(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from envlock.cli import cli

    p = _write(tmp_path / "p.toml", "process", _proc(True))
    out = CliRunner().invoke(cli, ["show", p]).output
    assert "process: torch 2.13.0, seed 0; cudnn-benchmark=yes" in out
    assert "process: threads openblas 4 (libopenblas64_p-r0-15028c96.3.21.so)" in out
    r = _write(tmp_path / "r.toml", "run", RunInfo(
        outcome="terminated", command=("python", "train.py"), exit_status=0, wall=42720.0,
        resources=Resources(peak_rss=2**30), findings=()))
    out = CliRunner().invoke(cli, ["show", r]).output
    assert "run: terminated (exit status 0) after 11 h 52 min: python train.py" in out
    assert "run: peak RSS 1 GiB" in out


def test_unseeded_global_rng_fingerprints_are_not_a_likely_cause(tmp_path: Path) -> None:
    """Two records of one unseeded program: Python's and numpy's global generators start from
    OS entropy, so their fingerprints always differ — shown as a difference of class
    ``context``, never ranked as a likely cause (issue 25)."""
    import dataclasses

    from envlock.manifest.processtables import SeedState

    base = _proc(False)
    a = _write(tmp_path / "a.toml", "process", dataclasses.replace(
        base, seeds=SeedState(python="1" * 64, numpy="2" * 64)))
    b = _write(tmp_path / "b.toml", "process", dataclasses.replace(
        base, seeds=SeedState(python="3" * 64, numpy="4" * 64)))
    doc = _diff(a, b)
    facts = {f["key"]: f for f in doc["differences"]}
    assert facts["seed.python-state"]["class"] == "context"
    assert not [e for e in doc["explanations"] if "seed" in e["title"]]


def test_run_diff_prints_human_durations_and_each_slurm_fact_once(tmp_path: Path) -> None:
    """Issue 25: the diff of two run records printed "0.980556 h" for a 58 min 50 s limit, and
    each allocation fact twice (SLURM_CPUS_ON_NODE and cpus-on-node, SLURM_MEM_PER_NODE and
    mem-per-node). Two real runs with Slurm's variables (epoch start/end give the limits)."""
    import os
    import subprocess
    import sys

    for name, job, cpus, mem, end in (("a", "11", "2", "300", "4530"), ("b", "12", "4", "600", "8000")):
        env = {**os.environ, "SLURM_JOB_ID": job, "SLURM_CPUS_ON_NODE": cpus,
               "SLURM_MEM_PER_NODE": mem, "SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": end}
        r = subprocess.run([sys.executable, "-m", "envlock", "run", "--dir", name, "-q", "--", "true"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", "a/run.toml", "b/run.toml"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    table = r.stdout.split("Differences", 1)[1]
    rows = [ln.split()[:2] for ln in table.splitlines() if ln.startswith(("slurm ", "run "))]
    assert ["slurm", "cpus-on-node"] in rows and ["slurm", "mem-per-node"] in rows
    assert not [k for _a, k in rows if k.startswith("SLURM_")], rows
    [limit] = [ln for ln in table.splitlines() if ln.startswith("run ") and "time limit" in ln]
    assert "58 min 50 s" in limit and "1 h 56 min" in limit and " h " not in limit.split("limit", 1)[1].replace("1 h 56", ""), limit
    assert "0.98" not in r.stdout
