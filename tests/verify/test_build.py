"""Build-toolchain checks (``envlock verify --build``): fake toolkits reached by CUDA_HOME, CUDA_PATH,
PATH and conda; host compilers; torch's C++ ABI; libstdc++; TORCH_CUDA_ARCH_LIST; conda's __cuda.

The toolkits are laid out as NVIDIA's are (``bin/nvcc`` printing the real ``nvcc --version``
format, ``version.json``, ``include/cuda_runtime.h``, ``include/crt/host_config.h`` with nvcc's
real ``#error`` lines); compilers print GCC's real ``--version`` format; the C++ ABI test reads
libraries compiled here by g++ with each ``_GLIBCXX_USE_CXX11_ABI``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.probes.buildenv import find_cuda_home, probe_build
from envlock.probes.buildfiles import (
    DEFAULT_CUDA_HOME_ORDER,
    read_cuda_home_order,
    read_cxx11_abi,
    read_torch_gcc_bounds,
)
from envlock.verify import verify
from envlock.verify.checks.build import BUILD_CHECKS
from envlock.probes.world import World
from tests.verify.conftest import (
    fake_nvidia_smi,
    fake_root,
    gpu_line,
    install_torch,
    site_packages,
    write_exe,
)

NVCC_VERSION = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-{year} NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_{year}
Cuda compilation tools, release {release}, V{full}
Build cuda_{release}.r{release}/compiler.31833905_0
"""

HOST_CONFIG = """\
#if defined(__GNUC__)

#if __GNUC__ > {gcc}

#error -- unsupported GNU version! gcc versions later than {gcc} are not supported! The nvcc flag \
'-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported \
host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.

#endif /* __GNUC__ > {gcc} */

#if defined(__clang__) && !defined(__ibmxl_vrm__) && !defined(__ICC) && !defined(__HORIZON__) && !defined(__APPLE__)

#if (__clang_major__ >= {clang}) || (__clang_major__ < 3) || ((__clang_major__ == 3) &&  (__clang_minor__ < 3))
#error -- unsupported clang version! clang version must be less than {clang} and greater than 3.2 . The nvcc \
flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported \
host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.

#endif
#endif
#endif /* __GNUC__ */
"""

GCC_VERSION = """\
{name} (GCC) {version}
Copyright (C) 2023 Free Software Foundation, Inc.
This is free software; see the source for copying conditions.  There is NO
warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.

"""

#: (nvcc V…, version.json cuda.version, host_config gcc max, clang "less than")
KITS = {
    "11.6": ("11.6.124", "11.6.2", 11, 14),
    "11.8": ("11.8.89", "11.8.0", 11, 15),
    "12.4": ("12.4.131", "12.4.1", 13, 18),
}


def fake_toolkit(d: Path, release: str, *, host_config: bool = True, nvcc_dir: str = "bin") -> Path:
    """A CUDA toolkit directory as NVIDIA's installer lays it out."""
    full, kit, gcc, clang = KITS[release]
    write_exe(d / nvcc_dir / "nvcc", "#!/bin/sh\ncat <<'EOF'\n"
              + NVCC_VERSION.format(year=2022, release=release, full=full) + "EOF\n")
    d.joinpath("version.json").write_text(json.dumps(
        {"cuda": {"name": "CUDA SDK", "version": kit},
         "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": full}}, indent=3))
    (d / "include" / "crt").mkdir(parents=True, exist_ok=True)
    (d / "include" / "cuda_runtime.h").write_text("#pragma once\n")
    if host_config:
        (d / "include" / "crt" / "host_config.h").write_text(HOST_CONFIG.format(gcc=gcc, clang=clang))
    return d


def fake_gcc(bindir: Path, version: str, name: str = "gcc") -> Path:
    text = GCC_VERSION.format(name=name, version=version)
    return write_exe(bindir / name, "#!/bin/sh\ncat <<'EOF'\n" + text + "EOF\n")


