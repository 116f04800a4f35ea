"""probe_stack: all probes concurrently, one budget, records that fit the manifest."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest

from envlock._run import run
from envlock.manifest import EnvlockInfo, Manifest, Target
from envlock.probes.stack import STACK_AREAS, probe_stack
from envlock.probes.world import World
from envlock.manifest.stacktables import (
    BlasInfo,
    CudaInfo,
    FrameworksInfo,
    GpuInfo,
    SlurmInfo,
    ToolchainInfo,
)

PROC_550 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
)
SMI_ROWS = "".join(
    f"{i}, NVIDIA A100-SXM4-80GB, GPU-{i:08x}-aaaa-bbbb-cccc-ddddeeeeffff, 81920, 8.0, Disabled, 550.54.14\n"
    for i in range(8)
)


@pytest.fixture
def world(tmp_path: Path, make_tool, bin_dir: Path, dist):
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(PROC_550)
    prefix = tmp_path / "venv"
    site = prefix / "lib/python3.11/site-packages"
    dist(
        site,
        "torch",
        "2.5.1+cu124",
        files=("torch/version.py",),
        file_contents={
            "torch/version.py": "__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n"
        },
    )
    dist(site, "nvidia-cudnn-cu12", "9.1.0.70", files=("nvidia/cudnn/lib/libcudnn.so.9",))
    dist(
        site,
        "numpy",
        "1.24.4",
        files=("numpy/__init__.py", "numpy.libs/libopenblas64_p-r0-15028c96.3.21.so"),
    )
    make_tool("nvidia-smi", f"cat <<'EOF'\n{SMI_ROWS}EOF\n")
    make_tool("gcc", "echo 'gcc (Debian 12.2.0-14) 12.2.0'\n")
    return {"root": root, "prefix": prefix, "site": site}


def _call(world, bin_dir, *, timeout: float, runner=run, **kw):
    w = World(
        root=world["root"],
        environ={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "99", "CUDA_VISIBLE_DEVICES": "0"},
        prefix=str(world["prefix"]),
        site_dirs=[str(world["site"])],
        path_dirs=[str(bin_dir)],
        runner=runner,
    )
    return probe_stack(w, budget=timeout, **kw)


def test_probe_stack_fake_world(world, bin_dir: Path) -> None:
    out = _call(world, bin_dir, timeout=10)
    assert list(out) == list(STACK_AREAS)
    assert isinstance(out["gpu"], GpuInfo) and out["gpu"].status == "ok"
    assert len(out["gpu"].gpus) == 8 and out["gpu"].cuda_driver_version == "12.4"
    assert isinstance(out["cuda"], CudaInfo)
    assert [lib.version for lib in out["cuda"].find("cudnn")] == ["9.1.0.70"]
    assert isinstance(out["frameworks"], FrameworksInfo)
    assert (out["frameworks"].get("torch").build, out["frameworks"].get("torch").cuda) == (
        "cuda",
        "12.4",
    )
    assert isinstance(out["blas"], BlasInfo) and out["blas"].libraries[0].version == "0.3.21"
    assert (
        isinstance(out["toolchain"], ToolchainInfo)
        and out["toolchain"].tool("gcc").version == "12.2.0"
    )
    assert isinstance(out["slurm"], SlurmInfo) and out["slurm"].job_id == "99"


def test_probe_stack_records_round_trip_through_manifest(world, bin_dir: Path) -> None:
    out = _call(world, bin_dir, timeout=10)
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix=str(world["prefix"]), chosen_by="--prefix"),
        **out,
    )
    text = m.dumps("toml")
    assert (
        "[[gpu.gpus]]" in text
        and "[[cuda.libraries]]" in text
        and "[[frameworks.packages]]" in text
    )
    again = Manifest.from_dict(tomllib.loads(text))
    assert again == m
    assert again.dumps("toml") == text


def test_probe_stack_hanging_nvidia_smi(world, bin_dir: Path, make_tool) -> None:
    make_tool("nvidia-smi", "sleep 30\n")
    t0 = time.monotonic()
    out = _call(world, bin_dir, timeout=1.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 5, elapsed  # far below the 30 s hang
    assert out["gpu"].status == "timeout"
    assert out["gpu"].driver_version == "550.54.14"  # what /proc said is kept
    assert out["toolchain"].status == "ok"


def test_probe_stack_probe_stuck_in_process(world, bin_dir: Path) -> None:
    """A probe stuck inside envlock's process (e.g. an NVML call into a hung driver) is abandoned."""
    release = threading.Event()

    def stuck_for_nvidia_smi(argv, **kw):
        if argv[0].endswith("nvidia-smi"):
            release.wait(30)  # ignores its timeout, like a call into a hung driver
        return run(argv, **kw)

    try:
        t0 = time.monotonic()
        out = _call(world, bin_dir, timeout=0.5, runner=stuck_for_nvidia_smi)
        elapsed = time.monotonic() - t0
    finally:
        release.set()
    assert elapsed < 3, elapsed
    assert out["gpu"].status == "timeout"
    assert out["gpu"].error == "gpu probe did not finish within 0.5 s"
    assert out["cuda"].status == "ok" and out["blas"].status == "ok"


def test_probe_stack_internal_error_is_recorded(world, bin_dir: Path) -> None:
    def broken(argv, **kw):
        raise RuntimeError("runner exploded")

    out = _call(world, bin_dir, timeout=5, runner=broken, areas=("gpu", "slurm"))
    assert list(out) == ["gpu", "slurm"]
    assert out["gpu"].status == "error"
    assert out["gpu"].error == "internal error: RuntimeError: runner exploded"
    assert out["slurm"].status == "ok"
