"""The fixes of verify's package findings and of the loader's library findings run as printed
(issue 25): the fix's command runs in bash in the job's world (a real venv with local wheels,
gcc-built libraries, the job's environment), the command that printed it runs again in the
same shell, and the finding is gone with no new one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._wheels import make_wheel
from tests.libs.conftest import Builder, real_ldd

from .conftest import PY, World
from .test_verify_fixes_run import _command, _ids, _one, _verify


def test_build_glibc_override_fix_runs(world: World) -> None:
    """CONDA_OVERRIDE_GLIBC claiming a glibc no node has: its `unset` in the job's shell."""
    venv = world.venv("env")
    env = {"CONDA_OVERRIDE_GLIBC": "99.0"}
    before = _verify(world, venv, extra=env)
    f = _one(before, "build.glibc-override")
    cmd = _command(f["fix"][0])
    assert cmd == "unset CONDA_OVERRIDE_GLIBC"
    after = _verify(world, venv, cmd, extra=env)
    assert "build.glibc-override" not in _ids(after) and _ids(after) <= _ids(before)


def test_packages_missing_fix_runs(world: World) -> None:
    """Packages the manifest records, uninstalled since: one install command for all of
    them, into the verified environment, at the recorded versions; a CPU build of torch gets
    a command of its own, with PyTorch's index for it (not reached here: the house has it)."""
    for name, v in (("numpy", "1.26.4"), ("mylab-tools", "0.2"), ("scipy", "1.11.4"),
                    ("torch", "2.1.0+cpu")):
        world.wheel(name, v)
    venv = world.venv("env", ["numpy==1.26.4", "mylab-tools==0.2", "scipy==1.11.4",
                              "torch==2.1.0+cpu"])
    manifest = world.snapshot(venv, world.root / "m.toml")
    world.sh("pip uninstall -q -y numpy mylab-tools torch", venv)
    before = _verify(world, venv, args=f"--manifest {manifest}")
    f = _one(before, "packages.missing")
    cmd = _command(f["fix"][0])
    first, second = cmd.split(" && ")
    assert first.endswith("'mylab-tools==0.2' 'numpy==1.26.4'") and str(venv) in first
    assert second.endswith("'torch==2.1.0+cpu' --index-url https://download.pytorch.org/whl/cpu")
    after = _verify(world, venv, cmd, args=f"--manifest {manifest}")
    assert "packages.missing" not in _ids(after) and _ids(after) <= _ids(before)


#: (how the dist-info is broken, what leaves it so)
BROKEN = [("no-metadata", "an install killed before METADATA was written"),
          ("no-version", "METADATA cut short before its Version"),
          ("dangling-link", "a dist-info linked from a store that was cleaned")]


def _venv_with_pip(world: World, name: str, packages: list[str]) -> Path:
    """A venv as ``python -m venv`` makes it (its own pip, from ensurepip) with ``packages``
    from the wheel house."""
    path = world.root / name
    subprocess.run([str(PY), "-m", "venv", str(path)], check=True, timeout=300)
    world.sh(f"pip install -q {' '.join(packages)}", path)
    return path


@pytest.mark.parametrize("installer", ["uv", "pip"])
@pytest.mark.parametrize(("broken", "why"), BROKEN, ids=[b[0] for b in BROKEN])
def test_packages_metadata_error_fix_runs(world: World, broken: str, why: str,
                                          installer: str) -> None:
    """A broken dist-info (``why``): the reinstall of that version over it, its dependencies
    left alone, by the venv's own pip or, in a venv without pip (uv's), by uv."""
    world.wheel("mylab-tools", "0.2")
    venv = (world.venv("env", ["mylab-tools==0.2"]) if installer == "uv"
            else _venv_with_pip(world, "env", ["mylab-tools==0.2"]))
    (meta,) = venv.glob("lib/python*/site-packages/mylab_tools-0.2.dist-info/METADATA")
    if broken == "no-metadata":
        meta.unlink()
    elif broken == "no-version":
        meta.write_text("Metadata-Version: 2.1\nName: mylab-tools\n")
    else:
        store = world.root / "store" / meta.parent.name
        meta.parent.rename(store.parent.mkdir() or store)
        meta.parent.symlink_to(store)
        shutil.rmtree(store)
    before = _verify(world, venv)
    f = _one(before, "packages.metadata-error")
    cmd = _command(f["fix"][0])
    assert "'mylab-tools==0.2'" in cmd and str(venv) in cmd
    assert cmd.split(" && ")[-1].startswith("uv pip" if installer == "uv" else f"{venv}/bin/python -m pip")
    after = _verify(world, venv, f"{{ {cmd}; }} >&2")  # pip's progress kept off verify's JSON
    assert "packages.metadata-error" not in _ids(after) and _ids(after) <= _ids(before)
    assert meta.read_text().count("Version: 0.2") == 1
    assert subprocess.run([str(venv / "bin/python"), "-c", "import mylab_tools"],
                          timeout=60).returncode == 0


