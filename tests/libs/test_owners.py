"""Owners of files (pip RECORD, conda-meta, dpkg lists) and version expectations (pins)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.libs.analysis import analyze_module
from envlock.libs.owners import normalize_name, OwnerIndex
from envlock.libs.pins import conda_pins, Pin, read_pins

from .conftest import Builder
from .test_cases import EXT, make_dist


def test_pip_record_owner_through_dotdot_and_symlink(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "nvidia/cu13/lib").mkdir(parents=True)
    (site / "nvidia/cu13/lib/libcublas.so.13").write_bytes(b"\x7fELF")
    (site / "torch/lib").mkdir(parents=True)
    (site / "torch/lib/libalias.so").symlink_to(site / "nvidia/cu13/lib/libcublas.so.13")
    make_dist(site, "nvidia-cublas", "13.1.1.3", ["nvidia/cu13/lib/libcublas.so.13"])
    index = OwnerIndex([str(site)], cache_dir=str(tmp_path / "cache"))
    via_dotdot = index.owner(f"{site}/torch/lib/../../nvidia/cu13/lib/libcublas.so.13")
    assert via_dotdot is not None and via_dotdot.label() == "nvidia-cublas 13.1.1.3 (pip)"
    assert index.owner(f"{site}/torch/lib/libalias.so") == via_dotdot
    assert index.owner(f"{site}/torch/lib/other.so") is None
    # A second index reads the cached RECORD index and agrees.
    again = OwnerIndex([str(site)], cache_dir=str(tmp_path / "cache"))
    assert again.owner(f"{site}/nvidia/cu13/lib/libcublas.so.13") == via_dotdot
    assert list((tmp_path / "cache").glob("pip-*.json"))


def test_dpkg_owner_with_merged_usr(tmp_path: Path) -> None:
    info = tmp_path / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "libfoo1:amd64.list").write_text("/.\n/usr\n/usr/lib/x86_64-linux-gnu/libfoo.so.1.2\n"
                                             "/usr/lib/x86_64-linux-gnu/libfoo.so.1\n")
    index = OwnerIndex([], root=str(tmp_path))
    owner = index.owner("/lib/x86_64-linux-gnu/libfoo.so.1")
    assert owner is not None and (owner.kind, owner.name, owner.version) == ("dpkg", "libfoo1:amd64", None)
    assert index.owner("/lib/x86_64-linux-gnu/libbar.so.1") is None


def test_read_pins_follows_extras(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_dist(site, "torch", "2.14.1", [], requires=[
        "filelock",
        'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
        'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
        'nvidia-cufft==12.0.0.61; platform_system == "Windows"',
        'pyyaml==6.0; extra == "pyyaml"',
    ])
    make_dist(site, "cuda-toolkit", "13.0.3", [], requires=[
        "nvidia-cublas==13.1.1.3.*; sys_platform == 'linux' and extra == 'cublas'",
        "nvidia-cuda-runtime==13.0.96.*; sys_platform == 'linux' and extra == 'cudart'",
        "nvidia-cufft==12.0.0.61.*; sys_platform == 'linux' and extra == 'cufft'",
    ])
    pins = read_pins(OwnerIndex([str(site)]), "torch")
    assert [(p.name, p.specifier) for p in pins] == [
        ("cuda-toolkit", "==13.0.3"),
        ("nvidia-cublas", "==13.1.1.3.*"),
        ("nvidia-cuda-runtime", "==13.0.96.*"),
        ("nvidia-cudnn-cu13", "==9.24.0.43"),
    ]
    assert pins[1].requirer == "torch via cuda-toolkit[cublas,cudart]"
    assert normalize_name("Nvidia_CUDNN.cu13") == "nvidia-cudnn-cu13"


def test_conda_depends_and_pin_mismatch(build: Builder) -> None:
    env = build.root / "env"
    site = env / "lib/python3.11/site-packages"
    build.lib("env/lib/libcudnn.so.8", soname="libcudnn.so.8")
    build.lib(f"env/lib/python3.11/site-packages/torch/_C.{EXT}", needed=["env/lib/libcudnn.so.8"],
              rpath="$ORIGIN/../../..")
    (site / "torch/__init__.py").write_text("")
    meta = env / "conda-meta"
    meta.mkdir()
    (meta / "cudnn-8.2.1-cuda11.3_0.json").write_text(json.dumps(
        {"name": "cudnn", "version": "8.2.1", "build": "cuda11.3_0", "files": ["lib/libcudnn.so.8"]}))
    (meta / "pytorch-1.12.1-py3.11_cuda11.3_cudnn8.3.2_0.json").write_text(json.dumps(
        {"name": "pytorch", "version": "1.12.1", "build": "py3.11_cuda11.3_cudnn8.3.2_0",
         "depends": ["cudnn >=8.3.2,<9.0a0", "mkl 2021.*", "python >=3.11,<3.12.0a0 *_cpython",
                     "blas * mkl", "libgcc-ng >=7.5.0|libgcc >=7"],
         "files": [f"lib/python3.11/site-packages/torch/_C.{EXT}"]}))
    pins = conda_pins(OwnerIndex([str(site)], prefix=str(env)), "pytorch")
    assert Pin(requirer="pytorch 1.12.1 (conda)", name="cudnn", specifier=">=8.3.2,<9.0a0",
               kind="conda") in pins
    assert any(p.name == "mkl" and p.specifier == "==2021.*" for p in pins)
    assert not any(p.name == "libgcc-ng" for p in pins)
    report = analyze_module(sys.executable, "torch", sys_path=[str(site)], prefix=str(env), env={})
    f = next(f for f in report.findings if f.id == "cuda-pin-mismatch")
    assert f.library == "libcudnn.so.8"
    assert "comes from cudnn 8.2.1" in f.title and ">=8.3.2,<9.0a0" in f.title
    assert f.fix == ("conda install 'cudnn>=8.3.2,<9.0a0'",)
    obj = next(o for o in report.objects if o.soname == "libcudnn.so.8")
    assert (obj.owner_kind, obj.owner_name, obj.owner_version) == ("conda", "cudnn", "8.2.1")


@pytest.mark.skipif(shutil.which("dpkg-query") is None or not os.path.isdir("/var/lib/dpkg/info"),
                    reason="not a dpkg system")
def test_dpkg_owner_reads_only_the_lists_it_needs() -> None:
    """Owners of the C and C++ runtimes agree with ``dpkg-query -S``, found without reading
    every ``*.list`` file; a file outside dpkg's directories costs nothing."""
    from envlock.libs.owners import OwnerIndex

    idx = OwnerIndex([], prefix=None, root="/", cache_dir=None)
    wanted = [p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6",
                          "/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib64/ld-linux-x86-64.so.2")
              if os.path.exists(p)]
    assert idx.owner("/root/no/such/lib.so") is None
    for p in wanted:
        pkg = None
        for q in (p, os.path.realpath(p)):
            real = subprocess.run(["dpkg-query", "-S", q], capture_output=True, text=True, timeout=60)
            if real.returncode == 0:
                pkg = real.stdout.split(":")[0]
                break
        got = idx.owner(p)
        assert got is not None and got.name.split(":")[0] == pkg, p
    total = len([n for n in os.listdir("/var/lib/dpkg/info") if n.endswith(".list")])
    assert total - len(idx._dpkg_todo_set or ()) <= 2 * len(wanted) + 2


