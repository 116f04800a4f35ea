"""Bounded, safe reading of files that envlock does not control.

Every read of an input file (a manifest, a lockfile, a ``METADATA``, a conda-meta record) goes
through :func:`read_bytes` / :func:`read_text`, which

* open only **regular files**: the file is opened with ``O_NONBLOCK`` (so opening a FIFO cannot
  block waiting for a writer) and checked with ``fstat`` before a byte is read; a FIFO, a device,
  a socket or a directory is an error naming what it is;
* read at most ``limit`` bytes (default :data:`MAX_INPUT_BYTES`, 64 MiB); a larger file is an
  error that says so, never a ``MemoryError``;
* decode UTF-8 strictly, so invalid bytes are one clear error, not a traceback.

Errors are :class:`InputError` (a :class:`~envlock.errors.EnvlockError` and ``ValueError``), with a
one-line message that names the file.
"""

from __future__ import annotations

import os
import stat

from envlock.errors import EnvlockError

__all__ = ["MAX_INPUT_BYTES", "MAX_PACKAGES", "InputError", "has_elf_magic", "irregular", "one_line", "read_bytes",
           "read_head", "read_text"]


#: Largest input file envlock reads, in bytes (64 MiB).  Real lockfiles and manifests are
#: well under 10 MiB; the cap keeps a stray multi-GB file from being read into memory.
MAX_INPUT_BYTES = 64 * 1024 * 1024

#: The most packages one input file may list (its pip entries and conda packages, on all the
#: platforms a lockfile locks).  Real environments list hundreds to a few thousand (the largest
#: real lockfiles in ``tests/formats/foreign`` lock about 2,000 packages on several platforms); a
#: file of more is refused with one line instead of costing memory and time in proportion
#: (issue 29: a 3-million-line freeze took 9.4 GB and 6 minutes through ``diff``).
MAX_PACKAGES = 100_000  # re-exported by envlock.formats

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
)


def irregular(mode: int) -> str | None:
    """What a non-regular file is (``"is a FIFO (named pipe), not a regular file"``) for an
    ``st_mode``, or ``None`` for a regular file (what :func:`read_bytes` refuses, and why)."""
    return next((what for test, what in _KINDS if test(mode)), None)


def read_head(path: str | os.PathLike[str], size: int) -> bytes | None:
    """The first ``size`` bytes (or fewer) of the regular file ``path``; ``None`` for anything
    else (missing, unreadable, a FIFO or device: opened non-blocking, so a FIFO never waits)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def has_elf_magic(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with ``\\x7fELF`` (a wrapper script, a
    FIFO, a missing file: ``False``; :func:`read_head`)."""
    return read_head(path, 4) == b"\x7fELF"


class InputError(EnvlockError, ValueError):
    """An input file cannot be read safely; ``str(exc)`` is one line naming the file."""


#: the control characters :func:`one_line` shows as spaces (below 32, and DEL)
_CONTROLS = {**{i: " " for i in range(32)}, 127: " "}


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (control characters as spaces), cut to ``limit`` characters with a
    middle ellipsis — for echoing a piece of untrusted input in an error message."""
    def flat(t: str) -> str:  # one character for one: the cut below can come first
        return t.translate(_CONTROLS)

    if len(text) <= limit:
        return flat(text)
    half = (limit - 1) // 2
    return flat(text[:half]) + "…" + flat(text[-(limit - 1 - half):])


def read_bytes(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The whole content of the regular file ``path``, at most ``limit`` bytes.

    :param path: the file (a symbolic link is followed).
    :param limit: the most bytes accepted; a larger file is refused.
    :raises InputError: missing, not a regular file, unreadable, or larger than ``limit``.
    """
    name = os.fsdecode(path)
    shown = one_line(name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{shown}: is a directory") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot open ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        what = irregular(st.st_mode)
        if what is not None:
            raise InputError(f"{shown}: {what}")
        if st.st_size > limit:
            raise InputError(f"{shown}: too large ({st.st_size} bytes; envlock reads at most {limit})")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(f"{shown}: too large (more than {limit} bytes; envlock reads at most {limit})")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{shown}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading BOM is dropped).

    :raises InputError: as :func:`read_bytes`, or the bytes are not valid UTF-8 (the message
        gives the byte offset).
    """
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{one_line(os.fsdecode(path))}: not a text file "
                         f"(invalid UTF-8 at byte {exc.start})") from None
