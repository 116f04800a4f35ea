"""Damaged symbol versions and hash tables, against a real ``dlopen(RTLD_NOW)`` (issue 22, item 8).

Each case is a gcc-built pair — ``libp.so`` defining ``g`` and a module that calls it — with
bytes patched as the mutants of ``benchmarks/bench_mutants.py`` had them; the oracle is the
probe of :mod:`tests.libs.dlopen_oracle` (``LD_BIND_NOW=1``).  Sources: glibc 2.36
``elf/dl-version.c`` (``_dl_check_map_versions``: ``l_versions``, ``ndx_high``;
``match_symbol``), ``elf/dl-lookup.c`` (``do_lookup_x``'s bloom filter, buckets and chains,
``check_match``), ``elf/dl-reloc.c`` (``RESOLVE_MAP``: a version of hash 0 is no version).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from envlock.libs.analysis import analyze_module
from envlock.libs.elf import elf_hash, gnu_hash

from .conftest import Builder
from .dlopen_oracle import build_probe, real_dlopen

DT_STRTAB, DT_HASH, DT_GNU_HASH, DT_VERNEED = 5, 4, 0x6FFFFEF5, 0x6FFFFFFE
CONSUMER = "int g(void); int use(void) { return g(); }\n"


def _dynamic(data: bytes) -> dict[int, tuple[int, int]]:
    """tag -> (file offset of the entry, d_val) (gcc's libraries map offset = vaddr where the
    tables are)."""
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


def _pair(build: Builder, name: str, *, provider: list[str] = (), consumer_script: str | None = None,
          provider_script: str | None = "V1 { global: f; g; local: *; };") -> tuple[Path, Path]:
    """``name/libp.so`` (``g``, and ``f`` beside it) and ``name/mod.so`` calling ``g``, with a
    RUNPATH to libp's directory."""
    lib = build.lib(f"{name}/libp.so", "int f(void) { return 1; } int g(void) { return 2; }\n",
                    soname="libp.so", version_script=provider_script, extra=list(provider))
    mod = build.lib(f"{name}/mod.so", CONSUMER, soname="mod.so", needed=[f"{name}/libp.so"],
                    runpath=str(lib.parent), version_script=consumer_script)
    return lib, mod


def _patch(path: Path, patch) -> None:
    data = bytearray(path.read_bytes())
    patch(data, _dynamic(bytes(data)))
    path.write_bytes(bytes(data))


def _verdicts(tmp_path: Path, mod: Path) -> tuple[str | None, list[str]]:
    """The real dlopen's error (``None``: it loads) and the texts of envlock's first error
    finding (title, cause, evidence; ``[]``: envlock loads it too)."""
    probe = build_probe(tmp_path)
    real = real_dlopen(probe, mod).error
    report = analyze_module(str(probe), str(mod), sys_path=[], env={"LD_BIND_NOW": "1"},
                            owners=False, runtime=False, check_symbols=True)
    first = next((f for f in report.findings if f.severity == "error"
                  and getattr(f, "consequence_of", None) is None), None)
    return real, [] if first is None else [first.title, first.cause, *first.evidence]


def _vernaux_of(data: bytes, dyn: dict[int, tuple[int, int]], version: str) -> int:
    """File offset of the ``Elf_Vernaux`` naming ``version``."""
    strtab = dyn[DT_STRTAB][1]
    ent = dyn[DT_VERNEED][1]
    while True:
        _v, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", data, ent)
        a = ent + aux
        for _ in range(cnt):
            _h, _fl, _o, name, anext = struct.unpack_from("<IHHII", data, a)
            if data[strtab + name:].split(b"\0", 1)[0] == version.encode():
                return a
            a += anext
        if not nxt:
            raise AssertionError(f"no Vernaux {version}")
        ent += nxt


