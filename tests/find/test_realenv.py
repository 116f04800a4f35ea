"""``envlock find`` over the real torch venvs: their snapshots, ``envlock.record()`` in a real
torch program (TF32 and determinism set as a program sets them) and ``envlock run`` records.
Every expected match is computed from the files' own contents."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from envlock.find import find

from .conftest import envlock_cmd, load

pytestmark = pytest.mark.realenv

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = r'''
import os, sys
import torch
tf32 = sys.argv[2] == "1"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.use_deterministic_algorithms(sys.argv[3] == "1")
import envlock
envlock.record(sys.argv[1], snapshot=sys.argv[4] == "1")
'''


def _deps(tmp: Path) -> Path:
    """envlock's own dependencies linked from this interpreter (nothing installed in the venv)."""
    d = tmp / "deps"
    d.mkdir(exist_ok=True)
    for mod in ("tomli_w", "packaging", "elftools", "yaml", "rtoml"):
        spec = importlib.util.find_spec(mod)
        if spec is None or not spec.origin:
            continue
        src = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        if not (d / src.name).exists():
            (d / src.name).symlink_to(src)
    return d


@pytest.fixture(scope="module")
def real_results(cpu_venv: Path, cuda_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real") / "results"
    for name, venv in (("cpu", cpu_venv), ("cuda", cuda_venv)):
        out = root / "snapshots" / name / "manifest.toml"
        out.parent.mkdir(parents=True)
        r = envlock_cmd("snapshot", "--python", str(venv / "bin" / "python"), "-o", str(out), "-q")
        assert r.returncode == 0, r.stderr
    prog = root.parent / "train.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX",
                                                             "CUBLAS_WORKSPACE_CONFIG")}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{_deps(root.parent)}"
    for name, tf32, det, ws in (("tf32-on", "1", "0", None), ("tf32-off", "0", "1", None),
                                ("det-ws", "0", "1", ":4096:8")):
        out = root / "records" / f"{name}.toml"
        out.parent.mkdir(parents=True, exist_ok=True)
        e = dict(env)
        if ws:
            e["CUBLAS_WORKSPACE_CONFIG"] = ws
        r = subprocess.run([str(cpu_venv / "bin" / "python"), str(prog), str(out), tf32, det,
                            "1" if name == "tf32-on" else "0"], capture_output=True, text=True,
                           timeout=300, env=e, cwd=root.parent)
        assert r.returncode == 0, r.stderr[-2000:]
    r = envlock_cmd("run", "--dir", str(root / "runs" / "train"), "-q", "--python",
                    str(cpu_venv / "bin" / "python"), "--", str(cpu_venv / "bin" / "python"), "-c",
                    "import torch; print(torch.__version__)")
    assert r.returncode == 0, r.stderr
    return root


def _pip(d: dict[str, Any], name: str) -> str | None:
    return next((p["version"] for p in d.get("pip", {}).get("packages", [])
                 if p["name"].lower() == name), None)


def _want(root: Path, pred: Any) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.toml")):
        d = load(p)
        if "run" in d and d["run"].get("manifest"):  # a run record carries its manifest's environment
            m = load(p.parent / d["run"]["manifest"])
            d = {**m, **d}
        if pred(d):
            out.append(str(p))
    return out


def test_queries_on_the_real_torch_venvs_and_records(real_results: Path, tmp_path: Path) -> None:
    index = str(tmp_path / "ix.sqlite")
    cuda = load(real_results / "snapshots" / "cuda" / "manifest.toml")
    cudnn = next(lib["version"] for lib in cuda["cuda"]["libraries"] if lib["name"] == "cudnn")
    cudnn_spec = "~=" + ".".join(cudnn.split(".")[:2])
    cases = {
        "torch.build == cuda": lambda d: any(p.get("build") == "cuda" for p in
                                             d.get("frameworks", {}).get("packages", [])),
        "torch < 2.14": lambda d: _pip(d, "torch") is not None and SpecifierSet("<2.14").contains(
            _pip(d, "torch"), prereleases=True),
        "numpy >= 2": lambda d: _pip(d, "numpy") is not None and SpecifierSet(">=2").contains(
            _pip(d, "numpy"), prereleases=True),
        f"cuda.cudnn {cudnn_spec}": lambda d: any(
            lib["name"] == "cudnn" and SpecifierSet(cudnn_spec).contains(lib["version"])
            for lib in d.get("cuda", {}).get("libraries", [])),
        "torch.tf32.matmul == true": lambda d: d.get("process", {}).get("torch", {}).get(
            "allow-tf32-matmul") is True,
        "torch.deterministic == true and CUBLAS_WORKSPACE_CONFIG unset": lambda d: d.get(
            "process", {}).get("torch", {}).get("deterministic-algorithms") is True
            and not d["process"].get("cublas-workspace-config"),
        "CUBLAS_WORKSPACE_CONFIG == :4096:8": lambda d: d.get("process", {}).get(
            "cublas-workspace-config") == ":4096:8",
        "kind == run and torch == 2.13.0": lambda d: "run" in d and SpecifierSet("==2.13.0").contains(
            _pip(d, "torch") or "0"),
    }
    for query, pred in cases.items():
        want = _want(real_results, pred)
        assert want, query
        got = sorted(m.path for m in find([real_results], query, index=index).matches)
        assert got == want, query
    assert len(_want(real_results, cases["torch.build == cuda"])) < len(list(real_results.rglob("*.toml")))


def test_group_by_environment_separates_the_two_venvs(real_results: Path, tmp_path: Path) -> None:
    index = str(tmp_path / "ix.sqlite")
    r = envlock_cmd("find", str(real_results / "snapshots"), "--group-by", "environment", "--index", index)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("2 environments among 2 results")
    assert "torch" in r.stdout  # the CPU/CUDA variant of torch names the difference
