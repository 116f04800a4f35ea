"""envlock.libs.ldcache against ``ldconfig -p`` (the oracle), on this machine and on caches that
ldconfig writes in each format for a test directory."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.libs.ldcache import flags_text, libcmp, parse_ld_cache, read_ld_cache

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"


def ldconfig_p(cache: str | None = None) -> list[str]:
    argv = [LDCONFIG, "-p"] + (["-C", cache] if cache else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("\t")]


def _strip_hwcap(line: str) -> str:
    return re.sub(r', hwcap: "[^"]*"', ", hwcap", line)


def as_lines(cache) -> list[str]:
    return [f"\t{e.key} ({flags_text(e)}) => {e.path}" for e in cache.entries]


@pytest.mark.skipif(not Path("/etc/ld.so.cache").exists(), reason="no ld.so.cache here")
def test_this_machines_cache_matches_ldconfig_p() -> None:
    cache = read_ld_cache("/")
    assert cache.error is None and cache.format in ("new", "compat")
    assert as_lines(cache) == ldconfig_p()
    libc = cache.lookup("libc.so.6")
    assert libc is not None and libc.path.endswith("/libc.so.6")


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ldc")
    lib = root / "lib"
    for sub in ("", "glibc-hwcaps/x86-64-v2", "glibc-hwcaps/x86-64-v3"):
        d = lib / sub
        d.mkdir(parents=True, exist_ok=True)
        src = d / "a.c"
        src.write_text(f'const char *where(void) {{ return "{sub}"; }}\n')
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "libzz.so.3.1"), str(src),
                        "-Wl,-soname,libzz.so.3"], check=True, timeout=60)
        (d / "libzz.so").symlink_to("libzz.so.3.1")
    for n in (9, 10):
        src = lib / f"n{n}.c"
        src.write_text("int x;\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / f"libnum.so.{n}"), str(src),
                        f"-Wl,-soname,libnum.so.{n}"], check=True, timeout=60)
    return lib


@pytest.mark.parametrize("fmt", ["old", "compat", "new"])
def test_formats_written_by_ldconfig(libdir: Path, tmp_path: Path, fmt: str) -> None:
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{libdir}\n")
    out = tmp_path / f"{fmt}.cache"
    subprocess.run([LDCONFIG, "-X", "-c", fmt, "-C", str(out), "-f", str(conf)],
                   check=True, timeout=60, capture_output=True)
    cache = parse_ld_cache(out.read_bytes(), path=str(out))
    assert cache.error is None
    assert cache.format == fmt
    ours = [line for line in as_lines(cache) if str(libdir) in line]
    theirs = [line for line in ldconfig_p(str(out)) if str(libdir) in line]
    if fmt == "compat":
        # ldconfig 2.36 -p reads the hwcaps names of a compat file from the wrong string
        # base (it prints unrelated strings); compare the keys and paths only there.
        ours, theirs = [_strip_hwcap(x) for x in ours], [_strip_hwcap(x) for x in theirs]
    assert ours == theirs and ours
    if fmt != "old":
        subs = {e.hwcaps_subdir for e in cache.entries if e.key == "libzz.so.3"}
        assert subs == {None, "x86-64-v2", "x86-64-v3"}
        best = cache.lookup("libzz.so.3", hwcaps_active=("x86-64-v3", "x86-64-v2"))
        assert best.path == f"{libdir}/glibc-hwcaps/x86-64-v3/libzz.so.3.1"
        v2 = cache.lookup("libzz.so.3", hwcaps_active=("x86-64-v2",))
        assert v2.path == f"{libdir}/glibc-hwcaps/x86-64-v2/libzz.so.3.1"
    plain = cache.lookup("libzz.so.3", hwcaps_active=())
    if fmt == "old":
        # The old format has no hwcap field: the first entry for the key wins.
        first = next(line for line in theirs if line.startswith("\tlibzz.so.3 "))
        assert first.endswith(f"=> {plain.path}")
    else:
        assert plain.path == f"{libdir}/libzz.so.3"
    assert cache.lookup("libzz.so") is not None  # the dev link gets its own entry
    assert cache.lookup("libnum.so.10").path.endswith("libnum.so.10")


def test_libcmp_orders_numbers_numerically() -> None:
    assert libcmp("libz.so.10", "libz.so.9") > 0
    assert libcmp("libfoo.so.01", "libfoo.so.1") == 0
    assert libcmp("liba.so", "libb.so") < 0


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage", b"glibc-ld.so.cache1.1" + b"\xff" * 8, b"ld.so-1.7.0\0\xff\xff\xff\x00"],
    ids=["empty", "junk", "new-truncated", "old-truncated"],
)
def test_malformed_caches_do_not_raise(data: bytes) -> None:
    cache = parse_ld_cache(data)
    assert cache.error is not None and cache.entries == ()


def test_missing_cache_file(tmp_path: Path) -> None:
    cache = read_ld_cache(tmp_path)
    assert cache.error is not None and "ld.so.cache" in cache.error