def test_a_version_name_damaged_to_empty_is_still_a_version(build: Builder, tmp_path: Path) -> None:
    """The Vernaux of ``g@V1`` renamed to ``""`` (``vna_name`` 0: the string table's first
    byte).  Its hash is V1's, so the reference stays versioned: glibc's version check fails
    (``version `' not found``), and with ``VER_FLG_WEAK`` set the check passes but no
    definition matches an empty name (``check_match``), so ``g`` is undefined — envlock once
    took the empty name for "unversioned" and bound it."""
    _lib, mod = _pair(build, "ok")
    assert _verdicts(tmp_path, mod) == (None, [])

    def empty(weak: bool):
        def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
            aux = _vernaux_of(bytes(data), dyn, "V1")
            struct.pack_into("<I", data, aux + 8, 0)  # vna_name -> ""
            if weak:
                flags, = struct.unpack_from("<H", data, aux + 4)
                struct.pack_into("<H", data, aux + 4, flags | 2)  # VER_FLG_WEAK
        return patch

    lib, mod = _pair(build, "strict")
    _patch(mod, empty(False))
    real, ours = _verdicts(tmp_path, mod)
    assert real == f"{lib}: version `' not found (required by {mod})"
    assert any(real in text for text in ours), ours

    lib, mod = _pair(build, "weak")
    _patch(mod, empty(True))
    real, ours = _verdicts(tmp_path, mod)
    assert real == f"{mod}: undefined symbol: g, version "
    assert f"undefined symbol: g, version  ({mod})" in ours, ours