@pytest.fixture()
def world(tmp_path, venv, job_env):
    """A venv with a torch whose build says CUDA 11.8, toolkits 11.8 and 12.4, gcc 11.4 and
    g++ 11.4 first on PATH, no NVIDIA driver, TORCH_CUDA_ARCH_LIST set."""
    install_torch(site_packages(venv), "2.5.1+cu118", "11.8")
    kits = {r: fake_toolkit(tmp_path / f"cuda-{r}", r) for r in ("11.8", "12.4", "11.6")}
    bindir = Path(job_env["PATH"].split(":")[0])
    fake_gcc(bindir, "11.4.0")
    fake_gcc(bindir, "11.4.0", "g++")
    env = {**job_env, "CXX": "g++", "TORCH_CUDA_ARCH_LIST": "8.0;8.6+PTX"}
    return {"venv": venv, "kits": kits, "env": env, "bindir": bindir,
            "root": fake_root(tmp_path, None), "tmp": tmp_path}


def load_driver(w, version: str) -> None:
    """The NVIDIA kernel module as ``/proc`` shows it: verify asks nvidia-smi only when it is loaded."""
    d = w["root"] / "proc" / "driver" / "nvidia"
    d.mkdir(parents=True, exist_ok=True)
    (d / "version").write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build\n")


def run_build(w, env=None, **kw):
    return verify(python=str(w["venv"] / "bin" / "python"), environ=env or w["env"], root=str(w["root"]),
                  build=True, timeout=20, **kw)


def ids(report, prefix="build."):
    return [f.id for f in report.findings if f.id.startswith(prefix)]


def the(report, fid):
    found = [f for f in report.findings if f.id == fid]
    assert len(found) == 1, [f.to_json() for f in report.findings]
    return found[0]


# -- the toolkit a build will use, by route ------------------------------------------------------
@pytest.mark.parametrize("route", ["CUDA_HOME", "CUDA_PATH", "PATH"])
def test_toolkit_12_by_each_route_is_named_against_torch_11_8(world, route):
    kit12, kit118 = world["kits"]["12.4"], world["kits"]["11.8"]
    env = dict(world["env"])
    if route == "PATH":
        env["PATH"] = f"{kit12}/bin:{env['PATH']}"
    else:
        env[route] = str(kit12)
        env["PATH"] = f"{kit118}/bin:{env['PATH']}"  # another toolkit on PATH, not used
    r = run_build(world, env)
    f = the(r, "build.cuda-mismatch")
    assert f.severity == "error" and r.exit_code == 1
    assert f"({kit12}, found by {'nvcc on PATH' if route == 'PATH' else route})" in f.title
    assert "CUDA 12.4" in f.title and "torch 2.5.1+cu118 was built with CUDA 11.8" in f.title
    assert "mismatches the version that was used to compile PyTorch (11.8)" in f.cause
    ev = "\n".join(f.evidence)
    assert f"{kit12}/bin/nvcc --version: release 12.4, V12.4.131" in ev
    assert f"{kit12}/version.json: cuda 12.4.1" in ev
    assert "lookup order CUDA_HOME → CUDA_PATH → nvcc on PATH → /usr/local/cuda" in ev
    if route != "PATH":
        assert f"nvcc on PATH is {kit118}/bin/nvcc (not used: {route} comes first)" in ev
    assert any("CUDA_HOME" in fix for fix in f.fix)


@pytest.mark.parametrize("route", ["CUDA_HOME", "CUDA_PATH", "PATH"])
def test_toolkit_11_8_agreeing_with_torch_gives_no_finding_at_all(world, route):
    kit12, kit118 = world["kits"]["12.4"], world["kits"]["11.8"]
    env = dict(world["env"])
    if route == "PATH":
        env["PATH"] = f"{kit118}/bin:{env['PATH']}"
    else:
        env[route] = str(kit118)
        env["PATH"] = f"{kit12}/bin:{env['PATH']}"
    r = run_build(world, env)
    assert [f.to_json() for f in r.findings] == []
    assert [c.name for c in r.checks] == [n for n, _ in BUILD_CHECKS] and r.exit_code == 0


