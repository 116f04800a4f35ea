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
        out.update(_symbols_of(img, off, size, is_rela, relative, skip))
    out.discard(0)
    return out


def _symbols_of(img: Any, off: int, size: int, is_rela: bool, first: int,
                skip: frozenset[int]) -> set[int]:
    """The symbol indexes of the ``Elf_Rela``/``Elf_Rel`` entries in ``size`` bytes at file offset
    ``off``, from entry ``first`` on, whose type is not in ``skip`` (``ELF64_R_SYM``/``_TYPE``:
    the high and low halves of ``r_info``; ``ELF32_R_SYM``/``_TYPE``: ``r_info >> 8``, its low
    byte); selected at C speed where the file's byte order is the host's."""
    word = 8 if img.cls == 64 else 4
    step = word * (3 if is_rela else 2)
    n = size // step
    if first >= n:
        return set()
    start = off + first * step
    if img.cls == 64 and img.e == "<" and struct.pack("=H", 1) == b"\x01\x00":
        k = step // 4
        with memoryview(img.buf) as whole, whole[start: off + n * step] as raw, \
                raw.cast("B").cast("I") as halves:
            return set(compress(halves[3::k], map(operator.not_, map(skip.__contains__, halves[2::k]))))
    fmt = img.e + ("Q" if word == 8 else "I")
    out: set[int] = set()
    for i in range(n - first):
        info = struct.unpack_from(fmt, img.buf, start + i * step + word)[0]
        sym, rtype = (info >> 32, info & 0xFFFFFFFF) if word == 8 else (info >> 8, info & 0xFF)
        if rtype not in skip:
            out.add(sym)
    return out
