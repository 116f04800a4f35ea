"""Golden outputs: text (rich, 100 columns, no colour), markdown and JSON, compared exactly.

Regenerate after an intended change with ``ENVLOCK_UPDATE_GOLDEN=1 pytest tests/diff`` and
review the diff of ``tests/diff/golden/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from .conftest import CONDA_PACKAGES, build_manifest, gpu_table, replace

GOLDEN = Path(__file__).parent / "golden"


def _check(name: str, output: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ENVLOCK_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(output, encoding="utf-8")
    assert output == path.read_text(encoding="utf-8")


@pytest.fixture
def pair(write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An RTX 3090 workstation with torch 1.8.1 against a GTX 1080 Ti one, plus small drift."""
    monkeypatch.chdir(tmp_path)
    old = replace(CONDA_PACKAGES, pytorch=("1.8.1", "py3.8_cuda11.1_cudnn8.0.5_0"),
                  pip=("23.3.1", "pyhd8ed1ab_0"), pandas=("2.1.4", "py311h320fe9a_0"))
    new = replace(CONDA_PACKAGES, pytorch=("1.8.1", "py3.8_cuda11.1_cudnn8.0.5_0"))
    write("ampere.toml", build_manifest(
        host="gpu-a", conda=old, stack=gpu_table("NVIDIA GeForce RTX 3090", "8.6")))
    write("pascal.toml", build_manifest(
        host="gpu-b", conda=new, env={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        stack=gpu_table("NVIDIA GeForce GTX 1080 Ti", "6.1")))
    return ["ampere.toml", "pascal.toml"]


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_pair_golden(pair: list[str], fmt: str) -> None:
    res = CliRunner().invoke(cli, ["diff", *pair, "--format", fmt, "--width", "100"])
    assert res.exit_code == 1, res.output
    suffix = {"text": "txt", "markdown": "md", "json": "json"}[fmt]
    _check(f"pair.{suffix}", res.output)


def test_pair_json_schema(pair: list[str]) -> None:
    doc = json.loads(CliRunner().invoke(cli, ["diff", *pair, "--format", "json"]).output)
    assert doc["schema"] == 1 and doc["mode"] == "pair"
    assert next(e["id"] for e in doc["explanations"]) == "tf32"
    assert set(doc) == {"schema", "mode", "differ", "inputs", "code", "context", "explanations",
                        "more_explanations", "differences", "identical", "satisfied", "unknown",
                        "not_compared",
                        "unlisted"}


def test_majority_golden(write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for i in range(1, 5):
        env = {"OMP_NUM_THREADS": "1" if i == 3 else "16", "SLURM_PROCID": str(i)}
        write(f"nodes/n{i}.toml", build_manifest(host=f"n{i}", env=env))
    res = CliRunner().invoke(cli, ["diff", "nodes", "--width", "100"])
    assert res.exit_code == 1, res.output
    _check("majority.txt", res.output)
    res = CliRunner().invoke(cli, ["diff", "nodes", "--format", "markdown"])
    _check("majority.md", res.output)


def test_identical_exit_0(pair: list[str]) -> None:
    res = CliRunner().invoke(cli, ["diff", pair[0], pair[0], "--width", "100"])
    assert res.exit_code == 0
    assert "Differences (0)" in res.output
    assert "  (none)" in res.output
