"""Reading an ELF file the way the dynamic loader reads it (the facts are :mod:`envlock.libs.elf`).

glibc's ``ld.so`` never looks at section headers: it reads the ELF header, the program
headers, maps the ``PT_LOAD`` segments and reads the dynamic section (``PT_DYNAMIC``) from the
mapped image (glibc ``elf/dl-load.c`` ``open_verify``/``_dl_map_object_from_fd``,
``elf/dl-map-segments.h``, ``elf/get-dynamic-info.h``, ``elf/dl-version.c``).
:func:`read_elf` does the same with :mod:`struct` over an ``mmap`` of the file; every address
is checked against the segments and every offset against the file, and nothing loops more
than the file could hold.  :mod:`envlock.libs.elfsyms` reads the symbol table through the
same image.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import struct
from typing import Any

from envlock.libs.elf import (
    _EHDR,
    _PHENT,
    DT_AUXILIARY,
    DT_FILTER,
    DT_FLAGS,
    DT_FLAGS_1,
    DT_NEEDED,
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    DT_STRTAB,
    DT_VERDEF,
    DT_VERNEED,
    PAGE_SIZE,
    PT_DYNAMIC,
    PT_INTERP,
    PT_LOAD,
    TYPES,
    VER_FLG_BASE,
    VER_FLG_WEAK,
    ElfCache,
    ElfError,
    ElfInfo,
    NeededVersions,
    VersionDef,
    VersionNeed,
)

__all__ = ["read_elf"]

#: Most dynamic entries read (a file could not hold more and still be sensible).
_MAX_DYN = 1 << 16
#: Longest string read from the string table (glibc reads until NUL; we stop here).
_MAX_STR = 1 << 16
#: Most version records followed in one chain.
_MAX_CHAIN = 1 << 16


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
        # open_verify's pread of the program headers comes back short (errno unset), or fails
        # with EINVAL when e_phoff is a negative off_t (glibc elf/dl-load.c, lose_errno).
        msg = "cannot read file data" + (": Invalid argument" if phoff >= 1 << 63 else "")
        return ElfInfo(**base, error=ElfError(kind="truncated", message=msg))
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
    if load_error is None and e_type == 3:
        load_error = _map_segments_error(img.loads)
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
    bad_version = facts.pop("version_error", None)
    if bad_version is not None and base["load_error"] is None:
        base["load_error"] = f"unsupported version {bad_version} of Verneed record"
    return ElfInfo(**base, **facts)


def _map_segments_error(loads: list[tuple[int, int, int, int]]) -> str | None:
    """glibc 2.36 ``elf/dl-map-segments.h`` ``_dl_map_segments`` for ``ET_DYN``: when the
    segments leave holes between them (a segment's page-aligned end is not the next one's
    page-aligned start, ``has_holes`` of ``_dl_map_object_from_fd``) and the first segment's
    file mapping reaches past the last segment's start, the load fails with this message."""
    if len(loads) < 2:
        return None
    mask = ~(PAGE_SIZE - 1)

    def start(seg: tuple[int, int, int, int]) -> int:
        return seg[0] & mask

    def end(seg: tuple[int, int, int, int]) -> int:
        return (seg[0] + seg[3] + PAGE_SIZE - 1) & mask

    holes = any(end(a) != start(b) for a, b in zip(loads, loads[1:]))
    if holes and start(loads[-1]) < end(loads[0]):
        return "ELF load command address/offset not page-aligned"
    return None


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
    """What ``elf_get_dynamic_info`` and ``_dl_check_map_versions`` read from PT_DYNAMIC:
    DT_NEEDED (and filtees) in order, the last entry of every other tag, the version needs
    and definitions (glibc ``elf/get-dynamic-info.h``, ``elf/dl-version.c``)."""
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
        "soname": _pointer_string(string, last.get(DT_SONAME)),
        "rpath": _pointer_string(string, last.get(DT_RPATH)),
        "runpath": _pointer_string(string, last.get(DT_RUNPATH)),
        "flags": last.get(DT_FLAGS, 0),
        "flags_1": last.get(DT_FLAGS_1, 0),
    }
    verneed, bad_need = _verneed(img, last[DT_VERNEED], string) if DT_VERNEED in last else ([], None)
    verdef, bad_def = _verdef(img, last[DT_VERDEF], string) if DT_VERDEF in last else ([], False)
    out["verneed"] = tuple(verneed)
    out["verdef"] = tuple(verdef)
    out["version_error"] = bad_need if bad_need is not None else (0 if bad_def else None)
    return out


