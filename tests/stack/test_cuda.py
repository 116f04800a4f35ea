"""[cuda]: parsers and a fake world with pip wheels, conda packages, toolkits, headers and nvcc."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envlock.probes.cuda import (
    _component_for_dist,
    _parse_cuda_version_json,
    _parse_cuda_version_txt,
    _parse_cudnn_version_h,
    _parse_nccl_h,
    _parse_nvcc_version,
    _version_from_filename,
    probe_cuda,
)
from envlock.probes.world import World

NVCC_HEAD = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-{y} NVIDIA Corporation\n"
NVCC = {
    "9.0": NVCC_HEAD.format(y=2017)
    + "Built on Fri_Sep__1_21:08:03_CDT_2017\nCuda compilation tools, release 9.0, V9.0.176\n",
    "10.2": NVCC_HEAD.format(y=2019)
    + "Built on Wed_Oct_23_19:24:38_PDT_2019\nCuda compilation tools, release 10.2, V10.2.89\n",
    "11.8": NVCC_HEAD.format(y=2022)
    + "Built on Wed_Sep_21_10:33:58_PDT_2022\nCuda compilation tools, release 11.8, V11.8.89\n"
    "Build cuda_11.8.r11.8/compiler.31833905_0\n",
    "12.4": NVCC_HEAD.format(y=2024)
    + "Built on Thu_Mar_28_02:18:24_PDT_2024\nCuda compilation tools, release 12.4, V12.4.131\n"
    "Build cuda_12.4.r12.4/compiler.34097967_0\n",
    "13.0": NVCC_HEAD.format(y=2025)
    + "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
    "Build cuda_13.0.r13.0/compiler.36424714_0\n",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (NVCC["9.0"], ("9.0", "9.0.176")),
        (NVCC["10.2"], ("10.2", "10.2.89")),
        (NVCC["11.8"], ("11.8", "11.8.89")),
        (NVCC["12.4"], ("12.4", "12.4.131")),
        (NVCC["13.0"], ("13.0", "13.0.88")),
        ("Cuda compilation tools, release 8.0\n", ("8.0", None)),
        ("", None),
        ("nvcc fatal   : Unknown option '--version'\n", None),
        ("\x00\xff", None),
    ],
    ids=["9.0", "10.2", "11.8", "12.4", "13.0", "no-V", "empty", "error", "binary"],
)
def test_parse_nvcc_version(text: str, expected) -> None:
    assert _parse_nvcc_version(text) == expected


CUDNN_V7_H = """/* cudnn : Neural Networks Library */
#if !defined(CUDNN_H_)
#define CUDNN_H_

#define CUDNN_MAJOR 7
#define CUDNN_MINOR 6
#define CUDNN_PATCHLEVEL 5

#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
"""
CUDNN_V8_H = """/**
 * \\file: The master cuDNN version file.
 */

#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 8
#define CUDNN_MINOR 9
#define CUDNN_PATCHLEVEL 7

#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

#endif /* CUDNN_VERSION_H */
"""
CUDNN_V9_H = """#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

/* cannot use constexpr here since this is a C-only file */
/* Below is the max SM version this cuDNN library is aware of and supports natively */

#define CUDNN_MAX_SM_MAJOR_NUMBER 9
#define CUDNN_MAX_SM_MINOR_NUMBER 0
#endif /* CUDNN_VERSION_H */
"""
NCCL_H = """#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 21
#define NCCL_PATCH 5
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22105
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CUDNN_V7_H, "7.6.5"),
        (CUDNN_V8_H, "8.9.7"),
        (CUDNN_V9_H, "9.1.0"),
        ("#include <cudnn_version.h>\n", None),
        ("#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n", None),
        ("#define CUDNN_MAJOR x\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n", None),
        ("", None),
    ],
    ids=["v7-cudnn.h", "v8", "v9", "include-only", "no-patch", "non-numeric", "empty"],
)
def test_parse_cudnn_version_h(text: str, expected: str | None) -> None:
    assert _parse_cudnn_version_h(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [(NCCL_H, "2.21.5"), ("#define NCCL_MAJOR 2\n", None), ("", None)]
)
def test_parse_nccl_h(text: str, expected: str | None) -> None:
    assert _parse_nccl_h(text) == expected


