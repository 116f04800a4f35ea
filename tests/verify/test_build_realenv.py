"""``envlock verify --build`` on the real CUDA torch venv, with the real toolkit of this machine
(run with ``pytest --realenv``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.nvidia import host_compiler_range
from envlock.probes.buildenv import probe_build
from envlock.probes.buildfiles import (
    DEFAULT_CUDA_HOME_ORDER,
    parse_host_config,
    parse_nvcc_release,
    read_cuda_home_order,
    read_torch_gcc_bounds,
)
from envlock.probes.world import World

pytestmark = pytest.mark.realenv


def _site(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages"))


def test_verify_build_on_the_cuda_venv(cuda_venv, tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LC_ALL": "C"}
    r = subprocess.run([sys.executable, "-m", "envlock", "verify", "--build", "--python", str(cuda_venv / "bin/python"),
                        "--format", "json"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1) and r.stderr == "", r.stderr
    doc = json.loads(r.stdout)
    print("\n".join(f"{f['severity']}: {f['id']}: {f['title']}" for f in doc["findings"]))
    assert [c["name"] for c in doc["checks"]] == ["build-cuda", "build-compiler", "build-abi", "build-libstdcxx",
                                                  "build-arch", "build-virtual"]
    assert all(c["status"] in ("ok", "findings") for c in doc["checks"])
    found = {f["id"] for f in doc["findings"]}
    nvcc = shutil.which("nvcc", path=env["PATH"])
    b = probe_build(World(environ=env, prefix=str(cuda_venv), site_dirs=[str(_site(cuda_venv))]))
    assert b.torch_cuda == "13.0" and b.torch_version == "2.14.1+cu130"
    assert b.torch_cxx11_abi is True and "__cxx11" in (b.torch_cxx11_abi_source or "")
    assert b.torch_gcc == "13.3.1"  # readelf -p .comment libtorch_cpu.so: GCC: (GNU) 13.3.1 20240611
    assert b.cuda_home_order == DEFAULT_CUDA_HOME_ORDER
    if nvcc is None:
        pytest.skip("no nvcc on PATH here")
    # the oracle: torch's rule, nvcc on PATH → its parent's parent; the real nvcc's own answer
    assert b.cuda_home == os.path.dirname(os.path.dirname(nvcc)) and b.cuda_home_found_by == "nvcc on PATH"
    real = subprocess.run([nvcc, "--version"], check=True, capture_output=True, text=True, timeout=60).stdout
    assert (b.nvcc_release, b.nvcc_version) == parse_nvcc_release(real)
    if b.nvcc_release.split(".")[0] == "13":
        assert "build.cuda-mismatch" not in found
    if not os.path.exists(os.path.join(b.cuda_home, "include", "cuda_runtime.h")):
        assert "build.cuda-home-incomplete" in found


def test_real_cpp_extension_is_read_as_written(cuda_venv):
    text = (_site(cuda_venv) / "torch" / "utils" / "cpp_extension.py").read_text()
    assert read_cuda_home_order(text) == ("CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda")
    bounds = read_torch_gcc_bounds(text)
    assert bounds["13.0"] == ((6, 0, 0), (16, 0)) and bounds["11.0"] == ((5, 0, 0), (10, 0))


def test_nvidia_table_agrees_with_the_real_host_config_h():
    """The real toolkit's nvcc gate (include/crt/host_config.h) against HOST_COMPILERS."""
    cands = sorted(Path("/usr/local").glob("cuda-*/include/crt/host_config.h")) + \
        sorted(Path("/usr/local").glob("cuda-*/targets/*/include/crt/host_config.h"))
    if not cands:
        pytest.skip("no CUDA toolkit in /usr/local")
    for hc in cands:
        kit = next(p for p in hc.parents if p.parent == Path("/usr/local"))
        nvcc = kit / "bin" / "nvcc"
        if not nvcc.exists():
            continue
        release, _ = parse_nvcc_release(subprocess.run([str(nvcc), "--version"], check=True, capture_output=True, text=True,
                                                       timeout=60).stdout)
        row = host_compiler_range(release)
        gcc_max, clang_max = parse_host_config(hc.read_text())
        assert row is not None, release
        assert (gcc_max, clang_max) == (int(row.gcc_max.split(".")[0]), int(row.clang_max.split(".")[0]))


ORACLE = """
import json, os
from torch.utils import cpp_extension as c
out = {"cuda_home": c.CUDA_HOME}
try:
    c._get_cuda_arch_flags()
    out["arch_flags"] = "ok"
except Exception as exc:
    out["arch_flags"] = type(exc).__name__
print("ORACLE" + json.dumps(out))
"""


def test_torch_itself_agrees_on_cuda_home_and_arch_flags(cuda_venv, tmp_path):
    """The oracle: torch's own cpp_extension, run in the target interpreter (imports torch, ~3 s)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LC_ALL": "C"}
    r = subprocess.run([str(cuda_venv / "bin/python"), "-c", ORACLE], check=True, env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    told = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("ORACLE"))[6:])
    b = probe_build(World(environ=env, prefix=str(cuda_venv), site_dirs=[str(_site(cuda_venv))]))
    assert told["cuda_home"] == b.cuda_home
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "envlock", "verify", "--build", "--python", str(cuda_venv / "bin/python"),
         "--format", "json"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300).stdout)
    found = {f["id"] for f in doc["findings"]}
    if b.cuda_home:  # no GPU here: torch 2.14.1 fails to choose architectures, envlock says so
        assert (told["arch_flags"] == "IndexError") == ("build.arch-list-unset" in found)
