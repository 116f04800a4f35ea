"""``envlock.record()`` inside a real torch program (the CPU torch venv), run with
``PYTHONPATH`` pointing at this checkout (nothing is installed into the venv): the flags as
set, the thread pools, every mapped library, and nothing perturbed; then ``envlock diff`` of
two records that differ in ``torch.backends.cudnn.benchmark`` ranks it first."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest

from envlock.manifest.processtables import process_from_dict

pytestmark = pytest.mark.realenv

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = r'''
import json, os, random, sys
import numpy as np
import torch

bench = sys.argv[2] == "1"
if sys.argv[3] == "1":
    import scipy.linalg  # a second OpenBLAS copy (scipy's own wheel bundles one)
torch.manual_seed(0); np.random.seed(0); random.seed(0)
torch.backends.cudnn.benchmark = bench
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("high")
torch.set_num_threads(1)
x = torch.randn(64, 64)
y = (x @ x).sum() + float(np.random.rand()) + random.random()   # "model set-up" draws numbers

def maps():
    return {l.split(None, 5)[5].strip() for l in open("/proc/self/maps")
            if len(l.split(None, 5)) == 6 and ".so" in l}

def state():
    return (repr(random.getstate()), np.random.get_state()[1].tobytes().hex(),
            torch.get_rng_state().tolist(), torch.cuda.is_initialized(), torch.get_num_threads(),
            torch.get_num_interop_threads())

before, maps_before, mods_before = state(), maps(), set(sys.modules)
import envlock
m = envlock.record(sys.argv[1], extra={"bench": bench})
after, maps_after = state(), maps()
new = sorted(set(sys.modules) - mods_before)
print(json.dumps({"same": before == after, "cuda": torch.cuda.is_initialized(),
                  "new_modules": new, "maps_before": sorted(maps_before),
                  "maps_after": sorted(maps_after), "torch_file": torch.__file__}))
'''


def _deps_dir(tmp: Path) -> Path:
    """envlock's own dependencies, linked from this interpreter's environment (the torch venv
    lacks tomli-w and packaging); nothing is installed into the venv."""
    d = tmp / "deps"
    d.mkdir()
    for mod in ("tomli_w", "packaging", "elftools", "yaml", "rtoml"):
        spec = importlib.util.find_spec(mod)
        if spec is None or not spec.origin:
            continue
        src = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        (d / src.name).symlink_to(src)
    return d


def _record(venv: Path, tmp: Path, out: str, bench: bool, scipy: bool = False) -> dict:
    prog = tmp / "train.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{_deps_dir(tmp) if not (tmp / 'deps').exists() else tmp / 'deps'}"
    env["RANK"] = "3"
    r = subprocess.run([str(venv / "bin" / "python"), str(prog), out, "1" if bench else "0",
                        "1" if scipy else "0"],
                       cwd=tmp, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_record_in_a_torch_program(cpu_venv: Path, tmp_path: Path) -> None:
    seen = _record(cpu_venv, tmp_path, "rec-{rank}-on.toml", True, scipy=True)
    assert seen["same"] is True  # RNG states, thread counts unchanged
    assert seen["cuda"] is False  # no CUDA initialisation
    frameworks = ("torch", "numpy", "scipy", "threadpoolctl", "jax", "tensorflow")
    assert not [m for m in seen["new_modules"] if m.split(".")[0] in frameworks]
    doc = tomllib.loads((tmp_path / "rec-3-on.toml").read_text())
    assert doc["target"]["prefix"] == str(cpu_venv)
    assert any(p["name"] == "torch" for p in doc["pip"]["packages"])
    proc = process_from_dict(doc["process"])
    assert proc.rank == 3 and proc.pid
    t = proc.torch
    assert t is not None and t.version.startswith("2.")
    assert (t.cudnn_benchmark, t.cudnn_deterministic, t.deterministic_algorithms) == (True, True, True)
    # set_float32_matmul_precision("high") after allow_tf32 = False turns TF32 matmul back on
    # (torch docs: "high" uses TF32): the record reports what torch will do, not what was typed
    assert (t.allow_tf32_matmul, t.allow_tf32_cudnn) == (True, False)
    assert t.float32_matmul_precision == "high" and t.num_threads == 1
    assert t.initial_seed == "0" and t.seed_is_default is False and t.rng_state_sha256
    assert t.cuda_initialized is False and not proc.gpus
    assert proc.seeds and proc.seeds.python and proc.seeds.numpy
    assert set(proc.modules) >= {"torch", "numpy"}
    assert dict(proc.extra) == {"bench": True}
    paths = {lib.path for lib in proc.libraries}
    before, after = set(seen["maps_before"]), set(seen["maps_after"])
    assert {p for p in before if ".so" in os.path.basename(p)} <= paths <= after
    torch_lib = os.path.join(os.path.dirname(seen["torch_file"]), "lib")
    owners = {lib.path: lib.owner for lib in proc.libraries}
    cpu = [p for p in paths if p.startswith(torch_lib) and "libtorch_cpu" in p]
    assert cpu and owners[cpu[0]].startswith("torch 2.")
    pools = {(p.internal_api, os.path.basename(p.path)): p for p in proc.threadpools}
    omp = [p for (api, name), p in pools.items() if api == "openmp" and p.path.startswith(torch_lib)]
    assert omp and omp[0].num_threads == 1  # torch.set_num_threads(1) sets OpenMP's count
    blas = [p for (api, _), p in pools.items() if api == "openblas"]
    assert len(blas) == 2 and all(p.num_threads and p.num_threads >= 1 for p in blas)
    # each copy reports its own version (openblas_get_config), as its file name says
    for p in blas:
        assert p.version and f"{p.version.split('.', 1)[1]}.so" in os.path.basename(p.path)
    assert {os.path.basename(os.path.dirname(p.path)) for p in blas} == {"numpy.libs", "scipy.libs"}
    assert proc.cost is not None and proc.cost < 0.5, proc.cost


def test_diff_says_cudnn_benchmark_is_no_cause_without_a_gpu(cpu_venv: Path, tmp_path: Path) -> None:
    _record(cpu_venv, tmp_path, "on.toml", True)
    _record(cpu_venv, tmp_path, "off.toml", False)
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", "--format", "json",
                        str(tmp_path / "on.toml"), str(tmp_path / "off.toml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    # The CPU venv on a machine without a GPU: cuDNN's autotuner runs no kernel, so the flag
    # cannot change numbers here — a context note that says why, never a ranked cause (issue 25,
    # "an explanation is only a possible cause"; impact.toml `needs = "gpu"`).
    assert not [e for e in doc["explanations"] if "cudnn.benchmark" in e["title"]], doc["explanations"]
    [note] = [c for c in doc["context"] if "cudnn.benchmark" in c]
    assert note.startswith("not a cause here:") and "GPU" in note, note
