"""Three or more inputs: majority per fact, deviant inputs named with their differences."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import diff
from envlock.diff.engine import ManyDiff

from .conftest import build_manifest, gpu_table


def write_cluster(write, directory: Path, *, odd: int = 17, n: int = 32) -> None:
    """n node manifests of one Slurm job; node ``odd`` has an older driver."""
    for i in range(1, n + 1):
        driver = "535.104.05" if i == odd else "550.54.14"
        stack = gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver=driver, count=4)
        stack["gpu"]["cuda-driver-version"] = "12.2" if i == odd else "12.4"
        data = build_manifest(host=f"node{i:02d}", stack=stack, env={
            "SLURM_JOB_ID": "4815162", "SLURM_NODEID": str(i - 1), "SLURM_PROCID": str(i - 1),
            "SLURM_TOPOLOGY_ADDR": f"node{i:02d}", "OMP_NUM_THREADS": "8"})
        data["envlock"]["created"] = f"2026-11-29T23:{i:02d}:00Z"
        write(f"node{i:02d}.toml", data, directory)


def test_32_nodes_one_deviant(write, tmp_path: Path) -> None:
    write_cluster(write, tmp_path / "run")
    result = diff([tmp_path / "run"])
    assert isinstance(result, ManyDiff)
    assert len(result.inputs) == 32
    assert [d.b.label for d in result.deviants] == ["node17"]
    dev = result.deviants[0]
    assert [(c.area, c.key, c.majority_count) for c in dev.changes] == [
        ("gpu", "driver", 31), ("gpu", "driver-cuda", 31)]
    assert dev.explanations[0].title == (
        "NVIDIA driver: node17 has gpu driver 535.104.05 while 31 others have 550.54.14; "
        "node17 has gpu driver-cuda 12.2 while 31 others have 12.4")
    assert [(v.area, v.key, v.majority, v.count, v.deviants) for v in result.varying] == [
        ("gpu", "driver", "550.54.14", 31, {"node17": "535.104.05"}),
        ("gpu", "driver-cuda", "12.4", 31, {"node17": "12.2"})]
    # per-node Slurm ids are noise, not deviations
    assert result.identical["env"] == 3  # CONDA_DEFAULT_ENV, CONDA_PREFIX, OMP_NUM_THREADS


def test_identical_nodes_exit_0_and_deviant_exit_1(write, tmp_path: Path) -> None:
    write_cluster(write, tmp_path / "same", odd=0, n=3)
    res = CliRunner().invoke(cli, ["diff", "--format", "json", str(tmp_path / "same")])
    assert res.exit_code == 0, res.output
    write_cluster(write, tmp_path / "odd", odd=2, n=3)
    res = CliRunner().invoke(cli, ["diff", "--format", "json", str(tmp_path / "odd")])
    assert res.exit_code == 1
    assert '"deviants": {\n        "node02": "535.104.05"' in res.output


def test_directory_without_manifests(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["diff", str(tmp_path), str(tmp_path)])
    assert res.exit_code == 2
    assert res.output == f"Error: {tmp_path}: directory holds no *.toml manifest\n"


def _five(write, directory: Path, drivers: list[str]) -> None:
    """Five node manifests n1…n5 with these GPU drivers."""
    for i, driver in enumerate(drivers, 1):
        write(f"n{i}.toml", build_manifest(host=f"n{i}", stack=gpu_table(
            "NVIDIA A100-SXM4-80GB", "8.0", driver=driver)), directory)


def test_five_inputs_3_1_1_has_a_majority(write, tmp_path: Path) -> None:
    _five(write, tmp_path / "run", ["550.54.14", "550.54.14", "535.104.05", "550.54.14",
                                    "470.182.03"])
    result = diff([tmp_path / "run"])
    assert isinstance(result, ManyDiff)
    (v,) = result.varying
    assert (v.majority, v.count, v.has_majority) == ("550.54.14", 3, True)
    assert v.deviants == {"n3": "535.104.05", "n5": "470.182.03"}
    assert [d.b.label for d in result.deviants] == ["n3", "n5"]
    res = CliRunner().invoke(cli, ["diff", str(tmp_path / "run"), "--width", "120"])
    assert res.exit_code == 1
    row = next(x for x in res.output.splitlines() if x.startswith("gpu"))
    assert row.split("  ")[0:1] == ["gpu"]
    assert "550.54.14 (3)" in row and "n3: 535.104.05; n5: 470.182.03" in row
    doc = json.loads(CliRunner().invoke(cli, ["diff", str(tmp_path / "run"), "--format",
                                              "json"]).output)
    (jv,) = doc["varying"]
    assert (jv["majority"], jv["majority_count"], jv["has_majority"]) == ("550.54.14", 3, True)
    assert jv["deviants"] == {"n3": "535.104.05", "n5": "470.182.03"}
    assert jv["values"] == [{"value": "550.54.14", "count": 3, "inputs": ["n1", "n2", "n4"]},
                            {"value": "535.104.05", "count": 1, "inputs": ["n3"]},
                            {"value": "470.182.03", "count": 1, "inputs": ["n5"]}]


def test_five_inputs_2_2_1_has_no_majority(write, tmp_path: Path) -> None:
    _five(write, tmp_path / "run", ["550.54.14", "535.104.05", "550.54.14", "535.104.05",
                                    "470.182.03"])
    result = diff([tmp_path / "run"])
    assert isinstance(result, ManyDiff)
    (v,) = result.varying
    assert (v.majority, v.has_majority) == (None, False)
    # no input is "the odd one" for a fact without a majority
    assert result.deviants == ()
    assert result.differ
    res = CliRunner().invoke(cli, ["diff", str(tmp_path / "run"), "--width", "160"])
    assert res.exit_code == 1
    row = next(x for x in res.output.splitlines() if x.startswith("gpu"))
    assert "3 distinct values: 550.54.14 (2), 535.104.05 (2), 470.182.03 (1)" in row
    assert "n1, n3: 550.54.14; n2, n4: 535.104.05; n5: 470.182.03" in row
    assert "majority" not in row and "others" not in res.output
    doc = json.loads(CliRunner().invoke(cli, ["diff", str(tmp_path / "run"), "--format",
                                              "json"]).output)
    (jv,) = doc["varying"]
    assert (jv["majority"], jv["majority_count"], jv["has_majority"]) == (None, None, False)
    assert [x["count"] for x in jv["values"]] == [2, 2, 1]
    assert doc["deviants"] == []
