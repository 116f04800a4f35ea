"""Allocation, output-directory, working-directory and isolation checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.verify.checks.allocation import check_gpu_processes, check_visible_devices
from envlock.verify.checks.isolation import check_isolation
from envlock.verify.checks.output import check_output_dir, check_workdir, human_bytes
from envlock.probes.target import resolve_target
from envlock.verify.context import Context, slurm_gpu_count, slurm_gpu_ids
from envlock.verify.live import Live
from envlock.verify.settings import Config
from tests.verify.conftest import PROC_580_OPEN, fake_nvidia_smi, fake_root, gpu_line, install_dist

A100_0 = gpu_line(0, "NVIDIA A100-SXM4-80GB", "GPU-6c1f0e2d-0001-4a5b-9c8d-7e6f5a4b3c2d", 81920, "8.0", "580.95.05")
A100_1 = gpu_line(1, "NVIDIA A100-SXM4-80GB", "GPU-6c1f0e2d-0002-4a5b-9c8d-7e6f5a4b3c2d", 81920, "8.0", "580.95.05")


def ctx_for(tmp_path, venv, env, *, gpus=(), apps=(), proc=PROC_580_OPEN, **kw):
    target = resolve_target(python=str(venv / "bin/python"), environ=env)
    root = fake_root(tmp_path, proc)
    if gpus or apps:
        fake_nvidia_smi(tmp_path / "bin", list(gpus), list(apps))
    live = Live(target, environ=env, root=str(root))
    return Context(live=live, environ=env, **kw)


def ids(findings):
    return [f.id for f in findings]


def test_slurm_allocation_parsing():
    assert slurm_gpu_ids({"SLURM_JOB_GPUS": "0,1", "SLURM_STEP_GPUS": "1"}) == ("1",)
    assert slurm_gpu_count({"SLURM_GPUS_ON_NODE": "4"}) == 4
    assert slurm_gpu_count({"SLURM_JOB_GPUS": "2,3"}) == 2
    assert slurm_gpu_count({}) is None


def test_gpus_allocated_but_cuda_visible_devices_unset(tmp_path, venv, job_env):
    env = {**job_env, "SLURM_JOB_ID": "991", "SLURM_JOB_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2"}
    (f,) = check_visible_devices(ctx_for(tmp_path, venv, env))
    assert f.id == "allocation.visible-devices-unset" and f.severity == "warning"
    assert f.title == "Slurm allocated 2 GPU(s) (2,3) but CUDA_VISIBLE_DEVICES is unset"
    assert "starts on GPU 0" in f.cause
    assert f.evidence == ("SLURM_JOB_GPUS=2,3", "SLURM_GPUS_ON_NODE=2", "CUDA_VISIBLE_DEVICES: unset")


@pytest.mark.parametrize(("cvd", "expected"), [
    ("0,1", []),
    ("0", ["allocation.gpu-count-mismatch"]),
    ("", ["allocation.no-visible-devices"]),
    ("NoDevFiles", ["allocation.no-visible-devices"]),
    ("0,5", ["allocation.invalid-visible-devices"]),
    ("GPU-6c1f0e2d-0002,GPU-6c1f0e2d-0001", []),
    ("GPU-ffff,0", ["allocation.invalid-visible-devices"]),
])
def test_cuda_visible_devices_against_allocation_and_gpus(tmp_path, venv, job_env, cvd, expected):
    env = {**job_env, "SLURM_JOB_ID": "5", "SLURM_STEP_GPUS": "0,1", "SLURM_GPUS_ON_NODE": "2",
           "CUDA_VISIBLE_DEVICES": cvd}
    assert ids(check_visible_devices(ctx_for(tmp_path, venv, env, gpus=[A100_0, A100_1]))) == expected


def test_no_slurm_no_finding(tmp_path, venv, job_env):
    assert check_visible_devices(ctx_for(tmp_path, venv, job_env)) == []


def test_leftover_processes_on_the_jobs_gpu(tmp_path, venv, job_env):
    apps = ["48213, 20480, GPU-6c1f0e2d-0002-4a5b-9c8d-7e6f5a4b3c2d",
            "48214, 1024, GPU-6c1f0e2d-0002-4a5b-9c8d-7e6f5a4b3c2d",
            "50001, 4096, GPU-6c1f0e2d-0001-4a5b-9c8d-7e6f5a4b3c2d"]
    env = {**job_env, "CUDA_VISIBLE_DEVICES": "1"}
    out = check_gpu_processes(ctx_for(tmp_path, venv, env, gpus=[A100_0, A100_1], apps=apps))
    assert ids(out) == ["allocation.gpu-busy"]
    f = out[0]
    assert f.title == "GPU 1 (GPU-6c1f0e2d-0002-4a5b-9c8d-7e6f5a4b3c2d) is already used by 2 process(es) holding 21504 MiB"
    assert f.evidence[0] == "pid 48213: 20480 MiB on GPU-6c1f0e2d-0002-4a5b-9c8d-7e6f5a4b3c2d"
    # no compute process: nothing to report
    out = check_gpu_processes(ctx_for(tmp_path, venv, job_env, gpus=[A100_0, A100_1], apps=[]))
    assert out == []


def test_gpu_processes_query_failure_is_reported(tmp_path, venv, job_env):
    bindir = tmp_path / "bin"
    fake_nvidia_smi(bindir, [A100_0])
    script = (bindir / "nvidia-smi").read_text().replace(
        "  --query-compute-apps=*)", "  --query-compute-apps=*) echo 'Failed to initialize NVML: Unknown Error' >&2; exit 255\n    ;;\n  --unused=*)")
    (bindir / "nvidia-smi").write_text(script)
    target = resolve_target(python=str(venv / "bin/python"), environ=job_env)
    live = Live(target, environ=job_env, root=str(fake_root(tmp_path, PROC_580_OPEN)))
    (f,) = check_gpu_processes(Context(live=live, environ=job_env))
    assert f.id == "allocation.query-failed" and "Failed to initialize NVML" in f.title


class FakeStatvfs:
    """``os.statvfs_result``-like values, as a file system reports them."""

    def __init__(self, bavail, frsize, favail, files):
        self.f_bavail, self.f_frsize, self.f_favail, self.f_files = bavail, frsize, favail, files

    def __call__(self, path):
        return self


@pytest.mark.parametrize(("st", "expected"), [
    (FakeStatvfs(10 * 1024**3 // 4096, 4096, 5_000_000, 6_000_000), []),
    (FakeStatvfs(100 * 1024**2 // 4096, 4096, 5_000_000, 6_000_000), ["output.low-space"]),
    (FakeStatvfs(10 * 1024**3 // 4096, 4096, 120, 6_000_000), ["output.low-inodes"]),
    (FakeStatvfs(10 * 1024**3 // 4096, 4096, 0, 0), []),  # btrfs: no inode accounting
    (FakeStatvfs(0, 4096, 0, 1000), ["output.low-space", "output.low-inodes"]),
])
def test_output_dir_space_and_inodes(tmp_path, venv, job_env, st, expected):
    out = tmp_path / "results"
    out.mkdir()
    ctx = ctx_for(tmp_path, venv, job_env, output_dir=str(out), statvfs=st)
    found = check_output_dir(ctx)
    assert ids(found) == expected
    if "output.low-space" in expected and st.f_bavail:
        assert found[0].title == f"{out} has 100.0 MiB free; at least 1.0 GiB required"


def test_output_dir_thresholds_from_policy(tmp_path, venv, job_env):
    out = tmp_path / "results"
    out.mkdir()
    st = FakeStatvfs(100 * 1024**2 // 4096, 4096, 5_000_000, 6_000_000)
    cfg = Config(min_free_bytes=50 * 1024**2, min_free_inodes=10)
    assert check_output_dir(ctx_for(tmp_path, venv, job_env, output_dir=str(out), statvfs=st, config=cfg)) == []


def test_output_dir_missing_and_real_statvfs(tmp_path, venv, job_env):
    (f,) = check_output_dir(ctx_for(tmp_path, venv, job_env, output_dir=str(tmp_path / "nope")))
    assert f.id == "output.missing" and f.fix == (f"mkdir -p {tmp_path / 'nope'}  (in the job script, before the program starts)",)
    cfg = Config(min_free_bytes=1, min_free_inodes=1)
    assert check_output_dir(ctx_for(tmp_path, venv, job_env, output_dir=str(tmp_path), config=cfg)) == []
    assert list(tmp_path.glob(".envlock-verify-*")) == []  # the write probe is removed
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(12) == "12 B"


def test_output_dir_not_writable(tmp_path, venv, job_env):
    """A read-only directory: mode 0555 for a normal user; a read-only bind mount for root
    (root ignores the mode bits)."""
    out = tmp_path / "ro"
    out.mkdir()
    mounted = False
    if os.geteuid() == 0:
        ok = subprocess.run(["mount", "--bind", str(out), str(out)], capture_output=True, timeout=30).returncode == 0
        ok = ok and subprocess.run(["mount", "-o", "remount,ro,bind", str(out)], capture_output=True,
                                   timeout=30).returncode == 0
        if not ok:
            subprocess.run(["umount", str(out)], capture_output=True, timeout=30)
            pytest.skip("root, and no read-only bind mount possible here")
        mounted = True
    else:
        out.chmod(0o555)
    try:
        cfg = Config(min_free_bytes=1, min_free_inodes=1)
        (f,) = check_output_dir(ctx_for(tmp_path, venv, job_env, output_dir=str(out), config=cfg))
        assert f.id == "output.not-writable" and f.severity == "error"
        assert ("Read-only file system" if mounted else "Permission denied") in f.title
    finally:
        if mounted:
            subprocess.run(["umount", str(out)], capture_output=True, timeout=30)
        out.chmod(0o755)


def test_output_dir_on_a_real_tiny_tmpfs(tmp_path, venv, job_env):
    """A 1 MiB tmpfs with 64 inodes: the real statvfs numbers trip both thresholds."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs", str(mnt)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip() or res.returncode}")
    try:
        found = check_output_dir(ctx_for(tmp_path, venv, job_env, output_dir=str(mnt)))
        assert ids(found) == ["output.low-space", "output.low-inodes"]
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_workdir_differs_from_submit_dir(tmp_path, venv, job_env):
    submit = tmp_path / "project"
    submit.mkdir()
    env = {**job_env, "SLURM_SUBMIT_DIR": str(submit)}
    (f,) = check_workdir(ctx_for(tmp_path, venv, env, cwd=str(tmp_path)))
    assert f.id == "output.workdir-differs" and f.severity == "warning"
    assert check_workdir(ctx_for(tmp_path, venv, env, cwd=str(submit))) == []
    assert check_workdir(ctx_for(tmp_path, venv, job_env, cwd=str(tmp_path))) == []


