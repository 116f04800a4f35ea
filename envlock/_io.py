"""Safe writing of every file envlock writes, and the bounded reads of files it does not
control (:mod:`envlock._bounded`, whose names this module exports: ``from envlock._io import
read_text`` stays the one way in).

Every file envlock **writes** (manifests, run records, lockfiles, patches, cache entries, logs)
goes through :func:`write_file`, the one safe-write path (``tests/test_io.py`` checks that no
other module of the package opens a file for writing):

* **a symbolic link at the final component is never followed, with or without ``force``**: it is
  refused (:class:`~envlock.errors.OutputExistsError`), the link and its target left as they
  are.  In a shared directory (``/tmp`` with ``fs.protected_symlinks = 0``, a group-writable
  project folder) anyone can plant ``manifest.toml -> ~/.bashrc``; writing through it would
  overwrite the victim's file.  Directories above the final component are followed;
* the content goes to a new file in the destination directory (``O_TMPFILE``, or a named
  temporary created with ``O_EXCL``), is ``fsync``-ed, and is then given its name: without
  ``force`` by ``link(2)``, which fails if the name exists (create-or-fail: of concurrent
  writers exactly one wins); with ``force`` by ``rename(2)`` over the old regular file —
  ``rename`` replaces the directory entry, so a link swapped in after the check is replaced,
  never written through;
* an existing FIFO or character device (``-o /dev/full``, a named pipe a consumer reads) is
  written into directly, with ``force`` and ``special`` only — opened ``O_NOFOLLOW`` and checked
  with ``fstat``; a block device, a directory or a socket is refused.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import TYPE_CHECKING
import time
import sys

if TYPE_CHECKING:
    from pathlib import Path

from envlock._bounded import (
    MAX_INPUT_BYTES,
    InputError,
    has_elf_magic,
    irregular,
    one_line,
    read_bytes,
    read_head,
    read_text,
)
from envlock.errors import EnvlockError, OutputExistsError

__all__ = ["MAX_INPUT_BYTES", "InputError", "read_bytes", "read_head", "read_text", "one_line", "irregular",
           "has_elf_magic", "write_file", "check_writable", "no_space", "BusyError",
           "hold_lock", "null_fd", "null_closed_streams"]

# --- writing: the one safe-write path ---------------------------------------------------------

#: ``os.statvfs``, injectable by tests (a full inode table cannot always be arranged).
_statvfs = os.statvfs

_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")


def _shown(path: str | os.PathLike[str]) -> str:
    from envlock.redact import printable

    return printable(os.fsdecode(path))


def check_writable(path: str | os.PathLike[str], *, force: bool = False,
                   special: bool = False) -> os.stat_result | None:
    """Refuse, before any work, what :func:`write_file` would refuse for ``path``.

    :returns: the ``lstat`` of what is there now, or ``None`` when nothing is.
    :raises OutputExistsError: ``path`` is a symbolic link (refused even with ``force``: the
        rule of :func:`write_file`); it exists and ``force`` is false; or it is a file of a
        kind envlock does not write into (a directory, a block device, a socket; a FIFO or a
        character device unless ``special``).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # the directory part is a file: the write reports it
    shown = _shown(path)
    if stat.S_ISLNK(st.st_mode):
        raise OutputExistsError(
            f"{shown} is a symbolic link; envlock never writes through one (someone may have "
            "planted it): remove it or write elsewhere")
    if not force:
        raise OutputExistsError(f"{shown} exists; use --force to replace it")
    if stat.S_ISREG(st.st_mode):
        return st
    if special and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        return st
    raise OutputExistsError(f"{shown} {irregular(st.st_mode) or 'is not a regular file'}; "
                            "envlock does not replace it")


