"""Write tiny x86-64 shared objects with :mod:`struct` (no compiler): ELF header, one
``PT_LOAD`` over the whole file, ``PT_DYNAMIC``, a string table; no section headers.

Enough for the loader to map and list them (``ld.so --list``) and for envlock's reader; used
for scenarios that would need thousands of gcc runs (a 1,500-deep DT_NEEDED chain).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 10, 14, 15, 29


def tiny_so(path: Path, *, soname: str | None = None, needed: Sequence[str] = (),
            runpath: str | None = None, rpath: str | None = None) -> Path:
    """Write a minimal ET_DYN object at ``path`` and return it."""
    strs = bytearray(b"\0")
    offs: dict[str, int] = {}
    for s in [*needed, *(x for x in (soname, runpath, rpath) if x)]:
        if s not in offs:
            offs[s] = len(strs)
            strs += s.encode() + b"\0"
    entries = [(DT_NEEDED, offs[n]) for n in needed]
    if soname:
        entries.append((DT_SONAME, offs[soname]))
    if runpath:
        entries.append((DT_RUNPATH, offs[runpath]))
    if rpath:
        entries.append((DT_RPATH, offs[rpath]))
    head = 64 + 2 * 56
    str_off = head
    pad = (-(str_off + len(strs))) % 8
    dyn_off = str_off + len(strs) + pad
    entries += [(DT_STRTAB, str_off), (DT_STRSZ, len(strs)), (0, 0)]
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in entries)
    total = dyn_off + len(dyn)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + bytes(7)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 7, 0, 0, 0, total, total, 0x1000)
    dynh = struct.pack("<IIQQQQQQ", 2, 4, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ehdr + load + dynh + bytes(strs) + bytes(pad) + dyn)
    return path
