"""GPU checks on real venv layouts, a fake /proc and fake nvidia-smi programs: C05, C06, C07."""

from __future__ import annotations

import sys
from pathlib import Path


from envlock.verify.checks import CHECKS
from envlock.verify.checks.gpucompat import check_arch, check_cpu_build, check_driver, visible_gpus
from envlock.probes.target import resolve_target
from envlock.verify import verify
from envlock.verify.context import Context
from envlock.verify.expected import Expected, read_lock
from envlock.manifest.stacktables import FrameworkBuild, Gpu
from envlock.verify.live import Live
from tests.verify.conftest import (
    PROC_396,
    PROC_580_OPEN,
    fake_nvidia_smi,
    fake_root,
    gpu_line,
    install_dist,
    install_torch,
    site_packages,
    snapshot_to,
)

GTX1070TI = gpu_line(0, "NVIDIA GeForce GTX 1070 Ti", "GPU-3f1a2b4c-5d6e-7f80-91a2-b3c4d5e6f701", 8192, "6.1", "396.44")
RTX3090 = gpu_line(0, "NVIDIA GeForce RTX 3090", "GPU-9c0e8d2a-1b3c-4d5e-8f90-a1b2c3d4e5f6", 24576, "8.6", "580.95.05")
H100 = gpu_line(1, "NVIDIA H100 80GB HBM3", "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", 81559, "9.0", "580.95.05")


def only(*names):
    return [c for c in CHECKS if c[0] in names]


def ids(report):
    return [f.id for f in report.findings]


def by_id(report, fid):
    found = [f for f in report.findings if f.id == fid]
    assert found, f"{fid} not in {ids(report)}"
    return found[0]


def test_live_gpu_facts_from_proc_and_nvidia_smi(tmp_path, venv, job_env):
    root = fake_root(tmp_path, PROC_580_OPEN)
    fake_nvidia_smi(tmp_path / "bin", [RTX3090, H100])
    target = resolve_target(python=str(venv / "bin/python"), environ=job_env)
    g = Live(target, environ=job_env, root=str(root)).gpu
    assert (g.status, g.driver_version, g.cuda_driver_version) == ("ok", "580.95.05", "13.0")
    assert [(d.index, d.compute_capability) for d in g.gpus] == [(0, "8.6"), (1, "9.0")]
    bare = {**job_env, "PATH": "/usr/bin:/bin"}  # no nvidia-smi either
    g = Live(target, environ=bare, root=str(fake_root(tmp_path / "none", None))).gpu
    assert g.status == "absent" and g.driver_version is None and "no NVIDIA driver" in g.error


def test_c06_cuda10_torch_on_a_cuda9_driver(tmp_path, venv, job_env):
    install_torch(site_packages(venv), "1.3.0", "10.0.130")
    root = fake_root(tmp_path, PROC_396)
    fake_nvidia_smi(tmp_path / "bin", [GTX1070TI])
    r = verify(python=str(venv / "bin/python"), environ=job_env, root=str(root),
               checks=only("driver"))
    f = by_id(r, "gpu.driver-too-old")
    assert f.severity == "error"
    assert f.title == "torch 1.3.0 was built with CUDA 10.0; driver 396.44 supports up to CUDA 9.2; needs ≥ 410.48"
    assert "torch build: torch/version.py cuda='10.0.130'" in f.evidence[0]
    assert any("NVIDIA table: CUDA 10.0 toolkit ships driver 410.48" == e for e in f.evidence)
    assert f.fix[0].startswith("Upgrade the NVIDIA driver to ≥ 410.48")
    assert r.exit_code == 1


def test_driver_new_enough_gives_nothing_and_minor_compat_is_info(tmp_path, venv, job_env):
    install_torch(site_packages(venv), "2.14.1+cu130", "13.0")
    root = fake_root(tmp_path, PROC_580_OPEN)
    fake_nvidia_smi(tmp_path / "bin", [RTX3090])
    r = verify(python=str(venv / "bin/python"), environ=job_env, root=str(root), checks=only("driver"))
    assert r.findings == () and r.exit_code == 0
    (site_packages(venv) / "torch/version.py").write_text(
        (site_packages(venv) / "torch/version.py").read_text().replace("'13.0'", "'13.1'"))
    r = verify(python=str(venv / "bin/python"), environ=job_env, root=str(root), checks=only("driver"))
    assert ids(r) == ["gpu.driver-minor-compat"] and r.exit_code == 0
    assert "590.44.01" in r.findings[0].title


