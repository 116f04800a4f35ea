"""The symbol-version tables of an ELF file (``DT_VERNEED``, ``DT_VERDEF``), read as glibc 2.36
``elf/dl-version.c`` ``_dl_check_map_versions`` reads them, through the mapped image of
:mod:`envlock.libs.elfread`; and that function's check of ``DT_RELR`` against the
``GLIBC_ABI_DT_RELR`` version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from envlock.libs.elf import VER_FLG_BASE, VER_FLG_WEAK, NeededVersions, VersionDef, VersionNeed
from envlock.libs.elfimage import _MAX_CHAIN, _Bad, _Image

__all__ = ["read_verdef", "read_verneed", "relr_error"]

#: ``DT_NEEDED``, ``DT_RELR`` (glibc 2.36 ``elf/elf.h``).
_DT_NEEDED, _DT_RELR, _DT_VERNEED = 1, 36, 0x6FFFFFFE
#: The SysV ELF hash of ``GLIBC_ABI_DT_RELR``, which glibc compares before the name.
_RELR_HASH = 0xFD0E42


def relr_error(last: dict[int, int], needed: Sequence[str], verneed: Sequence[NeededVersions]) -> str | None:
    """glibc 2.36 ``_dl_check_map_versions``: an object with ``DT_VERNEED``, ``DT_NEEDED`` and
    ``DT_RELR`` that needs ``libc.so.*`` but no ``GLIBC_ABI_DT_RELR`` (a ``Vernaux`` of that
    hash and name) is refused with ``DT_RELR without GLIBC_ABI_DT_RELR dependency`` (glibc
    commit 57292f5, "Add GLIBC_ABI_DT_RELR for DT_RELR support"); else ``None``."""
    if _DT_VERNEED not in last or _DT_RELR not in last or not needed:
        return None
    if any(v.hash == _RELR_HASH and v.name == "GLIBC_ABI_DT_RELR" for vn in verneed for v in vn.versions):
        return None
    if not any(n.startswith("libc.so.") for n in needed):
        return None
    return "DT_RELR without GLIBC_ABI_DT_RELR dependency"


def read_verneed(img: _Image, ent: int, string: Any) -> tuple[list[NeededVersions], int | None]:
    """The ``Elf_Verneed`` chain from ``ent`` (``vn_next`` until 0, each entry once):
    ``(needs, the first entry's vn_version when it is not 1)``.  glibc 2.36
    ``_dl_check_map_versions`` checks only the first entry's ``vn_version``.  An entry or
    ``Vernaux`` outside the mapped pages is corrupt: glibc follows the chain into whatever is
    mapped there (``fixtures/elf/libfar.so``: ld.so crashes).  A name outside them is ``""``,
    as for the other string pointers: glibc compares whatever is mapped there (``ld.so
    --list`` loaded mutant 8851 of bench_mutants' seed, a ``vn_file`` so damaged)."""
    def name(off: int) -> str:
        try:
            return string(off)  # type: ignore[no-any-return]
        except _Bad as exc:
            if exc.truncated:
                raise
            return ""

    verneed: list[NeededVersions] = []
    seen: set[int] = set()
    while ent not in seen and len(seen) < _MAX_CHAIN:
        seen.add(ent)
        vn_version, _cnt, vn_file, vn_aux, vn_next = struct.unpack(img.e + "HHIII", img.read(ent, 16))
        if vn_version != 1 and not verneed:
            return verneed, vn_version
        vers = []
        aux = ent + vn_aux
        aseen: set[int] = set()
        while aux not in aseen and len(aseen) < _MAX_CHAIN:
            aseen.add(aux)
            vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack(
                img.e + "IHHII", img.read(aux, 16))
            vers.append(VersionNeed(name=name(vna_name), weak=bool(vna_flags & VER_FLG_WEAK),
                                    index=vna_other, hash=vna_hash))
            if vna_next == 0:
                break
            aux += vna_next
        verneed.append(NeededVersions(file=name(vn_file), versions=tuple(vers)))
        if vn_next == 0:
            break
        ent += vn_next
    return verneed, None


def read_verdef(img: _Image, ent: int, string: Any) -> list[VersionDef]:
    """The ``Elf_Verdef`` chain from ``ent`` (``vd_next`` until 0, each entry once).

    ``vd_version`` is not checked here: glibc 2.36 reads every entry in
    ``_dl_check_map_versions`` and checks only the first one's ``vd_version`` in
    ``match_symbol``, when another object's Verneed names this file ("unsupported version N
    of Verdef record", not modelled: docs/libs.md).  An entry (or its first ``Verdaux``)
    outside the segments ends the chain: glibc reads whatever the process has mapped at that
    address (``ld.so --list`` of mutant 1710 of bench_mutants' seed loads the file, its
    ``dlopen`` dies of SIGBUS), which the file's bytes do not decide; the entries read so far
    are kept.  A file that ends inside a segment is still ``truncated``."""
    verdef: list[VersionDef] = []
    seen: set[int] = set()
    while ent not in seen and len(seen) < _MAX_CHAIN:
        seen.add(ent)
        try:
            _vd_version, vd_flags, vd_ndx, _cnt, vd_hash, vd_aux, vd_next = struct.unpack(
                img.e + "HHHHIII", img.read(ent, 20))
            names = _verdaux_names(img, ent + vd_aux, string, strict=not vd_flags & VER_FLG_BASE)
        except _Bad as exc:
            if exc.truncated:
                raise
            break
        verdef.append(VersionDef(name=names[0] if names else "", index=vd_ndx,
                                 base=bool(vd_flags & VER_FLG_BASE), parents=tuple(names[1:]),
                                 hash=vd_hash))
        if vd_next == 0:
            break
        ent += vd_next
    return verdef


def _verdaux_names(img: _Image, aux: int, string: Any, *, strict: bool) -> list[str]:
    """The ``Elf_Verdaux`` names of one definition, as far as glibc reads them.

    glibc 2.36 ``_dl_check_map_versions`` (``elf/dl-version.c``) reads only the first
    ``vda_name`` of a non-base definition (``strict``), kept as a pointer that a lookup reads
    when the hash matches; parents are never read.  An unreadable name is ``""`` (it matches
    no needed version), unreadable parents are left out."""
    names: list[str] = []
    aseen: set[int] = set()
    while aux not in aseen and len(aseen) < _MAX_CHAIN:
        aseen.add(aux)
        try:
            vda_name, vda_next = struct.unpack(img.e + "II", img.read(aux, 8))
        except _Bad:
            if strict and not names:
                raise
            break
        try:
            names.append(string(vda_name))
        except _Bad:
            if not names:
                names.append("")
        if vda_next == 0:
            break
        aux += vda_next
    return names