VERSION_JSON_124 = {
    "cuda": {"name": "CUDA SDK", "version": "12.4.1"},
    "cuda_cccl": {"name": "CUDA C++ Core Compute Libraries", "version": "12.4.127"},
    "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.4.127"},
    "cuda_cupti": {"name": "CUPTI", "version": "12.4.127"},
    "cuda_nvcc": {"name": "CUDA NVCC", "version": "12.4.131"},
    "cuda_nvrtc": {"name": "CUDA NVRTC", "version": "12.4.127"},
    "libcublas": {"name": "CUDA cuBLAS", "version": "12.4.5.8"},
    "libcufft": {"name": "CUDA cuFFT", "version": "11.2.1.3"},
    "libcurand": {"name": "CUDA cuRAND", "version": "10.3.5.147"},
    "libcusolver": {"name": "CUDA cuSOLVER", "version": "11.6.1.9"},
    "libcusparse": {"name": "CUDA cuSPARSE", "version": "12.3.1.170"},
    "libnvjitlink": {"name": "JIT Linker Library API", "version": "12.4.127"},
    "nvidia_driver": {"name": "NVIDIA Linux Driver", "version": "550.54.15"},
}


def test_parse_cuda_version_json() -> None:
    version, comps = _parse_cuda_version_json(json.dumps(VERSION_JSON_124))
    assert version == "12.4.1"
    assert comps == {
        "cudart": "12.4.127",
        "cupti": "12.4.127",
        "nvcc": "12.4.131",
        "nvrtc": "12.4.127",
        "cublas": "12.4.5.8",
        "cufft": "11.2.1.3",
        "curand": "10.3.5.147",
        "cusolver": "11.6.1.9",
        "cusparse": "12.3.1.170",
        "nvjitlink": "12.4.127",
    }


@pytest.mark.parametrize(
    "text", ["", "{", "[1, 2]", '{"cuda": "12.4"}', '{"cuda": {"version": 12}}', "\x00"]
)
def test_parse_cuda_version_json_junk(text: str) -> None:
    assert _parse_cuda_version_json(text) == (None, {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CUDA Version 10.2.89\n", "10.2.89"),
        ("CUDA Version 9.0.176\n", "9.0.176"),
        ("", None),
        ("CUDA\n", None),
    ],
)
def test_parse_cuda_version_txt(text: str, expected: str | None) -> None:
    assert _parse_cuda_version_txt(text) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-cudnn-cu13", ("cudnn", "13")),
        ("nvidia-cudnn-cu12", ("cudnn", "12")),
        ("nvidia-cuda-runtime-cu12", ("cudart", "12")),
        ("nvidia-cuda-runtime", ("cudart", None)),
        ("nvidia-cublas-cu11", ("cublas", "11")),
        ("nvidia-nccl-cu13", ("nccl", "13")),
        ("nvidia-nvjitlink-cu12", ("nvjitlink", "12")),
        ("nvidia-cuda-nvrtc", ("nvrtc", None)),
        ("nvidia-ml-py", None),
        ("nvidia-dali-cuda120", None),
        ("torch", None),
    ],
)
def test_component_for_dist(name: str, expected) -> None:
    assert _component_for_dist(name) == expected


@pytest.mark.parametrize(
    ("fname", "stem", "expected"),
    [
        ("libcudnn.so.8.9.7", "libcudnn", "8.9.7"),
        ("libcudart.so.12.4.127", "libcudart", "12.4.127"),
        ("libnccl.so.2.18.3", "libnccl", "2.18.3"),
        ("libcudnn.so.9", "libcudnn", None),
        ("libcudnn.so", "libcudnn", None),
        ("libcudnn_ops.so.9.1.0", "libcudnn", None),
    ],
)
def test_version_from_filename(fname: str, stem: str, expected: str | None) -> None:
    assert _version_from_filename(fname, stem) == expected


# -- a whole fake world ----------------------------------------------------------------------
CU12_WHEELS = [
    ("nvidia-cuda-runtime-cu12", "12.4.127", ("nvidia/cuda_runtime/lib/libcudart.so.12",)),
    (
        "nvidia-cudnn-cu12",
        "9.1.0.70",
        (
            "nvidia/cudnn/lib/libcudnn.so.9",
            "nvidia/cudnn/lib/libcudnn_ops.so.9",
            "nvidia/cudnn/include/cudnn_version.h",
        ),
    ),
    ("nvidia-nccl-cu12", "2.21.5", ("nvidia/nccl/lib/libnccl.so.2", "nvidia/nccl/include/nccl.h")),
    (
        "nvidia-cublas-cu12",
        "12.4.5.8",
        ("nvidia/cublas/lib/libcublas.so.12", "nvidia/cublas/lib/libcublasLt.so.12"),
    ),
    ("nvidia-cufft-cu12", "11.2.1.3", ("nvidia/cufft/lib/libcufft.so.11",)),
    ("nvidia-cusparse-cu12", "12.3.1.170", ("nvidia/cusparse/lib/libcusparse.so.12",)),
    ("nvidia-cusolver-cu12", "11.6.1.9", ("nvidia/cusolver/lib/libcusolver.so.11",)),
    ("nvidia-nvjitlink-cu12", "12.4.127", ("nvidia/nvjitlink/lib/libnvJitLink.so.12",)),
    ("nvidia-ml-py", "12.535.133", ("pynvml.py",)),
]


