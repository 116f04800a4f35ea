"""[gpu]: driver version from /proc, devices from a fake nvidia-smi, no-driver and hang cases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envlock.probes.gpu import (
    _parse_nvidia_smi_csv,
    _parse_proc_driver_version,
    _parse_rocm_version,
    cuda_for_driver,
    probe_gpu,
)
from envlock.probes.world import World

PROC_470 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.182.03  Fri Feb 24 03:29:56 UTC 2023\n"
    "GCC version:  gcc version 9.4.0 (Ubuntu 9.4.0-1ubuntu1~20.04.1) \n"
)
PROC_535 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n"
)
PROC_550_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) \n"
)
PROC_580_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
    "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:55:41 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n"
)
PROC_580 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:40 UTC 2025\n"
)
PROC_AARCH64 = (
    "NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.129.03  Thu Oct 19 18:42:59 UTC 2023\n"
)
PROC_418 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  418.67  Sat Apr  6 03:07:24 CDT 2019\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PROC_470, ("470.182.03", "proprietary")),
        (PROC_535, ("535.104.05", "proprietary")),
        (PROC_550_OPEN, ("550.54.14", "open")),
        (PROC_580_OPEN, ("580.95.05", "open")),
        (PROC_580, ("580.65.06", "proprietary")),
        (PROC_AARCH64, ("535.129.03", "proprietary")),
        (PROC_418, ("418.67", "proprietary")),
        ("", None),
        ("garbage\n", None),
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  \n", None),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Release Build\n", None),
        ("\x00\xff\x7fELF", None),
    ],
    ids=[
        "470",
        "535",
        "550-open",
        "580-open",
        "580",
        "aarch64",
        "418-two-part",
        "empty",
        "junk",
        "no-number",
        "open-no-number",
        "binary",
    ],
)
def test_parse_proc_driver_version(text: str, expected: tuple[str, str] | None) -> None:
    assert _parse_proc_driver_version(text) == expected


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.95.05", "13.0"),
        ("580.65.06", "13.0"),
        ("575.57.08", "12.9"),
        ("570.26", "12.8"),
        ("550.54.14", "12.4"),
        ("550.54.15", "12.4"),
        ("535.104.05", "12.2"),
        ("535.54.03", "12.2"),
        ("530.30.02", "12.1"),
        ("525.60.13", "12.0"),
        ("470.182.03", "11.4"),
        ("418.67", "10.1"),
        ("410.48", "10.0"),
        ("595.45.04", "13.2"),
        ("390.157", "9.1"),
        ("396.26", "9.2"),
        ("346.45", None),
        ("not-a-version", None),
        ("", None),
    ],
)
def test_cuda_for_driver(driver: str, cuda: str | None) -> None:
    assert cuda_for_driver(driver) == cuda


H100_MIG_8 = "".join(
    f"{i}, NVIDIA H100 80GB HBM3, GPU-{i:08x}-3c4d-8a9e-1f2b-3c4d5e6f7a8b, 81559, 9.0, Enabled, 550.54.15\n"
    for i in range(8)
)


def test_parse_smi_eight_h100_mig() -> None:
    gpus, driver = _parse_nvidia_smi_csv(H100_MIG_8)
    assert driver == "550.54.15"
    assert [g.index for g in gpus] == list(range(8))
    g = gpus[3]
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.uuid == "GPU-00000003-3c4d-8a9e-1f2b-3c4d5e6f7a8b"
    assert g.memory == 81559 * 1024 * 1024
    assert g.compute_capability == "9.0"
    assert g.mig_mode == "Enabled"


def test_parse_smi_na_values_and_junk_lines() -> None:
    text = (
        "0, Tesla V100-SXM2-16GB, GPU-7a6b2b5d-0000-1111-2222-333344445555, 16384, 7.0, [N/A], 535.104.05\n"
        "No devices were found\n"
        "x, bad index, GPU-1, 1, 1.0, Disabled, 535.104.05\n"
        "1, NVIDIA A100-SXM4-40GB, GPU-aaaa, [N/A], [Not Supported], Disabled, 535.104.05\n"
        "\n"
    )
    gpus, driver = _parse_nvidia_smi_csv(text)
    assert driver == "535.104.05"
    assert [(g.index, g.mig_mode, g.memory, g.compute_capability) for g in gpus] == [
        (0, None, 16384 * 1024 * 1024, "7.0"),
        (1, "Disabled", None, None),
    ]


@pytest.mark.parametrize("text", ["", "No devices were found\n", "\x00\x01", "a,b\n", "1, 2, 3\n"])
def test_parse_smi_junk(text: str) -> None:
    assert _parse_nvidia_smi_csv(text) == ([], None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("6.0.2-115\n", "6.0.2-115"),
        ("5.7.1\n", "5.7.1"),
        ("6.2\n", "6.2"),
        ("", None),
        ("rocm\n", None),
    ],
)
def test_parse_rocm_version(text: str, expected: str | None) -> None:
    assert _parse_rocm_version(text) == expected


# -- probe on fake worlds --------------------------------------------------------------------
def _root(tmp_path: Path, proc: str | None) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    if proc is not None:
        p = root / "proc/driver/nvidia/version"
        p.parent.mkdir(parents=True)
        p.write_text(proc)
    return root


SMI_SCRIPT = """
case "$1" in
  --query-gpu=index,name,uuid,memory.total,compute_cap,mig.mode.current,driver_version)
    cat <<'EOF'
{rows}EOF
    ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