#: (case, installed, recorded): PyTorch's index builds both ways, and PyPI's build (no label,
#: the CUDA build on Linux) recorded where a CPU build is installed
BUILDS = [("to-cpu", "2.1.0+cu121", "2.1.0+cpu"), ("to-cu121", "2.1.0+cpu", "2.1.0+cu121"),
          ("to-pypi", "2.1.0+cpu", "2.1.0")]


@pytest.mark.parametrize(("case", "installed", "recorded"), BUILDS, ids=[b[0] for b in BUILDS])
def test_packages_build_mismatch_fix_runs(world: World, case: str, installed: str,
                                          recorded: str) -> None:
    """Same release, another build of torch: the fix installs the recorded build (offline,
    the PyTorch index it names is not reached: the wheel house holds the builds)."""
    world.wheel("torch", recorded)
    venv = world.venv("env", [f"torch=={recorded}"])
    manifest = world.snapshot(venv, world.root / "m.toml")
    world.wheel("torch", installed)  # both builds in the house from here on
    world.sh(f"pip install -q 'torch=={installed}'", venv)
    before = _verify(world, venv, args=f"--manifest {manifest}")
    f = _one(before, "packages.build-mismatch")
    cmd = _command(f["fix"][0])
    assert f"'torch=={recorded}'" in cmd or f"'torch==={recorded}'" in cmd, cmd
    after = _verify(world, venv, cmd, args=f"--manifest {manifest}")
    assert "packages.build-mismatch" not in _ids(after), cmd
    # a CUDA build put back on a node with no driver is warned of, as it was when recorded
    new = _ids(after) - _ids(before)
    assert new <= ({"gpu.no-driver"} if "+cu" in recorded else set()), (cmd, new)


def _libs(world: World, venv: Path, target: str, fix: str = ":") -> list[dict]:
    """``envlock libs TARGET``'s findings (JSON) for the venv's interpreter, after ``fix``."""
    res = world.sh(fix, venv, then=f"{PY} -m envlock libs {target} --python {venv}/bin/python "
                   "--format json --no-cache || true")
    return json.loads(res.stdout)["findings"]


#: (name, which of the fix's lines)
WAYS = [("ln", 0), ("ldconfig", 1)]


@pytest.mark.parametrize(("name", "way"), WAYS, ids=[w[0] for w in WAYS])
def test_libs_missing_soname_symlink_fix_runs(world: World, name: str, way: int) -> None:
    """A library unpacked without its SONAME link (``libs9.so.1`` → ``libs9.so.1.2``): either
    printed way makes the name the loader asks for, and the real loader then finds it."""
    build = Builder(world.root / "lib")
    build.lib("s/libs9.so.1.2", soname="libs9.so.1")
    (world.root / "lib/s/libs9.so.1").symlink_to("libs9.so.1.2")
    top = build.lib("libtop.so", "int f(void); int g(void) { return f(); }",
                    needed=["s/libs9.so.1"], rpath="$ORIGIN/s")
    (world.root / "lib/s/libs9.so.1").unlink()
    venv = world.venv("env")
    assert real_ldd(top).paths["libs9.so.1"] is None
    before = _libs(world, venv, str(top))
    f = _one(before, "missing-soname-symlink")
    cmd = f["fix"][way].removeprefix("or run: ")
    after = _libs(world, venv, str(top), cmd)
    assert "missing-soname-symlink" not in _ids(after) and _ids(after) <= _ids(before), cmd
    assert real_ldd(top).paths["libs9.so.1"] == str(world.root / "lib/s/libs9.so.1")


def _cudart_wheel(world: World, build: Builder, version: str) -> None:
    """``nvidia-cuda-runtime`` ``version`` as NVIDIA lays it out: ``nvidia/cuda_runtime/lib/
    libcudart.so.13`` (gcc-built, its SONAME the file's name)."""
    lib = build.lib(f"cudart-{version}/libcudart.so.13", "int cudaRuntimeGetVersion(int *v) "
                    "{ *v = 13000; return 0; }", soname="libcudart.so.13")
    make_wheel(world.wheels, "nvidia-cuda-runtime", version, modules={
        "nvidia/__init__.py": "", "nvidia/cuda_runtime/__init__.py": "",
        "nvidia/cuda_runtime/lib/libcudart.so.13": lib.read_bytes()})


