"""Reading an ELF file the way the dynamic loader reads it (the facts are :mod:`envlock.libs.elf`).

glibc's ``ld.so`` never looks at section headers: it reads the ELF header, the program
headers, maps the ``PT_LOAD`` segments and reads the dynamic section (``PT_DYNAMIC``) from the
mapped image (glibc ``elf/dl-load.c`` ``open_verify``/``_dl_map_object_from_fd``,
``elf/dl-map-segments.h``, ``elf/get-dynamic-info.h``, ``elf/dl-version.c``).
:func:`read_elf` does the same with :mod:`struct` over an ``mmap`` of the file; every address
is checked against the segments and every offset against the file (the image is
:mod:`envlock.libs.elfimage`'s), and nothing loops more than the file could hold; the version
tables are :mod:`envlock.libs.elfversions`'s.  :mod:`envlock.libs.elfsyms` reads the symbol
table through the same image.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import struct
from typing import Any

from envlock.libs.elfimage import _MAX_CHAIN, _MAX_STR, _Bad, _Image  # noqa: F401  (used by elfsyms)
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
    ElfCache,
    ElfError,
    ElfInfo,
)

__all__ = ["read_elf"]

#: Most dynamic entries read (a file could not hold more and still be sensible).
_MAX_DYN = 1 << 16


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
        base["load_error"] = bad_version
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
    from envlock.libs.elfversions import relr_error, read_verdef, read_verneed

    verneed, bad_need = read_verneed(img, last[DT_VERNEED], string) if DT_VERNEED in last else ([], None)
    out["verneed"] = tuple(verneed)
    out["verdef"] = tuple(read_verdef(img, last[DT_VERDEF], string)) if DT_VERDEF in last else ()
    out["version_error"] = (f"unsupported version {bad_need} of Verneed record" if bad_need is not None
                            else relr_error(last, out["needed"], verneed))
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


