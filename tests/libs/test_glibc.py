"""envlock.libs.glibc: the one glibc detector, against ``ldd --version`` (glibc's own answer)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.libs.glibc import detect_glibc, parse_banner


def _ldd_version() -> str:
    out = subprocess.run(["ldd", "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"(\d+\.\d+)\s*$", out.splitlines()[0])
    assert m, out
    return m.group(1)


def _real_libc() -> Path:
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        p = Path(d) / "libc.so.6"
        if p.exists():
            return p.resolve()
    pytest.skip("no libc.so.6 on this machine")


def test_this_machine_matches_ldd() -> None:
    found = detect_glibc("/")
    assert found is not None
    assert found.version == _ldd_version()
    assert "confstr" in found.source


def test_root_with_only_libc_so_6(tmp_path: Path) -> None:
    """glibc >= 2.34 has no libc-2.X.so: the version comes from libc.so.6's own banner."""
    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copy(_real_libc(), lib / "libc.so.6")
    found = detect_glibc(tmp_path)
    assert found is not None
    assert found.version == _ldd_version()
    assert found.source == "/lib/x86_64-linux-gnu/libc.so.6"


def test_root_with_ld_so_cache(tmp_path: Path) -> None:
    if not Path("/etc/ld.so.cache").exists():
        pytest.skip("no /etc/ld.so.cache")
    (tmp_path / "etc").mkdir()
    shutil.copy("/etc/ld.so.cache", tmp_path / "etc" / "ld.so.cache")
    found = detect_glibc(tmp_path)
    assert found is not None and found.source == "/etc/ld.so.cache"
    assert found.version == _ldd_version()


def test_root_without_glibc(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libc-2.17.so").write_bytes(b"\x7fELF not really")  # a name is not a source
    assert detect_glibc(tmp_path) is None


def test_banner() -> None:
    assert parse_banner(b"\0GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36.\n") == "2.36"
    assert parse_banner(b"nothing here") is None


def test_platform_and_toolchain_use_the_detector(tmp_path: Path) -> None:
    """[platform] and [toolchain] report the same glibc for a root (one producer)."""
    from envlock.probes.system import probe_platform
    from envlock.probes.toolchain import probe_toolchain
    from envlock.probes.world import World

    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copy(_real_libc(), lib / "libc.so.6")
    assert probe_platform(World(root=tmp_path)).glibc == _ldd_version()
    assert probe_toolchain(World(root=tmp_path, environ={"PATH": ""}, path_dirs=())).glibc == _ldd_version()


def test_loader_model_uses_the_detector(tmp_path: Path) -> None:
    """The loader model's glibc (which decides hwcaps and search rules) is the detector's."""
    from envlock.libs.config import detect_config

    want = tuple(int(p) for p in _ldd_version().split("."))
    assert detect_config(root="/", env={}).glibc == want
    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copy(_real_libc(), lib / "libc.so.6")
    assert detect_config(root=str(tmp_path), env={}).glibc == want
