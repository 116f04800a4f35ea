"""The dynamic symbol table of an ELF file, read as ``elf/dl-lookup.c`` looks symbols up.

:func:`read_symbols` reads ``DT_SYMTAB`` with its versions (``DT_VERSYM``, the version
sections reached from ``PT_DYNAMIC``), sized by ``DT_GNU_HASH``/``DT_HASH`` as the loader
sizes it, never a section header; :class:`Symbols` answers lookups (``provides``: the
``check_match`` version rules) and :class:`SymbolTable` reads one file's table once for both
phases of the symbol check.  The image and bounds are :mod:`envlock.libs.elf`'s.
"""

from __future__ import annotations

import os
import struct
import operator
from itertools import compress
from dataclasses import dataclass
from collections.abc import Set as AbstractSet
from typing import Any

from envlock.libs.elf import (
    _PHENT,
    DT_GNU_HASH,
    DT_HASH,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERSYM,
    ElfInfo,
    PT_DYNAMIC,
    PT_LOAD,
)
from envlock.libs.elfread import _Bad, _dyn_entries, _dynamic, _Image, _MAX_STR, _open_buf, _phdr

__all__ = ["Symbols", "SymbolTable", "provides", "read_symbols", "STT_TLS"]



STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STV_HIDDEN, STV_INTERNAL = 2, 1
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
STT_TLS = 6
#: Symbol types ``check_match`` accepts (``ALLOWED_STT``: NOTYPE, OBJECT, FUNC, COMMON, TLS,
#: GNU_IFUNC).
_ALLOWED_STT = frozenset({0, 1, 2, 5, 6, 10})


@dataclass(frozen=True, kw_only=True, slots=True)
class Symbols:
    """Dynamic symbols of one file, as the loader uses them.

    :ivar undefined: the symbols to bind (``st_shndx == SHN_UNDEF``, global or weak) as
        ``(name, version, file)``: the required version (``""`` if none) and the ``vn_file``
        (DT_NEEDED name) it is required from (``""`` if none).
    :ivar defined: the definitions reachable through the hash table (global, weak or
        ``STB_GNU_UNIQUE``; not hidden/internal; of an ``ALLOWED_STT`` type; with a value) as
        ``(name, version)``; ``version`` is ``""`` for an unversioned definition.
    :ivar weak_undefined: names of undefined symbols bound weakly (missing is not an error).
    :ivar error: why the symbol table could not be read.
    :ivar hidden: the ``(name, version)`` of :attr:`defined` entries whose ``.gnu.version``
        index has the hidden bit (0x8000: a non-default version ``name@V``).
    :ivar second: the ``(name, version)`` of :attr:`defined` entries of version index 2, which
        an unversioned reference accepts directly (``check_match``: ``ndx >= 3`` only counts).
    """

    undefined: tuple[tuple[str, str, str], ...] = ()
    defined: tuple[tuple[str, str], ...] = ()
    weak_undefined: frozenset[str] = frozenset()
    error: str | None = None
    hidden: frozenset[tuple[str, str]] = frozenset()
    second: frozenset[tuple[str, str]] = frozenset()

    def index(self) -> dict[str, list[tuple[str, bool]]]:
        """``name -> [(version, hidden), …]`` of the definitions (for :func:`provides`);
        a version-index-2 definition is listed as unversioned too."""
        out: dict[str, list[tuple[str, bool]]] = {}
        hid, sec = self.hidden, self.second
        for name, ver in self.defined:
            key = (name, ver)
            lst = out.setdefault(name, [])
            lst.append((ver, key in hid))
            if key in sec and key not in hid:
                lst.append(("", False))
        return out


