"""A snapshot hands its pip scan and conda-meta listing to the stack probes instead of letting
them read the same files again; the stack tables must be exactly those of a stand-alone
:func:`probe_stack` that reads everything itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.probes.assemble import snapshot, target_path_dirs
from envlock.probes.condameta import list_conda_meta
from envlock.probes.pip import scan_distributions
from envlock.probes.stack import STACK_AREAS, probe_stack
from envlock.probes.target import resolve_target
from envlock.probes.world import World

TORCH_VERSION_PY = "__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\ndebug = False\n"
NVCC = """
echo 'nvcc: NVIDIA (R) Cuda compiler driver'
echo 'Cuda compilation tools, release 12.4, V12.4.131'
echo 'Build cuda_12.4.r12.4/compiler.34097967_0'
"""


def _standalone_stack(python: str, env: dict[str, str], sys_path: tuple[str, ...]) -> dict:
    """What the snapshot's stack call gets, minus the pre-read data: every file read again."""
    target = resolve_target(python=python, environ=env)
    return probe_stack(World(root=Path("/"), environ=env, prefix=target.prefix, site_dirs=[d for d in sys_path if os.path.isdir(d)], path_dirs=target_path_dirs(target, env), python=target.python))


def _assert_same_stack(m, alone: dict) -> None:
    assert list(alone) == list(STACK_AREAS)
    for area in STACK_AREAS:
        assert getattr(m, area) == alone[area], area


@pytest.fixture
def fake_conda_env(tmp_path: Path, dist, conda, make_tool) -> tuple[Path, Path]:
    """A conda-like prefix with a real interpreter, CUDA wheels, torch, numpy, conda records
    (one of them corrupt) and a second site dir on ``PYTHONPATH`` that shadows numpy."""
    prefix = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=300
    )
    (site,) = sorted((prefix / "lib").glob("python3*/site-packages"))
    dist(site, "torch", "2.5.1+cu124", files=("torch/version.py",),
         file_contents={"torch/version.py": TORCH_VERSION_PY},
         requires=("nvidia-cudnn-cu12==9.1.0.70; platform_system == 'Linux'", "filelock"))
    dist(site, "nvidia-cudnn-cu12", "9.1.0.70",
         files=("nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/include/cudnn_version.h"),
         file_contents={"nvidia/cudnn/include/cudnn_version.h":
                        "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n"})
    dist(site, "numpy", "1.26.4",
         files=("numpy/__init__.py", "numpy.libs/libopenblas64_p-r0-0cf96a72.3.23.dev.so"))
    (site / "oldtool-0.1-py3.11.egg-info").write_text("Metadata-Version: 1.1\nName: oldtool\n"
                                                      "Version: 0.1\n")
    extra = tmp_path / "extra"
    dist(extra, "numpy", "1.24.4", files=("numpy/__init__.py",))
    dist(extra, "nvidia-nccl-cu12", "2.21.5", files=("nvidia/nccl/lib/libnccl.so.2",))
    conda(prefix, "cuda-cudart", "12.4.127", "h99ab3db_0")
    conda(prefix, "cuda-version", "12.4", "h3060b56_3")
    conda(prefix, "libblas", "3.9.0", "21_linux64_openblas")
    conda(prefix, "libopenblas", "0.3.26", "pthreads_h413a1c8_0")
    conda(prefix, "llvm-openmp", "17.0.6", "h4dfa4b3_0")
    (prefix / "conda-meta" / "cudnn-9.1.0.70-h1234567_0.json").write_text("{ truncated")
    make_tool("nvcc", NVCC)
    return prefix, extra


def test_snapshot_stack_equals_standalone_probe_stack(
    fake_conda_env: tuple[Path, Path], bin_dir: Path, tmp_path: Path
) -> None:
    prefix, extra = fake_conda_env
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(extra), "LC_ALL": "C"}
    python = str(prefix / "bin" / "python")
    m = snapshot(python=python, environ=env, repo=str(tmp_path), command=["envlock"])
    assert m.target.kind == "conda"
    assert any("cudnn-9.1.0.70-h1234567_0.json" in w for w in m.envlock.warnings)

    _assert_same_stack(m, _standalone_stack(python, env, m.python.path))

    # The tables hold the planted facts (the comparison is not between two empty tables).
    cudnn = {lib.origin: lib for lib in m.cuda.find("cudnn")}
    assert set(cudnn) == {"pip", "conda", "header"}
    assert (cudnn["pip"].version, cudnn["pip"].package) == ("9.1.0.70", "nvidia-cudnn-cu12")
    # the corrupt record is still known to conda by its file name, as before
    assert cudnn["conda"].package == "cudnn=9.1.0.70=h1234567_0"
    assert cudnn["header"].version == "9.1.0"
    (nccl,) = m.cuda.find("nccl")
    assert (nccl.version, nccl.path) == ("2.21.5", str(extra / "nvidia/nccl/lib"))
    torch = m.frameworks.get("torch")
    assert (torch.version, torch.build, torch.cuda) == ("2.5.1+cu124", "cuda", "12.4")
    assert torch.requires == ("nvidia-cudnn-cu12==9.1.0.70",)
    assert [t.version for t in m.cuda.toolkits if t.origin == "conda"] == ["12.4"]
    assert [lib.version for lib in m.cuda.find("cudart") if lib.origin == "conda"] == ["12.4.127"]
    # numpy from PYTHONPATH (first on sys.path) is the one whose BLAS is recorded
    users = {(lib.user, lib.implementation) for lib in m.blas.libraries}
    assert ("conda", "openblas") in users
    assert [p.version for p in m.pip.packages if p.name == "numpy"] == ["1.24.4"]


def test_probe_stack_pre_read_equals_own_read(
    fake_conda_env: tuple[Path, Path], bin_dir: Path
) -> None:
    """probe_stack given the [pip] scan and the conda-meta listing == probe_stack reading them."""
    prefix, extra = fake_conda_env
    (site,) = sorted((prefix / "lib").glob("python3*/site-packages"))
    site_dirs = [str(extra), str(site)]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    path_dirs = [str(bin_dir), "/usr/bin", "/bin"]
    given = probe_stack(World(environ=env, prefix=str(prefix), site_dirs=site_dirs, path_dirs=path_dirs), use_nvml=False, dists=scan_distributions(site_dirs).packages, conda=list_conda_meta(prefix))
    alone = probe_stack(World(environ=env, prefix=str(prefix), site_dirs=site_dirs, path_dirs=path_dirs), use_nvml=False)
    calls = []

    def later():
        calls.append(1)
        return scan_distributions(site_dirs).packages

    lazy = probe_stack(World(environ=env, prefix=str(prefix), site_dirs=site_dirs, path_dirs=path_dirs), use_nvml=False, dists=later)
    assert given == alone == lazy
    assert calls == [1]  # one scan shared by cuda, frameworks, blas and toolchain
    assert [lib.name for lib in given["cuda"].libraries if lib.origin == "pip"] == [
        "cudnn", "nccl"]


@pytest.mark.realenv
def test_cuda_venv_snapshot_stack_equals_standalone(cuda_venv: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{cuda_venv}/bin:{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    python = str(cuda_venv / "bin" / "python")
    m = snapshot(python=python, environ=env, repo=str(tmp_path), command=["envlock"])
    _assert_same_stack(m, _standalone_stack(python, env, m.python.path))
    assert m.frameworks.get("torch").version == "2.14.1+cu130"
    assert {lib.name for lib in m.cuda.libraries} >= {"cudnn", "nccl", "cublas", "cudart"}
    assert m.blas.status == "ok" and m.toolchain.status == "ok"