@pytest.mark.parametrize("marker", [
    'platform_system == "Linux"',
    'sys_platform == "win32" or platform_machine == "x86_64"',
    "(sys_platform == 'linux' and platform_machine == 'aarch64' or sys_platform == 'linux' and "
    "platform_machine == 'x86_64' or sys_platform == 'win32') and extra == 'all'",
    'platform_system == "Linux" and python_version < "3.15"',
    'python_full_version >= "3.11.0" and extra != "Cublas"',
    'extra == "CUDA_Toolkit"',
])
def test_simple_markers_agree_with_packaging(marker: str) -> None:
    """The fast marker evaluation (no packaging import) gives packaging's answer."""
    from packaging.markers import Marker

    from envlock.libs.pins import _marker_value

    for extra in ("", "all", "cublas", "cuda-toolkit"):
        assert _marker_value(marker, extra) == Marker(marker).evaluate({"extra": extra}), extra


def test_installed_markers_agree_with_packaging() -> None:
    """Every Requires-Dist marker installed here (and in the CUDA test venv, when it exists),
    for every extra those markers name and one they do not, as packaging evaluates it."""
    import glob
    import sysconfig

    from packaging.markers import Marker

    from envlock.libs.pins import _marker_value

    from _realenv import venv_dir

    sites = [sysconfig.get_paths()["purelib"],
             *glob.glob(os.path.join(glob.escape(str(venv_dir("cuda"))), "lib/python3*/site-packages"))]
    markers: set[str] = set()
    for site in sites:
        for meta in glob.glob(os.path.join(glob.escape(site), "*.dist-info", "METADATA")):
            with open(meta, encoding="utf-8", errors="replace") as f:
                head = f.read().split("\n\n", 1)[0]
            markers.update(line.split(";", 1)[1].strip() for line in head.splitlines()
                           if line.lower().startswith("requires-dist:") and ";" in line)
    extras = {"", "no-such-extra"} | {m for marker in markers
                                      for m in re.findall(r"extra\s*==\s*['\"]([^'\"]+)", marker)}
    checked = 0
    for marker in sorted(markers):
        for extra in sorted(extras):
            got = _marker_value(marker, extra)
            if got is not None:
                assert got == Marker(marker).evaluate({"extra": extra}), (marker, extra)
                checked += 1
    assert checked > 20


