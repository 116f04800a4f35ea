"""Overlapping ``PT_LOAD`` segments, mapped as ``_dl_map_segments`` maps them (issue 22, item 8).

glibc 2.36 ``elf/dl-map-segments.h`` maps the segments in program-header order, each later
one with ``MAP_FIXED`` over whatever an earlier one put in its pages, and zero-fills each
one's ``p_memsz > p_filesz`` tail right after mapping it (``memset`` to the end of the page or
to ``p_vaddr + p_memsz``, anonymous pages after that).  Each case is a gcc-built library
whose third ``PT_LOAD`` (``.eh_frame``, unused at load) is pointed at a patched copy of the
first page, appended to the file, and mapped over the first (as mutant 7820 of
bench_mutants' seed had it); the oracles are ``ld.so --list`` and a real ``dlopen(RTLD_NOW)``
(:mod:`tests.libs.dlopen_oracle`), and envlock must give the same verdict and message.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from envlock.libs.analysis import analyze_module
from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .conftest import Builder
from .dlopen_oracle import build_probe, model_dlopen, real_dlopen

LDSO = "/lib64/ld-linux-x86-64.so.2"
CODE = "#include <math.h>\ndouble f(double x) { return cos(x); }\n"
DT_VERNEED = 0x6FFFFFFE
PAGE = 4096
BAD = "unsupported version 0 of Verneed record"


def _loads(data: bytes) -> list[int]:
    """File offsets of the PT_LOAD program headers, in order."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    return [phoff + 56 * i for i in range(phnum) if struct.unpack_from("<I", data, phoff + 56 * i)[0] == 1]


def _verneed(data: bytes) -> int:
    """``DT_VERNEED``'s value (gcc's first segment maps offset = vaddr)."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for i in range(phnum):
        p_type, _f, p_offset = struct.unpack_from("<IIQ", data, phoff + 56 * i)
        if p_type == 2:
            for k in range(512):
                tag, val = struct.unpack_from("<qQ", data, p_offset + 16 * k)
                if tag == DT_VERNEED:
                    return int(val)
    raise AssertionError("no DT_VERNEED")


def _overlaid(build: Builder, name: str, *, damage: bool, filesz: int | None = None,
              memsz: int | None = None) -> tuple[Path, int]:
    """libt.so whose third PT_LOAD maps a copy of the first page (its Verneed's
    ``vn_version`` set to 0 when ``damage``) at address 0, with that ``p_filesz``/``p_memsz``
    (the first segment's file size by default); returns the file and its Verneed address."""
    lib = build.lib(f"{name}/libt.so", CODE, soname="libt.so", extra=["-lm"])
    data = bytearray(lib.read_bytes())
    loads = _loads(bytes(data))
    assert len(loads) >= 4, "gcc's four PT_LOADs"
    first_filesz, = struct.unpack_from("<Q", data, loads[0] + 32)
    vn = _verneed(bytes(data))
    assert vn + 16 <= first_filesz <= PAGE, "the Verneed in the first page"
    copy = bytearray(data[:PAGE].ljust(PAGE, b"\0"))
    if damage:
        struct.pack_into("<H", copy, vn, 0)
    at = (len(data) + PAGE - 1) & ~(PAGE - 1)
    data = data.ljust(at, b"\0") + copy
    fs = first_filesz if filesz is None else filesz
    ms = fs if memsz is None else memsz
    # p_offset, p_vaddr, p_paddr, p_filesz, p_memsz of the third PT_LOAD.
    struct.pack_into("<QQQQQ", data, loads[2] + 8, at, 0, 0, fs, ms)
    lib.write_bytes(bytes(data))
    return lib, vn


def _ld_so(path: Path) -> tuple[bool, str]:
    proc = subprocess.run([LDSO, "--list", str(path)], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def _model(path: Path) -> str | None:
    proc = Process(detect_config(env={}))
    main = proc.start(str(path))
    return proc.main_error or (main.info.error.message if main.info.error else None)


def _agree(tmp_path: Path, lib: Path, error: str | None) -> None:
    """``ld.so --list`` and the real ``dlopen`` both end with ``error`` (``None``: load),
    and so does envlock, with the same message."""
    ok, text = _ld_so(lib)
    probe = build_probe(tmp_path)
    real = real_dlopen(probe, lib)
    ours = model_dlopen(probe, lib)
    if error is None:
        assert ok and "libm.so.6 =>" in text, text
        assert real.error is None, real.error
        assert _model(lib) is None
        assert ours.error is None and real.deps == ours.deps
    else:
        assert not ok and text.endswith(f"{lib}: {error}"), text
        assert real.error == f"{lib}: {error}"
        assert _model(lib) == error
        report = analyze_module(str(probe), str(lib), sys_path=[], env={"LD_BIND_NOW": "1"},
                                owners=False, runtime=False, check_symbols=True)
        first = next(f for f in report.findings if f.severity == "error")
        assert first.evidence[0] == real.error, first.evidence


@pytest.mark.parametrize("damage", [False, True])
def test_a_later_segment_is_mapped_over_an_earlier_one(build: Builder, tmp_path: Path, damage: bool) -> None:
    """The copy of the first page replaces it: its Verneed is the one checked (a version of
    0 is refused), and an undamaged copy loads."""
    lib, _vn = _overlaid(build, "over", damage=damage)
    _agree(tmp_path, lib, BAD if damage else None)


def test_the_zero_fill_of_a_later_segment_replaces_an_earlier_ones_bytes(build: Builder, tmp_path: Path) -> None:
    """The copy's ``p_filesz`` ends at the Verneed, its ``p_memsz`` at the end of the page:
    glibc's ``memset`` zeroes the Verneed (version 0)."""
    _lib, vn = _overlaid(build, "plain", damage=False)
    lib, _vn = _overlaid(build, "zero", damage=False, filesz=vn, memsz=PAGE)
    _agree(tmp_path, lib, BAD)


def test_past_p_memsz_the_page_keeps_the_later_segments_file_bytes(build: Builder, tmp_path: Path) -> None:
    """The copy's zero fill ends just before the Verneed (``p_memsz`` inside the page): the
    ``memset`` stops there and the rest of the page holds the copy's bytes, so the first
    segment's own Verneed, damaged, is never read, and the file loads."""
    _lib, vn = _overlaid(build, "plain", damage=False)
    lib, _vn = _overlaid(build, "tail", damage=False, filesz=vn - 8, memsz=vn)
    data = bytearray(lib.read_bytes())
    struct.pack_into("<H", data, vn, 0)  # the first segment's Verneed, under the copy
    lib.write_bytes(bytes(data))
    _agree(tmp_path, lib, None)
