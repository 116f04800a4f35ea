"""``envlock run`` in real Slurm jobs: what Slurm granted, as the record reads it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.slurm.conftest import BIN, Cluster


def test_the_grant_is_read_from_the_real_job(slurm: Cluster, tmp_path: Path) -> None:
    """--mem=300 (MiB), --time=2 (minutes) and an array task: the record's [run.granted] has
    300 MiB from SLURM_MEM_PER_NODE, 120 s from ``scontrol show job``, and the job id; the run
    directory's {job} is ``<array job>_<task>``; the array ids are in the snapshot."""
    script = (f"#!/bin/bash\nsource {BIN}/activate\n"
              "exec envlock run --dir 'runs/{job}' -q -- python -c 'print(1)'\n")
    job = slurm.sbatch(script, "--mem=300", "--time=2", "--array=3", cwd=tmp_path)
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
