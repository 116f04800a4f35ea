"""Acceptance on the real torch venvs (run with ``pytest --realenv``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realenv


def envlock(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C"}
    return subprocess.run([sys.executable, "-m", "envlock", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def manifests(tmp_path_factory, cpu_venv, cuda_venv) -> Path:
    d = tmp_path_factory.mktemp("manifests")
    for name, venv in (("cpu", cpu_venv), ("cuda", cuda_venv)):
        r = envlock("snapshot", "--python", str(venv / "bin/python"), "-o", f"{name}.toml", "-q", cwd=d)
        assert r.returncode == 0, r.stderr
    return d


def test_cpu_venv_against_its_own_manifest_is_one_line(manifests, cpu_venv):
    r = envlock("verify", "--python", str(cpu_venv / "bin/python"), "--manifest", "cpu.toml", cwd=manifests)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(r.stdout.splitlines()) == 1 and r.stdout.startswith("envlock verify: ok against cpu.toml")
    assert r.stderr == ""


def test_cpu_venv_against_the_cuda_manifest_names_build_and_versions(manifests, cpu_venv):
    r = envlock("verify", "--python", str(cpu_venv / "bin/python"), "--manifest", "cuda.toml",
                "--format", "json", cwd=manifests)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    by = {}
    for f in doc["findings"]:
        by.setdefault(f["id"], []).append(f)
    build = by["gpu.cpu-only-build"][0]
    assert build["title"] == "torch 2.13.0+cpu is a CPU-only build; the manifest expects a CUDA 13.0 build (2.14.1+cu130)"
    titles = [f["title"] for f in by["packages.version-mismatch"]]
    assert "torch 2.13.0+cpu is installed; the manifest (cuda.toml) has 2.14.1 (installed is a CPU-only build)" in titles
    assert "numpy 1.24.4 is installed; the manifest (cuda.toml) has 2.4.1" in titles
    assert "scipy 1.10.1 is installed; the manifest (cuda.toml) has 1.17.0" in titles
    missing = by["packages.missing"][0]
    assert "nvidia-cudnn-cu13 9.24.0.43 (pip)" in missing["evidence"]
    text = envlock("verify", "--python", str(cpu_venv / "bin/python"), "--manifest", "cuda.toml", cwd=manifests)
    assert text.returncode == 1 and "gpu.cpu-only-build" in text.stdout


def test_cuda_venv_on_this_gpu_less_machine(manifests, cuda_venv):
    """The CUDA venv matches its manifest; on a node without a driver that is a warning only."""
    r = envlock("verify", "--python", str(cuda_venv / "bin/python"), "--manifest", "cuda.toml",
                "--format", "json", cwd=manifests)
    doc = json.loads(r.stdout)
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert r.returncode == 0, doc
    ids = {f["id"]: f for f in doc["findings"]}
    assert ids["gpu.no-driver"]["severity"] == "warning"
    assert "torch 2.14.1+cu130 is a CUDA 13.0 build" in ids["gpu.no-driver"]["title"]
    assert not [f for f in doc["findings"] if f["id"].startswith("packages.")]
