"""The file as ld.so maps it: the bytes of an ELF file plus its ``PT_LOAD`` map (virtual
address → file offset), with every address checked against the segments and every offset
against the file (glibc ``elf/dl-map-segments.h``).  The readers of :mod:`envlock.libs.elfread`,
:mod:`envlock.libs.elfversions`, :mod:`envlock.libs.elfhash` and :mod:`envlock.libs.elfsyms`
go through it.
"""

from __future__ import annotations

import mmap
import struct
from bisect import bisect_right
from typing import Any

__all__ = ["_Bad", "_Image"]

#: Longest string read from the string table (glibc reads until NUL; we stop here).
_MAX_STR = 1 << 16
#: Most version records followed in one chain.
_MAX_CHAIN = 1 << 16
#: The page the loader maps in (``GLRO(dl_pagesize)``).
_PAGE = mmap.PAGESIZE
_PAGE_MASK = ~(_PAGE - 1)


def _page_up(addr: int) -> int:
    return (addr + _PAGE - 1) & _PAGE_MASK


# -- the image: the file as ld.so maps it --------------------------------------------------


class _Bad(Exception):
    """An address or offset outside the file or the mapped image (internal).

    ``truncated`` is set when the address is file-backed by the headers but past the end of
    the file.
    """

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated


#: A piece of the mapped image: ``(start, end, base, data_end)``: the addresses
#: ``[start, end)`` hold the file's byte at ``base + address`` (``base`` ``None``: zeros);
#: a file byte past the end of the file below ``data_end`` (its segment's
#: ``p_vaddr + p_filesz``) means the file is truncated, above it reads as zero.
_Piece = tuple[int, int, int | None, int]
#: ``base`` of a ``PROT_NONE`` (inaccessible) piece: removed from the map.
_NONE: Any = object()


def _put(pieces: list[_Piece], starts: list[int], start: int, end: int, base: Any,
         data_end: int) -> None:
    """Map ``[start, end)`` over whatever ``pieces`` held there (``MAP_FIXED``, ``memset``,
    ``mprotect(PROT_NONE)`` when ``base`` is :data:`_NONE`)."""
    if end <= start:
        return
    i = max(0, bisect_right(starts, start) - 1)
    while i < len(pieces) and pieces[i][1] <= start:
        i += 1
    j = i
    left: list[_Piece] = []
    right: list[_Piece] = []
    while j < len(pieces) and pieces[j][0] < end:
        s, e, b, d = pieces[j]
        if s < start:
            left.append((s, start, b, d))
        if e > end:
            right.append((end, e, b, d))
        j += 1
    mid: list[_Piece] = [] if base is _NONE else [(start, end, base, data_end)]
    new = left + mid + right
    pieces[i:j] = new
    starts[i:j] = [p[0] for p in new]


def _layout(loads: list[tuple[int, int, int, int]], dyn: bool) -> tuple[list[_Piece], list[int]]:
    """The image as glibc 2.36 ``elf/dl-map-segments.h`` ``_dl_map_segments`` maps it, in
    order: for ``ET_DYN`` (``dyn``) the first segment's file mapping stretched over
    ``maplength`` (the last segment's ``p_vaddr + p_memsz`` past the first's page), the rest
    made ``PROT_NONE`` past the first segment when the segments leave holes; then each later
    segment's pages ``[ALIGN_DOWN(p_vaddr), ALIGN_UP(p_vaddr + p_filesz))`` mapped with
    ``MAP_FIXED`` from ``ALIGN_DOWN(p_offset)`` (over whatever an earlier segment put there)
    when not empty; after each segment its zero fill when ``p_memsz > p_filesz``: ``memset``
    from ``p_vaddr + p_filesz`` to the end of that page (or to ``p_vaddr + p_memsz`` when
    that comes first), anonymous zero pages from there to ``ALIGN_UP(p_vaddr + p_memsz)``."""
    pieces: list[_Piece] = []
    starts: list[int] = []
    cmds = [(v & _PAGE_MASK, _page_up(v + fs), v + fs, v + ms, (off & _PAGE_MASK) - (v & _PAGE_MASK))
            for v, ms, off, fs in loads]
    for k, (mapstart, mapend, dataend, allocend, base) in enumerate(cmds):
        if k == 0 and dyn:
            maplength = cmds[-1][3] - mapstart
            _put(pieces, starts, mapstart, mapstart + _page_up(maplength) if maplength > 0 else mapend,
                 base, dataend)
            if any(a[1] != b[0] for a, b in zip(cmds, cmds[1:])):
                _put(pieces, starts, mapend, cmds[-1][0], _NONE, 0)
        elif mapend > mapstart:
            _put(pieces, starts, mapstart, mapend, base, dataend)
        if allocend > dataend:
            zeropage = min(_page_up(dataend), allocend)
            _put(pieces, starts, dataend, zeropage, None, 0)
            if allocend > zeropage:
                _put(pieces, starts, zeropage, _page_up(allocend), None, 0)
    return pieces, starts