def test_cuda_home_wins_over_cuda_path_and_empty_cuda_home_is_skipped(world):
    kit12, kit118 = world["kits"]["12.4"], world["kits"]["11.8"]
    r = run_build(world, {**world["env"], "CUDA_HOME": str(kit12), "CUDA_PATH": str(kit118)})
    assert "found by CUDA_HOME" in the(r, "build.cuda-mismatch").title
    # torch: os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH') — an empty value is skipped
    r = run_build(world, {**world["env"], "CUDA_HOME": "", "CUDA_PATH": str(kit12)})
    assert "found by CUDA_PATH" in the(r, "build.cuda-mismatch").title


def test_minor_mismatch_is_a_warning_that_says_which_minor(world):
    r = run_build(world, {**world["env"], "CUDA_HOME": str(world["kits"]["11.6"])})
    f = the(r, "build.cuda-minor-mismatch")
    assert f.severity == "warning" and r.exit_code == 0
    assert "is CUDA 11.6; torch 2.5.1+cu118 was built with CUDA 11.8 (same major, other minor)" in f.title
    assert "older toolkit (11.6) than torch's (11.8)" in f.cause


def test_conda_cuda_nvcc_in_the_prefix_is_found_through_path(conda_prefix, world):
    """A conda env with cuda-nvcc 12.4: its nvcc is <prefix>/bin/nvcc, so the CUDA home is the prefix."""
    fake_toolkit(conda_prefix, "12.4")
    (conda_prefix / "conda-meta" / "cuda-nvcc-12.4.131-0.json").write_text(
        json.dumps({"name": "cuda-nvcc", "version": "12.4.131", "build": "0", "depends": []}))
    site = site_packages(conda_prefix)
    install_torch(site, "2.5.1+cu118", "11.8")
    r = verify(prefix=str(conda_prefix), environ=world["env"], root=str(world["root"]), build=True, timeout=20)
    f = the(r, "build.cuda-mismatch")
    assert f"({conda_prefix}, found by nvcc on PATH)" in f.title
    assert "that nvcc is conda's cuda-nvcc=12.4.131=0" in f.evidence


def test_no_toolkit_is_a_finding_only_for_verify_build(world):
    r = run_build(world)  # no CUDA_HOME, no nvcc on PATH, no /usr/local/cuda under the fake root
    f = the(r, "build.no-cuda-home")
    assert "CUDA 11.8" in f.title and "CUDA_HOME environment variable is not set" in f.cause
    plain = verify(python=str(world["venv"] / "bin" / "python"), environ=world["env"], root=str(world["root"]))
    assert not ids(plain)


def test_nvcc_wrapper_outside_the_toolkit_makes_an_incomplete_cuda_home(world):
    """/usr/local/bin/nvcc as a wrapper script: torch takes /usr/local as the CUDA home."""
    kit = world["kits"]["11.8"]
    wrapper_dir = world["tmp"] / "usr-local"
    write_exe(wrapper_dir / "bin" / "nvcc", f'#!/bin/sh\nexec {kit}/bin/nvcc "$@"\n')
    r = run_build(world, {**world["env"], "PATH": f"{wrapper_dir}/bin:{world['env']['PATH']}"})
    f = the(r, "build.cuda-home-incomplete")
    assert f"({wrapper_dir}, found by nvcc on PATH)" in f.title
    assert not [i for i in ids(r) if i.startswith("build.cuda-mismatch")]


def test_default_verify_reports_the_mismatch_as_a_warning(world, tmp_path):
    r = verify(python=str(world["venv"] / "bin" / "python"), root=str(world["root"]), cwd=str(tmp_path),
               environ={**world["env"], "CUDA_HOME": str(world["kits"]["12.4"])})
    assert the(r, "build.cuda-mismatch").severity == "warning" and "build" in [c.name for c in r.checks]
    (tmp_path / "envlock.toml").write_text('[verify]\nseverity = { "build.*" = "error" }\n')
    r = verify(python=str(world["venv"] / "bin" / "python"), root=str(world["root"]), cwd=str(tmp_path),
               environ={**world["env"], "CUDA_HOME": str(world["kits"]["12.4"])})
    assert the(r, "build.cuda-mismatch").severity == "error"


