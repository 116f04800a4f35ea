"""The symbol hash tables of an ELF file (``DT_GNU_HASH``, ``DT_HASH``), walked as glibc walks them.

glibc 2.36 finds a definition in an object only through its hash table (``elf/dl-lookup.c``
``do_lookup_x``; the table is set up by ``_dl_setup_hash``): with ``DT_GNU_HASH``, the bloom
filter word ``bloom[(h / C) & (nwords - 1)]`` must have bits ``h % C`` and
``(h >> shift) % C`` set (``C`` = 64 for ELFCLASS64, 32 for ELFCLASS32), then
``buckets[h % nbuckets]`` gives the first symbol index of the chain, and the chain is walked
(``l_gnu_chain_zero[symidx]``, the chain array shifted back by ``symoffset``) until an entry
with the low bit set; a symbol is a candidate when its chain entry equals ``h`` but for that
bit.  Without ``DT_GNU_HASH``, the SysV table: ``buckets[elf_hash % nbucket]``, then
``chain[symidx]`` until 0.  A symbol that a damaged table does not reach is not found, as in
glibc.  :func:`hash_table` reads the table of a mapped image; :func:`symbol_count` is how
many symbols the table says there are (for the symbol columns).
"""

from __future__ import annotations

import struct
from typing import Any

from envlock.libs.elf import DT_GNU_HASH, DT_HASH, elf_hash, gnu_hash
from envlock.libs.elfimage import _Bad

__all__ = ["GnuHash", "SysvHash", "hash_table", "name_hashes", "symbol_count"]

#: Most chain entries followed in one lookup (a damaged chain without its end bit).
_MAX_WALK = 1 << 20

#: name -> [UTF-8 bytes, GNU hash, SysV hash or None], shared by every table of a command
#: (the same names are looked up in every object of a scope).
_HASHES: dict[str, list[Any]] = {}
#: name bytes -> GNU hash, for the names :mod:`envlock.libs.elfselfrefs` hashes (an
#: object's own definitions that its relocations name), shared with the lookups.
_GNU: dict[bytes, int] = {}


def name_hashes(name: str) -> list[Any]:
    """``[name as bytes, gnu_hash, elf_hash or None]`` (the SysV hash filled in when first
    needed), kept for the next lookup of the same name."""
    got = _HASHES.get(name)
    if got is None:
        if len(_HASHES) > 1 << 18:
            _HASHES.clear()
        raw = name.encode("utf-8", "surrogateescape")
        h = _GNU.get(raw)
        got = _HASHES[name] = [raw, gnu_hash(raw) if h is None else h, None]
    return got