def test_c05_cpu_build_when_manifest_expects_cuda(tmp_path, venv, job_env):
    site = site_packages(venv)
    install_torch(site, "2.14.1", "13.0")
    install_dist(site, "nvidia-cuda-runtime", "13.0.96")
    manifest = snapshot_to(venv, tmp_path / "cuda.toml")
    # The job's environment was since rebuilt with the CPU wheel.
    (site / "torch-2.14.1.dist-info").rename(site / "torch-2.13.0+cpu.dist-info")
    meta = site / "torch-2.13.0+cpu.dist-info/METADATA"
    meta.write_text(meta.read_text().replace("Version: 2.14.1", "Version: 2.13.0+cpu"))
    (site / "torch/version.py").write_text((site / "torch/version.py").read_text()
                                           .replace("'2.14.1'", "'2.13.0+cpu'").replace("'13.0'", "None"))
    r = verify(python=str(venv / "bin/python"), manifest=str(manifest), environ=job_env,
               root=str(fake_root(tmp_path, None)), checks=only("cpu-build", "packages"))
    f = by_id(r, "gpu.cpu-only-build")
    assert f.severity == "error"
    assert f.title == "torch 2.13.0+cpu is a CPU-only build; the manifest expects a CUDA 13.0 build (2.14.1)"
    assert f.evidence[0].startswith("torch build: torch/version.py cuda=None hip=None; local version +cpu")
    # The snapshot's [frameworks] table records the build (torch/version.py); a manifest without
    # it falls back on the CUDA runtime wheel next to torch.
    assert "manifest [frameworks] torch: torch/version.py cuda='13.0' (a CUDA 13.0 build)" in f.evidence
    assert "download.pytorch.org/whl/cu130" in f.fix[0]
    v = by_id(r, "packages.version-mismatch")
    assert v.title.startswith("torch 2.13.0+cpu is installed; the manifest (cuda.toml) has 2.14.1")


def test_c05_conda_cpu_build_with_gpus_allocated(tmp_path, job_env):
    """The conda form of C05: build string py3.8_cpu_0 from the pytorch channel, in a Slurm GPU job."""
    import json
    import subprocess

    prefix = tmp_path / "torchenv"
    (prefix / "conda-meta").mkdir(parents=True)
    record = {
        "name": "pytorch", "version": "1.9.0", "build": "py3.8_cpu_0", "build_number": 0,
        "channel": "https://conda.anaconda.org/pytorch/linux-64", "subdir": "linux-64",
        "url": "https://conda.anaconda.org/pytorch/linux-64/pytorch-1.9.0-py3.8_cpu_0.tar.bz2",
        "md5": "5e8c3a41b7d04d8b9a6f19b5d24a1c77", "depends": ["cpuonly", "python >=3.8,<3.9.0a0"],
        "files": ["lib/python3.8/site-packages/torch/__init__.py"],
    }
    (prefix / "conda-meta/pytorch-1.9.0-py3.8_cpu_0.json").write_text(json.dumps(record))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    env = {**job_env, "SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "2", "SLURM_GPUS_ON_NODE": "1",
           "CUDA_VISIBLE_DEVICES": "0"}
    r = verify(prefix=str(prefix), environ=env, root=str(fake_root(tmp_path, None)),
               checks=only("cpu-build"))
    f = by_id(r, "gpu.cpu-only-build")
    assert f.title.startswith("torch 1.9.0 is a CPU-only build")
    assert "conda build py3.8_cpu_0" in f.evidence[0]
    assert any("Slurm allocated 1 GPU(s)" in e for e in f.evidence)


