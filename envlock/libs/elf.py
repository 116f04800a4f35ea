"""Facts about one ELF file, read the way the dynamic loader reads them.

glibc's ``ld.so`` never looks at section headers: it reads the ELF header, the program
headers, maps the ``PT_LOAD`` segments and reads the dynamic section (``PT_DYNAMIC``) from the
mapped image (glibc ``elf/dl-load.c`` ``open_verify``/``_dl_map_object_from_fd``,
``elf/get-dynamic-info.h``, ``elf/dl-version.c``).  :func:`read_elf` does the same with
:mod:`struct` over an ``mmap`` of the file: ELF header → program headers → ``PT_LOAD``
(virtual address → file offset) → ``PT_DYNAMIC`` → ``DT_STRTAB``/``DT_STRSZ``, ``DT_NEEDED``,
``DT_SONAME``, ``DT_RPATH``, ``DT_RUNPATH``, ``DT_FLAGS``, ``DT_FLAGS_1``,
``DT_VERNEED``/``DT_VERDEF`` (chains followed through ``vn_next``/``vd_next`` until 0, as glibc
does, with a visited set; ``DT_VERNEEDNUM``/``DT_VERDEFNUM`` are never trusted), ``DT_VERSYM``,
``DT_SYMTAB`` and ``DT_GNU_HASH``/``DT_HASH``.  Every address is checked against the segments
and every offset against the file; nothing loops more than the file could hold.  Only the
``.comment`` strings (compiler identification) come from section headers, because that is
where they live; a damaged section-header table just leaves them empty.

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
import errno
import mmap
import stat
import os
import struct
import time
from dataclasses import dataclass
from typing import Any

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
    "read_elf",
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
#: Most dynamic entries read (a file could not hold more and still be sensible).
_MAX_DYN = 1 << 16
#: Longest string read from the string table (glibc reads until NUL; we stop here).
_MAX_STR = 1 << 16
#: Most version records followed in one chain.
_MAX_CHAIN = 1 << 16


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
        ``"unsupported version 2 of Verneed record"``), else ``None``.
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
    # GNU objects may carry small ABI versions (unique symbols, …); SYSV must be 0.
    elif (osabi == 0 and abiversion != 0) or (osabi == 3 and abiversion > 4):
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


def gnu_hash(name: str | bytes) -> int:
    """The GNU hash (``dl_new_hash`` in glibc ``elf/dl-new-hash.h``: h = h * 33 + c)."""
    h = 5381
    for c in name.encode() if isinstance(name, str) else name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


# -- the image: the file as ld.so maps it --------------------------------------------------


class _Bad(Exception):
    """An address or offset outside the file or the mapped image (internal).

    ``truncated`` is set when the address is file-backed by the headers but past the end of
    the file.
    """

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated


class _Image:
    """The file's bytes plus its ``PT_LOAD`` map (virtual address → file offset).

    :param buf: the whole file (an ``mmap`` or ``bytes``).
    """

    __slots__ = ("buf", "size", "e", "cls", "loads", "dyn_vaddr", "phdrs", "ehdr")

    def __init__(self, buf: Any, size: int) -> None:
        self.buf = buf
        self.size = size
        self.cls = 64 if buf[4] == 2 else 32
        self.e = "<" if buf[5] == 1 else ">"
        self.loads: list[tuple[int, int, int, int]] = []  # (vaddr, memsz, offset, filesz)

    def unpack(self, fmt: str, off: int) -> tuple[Any, ...]:
        s = struct.Struct(self.e + fmt)
        if off < 0 or off + s.size > self.size:
            raise _Bad("cannot read file data")
        return s.unpack_from(self.buf, off)

    def segment_of(self, vaddr: int) -> tuple[int, int, int, int] | None:
        for seg in self.loads:
            if seg[0] <= vaddr < seg[0] + seg[1]:
                return seg
        return None

    def read(self, vaddr: int, n: int) -> bytes:
        """``n`` bytes of the mapped image at ``vaddr`` (zero fill past ``p_filesz``)."""
        seg = self.segment_of(vaddr)
        if seg is None or vaddr + n > seg[0] + seg[1]:
            raise _Bad("address outside the loaded segments")
        rel = vaddr - seg[0]
        have = max(0, min(n, seg[3] - rel))
        if have and seg[2] + rel + have > self.size:
            raise _Bad("cannot read file data: the file ends inside a segment", truncated=True)
        out = bytes(self.buf[seg[2] + rel: seg[2] + rel + have]) if have else b""
        return out + b"\0" * (n - have)

    def file_span(self, vaddr: int) -> tuple[int, int]:
        """File offset of ``vaddr`` and how many file-backed bytes follow it in its segment."""
        seg = self.segment_of(vaddr)
        if seg is None:
            raise _Bad("address outside the loaded segments")
        rel = vaddr - seg[0]
        if rel < seg[3] and seg[2] + rel >= self.size:
            raise _Bad("cannot read file data: the file ends inside a segment", truncated=True)
        end = min(seg[2] + seg[3], self.size)
        return seg[2] + rel, max(0, end - (seg[2] + rel))

    def cstr(self, vaddr: int) -> str:
        """A NUL-terminated string of the mapped image."""
        off, avail = self.file_span(vaddr)
        if avail <= 0:
            # Inside the zero-filled part of a segment: an empty string.
            self.read(vaddr, 1)
            return ""
        end = self.buf.find(b"\0", off, off + min(avail, _MAX_STR))
        if end < 0:
            if avail < _MAX_STR:
                # The string runs to the end of the file-backed bytes: zero fill ends it.
                end = off + avail
            else:
                raise _Bad("string too long")
        return bytes(self.buf[off:end]).decode("utf-8", "surrogateescape")


def _phdr(img: Any, off: int) -> tuple[int, int, int, int, int, int]:
    """One program header at ``off``: ``(p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_align)``
    (``Elf64_Phdr``/``Elf32_Phdr``: the field order differs between the classes)."""
    if img.cls == 64:
        p_type, _fl, p_offset, p_vaddr, _pa, p_filesz, p_memsz, p_align = img.unpack("IIQQQQQQ", off)
    else:
        p_type, p_offset, p_vaddr, _pa, p_filesz, p_memsz, _fl, p_align = img.unpack("IIIIIIII", off)
    return p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_align


def _open_buf(path: str) -> tuple[Any, int, Any]:
    """(buffer, size, closer) for ``path``: an mmap, or bytes for small/special files."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer (ld.so itself would block there;
    # envlock reports the file instead of hanging)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)")
        size = st.st_size
        if size >= 65536:
            try:
                mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                return mm, len(mm), mm.close
            except (OSError, ValueError):
                pass
        chunks = []
        total = 0
        while total < max(size, 1) + 1 and total < (64 << 20):
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            total += len(b)
        data = b"".join(chunks)
        return data, len(data), lambda: None
    finally:
        os.close(fd)