class GnuHash:
    """A ``DT_GNU_HASH`` table of one image (``img``: :class:`envlock.libs.elfimage._Image`):
    the bloom words and buckets read once, the chains read as they are walked.

    :raises envlock.libs.elfimage._Bad: when its header or buckets lie outside the image.
    """

    __slots__ = ("img", "nbuckets", "symoffset", "nwords", "shift", "bits", "bloom", "bucket",
                 "chain_addr", "chain_off", "chain_n", "_u32")

    def __init__(self, img: Any, addr: int) -> None:
        self.img = img
        self.nbuckets, self.symoffset, self.nwords, self.shift = struct.unpack(
            img.e + "IIII", img.read(addr, 16))
        word = 8 if img.cls == 64 else 4
        self.bits = 8 * word
        off, avail = img.file_span(addr + 16)
        if self.nwords * word + self.nbuckets * 4 > avail:
            raise _Bad("GNU hash table outside the file")
        self.bloom = struct.unpack_from(img.e + f"{self.nwords}" + ("Q" if word == 8 else "I"), img.buf, off)
        self.bucket = struct.unpack_from(img.e + f"{self.nbuckets}I", img.buf, off + self.nwords * word)
        self.chain_addr = addr + 16 + self.nwords * word + self.nbuckets * 4
        try:
            self.chain_off, avail = img.file_span(self.chain_addr)
        except _Bad:
            self.chain_off, avail = 0, 0
        self.chain_n = avail // 4
        self._u32 = struct.Struct(img.e + "I")

    def chain_entry(self, symidx: int) -> int | None:
        """``l_gnu_chain_zero[symidx]``, or ``None`` where that is outside the image."""
        k = symidx - self.symoffset
        if 0 <= k < self.chain_n:
            return self._u32.unpack_from(self.img.buf, self.chain_off + 4 * k)[0]  # type: ignore[no-any-return]
        try:
            return self._u32.unpack(self.img.read(self.chain_addr + 4 * k, 4))[0]  # type: ignore[no-any-return]
        except _Bad:
            return None

    def candidates(self, hashes: list[Any]) -> list[int]:
        """The symbol indexes ``do_lookup_x`` hands to ``check_match`` for the name of
        ``hashes`` (:func:`name_hashes`), in order."""
        h = hashes[1]
        nwords, bits = self.nwords, self.bits
        if not self.nbuckets or not nwords:
            return []  # glibc divides by zero / reads no bloom word: not modelled, nothing found
        mask = self.bloom[(h // bits) & (nwords - 1)]
        if not (mask >> (h % bits)) & (mask >> ((h >> self.shift) % bits)) & 1:
            return []
        symidx = self.bucket[h % self.nbuckets]
        out: list[int] = []
        if not symidx:
            return out
        for _ in range(_MAX_WALK):
            entry = self.chain_entry(symidx)
            if entry is None:
                break
            if not (entry ^ h) >> 1:
                out.append(symidx)
            if entry & 1:
                break
            symidx += 1
        return out

    def count(self) -> int:
        """How many symbols the chains reach: one past the end of the chain of the highest
        bucket (``symoffset`` when every bucket is empty)."""
        top = max(self.bucket, default=0)
        if top < self.symoffset:
            return self.symoffset
        i = top
        while 0 <= i - self.symoffset < self.chain_n:
            entry = self.chain_entry(i)
            i += 1
            if entry is None or entry & 1:
                break
        return i


class SysvHash:
    """A ``DT_HASH`` table of one image: ``nbucket``, ``nchain``, the buckets, the chains."""

    __slots__ = ("img", "nbucket", "nchain", "off", "avail")

    def __init__(self, img: Any, addr: int) -> None:
        self.img = img
        self.nbucket, self.nchain = struct.unpack(img.e + "II", img.read(addr, 8))
        self.off, self.avail = img.file_span(addr + 8)

    def _word(self, k: int) -> int | None:
        if 0 <= k and 4 * (k + 1) <= self.avail:
            return struct.unpack_from(self.img.e + "I", self.img.buf, self.off + 4 * k)[0]  # type: ignore[no-any-return]
        return None

    def candidates(self, hashes: list[Any]) -> list[int]:
        """The symbol indexes of the name's bucket chain, in order (each once)."""
        if hashes[2] is None:
            hashes[2] = elf_hash(hashes[0])
        out: list[int] = []
        if not self.nbucket:
            return out
        symidx = self._word(hashes[2] % self.nbucket)
        seen: set[int] = set()
        while symidx and symidx not in seen and len(seen) < _MAX_WALK:
            seen.add(symidx)
            out.append(symidx)
            symidx = self._word(self.nbucket + symidx)
        return out

    def count(self) -> int:
        """``nchain``: the number of symbols."""
        return self.nchain


def hash_table(img: Any, last: dict[int, int]) -> GnuHash | SysvHash | None:
    """The table ``do_lookup_x`` uses: ``DT_GNU_HASH`` when there is one, else ``DT_HASH``
    (``_dl_setup_hash``), else ``None`` (nothing can be found in the object)."""
    if DT_GNU_HASH in last:
        return GnuHash(img, last[DT_GNU_HASH])
    if DT_HASH in last:
        return SysvHash(img, last[DT_HASH])
    return None


def symbol_count(table: GnuHash | SysvHash | None) -> tuple[int, int]:
    """``(number of dynamic symbols, first index the hash table reaches)``."""
    if table is None:
        return 0, 0
    if isinstance(table, GnuHash):
        return table.count(), table.symoffset
    return table.count(), 0
