"""The dynamic symbol table of an ELF file, read as ``elf/dl-lookup.c`` looks symbols up.

:func:`read_symbols` reads ``DT_SYMTAB`` with its versions (``DT_VERSYM``, the version
sections reached from ``PT_DYNAMIC``), sized by ``DT_GNU_HASH``/``DT_HASH`` as the loader
sizes it, never a section header; definitions are found only through the object's hash table,
as ``do_lookup_x`` finds them (:mod:`envlock.libs.elfhash`), so a symbol a damaged chain or
bloom word hides is not found.  :class:`Symbols` answers lookups (``provides``: the
``check_match`` version rules) and :class:`SymbolTable` reads one file's table once for both
phases of the symbol check.  The image and bounds are :mod:`envlock.libs.elfread`'s.

Versions are glibc's ``l_versions`` entries (``elf/dl-version.c`` ``_dl_check_map_versions``:
each ``Vernaux`` at its ``vna_other`` index, then each non-base ``Verdef`` at its ``vd_ndx``):
a reference or definition is *versioned* when its ``.gnu.version`` index names an entry of
nonzero hash (the relocation code passes no version otherwise, ``RESOLVE_MAP`` in
``elf/dl-reloc.c``).  Its version is then that entry's name, which may be ``""`` (a damaged
name), and ``None`` means unversioned.
"""

from __future__ import annotations

import os
import struct
import operator
from itertools import compress
from dataclasses import dataclass, field
from collections.abc import Iterable, Set as AbstractSet
from typing import Any

from envlock.libs.elf import (
    _PHENT,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERSYM,
    ElfInfo,
    PT_DYNAMIC,
    PT_LOAD,
)
from envlock.libs.elfhash import _HASHES, GnuHash, hash_table, name_hashes, symbol_count
from envlock.libs.elfrelocs import referenced_symbols
from envlock.libs.elfselfrefs import unfound_definitions, unreadable
from envlock.libs.elfread import _Bad, _dyn_entries, _dynamic, _Image, _MAX_STR, _open_buf, _phdr

__all__ = ["Definition", "Symbols", "SymbolTable", "provides", "read_symbols", "STT_TLS"]


STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STV_HIDDEN, STV_INTERNAL = 2, 1
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
STT_TLS = 6
#: Symbol types ``check_match`` accepts (``ALLOWED_STT``: NOTYPE, OBJECT, FUNC, COMMON, TLS,
#: GNU_IFUNC).
_ALLOWED_STT = frozenset({0, 1, 2, 5, 6, 10})
_BINDS = (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)

#: One definition of a name as ``check_match`` sees it, in hash-chain order:
#: ``(version, hidden, low, binds)`` — the version name or ``None`` (unversioned: no version
#: table, or an index whose ``l_versions`` hash is 0), the ``.gnu.version`` hidden bit
#: (0x8000), an index below 3 (an unversioned reference takes it at once), and whether
#: ``do_lookup_x`` binds to it once matched (global, weak or ``STB_GNU_UNIQUE``, not
#: hidden/internal; otherwise the object is skipped).
Definition = tuple[str | None, bool, bool, bool]


@dataclass(frozen=True, kw_only=True, slots=True)
class Symbols:
    """Dynamic symbols of one file, as the loader uses them.

    :ivar undefined: the symbols to bind (``st_shndx == SHN_UNDEF``, global or weak) as
        ``(name, version, file)``: the required version (``None`` if unversioned, ``""`` for
        a version whose name is empty) and the ``vn_file`` (DT_NEEDED name) it is required
        from (``""`` if none).
    :ivar defined: the definitions the hash table reaches that bind (global, weak or
        ``STB_GNU_UNIQUE``; not hidden/internal; of an ``ALLOWED_STT`` type; with a value) as
        ``(name, version)``; ``version`` is ``None`` for an unversioned definition.
    :ivar weak_undefined: names of undefined symbols bound weakly (missing is not an error).
    :ivar error: why the symbol table could not be read.
    :ivar found: ``name -> (Definition, …)`` for every name looked up that the hash table
        reaches (for :func:`provides`).
    """

    undefined: tuple[tuple[str, str | None, str], ...] = ()
    defined: tuple[tuple[str, str | None], ...] = ()
    weak_undefined: frozenset[str] = frozenset()
    error: str | None = None
    found: dict[str, tuple[Definition, ...]] = field(default_factory=dict)

    def index(self) -> dict[str, tuple[Definition, ...]]:
        """``name -> (Definition, …)`` of the definitions (for :func:`provides`)."""
        return self.found


