"""GPU architectures compiled into a CUDA library: the ``.nv_fatbin`` section's entry headers.

torch's ``libtorch_cuda.so`` carries one cubin (``sm_80``) or PTX (``compute_90``) entry per
architecture it was built for; a GPU outside them runs only through PTX JIT, or not at all
("no kernel image is available for execution on the device").  Only the ELF header, the
section header table and the section-name string table (this is a section's content, which the
loader never maps, so sections are the right view here) and the fatbin entry headers are read,
with bounded seeks, never the whole multi-GB file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["fatbin_archs", "cached_fatbin_archs", "find_section"]

_FATBIN_MAGIC = 0xBA55ED50
_MAX_FATBIN_ENTRIES = 200_000


def _parse_fatbin_entries(read: Callable[[int, int], bytes], offset: int, size: int) -> tuple[set[str], str | None]:
    """Walk fatbin containers of a ``.nv_fatbin`` section and collect architectures.

    Layout (reverse-engineered, see ``docs/stack.md``): container header
    ``<u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 size>``, then entries with
    header ``<u16 kind (1 PTX, 2 cubin), u16 version, u32 header_size, u32 padded_size, …>``
    and ``u32 sm_version`` at offset 0x1c.  Only entry headers are read.

    :param read: ``read(offset, n) -> bytes``.
    :returns: (``{"sm_80", "compute_90", …}``, an error/warning or ``None``).
    """
    archs: set[str] = set()
    pos, end = offset, offset + size
    entries = 0
    while pos + 16 <= end:
        head = read(pos, 16)
        if len(head) < 16:
            return archs, "truncated .nv_fatbin section"
        magic, _ver, hsize, csize = struct.unpack("<IHHQ", head)
        if magic != _FATBIN_MAGIC:
            if not head.strip(b"\0"):
                pos += 16  # zero padding between containers
                continue
            return archs, f"unknown fatbin container at section offset {pos - offset}"
        epos, eend = pos + hsize, min(pos + hsize + csize, end)
        while epos + 0x20 <= eend:
            eh = read(epos, 0x20)
            if len(eh) < 0x20:
                break
            kind, _ev, ehsize, padded = struct.unpack_from("<HHII", eh, 0)
            sm = struct.unpack_from("<I", eh, 0x1C)[0]
            if kind == 2:
                archs.add(f"sm_{sm}")
            elif kind == 1:
                archs.add(f"compute_{sm}")
            entries += 1
            if ehsize == 0 or entries > _MAX_FATBIN_ENTRIES:
                break
            epos += ehsize + padded
        if entries > _MAX_FATBIN_ENTRIES:
            return archs, f"stopped after {_MAX_FATBIN_ENTRIES} fatbin entries"
        pos = pos + hsize + csize
        if hsize == 0:
            break
    return archs, None


#: ``e_ident[EI_CLASS]`` → (struct prefix is chosen by ``EI_DATA``) ELF header fields after
#: ``e_ident`` up to ``e_shstrndx``, and one section header (the System V gABI, "ELF Header"
#: and "Sections"; glibc's ``elf.h`` ``Elf32_Ehdr``/``Elf64_Ehdr``, ``Elf32_Shdr``/``Elf64_Shdr``).
_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_SHDR = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}
_SHN_XINDEX = 0xFFFF
#: Bounds on what one file may make us read: section headers and the name table.
_MAX_SECTIONS = 1 << 16
_MAX_SHSTRTAB = 16 << 20


class _NotElf(ValueError):
    """The file is not an ELF file this walk can read (the message says why)."""


def find_section(fh: BinaryIO, name: bytes) -> tuple[int, int] | None:
    """Find section ``name`` (e.g. ``b".nv_fatbin"``) in the open ELF file ``fh``.

    A small walk of the section header table, as ``readelf -S`` reads it: the ELF header gives
    ``e_shoff``/``e_shentsize``/``e_shnum``/``e_shstrndx`` (with the gABI's extended numbering:
    ``e_shnum == 0`` puts the count in section 0's ``sh_size``, ``e_shstrndx == SHN_XINDEX``
    the index in its ``sh_link``); names are offsets into the ``e_shstrndx`` string table.
    32- and 64-bit, either byte order.  Reads are bounded (:data:`_MAX_SECTIONS` headers,
    :data:`_MAX_SHSTRTAB` bytes of names).

    :param fh: a binary file open for reading (seekable).
    :param name: the section name, as bytes.
    :returns: ``(sh_offset, sh_size)`` in bytes of the first section of that name, or ``None``.
    :raises _NotElf: when ``fh`` is not an ELF file or its headers are inconsistent.
    :raises OSError: when reading fails.
    """
    ident = fh.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise _NotElf("bad ELF magic")
    cls, data = ident[4], ident[5]
    if cls not in _EHDR or data not in (1, 2):
        raise _NotElf(f"unknown ELF class {cls} or data encoding {data}")
    order = "<" if data == 1 else ">"
    ehdr = struct.Struct(order + _EHDR[cls])
    shdr = struct.Struct(order + _SHDR[cls])
    raw = fh.read(ehdr.size)
    if len(raw) < ehdr.size:
        raise _NotElf("truncated ELF header")
    (_type, _machine, _version, _entry, _phoff, shoff, _flags, _ehsize, _phentsize, _phnum,
     shentsize, shnum, shstrndx) = ehdr.unpack(raw)
    if shoff == 0:
        return None  # no section header table (stripped of it): no section can be named
    if shentsize < shdr.size:
        raise _NotElf(f"e_shentsize {shentsize} < {shdr.size}")

    def header(i: int) -> tuple[int, ...]:
        fh.seek(shoff + i * shentsize)
        b = fh.read(shdr.size)
        if len(b) < shdr.size:
            raise _NotElf(f"truncated section header {i}")
        return shdr.unpack(b)

    if shnum == 0 or shstrndx == _SHN_XINDEX:
        first = header(0)
        shnum = shnum or first[5]
        if shstrndx == _SHN_XINDEX:
            shstrndx = first[6]
    if shnum > _MAX_SECTIONS or shstrndx >= shnum:
        raise _NotElf(f"{shnum} sections, name table at index {shstrndx}")
    fh.seek(shoff)
    table = fh.read(shnum * shentsize)
    if len(table) < shnum * shentsize:
        raise _NotElf("truncated section header table")
    heads = [shdr.unpack_from(table, i * shentsize) for i in range(shnum)]
    str_off, str_size = heads[shstrndx][4], heads[shstrndx][5]
    if str_size > _MAX_SHSTRTAB:
        raise _NotElf(f"section name table of {str_size} bytes")
    fh.seek(str_off)
    names = fh.read(str_size)
    want = name + b"\0"
    for h in heads:
        if names[h[0]:h[0] + len(want)] == want:
            return h[4], h[5]
    return None


def fatbin_archs(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str | None]:
    """Return the GPU architectures embedded in ``path``'s ``.nv_fatbin`` section.

    Only the ELF header, the section headers (:func:`find_section`) and the fatbin entry headers
    are read (bounded seeks, never the whole multi-GB file).

    :returns: (sorted archs such as ``("compute_120", "sm_75", "sm_80")``, error or ``None``).
    """
    try:
        with open(path, "rb") as fh:
            try:
                sec = find_section(fh, b".nv_fatbin")
            except (_NotElf, struct.error) as exc:
                return (), f"{path}: not a readable ELF file ({exc})"
            if sec is None:
                return (), f"{path}: no .nv_fatbin section"

            def read(off: int, n: int) -> bytes:
                fh.seek(off)
                return fh.read(n)

            archs, err = _parse_fatbin_entries(read, sec[0], sec[1])
    except OSError as exc:
        return (), f"{path}: {exc.strerror or exc}"
    return tuple(sorted(archs, key=_arch_key)), err


def _arch_key(arch: str) -> tuple[int, str]:
    kind, _, num = arch.partition("_")
    return (int(num) if num.isdigit() else 0, kind)


def cached_fatbin_archs(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str | None]:
    """:func:`fatbin_archs`, kept by :func:`envlock.cache.memo` (namespace ``fatbin-archs``)
    while the file's signature is unchanged: reading thousands of entry headers of a 1 GB
    ``libtorch_cuda.so`` costs ~0.1 s warm and ~0.5 s on a cold page cache.  The answer depends
    on the file's bytes only; an answer with an error is not kept."""
    from envlock import cache as _cache

    real = os.path.realpath(path)

    def compute(rec: _cache.Recorder) -> tuple[tuple[str, ...], str | None]:
        rec.file(real)
        archs, err = fatbin_archs(real)
        if err:
            rec.uncacheable(err)
        return archs, err

    def decode(v: object) -> tuple[tuple[str, ...], str | None]:
        if not (isinstance(v, list) and len(v) == 2 and isinstance(v[0], list)):
            raise ValueError("bad entry")
        return tuple(str(a) for a in v[0]), v[1]

    return _cache.memo("fatbin-archs", {"v": 2, "path": real}, compute,
                       encode=lambda v: [list(v[0]), v[1]], decode=decode)
