"""[frameworks]: static build facts of torch/jax/tensorflow/cupy, fatbin archs, the --import run."""

from __future__ import annotations

import io
import os
import struct
import sys
import time
from pathlib import Path

import pytest

from envlock.probes.fatbin import _parse_fatbin_entries, fatbin_archs
from envlock.probes.frameworks import (
    _cuda_from_label,
    _parse_import_output,
    _parse_tf_build_info,
    _parse_torch_version_py,
    _requires_cuda,
    _torch_build,
    probe_frameworks,
)
from envlock.probes.world import World

TORCH_214_CU130 = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.14.1+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = '5c4886908584029761b579af026dcfb627c84070'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""
TORCH_213_CPU = TORCH_214_CU130.replace("2.14.1+cu130", "2.13.0+cpu").replace("'13.0'", "None")
TORCH_231_ROCM = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
__version__ = '2.3.1+rocm6.0'
debug = False
cuda: Optional[str] = None
git_version = '63d5e9221bedd1546b7d364b5ce4171547db12a9'
hip: Optional[str] = '6.0.32830-d62f6a171'
"""
TORCH_1121_CU113 = """__version__ = '1.12.1+cu113'
debug = False
cuda = '11.3'
git_version = '664058fa83f1d8eede5d66418abff6e20bd76ca8'
hip = None
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TORCH_214_CU130,
            {"__version__": "2.14.1+cu130", "cuda": "13.0", "hip": None, "debug": False},
        ),
        (TORCH_213_CPU, {"__version__": "2.13.0+cpu", "cuda": None, "hip": None}),
        (
            TORCH_231_ROCM,
            {"__version__": "2.3.1+rocm6.0", "cuda": None, "hip": "6.0.32830-d62f6a171"},
        ),
        (TORCH_1121_CU113, {"__version__": "1.12.1+cu113", "cuda": "11.3", "debug": False}),
    ],
    ids=["2.14-cu130", "2.13-cpu", "2.3-rocm", "1.12-cu113"],
)
def test_parse_torch_version_py(text: str, expected: dict) -> None:
    got = _parse_torch_version_py(text)
    for k, v in expected.items():
        assert got[k] == v
    assert "Optional" not in got and "__all__" not in got


@pytest.mark.parametrize(
    "text", ["", "def f(:\n", "x = [1, 2]\n", "\x00\x00", "cuda = some_call()\n"]
)
def test_parse_torch_version_py_junk(text: str) -> None:
    assert _parse_torch_version_py(text) == {}


def test_parse_torch_version_py_never_executes(tmp_path: Path) -> None:
    sentinel = tmp_path / "executed"
    text = f"import os\nos.system('touch {sentinel}')\n__version__ = '9.9.9'\ncuda = '12.1'\n"
    assert _parse_torch_version_py(text) == {"__version__": "9.9.9", "cuda": "12.1"}
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("info_text", "version", "conda_build", "build", "evidence_part"),
    [
        (TORCH_214_CU130, "2.14.1+cu130", None, "cuda", "cuda='13.0'"),
        (TORCH_213_CPU, "2.13.0+cpu", None, "cpu", "local version +cpu"),
        (TORCH_231_ROCM, "2.3.1+rocm6.0", None, "rocm", "hip="),
        (None, "1.9.0", "py3.8_cpu_0", "cpu", "conda build py3.8_cpu_0"),
        (None, "2.1.0", "py3.11_cuda12.1_cudnn8.9.2_0", "cuda", "conda build"),
        (None, "2.5.1+cu124", None, "cuda", "+cu124"),
        (None, "2.5.1", None, None, "unreadable"),
    ],
)
def test_torch_build(info_text, version, conda_build, build, evidence_part) -> None:
    info = _parse_torch_version_py(info_text) if info_text else {}
    got_build, evidence = _torch_build(info, version, conda_build)
    assert got_build == build
    assert evidence_part in evidence


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("cu124", "12.4"),
        ("cu130", "13.0"),
        ("cu118", "11.8"),
        ("cu92", "9.2"),
        ("cuda12.cudnn89", "12"),
        ("cpu", None),
        (None, None),
    ],
)
def test_cuda_from_label(label, expected) -> None:
    assert _cuda_from_label(label) == expected


