"""Per-node snapshots (docs/slurm.md "One snapshot per node") on four real nodes that share one
host, and the N-way diff that names the node made different."""

from __future__ import annotations

from pathlib import Path

from tests.slurm.conftest import BIN, NODES, Cluster
from tests.slurm.test_docs_recipes import block


def test_one_snapshot_per_node_named_by_slurm_and_the_deviant_node_named_first(
        slurm: Cluster, tmp_path: Path) -> None:
    """The recipe as docs/slurm.md gives it, in a four-node batch job.  ``{node}`` is Slurm's node
    name (SLURMD_NODENAME), not the host name all four share: four files.  A node-specific
    TaskProlog gives n3 another LD_LIBRARY_PATH; ``envlock diff`` of the four names n3 as the
    one that differs, with that difference first."""
    slurm.task_prolog('#!/bin/sh\n[ "$SLURMD_NODENAME" = n3 ] && echo "export LD_LIBRARY_PATH=/opt/other/lib"\nexit 0\n')
    recipe = block("slurm.md", "{node}.toml")
    job = slurm.sbatch(f"#!/bin/bash\nsource {BIN}/activate\n{recipe}", "-N4", cwd=tmp_path)
    info = slurm.wait_job(job)
    out = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] in ("COMPLETED", "FAILED"), info  # diff exits 1 when inputs differ
    files = sorted(p.name for p in (tmp_path / "manifests" / job).iterdir())
    assert files == [f"{n}.toml" for n in NODES], files
    deviants = out.split("Inputs that deviate from the majority (1)\n", 1)[1]
    head, first = deviants.splitlines()[:2]
    assert head.strip() == "n3 (n3.toml)", deviants  # the node's name, not the shared host's
    assert first.strip() == "1. n3 has env LD_LIBRARY_PATH /opt/other/lib while 3 others have it unset", deviants
    assert "Facts that vary (1)" in out
    for n in ("n1", "n2", "n4"):
        assert f"{n} (" not in deviants.split("Facts that vary")[0]