def test_a_reference_past_the_version_table_has_no_version_name(build: Builder, tmp_path: Path) -> None:
    """``DT_VERNEED`` damaged (its tag no longer known, as mutants 836 and 1293 had it): the
    module's own Verdef (base, C1, C2) leaves ``ndx_high`` at 3, and ``g``'s ``.gnu.version``
    index 4 now reads past glibc's ``l_versions`` array — a versioned reference with no name,
    which ``g@V1`` does not satisfy (``undefined symbol: g, version ``); an unversioned
    ``g`` does."""
    script = "C1 { global: use; local: *; }; C2 { global: use2; } C1;"
    code = CONSUMER + "int use2(void) { return 3; }\n"

    def drop_verneed(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        struct.pack_into("<q", data, dyn[DT_VERNEED][0], 0x6BFFFFFE)

    for name, provider_script, loads in (("versioned", "V1 { global: g; local: *; };", False),
                                         ("unversioned", None, True)):
        lib = build.lib(f"{name}/libp.so", "int f(void) { return 1; } int g(void) { return 2; }\n",
                        soname="libp.so", version_script="V1 { global: g; local: *; };")
        mod = build.lib(f"{name}/mod.so", code, soname="mod.so", needed=[f"{name}/libp.so"],
                        runpath=str(lib.parent), version_script=script)
        if provider_script is None:  # the module was linked against V1; run with an unversioned g
            build.lib(f"{name}/libp.so", "int f(void) { return 1; } int g(void) { return 2; }\n",
                      soname="libp.so")
        _patch(mod, drop_verneed)
        real, ours = _verdicts(tmp_path, mod)
        if loads:
            assert real is None and ours == [], (real, ours)
        else:
            assert real == f"{mod}: undefined symbol: g, version "
            assert f"undefined symbol: g, version  ({mod})" in ours, ours


def _gnu_slot(data: bytes, dyn: dict[int, tuple[int, int]], name: str) -> tuple[int, int, int]:
    """``(file offset of the bloom word, of the bucket, of the chain entry)`` that
    ``do_lookup_x`` reads for ``name`` in a ``DT_GNU_HASH`` table."""
    addr = dyn[DT_GNU_HASH][1]
    nbuckets, symoffset, nwords, _shift = struct.unpack_from("<IIII", data, addr)
    h = gnu_hash(name)
    bloom = addr + 16 + 8 * ((h // 64) % nwords)
    bucket = addr + 16 + 8 * nwords + 4 * (h % nbuckets)
    symidx, = struct.unpack_from("<I", data, bucket)
    chain = addr + 16 + 8 * nwords + 4 * nbuckets
    while True:
        entry, = struct.unpack_from("<I", data, chain + 4 * (symidx - symoffset))
        if not (entry ^ h) >> 1:
            return bloom, bucket, chain + 4 * (symidx - symoffset)
        assert not entry & 1, f"{name} is not in its chain"
        symidx += 1


@pytest.mark.parametrize("damage", ["chain", "bloom", "bucket"])
def test_a_symbol_its_gnu_hash_table_hides_is_not_found(build: Builder, tmp_path: Path,
                                                        damage: str) -> None:
    """``g`` defined in libp.so but its ``.gnu.hash`` chain entry's hash changed (the end bit
    kept), its bloom word cleared, or its bucket emptied: glibc's lookup never reaches it
    (``undefined symbol: g, version V1``), and envlock, which now looks symbols up through
    the same table, says so.  ``f`` beside it binds where its own bloom word and bucket are
    not the damaged ones (both sides agree either way)."""
    lib, mod = _pair(build, damage)

    def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        bloom, bucket, chain = _gnu_slot(bytes(data), dyn, "g")
        if damage == "chain":
            entry, = struct.unpack_from("<I", data, chain)
            struct.pack_into("<I", data, chain, entry ^ 0x100)
        elif damage == "bloom":
            struct.pack_into("<Q", data, bloom, 0)
        else:
            struct.pack_into("<I", data, bucket, 0)
    _patch(lib, patch)
    real, ours = _verdicts(tmp_path, mod)
    assert real == f"{mod}: undefined symbol: g, version V1"
    assert f"undefined symbol: g, version V1 ({mod})" in ours, ours
    f_user = build.lib(f"{damage}/fuser.so", "int f(void); int use(void) { return f(); }\n",
                       soname="fuser.so", needed=[f"{damage}/libp.so"], runpath=str(lib.parent))
    real, ours = _verdicts(tmp_path, f_user)
    assert (real is None) == (ours == []), (real, ours)
    if damage == "chain":
        assert real is None
    else:
        assert real is None or real == f"{f_user}: undefined symbol: f, version V1"


def test_a_symbol_its_sysv_hash_table_hides_is_not_found(build: Builder, tmp_path: Path) -> None:
    """A library with only ``DT_HASH`` (``--hash-style=sysv``): emptying ``g``'s bucket hides
    it from glibc (``do_lookup_x``'s SysV path) and from envlock alike."""
    lib, mod = _pair(build, "sysv", provider=["-Wl,--hash-style=sysv"])
    assert DT_GNU_HASH not in _dynamic(lib.read_bytes())
    assert _verdicts(tmp_path, mod) == (None, [])

    def patch(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        addr = dyn[DT_HASH][1]
        nbucket, = struct.unpack_from("<I", data, addr)
        struct.pack_into("<I", data, addr + 8 + 4 * (elf_hash("g") % nbucket), 0)
    _patch(lib, patch)
    real, ours = _verdicts(tmp_path, mod)
    assert real == f"{mod}: undefined symbol: g, version V1"
    assert f"undefined symbol: g, version V1 ({mod})" in ours, ours


def _symbol_index(data: bytes, dyn: dict[int, tuple[int, int]], name: str) -> int:
    """Index of ``name`` in ``.dynsym`` (which ends where ``.dynstr`` starts, in gcc's layout)."""
    symtab, strtab = dyn[6][1], dyn[DT_STRTAB][1]
    for i in range(1, (strtab - symtab) // 24):
        st_name, = struct.unpack_from("<I", data, symtab + 24 * i)
        if data[strtab + st_name:].split(b"\0", 1)[0] == name.encode():
            return i
    raise AssertionError(f"no symbol {name}")


def test_an_undefined_symbol_no_relocation_names_is_not_looked_up(build: Builder, tmp_path: Path) -> None:
    """``mod.so`` calls ``g`` and ``h``; libp.so defines only ``g``, so the real dlopen fails
    on ``h`` — until ``h``'s one relocation (its ``R_X86_64_JUMP_SLOT`` in ``DT_JMPREL``) is
    made ``R_X86_64_NONE``: glibc binds relocations, not symbols, and ``h`` is never looked up
    (``elf/do-rel.h``), as with the mutants whose damaged ``.gnu.hash`` made envlock count a
    string-table fragment as one more undefined symbol."""
    lib = build.lib("norel/libp.so", "int g(void) { return 2; }\n", soname="libp.so")
    mod = build.lib("norel/mod.so", "int g(void); int h(void); int use(void) { return g() + h(); }\n",
                    soname="mod.so", needed=["norel/libp.so"], runpath=str(lib.parent))
    real, ours = _verdicts(tmp_path, mod)
    assert real == f"{mod}: undefined symbol: h"
    assert f"undefined symbol: h ({mod})" in ours, ours

    def no_reloc(data: bytearray, dyn: dict[int, tuple[int, int]]) -> None:
        sym = _symbol_index(bytes(data), dyn, "h")
        hits = 0
        for tag, size_tag in ((23, 2), (7, 8)):  # DT_JMPREL/DT_PLTRELSZ, DT_RELA/DT_RELASZ
            if tag not in dyn:
                continue
            start, size = dyn[tag][1], dyn[size_tag][1]
            for off in range(start, start + size, 24):
                info, = struct.unpack_from("<Q", data, off + 8)
                if info >> 32 == sym:
                    struct.pack_into("<Q", data, off + 8, 0)  # R_X86_64_NONE, no symbol
                    hits += 1
        assert hits, "no relocation names h"
    _patch(mod, no_reloc)
    assert _verdicts(tmp_path, mod) == (None, [])
