"""Reading ``/etc/ld.so.cache``, the index ``ldconfig`` writes and the loader consults.

Three layouts exist (glibc ``sysdeps/generic/dl-cache.h``, ``elf/cache.c``):

* the old libc5-era format, magic ``ld.so-1.7.0``, 12-byte entries whose string offsets
  count from the end of the entry array;
* the new format, magic ``glibc-ld.so.cache`` + ``1.1``, a 48-byte header, 24-byte entries
  with a 64-bit ``hwcap`` field, string offsets from the start of the new header, and an
  optional extension directory (generator string, glibc-hwcaps subdirectory names);
* the combined ("compat") file: an old part followed, 8-byte aligned, by a complete new part
  (which the loader prefers).

:func:`parse_ld_cache` is a pure parser over bytes; :func:`read_ld_cache` reads
``<root>/etc/ld.so.cache``.  :meth:`LdCache.lookup` applies the loader's selection rules
(``elf/dl-cache.c`` ``search_cache``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CacheEntry", "LdCache", "flags_text", "libcmp", "parse_ld_cache", "read_ld_cache"]

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
EXT_MAGIC = 0xEAA42174
EXT_TAG_GENERATOR = 0
EXT_TAG_HWCAPS = 1
HWCAP_EXTENSION_BIT = 1 << 62

#: ``FLAG_REQUIRED_MASK`` values and how ``ldconfig -p`` names them (``sysdeps/generic/ldconfig.h``).
_ABI_NAMES = {
    0x0000: "",
    0x0100: "64bit",  # SPARC_LIB64
    0x0300: "x86-64",
    0x0400: "64bit",  # S390
    0x0500: "64bit",  # POWERPC
    0x0600: "N32",
    0x0700: "64bit",  # MIPS64 N64
    0x0800: "x32",
    0x0900: "hard-float",
    0x0A00: "AArch64",
    0x0B00: "soft-float",
    0x0C00: "nan2008",
    0x0D00: "N32,nan2008",
    0x0E00: "64bit,nan2008",
    0x0F00: "soft-float",
    0x1000: "double-float",
    0x1100: "soft-float",
    0x1200: "double-float",
}
_TYPE_NAMES = {0: "libc4", 1: "ELF", 2: "libc5", 3: "libc6"}

#: The flags the loader accepts per ELF machine (``sysdeps/*/dl-cache.h``
#: ``_dl_cache_check_flags``); machines not listed accept ``1`` and ``3``.
ACCEPTED_FLAGS: dict[int, tuple[int, ...]] = {62: (0x0303,), 183: (0x0A03,)}


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheEntry:
    """One cache entry.

    :ivar key: the name looked up (a SONAME, or a dev-link name such as ``libz.so``).
    :ivar path: the full path stored for it.
    :ivar flags: type (low byte: 3 = libc6) and ABI (high byte: 0x03 = x86-64).
    :ivar hwcap: the raw 64-bit ``hwcap`` field (0 for an ordinary entry).
    :ivar hwcaps_subdir: the glibc-hwcaps subdirectory (``"x86-64-v3"``) for a named-hwcaps
        entry, else ``None``.
    """

    key: str
    path: str
    flags: int
    hwcap: int = 0
    hwcaps_subdir: str | None = None

    @property
    def legacy_hwcap(self) -> bool:
        """A pre-2.33 hwcap bitmask entry (ignored by glibc ≥ 2.37, and by this model)."""
        return self.hwcap != 0 and self.hwcaps_subdir is None

    @property
    def isa_level(self) -> int:
        """The ISA level bits (32–41) of a named-hwcaps entry."""
        return (self.hwcap >> 32) & 0x3FF


@dataclass(frozen=True, kw_only=True, slots=True)
class LdCache:
    """A parsed ``ld.so.cache``.

    :ivar path: the file read (``""`` for bytes parsed directly).
    :ivar format: ``"old"``, ``"new"`` or ``"compat"``.
    :ivar entries: in file order (``ldconfig -p`` order).
    :ivar generator: the extension's generator string (``ldconfig (…) release version 2.36``).
    :ivar error: why the file could not be used (then ``entries`` is empty).
    """

    path: str = ""
    format: str = ""
    entries: tuple[CacheEntry, ...] = ()
    generator: str | None = None
    error: str | None = None
    index: Mapping[str, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.entries and not self.index:
            idx: dict[str, list[int]] = {}
            for i, e in enumerate(self.entries):
                idx.setdefault(_libkey(e.key), []).append(i)
            object.__setattr__(self, "index", {k: tuple(v) for k, v in idx.items()})

    def lookup(
        self,
        name: str,
        *,
        machine: int = 62,
        hwcaps_active: tuple[str, ...] = (),
    ) -> CacheEntry | None:
        """The entry the loader picks for ``name``.

        :param name: the DT_NEEDED or dlopen string (no slash).
        :param machine: ELF ``e_machine`` of the process (selects the accepted flags).
        :param hwcaps_active: the glibc-hwcaps subdirectories the CPU supports, best first.
        :returns: the entry, or ``None``.  Rules (``elf/dl-cache.c`` ``search_cache``):
            keys compare with :func:`libcmp`; among entries with accepted flags, a
            named-hwcaps entry for an active subdirectory wins (best priority), otherwise
            the first plain entry; legacy hwcap-mask entries are skipped.
        """
        ok_flags = ACCEPTED_FLAGS.get(machine, (1, 3))
        best: CacheEntry | None = None
        best_rank = len(hwcaps_active)
        for i in self.index.get(_libkey(name), ()):
            e = self.entries[i]
            if e.flags not in ok_flags:
                continue
            if e.hwcaps_subdir is not None:
                if e.hwcaps_subdir in hwcaps_active:
                    rank = hwcaps_active.index(e.hwcaps_subdir)
                    if rank < best_rank:
                        best, best_rank = e, rank
                continue
            if best is not None:
                return best
            if e.hwcap:
                continue
            return e
        return best


def _libkey(name: str) -> str:
    """A key equal for exactly the names :func:`libcmp` finds equal (digit runs as numbers)."""
    return re.sub(r"\d+", lambda m: str(int(m.group())), name)


def libcmp(a: str, b: str) -> int:
    """glibc's ``_dl_cache_libcmp``: digit runs compare as numbers, other bytes as bytes.

    :returns: negative, zero or positive, like C ``strcmp``.
    """
    x, y = a.encode(), b.encode()
    i = j = 0
    while i < len(x) and j < len(y):
        cx, cy = x[i], y[j]
        if 48 <= cx <= 57:
            if 48 <= cy <= 57:
                vi = 0
                while i < len(x) and 48 <= x[i] <= 57:
                    vi = vi * 10 + x[i] - 48
                    i += 1
                vj = 0
                while j < len(y) and 48 <= y[j] <= 57:
                    vj = vj * 10 + y[j] - 48
                    j += 1
                if vi != vj:
                    return vi - vj
                continue
            return 1
        if 48 <= cy <= 57:
            return -1
        if cx != cy:
            return cx - cy
        i += 1
        j += 1
    return (len(x) - i) - (len(y) - j)


def flags_text(entry: CacheEntry) -> str:
    """The parenthesised description ``ldconfig -p`` prints (``libc6,x86-64``)."""
    typ = _TYPE_NAMES.get(entry.flags & 0xFF, "unknown")
    abi = _ABI_NAMES.get(entry.flags & 0xFF00, "")
    text = f"{typ},{abi}" if abi else typ
    if entry.hwcaps_subdir is not None:
        text += f', hwcap: "{entry.hwcaps_subdir}"'
    elif entry.hwcap:
        text += f", hwcap: {entry.hwcap:#018x}"
    return text


def _cstr(data: bytes, off: int) -> str | None:
    if off >= len(data):
        return None
    end = data.find(b"\0", off)
    if end < 0:
        return None
    return data[off:end].decode("utf-8", "surrogateescape")


def parse_ld_cache(data: bytes, *, path: str = "") -> LdCache:
    """Parse the bytes of an ``ld.so.cache`` file (any of the three formats).

    :param data: the whole file.
    :param path: where it came from, recorded in the result.
    :returns: an :class:`LdCache`; a malformed file gives ``error`` set and no entries
        (never raises).
    """
    try:
        return _parse(data, path)
    except (struct.error, ValueError, IndexError) as exc:
        return LdCache(path=path, error=f"malformed ld.so.cache: {exc}")


def _parse(data: bytes, path: str) -> LdCache:
    if data.startswith(NEW_MAGIC):
        return _parse_new(data, 0, path, "new")
    if not data.startswith(OLD_MAGIC):
        return LdCache(path=path, error="not an ld.so.cache file (unknown magic)")
    nlibs = struct.unpack_from("<I", data, 12)[0]
    old_end = 16 + 12 * nlibs
    if old_end > len(data):
        raise ValueError(f"{nlibs} entries do not fit in {len(data)} bytes")
    new_off = (old_end + 7) & ~7
    if data[new_off:new_off + len(NEW_MAGIC)] == NEW_MAGIC:
        return _parse_new(data, new_off, path, "compat")
    entries = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from("<iII", data, 16 + 12 * i)
        k, v = _cstr(data, old_end + key), _cstr(data, old_end + value)
        if k is None or v is None:
            raise ValueError(f"entry {i}: string offset outside the file")
        entries.append(CacheEntry(key=k, path=v, flags=flags))
    return LdCache(path=path, format="old", entries=tuple(entries))


def _parse_new(data: bytes, base: int, path: str, fmt: str) -> LdCache:
    nlibs, _len_strings, flags = struct.unpack_from("<IIB", data, base + 20)
    endian = "<"
    if flags & 3 == 3:
        endian = ">"
        nlibs, _len_strings = struct.unpack_from(">II", data, base + 20)
    ext_off = struct.unpack_from(endian + "I", data, base + 32)[0]
    if base + 48 + 24 * nlibs > len(data):
        raise ValueError(f"{nlibs} entries do not fit in {len(data)} bytes")
    generator = None
    hwcaps: list[str] = []
    if ext_off and ext_off + 8 <= len(data):
        magic, count = struct.unpack_from(endian + "II", data, ext_off)
        if magic == EXT_MAGIC:
            for i in range(count):
                tag, _f, off, size = struct.unpack_from(endian + "IIII", data, ext_off + 8 + 16 * i)
                if off + size > len(data):
                    raise ValueError(f"extension section {i} outside the file")
                if tag == EXT_TAG_GENERATOR:
                    generator = data[off:off + size].decode("utf-8", "replace")
                elif tag == EXT_TAG_HWCAPS and off % 4 == 0 and size % 4 == 0:
                    for j in range(size // 4):
                        soff = struct.unpack_from(endian + "I", data, off + 4 * j)[0]
                        hwcaps.append(_cstr(data, base + soff) or "")
    entries = []
    for i in range(nlibs):
        e_flags, key, value, _osv, hwcap = struct.unpack_from(endian + "iIIIQ", data, base + 48 + 24 * i)
        k, v = _cstr(data, base + key), _cstr(data, base + value)
        if k is None or v is None:
            raise ValueError(f"entry {i}: string offset outside the file")
        sub = None
        if hwcap and ((hwcap >> 32) & ~0x3FF) == (HWCAP_EXTENSION_BIT >> 32):
            idx = hwcap & 0xFFFFFFFF
            sub = hwcaps[idx] if idx < len(hwcaps) else f"<hwcaps #{idx}>"
        entries.append(CacheEntry(key=k, path=v, flags=e_flags, hwcap=hwcap, hwcaps_subdir=sub))
    return LdCache(path=path, format=fmt, entries=tuple(entries), generator=generator)


def read_ld_cache(root: str | os.PathLike[str] = "/") -> LdCache:
    """Read ``<root>/etc/ld.so.cache``.

    :param root: the system root (sysroot); ``"/"`` for this machine.
    :returns: an :class:`LdCache`; a missing file gives ``error="… not found"`` and no entries
        (the loader then simply skips the cache step).
    """
    p = os.path.join(os.fspath(root), "etc", "ld.so.cache")
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as exc:
        return LdCache(path=p, error=f"{p}: {exc.strerror or exc}")
    return parse_ld_cache(data, path=p)