def provides(index: dict[str, list[tuple[str, bool]]], name: str, version: str) -> bool:
    """Whether a definition index (:meth:`Symbols.index`) satisfies a reference.

    glibc ``elf/dl-lookup.c`` ``check_match``: a versioned reference ``name@V`` matches a
    definition of version ``V`` (hidden or not) or an unversioned one (index 0/1); an
    unversioned reference matches an unversioned definition (index 0–2) or, when there is
    exactly one, a default (non-hidden) versioned definition.
    """
    defs = index.get(name)
    if not defs:
        return False
    if version:
        return any(v == version or v == "" for v, _h in defs)
    if any(v == "" for v, _h in defs):
        return True
    return sum(1 for _v, h in defs if not h) == 1


def read_symbols(path: str | os.PathLike[str], *, defined: bool = True,
                 undefined: bool = True, wanted: AbstractSet[str] | AbstractSet[bytes] | None = None,
                 info: ElfInfo | None = None) -> Symbols:
    """Read the dynamic symbol table through ``DT_SYMTAB``/``DT_STRTAB``/``DT_VERSYM``.

    The number of symbols comes from ``DT_HASH`` (``nchain``) or the ``DT_GNU_HASH`` chains;
    definitions are those reachable through the hash table (what ``do_lookup_x`` can find:
    with ``DT_GNU_HASH``, the symbols from ``symoffset`` on).

    :param path: the ELF file.
    :param defined: collect definitions.
    :param undefined: collect undefined symbols.
    :param wanted: collect only definitions of these names (``str`` or, cheaper for many
        calls, UTF-8 ``bytes``); ``None`` for all.
    :param info: the file's :func:`read_elf` facts, when already read (their version
        definitions and requirements are used instead of reading them again).
    :returns: :class:`Symbols`; never raises (``error`` is set instead).
    """
    with SymbolTable(path, info=info) as table:
        return table.symbols(defined=defined, undefined=undefined, wanted=wanted)


