"""GPU architectures compiled into a CUDA library: the ``.nv_fatbin`` section's entry headers.

torch's ``libtorch_cuda.so`` carries one cubin (``sm_80``) or PTX (``compute_90``) entry per
architecture it was built for; a GPU outside them runs only through PTX JIT, or not at all
("no kernel image is available for execution on the device").  Only the ELF section headers
(pyelftools: this is a section's content, which the loader never maps) and the fatbin entry
headers are read, with bounded seeks, never the whole multi-GB file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

__all__ = ["fatbin_archs", "cached_fatbin_archs"]

_FATBIN_MAGIC = 0xBA55ED50
_MAX_FATBIN_ENTRIES = 200_000


def _parse_fatbin_entries(read: Callable[[int, int], bytes], offset: int, size: int) -> tuple[set[str], str | None]:
    """Walk fatbin containers of a ``.nv_fatbin`` section and collect architectures.

    Layout (reverse-engineered, see ``docs/stack.md``): container header
    ``<u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 size>``, then entries with
    header ``<u16 kind (1 PTX, 2 cubin), u16 version, u32 header_size, u32 padded_size, …>``
    and ``u32 sm_version`` at offset 0x1c.  Only entry headers are read.

    :param read: ``read(offset, n) -> bytes``.
    :returns: (``{"sm_80", "compute_90", …}``, an error/warning or ``None``).
    """
    archs: set[str] = set()
    pos, end = offset, offset + size
    entries = 0
    while pos + 16 <= end:
        head = read(pos, 16)
        if len(head) < 16:
            return archs, "truncated .nv_fatbin section"
        magic, _ver, hsize, csize = struct.unpack("<IHHQ", head)
        if magic != _FATBIN_MAGIC:
            if not head.strip(b"\0"):
                pos += 16  # zero padding between containers
                continue
            return archs, f"unknown fatbin container at section offset {pos - offset}"
        epos, eend = pos + hsize, min(pos + hsize + csize, end)
        while epos + 0x20 <= eend:
            eh = read(epos, 0x20)
            if len(eh) < 0x20:
                break
            kind, _ev, ehsize, padded = struct.unpack_from("<HHII", eh, 0)
            sm = struct.unpack_from("<I", eh, 0x1C)[0]
            if kind == 2:
                archs.add(f"sm_{sm}")
            elif kind == 1:
                archs.add(f"compute_{sm}")
            entries += 1
            if ehsize == 0 or entries > _MAX_FATBIN_ENTRIES:
                break
            epos += ehsize + padded
        if entries > _MAX_FATBIN_ENTRIES:
            return archs, f"stopped after {_MAX_FATBIN_ENTRIES} fatbin entries"
        pos = pos + hsize + csize
        if hsize == 0:
            break
    return archs, None


def fatbin_archs(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str | None]:
    """Return the GPU architectures embedded in ``path``'s ``.nv_fatbin`` section.

    Only the ELF section headers and the fatbin entry headers are read (bounded seeks, never the
    whole multi-GB file).

    :returns: (sorted archs such as ``("compute_120", "sm_75", "sm_80")``, error or ``None``).
    """
    from elftools.common.exceptions import ELFError  # noqa: PLC0415
    from elftools.elf.elffile import ELFFile  # noqa: PLC0415

    try:
        with open(path, "rb") as fh:
            try:
                elf = ELFFile(fh)
                sec = elf.get_section_by_name(".nv_fatbin")
            except (ELFError, struct.error, ValueError) as exc:
                return (), f"{path}: not a readable ELF file ({exc})"
            if sec is None:
                return (), f"{path}: no .nv_fatbin section"

            def read(off: int, n: int) -> bytes:
                fh.seek(off)
                return fh.read(n)

            archs, err = _parse_fatbin_entries(read, sec["sh_offset"], sec["sh_size"])
    except OSError as exc:
        return (), f"{path}: {exc.strerror or exc}"
    return tuple(sorted(archs, key=_arch_key)), err


def _arch_key(arch: str) -> tuple[int, str]:
    kind, _, num = arch.partition("_")
    return (int(num) if num.isdigit() else 0, kind)


def cached_fatbin_archs(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str | None]:
    """:func:`fatbin_archs`, kept by :func:`envlock.cache.memo` (namespace ``fatbin-archs``)
    while the file's signature is unchanged: reading thousands of entry headers of a 1 GB
    ``libtorch_cuda.so`` costs ~0.1 s warm and ~0.5 s on a cold page cache.  The answer depends
    on the file's bytes only; an answer with an error is not kept."""
    from envlock import cache as _cache  # noqa: PLC0415

    real = os.path.realpath(path)

    def compute(rec: _cache.Recorder) -> tuple[tuple[str, ...], str | None]:
        rec.file(real)
        archs, err = fatbin_archs(real)
        if err:
            rec.uncacheable(err)
        return archs, err

    def decode(v: object) -> tuple[tuple[str, ...], str | None]:
        if not (isinstance(v, list) and len(v) == 2 and isinstance(v[0], list)):
            raise ValueError("bad entry")
        return tuple(str(a) for a in v[0]), v[1]

    return _cache.memo("fatbin-archs", {"v": 2, "path": real}, compute,
                       encode=lambda v: [list(v[0]), v[1]], decode=decode)
