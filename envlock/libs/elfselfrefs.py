"""An object's relocations that name its own definitions, looked up as glibc looks them up.

glibc 2.36 binds every relocation's symbol that is not ``STB_LOCAL`` and not hidden or
internal through the scope's hash tables (``RESOLVE_MAP`` in ``elf/dl-reloc.c``,
``_dl_lookup_symbol_x``/``do_lookup_x`` in ``elf/dl-lookup.c``), whether the object defines
it or not: a definition whose ``.dynstr`` name a flipped byte changed, or whose hash chain is
broken, is not found, and the load fails (``undefined symbol: crc72_z, version
ZLIB_1.2.9``) unless the reference is weak.  The object itself is in its scope, so a symbol
its own table gives back always binds; only the others need the scope.

:func:`unfound_definitions` decides that for the ``DT_GNU_HASH`` table without the general
lookup: it hashes each referenced name (:func:`envlock.libs.elf.gnu_hash`, once per name in a
command) and checks ``do_lookup_x``'s walk for that one symbol — the bloom word's two bits, the
bucket, no chain end and no other entry of the same hash between the bucket's first symbol and
this one, the chain entry's hash — and ``check_match``'s tests of the definition itself
(value, type, version index).  A ``DT_HASH`` table is walked (:mod:`envlock.libs.elfhash`).
"""

from __future__ import annotations

import operator
import struct
from collections import Counter
from collections.abc import Iterable
from itertools import chain as chain_from, compress, repeat
from typing import Any

from envlock.libs.elf import _HIGH33, _LOW33, _POW33, gnu_hash
from envlock.libs.elfhash import _GNU, GnuHash, name_hashes
from envlock.libs.elfimage import _Bad

__all__ = ["unfound_definitions", "unreadable"]

STB_GLOBAL, STB_GNU_UNIQUE = 1, 10
SHN_ABS = 0xFFF1
STT_TLS = 6
#: Symbol types ``check_match`` accepts (``ALLOWED_STT``).
_ALLOWED_STT = frozenset({0, 1, 2, 5, 6, 10})
#: ``st_info`` -> 1 for a global or ``STB_GNU_UNIQUE`` symbol; ``st_other`` -> 1 for default
#: or protected visibility (``dl_symbol_visibility_binds_local_p``: hidden and internal ones
#: bind locally, without a lookup).
_BINDS = bytes(1 if (b >> 4) in (STB_GLOBAL, STB_GNU_UNIQUE) else 0 for b in range(256))
#: ``st_info`` -> 1 for a symbol ``RESOLVE_MAP`` looks up and that must be found: not
#: ``STB_LOCAL``, not ``STB_WEAK`` (an invalid binding too: found, it is skipped as local).
_LOOKED_UP = bytes(0 if (b >> 4) in (0, 2) else 1 for b in range(256))
_VISIBLE = bytes(1 if (b & 3) in (0, 3) else 0 for b in range(256))
#: ``st_info`` -> 1 for a type ``check_match`` accepts.
_PLAIN_STT = bytes(1 if (b & 0xF) in _ALLOWED_STT else 0 for b in range(256))
#: ``5381 * 33**n`` modulo 2**32: where the GNU hash of a name of ``n`` bytes starts.
_START = [5381 * p & 0xFFFFFFFF for p in _POW33]


def unfound_definitions(table: Any, refs: set[int], vcol: list[int]) -> list[int]:
    """The indexes, among the symbols ``refs`` that relocations of ``table``'s object name,
    of its own definitions that need the scope: global or ``STB_GNU_UNIQUE`` (a weak one may
    stay unbound; a local one, or a hidden or internal one, is not looked up), that its own
    hash table does not give back for their name and version.

    :param table: the object's :class:`envlock.libs.elfsyms._Table`.
    :param refs: symbol indexes its relocations name (:mod:`envlock.libs.elfrelocs`).
    :param vcol: its ``.gnu.version`` column (``[]`` without one).
    :returns: sorted indexes; never raises for a damaged table (what cannot be read needs
        the scope).
    """
    st_name, st_info, st_other, st_shndx, st_value = table._columns()
    binds = map(operator.and_, st_info.translate(_LOOKED_UP), st_other.translate(_VISIBLE))
    looked_up = compress(range(len(st_name)), map(operator.mul, st_shndx, binds))
    mine = sorted(refs.intersection(looked_up))
    if not mine:
        return []
    hash_table = table.hash
    if not isinstance(hash_table, GnuHash) or not hash_table.nbuckets or not hash_table.nwords:
        return [i for i in mine if not _found_by_walk(table, i, vcol)]
    return _gnu_unfound(table, hash_table, mine, vcol, st_name, st_info, st_shndx, st_value)