def test_probe_gpu_eight_mig_gpus(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    make_tool("nvidia-smi", SMI_SCRIPT.format(rows=H100_MIG_8))
    root = _root(tmp_path, PROC_550_OPEN)
    info = probe_gpu(World(root=root, environ={"CUDA_VISIBLE_DEVICES": "2,3"}, path_dirs=[str(bin_dir)], timeout=5))
    assert info.status == "ok", info.error
    assert info.vendor == "nvidia"
    assert info.driver_version == "550.54.14"  # /proc (the kernel module) wins over nvidia-smi
    assert info.driver_kind == "open"
    assert info.cuda_driver_version == "12.4"
    assert info.cuda_driver_source == "driver table"
    assert len(info.gpus) == 8
    assert {g.mig_mode for g in info.gpus} == {"Enabled"}
    assert info.visible_devices == "2,3"
    assert "/proc/driver/nvidia/version" in info.source


def test_probe_gpu_old_driver_without_compute_cap(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    # nvidia-smi of driver 470 rejects the compute_cap field; the probe asks again without it.
    make_tool(
        "nvidia-smi",
        """
case "$1" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; echo; exit 2 ;;
  --query-gpu=index,name,uuid,memory.total,mig.mode.current,driver_version)
    echo "0, Tesla V100-PCIE-32GB, GPU-5e0f7b6c-4a1d-2f3e-9b8c-7d6e5f4a3b2c, 32510, [N/A], 470.182.03" ;;
  *) exit 2 ;;
esac
""",
    )
    root = _root(tmp_path, PROC_470)
    info = probe_gpu(World(root=root, environ={}, path_dirs=[str(bin_dir)], timeout=5))
    assert info.status == "ok", info.error
    assert info.driver_version == "470.182.03"
    assert info.cuda_driver_version == "11.4"
    (gpu,) = info.gpus
    assert gpu.name == "Tesla V100-PCIE-32GB"
    assert gpu.compute_capability is None
    assert gpu.memory == 32510 * 1024 * 1024
    assert gpu.mig_mode is None


def test_probe_gpu_no_driver_at_all(tmp_path: Path, bin_dir: Path) -> None:
    info = probe_gpu(World(root=_root(tmp_path, None), environ={}, path_dirs=[str(bin_dir)]))
    assert info.status == "absent"
    assert info.error.startswith("no NVIDIA driver")
    assert info.gpus == ()
    assert info.driver_version is None


def test_probe_gpu_smi_fails_without_driver(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    make_tool(
        "nvidia-smi",
        """
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
""",
    )
    info = probe_gpu(World(root=_root(tmp_path, None), environ={}, path_dirs=[str(bin_dir)], timeout=5))
    assert info.status == "absent"
    assert info.error.startswith("no NVIDIA driver")
    assert "couldn't communicate with the NVIDIA driver" in info.error


def test_probe_gpu_smi_fails_with_driver(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    make_tool(
        "nvidia-smi", 'echo "Failed to initialize NVML: Driver/library version mismatch"\nexit 18\n'
    )
    info = probe_gpu(World(root=_root(tmp_path, PROC_535), environ={}, path_dirs=[str(bin_dir)], timeout=5))
    assert info.status == "error"
    assert info.driver_version == "535.104.05"
    assert "version mismatch" in info.error
    assert info.cuda_driver_version == "12.2"


def test_probe_gpu_hanging_smi_finishes_within_budget(
    tmp_path: Path, make_tool, bin_dir: Path
) -> None:
    make_tool("nvidia-smi", "sleep 30\n")
    root = _root(tmp_path, PROC_580_OPEN)
    t0 = time.monotonic()
    info = probe_gpu(World(root=root, environ={}, path_dirs=[str(bin_dir)], timeout=0.5))
    elapsed = time.monotonic() - t0
    assert elapsed < 5, elapsed  # far below the 30 s hang
    assert info.status == "timeout"
    assert info.driver_version == "580.95.05"
    assert info.cuda_driver_version == "13.0"


def test_probe_gpu_driver_but_no_smi(tmp_path: Path, bin_dir: Path) -> None:
    info = probe_gpu(World(root=_root(tmp_path, PROC_535), environ={}, path_dirs=[str(bin_dir)]))
    assert info.status == "error"
    assert info.driver_version == "535.104.05"
    assert "nvidia-smi not found" in info.error


def test_probe_gpu_sys_module_version(tmp_path: Path, bin_dir: Path) -> None:
    root = _root(tmp_path, None)
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("550.54.14\n")
    info = probe_gpu(World(root=root, environ={}, path_dirs=[str(bin_dir)]))
    assert info.driver_version == "550.54.14"
    assert info.source == "/sys/module/nvidia/version"


def test_probe_gpu_rocm(tmp_path: Path, bin_dir: Path) -> None:
    root = _root(tmp_path, None)
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.0.2-115\n")
    info = probe_gpu(World(root=root, environ={"ROCR_VISIBLE_DEVICES": "0"}, path_dirs=[str(bin_dir)]))
    assert info.status == "ok"
    assert info.vendor == "amd"
    assert info.rocm_version == "6.0.2-115"
    assert info.rocm_visible_devices == "0"


def test_probe_gpu_this_machine_has_no_driver() -> None:
    """This machine has no NVIDIA GPU: the real probe must say so, not guess."""
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    import os

    info = probe_gpu(World(environ=dict(os.environ), path_dirs=os.environ.get("PATH", "").split(":")))
    assert info.status == "absent"
    assert info.error.startswith("no NVIDIA driver")