@pytest.fixture
def world(tmp_path: Path, dist, conda, make_tool):
    """A conda env with a pip-installed torch stack, a system toolkit and two nvcc."""
    prefix = tmp_path / "env"
    site = prefix / "lib/python3.11/site-packages"
    site.mkdir(parents=True)
    for name, version, files in CU12_WHEELS:
        dist(
            site,
            name,
            version,
            files=files,
            file_contents={
                "nvidia/cudnn/include/cudnn_version.h": CUDNN_V9_H,
                "nvidia/nccl/include/nccl.h": NCCL_H,
            },
        )
    conda(prefix, "cuda-version", "12.4", "h3060b56_3")
    conda(prefix, "cuda-cudart", "12.4.127", "he02047a_2")
    conda(prefix, "cudnn", "8.9.7.29", "hbc23b4c_3")
    conda(prefix, "cuda-cudart-dev", "12.4.127", "he02047a_2")  # -dev packages are not runtimes
    (prefix / "include").mkdir()
    (prefix / "include/cudnn_version.h").write_text(CUDNN_V8_H)
    (prefix / "lib").mkdir(exist_ok=True)
    (prefix / "lib/libcudnn.so.8.9.7").write_text("")
    (prefix / "lib/libcudnn.so.8").symlink_to("libcudnn.so.8.9.7")

    root = tmp_path / "root"
    tk = root / "usr/local/cuda-12.4"
    (tk / "include").mkdir(parents=True)
    (tk / "lib64").mkdir()
    (tk / "version.json").write_text(json.dumps(VERSION_JSON_124, indent=3))
    (tk / "lib64/libcudart.so.12.4.127").write_text("")
    (tk / "lib64/libnccl.so.2.18.3").write_text("")
    (root / "usr/local/cuda").symlink_to("cuda-12.4")
    old = root / "opt/cuda-10.2"
    old.mkdir(parents=True)
    (old / "version.txt").write_text("CUDA Version 10.2.89\n")

    env_nvcc = make_tool("nvcc", f"cat <<'EOF'\n{NVCC['12.4']}EOF\n", directory=prefix / "bin")
    make_tool("nvcc", f"cat <<'EOF'\n{NVCC['11.8']}EOF\n")  # the system one, later on PATH
    return {"prefix": prefix, "site": site, "root": root, "env_nvcc": env_nvcc}