# -- the lookup order, read from torch's cpp_extension.py -----------------------------------------
def test_cuda_home_order_is_read_from_the_targets_cpp_extension(world):
    site = site_packages(world["venv"])
    (site / "torch" / "utils").mkdir(parents=True)
    # A torch 1.x-style function (subprocess `which nvcc`), with CUDA_PATH looked at first.
    (site / "torch" / "utils" / "cpp_extension.py").write_text(
        "import os, subprocess\n\n"
        "def _find_cuda_home():\n"
        "    cuda_home = os.environ.get('CUDA_PATH') or os.environ.get('CUDA_HOME')\n"
        "    if cuda_home is None:\n"
        "        try:\n"
        "            nvcc = subprocess.check_output(['which', 'nvcc']).decode().rstrip('\\r\\n')\n"
        "            cuda_home = os.path.dirname(os.path.dirname(nvcc))\n"
        "        except Exception:\n"
        "            cuda_home = '/usr/local/cuda'\n"
        "            if not os.path.exists(cuda_home):\n"
        "                cuda_home = None\n"
        "    return cuda_home\n\n"
        "def _find_rocm_home():\n"
        "    return os.environ.get('ROCM_HOME')\n")
    kit12, kit118 = world["kits"]["12.4"], world["kits"]["11.8"]
    r = run_build(world, {**world["env"], "CUDA_HOME": str(kit118), "CUDA_PATH": str(kit12)})
    f = the(r, "build.cuda-mismatch")
    assert "found by CUDA_PATH" in f.title
    assert any("lookup order CUDA_PATH → CUDA_HOME → nvcc on PATH → /usr/local/cuda, from "
               f"{site}/torch/utils/cpp_extension.py _find_cuda_home" in e for e in f.evidence)


def test_torch_0_4_order_with_usr_local_cuda_before_which(tmp_path):
    """torch 0.4's _find_cuda_home tried /usr/local/cuda before `which nvcc` (its structure here)."""
    text = ("def _find_cuda_home():\n"
            "    cuda_home = os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')\n"
            "    if cuda_home is None:\n"
            "        if sys.platform == 'win32':\n"
            "            cuda_home = glob.glob('C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v*.*')\n"
            "        else:\n"
            "            cuda_home = '/usr/local/cuda'\n"
            "        if not os.path.exists(cuda_home):\n"
            "            try:\n"
            "                which = 'where' if sys.platform == 'win32' else 'which'\n"
            "                nvcc = subprocess.check_output([which, 'nvcc']).decode()\n"
            "                cuda_home = os.path.dirname(os.path.dirname(nvcc))\n"
            "            except Exception:\n"
            "                cuda_home = None\n"
            "    return cuda_home\n")
    order = read_cuda_home_order(text)
    assert order == ("CUDA_HOME", "CUDA_PATH", "/usr/local/cuda", "nvcc on PATH")
    kit = fake_toolkit(tmp_path / "cuda-11.8", "11.8")
    (tmp_path / "usr" / "local").mkdir(parents=True)
    (tmp_path / "usr" / "local" / "cuda").symlink_to(kit)
    other = fake_toolkit(tmp_path / "cuda-12.4", "12.4")
    assert find_cuda_home(order, {}, [str(other / "bin")], tmp_path)[:2] == ("/usr/local/cuda", "/usr/local/cuda")
    found = find_cuda_home(DEFAULT_CUDA_HOME_ORDER, {}, [str(other / "bin")], tmp_path)
    assert found[:2] == (str(other), "nvcc on PATH")


def test_find_cuda_home_does_not_resolve_symlinks(tmp_path):
    kit = fake_toolkit(tmp_path / "cuda-11.8", "11.8")
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "nvcc").symlink_to(kit / "bin" / "nvcc")
    home, how, nvcc = find_cuda_home(DEFAULT_CUDA_HOME_ORDER, {}, [str(tmp_path / "usr" / "bin")], tmp_path)
    assert (home, how, nvcc) == (str(tmp_path / "usr"), "nvcc on PATH", str(tmp_path / "usr" / "bin" / "nvcc"))


def test_torch_gcc_bounds_are_read_with_their_names_resolved():
    text = ("MINIMUM_GCC_VERSION = (5, 0, 0)\n"
            "CUDA_GCC_VERSIONS: VersionMap = {\n"
            "    '11.0': (MINIMUM_GCC_VERSION, (10, 0)),\n"
            "    '12.4': ((6, 0, 0), (14, 0)),\n"
            "}\n")
    assert read_torch_gcc_bounds(text) == {"11.0": ((5, 0, 0), (10, 0)), "12.4": ((6, 0, 0), (14, 0))}
    assert read_torch_gcc_bounds("nothing here") == {}
    assert read_cuda_home_order("def other():\n    pass\n") is None


