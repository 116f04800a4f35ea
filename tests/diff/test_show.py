"""``envlock show``: the summary a person reads, every package with ``--all``, the manifest
as JSON with ``--format json``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import envlock
from envlock.cli import cli
from envlock.manifest import Manifest, load

from .conftest import build_manifest, gpu_table

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "manifest.example.toml"


def _stack() -> dict:
    stack = gpu_table("NVIDIA A100-SXM4-80GB", "8.0", count=4)
    stack["frameworks"] = {"status": "ok", "packages": [
        {"name": "torch", "version": "2.1.2", "build": "cuda", "cuda": "12.0", "cudnn": "8.9.7",
         "cuda-archs": ["sm_80", "sm_90"]}],
        "runtime": {"status": "ok", "cuda-available": True, "device-count": 4,
                    "allow-tf32-matmul": False, "deterministic": False,
                    "threadpools": [{"user-api": "blas", "internal-api": "openblas",
                                     "num-threads": 16}]}}
    stack["blas"] = {"status": "ok", "libraries": [
        {"user": "numpy", "implementation": "openblas", "version": "0.3.26", "origin": "conda"}]}
    return stack


def test_summary_has_what_a_person_asks_wrapped(write) -> None:
    path = write("ws.toml", build_manifest(env={"MKL_CBWR": "COMPATIBLE",
                                                "OMP_NUM_THREADS": "16",
                                                "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
                                           stack=_stack()))
    res = CliRunner().invoke(cli, ["show", str(path), "--width", "72"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert all(len(line) <= 72 for line in out.splitlines()), out
    flat = " ".join(out.split())
    for want in ("platform: Rocky Linux 8.9", "python: cpython 3.11.8",
                 "framework: torch 2.1.2, cuda build, CUDA 12.0, cuDNN 8.9.7",
                 "torch at run time (--import): CUDA available yes, TF32 matmul no",
                 "numerical stack: torch 2.1.2, numpy 1.26.4, scipy 1.12.0",
                 "gpu: 4 × NVIDIA A100-SXM4-80GB (compute capability 8.0); driver 470.182.03",
                 "blas: numpy: openblas 0.3.26", "threads: OMP_NUM_THREADS=16",
                 "thread pools (--import): openblas 16",
                 "code: /home/ana/proj at 999999999999 on main, clean",
                 "numerics variables: CUBLAS_WORKSPACE_CONFIG=:4096:8, MKL_CBWR=COMPATIBLE"):
        assert want in flat, (want, out)
    key = out[out.index("key packages"):]
    for name in ("numpy", "scipy", "torch", "libblas", "pandas", "scikit-learn"):
        assert f"\n{name} " in key
    assert "\npip " not in key and "\nsetuptools " not in key


def test_all_lists_every_package(write) -> None:
    data = build_manifest()
    path = write("ws.toml", data)
    res = CliRunner().invoke(cli, ["show", str(path), "--all"])
    assert res.exit_code == 0, res.output
    listing = res.output[res.output.index("every package ("):].splitlines()
    m = load(str(path))
    conda_only = {c.name for c in m.conda.packages} - {p.conda_package for p in m.pip.packages}
    expected = len(m.pip.packages) + len(conda_only)
    assert listing[0] == f"every package ({expected})"
    assert len(listing) == expected + 2  # the title and the header


@pytest.mark.parametrize("source", ["example", "built"])
def test_format_json_round_trips(write, tmp_path: Path, source: str) -> None:
    path = EXAMPLE if source == "example" else write("ws.toml", build_manifest(stack=_stack()))
    res = CliRunner().invoke(cli, ["show", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert Manifest.from_dict(doc) == load(str(path))
    (tmp_path / "back.json").write_text(res.output)
    assert load(str(tmp_path / "back.json")).to_dict() == load(str(path)).to_dict()


@pytest.mark.realenv
def test_all_counts_as_many_packages_as_pip_list(cpu_venv: Path, tmp_path: Path) -> None:
    path = tmp_path / "cpu.toml"
    envlock.snapshot(python=str(cpu_venv / "bin" / "python")).write(path)
    out = subprocess.run([str(cpu_venv / "bin" / "python"), "-m", "pip", "list", "--format",
                          "json", "--disable-pip-version-check"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    pip_list = {p["name"].lower().replace("_", "-") for p in json.loads(out)}
    res = CliRunner().invoke(cli, ["show", str(path), "--all"])
    assert res.exit_code == 0, res.output
    listing = res.output[res.output.index("every package ("):].splitlines()
    assert listing[0] == f"every package ({len(pip_list)})"
    assert {line.split()[0] for line in listing[2:]} == pip_list