def provides(index: dict[str, tuple[Definition, ...]], name: str, version: str | None) -> bool:
    """Whether one object's definitions (:meth:`Symbols.index`) satisfy a reference.

    glibc ``elf/dl-lookup.c`` ``check_match`` and ``do_lookup_x``, the definitions taken in
    hash-chain order: a versioned reference ``name@V`` (``V`` may be ``""``) matches a
    definition of version ``V`` or a non-hidden unversioned one; an unversioned reference
    (``None``) matches a definition of index 0–2 at once or, when there is exactly one
    non-hidden definition of a higher index, that one.  The first match decides: a local or
    hidden one makes the object define nothing.
    """
    defs = index.get(name)
    if not defs:
        return False
    if version is not None:
        for ver, hidden, _low, binds in defs:
            if ver == version or (ver is None and not hidden):
                return binds
        return False
    count, first = 0, False
    for _ver, hidden, low, binds in defs:
        if low:
            return binds
        if not hidden:
            count += 1
            if count == 1:
                first = binds
    return count == 1 and first


def read_symbols(path: str | os.PathLike[str], *, defined: bool = True,
                 undefined: bool = True, wanted: AbstractSet[str] | AbstractSet[bytes] | None = None,
                 info: ElfInfo | None = None) -> Symbols:
    """Read the dynamic symbol table through ``DT_SYMTAB``/``DT_STRTAB``/``DT_VERSYM``.

    The number of symbols comes from ``DT_HASH`` (``nchain``) or the ``DT_GNU_HASH`` chains;
    the undefined symbols are those a relocation names (:mod:`envlock.libs.elfrelocs`; all of
    them when the relocations cannot be read); definitions are those the hash table reaches
    (``do_lookup_x``'s walk, :mod:`envlock.libs.elfhash`).

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
    :meth:`symbols` answers as :func:`read_symbols` would, :meth:`lookup` looks names up
    through the hash table (each name once); :meth:`close` releases the file (a ``with``
    block does).

    :param path: the ELF file.
    :param info: its :func:`read_elf` facts, when already read.
    """

    def __init__(self, path: str | os.PathLike[str], *, info: ElfInfo | None = None) -> None:
        self._fixed: Symbols | None = None
        self._table: _Table | None = None
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
            self._table, self._close = got, close

    def symbols(self, *, defined: bool = True, undefined: bool = True,
                wanted: AbstractSet[str] | AbstractSet[bytes] | None = None) -> Symbols:
        """The symbols asked for (parameters as :func:`read_symbols`); never raises."""
        if self._fixed is not None or self._table is None:
            return self._fixed or Symbols()
        try:
            return self._table.select(defined, undefined, wanted)
        except (_Bad, struct.error, ValueError, IndexError, TypeError) as exc:
            return Symbols(error=str(exc) or type(exc).__name__)

    def lookup(self, names: Iterable[str]) -> dict[str, tuple[Definition, ...]]:
        """``name -> (Definition, …)`` for those of ``names`` that the hash table reaches
        (``do_lookup_x``'s candidates that pass ``check_match``'s type and name tests);
        never raises (a table that cannot be read defines nothing)."""
        if self._table is None:
            return {}
        try:
            return self._table.lookup(names)
        except (_Bad, struct.error, ValueError, IndexError, TypeError):
            return {}

    def close(self) -> None:
        """Release the file (later :meth:`symbols` calls are not allowed)."""
        self._close()
        self._close = lambda: None
        self._table = None

    def __enter__(self) -> SymbolTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _symbol_table(buf: Any, size: int, info: ElfInfo | None) -> Symbols | _Table:
    """The part of reading symbols that does not depend on what is asked: the headers, the
    dynamic section, the hash table and the version entries; returns a ``Symbols`` when there
    is nothing to select from, else the :class:`_Table` (which reads ``buf``: it must stay
    open while the table is used)."""
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
    table = hash_table(img, last)
    nsyms, first_hashed = symbol_count(table)
    try:
        refs = referenced_symbols(img, last)
    except (_Bad, struct.error):
        refs = None
    if refs:  # relocations index .dynsym past what the hash table counts (or without one) too
        nsyms = max(nsyms, max(refs) + 1)
    if nsyms <= 1:
        return Symbols()
    if info is not None:
        verneed, verdef = info.verneed, info.verdef
    else:
        facts = _dynamic(img, dyn)
        verneed, verdef = facts["verneed"], facts["verdef"]
    return _Table(img, last, nsyms, first_hashed, table, *_versions(verneed, verdef), refs=refs)