def test_libs_cuda_pin_mismatch_fix_runs(world: World) -> None:
    """torch pins the CUDA runtime wheel it was built with (``Requires-Dist:
    nvidia-cuda-runtime==13.0.96``) and another one is installed: the fix installs the pinned
    one into the environment analysed, and torch's global deps then load that copy."""
    build = Builder(world.root / "build")
    for v in ("13.0.48", "13.0.96"):
        _cudart_wheel(world, build, v)
    build.lib("stub/libcudart.so.13", soname="libcudart.so.13")  # to link against
    deps = build.lib("torch-lib/libtorch_global_deps.so", "int g(void) { return 0; }",
                     needed=["stub/libcudart.so.13"], rpath="$ORIGIN/../../nvidia/cuda_runtime/lib")
    make_wheel(world.wheels, "torch", "2.14.1", [
        'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"'], modules={
        "torch/__init__.py": "", "torch/version.py": "__version__ = '2.14.1'\ncuda = '13.0'\n",
        "torch/lib/libtorch_global_deps.so": deps.read_bytes()})
    venv = world.venv("env", ["torch==2.14.1"])
    world.sh("pip install -q --no-deps 'nvidia-cuda-runtime==13.0.48'", venv)
    before = _libs(world, venv, "torch")
    f = _one(before, "cuda-pin-mismatch")
    cmd = _command(f["fix"][0])
    assert cmd.endswith("'nvidia-cuda-runtime==13.0.96'") and str(venv) in cmd, cmd
    after = _libs(world, venv, "torch", cmd)
    assert "cuda-pin-mismatch" not in _ids(after) and _ids(after) <= _ids(before), cmd
    (meta,) = venv.glob("lib/python*/site-packages/nvidia_cuda_runtime-13.0.96.dist-info")
    assert meta.is_dir()


def test_libs_soname_link_of_an_earlier_copy_fix_runs(world: World) -> None:
    """The warning kind: a copy without its link sits in a directory searched first, so the
    loader takes a later one.  The fix is a choice ("if that copy is the one meant"); run, it
    makes the loader take the earlier copy, as the real loader then does."""
    build = Builder(world.root / "lib")
    build.lib("a/librn.so.1.0", soname="librn.so.1")
    build.lib("b/librn.so.1", soname="librn.so.1")
    top = build.lib("libtop.so", "int f(void); int g(void) { return f(); }",
                    needed=["b/librn.so.1"], rpath="$ORIGIN/a:$ORIGIN/b")
    venv = world.venv("env")
    assert real_ldd(top).paths["librn.so.1"] == str(world.root / "lib/b/librn.so.1")
    before = _libs(world, venv, str(top))
    f = _one(before, "missing-soname-symlink")
    assert f["severity"] == "warning" and "(if that copy is the one meant)" in f["fix"][0]
    cmd = _command(f["fix"][0])
    after = _libs(world, venv, str(top), cmd)
    assert "missing-soname-symlink" not in _ids(after) and _ids(after) <= _ids(before), cmd
    assert real_ldd(top).paths["librn.so.1"] == str(world.root / "lib/a/librn.so.1")


def test_conda_fix_specs_pick_the_recorded_builds(tmp_path: Path) -> None:
    """The conda forms of packages.build-mismatch and packages.missing (``conda install
    'numpy=1.26.4=py311_mkl_0'``; no conda here to run them): their specs, solved by
    py-rattler (``envlock lock``) against a local channel holding both builds, pick exactly
    the builds the manifest records."""
    import shlex

    from click.testing import CliRunner
    from conda_lock.lockfile import parse_conda_lock_file

    from envlock.cli import cli
    from envlock.verify.checks.versions import compare
    from tests.lock.conftest import make_conda_package

    ch = tmp_path / "channel"
    for build in ("py311_cpu_0", "py311_mkl_0"):
        make_conda_package(ch, "linux-64", "numpy", "1.26.4", build)
    for version in ("1.0", "2.0"):
        make_conda_package(ch, "linux-64", "liba", version, "h0_0")
    make_conda_package(ch, "noarch", "docs-theme", "2.1", "0", noarch="generic")  # a noarch/
    found = compare({"numpy": ("1.26.4", "py311_mkl_0", None), "liba": ("1.0", "h0_0", None)},
                    {"numpy": ("1.26.4", "py311_cpu_0", None)}, source="the manifest (m.toml)",
                    kind="conda", extras=False)
    fixes = {f.id: _command(f.fix[0]) for f in found}
    assert fixes["packages.build-mismatch"] == "conda install 'numpy=1.26.4=py311_mkl_0'"
    assert fixes["packages.missing"] == "conda install 'liba=1.0'"
    specs = [s for cmd in fixes.values() for s in shlex.split(cmd)[2:]]
    env = tmp_path / "environment.yml"
    env.write_text(f"channels:\n  - {ch.as_uri()}\n  - nodefaults\ndependencies:\n"
                   + "".join(f"  - {s}\n" for s in specs))
    res = CliRunner().invoke(cli, ["lock", "-f", str(env), "-p", "linux-64", "-o",
                                   str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    got = {(p.name, p.version, p.build) for p in
           parse_conda_lock_file(tmp_path / "out" / "conda-lock.yml").package}
    assert got == {("numpy", "1.26.4", "py311_mkl_0"), ("liba", "1.0", "h0_0")}