def test_probe_cuda_world(world, bin_dir: Path) -> None:
    info = probe_cuda(World(root=world["root"], environ={"CUDA_HOME": "/opt/cuda-10.2"}, prefix=str(world["prefix"]), site_dirs=[str(world["site"])], path_dirs=[str(world["prefix"] / "bin"), str(bin_dir)], timeout=5))
    assert info.status == "ok", info.error
    # nvcc: the conda env's bin comes first on PATH
    assert info.nvcc == str(world["env_nvcc"])
    assert (info.nvcc_release, info.nvcc_version) == ("12.4", "12.4.131")

    tks = {(t.origin, t.path, t.version) for t in info.toolkits}
    assert ("CUDA_HOME", "/opt/cuda-10.2", "10.2.89") in tks
    assert (
        "/usr/local",
        "/usr/local/cuda-12.4",
        "12.4.1",
    ) in tks  # /usr/local/cuda → cuda-12.4, once
    assert ("conda", None, "12.4") in tks
    assert len([t for t in info.toolkits if t.path == "/usr/local/cuda-12.4"]) == 1

    def get(name: str, origin: str):
        return [lib for lib in info.find(name) if lib.origin == origin]

    (cudnn_pip,) = get("cudnn", "pip")
    assert cudnn_pip.version == "9.1.0.70"
    assert cudnn_pip.package == "nvidia-cudnn-cu12"
    assert cudnn_pip.cuda == "12"
    assert cudnn_pip.files == ("libcudnn.so.9", "libcudnn_ops.so.9")
    assert cudnn_pip.path == str(world["site"] / "nvidia/cudnn/lib")
    (cudnn_conda,) = get("cudnn", "conda")
    assert cudnn_conda.version == "8.9.7.29"
    assert cudnn_conda.package == "cudnn=8.9.7.29=hbc23b4c_3"
    headers = {lib.path: lib.version for lib in get("cudnn", "header")}
    assert headers == {
        str(world["site"] / "nvidia/cudnn/include/cudnn_version.h"): "9.1.0",
        str(world["prefix"] / "include/cudnn_version.h"): "8.9.7",
    }
    (cudnn_file,) = get("cudnn", "file")
    assert (cudnn_file.version, cudnn_file.files) == ("8.9.7", ("libcudnn.so.8.9.7",))

    assert [lib.version for lib in get("nccl", "pip")] == ["2.21.5"]
    assert [lib.version for lib in get("nccl", "header")] == ["2.21.5"]
    assert [(lib.version, lib.files) for lib in get("nccl", "toolkit")] == [
        ("2.18.3", ("libnccl.so.2.18.3",))
    ]
    assert [lib.version for lib in get("cublas", "pip")] == ["12.4.5.8"]
    assert [lib.version for lib in get("cublas", "toolkit")] == ["12.4.5.8"]
    assert [lib.version for lib in get("cufft", "pip")] == ["11.2.1.3"]
    assert [lib.version for lib in get("cusparse", "pip")] == ["12.3.1.170"]
    assert [lib.version for lib in get("cusolver", "pip")] == ["11.6.1.9"]
    assert [lib.version for lib in get("nvjitlink", "pip")] == ["12.4.127"]
    assert {lib.version for lib in info.find("cudart")} == {"12.4.127"}
    assert {lib.origin for lib in info.find("cudart")} == {"pip", "conda", "toolkit"}
    assert not info.find("ml-py")  # nvidia-ml-py is the NVML binding, not a CUDA library


def test_probe_cuda_nothing(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    info = probe_cuda(World(root=tmp_path / "root", environ={}, prefix=str(tmp_path / "p"), site_dirs=[], path_dirs=[]))
    assert info.status == "absent"
    assert info.error == "no CUDA toolkit or library found"


def test_probe_cuda_bad_cuda_home_and_failing_nvcc(
    tmp_path: Path, make_tool, bin_dir: Path
) -> None:
    (tmp_path / "root").mkdir()
    make_tool("nvcc", "echo 'nvcc: error while loading shared libraries' >&2\nexit 127\n")
    info = probe_cuda(World(root=tmp_path / "root", environ={"CUDA_HOME": "/nonexistent/cuda"}, path_dirs=[str(bin_dir)], timeout=5))
    assert info.nvcc == str(bin_dir / "nvcc")
    assert info.nvcc_version is None
    assert "CUDA_HOME=/nonexistent/cuda is not a directory" in info.error
    assert "exited with status 127" in info.error


def test_probe_cuda_hanging_nvcc(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    import time

    (tmp_path / "root").mkdir()
    make_tool("nvcc", "sleep 30\n")
    t0 = time.monotonic()
    info = probe_cuda(World(root=tmp_path / "root", environ={}, path_dirs=[str(bin_dir)], timeout=0.5))
    assert time.monotonic() - t0 < 5
    assert "no answer within 0.5 s" in info.error


@pytest.mark.skipif(not Path("/usr/local/bin/nvcc").exists(), reason="no /usr/local/bin/nvcc here")
def test_probe_cuda_real_nvcc() -> None:
    real = subprocess.run(
        ["/usr/local/bin/nvcc", "--version"], capture_output=True, text=True, timeout=30
    )
    expected = _parse_nvcc_version(real.stdout)
    info = probe_cuda(World(environ=dict(os.environ), path_dirs=["/usr/local/bin"], timeout=10))
    assert info.nvcc == "/usr/local/bin/nvcc"
    assert (info.nvcc_release, info.nvcc_version) == expected
    assert info.nvcc_release and info.nvcc_release.count(".") == 1


@pytest.mark.skipif(not Path("/usr/local/cuda").is_dir(), reason="no /usr/local/cuda here")
def test_probe_cuda_real_usr_local() -> None:
    info = probe_cuda(World(environ={}, path_dirs=[]))
    real = os.path.realpath("/usr/local/cuda")
    assert real in {t.path for t in info.toolkits}
    assert len([t for t in info.toolkits if t.path == real]) == 1