def _versions(verneed: Any, verdef: Any) -> tuple[dict[int, tuple[str, int, str]], int]:
    """glibc's ``l_versions`` and ``ndx_high``: index -> ``(name, hash, file)``, each
    ``Vernaux`` at its ``vna_other`` index, then each non-base ``Verdef`` at its ``vd_ndx``
    (file ``""``), later entries replacing earlier ones, and the highest index of either
    (``_dl_check_map_versions``).  ``({}, 0)`` when no index is above 0: glibc then keeps no
    version table."""
    out: dict[int, tuple[str, int, str]] = {}
    high = 0
    for vn in verneed:
        for a in vn.versions:
            out[a.index & 0x7FFF] = (a.name, a.hash, vn.file)
            high = max(high, a.index & 0x7FFF)
    for vd in verdef:
        high = max(high, vd.index & 0x7FFF)
        if not vd.base:
            out[vd.index & 0x7FFF] = (vd.name, vd.hash, "")
    return (out, high) if high else ({}, 0)


class _Table:
    """The dynamic symbol table of one mapped file, ready for :meth:`select` and
    :meth:`lookup` (the symbol columns are read when the undefined symbols are first asked
    for; a lookup reads only the symbols its hash chain names)."""

    def __init__(self, img: _Image, last: dict[int, int], nsyms: int, first_hashed: int,
                 table: Any, versions: dict[int, tuple[str, int, str]], high: int, *,
                 refs: set[int] | None = None) -> None:
        self.img, self.buf, self.hash, self.refs, self.first_hashed = img, img.buf, table, refs, first_hashed
        self.entsize, self.sym_addr = (24 if img.cls == 64 else 16), last[DT_SYMTAB]
        self.sym_off, sym_avail = img.file_span(self.sym_addr)
        self.nsyms = min(nsyms, sym_avail // self.entsize)
        self.str_addr = last[DT_STRTAB]
        self.str_off, str_avail = img.file_span(self.str_addr)
        self.str_end = self.str_off + str_avail
        self.versions, self.high = versions, high
        self.cache: dict[str, tuple[Definition, ...]] = {}
        self.vs_off, self.vs_n = 0, 0
        self.has_versyms = DT_VERSYM in last and bool(versions)
        if self.has_versyms:
            self.vs_off, vs_avail = img.file_span(last[DT_VERSYM])
            self.vs_n = min(self.nsyms, vs_avail // 2)
        self._u16 = struct.Struct(img.e + "H")
        self._sym = struct.Struct(img.e + ("IBBHQ" if img.cls == 64 else "IIIBBH"))
        self._cols: Any = None
        # DT_STRSZ bounds the string table we copy (the segment may go on for hundreds of MB); a
        # name past it is read from the image like the loader would.
        strsz = min(last.get(DT_STRSZ, str_avail), str_avail)
        self.strbuf = bytes(self.buf[self.str_off:self.str_off + strsz])
        self.nstr = len(self.strbuf)

    def versym(self, i: int) -> int | None:
        """``l_versyms[i]``, or ``None`` when the object keeps no version table."""
        if not self.has_versyms:
            return None
        if 0 <= i < self.vs_n:
            return self._u16.unpack_from(self.buf, self.vs_off + 2 * i)[0]  # type: ignore[no-any-return]
        return 0

    def version(self, ndx: int) -> tuple[str | None, str]:
        """``(version name or None, file)`` of ``.gnu.version`` index ``ndx``: versioned when
        ``l_versions[ndx]`` has a nonzero hash.

        An index past ``ndx_high`` (a reference whose Verneed is gone) makes glibc read past
        its ``calloc``'ed array of ``ndx_high + 1`` 24-byte entries, into the heap.  When that
        array is a multiple of 16 bytes, the first entry past it is malloc's padding (its name
        pointer, zero) and the next chunk's size word (its hash, never 0): a versioned
        reference with no name, printed as ``undefined symbol: S, version `` (mutants 836 and
        1293 of bench_mutants' seed).  Any other such entry is the next chunk's contents,
        which the file does not decide; it is taken as unversioned (glibc bound it so in
        mutants 140 and 162)."""
        ndx &= 0x7FFF
        if ndx > self.high:
            if ndx == self.high + 1 and (self.high + 1) % 2 == 0 and self.img.cls == 64:
                return "", ""
            return None, ""
        ent = self.versions.get(ndx)
        if ent is None or not ent[1]:
            return None, ""
        return ent[0], ent[2]

    def name_at(self, off: int) -> bytes:
        if off < self.nstr:
            e = self.strbuf.find(b"\0", off)
            return self.strbuf[off: e if e >= 0 else self.nstr]
        a = self.str_off + off
        if a >= self.str_end:  # past the string table's piece of the image: read on as glibc does
            try:
                return self.img.cstr(self.str_addr + off).encode("utf-8", "surrogateescape")
            except _Bad:
                return b""  # unmapped there: glibc would crash (not modelled)
        e = self.buf.find(b"\0", a, min(self.str_end, a + _MAX_STR))
        return bytes(self.buf[a: e if e >= 0 else min(self.str_end, a + _MAX_STR)])

    def symbol(self, i: int) -> tuple[int, int, int, int, int] | None:
        """``(st_name, st_info, st_other, st_shndx, st_value)`` of symbol ``i``, or ``None``
        when it lies outside the image (glibc would read whatever is mapped there)."""
        off = self.sym_off + i * self.entsize
        if i < 0 or i >= self.nsyms:
            try:
                raw = self.img.read(self.sym_addr + i * self.entsize, self.entsize)
            except _Bad:
                return None
            row = self._sym.unpack(raw)
        else:
            row = self._sym.unpack_from(self.buf, off)
        if self.img.cls == 64:
            return row[0], row[1], row[2], row[3], row[4]
        return row[0], row[3], row[4], row[5], row[1]

    def select(self, defined: bool, undefined: bool, wanted: Any) -> Symbols:
        und, weak = self._undefined() if undefined else ([], set())
        if not defined:
            return Symbols(undefined=tuple(und), weak_undefined=frozenset(weak))
        if wanted is None:
            cols = self._columns()
            wanted = {self.name_at(cols[0][i]) for i in range(max(1, self.first_hashed), self.nsyms)}
        names = [n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else n for n in wanted]
        found = self.lookup(names)
        dfn = [(name, ver) for name, defs in found.items() for ver, _h, _l, binds in defs if binds]
        return Symbols(undefined=tuple(und), defined=tuple(dfn), weak_undefined=frozenset(weak),
                       found=found)

    def _columns(self) -> Any:
        if self._cols is None:
            raw = bytes(self.buf[self.sym_off: self.sym_off + self.nsyms * self.entsize])
            self._cols = _columns(raw, self.img.cls, self.img.e)
        return self._cols

    def _undefined(self) -> tuple[list[tuple[str, str | None, str]], set[str]]:
        und: list[tuple[str, str | None, str]] = []
        weak: set[str] = set()
        st_name, st_info, st_other, st_shndx, _v = self._columns()
        # The .gnu.version entries as one column (entries past the file-backed bytes read as 0).
        vcol: list[int] = []
        if self.has_versyms:
            vraw = bytes(self.buf[self.vs_off: self.vs_off + 2 * self.vs_n])
            if (self.img.e == "<") == (struct.pack("=H", 1) == b"\x01\x00"):
                vcol = memoryview(vraw).cast("H").tolist()
            else:
                vcol = [v for (v,) in struct.iter_unpack(self.img.e + "H", vraw)]
        nvs, version, name_at = len(vcol), self.version, self.name_at
        # st_shndx == SHN_UNDEF, selected at C speed; only those a relocation names, when the
        # relocations could be read (glibc looks no other symbol up), and the object's own
        # definitions they name that its own hash table does not give back (elfselfrefs).
        todo: Any = compress(range(self.nsyms), map(operator.not_, st_shndx))
        if self.refs is not None:
            todo = sorted(self.refs.intersection(todo).union(unfound_definitions(self, self.refs, vcol)))
        for i in todo:
            if not i or st_info[i] < 16 or st_other[i] & 3 in (1, 2):  # null, local, internal/hidden:
                continue  # no lookup (RESOLVE_MAP, dl_symbol_visibility_binds_local_p)
            nm = name_at(st_name[i])
            if not nm and unreadable(self, st_name[i]):  # "" is looked up; an unmapped name is not
                continue
            name = nm.decode("utf-8", "surrogateescape")
            if self.has_versyms:
                ver, file = version(vcol[i] if i < nvs else 0)
            else:
                ver, file = None, ""
            und.append((name, ver, file))
            if st_info[i] >> 4 == STB_WEAK:
                weak.add(name)
        return und, weak

    def lookup(self, names: Iterable[str]) -> dict[str, tuple[Definition, ...]]:
        out: dict[str, tuple[Definition, ...]] = {}
        cache, table = self.cache, self.hash
        if table is None:
            return out
        find, known = table.candidates, _HASHES.get
        if not (isinstance(table, GnuHash) and table.nbuckets and table.nwords):
            for name in names:
                got = cache.get(name)
                if got is None:
                    hashes = known(name) or name_hashes(name)
                    idx = find(hashes)
                    got = cache[name] = self._definitions(hashes[0], idx) if idx else ()
                if got:
                    out[name] = got
            return out
        # The bloom filter of DT_GNU_HASH, tested here first: most names asked of an object
        # are not defined in it, and the filter says so in a few operations (not cached: a
        # cache hit would cost as much).
        bloom, bits, last, shift = table.bloom, table.bits, table.nwords - 1, table.shift
        for name in names:
            hashes = known(name) or name_hashes(name)
            h = hashes[1]
            mask = bloom[(h // bits) & last]
            if not (mask >> (h % bits)) & (mask >> ((h >> shift) % bits)) & 1:
                continue
            got = cache.get(name)
            if got is None:
                idx = find(hashes)
                got = cache[name] = self._definitions(hashes[0], idx) if idx else ()
            if got:
                out[name] = got
        return out

    def _definitions(self, name: bytes, idx: list[int]) -> tuple[Definition, ...]:
        """``do_lookup_x`` in this object for ``name``: the hash chain's candidates ``idx``
        that ``check_match`` does not reject by value, section, type or name."""
        out: list[Definition] = []
        for i in idx:
            sym = self.symbol(i)
            if sym is None:
                break
            st_name, info, other, shndx, value = sym
            stt = info & 0xF
            if shndx == SHN_UNDEF or (not value and shndx != SHN_ABS and stt != STT_TLS):
                continue
            if stt not in _ALLOWED_STT or self.name_at(st_name) != name:
                continue
            binds = (info >> 4) in _BINDS and (other & 3) not in (STV_HIDDEN, STV_INTERNAL)
            vs = self.versym(i)
            if vs is None:
                out.append((None, False, True, binds))
            else:
                out.append((self.version(vs)[0], bool(vs & 0x8000), (vs & 0x7FFF) < 3, binds))
        return tuple(out)


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
