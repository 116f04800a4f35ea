"""The glibc version of a root file system: the one detector that ``[platform]``, ``[toolchain]``
and the loader model share.

Sources, in order:

1. on the running machine (``root == "/"``), ``os.confstr("CS_GNU_LIBC_VERSION")`` — glibc's own
   answer (``"glibc 2.36"``), the same as ``ldd --version``;
2. the generator string of ``<root>/etc/ld.so.cache`` that ``ldconfig`` writes
   (``"ldconfig (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36"``; glibc
   ``elf/cache.c``, new format since 2.32);
3. the banner compiled into ``libc.so.6`` (``"GNU C Library (…) stable release version 2.36."``,
   glibc ``csu/version.c``) in the system library directories under ``root``.

File names are *not* a source: ``libc-2.X.so`` is gone since glibc 2.34 (the library is
``libc.so.6`` itself), so a glob for it finds nothing on every current distribution.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

__all__ = ["GlibcVersion", "SYSTEM_LIB_DIRS", "detect_glibc", "parse_banner"]

#: Where distributions keep ``libc.so.6``: Debian's multiarch directories, then RHEL's lib64,
#: then the plain directories (glibc ``Makeconfig`` ``SYSTEM_DIRS``).
SYSTEM_LIB_DIRS: tuple[str, ...] = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib",
    "/usr/lib",
)

_BANNER = re.compile(rb"(?:GNU C Library|GLIBC)[^\n\0]*?release version (\d+\.\d+(?:\.\d+)?)")
_GENERATOR = re.compile(rb"ldconfig[^\n\0]*? release version (\d+\.\d+(?:\.\d+)?)")
_READ_LIMIT = 16 << 20  # bytes of libc.so.6 searched for the banner (it is ~2 MB)


class GlibcVersion(NamedTuple):
    """A detected glibc version (``"2.36"``) and where it came from (a path or the call)."""

    version: str
    source: str


def parse_banner(data: bytes) -> str | None:
    """The ``X.Y`` of a ``"… release version X.Y"`` banner in ``data`` (``libc.so.6`` bytes or an
    ``ld.so.cache`` generator string), else ``None``."""
    m = _BANNER.search(data)
    return m.group(1).decode() if m else None


def _in_root(root: str, path: str) -> str:
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def _read(path: str, limit: int) -> bytes | None:
    from envlock._io import InputError, read_bytes

    try:
        return read_bytes(path, limit=limit)
    except InputError:
        return None


def detect_glibc(
    root: str | os.PathLike[str] = "/",
    *,
    dirs: Sequence[str] = SYSTEM_LIB_DIRS,
    confstr: Callable[[str], str | None] | None = None,
) -> GlibcVersion | None:
    """The glibc version of ``root``, by the sources in the module docstring.

    :param root: the root file system (``"/"`` for this machine, a directory for another one).
    :param dirs: library directories searched for ``libc.so.6`` (absolute, inside ``root``).
    :param confstr: stands in for :func:`os.confstr` (tests).
    :returns: the version and its source, or ``None`` when no source answers (musl, a bare
        directory).  Never raises.
    """
    r = os.fspath(root)
    if r in ("", "/"):
        cs = confstr or os.confstr
        try:
            value = cs("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError):
            value = None
        if value and value.startswith("glibc "):
            return GlibcVersion(value.split()[1], 'os.confstr("CS_GNU_LIBC_VERSION")')
    cache = _read(_in_root(r, "/etc/ld.so.cache"), 64 << 20)
    if cache and b"glibc-ld.so.cache" in cache:
        m = _GENERATOR.search(cache)
        version = m.group(1).decode() if m else None
        if version:
            return GlibcVersion(version, "/etc/ld.so.cache")
    for d in dirs:
        data = _read(_in_root(r, f"{d}/libc.so.6"), _READ_LIMIT)
        version = parse_banner(data) if data else None
        if version:
            return GlibcVersion(version, f"{d}/libc.so.6")
    return None