def unreadable(table: Any, off: int) -> bool:
    """The string-table offset ``off`` of ``table`` (an :class:`envlock.libs.elfsyms._Table`)
    names no mapped byte: glibc would crash reading the name (not modelled), so the symbol
    is not looked up; an empty name that is mapped is."""
    if off < table.nstr:
        return False
    try:
        table.img.read(table.str_addr + off, 1)
    except _Bad:
        return True
    return False


def _self_match(table: Any, i: int, vcol: list[int], st_info: Any, st_shndx: Any, st_value: Any) -> bool:
    """``check_match`` accepts symbol ``i`` for the reference that is symbol ``i`` itself: it
    has a value (or is absolute or TLS), an allowed type, and either the reference is
    versioned (the same ``l_versions`` entry on both sides) or its index is below 3; and
    ``do_lookup_x`` takes its binding (global or ``STB_GNU_UNIQUE``)."""
    stt = st_info[i] & 0xF
    if not _BINDS[st_info[i]] or stt not in _ALLOWED_STT:
        return False
    if not st_value[i] and st_shndx[i] != SHN_ABS and stt != STT_TLS:
        return False
    if not table.has_versyms:
        return True
    vs = vcol[i] if i < len(vcol) else 0
    return (vs & 0x7FFF) < 3 or table.version(vs)[0] is not None


def _found_by_walk(table: Any, i: int, vcol: list[int]) -> bool:
    """Symbol ``i`` is the first of its name that the ``DT_HASH`` table's walk gives back."""
    if table.hash is None:
        return False
    cols = table._columns()
    name = table.name_at(cols[0][i])
    if not name and unreadable(table, cols[0][i]):
        return True  # could not be read: not looked up (glibc would crash)
    if not _self_match(table, i, vcol, cols[1], cols[3], cols[4]):
        return False
    return _first_of_name(table, i, name,
                          table.hash.candidates(name_hashes(name.decode("utf-8", "surrogateescape"))))


def _gnu_unfound(table: Any, gh: GnuHash, mine: list[int], vcol: list[int], st_name: Any,
                 st_info: Any, st_shndx: Any, st_value: Any) -> list[int]:
    """:func:`unfound_definitions` for a ``DT_GNU_HASH`` table (see the module's text).

    Done a column at a time (``map`` at C speed; a loop per symbol cost twice as much on
    ``libtorch_cpu.so``'s 43,792): the names' hashes (:func:`_hashes`), then the symbols
    whose chain entry, bloom bits, bucket (the first symbol of its run, the usual case),
    value, type or version index are not the plain case are walked one by one
    (:func:`_walk`); those it does not give back need the scope."""
    so = gh.symoffset
    nchain = max(0, min(gh.chain_n, table.nsyms - so))  # the chains of the symbols there are
    raw = bytes(gh.img.buf[gh.chain_off: gh.chain_off + 4 * nchain])
    if gh.img.e == "<" and struct.pack("=H", 1) == b"\x01\x00":
        chain = memoryview(raw).cast("I").tolist()
    else:
        chain = [c for (c,) in struct.iter_unpack(gh.img.e + "I", raw)]
    offs = list(map(st_name.__getitem__, mine))
    names, hs = _hashes(table, offs)
    # A name that could not be read (glibc would crash) is not looked up; "" in the table is.
    keep = [bool(n) or o < table.nstr or not unreadable(table, o) for n, o in zip(names, offs)]
    if not all(keep):
        mine, hs = list(compress(mine, keep)), list(compress(hs, keep))
    ks = list(map(operator.sub, mine, repeat(so)))
    if not mine or ks[0] < 0 or ks[-1] >= nchain:
        return [i for i, h in zip(mine, hs) if not _walk(table, gh, i, h, chain, vcol)]
    # Where each run of the chains starts (the position after the previous end bit).
    ends = list(compress(range(nchain), map((1).__and__, chain)))
    starts = [0, *map((1).__add__, ends)]
    sizes = map(operator.sub, [*map((1).__add__, ends), nchain], starts)
    run = list(chain_from.from_iterable(map(repeat, starts, sizes)))
    bits, last, shift, bloom = gh.bits, gh.nwords - 1, gh.shift, gh.bloom
    words = list(map(bloom.__getitem__, map(operator.and_, map(operator.floordiv, hs, repeat(bits)), repeat(last))))
    good = map(operator.and_, map(operator.and_, map(operator.rshift, words, map(operator.mod, hs, repeat(bits))),
                                  map(operator.rshift, words, map(operator.mod, map(operator.rshift, hs, repeat(shift)),
                                                                  repeat(bits)))), repeat(1))
    same = map(operator.not_, map(operator.rshift, map(operator.xor, map(chain.__getitem__, ks), hs), repeat(1)))
    first = map(operator.sub, map(gh.bucket.__getitem__, map(operator.mod, hs, repeat(gh.nbuckets))), repeat(so))
    at_start = map(operator.eq, first, map(run.__getitem__, ks))
    # check_match's tests of the symbol itself: a value, an allowed type, a version index
    # below 3 or one of a versioned l_versions entry; then a binding do_lookup_x takes.
    plain_type = map(operator.and_, map(st_info.translate(_PLAIN_STT).__getitem__, mine),
                     map(st_info.translate(_BINDS).__getitem__, mine))
    valued = map(bool, map(st_value.__getitem__, mine))
    if table.has_versyms:
        vss = list(map(vcol.__getitem__, mine)) if mine[-1] < len(vcol) else [
            vcol[i] if i < len(vcol) else 0 for i in mine]
        ok_vs = {vs: (vs & 0x7FFF) < 3 or table.version(vs)[0] is not None for vs in set(vss)}
        versioned: Any = map(ok_vs.__getitem__, vss)
    else:
        versioned = repeat(True)
    fast = map(operator.and_, map(operator.and_, map(operator.and_, good, same), map(operator.and_, at_start, valued)),
               map(operator.and_, plain_type, versioned))
    # Positions whose run holds another entry of the same hash (a name with several
    # versions): the walk decides which one check_match meets first.
    shared: set[int] = set()
    hv = list(map(operator.rshift, chain, repeat(1)))
    keys = list(map(operator.or_, map(operator.lshift, run, repeat(31)), hv)) if len(set(hv)) < nchain else []
    if len(set(keys)) < len(keys):
        twice = {key for key, n in Counter(keys).items() if n > 1}
        shared = set(compress(range(nchain), map(twice.__contains__, keys)))
    fast = map(operator.and_, fast, map(operator.not_, map(shared.__contains__, ks)))
    slow = compress(zip(mine, hs), map(operator.not_, fast))
    return [i for i, h in slow if not _walk(table, gh, i, h, chain, vcol)]