# -- host compilers --------------------------------------------------------------------------------
def _kit12_world(world, gcc: str, *, host_config: bool = True, **env):
    kit = fake_toolkit(world["tmp"] / f"cuda-12.4-{gcc}-{host_config}", "12.4", host_config=host_config)
    install_torch(site_packages(world["venv"]), "2.5.1+cu124", "12.4")
    fake_gcc(world["bindir"], gcc)
    return run_build(world, {**world["env"], "CUDA_HOME": str(kit), **env}), kit


def test_gcc_newer_than_the_toolkit_accepts_is_an_error_from_host_config(world):
    r, kit = _kit12_world(world, "14.2.0")
    f = the(r, "build.host-compiler-unsupported")
    assert f.severity == "error"
    assert f.title == "gcc 14.2.0 is newer than CUDA 12.4's nvcc supports"
    assert "gcc versions later than 13 are not supported!" in f.cause
    ev = "\n".join(f.evidence)
    assert f"nvcc host compiler: gcc 14.2.0 ({world['bindir']}/gcc, nvcc's default: gcc on PATH)" in ev
    assert f"{kit}/include/crt/host_config.h: newest gcc major accepted: 13" in ev
    assert "NVIDIA CUDA Installation Guide for Linux, CUDA 12.4: GCC 6–13.2" in ev


def test_without_host_config_nvidias_table_decides(world):
    r, _kit = _kit12_world(world, "14.2.0", host_config=False)
    f = the(r, "build.host-compiler-unsupported")
    assert f.severity == "error" and "later than 13.2" in f.cause


def test_gcc_past_the_documented_minor_but_accepted_by_nvcc_is_a_warning(world):
    r, _kit = _kit12_world(world, "13.3.0")
    f = the(r, "build.host-compiler-unsupported")
    assert f.severity == "warning" and "newer than NVIDIA documents for CUDA 12.4" in f.title


def test_allow_unsupported_compiler_lowers_it_to_a_warning(world):
    r, _kit = _kit12_world(world, "14.2.0", NVCC_APPEND_FLAGS="-allow-unsupported-compiler")
    assert the(r, "build.host-compiler-unsupported").severity == "warning"


def test_cc_is_the_host_compiler_cpp_extension_passes_to_nvcc(world):
    good = fake_gcc(world["tmp"] / "gcc11" / "bin", "11.4.0")
    r, _kit = _kit12_world(world, "14.2.0", CC=str(good))
    assert "build.host-compiler-unsupported" not in ids(r)
    r, _kit = _kit12_world(world, "11.4.0", NVCC_CCBIN=str(fake_gcc(world["tmp"] / "gcc14" / "bin", "14.1.0")))
    f = the(r, "build.host-compiler-unsupported")
    assert "gcc 14.1.0" in f.title and "NVCC_CCBIN" in f.evidence[0]


def test_a_host_compiler_that_does_not_exist_is_named(world):
    r, _kit = _kit12_world(world, "11.4.0", NVCC_CCBIN="clang-99")
    f = the(r, "build.compiler-missing")
    assert f.title == "nvcc's host compiler 'clang-99' (NVCC_CCBIN) is not found"
    assert "Failed to preprocess host compiler properties" in f.cause


def test_cxx_outside_torchs_bounds_is_refused_by_torch(world):
    site = site_packages(world["venv"])
    (site / "torch" / "utils").mkdir(parents=True, exist_ok=True)
    (site / "torch" / "utils" / "cpp_extension.py").write_text(
        "MINIMUM_GCC_VERSION = (5, 0, 0)\nCUDA_GCC_VERSIONS = {\n    '12.4': ((6, 0, 0), (13, 0)),\n}\n")
    fake_gcc(world["bindir"], "13.1.0", "g++")
    r, _kit = _kit12_world(world, "11.4.0")
    f = the(r, "build.compiler-rejected-by-torch")
    assert "refuses g++ 13.1.0 with CUDA 12.4 (its bounds: >=6.0.0, <13.0)" in f.title
    assert "is greater than the maximum required version by CUDA 12.4" in f.cause
    r, _kit = _kit12_world(world, "11.4.0", TORCH_DONT_CHECK_COMPILER_ABI="1")
    assert "build.compiler-rejected-by-torch" not in ids(r)