class _Image:
    """The file's bytes plus its ``PT_LOAD`` map (virtual address → file offset).

    The callers append each ``PT_LOAD`` as ``(p_vaddr, p_memsz, p_offset, p_filesz)`` to
    ``loads``, in program-header order, before the first read of an address; the map is
    :func:`_layout`'s, so a later segment's pages replace an earlier one's where they
    overlap (``ld.so --list`` of mutant 7820 of bench_mutants' seed read its Verneed from the
    third segment mapped over the first).

    :param buf: the whole file (an ``mmap`` or ``bytes``).
    """

    __slots__ = ("buf", "size", "e", "cls", "loads", "_map", "_mapped")

    def __init__(self, buf: Any, size: int) -> None:
        self.buf = buf
        self.size = size
        self.cls = 64 if buf[4] == 2 else 32
        self.e = "<" if buf[5] == 1 else ">"
        self.loads: list[tuple[int, int, int, int]] = []  # (vaddr, memsz, offset, filesz)
        self._map: tuple[list[_Piece], list[int]] = ([], [])
        self._mapped = -1

    def unpack(self, fmt: str, off: int) -> tuple[Any, ...]:
        s = struct.Struct(self.e + fmt)
        if off < 0 or off + s.size > self.size:
            raise _Bad("cannot read file data")
        return s.unpack_from(self.buf, off)

    def _piece(self, vaddr: int) -> _Piece:
        """The piece of the map holding ``vaddr``.

        :raises _Bad: where nothing (or ``PROT_NONE``) is mapped, or the file offset would
            be negative."""
        if self._mapped != len(self.loads):
            dyn = self.size >= 18 and self.unpack("H", 16)[0] == 3
            self._map, self._mapped = _layout(self.loads, dyn), len(self.loads)
        pieces, starts = self._map
        i = bisect_right(starts, vaddr) - 1
        if i < 0 or vaddr >= pieces[i][1]:
            raise _Bad("address outside the loaded segments")
        piece = pieces[i]
        if piece[2] is not None and piece[2] + vaddr < 0:
            raise _Bad("address outside the loaded segments")
        return piece

    def read(self, vaddr: int, n: int) -> bytes:
        """``n`` bytes of the mapped image at ``vaddr`` (zeros where the map holds zeros, or
        file bytes past the end of the file past their segment's ``p_filesz``).

        :raises _Bad: outside the map, or (``truncated``) file bytes of a segment's
            ``p_filesz`` past the end of the file."""
        out: list[bytes] = []
        at, stop = vaddr, vaddr + n
        while at < stop:
            start, end, base, data_end = self._piece(at)
            upto = min(end, stop)
            if base is None:
                out.append(b"\0" * (upto - at))
            else:
                off = base + at
                have = max(0, min(upto - at, self.size - off))
                if have < upto - at and min(upto, data_end) > at + have:
                    raise _Bad("cannot read file data: the file ends inside a segment", truncated=True)
                out.append(bytes(self.buf[off: off + have]) + b"\0" * (upto - at - have))
            at = upto
        return b"".join(out)

    def file_span(self, vaddr: int) -> tuple[int, int]:
        """File offset of ``vaddr`` and how many bytes of the file follow it in the map, in
        one run (``(0, 0)`` where the map holds zeros).

        :raises _Bad: as :meth:`read` for the byte at ``vaddr``."""
        _s, end, base, data_end = self._piece(vaddr)
        if base is None:
            return 0, 0
        off = base + vaddr
        if off >= self.size and vaddr < data_end:
            raise _Bad("cannot read file data: the file ends inside a segment", truncated=True)
        return off, max(0, min(end + base, self.size) - off)

    def cstr(self, vaddr: int) -> str:
        """A NUL-terminated string of the mapped image, read across the pieces of the map
        (zeros end it, and so does the end of the map: glibc would read on into whatever
        follows).

        :raises _Bad: when ``vaddr`` itself is outside the map, or the string is longer than
            :data:`_MAX_STR`."""
        parts: list[bytes] = []
        at, left = vaddr, _MAX_STR
        while left > 0:
            try:
                off, avail = self.file_span(at)
            except _Bad:
                if at == vaddr:
                    raise
                break
            if avail <= 0:
                if at == vaddr:
                    self.read(vaddr, 1)
                break
            take = min(avail, left)
            end = self.buf.find(b"\0", off, off + take)
            if end >= 0:
                parts.append(bytes(self.buf[off:end]))
                break
            parts.append(bytes(self.buf[off: off + take]))
            if avail >= left:
                raise _Bad("string too long")
            left -= take
            at += take
            if off + take >= self.size:
                break  # the rest of the file's last page: zeros
        return b"".join(parts).decode("utf-8", "surrogateescape")
