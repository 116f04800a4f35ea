"""Facts about one ELF file, read the way the dynamic loader reads them.

glibc's ``ld.so`` never looks at section headers: it reads the ELF header, the program
headers, maps the ``PT_LOAD`` segments and reads the dynamic section (``PT_DYNAMIC``) from the
mapped image (glibc ``elf/dl-load.c`` ``open_verify``/``_dl_map_object_from_fd``,
``elf/get-dynamic-info.h``, ``elf/dl-version.c``).  :func:`~envlock.libs.elfread.read_elf` does the same with
:mod:`struct` over an ``mmap`` of the file (:mod:`envlock.libs.elfread`): ELF header → program headers → ``PT_LOAD``
(virtual address → file offset) → ``PT_DYNAMIC`` → ``DT_STRTAB``/``DT_STRSZ``, ``DT_NEEDED``,
``DT_SONAME``, ``DT_RPATH``, ``DT_RUNPATH``, ``DT_FLAGS``, ``DT_FLAGS_1``,
``DT_VERNEED``/``DT_VERDEF`` (chains followed through ``vn_next``/``vd_next`` until 0, as glibc
does, with a visited set; ``DT_VERNEEDNUM``/``DT_VERDEFNUM`` are never trusted), ``DT_VERSYM``,
``DT_SYMTAB`` and ``DT_GNU_HASH``/``DT_HASH``.  Every address is checked against the segments
and every offset against the file; nothing loops more than the file could hold.  Only the
``.comment`` strings (compiler identification) come from section headers, because that is
where they live; a damaged section-header table just leaves them empty.  This module holds
the facts (:class:`ElfInfo` and its parts, the identification check, the hash functions, the
in-memory cache); the reading is :func:`envlock.libs.elfread.read_elf`'s.

A file that is not ELF, is truncated or is corrupt never raises: the result carries an
:class:`ElfError`, and :attr:`ElfInfo.load_error` gives the loader's own refusal message when
the headers are readable but glibc would not map the file.  :func:`check_ident` implements
``open_verify``'s checks on the first 64 bytes.  :func:`envlock.libs.elfsyms.read_symbols` reads the dynamic symbol
table with versions and :class:`~envlock.libs.elfsyms.Symbols` answers lookups as ``elf/dl-lookup.c``
``do_lookup_x``/``check_match`` does (only symbols reachable through the hash table).

Within one command, parsed facts are kept in memory by :class:`ElfCache`, keyed by the file's
full signature (``st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns``); nothing is kept on disk.
The ELF layouts are those of the System V gABI (https://www.sco.com/developers/gabi/) and of
the GNU extensions (glibc ``elf/elf.h``).
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
import time
from dataclasses import dataclass

__all__ = [
    "DF_1_NODEFLIB",
    "DF_1_NOOPEN",
    "DF_1_PIE",
    "HOST",
    "ElfCache",
    "ElfError",
    "ElfInfo",
    "IdentVerdict",
    "NeededVersions",
    "VersionDef",
    "VersionNeed",
    "check_ident",
    "elf_hash",
    "gnu_hash",
]

#: ``e_machine`` numbers envlock names (gABI); others are shown as numbers.
MACHINES: dict[int, str] = {
    3: "EM_386",
    8: "EM_MIPS",
    20: "EM_PPC",
    21: "EM_PPC64",
    22: "EM_S390",
    40: "EM_ARM",
    62: "EM_X86_64",
    183: "EM_AARCH64",
    243: "EM_RISCV",
    258: "EM_LOONGARCH",
}

#: ``e_type`` names (gABI).
TYPES: dict[int, str] = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}

#: ``EI_OSABI`` values glibc accepts on Linux: SYSV and GNU (``VALID_ELF_OSABI``).
_VALID_OSABI = (0, 3)

DF_1_NODEFLIB = 0x800
DF_1_NOOPEN = 0x40
DF_1_PIE = 0x08000000
VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SONAME, DT_RPATH = 0, 1, 4, 5, 6, 10, 14, 15
DT_RUNPATH, DT_FLAGS, DT_GNU_HASH, DT_VERSYM, DT_FLAGS_1 = 29, 30, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFB
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_AUXILIARY, DT_FILTER = 0x7FFFFFFD, 0x7FFFFFFF

#: The page size glibc checks ``PT_LOAD`` alignment against (``GLRO(dl_pagesize)``).
PAGE_SIZE = mmap.PAGESIZE


@dataclass(frozen=True, kw_only=True, slots=True)
class ElfError:
    """Why a file could not be read as ELF.

    :ivar kind: ``"not-elf"`` (no ELF magic), ``"truncated"`` (shorter than its headers say),
        ``"corrupt"`` (headers point outside the file or are inconsistent), ``"unreadable"``
        (the file could not be opened or read).
    :ivar message: one line, e.g. ``"invalid ELF header"``.
    """

    kind: str
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionNeed:
    """One required version (a ``Vernaux`` entry).

    :ivar name: the version name, e.g. ``"GLIBCXX_3.4.30"``.
    :ivar weak: ``VER_FLG_WEAK`` is set: the loader ignores it when missing.
    :ivar index: ``vna_other``, the index used in ``.gnu.version``.
    :ivar hash: ``vna_hash``, the SysV ELF hash of ``name`` as stored.
    """

    name: str
    weak: bool = False
    index: int = 0
    hash: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class NeededVersions:
    """One ``Verneed`` entry: the versions required from the provider named ``file``.

    :ivar file: ``vn_file``, the DT_NEEDED name of the provider (``"libstdc++.so.6"``).
    :ivar versions: the required versions, in file order.
    """

    file: str
    versions: tuple[VersionNeed, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionDef:
    """One ``Verdef`` entry.

    :ivar name: the version name (first ``Verdaux``).
    :ivar index: ``vd_ndx``.
    :ivar base: ``VER_FLG_BASE``: the entry naming the file itself.
    :ivar parents: names of the following ``Verdaux`` entries (the versions it inherits).
    :ivar hash: ``vd_hash`` as stored.
    """

    name: str
    index: int = 0
    base: bool = False
    parents: tuple[str, ...] = ()
    hash: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ElfInfo:
    """What the dynamic loader needs to know about one file.

    :ivar path: the path the file was read from (as given, not resolved).
    :ivar error: set when the file is not (readable) ELF; the other fields may then be empty.
    :ivar elfclass: 32 or 64.
    :ivar data: ``"lsb"`` (little-endian) or ``"msb"``.
    :ivar osabi: ``EI_OSABI`` (0 SYSV, 3 GNU/Linux).
    :ivar abiversion: ``EI_ABIVERSION``.
    :ivar type: ``e_type`` name (``"ET_DYN"``, ``"ET_EXEC"``, …).
    :ivar machine: ``e_machine`` number (62 = x86-64).
    :ivar interp: ``PT_INTERP`` (the program interpreter), if any.
    :ivar soname: ``DT_SONAME``.
    :ivar needed: ``DT_NEEDED`` strings in order.
    :ivar dyn_deps: when the file is a filter, every ``DT_NEEDED``, ``DT_FILTER`` (``ld -F``)
        and ``DT_AUXILIARY`` (``ld -f``) entry in the order of the dynamic section, as
        ``("needed" | "filter" | "auxiliary", string)`` (glibc ``elf/dl-deps.c`` walks them in
        that order); ``()`` for a file without filtees (then :attr:`needed` says it all).
    :ivar rpath: ``DT_RPATH`` string as stored (``$ORIGIN`` not expanded).
    :ivar runpath: ``DT_RUNPATH`` string as stored.
    :ivar flags: ``DT_FLAGS`` value.
    :ivar flags_1: ``DT_FLAGS_1`` value (``DF_1_NODEFLIB`` 0x800, ``DF_1_NOOPEN`` 0x40,
        ``DF_1_PIE`` 0x08000000).
    :ivar verneed: ``DT_VERNEED`` entries.
    :ivar verdef: ``DT_VERDEF`` entries.
    :ivar comments: NUL-separated strings of ``.comment`` (compiler identification).
    :ivar size: file size in bytes.
    :ivar has_dynamic: a non-empty ``PT_DYNAMIC`` exists.
    :ivar load_error: glibc's message when it would refuse to map the file whatever the mode
        (``"object file has no loadable segments"``, ``"object file has no dynamic section"``,
        ``"ELF load command address/offset not page-aligned"``, ``"cannot read file data"``,
        ``"unsupported version 2 of Verneed record"``, ``"DT_RELR without GLIBC_ABI_DT_RELR
        dependency"``), else ``None``.
    """

    path: str
    error: ElfError | None = None
    elfclass: int = 0
    data: str = ""
    osabi: int = 0
    abiversion: int = 0
    type: str = ""
    machine: int = 0
    interp: str | None = None
    soname: str | None = None
    needed: tuple[str, ...] = ()
    dyn_deps: tuple[tuple[str, str], ...] = ()
    rpath: str | None = None
    runpath: str | None = None
    flags: int = 0
    flags_1: int = 0
    verneed: tuple[NeededVersions, ...] = ()
    verdef: tuple[VersionDef, ...] = ()
    comments: tuple[str, ...] = ()
    size: int = 0
    has_dynamic: bool = False
    load_error: str | None = None

    @property
    def ok(self) -> bool:
        """``True`` when the file was read as ELF."""
        return self.error is None

    @property
    def machine_name(self) -> str:
        """``e_machine`` as a name (``"EM_X86_64"``) or ``"EM_<number>"``."""
        return MACHINES.get(self.machine, f"EM_{self.machine}")

    @property
    def effective_rpath(self) -> str | None:
        """``DT_RPATH`` as glibc uses it: ignored when ``DT_RUNPATH`` is also present.

        Source: glibc ``elf/get-dynamic-info.h`` ("If both RUNPATH and RPATH are given, the
        latter is ignored").
        """
        return None if self.runpath is not None else self.rpath

    @property
    def nodeflib(self) -> bool:
        """``DF_1_NODEFLIB`` (linked with ``-z nodefaultlib``): no cache, no default dirs."""
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def pie(self) -> bool:
        """``DF_1_PIE``: a position-independent executable (glibc refuses to dlopen it)."""
        return bool(self.flags_1 & DF_1_PIE)

    @property
    def noopen(self) -> bool:
        """``DF_1_NOOPEN`` (``-z nodlopen``): refused under dlopen."""
        return bool(self.flags_1 & DF_1_NOOPEN)

    def refusal(self, *, dlopen: bool, main: bool = False) -> str | None:
        """glibc's message if it would refuse to map this (already accepted) file.

        :param dlopen: the request comes from ``dlopen`` or from a dependency of a dlopen'ed
            object (``__RTLD_DLOPEN``).
        :param main: the file is the main program (``__RTLD_OPENEXEC``: ``ld.so FILE``,
            ``ldd``).
        :returns: the message, in glibc 2.36's order (``_dl_map_object_from_fd``): the
            mode-independent :attr:`load_error` first, then ``"cannot dynamically load
            executable"`` for ``ET_EXEC`` outside ``__RTLD_OPENEXEC``, then
            ``"cannot dynamically load position-independent executable"`` (``DF_1_PIE``) and
            ``"shared object cannot be dlopen()ed"`` (``DF_1_NOOPEN`` under dlopen), or
            ``None``.
        """
        if self.error is not None:
            return self.error.message
        if self.load_error and self.load_error != "object file has no dynamic section":
            return self.load_error
        if self.type == "ET_EXEC" and not main:
            return "cannot dynamically load executable"
        if self.load_error:
            return self.load_error
        if self.noopen and dlopen:
            return "shared object cannot be dlopen()ed"
        if self.pie and not main:
            return "cannot dynamically load position-independent executable"
        return None

    @property
    def has_versioning(self) -> bool:
        """Whether the loader keeps a version table for this file (``l_versyms``): some
        Verneed or Verdef entry has a nonzero index (glibc ``elf/dl-version.c``
        ``_dl_check_map_versions``, ``ndx_high > 0``).  Without one, ``check_match`` cannot
        tell versions apart (``elf/dl-lookup.c``)."""
        return any(v.index & 0x7FFF for n in self.verneed for v in n.versions) or any(
            d.index & 0x7FFF for d in self.verdef)

    def defined_versions(self) -> tuple[str, ...]:
        """Names of the versions this file defines (the base entry excluded)."""
        return tuple(d.name for d in self.verdef if not d.base)


# -- the identification check (glibc open_verify) ------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class IdentVerdict:
    """The loader's verdict on a candidate file's ELF header.

    :ivar status: ``"ok"`` (accept), ``"skip"`` (wrong class or machine: the search goes on
        silently) or ``"fatal"`` (the load fails, nothing more is searched).
    :ivar message: glibc's wording for ``"skip"``/``"fatal"``, e.g. ``"invalid ELF header"``.
    """

    status: str
    message: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class HostAbi:
    """The ELF class, data encoding and machine of the process being modelled."""

    elfclass: int = 64
    data: str = "lsb"
    machine: int = 62


#: The ABI of this machine's Python (where envlock runs), used as default host.
HOST = HostAbi(
    elfclass=64 if struct.calcsize("P") == 8 else 32,
    data="lsb" if struct.pack("=H", 1) == b"\x01\x00" else "msb",
    machine={"x86_64": 62, "aarch64": 183, "i686": 3, "ppc64le": 21, "s390x": 22,
             "riscv64": 243}.get(os.uname().machine, 62),
)

_EHDR = {64: 64, 32: 52}
_PHENT = {64: 56, 32: 32}


def check_ident(header: bytes, host: HostAbi = HOST) -> IdentVerdict:
    """Apply glibc's ``open_verify`` checks to the first bytes of a candidate file.

    :param header: at least the first 64 bytes of the file (fewer if the file is shorter).
    :param host: the process's class, data encoding and machine.
    :returns: an :class:`IdentVerdict`.  Source of the rules, their order and messages: glibc
        2.36 ``elf/dl-load.c`` ``open_verify`` and ``sysdeps/unix/sysv/linux/ldsodefs.h``
        (``VALID_ELF_OSABI``/``VALID_ELF_ABIVERSION``).  A wrong class and a wrong machine
        are skipped (the search goes on); a bad ``e_ident`` (byte order, OSABI, …) is fatal
        unless ``e_machine`` is also foreign, then it is skipped too (glibc 2.36 as observed;
        checked with the real loader in ``tests/libs/test_refusals.py``).
    """
    # glibc reads the ELF header first and complains about the length before the magic.
    if len(header) < _EHDR[host.elfclass]:
        return IdentVerdict(status="fatal", message="file too short")
    if header[:4] != b"\x7fELF":
        return IdentVerdict(status="fatal", message="invalid ELF header")
    ei_class = {1: 32, 2: 64}.get(header[4], 0)
    if ei_class != host.elfclass:
        return IdentVerdict(status="skip", message=f"wrong ELF class: ELFCLASS{ei_class or header[4]}")
    hfmt = "<" if host.data == "lsb" else ">"
    e_type, e_machine, e_version = struct.unpack_from(hfmt + "HHI", header, 16)
    data = {1: "lsb", 2: "msb"}.get(header[5], "")
    osabi, abiversion = header[7], header[8]
    ident_error = ""
    if data != host.data:
        want = "little" if host.data == "lsb" else "big"
        ident_error = f"ELF file data encoding not {want}-endian"
    elif header[6] != 1:
        ident_error = "ELF file version ident does not match current one"
    elif osabi not in _VALID_OSABI:
        ident_error = "ELF file OS ABI invalid"
    # GNU objects may carry small ABI versions (unique symbols, …); SYSV must be 0.  glibc 2.36
    # VALID_ELF_ABIVERSION: abiversion < LIBC_ABI_MAX (4 there; a real dlopen accepts 3, refuses 4).
    elif (osabi == 0 and abiversion != 0) or (osabi == 3 and abiversion > 3):
        ident_error = "ELF file ABI version invalid"
    elif any(header[9:16]):
        ident_error = "nonzero padding in e_ident"
    if ident_error:
        # glibc 2.36 (observed on Debian 12): a bad e_ident is skipped, not fatal, when
        # e_machine (read in the host's byte order) is not the host's — so a real foreign
        # byte-order build is passed over and the search goes on.
        if e_machine != host.machine:
            return IdentVerdict(status="skip", message=f"wrong machine {MACHINES.get(e_machine, e_machine)}")
        return IdentVerdict(status="fatal", message=ident_error)
    if e_version != 1:
        return IdentVerdict(status="fatal", message="ELF file version does not match current one")
    if e_machine != host.machine:
        return IdentVerdict(status="skip", message=f"wrong machine {MACHINES.get(e_machine, e_machine)}")
    if e_type not in (2, 3):
        return IdentVerdict(status="fatal", message="only ET_DYN and ET_EXEC can be loaded")
    phentsize = struct.unpack_from(hfmt + "H", header, 54 if ei_class == 64 else 42)[0]
    if phentsize != _PHENT[ei_class]:
        return IdentVerdict(status="fatal", message="ELF file's phentsize not the expected size")
    return IdentVerdict(status="ok")


# -- hashing -------------------------------------------------------------------------------


def elf_hash(name: str | bytes) -> int:
    """The SysV ELF hash of ``name`` (gABI "Hash Table"), as used in ``vna_hash``/``vd_hash``."""
    h = 0
    for c in name.encode() if isinstance(name, str) else name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


#: Base-33 digits: a byte ``c`` is ``c % 33 + 33 * (c // 33)``, two digits of which the
#: second is below 8 (:func:`gnu_hash`).
_B33 = b"0123456789abcdefghijklmnopqrstuvw"
_LOW33 = bytes(_B33[c % 33] for c in range(256))
_HIGH33 = bytes(_B33[c // 33] for c in range(256))
#: ``33 ** n`` modulo 2**32, for names shorter than ``int()``'s digit limit (4300).
_POW33 = [1]
for _ in range(4096):
    _POW33.append(_POW33[-1] * 33 & 0xFFFFFFFF)


def gnu_hash(name: str | bytes) -> int:
    """The GNU hash (``dl_new_hash`` in glibc ``elf/dl-new-hash.h``: h = h * 33 + c, from
    5381, modulo 2**32).  That is ``5381 * 33**n + sum(c_k * 33**(n-1-k))``, and the sum is
    the name read as a base-33 number whose digits are ``c % 33``, plus 33 times the one whose
    digits are ``c // 33``: two ``int(…, 33)`` at C speed instead of a loop per byte."""
    raw = name.encode() if isinstance(name, str) else name
    n = len(raw)
    if not n:
        return 5381
    if n >= len(_POW33):
        h = 5381
        for c in raw:
            h = (h * 33 + c) & 0xFFFFFFFF
        return h
    return (5381 * _POW33[n] + int(raw.translate(_LOW33), 33)
            + 33 * int(raw.translate(_HIGH33), 33)) & 0xFFFFFFFF


# -- facts kept for one command -------------------------------------------------------------

#: A file whose ctime is this recent (ns) may still change within one tick of the clock that
#: stamps files (the kernel's coarse clock: 1-10 ms): its facts are not kept (git's "racily
#: clean" entries; :data:`envlock.cache.RACY_NS`).
_RACY_NS = 20_000_000


class ElfCache:
    """Parsed ELF facts kept in memory for one command, keyed by the file's full signature
    ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``: the same file reached under
    several paths, or read again by the model, the owner lookups and the findings, is parsed
    once.  A file replaced or rewritten gets a new key (its ctime changes on every write, and
    cannot be set back), and a file changed within the last 20 ms is not kept at all, so
    stale facts are never used.

    Nothing is written to disk: reading a file's program headers and dynamic section
    (:func:`~envlock.libs.elfread.read_elf`) takes about as long as reading and decoding a stored JSON entry for
    it, and storing one costs more than reading it (measured on torch's 46 objects: parse
    ~16 ms, JSON read ~5 ms, JSON write ~15 ms), so a disk cache only slowed the cold path
    down (issue 11: "prefer making the cold path fast over caching").
    """

    def __init__(self) -> None:
        self._facts: dict[tuple[int, int, int, int, int], ElfInfo] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def get(self, st: os.stat_result, path: str) -> ElfInfo | None:
        """The facts kept for the file with stat ``st`` (read at ``path``, whose string the
        answer carries), or ``None``."""
        info = self._facts.get(self._key(st))
        if info is None:
            self.misses += 1
            return None
        self.hits += 1
        return info if info.path == path else dataclasses.replace(info, path=path)

    def put(self, st: os.stat_result, info: ElfInfo) -> None:
        """Keep ``info`` for the file with stat ``st``, unless the file changed too recently
        for its signature to vouch for its content."""
        if st.st_ctime_ns >= time.time_ns() - _RACY_NS:
            return
        self._facts[self._key(st)] = info