def test_isolation_venv_is_clean(tmp_path, venv, job_env):
    assert check_isolation(ctx_for(tmp_path, venv, job_env)) == []


def test_isolation_user_site_and_pythonpath(tmp_path, job_env):
    """A venv with system site-packages keeps the user site (PEP 370) enabled."""
    v = tmp_path / "sysenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(v)],
                   check=True, timeout=120)
    home = Path(job_env["HOME"])
    user_site = home / ".local/lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    install_dist(user_site, "numpy", "1.21.0")
    env = {**job_env, "PYTHONPATH": str(tmp_path / "src")}
    out = check_isolation(ctx_for(tmp_path, v, env))
    assert ids(out) == ["isolation.user-site", "isolation.pythonpath"]
    assert out[0].title == f"the user site-packages {user_site} is on sys.path and provides 1 distribution(s)"
    assert out[0].fix == ("export PYTHONNOUSERSITE=1 in the job script (or empty the directory).",)
    out = check_isolation(ctx_for(tmp_path, v, {**job_env, "PYTHONNOUSERSITE": "1"}))
    assert out == []


def test_isolation_conda_base_and_system_python(tmp_path, job_env):
    base = tmp_path / "miniforge3"
    (base / "conda-meta").mkdir(parents=True)
    (base / "condabin").mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True, timeout=120)
    (f,) = [f for f in check_isolation(ctx_for(tmp_path, base, job_env)) if f.id.startswith("isolation.conda")]
    assert f.id == "isolation.conda-base" and str(base) in f.title
    system = Path(sys.base_prefix)
    target = resolve_target(prefix=str(system), environ=job_env)
    if target.kind != "system":
        pytest.skip("the base interpreter here lives in a venv/conda prefix")
    live = Live(target, environ=job_env, root=str(fake_root(tmp_path, None)))
    found = check_isolation(Context(live=live, environ=job_env))
    assert "isolation.system-python" in ids(found)
