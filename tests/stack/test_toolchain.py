"""[toolchain]: compilers/MPI/CMake on PATH, glibc, libstdc++ version definitions, .comment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from envlock.probes.toolchain import (
    _max_version,
    _parse_cc_version,
    _parse_cmake_version,

    _parse_mpicc_show,
    _parse_mpirun_version,
    probe_toolchain,
)
from envlock.probes.world import World

GCC_DEBIAN = "gcc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n"
GCC_RHEL = "gcc (GCC) 8.5.0 20210514 (Red Hat 8.5.0-20)\nCopyright (C) 2018 Free Software Foundation, Inc.\n"
GCC_CONDA = "x86_64-conda-linux-gnu-cc (conda-forge gcc 12.3.0-3) 12.3.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n"
GXX_UBUNTU = "g++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n"
GFORTRAN = "GNU Fortran (GCC) 11.2.0\nCopyright (C) 2021 Free Software Foundation, Inc.\n"
CLANG_UBUNTU = (
    "Ubuntu clang version 14.0.0-1ubuntu1.1\nTarget: x86_64-pc-linux-gnu\nThread model: posix\n"
)
CLANG_17 = "clang version 17.0.6 (https://github.com/llvm/llvm-project 6009708b4367171ccdbf4b5905cb6a803753fe18)\n"
ICX = "Intel(R) oneAPI DPC++/C++ Compiler 2024.0.0 (2024.0.0.20231017)\nTarget: x86_64-unknown-linux-gnu\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GCC_DEBIAN, ("gcc", "12.2.0")),
        (GCC_RHEL, ("gcc", "8.5.0")),
        (GCC_CONDA, ("gcc", "12.3.0")),
        (GXX_UBUNTU, ("gcc", "11.4.0")),
        (GFORTRAN, ("gcc", "11.2.0")),
        (CLANG_UBUNTU, ("clang", "14.0.0")),
        (CLANG_17, ("clang", "17.0.6")),
        (ICX, ("intel", "2024.0.0")),
        ("", (None, None)),
        ("command not found\n", (None, None)),
        ("\x00\x01", (None, None)),
    ],
    ids=[
        "debian",
        "rhel",
        "conda",
        "g++",
        "gfortran",
        "clang-ubuntu",
        "clang17",
        "icx",
        "empty",
        "junk",
        "binary",
    ],
)
def test_parse_cc_version(text: str, expected) -> None:
    assert _parse_cc_version(text) == expected


OMPI_4 = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OMPI_5 = "mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
MPICH_4 = (
    "HYDRA build details:\n"
    "    Version:                                 4.1.2\n"
    "    Release Date:                            Wed Jun  7 15:22:45 CDT 2023\n"
    "    CC:                              gcc    \n"
)
INTEL_MPI = (
    "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
    "Copyright 2003-2023, Intel Corporation.\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (OMPI_4, ("Open MPI", "4.1.4")),
        (OMPI_5, ("Open MPI", "5.0.3")),
        (MPICH_4, ("MPICH", "4.1.2")),
        (INTEL_MPI, ("Intel MPI", "2021.10")),
        ("", (None, None)),
        ("usage: mpirun ...\n", (None, None)),
    ],
)
def test_parse_mpirun_version(text: str, expected) -> None:
    assert _parse_mpirun_version(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "cmake version 3.25.1\n\nCMake suite maintained and supported by Kitware (kitware.com/cmake).\n",
            "3.25.1",
        ),
        ("cmake version 3.28.0-rc1\n", "3.28.0-rc1"),
        ("", None),
        ("cmake: error\n", None),
    ],
)
def test_parse_cmake_version(text: str, expected) -> None:
    assert _parse_cmake_version(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gcc -I/usr/include/x86_64-linux-gnu/mpich -L/usr/lib/x86_64-linux-gnu -lmpich\n", "gcc"),
        ("icx -I/opt/intel/mpi/include -L/opt/intel/mpi/lib -lmpi\n", "icx"),
        ("", None),
    ],
)
def test_parse_mpicc_show(text: str, expected) -> None:
    assert _parse_mpicc_show(text) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"\x7fELF\0\0junk GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36.\nCopyright",
            "2.36",
        ),
        (b"GNU C Library (GNU libc) stable release version 2.28.\n", "2.28"),
        (b"GNU C Library (Ubuntu GLIBC 2.35-0ubuntu3.6) stable release version 2.35.\n", "2.35"),
        (b"", None),
        (b"GNU C Library\0 release", None),
    ],
)
def test_parse_glibc_banner(data: bytes, expected) -> None:
    from envlock.libs.glibc import parse_banner as _parse_glibc_banner

    assert _parse_glibc_banner(data) == expected


@pytest.mark.parametrize(
    ("names", "prefix", "expected"),
    [
        (["GLIBCXX_3.4", "GLIBCXX_3.4.9", "GLIBCXX_3.4.29", "CXXABI_1.3.13"], "GLIBCXX_", "3.4.29"),
        (["GLIBCXX_3.4", "GLIBCXX_3.4.9", "CXXABI_1.3.13", "CXXABI_1.3.9"], "CXXABI_", "1.3.13"),
        (["libstdc++.so.6", "GLIBCXX_TM_1"], "GLIBCXX_", None),
        ([], "GLIBCXX_", None),
    ],
)
def test_max_version(names, prefix, expected) -> None:
    assert _max_version(names, prefix) == expected


# -- fake tools on a test PATH ---------------------------------------------------------------
def _echo(text: str) -> str:
    return f"cat <<'EOF'\n{text}EOF\n"


def test_probe_toolchain_fake_tools(tmp_path: Path, make_tool, bin_dir: Path) -> None:
    env_bin = tmp_path / "env" / "bin"
    make_tool("gcc", _echo(GCC_CONDA), directory=env_bin)  # the conda env's compiler, first on PATH
    make_tool("gcc", _echo(GCC_DEBIAN))
    make_tool("gfortran", _echo(GFORTRAN))
    make_tool("clang", _echo(CLANG_17))
    make_tool("mpirun", _echo(OMPI_4))
    # Open MPI's wrapper passes -show to the compiler (which fails); --showme works.
    make_tool(
        "mpicc",
        'if [ "$1" = "--showme" ]; then echo "gcc -I/usr/lib/x86_64-linux-gnu/openmpi/include -lmpi"; '
        "else echo \"gcc: error: unrecognized command-line option '-show'\" >&2; exit 1; fi\n",
    )
    make_tool("cmake", "echo 'CMake Error: could not find CMAKE_ROOT' >&2\nexit 1\n")
    make_tool("g++", "sleep 30\n")
    t0 = time.monotonic()
    info = probe_toolchain(World(root=tmp_path, environ={"PATH": "/usr/bin:/bin"}, path_dirs=[str(env_bin), str(bin_dir)], timeout=1.0))
    assert time.monotonic() - t0 < 6
    tools = {t.name: t for t in info.tools}
    assert [t.name for t in info.tools] == [
        "gcc",
        "g++",
        "gfortran",
        "clang",
        "mpicc",
        "mpirun",
        "cmake",
    ]
    assert (tools["gcc"].path, tools["gcc"].version) == (str(env_bin / "gcc"), "12.3.0")
    assert tools["g++"].status == "timeout" and tools["g++"].version is None
    assert (tools["gfortran"].vendor, tools["gfortran"].version) == ("gcc", "11.2.0")
    assert (tools["clang"].vendor, tools["clang"].version) == ("clang", "17.0.6")
    assert tools["mpicc"].wraps == "gcc"
    assert (tools["mpirun"].vendor, tools["mpirun"].version) == ("Open MPI", "4.1.4")
    assert tools["cmake"].status == "failed"
    assert "CMAKE_ROOT" in tools["cmake"].error


def test_probe_toolchain_mpich(make_tool, bin_dir: Path, tmp_path: Path) -> None:
    make_tool("mpirun", _echo(MPICH_4))
    make_tool(
        "mpicc",
        'if [ "$1" = "-show" ]; then echo "gcc -I/usr/include/x86_64-linux-gnu/mpich -lmpich"; else exit 1; fi\n',
    )
    info = probe_toolchain(World(root=tmp_path, environ={}, path_dirs=[str(bin_dir)]), tools=("mpicc", "mpirun"))
    assert info.tool("mpirun").vendor == "MPICH"
    assert info.tool("mpirun").version == "4.1.2"
    assert info.tool("mpicc").wraps == "gcc"


def test_probe_toolchain_unrecognised_output(make_tool, bin_dir: Path, tmp_path: Path) -> None:
    make_tool("gcc", "echo 'hello'\n")
    info = probe_toolchain(World(root=tmp_path, environ={}, path_dirs=[str(bin_dir)]), tools=("gcc",))
    assert info.tool("gcc").status == "error"
    assert "unrecognised version output" in info.tool("gcc").error


LIBSTDCXX_MAP = """GLIBCXX_3.4 { global: f1; local: *; };
GLIBCXX_3.4.9 { global: f2; } GLIBCXX_3.4;
GLIBCXX_3.4.29 { global: f3; } GLIBCXX_3.4.9;
CXXABI_1.3 { global: f4; };
CXXABI_1.3.13 { global: f5; } CXXABI_1.3;
"""


def test_probe_toolchain_libstdcxx_and_glibc_in_root(tmp_path: Path, cshared) -> None:
    """Case C03's inputs: an env libstdc++ older than the system's (real ELF Verdef, built by gcc)."""
    build = tmp_path / "build"
    build.mkdir()
    lib = cshared(
        build,
        "libfake.so",
        "\n".join(f"int f{i}(void) {{ return {i}; }}" for i in range(1, 6)) + "\n",
        version_script=LIBSTDCXX_MAP,
    )
    prefix = tmp_path / "env"
    (prefix / "lib").mkdir(parents=True)
    shutil.copy(lib, prefix / "lib/libstdc++.so.6.0.29")
    (prefix / "lib/libstdc++.so.6").symlink_to("libstdc++.so.6.0.29")
    root = tmp_path / "root"
    sysdir = root / "usr/lib64"
    sysdir.mkdir(parents=True)
    (sysdir / "libstdc++.so.6").write_bytes(b"not an ELF file")
    (sysdir / "libc.so.6").write_bytes(
        b"\x7fELF\0junk\0GNU C Library (GNU libc) stable release version 2.28.\n"
    )
    info = probe_toolchain(World(root=root, environ={}, prefix=str(prefix), path_dirs=[]), tools=())
    assert info.glibc == "2.28"
    assert info.glibc_source == "/usr/lib64/libc.so.6"
    env_lib, sys_lib = info.libstdcxx
    assert (env_lib.origin, env_lib.glibcxx, env_lib.cxxabi) == ("env", "3.4.29", "1.3.13")
    assert env_lib.path == os.path.realpath(prefix / "lib/libstdc++.so.6")
    assert sys_lib.origin == "system"
    assert sys_lib.error == "not-elf: invalid ELF header"


def test_probe_toolchain_built_with(tmp_path: Path, cshared, dist) -> None:
    site = tmp_path / "site"
    dist(site, "torch", "2.5.1", files=("torch/__init__.py",))
    (site / "torch/lib").mkdir()
    cshared(site / "torch/lib", "libtorch_cpu.so", "int at_init(void) { return 0; }\n")
    first = subprocess.run(
        ["gcc", "--version"], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()[0]
    info = probe_toolchain(World(root=tmp_path, environ={}, site_dirs=[str(site)], path_dirs=[]), tools=())
    (bw,) = info.built_with
    assert bw.package == "torch"
    assert bw.path == str(site / "torch/lib/libtorch_cpu.so")
    # gcc writes "GCC: (<pkgversion>) <version>" into .comment, as its --version first line shows.
    assert "GCC: " + first.split(" ", 1)[1] in bw.compilers


# -- the real machine ------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None, reason="no gcc/g++")
def test_probe_toolchain_real_gcc_and_glibc() -> None:
    gcc_ver = subprocess.run(
        ["gcc", "-dumpfullversion"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    gxx_ver = subprocess.run(
        ["g++", "-dumpfullversion"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    ldd = subprocess.run(
        ["ldd", "--version"], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()[0]
    glibc = re.search(r"(\d+\.\d+)\s*$", ldd).group(1)
    path_dirs = os.environ.get("PATH", "").split(":")
    info = probe_toolchain(World(environ=dict(os.environ), path_dirs=path_dirs), tools=("gcc", "g++"))
    assert info.tool("gcc").version == gcc_ver
    assert info.tool("g++").version == gxx_ver
    assert info.glibc == glibc
    assert info.glibc_source == 'os.confstr("CS_GNU_LIBC_VERSION")'


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf")
def test_probe_toolchain_real_system_libstdcxx() -> None:
    info = probe_toolchain(World(environ={}, path_dirs=[]), tools=())
    system = [s for s in info.libstdcxx if s.origin == "system"]
    if not system:
        pytest.skip("no system libstdc++.so.6")
    lib = system[0]
    real = os.path.realpath(lib.path) if os.path.exists(lib.path) else lib.path
    out = subprocess.run(
        ["readelf", "-V", "-W", real], capture_output=True, text=True, timeout=60
    ).stdout
    verdef = out.split("Version definition section", 1)[1].split("Version needs section", 1)[0]
    names = re.findall(r"Name: (GLIBCXX_[\d.]+)", verdef)
    best = max(names, key=lambda n: tuple(int(p) for p in n.split("_")[1].split(".")))
    assert lib.glibcxx == best.split("_")[1]