def read_elf(path: str | os.PathLike[str], *, cache: ElfCache | None = None) -> ElfInfo:
    """Read the loader-relevant facts of ``path``; never raises.

    :param path: the file (symlinks are followed, the path string is kept as given).
    :param cache: an :class:`ElfCache` to consult and fill, or ``None``.
    :returns: an :class:`ElfInfo`; on failure its ``error`` says why (``not-elf``,
        ``truncated``, ``corrupt``, ``unreadable``).
    """
    spath = os.fspath(path)
    try:
        st = os.stat(spath)
    except OSError as exc:
        return ElfInfo(path=spath, error=ElfError(kind="unreadable", message=exc.strerror or str(exc)))
    if cache is not None:
        hit = cache.get(st, spath)
        if hit is not None:
            return hit
    info = _parse(spath, st.st_size)
    if cache is not None and (info.error is None or info.error.kind != "unreadable"):
        cache.put(st, info)
    return info


def _parse(path: str, size: int) -> ElfInfo:
    try:
        buf, size, close = _open_buf(path)
    except OSError as exc:
        return ElfInfo(path=path, size=size,
                       error=ElfError(kind="unreadable", message=exc.strerror or str(exc)))
    try:
        return _parse_buf(path, buf, size)
    finally:
        close()


def _parse_buf(path: str, buf: Any, size: int) -> ElfInfo:
    head = bytes(buf[:64])
    if len(head) < 4 or head[:4] != b"\x7fELF":
        kind = "truncated" if b"\x7fELF".startswith(head) and head else "not-elf"
        msg = "file too short" if kind == "truncated" else "invalid ELF header"
        return ElfInfo(path=path, size=size, error=ElfError(kind=kind, message=msg))
    if len(head) < _EHDR[32]:
        # Shorter than the smallest ELF header (glibc reads the header first: "file too
        # short"); e_ident's class and data bytes may not even be there.
        return ElfInfo(path=path, size=size, error=ElfError(kind="truncated", message="file too short"))
    if head[4] not in (1, 2) or head[5] not in (1, 2):
        return ElfInfo(path=path, size=size,
                       error=ElfError(kind="corrupt", message="bad ELF class or data encoding"))
    img = _Image(buf, size)
    if size < _EHDR[img.cls]:
        return ElfInfo(path=path, size=size, error=ElfError(kind="truncated", message="file too short"))
    base: dict[str, Any] = dict(path=path, size=size, elfclass=img.cls, data="lsb" if img.e == "<" else "msb",
                osabi=head[7], abiversion=head[8])
    e_type, e_machine = img.unpack("HH", 16)
    base.update(type=TYPES.get(e_type, str(e_type)), machine=e_machine)
    if img.cls == 64:
        phoff, shoff = img.unpack("QQ", 32)
        phentsize, phnum, shentsize, shnum, shstrndx = img.unpack("HHHHH", 54)
    else:
        phoff, shoff = img.unpack("II", 28)
        phentsize, phnum, shentsize, shnum, shstrndx = img.unpack("HHHHH", 42)
    if phentsize != _PHENT[img.cls]:
        return ElfInfo(**base, error=ElfError(kind="corrupt",
                                              message="ELF file's phentsize not the expected size"))
    if phoff + phnum * phentsize > size:
        # open_verify's pread of the program headers comes back short.
        return ElfInfo(**base, error=ElfError(kind="truncated", message="cannot read file data"))
    comments = _comments(img, shoff, shentsize, shnum, shstrndx)
    base["comments"] = comments
    # The program headers, in order, as _dl_map_object_from_fd walks them.
    interp = None
    dyn: tuple[int, int] | None = None
    empty_dynamic = False
    load_error = None
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_align = _phdr(img, off)
        if p_type == PT_LOAD:
            if (p_vaddr - p_offset) & (PAGE_SIZE - 1) and load_error is None:
                load_error = "ELF load command address/offset not page-aligned"
            img.loads.append((p_vaddr, p_memsz, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            if p_filesz == 0:
                empty_dynamic = True
            else:
                dyn = (p_vaddr, p_memsz)
        elif p_type == PT_INTERP and interp is None:
            if p_offset < size:
                raw = bytes(buf[p_offset: p_offset + min(p_filesz, 4096)])
                interp = raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    if load_error is None and not img.loads:
        load_error = "object file has no loadable segments"
    if load_error is None and (empty_dynamic or (dyn is None and e_type == 3)):
        load_error = "object file has no dynamic section"
    base.update(interp=interp, load_error=load_error, has_dynamic=dyn is not None)
    if dyn is None or not img.loads:
        return ElfInfo(**base)
    try:
        facts = _dynamic(img, dyn[0])
    except _Bad as exc:
        kind = "truncated" if exc.truncated else "corrupt"
        return ElfInfo(**base, error=ElfError(kind=kind, message=str(exc)))
    if facts.pop("version_error", None) and base["load_error"] is None:
        base["load_error"] = "unsupported version of Verneed record"
    return ElfInfo(**base, **facts)


def _dyn_entries(img: _Image, vaddr: int) -> list[tuple[int, int]]:
    """The dynamic entries read from the mapped image until ``DT_NULL``
    (``elf_get_dynamic_info`` ignores ``p_memsz`` and reads until ``DT_NULL``)."""
    if img.cls == 64:
        step, fmt = 16, "qQ"
    else:
        step, fmt = 8, "iI"
    s = struct.Struct(img.e + fmt)
    out: list[tuple[int, int]] = []
    off, avail = img.file_span(vaddr)
    for k in range(_MAX_DYN):
        if (k + 1) * step <= avail:
            tag, val = s.unpack_from(img.buf, off + k * step)
        else:
            tag, val = s.unpack(img.read(vaddr + k * step, step))
        if tag == DT_NULL:
            return out
        out.append((tag, val))
    raise _Bad("dynamic section without DT_NULL")


def _dynamic(img: _Image, vaddr: int) -> dict[str, Any]:
    entries = _dyn_entries(img, vaddr)
    last: dict[int, int] = {}
    needed_offs: list[int] = []
    deps: list[tuple[str, int]] = []
    dep_kind = {DT_NEEDED: "needed", DT_FILTER: "filter", DT_AUXILIARY: "auxiliary"}
    for tag, val in entries:
        if tag in dep_kind:
            deps.append((dep_kind[tag], val))
        if tag == DT_NEEDED:
            needed_offs.append(val)
        else:
            last[tag] = val  # glibc keeps the last entry of each tag (l_info[tag])
    strtab = last.get(DT_STRTAB)

    def string(off: int) -> str:
        if strtab is None:
            raise _Bad("DT_STRTAB missing")
        return img.cstr(strtab + off)

    out: dict[str, Any] = {
        "needed": tuple(string(v) for v in needed_offs),
        "dyn_deps": (tuple((k, string(v)) for k, v in deps)
                     if len(deps) != len(needed_offs) else ()),
        "soname": string(last[DT_SONAME]) if DT_SONAME in last else None,
        "rpath": string(last[DT_RPATH]) if DT_RPATH in last else None,
        "runpath": string(last[DT_RUNPATH]) if DT_RUNPATH in last else None,
        "flags": last.get(DT_FLAGS, 0),
        "flags_1": last.get(DT_FLAGS_1, 0),
    }
    version_error = False
    verneed: list[NeededVersions] = []
    if DT_VERNEED in last:
        ent = last[DT_VERNEED]
        seen: set[int] = set()
        while ent not in seen and len(seen) < _MAX_CHAIN:
            seen.add(ent)
            vn_version, _cnt, vn_file, vn_aux, vn_next = struct.unpack(img.e + "HHIII", img.read(ent, 16))
            if vn_version != 1:
                version_error = True
                break
            vers = []
            aux = ent + vn_aux
            aseen: set[int] = set()
            while aux not in aseen and len(aseen) < _MAX_CHAIN:
                aseen.add(aux)
                vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack(
                    img.e + "IHHII", img.read(aux, 16))
                vers.append(VersionNeed(name=string(vna_name), weak=bool(vna_flags & VER_FLG_WEAK),
                                        index=vna_other, hash=vna_hash))
                if vna_next == 0:
                    break
                aux += vna_next
            verneed.append(NeededVersions(file=string(vn_file), versions=tuple(vers)))
            if vn_next == 0:
                break
            ent += vn_next
    verdef: list[VersionDef] = []
    if DT_VERDEF in last:
        ent = last[DT_VERDEF]
        seen = set()
        while ent not in seen and len(seen) < _MAX_CHAIN:
            seen.add(ent)
            vd_version, vd_flags, vd_ndx, _cnt, vd_hash, vd_aux, vd_next = struct.unpack(
                img.e + "HHHHIII", img.read(ent, 20))
            if vd_version != 1:
                version_error = True
                break
            names = []
            aux = ent + vd_aux
            aseen = set()
            while aux not in aseen and len(aseen) < _MAX_CHAIN:
                aseen.add(aux)
                vda_name, vda_next = struct.unpack(img.e + "II", img.read(aux, 8))
                names.append(string(vda_name))
                if vda_next == 0:
                    break
                aux += vda_next
            verdef.append(VersionDef(name=names[0] if names else "", index=vd_ndx,
                                     base=bool(vd_flags & VER_FLG_BASE), parents=tuple(names[1:]),
                                     hash=vd_hash))
            if vd_next == 0:
                break
            ent += vd_next
    out["verneed"] = tuple(verneed)
    out["verdef"] = tuple(verdef)
    out["version_error"] = version_error
    return out


def _comments(img: _Image, shoff: int, shentsize: int, shnum: int, shstrndx: int) -> tuple[str, ...]:
    """``.comment`` strings through the section headers; ``()`` when they are damaged."""
    want = 64 if img.cls == 64 else 40
    if not shoff or shentsize != want or shnum == 0 or shnum > 65535:
        return ()
    try:
        fmt = "IIQQQQIIQQ" if img.cls == 64 else "IIIIIIIIII"

        def sh(i: int) -> tuple[Any, ...]:
            return img.unpack(fmt, shoff + i * shentsize)

        strsec = sh(shstrndx)
        str_off, str_size = strsec[4], strsec[5]
        if str_off + str_size > img.size:
            return ()
        for i in range(shnum):
            name, stype, _f, _a, off, sz = sh(i)[:6]
            if stype != 1 or sz >= 65536 or off + sz > img.size or name >= str_size:
                continue
            end = img.buf.find(b"\0", str_off + name, str_off + str_size)
            if end < 0 or bytes(img.buf[str_off + name:end]) != b".comment":
                continue
            raw = bytes(img.buf[off:off + sz])
            return tuple(dict.fromkeys(s.decode("utf-8", "replace") for s in raw.split(b"\0") if s))
    except _Bad:
        return ()
    return ()


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
    (:func:`read_elf`) takes about as long as reading and decoding a stored JSON entry for
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