def _hashes(table: Any, offs: list[int]) -> tuple[list[bytes], list[int]]:
    """The names at the string-table offsets ``offs`` and their GNU hashes, kept in
    ``_GNU`` for the command (:func:`envlock.libs.elf.gnu_hash`'s base-33 reading, a column at
    a time)."""
    strbuf, nstr, find = table.strbuf, table.nstr, table.strbuf.find
    ends = list(map(find, repeat(b"\0"), offs))
    if -1 in ends or any(map(operator.ge, offs, repeat(nstr))):
        names = [table.name_at(o) for o in offs]
    else:
        names = list(map(strbuf.__getitem__, map(slice, offs, ends)))
    if len(_GNU) > 1 << 19:
        _GNU.clear()
    known: list[Any] = list(map(_GNU.get, names))
    if None not in known:
        return names, known
    if b"" in names or max(map(len, names)) >= len(_START):
        hs = list(map(gnu_hash, names))
    else:
        low = map(int, map(bytes.translate, names, repeat(_LOW33)), repeat(33))
        high = map(operator.mul, map(int, map(bytes.translate, names, repeat(_HIGH33)), repeat(33)), repeat(33))
        hs = list(map(operator.and_, map(operator.add, map(operator.add, map(_START.__getitem__, map(len, names)),
                                                           low), high), repeat(0xFFFFFFFF)))
    _GNU.update(zip(names, hs))
    return names, hs


def _walk(table: Any, gh: GnuHash, i: int, h: int, chain: list[int], vcol: list[int]) -> bool:
    """``do_lookup_x``'s walk for the name of symbol ``i`` (hash ``h``) gives back symbol
    ``i`` itself, accepted by ``check_match``: the bloom bits, then from the bucket's first
    symbol to the chain's end bit, the first symbol of that hash and name."""
    cols = table._columns()
    if not _self_match(table, i, vcol, cols[1], cols[3], cols[4]):
        return False
    name = table.name_at(cols[0][i])
    return _first_of_name(table, i, name, gh.candidates([name, h, None]))


def _first_of_name(table: Any, i: int, name: bytes, candidates: Iterable[int]) -> bool:
    """Whether symbol ``i`` is the first of the hash table's ``candidates`` (in its walk's
    order) that bears ``name``: the one ``do_lookup_x`` would take (a candidate that cannot
    be read ends the walk: not found)."""
    for j in candidates:
        if j == i:
            return True
        sym = table.symbol(j)
        if sym is None or table.name_at(sym[0]) == name:
            return False
    return False
