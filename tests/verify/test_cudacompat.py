"""NVIDIA's driver/CUDA and binary-compatibility rules (cases C06, C07), checked row by row."""

from __future__ import annotations

import pytest

from envlock.nvidia import (
    MINOR_COMPAT_FLOOR,
    TOOLKIT_DRIVERS,
    assess_arch,
    assess_driver,
    cuda_major_minor,
    max_cuda_for_driver,
    parse_arch,
    sm_name,
    toolkit_driver,
    vtuple,
)


def _below(driver: str) -> str:
    """A driver version just below ``driver`` (last field minus one, or previous major)."""
    parts = list(vtuple(driver))
    if parts[-1] > 0:
        parts[-1] -= 1
    else:
        parts = [parts[0] - 1, 99, 99]
    return ".".join(map(str, parts))


def test_table_is_sorted_newest_first_and_strictly_increasing():
    drivers = [vtuple(d) for _, d in TOOLKIT_DRIVERS]
    cudas = [vtuple(c) for c, _ in TOOLKIT_DRIVERS]
    assert drivers == sorted(drivers, reverse=True)
    assert cudas == sorted(cudas, reverse=True)
    assert len(set(drivers)) == len(drivers)


@pytest.mark.parametrize(("cuda", "driver"), TOOLKIT_DRIVERS)
def test_each_row_driver_supports_its_cuda_and_not_the_next(cuda, driver):
    assert max_cuda_for_driver(driver) == cuda
    assert toolkit_driver(cuda) == driver
    i = [c for c, _ in TOOLKIT_DRIVERS].index(cuda)
    older = TOOLKIT_DRIVERS[i + 1][0] if i + 1 < len(TOOLKIT_DRIVERS) else None
    assert max_cuda_for_driver(_below(driver)) == older


@pytest.mark.parametrize(("driver", "cuda"), [
    ("550.54.14", "12.4"), ("550.54.15", "12.4"), ("555.42.06", "12.5"), ("570.26", "12.8"),
    ("570.124.06", "12.8"), ("575.57.08", "12.9"), ("580.95.05", "13.0"), ("610.1", "13.2"),
    ("410.48", "10.0"), ("410.47", "9.2"), ("396.44", "9.2"), ("384.81", "9.0"), ("340.29", None),
    ("garbage", None),
])
def test_max_cuda_for_real_driver_versions(driver, cuda):
    assert max_cuda_for_driver(driver) == cuda


def test_two_part_versions_compare_numerically():
    assert vtuple("570.26") < vtuple("570.124.06")
    assert vtuple("455.32") > vtuple("455.23")
    assert vtuple("12.4.127") == (12, 4, 127)
    with pytest.raises(ValueError):
        vtuple("abc")


def test_cuda_major_minor_forms():
    assert cuda_major_minor("10.0.130") == (10, 0)
    assert cuda_major_minor("12.4") == (12, 4)
    assert cuda_major_minor("12") == (12, None)


def test_c06_cuda10_build_on_a_cuda9_driver():
    v = assess_driver("10.0.130", "396.44")
    assert (v.status, v.cuda, v.supports, v.needs, v.full) == ("too-old", "10.0", "9.2", "410.48", "410.48")
    assert assess_driver("10.0", "410.48").status == "ok"
    assert assess_driver("10.0", "410.47").status == "too-old"


@pytest.mark.parametrize(("cuda", "full"), [r for r in TOOLKIT_DRIVERS if vtuple(r[0])[0] <= 10])
def test_cuda10_and_older_need_the_toolkit_driver(cuda, full):
    assert assess_driver(cuda, full).status == "ok"
    v = assess_driver(cuda, _below(full))
    assert v.status == "too-old" and v.needs == full


@pytest.mark.parametrize(("cuda", "full"), [r for r in TOOLKIT_DRIVERS if vtuple(r[0])[0] >= 11])
def test_minor_version_compatibility_for_11_12_13(cuda, full):
    major = vtuple(cuda)[0]
    floor = MINOR_COMPAT_FLOOR[major]
    assert assess_driver(cuda, full).status == "ok"
    if cuda == "11.0":  # its own driver (450.36.06) predates the 11.x floor (450.80.02)
        assert assess_driver(cuda, _below(full)).status == "too-old"
        assert assess_driver(cuda, _below(full)).needs == full
        return
    if vtuple(full) > vtuple(floor):
        v = assess_driver(cuda, floor)
        assert (v.status, v.needs, v.full) == ("minor-compat", floor, full)
        assert assess_driver(cuda, _below(full)).status == "minor-compat"
    v = assess_driver(cuda, _below(floor))
    assert v.status == "too-old" and v.needs == floor