def test_no_driver_is_a_warning_on_a_login_node_and_an_error_with_gpus_allocated(tmp_path, venv, job_env):
    install_torch(site_packages(venv), "2.14.1+cu130", "13.0")
    root = fake_root(tmp_path, None)
    r = verify(python=str(venv / "bin/python"), environ=job_env, root=str(root), checks=only("driver"))
    f = by_id(r, "gpu.no-driver")
    assert f.severity == "warning" and "torch 2.14.1+cu130 is a CUDA 13.0 build" in f.title
    assert r.exit_code == 0
    env = {**job_env, "SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1"}
    r = verify(python=str(venv / "bin/python"), environ=env, root=str(root), checks=only("driver"))
    assert by_id(r, "gpu.no-driver").severity == "error" and r.exit_code == 1


CONDA_LOCK = """\
version: 1
metadata:
  content_hash:
    linux-64: 6b2b1c0e0d6f4e1c9a7b3f5e8d2c4a6b8e0f1a3c5e7b9d1f3a5c7e9b1d3f5a7c
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - environment.yml
package:
- name: pytorch
  version: 2.5.1
  manager: conda
  platform: linux-64
  dependencies:
    __cuda: ''
    cuda-version: '>=12.6,<13'
    python: '>=3.11,<3.12.0a0'
  url: https://conda.anaconda.org/conda-forge/linux-64/pytorch-2.5.1-cuda126_py311h1763f0e_306.conda
  hash:
    md5: 0d9a9ea1c4aa6f4b0c3b5f1f0e6b2e11
    sha256: 3f2b8c1e5d7a9b0c2e4f6a8b0d2e4f6a8c0e2f4a6b8d0e2f4a6c8e0a2c4e6a8b
  category: main
  optional: false
- name: cuda-version
  version: '12.6'
  manager: conda
  platform: linux-64
  dependencies:
    __cuda: '>=12'
  url: https://conda.anaconda.org/conda-forge/noarch/cuda-version-12.6-h7480c83_3.conda
  hash:
    md5: 1574f2d8e7b6a3e9b6e5a3b2c7d1f0aa
    sha256: 5e2a7c9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c5e7b9d1f3a5c
  category: main
  optional: false
"""


