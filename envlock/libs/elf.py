"""Facts about one ELF file, as the dynamic loader sees them.

:func:`read_elf` returns an :class:`ElfInfo`: the ELF identification (class, data encoding,
OSABI), type and machine, ``PT_INTERP``, the dynamic section's ``DT_SONAME``,
``DT_NEEDED``, ``DT_RPATH``, ``DT_RUNPATH``, ``DT_FLAGS_1``, the symbol-version requirements
(``.gnu.version_r``) and definitions (``.gnu.version_d``) and the ``.comment`` strings.
Only headers and the few sections needed are read (pyelftools parses lazily from the
stream), so a 1 GB ``libtorch_cuda.so`` costs the same as a small library.

A file that is not ELF, is truncated or is corrupt never raises: the result carries an
:class:`ElfError`.  :func:`check_ident` implements glibc's ``open_verify`` acceptance rules
on the first 64 bytes (``elf/dl-load.c``) without pyelftools, so the loader model can accept
or reject a candidate cheaply.

Parsed facts can be kept in an on-disk :class:`ElfCache` keyed by
``(st_dev, st_ino, st_size, st_mtime_ns)``; :func:`read_elf` uses it when given one.
The ELF layouts are those of the System V gABI (https://www.sco.com/developers/gabi/) and of
the GNU symbol-versioning extension (glibc ``elf/elf.h``).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "HOST",
    "ElfCache",
    "ElfError",
    "ElfInfo",
    "IdentVerdict",
    "NeededVersions",
    "Symbols",
    "VersionDef",
    "VersionNeed",
    "check_ident",
    "default_cache_dir",
    "elf_hash",
    "read_elf",
    "read_symbols",
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
VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2


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
    :ivar hash: ``vna_hash``, the SysV ELF hash of ``name``.
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
    :ivar hash: ``vd_hash``.
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
    :ivar rpath: ``DT_RPATH`` string as stored (``$ORIGIN`` not expanded).
    :ivar runpath: ``DT_RUNPATH`` string as stored.
    :ivar flags_1: ``DT_FLAGS_1`` value (``DF_1_NODEFLIB`` = 0x800).
    :ivar verneed: ``.gnu.version_r`` entries.
    :ivar verdef: ``.gnu.version_d`` entries.
    :ivar comments: NUL-separated strings of ``.comment`` (compiler identification).
    :ivar size: file size in bytes.
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
    rpath: str | None = None
    runpath: str | None = None
    flags_1: int = 0
    verneed: tuple[NeededVersions, ...] = ()
    verdef: tuple[VersionDef, ...] = ()
    comments: tuple[str, ...] = ()
    size: int = 0

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

    def defined_versions(self) -> tuple[str, ...]:
        """Names of the versions this file defines (the base entry excluded)."""
        return tuple(d.name for d in self.verdef if not d.base)

    def to_json(self) -> dict[str, Any]:
        """The facts as JSON-ready dict (for :class:`ElfCache`; the path is not stored)."""
        return {
            "error": [self.error.kind, self.error.message] if self.error else None,
            "elfclass": self.elfclass,
            "data": self.data,
            "osabi": self.osabi,
            "abiversion": self.abiversion,
            "type": self.type,
            "machine": self.machine,
            "interp": self.interp,
            "soname": self.soname,
            "needed": list(self.needed),
            "rpath": self.rpath,
            "runpath": self.runpath,
            "flags_1": self.flags_1,
            "verneed": [
                [n.file, [[v.name, v.weak, v.index, v.hash] for v in n.versions]]
                for n in self.verneed
            ],
            "verdef": [[d.name, d.index, d.base, list(d.parents), d.hash] for d in self.verdef],
            "comments": list(self.comments),
            "size": self.size,
        }

    @classmethod
    def from_json(cls, path: str, data: dict[str, Any]) -> ElfInfo:
        """Rebuild from :meth:`to_json` output, for the file at ``path``.

        :raises KeyError, TypeError, ValueError: when ``data`` is not such a dict.
        """
        err = data["error"]
        return cls(
            path=path,
            error=ElfError(kind=err[0], message=err[1]) if err else None,
            elfclass=int(data["elfclass"]),
            data=str(data["data"]),
            osabi=int(data["osabi"]),
            abiversion=int(data["abiversion"]),
            type=str(data["type"]),
            machine=int(data["machine"]),
            interp=data["interp"],
            soname=data["soname"],
            needed=tuple(data["needed"]),
            rpath=data["rpath"],
            runpath=data["runpath"],
            flags_1=int(data["flags_1"]),
            verneed=tuple(
                NeededVersions(
                    file=f,
                    versions=tuple(
                        VersionNeed(name=v[0], weak=bool(v[1]), index=int(v[2]), hash=int(v[3]))
                        for v in vs
                    ),
                )
                for f, vs in data["verneed"]
            ),
            verdef=tuple(
                VersionDef(name=d[0], index=int(d[1]), base=bool(d[2]), parents=tuple(d[3]),
                           hash=int(d[4]))
                for d in data["verdef"]
            ),
            comments=tuple(data["comments"]),
            size=int(data["size"]),
        )


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
    :returns: an :class:`IdentVerdict`.  Source of the rules and messages: glibc
        ``elf/dl-load.c`` ``open_verify`` and ``sysdeps/unix/sysv/linux/ldsodefs.h``
        (``VALID_ELF_OSABI``/``VALID_ELF_ABIVERSION``).
    """
    # glibc reads the ELF header first and complains about the length before the magic.
    if len(header) < _EHDR[host.elfclass]:
        return IdentVerdict(status="fatal", message="file too short")
    if header[:4] != b"\x7fELF":
        return IdentVerdict(status="fatal", message="invalid ELF header")
    ei_class = {1: 32, 2: 64}.get(header[4], 0)
    if ei_class != host.elfclass:
        return IdentVerdict(status="skip", message=f"wrong ELF class: ELFCLASS{ei_class or header[4]}")
    data = {1: "lsb", 2: "msb"}.get(header[5], "")
    if data != host.data:
        want = "little" if host.data == "lsb" else "big"
        return IdentVerdict(status="fatal", message=f"ELF file data encoding not {want}-endian")
    if header[6] != 1:
        return IdentVerdict(status="fatal", message="ELF file version ident does not match current one")
    osabi, abiversion = header[7], header[8]
    if osabi not in _VALID_OSABI:
        return IdentVerdict(status="fatal", message="ELF file OS ABI invalid")
    # GNU objects may carry small ABI versions (unique symbols, …); SYSV must be 0.
    if (osabi == 0 and abiversion != 0) or (osabi == 3 and abiversion > 4):
        return IdentVerdict(status="fatal", message="ELF file ABI version invalid")
    if any(header[9:16]):
        return IdentVerdict(status="fatal", message="nonzero padding in e_ident")
    fmt = "<" if data == "lsb" else ">"
    e_type, e_machine, e_version = struct.unpack_from(fmt + "HHI", header, 16)
    if e_version != 1:
        return IdentVerdict(status="fatal", message="ELF file version does not match current one")
    if e_machine != host.machine:
        return IdentVerdict(status="skip", message=f"wrong machine {MACHINES.get(e_machine, e_machine)}")
    if e_type not in (2, 3):
        return IdentVerdict(status="fatal", message="only ET_DYN and ET_EXEC can be loaded")
    phentsize = struct.unpack_from(fmt + "H", header, 54 if ei_class == 64 else 42)[0]
    if phentsize != _PHENT[ei_class]:
        return IdentVerdict(status="fatal", message="ELF file's phentsize not the expected size")
    return IdentVerdict(status="ok")