def test_requires_cuda_keeps_nvidia_pins_without_markers() -> None:
    reqs = [
        "filelock",
        'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-nccl-cu12==2.21.5; platform_system == "Linux"',
        'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
        'nvidia-foo; extra == "gpu"',
        "sympy>=1.13.3",
    ]
    assert _requires_cuda(reqs) == (
        "nvidia-cudnn-cu12==9.1.0.70",
        "nvidia-nccl-cu12==2.21.5",
        "cuda-toolkit[cublas,cudart]==13.0.3",
    )


TF_BUILD_INFO_DICT = '''# Copyright 2020 The TensorFlow Authors. All Rights Reserved.
"""Auto-generated module providing information about the build."""
build_info = {'cpu_compiler': '/usr/lib/llvm-17/bin/clang', 'cuda_compute_capabilities': ['sm_50', 'sm_60', 'sm_70', 'sm_80', 'compute_90'], 'cuda_version': '12.3', 'cudnn_version': '8', 'is_cuda_build': True, 'is_rocm_build': False, 'is_tensorrt_build': True}
'''
TF_BUILD_INFO_ORDERED = '''"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([("cuda_version", "11.2"), ("cudnn_version", "8"), ("is_cuda_build", True), ("is_rocm_build", False)])
'''


@pytest.mark.parametrize(
    ("text", "cuda", "cudnn"),
    [(TF_BUILD_INFO_DICT, "12.3", "8"), (TF_BUILD_INFO_ORDERED, "11.2", "8")],
    ids=["dict", "ordereddict"],
)
def test_parse_tf_build_info(text: str, cuda: str, cudnn: str) -> None:
    info = _parse_tf_build_info(text)
    assert (info["cuda_version"], info["cudnn_version"], info["is_cuda_build"]) == (
        cuda,
        cudnn,
        True,
    )


@pytest.mark.parametrize(
    "text", ["", "build_info = make()\n", "build_info = [1]\n", "x = {}\n", "((("]
)
def test_parse_tf_build_info_junk(text: str) -> None:
    assert _parse_tf_build_info(text) == {}


# -- fatbin ----------------------------------------------------------------------------------
def _entry(kind: int, sm: int, payload: bytes) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 16)
    head = struct.pack("<HHIIIIII", kind, 0x0101, 64, len(padded), 0, len(payload), 0, 0)
    head += struct.pack("<IIIQQQ", sm, 64, 0, 0, 0, len(payload))[: 64 - len(head)]
    head = head.ljust(64, b"\0")
    return head + padded