def write_file(path: str | os.PathLike[str], data: str | bytes, *, force: bool = False,
               special: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically, never through a symbolic link (module docstring).

    :param path: the file; its directory is created when missing.
    :param data: bytes, or text written as UTF-8 (``surrogateescape``: undecodable file names
        the text carries are written back as the bytes they were).
    :param force: replace an existing regular file (its permission bits are kept; a new file
        gets ``0o666 & ~umask``).  Without it the write is create-or-fail.
    :param special: with ``force``, write into an existing FIFO or character device (an output
        the user named: ``-o /dev/full``); without it such a file is refused.
    :returns: ``path`` as a :class:`~pathlib.Path`.
    :raises OutputExistsError: ``path`` is a symbolic link (whatever ``force``); it exists and
        ``force`` is false (also when another writer created it first); a kind of file not
        written into (:func:`check_writable`).
    :raises OSError: the directory is not writable; the disk is full — naming inodes when the
        file system has none left (:func:`no_space`, ``statvfs`` ``f_favail``) — with
        ``filename`` the output path.
    """
    from pathlib import Path  # not on the path of `envlock --help`

    path = Path(path)
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
    st = check_writable(path, force=force, special=special)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_special(path, raw)
        return path
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(exc, path, directory) from None
        raise
    mode = stat.S_IMODE(st.st_mode) if st is not None else (0o666 & ~_umask())
    _clean_stale(directory, path.name)
    try:
        _write_new(path, directory, raw, mode, force=force)
    except FileExistsError:
        check_writable(path, force=False)  # a link or a file appeared meanwhile: say which
        raise OutputExistsError(f"{_shown(path)} exists; use --force to replace it") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(exc, path, directory) from None
        if exc.filename and str(exc.filename).startswith(str(directory / f".{path.name}.")):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    return path


def _write_special(path: Path, data: bytes) -> None:
    """Write into an existing FIFO or character device, opened ``O_NOFOLLOW`` (a link swapped
    in since the check is refused by the kernel) and checked again with ``fstat``."""
    # O_NONBLOCK: a FIFO without a reader is an error (ENXIO) at once, not a hang; once open,
    # write in blocking mode so that data larger than the pipe buffer is written whole
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(exc.errno, "a FIFO that no process is reading", str(path)) from None
        if exc.errno == errno.ELOOP:
            check_writable(path, force=True, special=True)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
            raise OutputExistsError(f"{_shown(path)} changed while it was written; not written")
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def no_space(exc: OSError, path: str | os.PathLike[str], directory: str | os.PathLike[str]
             ) -> OSError:
    """The error to show for ``ENOSPC``/``EDQUOT`` while writing ``path`` in ``directory``:
    it names inodes when ``statvfs(directory)`` has ``f_favail == 0`` (of ``f_files > 0``: a
    file system that counts inodes) — ``ENOSPC`` is also what creat(2) returns when the inode
    table is full while ``df`` still shows free blocks.

    :returns: an :class:`OSError` (same ``errno``) whose ``filename`` is ``path``.
    """
    try:
        vfs = _statvfs(directory)
        no_inodes = vfs.f_favail == 0 and vfs.f_files > 0
    except OSError:
        no_inodes = False
    if no_inodes:
        return OSError(exc.errno, f"no free inodes left on the file system of {directory} "
                       "(statvfs f_favail = 0): delete files there or write elsewhere", str(path))
    if exc.errno == errno.EDQUOT:
        return OSError(exc.errno, "disk quota exceeded", str(path))
    return OSError(exc.errno, "no space left on the device", str(path))


def _host() -> str:
    """This host's short name, as a file-name part (temporary files on a shared file system are
    judged only by the host that wrote them: a pid means nothing elsewhere)."""
    import socket

    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0]) or "host"


def _umask() -> int:
    """The process umask, read from ``/proc/self/status`` (``os.umask`` would change it)."""
    try:
        for line in read_text("/proc/self/status").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (InputError, ValueError, IndexError):
        pass
    return 0o022


def _clean_stale(directory: Path, name: str) -> None:
    """Remove ``.<name>.<host>.<pid>.<random>.tmp`` files of ours, written on this host, whose
    writer is gone (killed)."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    me = os.geteuid()
    host = _host()
    for entry in entries:
        m = _TMP_RE.match(entry)
        if not m or m.group("name") != name or m.group("host") != host:
            continue
        pid = int(m.group("pid"))
        if pid != os.getpid():
            try:
                os.kill(pid, 0)
                continue  # its writer still runs
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        full = directory / entry
        try:
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_uid == me and (pid != os.getpid()):
                os.unlink(full)
        except OSError:
            pass


def _temp_name(directory: Path, name: str) -> Path:
    import secrets  # hmac and hashlib: only when a file is written

    return directory / f".{name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _write_all(fd: int, data: bytes, mode: int) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fchmod(fd, mode)
    os.fsync(fd)