# -- parsing -------------------------------------------------------------------------------


def elf_hash(name: str) -> int:
    """The SysV ELF hash of ``name`` (gABI "Hash Table"), as used in ``vna_hash``/``vd_hash``."""
    h = 0
    for c in name.encode():
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _file_id(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


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
        f = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        return ElfInfo(path=path, size=size,
                       error=ElfError(kind="unreadable", message=exc.strerror or str(exc)))
    with f:
        try:
            head = f.read(64)
        except OSError as exc:
            return ElfInfo(path=path, size=size,
                           error=ElfError(kind="unreadable", message=exc.strerror or str(exc)))
        if len(head) < 4 or head[:4] != b"\x7fELF":
            kind = "truncated" if b"\x7fELF".startswith(head) and head else "not-elf"
            msg = "file too short" if kind == "truncated" else "invalid ELF header"
            return ElfInfo(path=path, size=size, error=ElfError(kind=kind, message=msg))
        if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
            kind = "truncated" if len(head) < 52 else "corrupt"
            msg = "file too short" if kind == "truncated" else "bad ELF class or data encoding"
            return ElfInfo(path=path, size=size, error=ElfError(kind=kind, message=msg))
        f.seek(0)
        try:
            return _parse_elf(path, size, f)
        except Exception as exc:  # noqa: BLE001 - pyelftools raises many kinds on bad input
            kind = "truncated" if _looks_truncated(exc, f, size) else "corrupt"
            return ElfInfo(path=path, size=size, error=ElfError(kind=kind, message=_one_line(exc)))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _looks_truncated(exc: BaseException, f: Any, size: int) -> bool:
    """Heuristic: a header table that reaches past the end of the file means truncation."""
    try:
        f.seek(0)
        head = f.read(64)
        ei_class = head[4]
        fmt = "<" if head[5] == 1 else ">"
        if ei_class == 2:
            phoff, shoff = struct.unpack_from(fmt + "QQ", head, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(fmt + "HHHH", head, 54)
        else:
            phoff, shoff = struct.unpack_from(fmt + "II", head, 28)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(fmt + "HHHH", head, 42)
        return phoff + phentsize * phnum > size or shoff + shentsize * shnum > size
    except Exception:  # noqa: BLE001
        return "stream" in str(exc).lower() or "expected" in str(exc).lower()


def _parse_elf(path: str, size: int, f: Any) -> ElfInfo:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(f)
    header = elf.header
    ident = header["e_ident"]
    osabi_raw = ident["EI_OSABI"]
    osabi = osabi_raw if isinstance(osabi_raw, int) else _OSABI.get(osabi_raw, 255)
    etype_raw = header["e_type"]
    etype = etype_raw if isinstance(etype_raw, str) else TYPES.get(etype_raw, str(etype_raw))
    machine_raw = header["e_machine"]
    machine = machine_raw if isinstance(machine_raw, int) else _MACHINE_NUM.get(machine_raw, 0)

    interp = None
    soname = rpath = runpath = None
    needed: list[str] = []
    flags_1 = 0
    verneed: list[NeededVersions] = []
    verdef: list[VersionDef] = []
    comments: tuple[str, ...] = ()
    if header["e_shoff"] and header["e_shoff"] + header["e_shnum"] * header["e_shentsize"] > size:
        raise ValueError("section header table reaches past the end of the file")
    # Walk the section *headers* and build only the sections needed: pyelftools' iter_sections()
    # would also parse every hash table and symbol table (most of the time on big libraries).
    dynamic = None
    for i in range(elf.num_sections()):
        hdr = elf._get_section_header(i)
        stype = hdr["sh_type"]
        if stype == "SHT_DYNAMIC" and dynamic is None:
            dynamic = elf.get_section(i)
        elif stype == "SHT_GNU_verneed":
            for vn, auxs in elf.get_section(i).iter_versions():
                vers = tuple(
                    VersionNeed(name=a.name, weak=bool(a["vna_flags"] & VER_FLG_WEAK),
                                index=a["vna_other"], hash=a["vna_hash"])
                    for a in auxs
                )
                verneed.append(NeededVersions(file=vn.name, versions=vers))
        elif stype == "SHT_GNU_verdef":
            for vd, auxs in elf.get_section(i).iter_versions():
                names = [a.name for a in auxs]
                verdef.append(
                    VersionDef(name=names[0] if names else "", index=vd["vd_ndx"],
                               base=bool(vd["vd_flags"] & VER_FLG_BASE),
                               parents=tuple(names[1:]), hash=vd["vd_hash"])
                )
        elif stype == "SHT_PROGBITS" and hdr["sh_size"] < 65536 and (
                elf._get_section_name(hdr) == ".comment"):
            f.seek(hdr["sh_offset"])
            raw = f.read(hdr["sh_size"])
            comments = tuple(dict.fromkeys(
                s.decode("utf-8", "replace") for s in raw.split(b"\0") if s
            ))
    for i in range(elf.num_segments()):
        phdr = elf._get_segment_header(i)
        ptype = phdr["p_type"]
        if ptype == "PT_INTERP":
            f.seek(phdr["p_offset"])
            interp = f.read(min(phdr["p_filesz"], 4096)).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif ptype == "PT_DYNAMIC":
            if phdr["p_offset"] + phdr["p_filesz"] > size:
                raise ValueError("PT_DYNAMIC reaches past the end of the file")
            if dynamic is None:  # no section headers: the segment is what ld.so reads
                dynamic = elf.get_segment(i)
    if dynamic is not None:
        for tag in dynamic.iter_tags():
            t = tag.entry.d_tag
            if t == "DT_NEEDED":
                needed.append(tag.needed)
            elif t == "DT_SONAME":
                soname = tag.soname
            elif t == "DT_RPATH":
                rpath = tag.rpath
            elif t == "DT_RUNPATH":
                runpath = tag.runpath
            elif t == "DT_FLAGS_1":
                flags_1 = tag.entry.d_val
            elif t == "DT_NULL":
                break
    return ElfInfo(
        path=path,
        elfclass=elf.elfclass,
        data="lsb" if elf.little_endian else "msb",
        osabi=osabi,
        abiversion=ident["EI_ABIVERSION"],
        type=etype,
        machine=machine,
        interp=interp,
        soname=soname,
        needed=tuple(needed),
        rpath=rpath,
        runpath=runpath,
        flags_1=flags_1,
        verneed=tuple(verneed),
        verdef=tuple(verdef),
        comments=comments,
        size=size,
    )


_OSABI = {"ELFOSABI_SYSV": 0, "ELFOSABI_HPUX": 1, "ELFOSABI_NETBSD": 2, "ELFOSABI_LINUX": 3,
          "ELFOSABI_SOLARIS": 6, "ELFOSABI_FREEBSD": 9, "ELFOSABI_ARM": 97}
_MACHINE_NUM = {name: num for num, name in MACHINES.items()}


# -- symbols (lazy) ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Symbols:
    """Dynamic symbols of one file.

    :ivar undefined: imported symbols (``st_shndx == SHN_UNDEF``) as ``(name, version, file)``:
        the required version (``""`` if none) and the ``vn_file`` (DT_NEEDED name) it is
        required from (``""`` if none).
    :ivar defined: exported symbols (global or weak, defined) as ``(name, version)``.
    :ivar weak_undefined: names of undefined symbols bound weakly (missing is not an error).
    :ivar error: why the symbol table could not be read.
    """

    undefined: tuple[tuple[str, str, str], ...] = ()
    defined: tuple[tuple[str, str], ...] = ()
    weak_undefined: frozenset[str] = frozenset()
    error: str | None = None


def read_symbols(path: str | os.PathLike[str]) -> Symbols:
    """Read ``.dynsym`` with versions (slow on big libraries: call only when asked).

    :param path: the ELF file.
    :returns: :class:`Symbols`; never raises (``error`` is set instead).
    """
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None:
                return Symbols()
            names: dict[int, str] = {}
            files: dict[int, str] = {}
            for sec in elf.iter_sections():
                if sec["sh_type"] in ("SHT_GNU_verneed",):
                    for vn, auxs in sec.iter_versions():
                        for a in auxs:
                            names[a["vna_other"]] = a.name
                            files[a["vna_other"]] = vn.name
                elif sec["sh_type"] == "SHT_GNU_verdef":
                    for vd, auxs in sec.iter_versions():
                        first = next(iter(auxs), None)
                        if first is not None and not vd["vd_flags"] & VER_FLG_BASE:
                            names[vd["vd_ndx"]] = first.name
            versym = next((s for s in elf.iter_sections() if s["sh_type"] == "SHT_GNU_versym"), None)
            undefined: list[tuple[str, str, str]] = []
            defined: list[tuple[str, str]] = []
            weak: set[str] = set()
            for i, sym in enumerate(dynsym.iter_symbols()):
                if not sym.name:
                    continue
                ver = file = ""
                if versym is not None:
                    ndx = versym.get_symbol(i)["ndx"]
                    if isinstance(ndx, int):
                        ver = names.get(ndx & 0x7FFF, "")
                        file = files.get(ndx & 0x7FFF, "")
                bind = sym["st_info"]["bind"]
                if sym["st_shndx"] == "SHN_UNDEF":
                    undefined.append((sym.name, ver, file))
                    if bind == "STB_WEAK":
                        weak.add(sym.name)
                elif bind in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE"):
                    defined.append((sym.name, ver))
            return Symbols(undefined=tuple(undefined), defined=tuple(defined),
                           weak_undefined=frozenset(weak))
    except Exception as exc:  # noqa: BLE001
        return Symbols(error=_one_line(exc))


# -- the on-disk cache ---------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/envlock/elf-v1`` (``~/.cache/envlock/elf-v1`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envlock" / "elf-v1"


class ElfCache:
    """Parsed ELF facts on disk, one JSON file per ``(st_dev, st_ino, st_size, st_mtime_ns)``.

    A file replaced, rewritten or touched gets a new key, so stale entries are never used
    (they are just left behind).  Unreadable or corrupt cache files count as misses; write
    failures are ignored (the cache only ever speeds things up).

    :param directory: where to keep entries; :func:`default_cache_dir` when ``None``.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def _file(self, st: os.stat_result) -> Path:
        dev, ino, size, mtime = _file_id(st)
        return self.directory / f"{dev:x}-{ino:x}-{size:x}-{mtime:x}.json"

    def get(self, st: os.stat_result, path: str) -> ElfInfo | None:
        """The cached facts for the file with stat ``st`` (read at ``path``), or ``None``."""
        try:
            with open(self._file(st), encoding="utf-8") as f:
                info = ElfInfo.from_json(path, json.load(f))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            self.misses += 1
            return None
        self.hits += 1
        return info

    def put(self, st: os.stat_result, info: ElfInfo) -> None:
        """Store ``info`` for the file with stat ``st`` (atomically; errors ignored)."""
        import tempfile

        target = self._file(st)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(info.to_json(), f, separators=(",", ":"))
            os.replace(tmp, target)
        except OSError:
            return