def _pointer_string(string: Any, off: int | None) -> str | None:
    """``DT_SONAME``/``DT_RPATH``/``DT_RUNPATH``: glibc keeps ``strtab + d_val`` as a pointer, read
    when needed (``_dl_map_object``'s SONAME match, ``decompose_rpath``); outside the segments
    it reads what the process maps there (a crash, or a string naming no file): ``None``."""
    try:
        return None if off is None else string(off)  # type: ignore[no-any-return]
    except _Bad as exc:
        if exc.truncated:
            raise
        return None


def _verneed(img: _Image, ent: int, string: Any) -> tuple[list[NeededVersions], int | None]:
    """The ``Elf_Verneed`` chain from ``ent`` (``vn_next`` until 0, each entry once):
    ``(needs, the first entry's vn_version when it is not 1)``.  glibc 2.36
    ``_dl_check_map_versions`` checks only the first entry's ``vn_version``."""
    verneed: list[NeededVersions] = []
    seen: set[int] = set()
    while ent not in seen and len(seen) < _MAX_CHAIN:
        seen.add(ent)
        vn_version, _cnt, vn_file, vn_aux, vn_next = struct.unpack(img.e + "HHIII", img.read(ent, 16))
        if vn_version != 1 and not verneed:
            return verneed, vn_version
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
    return verneed, None


def _verdef(img: _Image, ent: int, string: Any) -> tuple[list[VersionDef], bool]:
    """The ``Elf_Verdef`` chain from ``ent`` (``vd_next`` until 0, each entry once):
    ``(definitions, False)``.  ``vd_version`` is not checked here: glibc 2.36 reads every
    entry in ``_dl_check_map_versions`` and checks only the first one's ``vd_version`` in
    ``match_symbol``, when another object's Verneed names this file ("unsupported version
    N of Verdef record", not modelled: docs/libs.md)."""
    verdef: list[VersionDef] = []
    seen: set[int] = set()
    while ent not in seen and len(seen) < _MAX_CHAIN:
        seen.add(ent)
        _vd_version, vd_flags, vd_ndx, _cnt, vd_hash, vd_aux, vd_next = struct.unpack(
            img.e + "HHHHIII", img.read(ent, 20))
        names = _verdaux_names(img, ent + vd_aux, string, strict=not vd_flags & VER_FLG_BASE)
        verdef.append(VersionDef(name=names[0] if names else "", index=vd_ndx,
                                 base=bool(vd_flags & VER_FLG_BASE), parents=tuple(names[1:]),
                                 hash=vd_hash))
        if vd_next == 0:
            break
        ent += vd_next
    return verdef, False


def _verdaux_names(img: _Image, aux: int, string: Any, *, strict: bool) -> list[str]:
    """The ``Elf_Verdaux`` names of one definition, as far as glibc reads them.

    glibc 2.36 ``_dl_check_map_versions`` (``elf/dl-version.c``) reads only the first
    ``vda_name`` of a non-base definition (``strict``), kept as a pointer that a lookup reads
    when the hash matches; parents are never read.  An unreadable name is ``""`` (it matches
    no needed version), unreadable parents are left out."""
    names: list[str] = []
    aseen: set[int] = set()
    while aux not in aseen and len(aseen) < _MAX_CHAIN:
        aseen.add(aux)
        try:
            vda_name, vda_next = struct.unpack(img.e + "II", img.read(aux, 8))
        except _Bad:
            if strict and not names:
                raise
            break
        try:
            names.append(string(vda_name))
        except _Bad:
            if not names:
                names.append("")
        if vda_next == 0:
            break
        aux += vda_next
    return names


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