def _container(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


FATBIN = (
    _container([_entry(2, 80, b"\x7fELF-sm80-code"), _entry(2, 90, b"\x7fELF-sm90")])
    + b"\0" * 16
    + _container([_entry(2, 80, b"\x7fELF"), _entry(1, 120, b".version 8.8\n.target sm_120\n")])
)


def _read(data: bytes):
    buf = io.BytesIO(data)

    def read(off: int, n: int) -> bytes:
        buf.seek(off)
        return buf.read(n)

    return read


def test_parse_fatbin_entries() -> None:
    archs, err = _parse_fatbin_entries(_read(FATBIN), 0, len(FATBIN))
    assert err is None
    assert archs == {"sm_80", "sm_90", "compute_120"}


@pytest.mark.parametrize(
    ("data", "err_part"),
    [
        (b"\x01\x02\x03\x04" * 8, "unknown fatbin container"),
        (FATBIN[:10], None),
        (b"", None),
    ],
    ids=["bad-magic", "short", "empty"],
)
def test_parse_fatbin_entries_junk(data: bytes, err_part: str | None) -> None:
    archs, err = _parse_fatbin_entries(_read(data), 0, len(data))
    assert archs == set()
    assert (err_part in err) if err_part else err is None


def test_fatbin_archs_real_elf(tmp_path: Path, cshared) -> None:
    """A real shared library (gcc) carrying a .nv_fatbin section, as libtorch_cuda.so does."""
    body = ", ".join(str(b) for b in FATBIN)
    lib = cshared(
        tmp_path,
        "libfake_cuda.so",
        f'__attribute__((section(".nv_fatbin"), used, aligned(8)))\n'
        f"const unsigned char fatbin[] = {{{body}}};\nint f(void) {{ return 1; }}\n",
    )
    archs, err = fatbin_archs(lib)
    assert err is None
    assert archs == ("sm_80", "sm_90", "compute_120")


def test_fatbin_archs_no_section_and_not_elf(tmp_path: Path, cshared) -> None:
    lib = cshared(tmp_path, "libplain.so", "int f(void) { return 1; }\n")
    assert fatbin_archs(lib) == ((), f"{lib}: no .nv_fatbin section")
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an elf file at all")
    archs, err = fatbin_archs(junk)
    assert archs == () and "not a readable ELF file" in err
    archs, err = fatbin_archs(tmp_path / "missing.so")
    assert archs == () and "No such file" in err


# -- probe on a fake site-packages -----------------------------------------------------------
def test_probe_frameworks_world(tmp_path: Path, dist, conda) -> None:
    prefix = tmp_path / "env"
    site = prefix / "lib/python3.11/site-packages"
    dist(
        site,
        "torch",
        "2.5.1+cu124",
        files=("torch/version.py", "torch/__init__.py"),
        file_contents={
            "torch/version.py": TORCH_214_CU130.replace("2.14.1+cu130", "2.5.1+cu124").replace(
                "'13.0'", "'12.4'"
            )
        },
        requires=(
            "filelock",
            'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"',
            'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',
        ),
    )
    dist(site, "jaxlib", "0.4.13+cuda12.cudnn89", files=("jaxlib/__init__.py",))
    dist(site, "jax-cuda12-plugin", "0.4.30", files=("jax_cuda12_plugin/__init__.py",))
    dist(
        site,
        "tensorflow",
        "2.15.0",
        files=("tensorflow/python/platform/build_info.py",),
        file_contents={"tensorflow/python/platform/build_info.py": TF_BUILD_INFO_DICT},
    )
    dist(site, "cupy-cuda12x", "13.0.0", files=("cupy/__init__.py",))
    dist(site, "cupy-cuda102", "9.6.0", files=("cupy/x.py",))
    dist(site, "numba", "0.59.1", files=("numba/__init__.py",))
    dist(site, "requests", "2.31.0", files=("requests/__init__.py",))
    info = probe_frameworks(World(prefix=str(prefix), site_dirs=[str(site)]))
    assert info.status == "ok"
    assert [p.name for p in info.packages] == [
        "cupy-cuda102",
        "cupy-cuda12x",
        "jax-cuda12-plugin",
        "jaxlib",
        "numba",
        "tensorflow",
        "torch",
    ]
    torch = info.get("torch")
    assert (torch.version, torch.build, torch.cuda) == ("2.5.1+cu124", "cuda", "12.4")
    assert torch.requires == ("nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.4.5.8")
    assert torch.git_version == "5c4886908584029761b579af026dcfb627c84070"
    assert torch.cuda_archs == ()  # no libtorch_cuda.so in this fake
    assert (info.get("jaxlib").build, info.get("jaxlib").cuda, info.get("jaxlib").cudnn) == (
        "cuda",
        "12",
        "8.9",
    )
    assert (info.get("jax-cuda12-plugin").build, info.get("jax-cuda12-plugin").cuda) == (
        "cuda",
        "12",
    )
    tf = info.get("tensorflow")
    assert (tf.build, tf.cuda, tf.cudnn) == ("cuda", "12.3", "8")
    assert tf.cuda_archs == ("sm_50", "sm_60", "sm_70", "sm_80", "compute_90")
    assert info.get("cupy-cuda12x").cuda == "12"
    assert info.get("cupy-cuda102").cuda == "10.2"
    assert info.get("numba").build is None
    assert info.runtime is None


def test_probe_frameworks_conda_cpu_pytorch(tmp_path: Path, conda) -> None:
    """Case C05: conda solved pytorch to a CPU build string."""
    prefix = tmp_path / "env"
    conda(prefix, "pytorch", "1.9.0", "py3.8_cpu_0")
    conda(prefix, "cudatoolkit", "11.3.1", "h2bc3f7f_2")
    info = probe_frameworks(World(prefix=str(prefix), site_dirs=[]))
    torch = info.get("torch")
    assert torch.build == "cpu"
    assert torch.conda_build == "py3.8_cpu_0"
    assert "conda build py3.8_cpu_0" in torch.evidence


def test_probe_frameworks_nothing(tmp_path: Path) -> None:
    info = probe_frameworks(World(site_dirs=[str(tmp_path)]))
    assert info.status == "absent"
    assert info.packages == ()


# -- --import --------------------------------------------------------------------------------
def test_import_run_without_torch_real_interpreter() -> None:
    """The test interpreter has no torch: the import run says so (a real run of the script)."""
    try:
        import torch  # noqa: F401

        pytest.skip("torch is importable here")
    except ImportError:
        pass
    info = probe_frameworks(World(site_dirs=[], python=sys.executable), do_import=True, import_timeout=60)
    rt = info.runtime
    assert rt.status == "absent"
    assert rt.error == "import torch: ModuleNotFoundError: No module named 'torch'"
    assert rt.duration is not None and rt.duration > 0


def test_import_run_hang(make_tool) -> None:
    python = make_tool("python", "sleep 30\n")
    t0 = time.monotonic()
    info = probe_frameworks(World(site_dirs=[], python=str(python)), do_import=True, import_timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert info.runtime.status == "timeout"


def test_import_run_without_interpreter() -> None:
    info = probe_frameworks(World(site_dirs=[], python=None), do_import=True)
    assert info.runtime.status == "error"


IMPORT_OUT_GPU = (
    "some warning on stdout\n"
    'ENVLOCK-JSON:{"torch_version": "2.5.1+cu124", "cuda_available": true, "device_count": 8, '
    '"cudnn_version": 90100, "arch_list": ["sm_50", "sm_80", "sm_86", "sm_90"], "allow_tf32_matmul": false, '
    '"allow_tf32_cudnn": true, "deterministic": false, "cudnn_benchmark": false, '
    '"threadpools": [{"user_api": "blas", "internal_api": "openblas", "prefix": "libscipy_openblas", '
    '"filepath": "/site/numpy.libs/libscipy_openblas64_-ff651d7f.so", "version": "0.3.27", "num_threads": 64}, '
    '{"user_api": "openmp", "internal_api": "openmp", "prefix": "libgomp", "filepath": "/site/torch/lib/libgomp.so.1", '
    '"version": null, "num_threads": 64}], "duration": 2.5}\n'
)


def test_parse_import_output_gpu() -> None:
    rt = _parse_import_output(IMPORT_OUT_GPU, "python -c", 2.6)
    assert rt.status == "ok"
    assert (rt.cuda_available, rt.device_count, rt.cudnn_version) == (True, 8, 90100)
    assert rt.arch_list == ("sm_50", "sm_80", "sm_86", "sm_90")
    assert (rt.allow_tf32_matmul, rt.allow_tf32_cudnn) == (False, True)
    assert [(p.internal_api, p.version, p.num_threads) for p in rt.threadpools] == [
        ("openblas", "0.3.27", 64),
        ("openmp", None, 64),
    ]
    assert rt.duration == 2.6


@pytest.mark.parametrize(
    ("stdout", "err_part"),
    [
        ("", "printed no result"),
        ("ENVLOCK-JSON:{not json\n", "not JSON"),
        ("ENVLOCK-JSON:[1]\n", "not an object"),
        (
            'ENVLOCK-JSON:{"error": "import torch: OSError: libcudnn.so.9: cannot open"}\n',
            "libcudnn.so.9",
        ),
    ],
)
def test_parse_import_output_junk(stdout: str, err_part: str) -> None:
    rt = _parse_import_output(stdout, "src")
    assert rt.status == "error"
    assert err_part in rt.error


def test_parse_import_output_wrong_types_dropped() -> None:
    rt = _parse_import_output(
        'ENVLOCK-JSON:{"device_count": true, "cudnn_version": "9", "arch_list": [1, "sm_90"]}', "s"
    )
    assert rt.device_count is None and rt.cudnn_version is None
    assert rt.arch_list == ("sm_90",)


def _readelf_section(path: Path, name: str) -> tuple[int, int] | None:
    """(offset, size) of section ``name`` as binutils' ``readelf -S -W`` prints it (the oracle)."""
    import subprocess

    out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[0].startswith("[") and parts[1] == name:
            return int(parts[4], 16), int(parts[5], 16)
    return None


def _elf_files(tmp_path: Path, cshared) -> list[Path]:
    """gcc-built libraries with and without .nv_fatbin, 64- and 32-bit where gcc can, and the
    system's libc and python."""
    body = ", ".join(str(b) for b in FATBIN)
    src = (f'__attribute__((section(".nv_fatbin"), used, aligned(8)))\n'
           f"const unsigned char fatbin[] = {{{body}}};\nint f(void) {{ return 1; }}\n")
    files = [cshared(tmp_path, "libfat.so", src), cshared(tmp_path, "libplain.so", "int g(void){return 2;}\n")]
    import subprocess

    c = tmp_path / "fat32.c"
    c.write_text(src)
    r = subprocess.run(["gcc", "-m32", "-c", "-o", str(tmp_path / "fat32.o"), str(c)],
                       capture_output=True, timeout=60, check=False)
    if r.returncode == 0:  # a 32-bit relocatable object: ELFCLASS32, its own section layout
        files.append(tmp_path / "fat32.o")
    r = subprocess.run(["gcc", "-c", "-o", str(tmp_path / "fat64.o"), str(c)],
                       capture_output=True, timeout=60, check=False)
    if r.returncode == 0:
        files.append(tmp_path / "fat64.o")
    import glob

    files += [Path(p) for p in sorted(glob.glob("/lib/x86_64-linux-gnu/libc.so.6"))[:1]]
    files.append(Path(os.path.realpath(sys.executable)))
    return files


def test_find_section_matches_readelf(tmp_path: Path, cshared) -> None:
    """envlock's section-header walk finds what readelf finds, for every section of real files."""
    from envlock.probes.fatbin import find_section

    for path in _elf_files(tmp_path, cshared):
        for name in (".nv_fatbin", ".text", ".comment", ".dynsym", ".shstrtab", ".rodata"):
            with open(path, "rb") as fh:
                assert find_section(fh, name.encode()) == _readelf_section(path, name), (path, name)


def test_fatbin_archs_bad_headers(tmp_path: Path, cshared) -> None:
    """Inconsistent section headers give one 'not a readable ELF file' answer, never an exception."""
    lib = Path(cshared(tmp_path, "libx.so", "int f(void) { return 1; }\n"))
    data = bytearray(lib.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    cases = {
        "truncated": bytes(data[: shoff + 10]),
        "shstrndx": bytes(data[:0x3E]) + struct.pack("<H", 0xFFF0) + bytes(data[0x40:]),
        "shentsize": bytes(data[:0x3A]) + struct.pack("<H", 4) + bytes(data[0x3C:]),
    }
    for name, blob in cases.items():
        p = tmp_path / f"{name}.so"
        p.write_bytes(blob)
        archs, err = fatbin_archs(p)
        assert archs == () and "not a readable ELF file" in err, (name, err)


@pytest.mark.realenv
def test_fatbin_archs_libtorch_cuda_matches_readelf(cuda_venv: Path) -> None:
    """The real libtorch_cuda.so: the section found is readelf's, and the archs are torch's own
    list (``torch.cuda.get_arch_list()`` is built from the same nvcc -gencode flags)."""
    from envlock.probes.fatbin import find_section

    lib = next(cuda_venv.glob("lib/python3*/site-packages/torch/lib/libtorch_cuda.so"))
    with open(lib, "rb") as fh:
        assert find_section(fh, b".nv_fatbin") == _readelf_section(lib, ".nv_fatbin")
    archs, err = fatbin_archs(lib)
    assert err is None
    assert any(a.startswith("sm_") for a in archs)
