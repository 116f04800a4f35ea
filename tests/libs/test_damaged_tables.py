"""Damaged version and string tables that glibc reads lazily, or only in part (issue 22, item 8).

Each case is a gcc-built library with one field patched, as the mutants of ``test_fuzz.py``
had them, and the real loader (``ld.so --list``) as the oracle.  Sources: glibc 2.36
``elf/dl-version.c`` ``_dl_check_map_versions`` (only the first ``Elf_Verneed``'s
``vn_version`` is checked; of a non-base ``Elf_Verdef`` only the first ``vda_name`` is kept,
as a pointer), ``elf/dl-load.c`` (``DT_SONAME``/``DT_RPATH``/``DT_RUNPATH`` kept as pointers
into the string table, read only when needed).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from envlock.libs.analysis import analyze_module
from envlock.libs.config import detect_config
from envlock.libs.elfread import read_elf
from envlock.libs.linkmap import Process

from .conftest import Builder

LDSO = "/lib64/ld-linux-x86-64.so.2"
CODE = "#include <math.h>\n#include <string.h>\ndouble f(double x) { return cos(x) + strlen(\"a\"); }\n"
DT_SONAME, DT_VERNEED, DT_VERDEF = 14, 0x6FFFFFFE, 0x6FFFFFFC


def _dynamic(data: bytes) -> dict[int, tuple[int, int]]:
    """tag → (file offset of the entry, d_val) of PT_DYNAMIC (gcc's libraries map offset = vaddr
    in the segment that holds the tables)."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for i in range(phnum):
        p_type, _f, p_offset = struct.unpack_from("<IIQ", data, phoff + 56 * i)
        if p_type == 2:
            out = {}
            for k in range(512):
                tag, val = struct.unpack_from("<qQ", data, p_offset + 16 * k)
                if tag == 0:
                    return out
                out.setdefault(tag, (p_offset + 16 * k, val))
    raise AssertionError("no PT_DYNAMIC")