class SymbolTable:
    """The dynamic symbol table of one file, read once and then asked several times (what
    the file needs, later which of the wanted names it defines: the two phases of the symbol
    check), so that the headers, the symbol columns and the string table are not read again.
    :meth:`symbols` answers as :func:`read_symbols` would; :meth:`close` releases the file
    (a ``with`` block does).

    :param path: the ELF file.
    :param info: its :func:`read_elf` facts, when already read.
    """

    def __init__(self, path: str | os.PathLike[str], *, info: ElfInfo | None = None) -> None:
        self._fixed: Symbols | None = None
        self._select: Any = None
        self._close: Any = lambda: None
        try:
            buf, size, close = _open_buf(os.fspath(path))
        except OSError as exc:
            self._fixed = Symbols(error=exc.strerror or str(exc))
            return
        try:
            got = _symbol_table(buf, size, info if info is not None and info.ok else None)
        except (_Bad, struct.error, ValueError, IndexError, TypeError) as exc:
            close()
            self._fixed = Symbols(error=str(exc) or type(exc).__name__)
            return
        if isinstance(got, Symbols):
            close()
            self._fixed = got
        else:
            self._select, self._close = got, close

    def symbols(self, *, defined: bool = True, undefined: bool = True,
                wanted: AbstractSet[str] | AbstractSet[bytes] | None = None) -> Symbols:
        """The symbols asked for (parameters as :func:`read_symbols`); never raises."""
        if self._fixed is not None:
            return self._fixed
        if wanted is not None and wanted and isinstance(next(iter(wanted)), str):
            wanted = {n.encode("utf-8", "surrogateescape") for n in wanted}  # type: ignore[union-attr]
        try:
            return self._select(defined, undefined, wanted)  # type: ignore[no-any-return]
        except (_Bad, struct.error, ValueError, IndexError, TypeError) as exc:
            return Symbols(error=str(exc) or type(exc).__name__)

    def close(self) -> None:
        """Release the file (later :meth:`symbols` calls are not allowed)."""
        self._close()
        self._close = lambda: None
        self._select = None

    def __enter__(self) -> SymbolTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _symbol_table(buf: Any, size: int, info: ElfInfo | None) -> Symbols | Any:
    """The part of reading symbols that does not depend on what is asked: the headers, the
    dynamic section, the symbol columns and the string table; returns a ``Symbols`` when there
    is nothing to select from, else ``select(defined, undefined, wanted) -> Symbols`` (which
    reads ``buf``: it must stay open while ``select`` is used)."""
    if size < 64 or bytes(buf[:4]) != b"\x7fELF" or buf[4] not in (1, 2) or buf[5] not in (1, 2):
        return Symbols(error="not an ELF file")
    img = _Image(buf, size)
    if img.cls == 64:
        phoff = img.unpack("Q", 32)[0]
        phentsize, phnum = img.unpack("HH", 54)
    else:
        phoff = img.unpack("I", 28)[0]
        phentsize, phnum = img.unpack("HH", 42)
    if phentsize != _PHENT[img.cls]:
        return Symbols(error="bad program headers")
    dyn = None
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, p_offset, p_vaddr, p_filesz, p_memsz, _al = _phdr(img, off)
        if p_type == PT_LOAD:
            img.loads.append((p_vaddr, p_memsz, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC and p_filesz:
            dyn = p_vaddr
    if dyn is None:
        return Symbols()
    last: dict[int, int] = {}
    for tag, val in _dyn_entries(img, dyn):
        last[tag] = val
    if last.get(DT_SYMTAB) is None or last.get(DT_STRTAB) is None:
        return Symbols()
    # How many symbols, and from which index the hash table reaches.
    nsyms, first_hashed = _symbol_count(img, last)
    if nsyms <= 1:
        return Symbols()
    if info is not None:
        verneed, verdef = info.verneed, info.verdef
    else:
        facts = _dynamic(img, dyn)
        verneed, verdef = facts["verneed"], facts["verdef"]
    return _Table(img, last, nsyms, first_hashed, verneed, verdef).select


class _Table:
    """The dynamic symbol table of one mapped file as columns, ready for :meth:`select`."""

    def __init__(self, img: _Image, last: dict[int, int], nsyms: int, first_hashed: int,
                 verneed: Any, verdef: Any) -> None:
        buf = self.buf = img.buf
        self.first_hashed = first_hashed
        entsize = 24 if img.cls == 64 else 16
        sym_off, sym_avail = img.file_span(last[DT_SYMTAB])
        self.nsyms = nsyms = min(nsyms, sym_avail // entsize)
        self.str_off, str_avail = img.file_span(last[DT_STRTAB])
        self.str_end = self.str_off + str_avail
        # Version names by .gnu.version index.
        self.names: dict[int, str] = {}
        self.files: dict[int, str] = {}
        for vn in verneed:
            for a in vn.versions:
                self.names[a.index & 0x7FFF] = a.name
                self.files[a.index & 0x7FFF] = vn.file
        for vd in verdef:
            if not vd.base:
                self.names[vd.index & 0x7FFF] = vd.name
        # The .gnu.version entries as one column (entries past the file-backed bytes read as 0).
        vcol: list[int] = []
        if DT_VERSYM in last:
            vs_off, vs_avail = img.file_span(last[DT_VERSYM])
            vraw = bytes(buf[vs_off: vs_off + 2 * min(nsyms, vs_avail // 2)])
            if (img.e == "<") == (struct.pack("=H", 1) == b"\x01\x00"):
                vcol = memoryview(vraw).cast("H").tolist()
            else:
                vcol = [v for (v,) in struct.iter_unpack(img.e + "H", vraw)]
        self.vcol, self.nvs = vcol, len(vcol)
        raw = bytes(buf[sym_off: sym_off + nsyms * entsize])
        self.st_name, self.st_info, self.st_other, self.st_shndx, self.st_value = _columns(raw, img.cls, img.e)
        # DT_STRSZ bounds the string table we copy (the segment may go on for hundreds of MB); a
        # name past it is read from the image like the loader would.
        strsz = min(last.get(DT_STRSZ, str_avail), str_avail)
        self.strbuf = bytes(buf[self.str_off:self.str_off + strsz])
        self.nstr = len(self.strbuf)

    def versym(self, i: int) -> int:
        return self.vcol[i] if i < self.nvs else 0

    def name_at(self, off: int) -> bytes:
        if off < self.nstr:
            e = self.strbuf.find(b"\0", off)
            return self.strbuf[off: e if e >= 0 else self.nstr]
        a = self.str_off + off
        if a >= self.str_end:
            return b""
        e = self.buf.find(b"\0", a, min(self.str_end, a + _MAX_STR))
        return bytes(self.buf[a: e if e >= 0 else min(self.str_end, a + _MAX_STR)])

    def select(self, defined: bool, undefined: bool, wanted: Any) -> Symbols:
        und, weak = self._undefined() if undefined else ([], set())
        dfn, hidden, second = self._defined(wanted) if defined else ([], set(), set())
        return Symbols(undefined=tuple(und), defined=tuple(dfn), weak_undefined=frozenset(weak),
                       hidden=frozenset(hidden), second=frozenset(second))

    def _undefined(self) -> tuple[list[tuple[str, str, str]], set[str]]:
        und: list[tuple[str, str, str]] = []
        weak: set[str] = set()
        st_info, names, files = self.st_info, self.names, self.files
        # st_shndx == SHN_UNDEF, selected at C speed.
        for i in compress(range(self.nsyms), map(operator.not_, self.st_shndx)):
            if not i or st_info[i] < 16:  # the null entry, or STB_LOCAL
                continue
            nm = self.name_at(self.st_name[i])
            if not nm:
                continue
            name = nm.decode("utf-8", "surrogateescape")
            ndx = self.versym(i) & 0x7FFF
            ver = names.get(ndx, "") if ndx >= 2 else ""
            und.append((name, ver, files.get(ndx, "") if ver else ""))
            if st_info[i] >> 4 == STB_WEAK:
                weak.add(name)
        return und, weak

    def _defined(self, wanted: Any) -> tuple[list[tuple[str, str]], set[tuple[str, str]], set[tuple[str, str]]]:
        dfn: list[tuple[str, str]] = []
        hidden: set[tuple[str, str]] = set()
        second: set[tuple[str, str]] = set()
        ok_bind = (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)
        lo = max(1, self.first_hashed)
        idx = self._wanted(wanted, lo) if wanted is not None else list(range(lo, self.nsyms))
        st_shndx, st_info, st_other, st_value, st_name = (
            self.st_shndx, self.st_info, self.st_other, self.st_value, self.st_name)
        name_at = self.name_at
        pairs = [(i, nm) for i in idx
                 if st_shndx[i] != SHN_UNDEF and (st_info[i] >> 4) in ok_bind
                 and (st_info[i] & 0xF) in _ALLOWED_STT and (st_other[i] & 3) not in (1, 2)
                 and (st_value[i] or st_shndx[i] == SHN_ABS or (st_info[i] & 0xF) == STT_TLS)
                 and (nm := name_at(st_name[i]))]
        for i, nm in pairs:
            name = nm.decode("utf-8", "surrogateescape")
            vs = self.versym(i)
            ndx = vs & 0x7FFF
            ver = self.names.get(ndx, "") if ndx >= 2 else ""
            dfn.append((name, ver))
            if vs & 0x8000:
                hidden.add((name, ver))
            if ndx == 2:
                second.add((name, ver))
        return dfn, hidden, second

    def _wanted(self, wanted: Any, lo: int) -> list[int]:
        """Indexes of the symbols whose name is wanted, found at C speed: the wanted names'
        offsets in the string table, then the symbols pointing there.  A symbol pointing into
        the middle of a string (the linker's suffix merging: the byte before it is not NUL) is
        resolved on its own."""
        strbuf, nsyms = self.strbuf, self.nsyms
        window = self.st_name[lo:nsyms]
        parts = strbuf.split(b"\0")
        hitnames = wanted.intersection(parts)
        # the offsets of the wanted strings: part k starts after the k parts before it
        # and their NULs (summed from one wanted part to the next, at C speed)
        lens = list(map(len, parts))
        hit = set()
        pos = prev = 0
        for k in compress(range(len(parts)), map(hitnames.__contains__, parts)):
            pos += sum(lens[prev:k]) + (k - prev)
            hit.add(pos)
            prev = k
        idx = list(compress(range(lo, nsyms), map(hit.__contains__, window)))
        padded = b"\0" + strbuf  # padded[o] is the byte before offset o
        if window and max(window) < len(padded):
            odd = compress(range(lo, nsyms), map(padded.__getitem__, window))
        else:
            odd = compress(range(lo, nsyms), map(_mid_string(strbuf), window))
        idx += [i for i in odd if self.name_at(self.st_name[i]) in wanted]
        return idx


def _mid_string(strbuf: bytes) -> Any:
    """A C-speed predicate on string-table offsets: ``True`` for an offset inside a string
    (the byte before it is not NUL), i.e. a name shared with a longer one's tail."""
    padded = b"\0" + strbuf  # padded[o] is the byte before offset o
    get = padded.__getitem__
    n = len(padded)

    def pred(o: int) -> bool:
        return 0 < o < n and get(o) != 0

    return pred


def _columns(raw: bytes, cls: int, e: str) -> tuple[Any, Any, Any, Any, Any]:
    """``(st_name, st_info, st_other, st_shndx, st_value)`` columns of a symbol table."""
    n = len(raw) // (24 if cls == 64 else 16)
    if not n:
        return [], b"", b"", [], []
    if (e == "<") == (struct.pack("=H", 1) == b"\x01\x00"):
        mv = memoryview(raw)
        if cls == 64:
            return (mv.cast("I")[0::6].tolist(), raw[4::24], raw[5::24],
                    mv.cast("H")[3::12].tolist(), mv.cast("Q")[1::3].tolist())
        return (mv.cast("I")[0::4].tolist(), raw[12::16], raw[13::16],
                mv.cast("H")[7::8].tolist(), mv.cast("I")[1::4].tolist())
    if cls == 64:
        rows = list(struct.iter_unpack(e + "IBBHQQ", raw))
        return ([r[0] for r in rows], bytes(r[1] for r in rows), bytes(r[2] for r in rows),
                [r[3] for r in rows], [r[4] for r in rows])
    rows = list(struct.iter_unpack(e + "IIIBBH", raw))
    return ([r[0] for r in rows], bytes(r[3] for r in rows), bytes(r[4] for r in rows),
            [r[5] for r in rows], [r[1] for r in rows])


def _symbol_count(img: _Image, last: dict[int, int]) -> tuple[int, int]:
    """(number of dynamic symbols, first index the hash table reaches)."""
    if DT_GNU_HASH in last:
        addr = last[DT_GNU_HASH]
        nbuckets, symoffset, bloom_size, _shift = struct.unpack(img.e + "IIII", img.read(addr, 16))
        word = 8 if img.cls == 64 else 4
        b_addr = addr + 16 + bloom_size * word
        off, avail = img.file_span(b_addr)
        if nbuckets * 4 > avail:
            raise _Bad("GNU hash table outside the file")
        buckets = struct.unpack_from(img.e + f"{nbuckets}I", img.buf, off)
        top = max(buckets) if buckets else 0
        if top < symoffset:
            return symoffset, symoffset
        chain = b_addr + nbuckets * 4
        c_off, c_avail = img.file_span(chain)
        i = top
        limit = c_avail // 4
        while 0 <= i - symoffset < limit:
            (h,) = struct.unpack_from(img.e + "I", img.buf, c_off + (i - symoffset) * 4)
            i += 1
            if h & 1:
                return i, symoffset
        return i, symoffset
    if DT_HASH in last:
        _nb, nchain = struct.unpack(img.e + "II", img.read(last[DT_HASH], 8))
        return nchain, 0
    return 0, 0