def test_lock_requiring_cuda_on_a_node_without_driver_and_with_an_old_one(tmp_path, venv, job_env):
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(CONDA_LOCK)
    parsed = read_lock(lock, platform="linux-64")
    assert [(p.name, p.build, p.cuda) for p in parsed.packages] == [
        ("pytorch", "cuda126_py311h1763f0e_306", ""), ("cuda-version", "h7480c83_3", ">=12")]
    r = verify(python=str(venv / "bin/python"), locks=[str(lock)], environ=job_env,
               root=str(fake_root(tmp_path, None)), checks=only("driver"))
    f = by_id(r, "gpu.no-driver")
    assert f.severity == "error" and "needs __cuda" in f.title
    # A CUDA 11.4 driver on the node: cuda-version needs __cuda >=12.
    root = fake_root(tmp_path / "n2", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Tue Oct 26 2021\n")
    fake_nvidia_smi(tmp_path / "bin", [gpu_line(0, "Tesla V100-SXM2-32GB", "GPU-aa", 32510, "7.0", "470.82.01")])
    r = verify(python=str(venv / "bin/python"), locks=[str(lock)], environ=job_env, root=str(root),
               checks=only("driver"))
    f = by_id(r, "gpu.driver-too-old")
    assert "needs __cuda >=12; driver 470.82.01 supports up to CUDA 11.4" in f.title
    assert "CONDA_OVERRIDE_CUDA" in f.fix[1]


def _ctx(tmp_path, venv, job_env, gpus, build, environ=None, proc=PROC_580_OPEN):
    target = resolve_target(python=str(venv / "bin/python"), environ=job_env)
    env = {**job_env, **(environ or {})}
    root = fake_root(tmp_path, proc)
    fake_nvidia_smi(tmp_path / "bin", gpus)
    live = Live(target, environ=env, root=str(root),
                preset={"frameworks": (build,), "frameworks+archs": (build,)})
    return Context(live=live, expected=Expected(), environ=env)


def test_c07_gtx1070ti_with_a_cu111_nightly(tmp_path, venv, job_env):
    build = FrameworkBuild(name="torch", version="1.9.0.dev20210302+cu111", build="cuda", cuda="11.1",
                       evidence="torch/version.py cuda='11.1'",
                       cuda_archs=("sm_50", "sm_70", "sm_80", "sm_86"),
                       cuda_archs_source="torch/lib/libtorch_cuda.so")
    gpu = gpu_line(0, "NVIDIA GeForce GTX 1070 Ti", "GPU-3f1a", 8192, "6.1", "580.95.05")
    out = check_arch(_ctx(tmp_path, venv, job_env, [gpu], build))
    assert [f.id for f in out] == ["gpu.arch-unsupported"]
    f = out[0]
    assert f.title == ("GPU 0 NVIDIA GeForce GTX 1070 Ti (compute capability 6.1) cannot run "
                       "torch 1.9.0.dev20210302+cu111: no kernel image for sm_61")
    assert "no kernel image is available for execution on the device" in f.cause
    assert "torch 1.9.0.dev20210302+cu111 is built for: sm_50 sm_70 sm_80 sm_86 (from torch/lib/libtorch_cuda.so)" in f.evidence
    assert "cu126" in f.fix[0]


def test_c07_reverse_rtx3090_with_cu102_and_only_visible_gpus_count(tmp_path, venv, job_env):
    build = FrameworkBuild(name="torch", version="1.7.1+cu102", build="cuda", cuda="10.2",
                       evidence="torch/version.py cuda='10.2'", cuda_archs=("sm_37", "sm_50", "sm_60", "sm_70"))
    ctx = _ctx(tmp_path, venv, job_env, [RTX3090, H100], build, {"CUDA_VISIBLE_DEVICES": "1"})
    out = check_arch(ctx)
    assert [f.id for f in out] == ["gpu.arch-unsupported"]
    assert "GPU 1 NVIDIA H100 80GB HBM3 (compute capability 9.0)" in out[0].title
    assert "newer than every architecture" in out[0].cause


def test_ptx_only_gpu_warns_and_errors_when_the_driver_cannot_jit(tmp_path, venv, job_env):
    build = FrameworkBuild(name="torch", version="2.7.0+cu128", build="cuda", cuda="12.8",
                       cuda_archs=("sm_80", "compute_80"))
    ctx = _ctx(tmp_path, venv, job_env, [gpu_line(0, "NVIDIA H100", "GPU-h", 81559, "9.0", "580.95.05")], build)
    assert [f.id for f in check_arch(ctx)] == ["gpu.arch-ptx-only"]
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    ctx = _ctx(tmp_path, venv, job_env, [gpu_line(0, "NVIDIA H100", "GPU-h", 81559, "9.0", "535.104.05")],
               build, proc=proc)
    out = check_arch(ctx)
    assert [f.id for f in out] == ["gpu.ptx-driver-too-old"]
    assert "570.26" in out[0].fix[0]


def test_arch_unknown_is_info_and_no_gpu_means_no_finding(tmp_path, venv, job_env):
    build = FrameworkBuild(name="torch", version="2.14.1", build="cuda", cuda="13.0", error="no .nv_fatbin section")
    ctx = _ctx(tmp_path, venv, job_env, [RTX3090], build)
    out = check_arch(ctx)
    assert [(f.id, f.severity) for f in out] == [("gpu.arch-unknown", "info")]
    assert check_arch(_ctx(tmp_path, venv, job_env, [], build)) == []


def test_visible_gpus_follows_cuda_runtime_rules():
    gpus = [Gpu(index=0, uuid="GPU-aaa"), Gpu(index=1, uuid="GPU-bbb"), Gpu(index=2, uuid="GPU-ccc")]
    assert visible_gpus(gpus, {}) == gpus
    assert [g.index for g in visible_gpus(gpus, {"CUDA_VISIBLE_DEVICES": "2,0"})] == [2, 0]
    assert [g.index for g in visible_gpus(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-bb"})] == [1]
    assert [g.index for g in visible_gpus(gpus, {"CUDA_VISIBLE_DEVICES": "1,7,0"})] == [1]
    assert visible_gpus(gpus, {"CUDA_VISIBLE_DEVICES": ""}) == []


def test_cpu_build_without_any_reason_is_fine(tmp_path, venv, job_env):
    install_torch(site_packages(venv), "2.13.0+cpu", None)
    target = resolve_target(python=str(venv / "bin/python"), environ=job_env)
    live = Live(target, environ=job_env, root=str(fake_root(tmp_path, None)))
    assert check_cpu_build(Context(live=live, environ=job_env)) == []
    assert check_driver(Context(live=live, environ=job_env)) == []
    assert Path(live.frameworks()[0].location).name == "torch"


def test_cpu_build_severity_depends_on_what_was_meant(tmp_path, venv, job_env):
    """Node with a GPU: a CPU torch nobody asked about is a warning; recorded as CPU and no GPU
    allocated: fine; recorded as CPU but GPUs allocated: a warning about the allocation."""
    site = site_packages(venv)
    install_torch(site, "2.13.0+cpu", None)
    root = fake_root(tmp_path, PROC_580_OPEN)
    fake_nvidia_smi(tmp_path / "bin", [RTX3090])
    py = str(venv / "bin/python")
    r = verify(python=py, environ=job_env, root=str(root), checks=only("cpu-build"))
    assert [(f.id, f.severity) for f in r.findings] == [("gpu.cpu-only-build", "warning")]
    assert "this node has 1 NVIDIA GPU(s), driver 580.95.05" in r.findings[0].evidence
    m = snapshot_to(venv, tmp_path / "cpu.toml")
    r = verify(python=py, manifest=str(m), environ=job_env, root=str(root), checks=only("cpu-build"))
    assert r.findings == ()
    env = {**job_env, "SLURM_JOB_ID": "3", "SLURM_GPUS_ON_NODE": "1", "CUDA_VISIBLE_DEVICES": "0"}
    r = verify(python=py, manifest=str(m), environ=env, root=str(root), checks=only("cpu-build"))
    assert [(f.id, f.severity) for f in r.findings] == [("gpu.cpu-only-build", "warning")]


def test_expected_build_from_a_frameworks_table(tmp_path, venv, job_env):
    """Manifests written with the stack probes carry [[frameworks.packages]]; verify reads the
    recorded build from there (whether this envlock models the table or keeps it as extra)."""
    site = site_packages(venv)
    install_torch(site, "2.13.0+cpu", None)
    m = snapshot_to(venv, tmp_path / "m.toml", stack=False)
    m.write_text(m.read_text() + '\n[[frameworks.packages]]\nname = "torch"\nversion = "2.5.1+cu121"\n'
                 'build = "cuda"\ncuda = "12.1"\nevidence = "torch/version.py cuda=\'12.1\'; local version +cu121"\n')
    r = verify(python=str(venv / "bin/python"), manifest=str(m), environ=job_env,
               root=str(fake_root(tmp_path, None)), checks=only("cpu-build"))
    f = by_id(r, "gpu.cpu-only-build")
    assert f.title == "torch 2.13.0+cpu is a CPU-only build; the manifest expects a CUDA 12.1 build (2.5.1+cu121)"
    assert "manifest [frameworks] torch: torch/version.py cuda='12.1'; local version +cu121 (a CUDA 12.1 build)" in f.evidence


def test_expected_cuda_build_from_the_runtime_wheel_without_frameworks_table(tmp_path, venv, job_env):
    """A manifest without [frameworks] (taken with the stack probes off, or by an older envlock):
    PyPI's torch 2.14.1 has no local label; the nvidia-cuda-runtime wheel beside it tells."""
    site = site_packages(venv)
    install_torch(site, "2.14.1", "13.0")
    install_dist(site, "nvidia-cuda-runtime", "13.0.96")
    manifest = snapshot_to(venv, tmp_path / "cuda.toml", stack=False)
    (site / "torch/version.py").write_text((site / "torch/version.py").read_text().replace("'13.0'", "None"))
    r = verify(python=str(venv / "bin/python"), manifest=str(manifest), environ=job_env,
               root=str(fake_root(tmp_path, None)), checks=only("cpu-build"))
    f = by_id(r, "gpu.cpu-only-build")
    assert "manifest: torch 2.14.1 with nvidia-cuda-runtime 13.0.96 (a CUDA 13.0 build)" in f.evidence