def _ld_so(path: Path) -> tuple[int, str]:
    proc = subprocess.run([LDSO, "--list", str(path)], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _model_error(path: Path) -> str | None:
    proc = Process(detect_config(env={}))
    main = proc.start(str(path))
    return proc.main_error or (main.info.error.message if main.info.error else None)


def _patched(build: Builder, name: str, patch) -> Path:
    lib = build.lib(f"{name}/libt.so", CODE, soname="libt.so", extra=["-lm"])
    data = bytearray(lib.read_bytes())
    patch(data, _dynamic(bytes(data)))
    lib.write_bytes(bytes(data))
    return lib


def _first_load_end(data: bytes) -> int:
    """``p_vaddr + p_memsz`` of the first PT_LOAD."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for i in range(phnum):
        p_type, _f, _o, p_vaddr, _pa, _fs, p_memsz = struct.unpack_from("<IIQQQQQ", data, phoff + 56 * i)
        if p_type == 1:
            return p_vaddr + p_memsz
    raise AssertionError("no PT_LOAD")


def test_a_soname_outside_the_segments_is_not_read_at_load(build: Builder) -> None:
    """The SONAME string starts past the first segment's p_memsz, in the rest of its last
    page, which the mmap maps all the same (as mutant 120 of bench_mutants' seed had it):
    ld.so loads the file, reading the file's bytes there (the zero padding before the next
    segment: an empty name), and so does envlock.  Where the address is not mapped at all,
    ld.so crashes (SIGSEGV), which is counted as not modelled in test_fuzz.py, and envlock
    takes the SONAME as absent."""
    def tail(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        end = _first_load_end(bytes(data))
        assert end % 4096, "the first segment ends on a page boundary"
        struct.pack_into("<Q", data, dyn[DT_SONAME][0] + 8, end + 1 - dyn[5][1])  # 5: DT_STRTAB
    lib = _patched(build, "soname", tail)
    end = _first_load_end(lib.read_bytes())
    rc, text = _ld_so(lib)
    assert rc == 0 and "libc.so.6 =>" in text, text
    info = read_elf(lib)
    assert lib.read_bytes()[end + 1] == 0
    assert info.error is None and info.soname == ""
    assert _model_error(lib) is None


def _verneed_versions(data: bytes, dyn: dict[int, tuple[int, int]]) -> list[int]:
    """File offsets of every Elf_Verneed entry, in chain order."""
    off, out = dyn[DT_VERNEED][1], []
    while True:
        out.append(off)
        vn_next, = struct.unpack_from("<I", data, off + 12)
        if vn_next == 0:
            return out
        off += vn_next


def test_only_the_first_verneed_entrys_version_is_checked(build: Builder) -> None:
    seen: list[int] = []

    def second(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        entries = _verneed_versions(bytes(data), dyn)
        seen.append(len(entries))
        struct.pack_into("<H", data, entries[-1], 2)
    lib = _patched(build, "second", second)
    assert seen[0] >= 2, "libm and libc: two Verneed entries"
    rc, text = _ld_so(lib)
    assert rc == 0 and "libm.so.6 =>" in text, text
    assert _model_error(lib) is None

    def first(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        struct.pack_into("<H", data, _verneed_versions(bytes(data), dyn)[0], 2)
    lib = _patched(build, "first", first)
    rc, text = _ld_so(lib)
    assert rc != 0 and text.endswith(f"{lib}: unsupported version 2 of Verneed record"), text
    assert _model_error(lib) == "unsupported version 2 of Verneed record"


def test_a_verdaux_name_outside_the_segments_loads(build: Builder) -> None:
    vers = build.root / "v.map"
    vers.write_text("V1 { global: f; local: *; };\n")

    def far(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        ent = dyn[DT_VERDEF][1]
        while True:
            vd_flags, = struct.unpack_from("<H", data, ent + 2)
            vd_aux, vd_next = struct.unpack_from("<II", data, ent + 12)
            if not vd_flags & 1:  # not VER_FLG_BASE: the V1 definition
                struct.pack_into("<I", data, ent + vd_aux, 0x7FFF0000)
                return
            ent += vd_next
    lib = build.lib("verdef/libt.so", CODE, soname="libt.so", extra=["-lm", f"-Wl,--version-script={vers}"])
    data = bytearray(lib.read_bytes())
    far(data, _dynamic(bytes(data)))
    lib.write_bytes(bytes(data))
    rc, text = _ld_so(lib)
    assert rc == 0 and "libm.so.6 =>" in text, text
    info = read_elf(lib)
    assert info.error is None and [d.name for d in info.verdef if not d.base] == [""]
    assert _model_error(lib) is None


def test_gnu_abi_version_bound_is_glibcs(build: Builder, tmp_path: Path) -> None:
    """EI_OSABI GNU with EI_ABIVERSION 3 loads and 4 is refused (mutants 4362 and 5976 of the
    10,000-mutant run), against a real dlopen and envlock's reading of the same file."""
    from .dlopen_oracle import build_probe, model_dlopen, real_dlopen
    probe = build_probe(tmp_path)
    lib = build.lib("abi/libt.so", CODE, soname="libt.so", extra=["-lm"])
    for version, ok in ((3, True), (4, False)):
        data = bytearray(lib.read_bytes())
        data[7], data[8] = 3, version
        path = tmp_path / f"abi{version}.so"
        path.write_bytes(bytes(data))
        real = real_dlopen(probe, path)
        ours = model_dlopen(probe, path)
        assert (real.error is None) is ok, real
        assert (ours.error is None) is ok, ours
        if not ok:
            assert real.error == f"{path}: ELF file ABI version invalid"
            report = analyze_module(str(probe), str(path), sys_path=[], env={}, owners=False,
                                    runtime=False, check_symbols=True)
            first = next(f for f in report.findings if f.severity == "error")
            assert any("ELF file ABI version invalid" in e for e in (first.cause, *first.evidence)), first


def test_a_verdef_outside_the_segments_is_not_corrupt(build: Builder) -> None:
    """``DT_VERDEF`` pointing past every segment (mutant 1710 of bench_mutants' seed: 0xcde8 in
    a 0x4010-byte image).  glibc reads the entries from whatever the process has mapped there:
    ``ld.so --list`` loaded that mutant and its ``dlopen`` died of SIGBUS, so the bytes do not
    decide it; glibc never refuses such a file with a message, and envlock no longer calls it
    corrupt (``address outside the loaded segments``)."""
    def far(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        end = _last_load_end(bytes(data))
        struct.pack_into("<Q", data, dyn[DT_VERDEF][0] + 8, ((end + 0xFFF) & ~0xFFF) + 0x8DE8)
    vers = build.root / "vd.map"
    vers.write_text("V1 { global: f; local: *; };\n")
    lib = build.lib("verdef-far/libt.so", CODE, soname="libt.so",
                    extra=["-lm", f"-Wl,--version-script={vers}"])
    data = bytearray(lib.read_bytes())
    far(data, _dynamic(bytes(data)))
    lib.write_bytes(bytes(data))
    rc, text = _ld_so(lib)
    assert rc == 0 or rc < 0, text  # loads, or crashes reading the pointer: never refused
    info = read_elf(lib)
    assert info.error is None and info.verdef == ()
    assert _model_error(lib) is None


def _last_load_end(data: bytes) -> int:
    """``p_vaddr + p_memsz`` of the last PT_LOAD."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    end = 0
    for i in range(phnum):
        p_type, _f, _o, p_vaddr, _pa, _fs, p_memsz = struct.unpack_from("<IIQQQQQ", data, phoff + 56 * i)
        if p_type == 1:
            end = p_vaddr + p_memsz
    return end


def test_dt_relr_without_the_glibc_abi_dt_relr_version_is_refused(build: Builder, tmp_path: Path) -> None:
    """A library linked with ``-z pack-relative-relocs`` (``DT_RELR``) needs
    ``GLIBC_ABI_DT_RELR`` from libc; with that Vernaux's hash changed (and made weak, so the
    version check itself passes, as in mutant 2866), glibc 2.36's ``_dl_check_map_versions``
    refuses it: ``DT_RELR without GLIBC_ABI_DT_RELR dependency``, under ``ld.so --list`` and
    ``dlopen`` alike; envlock gives the same refusal.  Unpatched, it loads."""
    from .dlopen_oracle import build_probe, model_dlopen, real_dlopen

    lib = build.lib("relr/libt.so", CODE, soname="libt.so", extra=["-lm", "-Wl,-z,pack-relative-relocs"])
    data = bytearray(lib.read_bytes())
    dyn = _dynamic(bytes(data))
    if 36 not in dyn:
        import pytest
        pytest.skip("this linker writes no DT_RELR")
    assert _ld_so(lib)[0] == 0 and _model_error(lib) is None
    strtab = dyn[5][1]
    for ent in _verneed_versions(bytes(data), dyn):
        _v, cnt, _file, aux, _next = struct.unpack_from("<HHIII", data, ent)
        a = ent + aux
        for _ in range(cnt):
            _h, flags, _o, name, anext = struct.unpack_from("<IHHII", data, a)
            if data[strtab + name:].split(b"\0", 1)[0] == b"GLIBC_ABI_DT_RELR":
                struct.pack_into("<IH", data, a, 0x1234, flags | 2)  # another hash, VER_FLG_WEAK
            a += anext
    lib.write_bytes(bytes(data))
    rc, text = _ld_so(lib)
    assert rc != 0 and text.endswith(f"{lib}: DT_RELR without GLIBC_ABI_DT_RELR dependency"), text
    assert _model_error(lib) == "DT_RELR without GLIBC_ABI_DT_RELR dependency"
    probe = build_probe(tmp_path)
    assert real_dlopen(probe, lib).error == f"{lib}: DT_RELR without GLIBC_ABI_DT_RELR dependency"
    assert model_dlopen(probe, lib).error is not None


def _first_load(data: bytes) -> tuple[int, int]:
    """``(file offset of the first PT_LOAD's header, its p_filesz)``."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for i in range(phnum):
        if struct.unpack_from("<I", data, phoff + 56 * i)[0] == 1:
            return phoff + 56 * i, struct.unpack_from("<Q", data, phoff + 56 * i + 32)[0]
    raise AssertionError("no PT_LOAD")


def test_tables_in_the_rest_of_a_mapped_page_are_read(build: Builder) -> None:
    """glibc maps whole pages (``_dl_map_segments``): past the first segment's ``p_filesz``
    the rest of its last page holds the file's bytes.  The whole Verneed chain copied there
    (its offsets are relative) and ``DT_VERNEED`` pointed at the copy, as mutants 3862, 4964
    and 6488 of bench_mutants' seed reached it: ``ld.so --list`` loads the file and checks
    those versions, and envlock reads the same bytes instead of calling the file corrupt."""
    lib = build.lib("pagetail/libt.so", CODE, soname="libt.so", extra=["-lm"])
    data = bytearray(lib.read_bytes())
    dyn = _dynamic(bytes(data))
    start = dyn[DT_VERNEED][1]
    entries = _verneed_versions(bytes(data), dyn)
    _v, cnt, _f, aux, _n = struct.unpack_from("<HHIII", data, entries[-1])
    size = entries[-1] + aux + 16 * cnt - start
    _ph, filesz = _first_load(bytes(data))
    target = (filesz + 15) & ~15
    assert target + size <= 4096 and not any(data[target:target + size]), "no room in the page"
    data[target:target + size] = data[start:start + size]
    struct.pack_into("<Q", data, dyn[DT_VERNEED][0] + 8, target)
    lib.write_bytes(bytes(data))
    rc, text = _ld_so(lib)
    assert rc == 0 and "libm.so.6 =>" in text, text
    info = read_elf(lib)
    assert info.error is None and {n.file for n in info.verneed} == {"libm.so.6", "libc.so.6"}
    assert _model_error(lib) is None


def test_a_segment_is_mapped_to_its_file_size_when_that_is_larger(build: Builder) -> None:
    """The first PT_LOAD's ``p_memsz`` cut below its ``p_filesz`` (mutant 6293 of
    bench_mutants' seed): glibc maps the file up to ``p_vaddr + p_filesz`` all the same, so
    the string table past ``p_memsz`` is read and the file loads; envlock reads it too."""
    lib = build.lib("memsz/libt.so", CODE, soname="libt.so", extra=["-lm"])
    data = bytearray(lib.read_bytes())
    ph, filesz = _first_load(bytes(data))
    dyn = _dynamic(bytes(data))
    assert dyn[5][1] > 0x100, "the string table is near the start"
    struct.pack_into("<Q", data, ph + 40, 0x100)  # p_memsz
    lib.write_bytes(bytes(data))
    rc, text = _ld_so(lib)
    assert rc == 0 and "libm.so.6 =>" in text, text
    info = read_elf(lib)
    assert info.error is None and info.needed == ("libm.so.6", "libc.so.6")
    assert _model_error(lib) is None
