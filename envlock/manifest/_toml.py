"""Reading and writing manifest files: the only module that touches TOML/JSON text.

TOML is read with :mod:`tomllib` (``tomli`` before Python 3.11) and written with ``tomli_w``;
JSON with :mod:`json` (sorted as the model orders it, two-space indent).  Writing is atomic
and, without ``force``, create-or-fail (:func:`atomic_write`): a killed job never leaves a
half-written manifest nor a temporary file.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from envlock.errors import ManifestError, OutputExistsError
from envlock.redact import printable, redact_tree

__all__ = ["atomic_write", "dumps", "load_file", "loads", "read_text"]


def _tomllib() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415

        return tomllib
    import tomli  # noqa: PLC0415

    return tomli


def loads(text: str, *, name: str = "<string>") -> dict[str, Any]:
    """Parse TOML or JSON text (JSON when it starts with ``{``).

    :param name: file name used in error messages.
    :raises ManifestError: malformed text, with the parser's reason.
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{name}: malformed JSON ({exc})") from None
        except RecursionError:
            raise ManifestError(f"{name}: malformed JSON (nested too deeply)") from None
        if not isinstance(data, dict):
            raise ManifestError(f"{name}: top level is not an object")
        return data
    tomllib = _tomllib()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{name}: malformed TOML ({exc})") from None
    except RecursionError:
        raise ManifestError(f"{name}: malformed TOML (nested too deeply)") from None


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file that must not be empty.

    :raises ManifestError: missing, not a regular file (a FIFO, a device, a directory), larger
        than 64 MiB, unreadable, not UTF-8, or empty (one line naming the file).
    """
    from envlock._io import InputError  # noqa: PLC0415
    from envlock._io import read_text as read_bounded  # noqa: PLC0415

    p = Path(path)
    try:  # regular files only, at most 64 MiB, strict UTF-8 (envlock._io)
        text = read_bounded(p)
    except InputError as exc:
        if "invalid UTF-8" in str(exc):  # the wording manifests and --kb files always had
            raise ManifestError(f"{p}: not a text file (invalid UTF-8)") from None
        raise ManifestError(str(exc)) from None
    if not text.strip():
        raise ManifestError(f"{p}: empty file")
    return text


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse a TOML/JSON file.

    :raises ManifestError: the file cannot be read, is not UTF-8, is empty or is malformed.
    """
    return loads(read_text(path), name=str(Path(path)))


#: the tables that describe an environment (a run record alone has none of them)
_ENVIRONMENT_TABLES = ("python", "pip", "conda", "platform", "cpu")


def with_run_environment(data: dict[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run record (``run.toml`` of ``envlock run``: ``[envlock]``, ``[target]``, ``[run]``)
    with the environment tables of the manifest it names (``[run] manifest``, beside it) added,
    when that file still has the ``manifest-sha256`` the record holds; ``data`` unchanged
    otherwise.  The record's own tables win.  ``show`` and ``diff`` of a run record then see
    the environment the run ran in.
    """
    run = data.get("run")
    if not isinstance(run, dict) or any(k in data for k in _ENVIRONMENT_TABLES):
        return data
    ref = run.get("manifest")
    if not isinstance(ref, str) or not ref or os.path.isabs(ref) or ".." in Path(ref).parts:
        return data
    sibling = Path(path).parent / ref
    try:
        raw = read_text(sibling)
    except (OSError, ValueError):
        return data
    import hashlib  # noqa: PLC0415

    want = run.get("manifest-sha256")
    if isinstance(want, str) and hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest() != want:
        return data  # changed since the run: not the environment the run ran in
    try:
        env = loads(raw, name=str(sibling))
    except ValueError:
        return data
    merged = {k: v for k, v in env.items() if k not in data}
    return {**data, **merged}


def dumps(data: dict[str, Any], fmt: str = "toml") -> str:
    """Serialize ``data`` as ``"toml"`` or ``"json"``; key order is kept as given.

    Every string passes :func:`envlock.redact.redact_tree` first (secrets out, undecodable
    bytes as ``\\xNN``): whatever a probe missed, no secret reaches a manifest file.
    """
    data = redact_tree(data)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt != "toml":
        raise ValueError(f"unknown format {fmt!r} (expected 'toml' or 'json')")
    import tomli_w  # noqa: PLC0415 - only needed when writing TOML

    return tomli_w.dumps(data, multiline_strings=False)


#: ``os.statvfs``, injectable by tests (a full inode table cannot always be arranged).
_statvfs = os.statvfs

_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")


def _host() -> str:
    """This host's short name, as a file-name part (temporary files on a shared file system are
    judged only by the host that wrote them: a pid means nothing elsewhere)."""
    import socket  # noqa: PLC0415

    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0]) or "host"


def _umask() -> int:
    """The process umask, read from ``/proc/self/status`` (``os.umask`` would change it)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _follow_allowed(link: Path, st_link: os.stat_result) -> bool:
    """Whether the kernel's ``fs.protected_symlinks`` rule lets this process follow ``link``.

    Following is refused when the link sits in a sticky, world-writable directory, and neither
    the follower nor the directory's owner owns the link (``Documentation/admin-guide/sysctl/
    fs.rst``, ``protected_symlinks``); envlock applies the rule whatever the sysctl says.
    """
    try:
        st_dir = os.stat(link.parent if str(link.parent) else ".")
    except OSError:
        return False
    sticky_shared = bool(st_dir.st_mode & stat.S_ISVTX) and bool(st_dir.st_mode & stat.S_IWOTH)
    if not sticky_shared:
        return True
    return st_link.st_uid in (os.geteuid(), st_dir.st_uid)


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
    return directory / f".{name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _no_space(exc: OSError, path: Path, directory: Path) -> OSError:
    """The error to show for ENOSPC/EDQUOT: inodes when ``statvfs`` says none is free."""
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


def atomic_write(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; without ``force``, create-or-fail.

    * The content is written to an unnamed file (``O_TMPFILE``, Linux ≥ 3.11) in the
      destination directory and ``fsync``-ed; a kill -9 before it is linked leaves nothing.
      Without ``force`` it is linked in with ``linkat``, which fails if the name exists, so of
      concurrent writers exactly one succeeds.  With ``force`` it is linked under a temporary
      name and renamed over ``path``.  Where ``O_TMPFILE`` is unsupported a named temporary
      ``.<name>.<host>.<pid>.<random>.tmp`` is used; those left by killed writers are removed by the
      next write.
    * The replaced file's permission bits are kept; a new file gets ``0o666 & ~umask``.
    * A symbolic link is written through (its target is replaced, the link kept) — unless it
      sits in a sticky world-writable directory and another user owns it (the kernel's
      ``fs.protected_symlinks`` rule): then the write is refused.
    * A path that exists but is not a regular file (``/dev/stdout``, a FIFO) is written to
      directly, with ``force`` only.

    :raises OutputExistsError: ``path`` exists and ``force`` is false, or a protected symlink.
    :raises OSError: the directory is not writable; the disk is full — naming inodes when the
        file system has none left (``statvfs`` ``f_favail``) — with ``filename`` the output path.
    """
    path = Path(path)
    data = text.encode("utf-8", "surrogateescape")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not force:
            raise OutputExistsError(f"{printable(str(path))} exists; use --force to replace it")
        if stat.S_ISLNK(st.st_mode):
            if not _follow_allowed(path, st):
                raise OutputExistsError(
                    f"{printable(str(path))} is a symbolic link owned by another user in a "
                    "shared sticky directory; refusing to follow it (fs.protected_symlinks)")
            path = Path(os.path.realpath(path))
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            # O_NONBLOCK: a FIFO without a reader is an error (ENXIO) at once, not a hang; once
            # open, write in blocking mode so that a manifest larger than the pipe buffer is
            # written whole as the reader drains it
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    raise OSError(exc.errno, "a FIFO that no process is reading", str(path)) from None
                raise
            os.set_blocking(fd, True)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space(exc, path, directory) from None
        raise
    mode = stat.S_IMODE(st.st_mode) if st is not None else (0o666 & ~_umask())
    _clean_stale(directory, path.name)
    try:
        _write_new(path, directory, data, mode, force=force)
    except FileExistsError:
        raise OutputExistsError(
            f"{printable(str(path))} exists; use --force to replace it") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space(exc, path, directory) from None
        if exc.filename and str(exc.filename).startswith(str(directory / f".{path.name}.")):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


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
                _link_fd(fd, path)  # fails if the name exists: create-or-fail
            else:
                tmp = _temp_name(directory, path.name)
                _link_fd(fd, tmp)
                try:
                    os.replace(tmp, path)
                except BaseException:
                    _unlink(tmp)
                    raise
        finally:
            os.close(fd)
        _fsync_dir(directory)
        return
    tmp = _temp_name(directory, path.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            _write_all(fd, data, mode)
        finally:
            os.close(fd)
        if not force:
            os.link(tmp, path)  # fails if the name exists: create-or-fail
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
        # With a src_dir_fd CPython calls linkat(2) and passes AT_SYMLINK_FOLLOW.
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