def _write_new(path: Path, directory: Path, data: bytes, mode: int, *, force: bool) -> None:
    tmpfile = getattr(os, "O_TMPFILE", 0)
    fd = -1
    if tmpfile:
        try:
            fd = os.open(directory, tmpfile | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
            fd = -1
    if fd >= 0:
        try:
            _write_all(fd, data, mode)
            if not force:
                _link_fd(fd, path)  # fails if the name exists (a dangling link too): create-or-fail
            else:
                tmp = _temp_name(directory, path.name)
                _link_fd(fd, tmp)
                try:
                    os.replace(tmp, path)  # replaces the entry: a link there is not followed
                except BaseException:
                    _unlink(tmp)
                    raise
        finally:
            os.close(fd)
        _fsync_dir(directory)
        return
    tmp = _temp_name(directory, path.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            _write_all(fd, data, mode)
        finally:
            os.close(fd)
        if not force:
            os.link(tmp, path, follow_symlinks=False)  # fails if the name exists: create-or-fail
            _unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    _fsync_dir(directory)


def _link_fd(fd: int, dest: Path) -> None:
    """Give the unnamed file ``fd`` the name ``dest``: ``linkat(AT_FDCWD, "/proc/self/fd/<fd>",
    AT_FDCWD, dest, AT_SYMLINK_FOLLOW)`` as open(2) documents for ``O_TMPFILE``."""
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        # With a src_dir_fd CPython calls linkat(2) and passes AT_SYMLINK_FOLLOW (which applies
        # to the source, the /proc/self/fd entry; linkat never follows a link at the new name).
        os.link(str(fd), dest, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class BusyError(EnvlockError):
    """Another process holds the lock of :func:`hold_lock`; ``owner`` is what it wrote there
    (``pid 4711 on node12 since 2024-05-01T10:00:00Z``), ``""`` when it had not yet."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


def hold_lock(path: str | os.PathLike[str], owner: str, *, wait_owner: float = 1.0) -> int:
    """Take the exclusive lock of the file ``path`` (``flock(2)`` ``LOCK_EX``, not waiting) and
    write ``owner`` into it; the lock lasts until the returned descriptor is closed or the
    process ends — a SIGKILL releases it too, so no stale lock is left behind.

    The file is created ``O_NOFOLLOW`` (a symbolic link planted there is refused) and must be a
    regular file; its descriptor is close-on-exec, so a command run meanwhile does not hold the
    lock after envlock ends.  The file stays after the lock is released (removing it would
    let two processes lock two different files of one name).

    :param owner: one line saying who holds it, for the error of the next one to try.
    :param wait_owner: seconds to wait for a holder that has the lock but has not yet written
        its ``owner`` line (polled), so the error can name it.
    :returns: the descriptor holding the lock.
    :raises BusyError: another open file description holds it (the message names ``owner``).
    :raises OutputExistsError: ``path`` is a symbolic link.
    :raises InputError: ``path`` is not a regular file.
    :raises OSError: it cannot be created (``ENOSPC`` worded by :func:`no_space`).
    """
    import fcntl

    shown = _shown(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):  # ELOOP; EACCES for another's link in a sticky directory
            check_writable(path, force=True)  # names the link
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(exc, path, os.path.dirname(os.fspath(path)) or ".") from None
        raise OSError(exc.errno, exc.strerror, os.fsdecode(path)) from None
    try:
        what = irregular(os.fstat(fd).st_mode)
        if what is not None:
            raise InputError(f"{shown}: {what}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            deadline = time.monotonic() + wait_owner
            text = ""
            while True:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                if text or time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
            raise BusyError(f"{shown} is locked by {one_line(text) or 'another process'}",
                            one_line(text)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (one_line(owner) + "\n").encode("utf-8", "surrogateescape"), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def null_fd(fd: int, *, inheritable: bool = False) -> None:
    """Put ``/dev/null`` at the descriptor ``fd`` (open or closed).

    For a standard stream that was closed (``>&-``), not inheritable: no file envlock opens
    later takes its number (and receives what is written to that stream), and a command
    envlock runs still finds the stream closed, as envlock did.

    :raises OSError: ``/dev/null`` cannot be opened.
    """
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    if devnull != fd:
        os.dup2(devnull, fd, inheritable=inheritable)
        os.close(devnull)
    elif inheritable:
        os.set_inheritable(fd, True)


def null_closed_streams() -> list[str]:
    """Make a closed standard stream (``envlock … >&-``, ``2>&-``, ``<&-``) harmless: its
    descriptor gets ``/dev/null`` (:func:`null_fd`, not inheritable: a command envlock runs
    still finds it closed), and when Python left ``sys.stdin``/``sys.stdout``/``sys.stderr``
    as ``None`` (it does for an invalid descriptor at start-up) it becomes a ``/dev/null``
    stream: envlock's own messages to a closed stream are dropped instead of raising.

    :returns: the names of the streams that were closed (``["stdout"]``).
    """
    closed = []
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(name)
            try:
                null_fd(fd)
            except OSError:
                pass
        if getattr(sys, name) is None:
            try:
                setattr(sys, name, open(os.devnull, "r" if fd == 0 else "w",  # noqa: SIM115
                                        encoding="utf-8", errors="backslashreplace"))
            except OSError:
                pass
    return closed
