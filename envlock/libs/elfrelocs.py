"""Which dynamic symbols an object's relocations name: the symbols glibc looks up at all.

With ``RTLD_NOW``/``LD_BIND_NOW`` glibc 2.36 binds every relocation of ``DT_RELA``/``DT_REL``
and ``DT_JMPREL`` (``elf/dynamic-link.h`` ``_ELF_DYNAMIC_DO_RELOC``, ``elf/do-rel.h``); a symbol
no relocation names is never looked up, whatever ``.dynsym`` holds.  The first
``DT_RELACOUNT``/``DT_RELCOUNT`` entries are applied as relative relocations without reading
their type or symbol, and ``R_*_NONE``/``R_*_RELATIVE``/``R_*_IRELATIVE`` name no symbol
(``elf_machine_rela`` of ``sysdeps/x86_64/dl-machine.h``, ``sysdeps/i386/dl-machine.h``).
:func:`referenced_symbols` reads the ``r_info`` words through the mapped image
(:mod:`envlock.libs.elfimage`); ``None`` when the tables cannot be read as a whole (glibc
would read them from whatever is mapped there), so that every undefined symbol counts.
"""

from __future__ import annotations

import operator
import struct
from itertools import compress
from typing import Any

from envlock.libs.elfimage import _Bad

__all__ = ["referenced_symbols"]

DT_PLTRELSZ, DT_RELA, DT_RELASZ, DT_REL, DT_RELSZ, DT_PLTREL, DT_JMPREL = 2, 7, 8, 17, 18, 20, 23
DT_RELACOUNT, DT_RELCOUNT = 0x6FFFFFF9, 0x6FFFFFFA
#: Relocation types that name no symbol, by ``e_machine`` (glibc's ``dl-machine.h``): NONE,
#: RELATIVE, IRELATIVE (and RELATIVE64 on x86-64).
_NO_SYMBOL = {62: frozenset({0, 8, 37, 38}), 3: frozenset({0, 8, 42})}
#: Most relocation bytes read (a table larger than this is not read: every symbol counts).
_MAX_BYTES = 1 << 28


def referenced_symbols(img: Any, last: dict[int, int]) -> set[int] | None:
    """The symbol indexes the relocations of the image ``img`` name (``last``: its dynamic
    entries, the last of each tag), or ``None`` when a table lies outside the image."""
    (machine,) = img.unpack("H", 18)
    skip = _NO_SYMBOL.get(machine, frozenset({0}))
    rela = img.cls == 64 or machine not in _NO_SYMBOL
    out: set[int] = set()
    tables: list[tuple[int, int, int | None, bool]] = [
        (DT_RELA, DT_RELASZ, DT_RELACOUNT, True), (DT_REL, DT_RELSZ, DT_RELCOUNT, False)]
    plt = last.get(DT_PLTREL)
    if DT_JMPREL in last:
        tables.append((DT_JMPREL, DT_PLTRELSZ, None, bool(plt == DT_RELA) if plt is not None else rela))
    for addr_tag, size_tag, count_tag, is_rela in tables:
        if addr_tag not in last or not last.get(size_tag):
            continue
        size = last[size_tag]
        if size > _MAX_BYTES:
            return None
        try:
            off, avail = img.file_span(last[addr_tag])
        except _Bad:
            return None
        if size > avail:
            return None
        relative = last.get(count_tag, 0) if count_tag is not None else 0
        syms, types = _sym_type(img, off, size, is_rela)
        # Symbols of the relocations past the relative ones whose type names one, at C speed.
        out.update(compress(syms[relative:], map(operator.not_, map(skip.__contains__, types[relative:]))))
    out.discard(0)
    return out


def _sym_type(img: Any, off: int, size: int, is_rela: bool) -> tuple[list[int], list[int]]:
    """``(symbol indexes, types)`` of the ``Elf_Rela``/``Elf_Rel`` entries in ``size`` bytes at
    file offset ``off``, in order (``ELF64_R_SYM``/``ELF64_R_TYPE``: the high and low halves of
    ``r_info``; ``ELF32_R_SYM``/``ELF32_R_TYPE``: ``r_info >> 8`` and its low byte)."""
    word = 8 if img.cls == 64 else 4
    step = word * (3 if is_rela else 2)
    n = size // step
    raw = bytes(img.buf[off: off + n * step])
    native = (img.e == "<") == (struct.pack("=H", 1) == b"\x01\x00")
    if img.cls == 64 and native and img.e == "<":
        halves = memoryview(raw).cast("I")
        k = step // 4
        return halves[3::k].tolist(), halves[2::k].tolist()
    fmt = img.e + ("Q" if word == 8 else "I")
    infos = [struct.unpack_from(fmt, raw, i * step + word)[0] for i in range(n)]
    if img.cls == 64:
        return [x >> 32 for x in infos], [x & 0xFFFFFFFF for x in infos]
    return [x >> 8 for x in infos], [x & 0xFF for x in infos]