def test_other_markers_are_left_to_packaging() -> None:
    from envlock.libs.pins import _marker_value

    assert _marker_value('implementation_name == "cpython"', "") is None
    assert _marker_value('python_version < "3.15a1"', "") is None
    assert _marker_value('platform_system == "Linux" and', "") is None


def test_so_lines_are_the_lines_text_mode_and_splitlines_give(tmp_path: Path) -> None:
    """The ``.so`` lines of a RECORD or dpkg list are exactly those of reading it as text
    (UTF-8, errors replaced, universal newlines) and ``splitlines``, whatever its bytes."""
    import glob
    import sysconfig

    from envlock.libs.owners import _so_lines

    samples = [b"", b".so", b"a.so\n", b"x\nlib/a.so,sha256=x,1\nb.py,,\nc.so.1", b"a.so\r\nb.so\rc.so\r",
               b"p\x0cq.so\x0br.so\x1cs\x1d.so\x1e", "caf\u00e9/a.so\nb.so\u2028c.so\x85d".encode(),
               b"bad \xff\xfe.so\nok.so", b"\n\n.so\n\n", b"no shared objects\nat all\n",
               b"a.s\no.so", "\u00e9.so\r\n".encode() * 3, b"a.so,x,1\r\nb.py,y,2\r\nc.so\r\n",
               b"a.so\r\nb.so", b"a.so\r\nb.so\rc.so\n", b"x.so\r", b".so\r\n\r\n.so"]
    files = []
    for i, data in enumerate(samples):
        f = tmp_path / f"s{i}"
        f.write_bytes(data)
        files.append(str(f))
    files += glob.glob(os.path.join(glob.escape(sysconfig.get_paths()["purelib"]), "*.dist-info", "RECORD"))[:40]
    files += sorted(glob.glob("/var/lib/dpkg/info/*.list"))[:40]
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            want = [line for line in fh.read().splitlines() if ".so" in line]
        assert _so_lines(f) == want, f


def test_one_owner_model_for_libs_and_the_manifest(build: Builder) -> None:
    """A conda-installed extension module (its dist-info listed in the conda record's
    ``files``) is conda's in ``libs`` as in the manifest; one pip installed over conda's is pip's."""
    from envlock.probes.condameta import read_conda_prefix

    prefix = build.root / "env"
    site = "lib/python3.11/site-packages"
    so = build.lib(f"env/{site}/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so", soname=None)
    mine = build.lib(f"env/{site}/mine/_m.cpython-311-x86_64-linux-gnu.so", soname=None)
    for name, version, rel, installer in (("mpi4py", "3.1.5", "mpi4py/MPI.cpython-311-x86_64-linux-gnu.so", "conda"),
                                          ("mine", "1.0", "mine/_m.cpython-311-x86_64-linux-gnu.so", "pip")):
        dist = prefix / site / f"{name}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "INSTALLER").write_text(installer + "\n")
        (dist / "RECORD").write_text(f"{rel},,\n{dist.name}/RECORD,,\n")
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta/mpi4py-3.1.5-py311h0_0.json").write_text(json.dumps({
        "name": "mpi4py", "version": "3.1.5", "build": "py311h0_0", "files": [
            f"{site}/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so", f"{site}/mpi4py-3.1.5.dist-info/METADATA",
            f"{site}/mpi4py-3.1.5.dist-info/RECORD", f"{site}/mpi4py-3.1.5.dist-info/INSTALLER"]}))
    index = OwnerIndex([str(prefix / site)], prefix=str(prefix), root="/")
    assert index.owner(str(so)).label() == "mpi4py 3.1.5 (conda)"
    assert index.owner(str(mine)).label() == "mine 1.0 (pip)"
    manifest = read_conda_prefix(prefix)
    assert manifest is not None
    assert manifest.dist_owner == {str(prefix / site / "mpi4py-3.1.5.dist-info"): "mpi4py"}
    report = analyze_module(sys.executable, str(so), sys_path=[str(prefix / site)], prefix=str(prefix), env={},
                            runtime=False)
    assert [o.owner for o in report.objects if o.path == str(so)] == ["mpi4py 3.1.5 (conda)"]