# -- torch's C++ ABI, read statically ---------------------------------------------------------------
def _compile_c10(lib_dir: Path, abi: int) -> Path:
    src = lib_dir / "c10.cpp"
    lib_dir.mkdir(parents=True, exist_ok=True)
    src.write_text('#include <string>\nnamespace c10 { int check(const std::string& s) { return (int)s.size(); } }\n')
    out = lib_dir / "libc10.so"
    subprocess.run(["g++", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-o", str(out), str(src)],
                   check=True, timeout=120)
    src.unlink()
    return out


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_torch_built_with_the_old_cxx_abi_is_named(world):
    site = site_packages(world["venv"])
    install_torch(site, "2.5.1+cu118", "11.8")
    lib = _compile_c10(site / "torch" / "lib", 0)
    r = run_build(world, {**world["env"], "CUDA_HOME": str(world["kits"]["11.8"])})
    f = the(r, "build.old-cxx-abi")
    assert f.title == "torch 2.5.1+cu118 was built with the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0)"
    assert f"read from {lib} .dynstr:" in f.evidence[0] and "none with __cxx11" in f.evidence[0]
    # (the new-ABI side is the real torch 2.14.1 wheel, tests/verify/test_build_realenv.py)


def test_torchconfig_cmake_abi_flag_wins(tmp_path):
    cfg = tmp_path / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('if(CMAKE_SYSTEM_NAME STREQUAL "Linux")\n'
                   '  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\nendif()\n')
    abi, how = read_cxx11_abi(tmp_path / "torch")
    assert abi is False and how == f"{cfg}: -D_GLIBCXX_USE_CXX11_ABI=0"
    assert read_cxx11_abi(tmp_path / "nothing") == (None, None)


# -- libstdc++ ------------------------------------------------------------------------------------
def test_gcc_newer_than_the_loaded_libstdcxx_is_named(world):
    real = next((Path(d) / "libstdc++.so.6" for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64")
                 if (Path(d) / "libstdc++.so.6").exists()), None)
    if real is None:
        pytest.skip("no system libstdc++.so.6 on this machine")
    sysdir = world["root"] / "usr" / "lib" / "x86_64-linux-gnu"
    sysdir.mkdir(parents=True)
    (sysdir / "libstdc++.so.6").symlink_to(real.resolve())  # the fake root's system libstdc++ is this machine's
    fake_gcc(world["bindir"], "15.1.0", "g++")
    r = run_build(world, {**world["env"], "CUDA_HOME": str(world["kits"]["11.8"])})
    b = probe_build(World(environ=world["env"], site_dirs=[str(site_packages(world["venv"]))], root=world["root"]))
    assert b.libstdcxx == str(real.resolve()) and b.libstdcxx_glibcxx
    f = the(r, "build.libstdcxx-too-old")
    assert "built with gcc 15.1.0 may need GLIBCXX_3.4.34" in f.title
    assert f"has up to GLIBCXX_{b.libstdcxx_glibcxx}" in f.title


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_gcc_glibcxx_table_matches_this_machines_gcc():
    """The oracle: the libstdc++ this gcc links (``-print-file-name``) defines exactly the
    GLIBCXX version the table gives for its release."""
    from envlock.libs.elfread import read_elf
    from envlock.probes.buildfiles import glibcxx_for_gcc

    def gcc(*args: str) -> str:
        return subprocess.run(["gcc", *args], check=True, capture_output=True, text=True, timeout=30).stdout.strip()

    version = gcc("-dumpfullversion")
    so = gcc("-print-file-name=libstdc++.so.6")
    if not Path(so).exists():
        pytest.skip("gcc's libstdc++.so.6 not found")
    names = [n[8:] for n in read_elf(so).defined_versions() if n.startswith("GLIBCXX_") and n[8:9].isdigit()]
    best = max(names, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert glibcxx_for_gcc(version) == best


# -- TORCH_CUDA_ARCH_LIST ---------------------------------------------------------------------------
def test_arch_list_without_a_visible_gpus_capability_and_invalid_entries(world):
    load_driver(world, "550.54.14")
    fake_nvidia_smi(world["bindir"], [gpu_line(0, "NVIDIA A100-SXM4-80GB", "GPU-aaaa", 81920, "8.0", "550.54.14"),
                                      gpu_line(1, "Tesla T4", "GPU-bbbb", 15360, "7.5", "550.54.14")])
    env = {**world["env"], "CUDA_HOME": str(world["kits"]["11.8"]), "TORCH_CUDA_ARCH_LIST": "8.0;8.6+PTX sm_90"}
    r = run_build(world, env)
    f = the(r, "build.arch-list-missing-gpu")
    assert "GPU 1 Tesla T4 (compute capability 7.5)" in f.title
    bad = the(r, "build.arch-list-invalid")
    assert "sm_90" in bad.title and "Unknown CUDA arch (sm_90)" in bad.cause
    r = run_build(world, {**env, "TORCH_CUDA_ARCH_LIST": "Turing;Ampere"})
    assert not [i for i in ids(r) if i.startswith("build.arch")]


def test_arch_list_unset_without_gpu(world):
    env = {k: v for k, v in world["env"].items() if k != "TORCH_CUDA_ARCH_LIST"}
    r = run_build(world, {**env, "CUDA_HOME": str(world["kits"]["11.8"])})
    assert the(r, "build.arch-list-unset").severity == "warning"


# -- conda virtual packages ---------------------------------------------------------------------------
CONDA_LOCK = """\
version: 1
metadata:
  content_hash: {linux-64: 0e5e2f}
  channels: [{url: conda-forge, used_env_vars: []}]
  platforms: [linux-64]
  sources: [environment.yml]
package:
- name: pytorch
  version: 2.5.1
  manager: conda
  platform: linux-64
  dependencies:
    __cuda: '>=12'
    python: '>=3.11,<3.12.0a0'
  url: https://conda.anaconda.org/conda-forge/linux-64/pytorch-2.5.1-cuda126_py311_h1234567_303.conda
  hash:
    md5: 0123456789abcdef0123456789abcdef
  category: main
  optional: false
"""


@pytest.mark.parametrize("override", [None, "12.4"])
def test_lock_needing_cuda_on_a_node_without_driver(world, override):
    lock = world["tmp"] / "conda-lock.yml"
    lock.write_text(CONDA_LOCK)
    env = dict(world["env"])
    if override:
        env["CONDA_OVERRIDE_CUDA"] = override
    r = run_build(world, env, locks=[str(lock)])
    if override is None:
        f = the(r, "build.no-virtual-cuda")
        assert "conda's solver sees no __cuda on this node, but pytorch 2.5.1 in" in f.title
        assert "CONDA_OVERRIDE_CUDA: unset" in f.evidence
        assert any(fix.startswith("To solve here for GPU nodes: CONDA_OVERRIDE_CUDA=12 conda") for fix in f.fix)
        assert "build.cuda-override" not in ids(r)
    else:
        f = the(r, "build.cuda-override")
        assert f.severity == "warning"
        assert f.title == ("CONDA_OVERRIDE_CUDA=12.4 makes conda's solver believe in CUDA 12.4; "
                           "this node has no NVIDIA driver")
        assert "CONDA_OVERRIDE_CUDA=12.4 → __cuda=12.4" in f.evidence
        assert any("depends on __cuda >=12" in e for e in f.evidence)
        assert "build.no-virtual-cuda" not in ids(r)


def test_override_claiming_more_than_the_driver(world, tmp_path):
    root = fake_root(tmp_path / "r", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
    load_driver(world, "535.104.05")
    fake_nvidia_smi(world["bindir"], [gpu_line(0, "NVIDIA A100-SXM4-80GB", "GPU-aaaa", 81920, "8.0", "535.104.05")])
    r = verify(python=str(world["venv"] / "bin" / "python"), root=str(root), build=True,
               environ={**world["env"], "CONDA_OVERRIDE_CUDA": "12.8"})
    f = the(r, "build.cuda-override")
    assert f.title == "CONDA_OVERRIDE_CUDA=12.8 claims more CUDA than driver 535.104.05 supports (12.2)"


@pytest.mark.parametrize("claimed, found", [("2.99", True), ("2.17", False), ("not-a-version", False)])
def test_glibc_override_against_this_nodes_glibc(world, claimed, found):
    """CONDA_OVERRIDE_GLIBC above this machine's glibc (the C library's own answer,
    confstr(_CS_GNU_LIBC_VERSION), is the oracle) is a finding; at or below it, or no version
    at all, is none."""
    import os

    real = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
    r = verify(python=str(world["venv"] / "bin" / "python"), build=True,
               environ={**world["env"], "CONDA_OVERRIDE_GLIBC": claimed})
    assert ("build.glibc-override" in ids(r)) is found
    if found:
        assert the(r, "build.glibc-override").title == (
            f"CONDA_OVERRIDE_GLIBC={claimed} claims a newer glibc than this node's ({real})")


def test_virtual_packages_as_the_solver_sees_them():
    from envlock.probes.virtual import linux_version, probe_virtual

    got = probe_virtual(World(environ={}), driver_cuda="12.4", driver_version="550.54.14", glibc="2.36",
                        release="6.1.0-18-amd64", system="Linux", archspec=lambda: ("x86_64_v3", "test"))
    assert [(p.name, p.version, p.build, p.override) for p in got] == [
        ("__cuda", "12.4", "0", None), ("__glibc", "2.36", "0", None), ("__linux", "6.1.0", "0", None),
        ("__unix", "0", "0", None), ("__archspec", "1", "x86_64_v3", None)]
    got = probe_virtual(World(environ={"CONDA_OVERRIDE_CUDA": "11.8", "CONDA_OVERRIDE_GLIBC": "",
                                       "CONDA_OVERRIDE_LINUX": "", "CONDA_OVERRIDE_ARCHSPEC": "skylake"}),
                        driver_cuda=None, glibc="2.36", release="6.1.0", system="Linux",
                        archspec=lambda: ("x86_64_v3", "test"))
    assert [(p.name, p.version, p.build, p.override) for p in got] == [
        ("__cuda", "11.8", "0", "CONDA_OVERRIDE_CUDA"), ("__linux", "0", "0", "CONDA_OVERRIDE_LINUX"),
        ("__unix", "0", "0", None), ("__archspec", "1", "skylake", "CONDA_OVERRIDE_ARCHSPEC")]
    # an empty CUDA override hides a real driver
    assert not [p for p in probe_virtual(World(environ={"CONDA_OVERRIDE_CUDA": ""}), driver_cuda="12.4", system="Linux",
                                         glibc="2.36", release="6.1", archspec=lambda: (None, "")) if p.name == "__cuda"]
    assert linux_version("5.14.0-362.el9.x86_64") == "5.14.0" and linux_version("x") is None


# -- the manifest ------------------------------------------------------------------------------------
def test_snapshot_records_the_build_table_and_diff_explains_it(world, tmp_path):
    import envlock
    from envlock.manifest import load

    kit12, kit118 = world["kits"]["12.4"], world["kits"]["11.8"]
    paths = []
    for name, kit in (("a", kit118), ("b", kit12)):
        m = envlock.snapshot(python=str(world["venv"] / "bin" / "python"), environ={**world["env"], "CUDA_HOME": str(kit)},
                             command=["envlock", "snapshot"], libraries=False)
        paths.append(m.write(tmp_path / f"{name}.toml", force=True))
    a = load(str(paths[0]))
    assert a.build.cuda_home == str(kit118) and a.build.cuda_home_found_by == "CUDA_HOME"
    assert a.build.nvcc_release == "11.8" and a.build.torch_cuda == "11.8"
    assert a.build.conda_overrides == {}
    from click.testing import CliRunner

    from envlock.cli import cli

    out = CliRunner().invoke(cli, ["diff", str(paths[0]), str(paths[1])], catch_exceptions=False).output
    assert "11.8" in out and "12.4" in out and "nvcc-release" in out
