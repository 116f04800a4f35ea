"""Real inputs for the ``envlock find`` tests.

* ``base_manifest``: ``envlock snapshot`` of the interpreter running the tests (a real venv:
  its ``[pip]``, ``[python]``, ``[platform]``, ``[cpu]``, ``[blas]``, ``[libraries]`` tables);
* ``conda_manifest``: ``envlock snapshot`` of ``fixtures/conda-prefix`` (real conda-meta);
* ``run_dirs``: two ``envlock run`` run directories (one command exits 0, one exits 3);
* ``variant``: writes a copy of a real manifest with some facts changed — the stack tables laid
  out as the probes write them (``[gpu]`` as ``tests/diff/conftest.gpu_table``,
  ``[frameworks]``, ``[process]`` as ``envlock.record()`` writes it).

The expected matches of each test are computed from these files' own contents (with
packaging, py-rattler, tomllib), never written down.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from envlock.manifest import _toml


def envlock_cmd(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``python -m envlock ARGS`` in a subprocess (the real command line)."""
    return subprocess.run([sys.executable, "-m", "envlock", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def load(path: Path) -> dict[str, Any]:
    """A manifest file as TOML data (tomllib, the standard reader)."""
    return tomllib.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def base_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("base") / "manifest.toml"
    r = envlock_cmd("snapshot", "--python", sys.executable, "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="session")
def conda_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from _prefixes import make_conda_prefix

    root = tmp_path_factory.mktemp("conda")
    prefix = make_conda_prefix(root / "md")
    out = root / "manifest.toml"
    r = envlock_cmd("snapshot", "--prefix", str(prefix), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="session")
def run_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    dirs = []
    for name, code in (("ok", 0), ("bad", 3)):
        d = root / name
        r = envlock_cmd("run", "--dir", str(d), "-q", "--python", sys.executable, "--",
                        sys.executable, "-c", f"import sys; sys.exit({code})")
        assert r.returncode == code, r.stderr
        dirs.append(d)
    return dirs


def set_pip_version(data: dict[str, Any], name: str, version: str) -> None:
    for p in data["pip"]["packages"]:
        if p["name"].lower() == name:
            p["version"] = version
            return
    data["pip"]["packages"].append({"name": name, "version": version})


def gpu(cc: list[str], name: str = "NVIDIA A100-SXM4-80GB", driver: str = "550.54.14") -> dict[str, Any]:
    """A ``[gpu]`` table as the stack probe writes it."""
    return {"status": "ok", "source": "nvidia-smi", "vendor": "nvidia", "driver-version": driver,
            "driver-kind": "proprietary", "cuda-driver-version": "12.4",
            "gpus": [{"index": i, "name": name, "uuid": f"GPU-{i:08x}", "compute-capability": c,
                      "memory-total": 85899345920} for i, c in enumerate(cc)]}


def process(*, tf32: bool | None = None, deterministic: bool = False, benchmark: bool = False,
            workspace: str | None = None) -> dict[str, Any]:
    """A ``[process]`` table as ``envlock.record()`` writes it (docs/run.md)."""
    t: dict[str, Any] = {"schema": 1, "pid": 4711, "rank": 0, "created": "2026-12-01T10:00:00Z",
                         "modules": ["numpy", "torch"],
                         "torch": {"version": "2.13.0+cpu", "cudnn-benchmark": benchmark,
                                   "cudnn-deterministic": deterministic,
                                   "deterministic-algorithms": deterministic,
                                   "deterministic-warn-only": False,
                                   "float32-matmul-precision": "high" if tf32 else "highest",
                                   "num-threads": 8, "initial-seed": "0", "seed-is-default": False}}
    if tf32 is not None:
        t["torch"]["allow-tf32-matmul"] = tf32
        t["torch"]["allow-tf32-cudnn"] = tf32
    if workspace is not None:
        t["cublas-workspace-config"] = workspace
    return t


@pytest.fixture()
def variant(tmp_path: Path) -> Callable[..., Path]:
    """``variant(base, rel_path, edit)``: a copy of the real manifest ``base`` at
    ``tmp_path/rel_path``, changed by ``edit(data)``."""

    def make(base: Path, rel: str, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
        data = copy.deepcopy(load(base))
        if edit is not None:
            edit(data)
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_toml.dumps(data), encoding="utf-8")
        return path

    return make


@pytest.fixture()
def index_file(tmp_path: Path) -> str:
    (tmp_path / "idx").mkdir()  # `--index FILE` creates no directory
    return os.fspath(tmp_path / "idx" / "index.sqlite")


NUMPY = ["1.24.4", "1.26.4", "2.0.0rc1", "2.0.1", "2.4.1"]
CCS: list[list[str]] = [["7.5"], ["8.0"], ["8.6", "8.0"], ["9.0"], []]


@pytest.fixture()
def results(base_manifest: Path, variant: Any, tmp_path: Path) -> Path:
    """Ten results under ``tmp_path/results``, at several depths, with varied facts."""
    for i in range(10):
        def edit(d: dict[str, Any], i: int = i) -> None:
            set_pip_version(d, "numpy", NUMPY[i % len(NUMPY)])
            set_pip_version(d, "torch", ["1.10.2", "1.13.1", "2.13.0+cpu"][i % 3])
            d["envlock"]["host"] = f"node{i:02d}"
            d["envlock"]["created"] = f"2026-11-{1 + i:02d}T{10 + i}:00:00Z"
            cc = CCS[i % len(CCS)]
            if cc:
                d["gpu"] = gpu(cc)
            d["frameworks"] = {"status": "ok", "source": "dist-info", "packages": [
                {"name": "torch", "version": "2.13.0", "build": "cuda" if i % 2 else "cpu"}]}
            d.setdefault("env", {"status": "ok", "source": "allow-list", "vars": {}})
            d["env"].setdefault("vars", {})
            if i % 4 == 0:
                d["env"]["vars"]["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
            if i % 3 == 1:
                d["process"] = process(tf32=i % 2 == 1, deterministic=True,
                                       workspace=":4096:8" if i == 4 else None)
        name = "manifest.toml" if i % 2 else f"job{i}.toml"
        variant(base_manifest, f"results/{'deep/er/' if i > 6 else ''}r{i}/{name}", edit)
    return tmp_path / "results"
