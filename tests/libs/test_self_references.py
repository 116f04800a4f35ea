"""Relocations that name the object's own definitions, against a real ``dlopen(RTLD_NOW)``
(issue 22, item 8).

glibc 2.36 looks every relocation's non-local, non-hidden symbol up through the scope's
hash tables, the object's own definitions too (``RESOLVE_MAP`` in ``elf/dl-reloc.c``,
``do_lookup_x`` in ``elf/dl-lookup.c``): a definition whose ``.dynstr`` name a flipped byte
changed, or whose ``.gnu.hash`` chain entry was damaged, is not found (``undefined symbol:
crc72_z, version ZLIB_1.2.9`` in bench_mutants' seed), unless the reference is weak.  Each case
is a gcc-built library that calls its own ``selfref_g`` (``R_X86_64_JUMP_SLOT``) and reads its
own ``selfref_v`` (``R_X86_64_GLOB_DAT``), patched; the oracle is the probe of
:mod:`tests.libs.dlopen_oracle` under ``LD_BIND_NOW=1``.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from .conftest import Builder
from .test_damaged_symbols import _gnu_slot, _patch, _verdicts

DT_STRTAB, DT_STRSZ = 5, 10
CODE = """
{weak} int selfref_g(void) {{ return 2; }}
int selfref_v = 3;
int selfref_f(void) {{ return selfref_g() + selfref_v; }}
"""
SCRIPT = "V1 { global: selfref_*; local: *; };"


def _lib(build: Builder, name: str, *, weak: bool = False) -> Path:
    lib = build.lib(f"{name}/libself.so", CODE.format(weak="__attribute__((weak))" if weak else ""),
                    soname="libself.so", version_script=SCRIPT)
    relocs = subprocess.run(["readelf", "-rW", str(lib)], capture_output=True, text=True, check=True).stdout
    assert any("JUMP_SLOT" in x and "selfref_g" in x for x in relocs.splitlines()), relocs
    assert any("GLOB_DAT" in x and "selfref_v" in x for x in relocs.splitlines()), relocs
    return lib


def _rename(old: str, new: str):
    def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        start, size = dyn[DT_STRTAB][1], dyn[DT_STRSZ][1]
        at = bytes(data[start:start + size]).index(b"\0" + old.encode() + b"\0") + 1
        data[start + at:start + at + len(new)] = new.encode()
    return patch


def _chain(name: str):
    def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        _bloom, _bucket, chain = _gnu_slot(bytes(data), dyn, name)
        entry, = struct.unpack_from("<I", data, chain)
        struct.pack_into("<I", data, chain, entry ^ 0x100)  # the hash, not the end bit
    return patch


def _slot(name: str, which: str):
    def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        bloom, bucket, _chain = _gnu_slot(bytes(data), dyn, name)
        if which == "bloom":
            struct.pack_into("<Q", data, bloom, 0)
        else:
            struct.pack_into("<I", data, bucket, 0)
    return patch


def test_an_intact_library_binds_its_own_symbols(build: Builder, tmp_path: Path) -> None:
    """Unpatched, both load it: its own definitions are found in its own table."""
    assert _verdicts(tmp_path, _lib(build, "intact")) == (None, [])


@pytest.mark.parametrize(("case", "patch", "missing"), [
    ("func-name", _rename("selfref_g", "selfref_h"), "selfref_h"),
    ("data-name", _rename("selfref_v", "selfref_w"), "selfref_w"),
    ("func-chain", _chain("selfref_g"), "selfref_g"),
    ("data-chain", _chain("selfref_v"), "selfref_v"),
    ("func-bloom", _slot("selfref_g", "bloom"), None),
    ("data-bucket", _slot("selfref_v", "bucket"), None),
])
def test_an_own_definition_its_hash_table_does_not_give_back_is_undefined(
        build: Builder, tmp_path: Path, case: str, patch, missing: str) -> None:
    """The definition renamed in ``.dynstr`` (its chain entry still holds the old name's
    hash), its chain entry's hash changed, its bloom word cleared or its bucket emptied:
    glibc's lookup of the name its relocation names does not find it, and envlock's first
    finding says what ``dlerror()`` says (a cleared bloom word or bucket may hide the other
    symbol too, and then the first relocation glibc binds decides)."""
    lib = _lib(build, case)
    _patch(lib, patch)
    real, ours = _verdicts(tmp_path, lib)
    assert real is not None and real.startswith(f"{lib}: undefined symbol: selfref_"), real
    if missing is not None:
        assert real == f"{lib}: undefined symbol: {missing}, version V1"
    assert ours and ours[2] == real.split(": ", 1)[1] + f" ({lib})", ours


def test_a_weak_own_definition_that_is_not_found_stays_unbound(build: Builder, tmp_path: Path) -> None:
    """``selfref_g`` weak and renamed: the lookup fails, but a weak reference may stay
    unbound, so both load the library."""
    lib = _lib(build, "weak", weak=True)
    _patch(lib, _rename("selfref_g", "selfref_h"))
    assert _verdicts(tmp_path, lib) == (None, [])
