"""Checks on the real torch venvs (``pytest --realenv``): issue 3's acceptance facts.

Every expected value is taken from an independent source on the same venv: the venv's own
interpreter (``importlib.metadata``, ``numpy.show_config``, ``import torch``), ``gcc``,
``ldd --version``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from envlock.probes.stack import probe_stack
from envlock.probes.world import World

pytestmark = pytest.mark.realenv


def _site(venv: Path) -> Path:
    (site,) = sorted((venv / "lib").glob("python3*/site-packages"))
    return site


def _py(venv: Path, code: str) -> object:
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd="/",
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stack(venv: Path, **kw):
    env = dict(os.environ)
    env["PATH"] = f"{venv}/bin:{env.get('PATH', '')}"
    world = World(environ=env, prefix=str(venv), site_dirs=[str(_site(venv))],
                  path_dirs=env["PATH"].split(":"), python=str(venv / "bin/python"))
    return probe_stack(world, **kw)


def _dist_versions(venv: Path) -> dict[str, str]:
    return _py(
        venv,
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version "
        "for d in m.distributions()}))",
    )


def test_cuda_venv_stack(cuda_venv: Path) -> None:
    out = _stack(cuda_venv)
    versions = _dist_versions(cuda_venv)

    torch = out["frameworks"].get("torch")
    assert torch.version == "2.14.1+cu130"
    assert (torch.build, torch.cuda) == ("cuda", "13.0")
    assert f"nvidia-cudnn-cu13=={versions['nvidia-cudnn-cu13']}" in torch.requires
    # CUDA 13.0 wheels: TORCH_CUDA_ARCH_LIST 7.5;8.0;8.6;9.0;10.0;12.0 (reference §5.3)
    assert {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} <= set(torch.cuda_archs)
    assert torch.cuda_archs_source.endswith("torch/lib/libtorch_cuda.so")

    cuda = out["cuda"]
    (cudnn,) = [lib for lib in cuda.find("cudnn") if lib.origin == "pip"]
    assert cudnn.version == versions["nvidia-cudnn-cu13"] == "9.24.0.43"
    assert cudnn.package == "nvidia-cudnn-cu13" and "libcudnn.so.9" in cudnn.files
    for comp, dist in [
        ("nccl", "nvidia-nccl-cu13"),
        ("cublas", "nvidia-cublas"),
        ("cufft", "nvidia-cufft"),
        ("cusparse", "nvidia-cusparse"),
        ("cusolver", "nvidia-cusolver"),
        ("nvjitlink", "nvidia-nvjitlink"),
        ("cudart", "nvidia-cuda-runtime"),
    ]:
        (lib,) = [lib for lib in cuda.find(comp) if lib.origin == "pip"]
        assert (lib.package, lib.version) == (dist, versions[dist]), comp
        assert lib.files, comp
    assert any(t.origin == "pip" and t.version == versions["cuda-toolkit"] for t in cuda.toolkits)

    blas = {lib.user: lib for lib in out["blas"].libraries}
    np_cfg = _py(
        cuda_venv,
        "import json, numpy; print(json.dumps(numpy.show_config(mode='dicts')"
        "['Build Dependencies']['blas']))",
    )
    sp_cfg = _py(
        cuda_venv,
        "import json, scipy; print(json.dumps(scipy.show_config(mode='dicts')"
        "['Build Dependencies']['blas']))",
    )
    assert (blas["numpy"].implementation, blas["numpy"].version) == ("openblas", np_cfg["version"])
    assert (blas["scipy"].implementation, blas["scipy"].version) == ("openblas", sp_cfg["version"])
    assert "numpy.libs/libscipy_openblas64_" in blas["numpy"].path
    assert blas["numpy"].int64 is True and blas["scipy"].int64 is False

    _check_toolchain_and_gpu(out)


def test_cpu_venv_stack(cpu_venv: Path) -> None:
    out = _stack(cpu_venv)
    torch = out["frameworks"].get("torch")
    assert (torch.version, torch.build, torch.cuda) == ("2.13.0+cpu", "cpu", None)
    assert "+cpu" in torch.evidence
    assert torch.cuda_archs == () and torch.requires == ()
    assert not [lib for lib in out["cuda"].libraries if lib.origin == "pip"]
    blas = {lib.user: lib for lib in out["blas"].libraries}
    assert (blas["numpy"].version, blas["numpy"].origin) == ("0.3.21", "bundled file")
    sp_cfg = _py(
        cpu_venv,
        "import json, scipy; print(json.dumps(scipy.show_config(mode='dicts')"
        "['Build Dependencies']['blas']))",
    )
    assert blas["scipy"].version == sp_cfg["version"]
    _check_toolchain_and_gpu(out)


def test_cuda_venv_import_mode(cuda_venv: Path) -> None:
    out = _stack(cuda_venv, do_import=True, areas=("frameworks",))
    rt = out["frameworks"].runtime
    real = _py(
        cuda_venv,
        "import json, torch; print(json.dumps([torch.__version__, torch.backends.cudnn.version(), "
        "torch.cuda.is_available(), torch.cuda.get_arch_list()]))",
    )
    assert rt.status == "ok", rt.error
    assert [rt.torch_version, rt.cudnn_version, rt.cuda_available, list(rt.arch_list)] == real
    assert rt.cudnn_version == 92400  # cuDNN 9.24.0
    # what the build really contains ⊇ what torch reports
    assert set(rt.arch_list) <= set(out["frameworks"].get("torch").cuda_archs)


def _check_toolchain_and_gpu(out) -> None:
    gcc = subprocess.run(
        ["gcc", "-dumpfullversion"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    gxx = subprocess.run(
        ["g++", "-dumpfullversion"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    ldd = subprocess.run(
        ["ldd", "--version"], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()[0]
    tc = out["toolchain"]
    assert tc.tool("gcc").version == gcc
    assert tc.tool("g++").version == gxx
    assert tc.glibc == re.search(r"(\d+\.\d+)\s*$", ldd).group(1)
    if not Path("/proc/driver/nvidia/version").exists():
        assert out["gpu"].status == "absent"
        assert out["gpu"].error.startswith("no NVIDIA driver")