@pytest.mark.parametrize(("cuda", "driver", "status", "supports"), [
    ("12.4", "535.104.05", "minor-compat", "12.2"),   # a cu124 wheel on a 535 cluster driver
    ("12.8", "525.60.13", "minor-compat", "12.0"),
    ("12.8", "520.61.05", "too-old", "11.8"),
    ("13.0", "575.57.08", "too-old", "12.9"),
    ("13.0", "580.65.06", "ok", "13.0"),
    ("13.1", "580.95.05", "minor-compat", "13.0"),
    ("11.8", "470.82.01", "minor-compat", "11.4"),
    ("11.8", "450.80.01", "too-old", "11.0"),
    ("12", "530.30.02", "ok", "12.1"),                # a major-only build (jax-cuda12-plugin)
])
def test_real_combinations(cuda, driver, status, supports):
    v = assess_driver(cuda, driver)
    assert (v.status, v.supports) == (status, supports)


def test_unknown_minor_falls_back_to_the_major_floor_and_unknown_major_is_unknown():
    v = assess_driver("13.5", "580.65.06")
    assert (v.status, v.needs, v.full) == ("minor-compat", "580.65.06", None)
    assert assess_driver("13.5", "575.51.03").status == "too-old"
    assert assess_driver("14.0", "600.1").status == "unknown"


# -- architectures ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("sm_86", [("sass", 8, 6, "")]),
    ("sm_120", [("sass", 12, 0, "")]),
    ("sm_103", [("sass", 10, 3, "")]),
    ("sm_90a", [("sass", 9, 0, "a")]),
    ("sm_100f", [("sass", 10, 0, "f")]),
    ("compute_90", [("ptx", 9, 0, "")]),
    ("8.6", [("sass", 8, 6, "")]),
    ("12.0+PTX", [("sass", 12, 0, ""), ("ptx", 12, 0, "")]),
    ("lto_90", []),
    ("sm_8", []),
    ("nonsense", []),
])
def test_parse_arch(text, expected):
    assert [(a.kind, a.major, a.minor, a.suffix) for a in parse_arch(text)] == expected


#: torch 2.14.1+cu130's libtorch_cuda.so, as read from its .nv_fatbin in the real CUDA venv.
CU130 = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120", "sm_121")
#: the cu111 nightly of case C07 (pytorch/pytorch#53164).
CU111_NIGHTLY = ("sm_50", "sm_70", "sm_80", "sm_86")
#: a cu102 build (pytorch 1.7-era arch list), case C07's reverse case.
CU102 = ("sm_37", "sm_50", "sm_60", "sm_70")


@pytest.mark.parametrize(("cc", "archs", "mode", "via", "reason"), [
    ("6.1", CU111_NIGHTLY, "none", None, "gap"),         # GTX 1070 Ti: no sm_6x at all
    ("8.6", CU102, "none", None, "too-new"),             # RTX 3090 on cu102
    ("8.6", (*CU102, "compute_70"), "ptx", "compute_70", None),
    ("8.0", CU111_NIGHTLY, "sass", "sm_80", None),
    ("8.9", CU111_NIGHTLY, "sass", "sm_86", None),       # same major, newer minor: sm_86 runs
    ("8.0", ("sm_86",), "none", None, "too-old"),         # SASS does not run on an older minor
    ("9.0", ("sm_90a",), "sass", "sm_90a", None),
    ("10.0", ("sm_90a", "compute_90a"), "none", None, "too-new"),
    ("10.3", ("sm_100f",), "sass", "sm_100f", None),
    ("12.1", ("sm_120",), "sass", "sm_120", None),
    ("3.5", CU102, "none", None, "too-old"),
    ("12.0", ("sm_80", "compute_80"), "ptx", "compute_80", None),
    ("7.5", ("8.0+PTX",), "none", None, "too-old"),      # PTX does not JIT to an older GPU
])
def test_assess_arch(cc, archs, mode, via, reason):
    v = assess_arch(cc, archs)
    assert (v.mode, v.via, v.reason) == (mode, via, reason)


#: Compute capability of common GPUs (developer.nvidia.com/cuda-gpus) → can torch cu130 run it?
@pytest.mark.parametrize(("gpu", "cc", "mode"), [
    ("GTX 1080 Ti", "6.1", "none"), ("P100", "6.0", "none"), ("V100", "7.0", "none"),
    ("T4", "7.5", "sass"), ("A100", "8.0", "sass"), ("RTX 3090", "8.6", "sass"),
    ("Jetson Orin", "8.7", "sass"), ("L40S", "8.9", "sass"), ("H100", "9.0", "sass"),
    ("B200", "10.0", "sass"), ("B300", "10.3", "sass"), ("Thor", "11.0", "none"),
    ("RTX 5090", "12.0", "sass"), ("GB10", "12.1", "sass"),
])
def test_cu130_wheel_against_real_gpus(gpu, cc, mode):
    assert assess_arch(cc, CU130).mode == mode, gpu


def test_bad_compute_capability_raises():
    with pytest.raises(ValueError):
        assess_arch("sm_86", CU130)
    assert sm_name("12.0") == "sm_120"
