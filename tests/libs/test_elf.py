"""envlock.libs.elf on real gcc-built files, checked against readelf, plus broken files."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from envlock.libs.elf import check_ident, DF_1_NODEFLIB, elf_hash, ElfCache, ElfInfo
from envlock.libs.elfread import read_elf
from envlock.libs.elfsyms import read_symbols

VERSIONED = """
int old_api(void) { return 1; }
int new_api(void) { return 2; }
"""
VERSION_SCRIPT = """
LIBV_1.0 { global: old_api; local: *; };
LIBV_2.0 { global: new_api; } LIBV_1.0;
"""


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", "-W", *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout


@pytest.fixture(scope="session")
def sample(session_build):
    b = session_build
    b.lib("dep/libdep.so.1", soname="libdep.so.1")
    b.lib("libv.so.2", VERSIONED, soname="libv.so.2", version_script=VERSION_SCRIPT)
    user = b.lib(
        "libuser.so",
        "int new_api(void); int old_api(void); int g(void) { return new_api() + old_api(); }",
        soname="libuser.so.7",
        needed=["dep/libdep.so.1", "libv.so.2"],
        rpath="$ORIGIN/dep:/opt/x",
        extra=["-Wl,-z,nodefaultlib"],
    )
    run = b.lib("librun.so", soname="librun.so.1", runpath="$ORIGIN/../lib")
    exe = b.exe("prog", needed=["dep/libdep.so.1"], runpath="$ORIGIN")
    return {"user": user, "v": b.root / "libv.so.2", "run": run, "exe": exe, "root": b.root}


def test_dynamic_facts_match_readelf(sample) -> None:
    info = read_elf(sample["user"])
    dyn = readelf("-d", str(sample["user"]))
    assert info.ok and info.path == str(sample["user"])
    assert info.elfclass == 64 and info.data == "lsb" and info.machine == 62
    assert info.type == "ET_DYN"
    assert info.soname == "libuser.so.7"
    assert list(info.needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", dyn)
    assert info.needed[:2] == ("libdep.so.1", "libv.so.2")
    assert info.rpath == "$ORIGIN/dep:/opt/x" and info.runpath is None
    assert info.effective_rpath == "$ORIGIN/dep:/opt/x"
    assert info.flags_1 & DF_1_NODEFLIB and info.nodeflib
    assert any(c.startswith("GCC:") for c in info.comments)


def test_runpath_and_interp(sample) -> None:
    run = read_elf(sample["run"])
    assert run.runpath == "$ORIGIN/../lib" and run.rpath is None and not run.nodeflib
    exe = read_elf(sample["exe"])
    interp = re.search(r"Requesting program interpreter: (\S+?)\]", readelf("-l", str(sample["exe"])))
    assert exe.interp == interp.group(1)
    assert exe.runpath == "$ORIGIN"


def test_version_sections_match_readelf(sample) -> None:
    v = read_elf(sample["v"])
    assert [(d.name, d.base) for d in v.verdef] == [
        ("libv.so.2", True), ("LIBV_1.0", False), ("LIBV_2.0", False)]
    assert v.verdef[2].parents == ("LIBV_1.0",)
    assert v.defined_versions() == ("LIBV_1.0", "LIBV_2.0")
    assert all(d.hash == elf_hash(d.name) for d in v.verdef)
    user = read_elf(sample["user"])
    by_file = {n.file: n for n in user.verneed}
    assert sorted(x.name for x in by_file["libv.so.2"].versions) == ["LIBV_1.0", "LIBV_2.0"]
    text = readelf("-V", str(sample["user"]))
    for n in user.verneed:
        for ver in n.versions:
            assert re.search(rf"Name: {re.escape(ver.name)}\s+Flags: (none|WEAK)\s+Version: {ver.index}", text)
            assert ver.hash == elf_hash(ver.name)


def test_symbols_are_lazy_and_versioned(sample) -> None:
    syms = read_symbols(sample["v"])
    assert ("new_api", "LIBV_2.0") in syms.defined and ("old_api", "LIBV_1.0") in syms.defined
    user = read_symbols(sample["user"])
    assert ("new_api", "LIBV_2.0", "libv.so.2") in user.undefined


def test_not_elf(tmp_path: Path) -> None:
    script = tmp_path / "libfoo.so"
    script.write_text("/* GNU ld script */\nINPUT(libfoo.so.1)\n")
    info = read_elf(script)
    assert not info.ok and info.error.kind == "not-elf"
    assert info.error.message == "invalid ELF header"


@pytest.mark.parametrize("size", [3, 40, 1000], ids=["in-magic", "in-header", "in-tables"])
def test_truncated(sample, tmp_path: Path, size: int) -> None:
    data = sample["user"].read_bytes()[:size]
    cut = tmp_path / "cut.so"
    cut.write_bytes(data)
    info = read_elf(cut)
    assert not info.ok
    assert info.error.kind == "truncated"


@pytest.mark.parametrize("how", ["shoff-past-end", "shnum-garbage", "no-section-table"])
def test_damaged_section_table_still_loads(sample, tmp_path: Path, how: str) -> None:
    """ld.so never reads section headers: a file whose table is gone still loads, and the
    reader gives the same DT_NEEDED list as the real loader."""
    data = bytearray(sample["user"].read_bytes())
    if how == "shoff-past-end":
        data[0x28:0x30] = (len(data) * 4).to_bytes(8, "little")
    elif how == "shnum-garbage":
        data[0x3C:0x3E] = (0xFFF0).to_bytes(2, "little")
    else:
        shoff = int.from_bytes(data[0x28:0x30], "little")
        data = data[:shoff]
        data[0x28:0x30] = bytes(8)
        data[0x3C:0x40] = bytes(4)
    bad = tmp_path / "bad.so"
    bad.write_bytes(bytes(data))
    info = read_elf(bad)
    assert info.ok and info.load_error is None
    assert info.needed == read_elf(sample["user"]).needed
    env = {"LD_LIBRARY_PATH": f"{sample['root']}:{sample['root']}/dep:/lib/x86_64-linux-gnu"}
    real = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list", str(bad)], capture_output=True,
                          text=True, timeout=30, env=env)
    assert real.returncode == 0, real.stderr
    for name in info.needed:
        assert f"{name} => " in real.stdout


def test_unreadable(tmp_path: Path) -> None:
    info = read_elf(tmp_path / "missing.so")
    assert info.error.kind == "unreadable"


def test_check_ident_mirrors_open_verify(sample) -> None:
    head = sample["user"].read_bytes()[:64]
    assert check_ident(head).status == "ok"
    wrong_class = bytearray(head)
    wrong_class[4] = 1
    assert check_ident(bytes(wrong_class)).message == "wrong ELF class: ELFCLASS32"
    wrong_machine = bytearray(head)
    wrong_machine[18:20] = (183).to_bytes(2, "little")
    assert check_ident(bytes(wrong_machine)).status == "skip"
    assert check_ident(b"INPUT(libc.so.6)\n").message == "file too short"
    assert check_ident(b"/* GNU ld script */ " * 4).message == "invalid ELF header"
    rel = bytearray(head)
    rel[16:18] = (1).to_bytes(2, "little")
    assert check_ident(bytes(rel)).message == "only ET_DYN and ET_EXEC can be loaded"
    assert check_ident(b"\x7fE").message == "file too short"


def test_cache_roundtrip_and_invalidation(sample, tmp_path: Path) -> None:
    """Facts are kept in memory by the file's full signature: a second read is a hit with the
    same facts (under the path asked for); a rewrite, even with the old mtime put back, is
    read again (its ctime changed); a file changed in the last moments is not kept."""
    cache = ElfCache()
    lib = tmp_path / "copy.so"
    lib.write_bytes(sample["user"].read_bytes())
    assert read_elf(lib, cache=cache) == read_elf(lib, cache=cache)
    assert cache.hits == 0 and cache.misses == 2  # just written: its signature cannot vouch yet
    time.sleep(0.03)
    first = read_elf(lib, cache=cache)
    second = read_elf(lib, cache=cache)
    assert cache.hits == 1 and second == first and isinstance(second, ElfInfo)
    alias = tmp_path / "alias.so"
    alias.symlink_to(lib)
    via_alias = read_elf(alias, cache=cache)
    assert cache.hits == 2 and via_alias.path == str(alias) and via_alias.soname == first.soname
    # Rewritten in place with the same mtime: the ctime still differs, the old facts are not used.
    st = lib.stat()
    lib.write_bytes(sample["v"].read_bytes())
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = read_elf(lib, cache=cache)
    assert third.soname == "libv.so.2" and third == read_elf(lib)


def test_cache_writes_nothing_to_disk(sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = ElfCache()
    read_elf(sample["run"], cache=cache)
    again = read_elf(sample["run"], cache=cache)
    assert again.runpath == "$ORIGIN/../lib"
    assert not list(tmp_path.rglob("*"))


def _cut_points(data: bytes) -> set[int]:
    """Every length up to 512, and around each boundary the loader reads across: the ELF
    header, each program header, each segment's file bytes, the dynamic section and each of
    its entries, the section headers."""
    import struct

    points = set(range(0, 513))
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    _fl, _eh, phentsize, phnum, shentsize, shnum = struct.unpack_from("<IHHHHH", data, 48)
    edges = [phoff + k * phentsize for k in range(phnum + 1)] + [shoff + k * shentsize for k in range(shnum + 1)]
    for k in range(phnum):
        p_type, _f, p_offset, _va, _pa, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        edges += [p_offset, p_offset + p_filesz]
        if p_type == 2:  # PT_DYNAMIC: each Elf64_Dyn entry
            edges += range(p_offset, p_offset + p_filesz + 1, 16)
    for e in edges:
        points.update(range(e - 2, e + 3))
    return {p for p in points if 0 <= p < len(data)}


@pytest.mark.parametrize("which", ["user", "exe"])
def test_every_truncation_is_an_elf_result_never_an_exception(sample, tmp_path: Path, which: str) -> None:
    """A real gcc-built file cut at every length up to 512 bytes and at every header, segment
    and dynamic-entry boundary: ``read_elf`` and ``read_symbols`` return (no IndexError or
    struct.error, the 4- and 5-byte ``\\x7fELF`` files of issue 29 included), with a documented
    error kind; any cut inside the ELF header is ``truncated``."""
    from envlock.libs.elfsyms import read_symbols

    data = sample[which].read_bytes()
    assert read_elf(sample[which]).ok
    cut = tmp_path / "cut.so"
    points = sorted(_cut_points(data))
    assert len(points) > 600
    for n in points:
        cut.write_bytes(data[:n])
        info = read_elf(cut)  # an exception here fails the test
        kind = info.error.kind if info.error is not None else None
        assert kind in (None, "not-elf", "truncated", "corrupt"), (n, info.error)
        if 1 <= n < 64:
            assert kind == "truncated" and info.error.message == "file too short", (n, info.error)
        if n == 0:
            assert kind == "not-elf"
        syms = read_symbols(cut, info=info)
        assert syms.error is not None or info.ok, n
        read_symbols(cut)  # also without the facts read first
