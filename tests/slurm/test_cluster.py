"""The cluster itself: four real nodes, each task told its own node name by Slurm."""

from __future__ import annotations

from pathlib import Path

from tests.slurm.conftest import NODES, Cluster


def test_srun_runs_on_four_nodes_with_their_names(slurm: Cluster, tmp_path: Path) -> None:
    r = slurm.cmd("srun", "-N4", "sh", "-c", 'echo "$SLURMD_NODENAME $SLURM_PROCID"', cwd=tmp_path)
    names = sorted(line.split()[0] for line in r.stdout.splitlines())
    assert names == list(NODES)
