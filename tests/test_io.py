"""envlock._io: bounded reads of regular files only (FIFOs, devices and directories refused at once)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envlock._io import InputError, one_line, read_bytes, read_text


def test_regular_file(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_bytes("\ufeffnumpy==1.26.4\n".encode())
    assert read_text(p) == "numpy==1.26.4\n"
    assert read_bytes(p).endswith(b"1.26.4\n")


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pylock.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="FIFO"):
        read_text(fifo)
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(("path", "what"), [("/dev/null", "character device"), ("/", "directory")])
def test_non_regular(path: str, what: str) -> None:
    with pytest.raises(InputError, match=what):
        read_bytes(path)


def test_size_cap(tmp_path: Path) -> None:
    p = tmp_path / "big"
    p.write_bytes(b"x" * 2000)
    with pytest.raises(InputError, match="too large"):
        read_bytes(p, limit=1000)
    assert len(read_bytes(p, limit=2000)) == 2000


def test_invalid_utf8_and_missing(tmp_path: Path) -> None:
    p = tmp_path / "bad"
    p.write_bytes(b"ok\xff\xfe")
    with pytest.raises(InputError, match="invalid UTF-8 at byte 2"):
        read_text(p)
    with pytest.raises(InputError, match="no such file"):
        read_text(tmp_path / "nope")


def test_one_line() -> None:
    assert one_line("a\nb\tc") == "a b c"
    cut = one_line("x" * 1000, 200)
    assert len(cut) == 200 and "…" in cut and "\n" not in cut


def test_one_line_cuts_before_it_flattens_with_the_same_result() -> None:
    """Flattening is one character for one, so cutting first gives the same text — without
    walking a 50 MB line (which took 40 s of a diff's time)."""
    from envlock._io import one_line

    text = "a\tb\x00c" * 100 + "z" * 5000 + "\n\x7fend"
    flat = "".join(" " if (ord(c) < 32 or ord(c) == 127) else c for c in text)
    want = flat[:99] + "…" + flat[-100:]
    assert one_line(text) == want and len(one_line(text)) == 200
    assert one_line("short\nline") == "short line"


def test_a_requirements_line_past_the_cap_is_refused(tmp_path: Path) -> None:
    from envlock.errors import ManifestError
    from envlock.formats.pep508 import MAX_LINE, parse_line

    with pytest.raises(ManifestError, match=r"a line of 70,007 characters is not a requirement"):
        parse_line("numpy==" + "1" * 70000)
    assert parse_line("numpy==" + "1" * (MAX_LINE - 10))["name"] == "numpy"


def test_has_elf_magic_never_waits_on_a_fifo(tmp_path: Path) -> None:
    import sys

    from envlock._io import has_elf_magic

    fifo = tmp_path / "python"
    os.mkfifo(fifo)
    script = tmp_path / "shim"
    script.write_text("#!/bin/sh\nexec python3 \"$@\"\n")
    t0 = time.monotonic()
    assert has_elf_magic(fifo) is False and time.monotonic() - t0 < 1.0
    assert has_elf_magic(script) is False and has_elf_magic(tmp_path / "missing") is False
    assert has_elf_magic(os.path.realpath(sys.executable)) is True


# --- writing: the one safe-write path (envlock._io.write_file) ---------------------------------

import ast  # noqa: E402
import errno  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from envlock._io import check_writable, no_space, write_file  # noqa: E402
from envlock.errors import OutputExistsError  # noqa: E402

PKG = Path(__file__).resolve().parents[1] / "envlock"

#: calls that write, create, rename or link files: module → functions (``*``: a method of any
#: object, ``Path.write_text``)
_WRITING = {
    "os": {"replace", "rename", "renames", "link", "symlink", "pwrite", "ftruncate", "truncate",
           "dup2", "mkfifo", "mknod", "write"},
    "shutil": {"copy", "copy2", "copyfile", "copyfileobj", "copytree", "move"},
    "tempfile": {"mkstemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"},
    "json": {"dump"}, "tomli_w": {"dump"}, "pickle": {"dump"},
    "*": {"write_text", "write_bytes", "touch"},
}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_TMPFILE"}


def _mode_of(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
        return str(call.args[1].value)
    return None


def _writers(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name in ("open", "fdopen"):
            if base == "os" and name == "open":
                flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                if flags & _WRITE_FLAGS:
                    found.append((node.lineno, "os.open for writing"))
                continue
            mode = _mode_of(node) if not (isinstance(f, ast.Attribute) and name == "open"
                                          and base not in ("os", "io", "builtins")) else (
                str(node.args[0].value) if node.args and isinstance(node.args[0], ast.Constant)
                else next((str(k.value.value) for k in node.keywords if k.arg == "mode"
                           and isinstance(k.value, ast.Constant)), None))
            if mode and any(c in mode for c in "wax+"):
                found.append((node.lineno, f"{name}(..., {mode!r})"))
        elif name in _WRITING.get(base, set()) or (isinstance(f, ast.Attribute)
                                                   and name in _WRITING["*"]):
            found.append((node.lineno, f"{base or '…'}.{name}"))
        elif isinstance(f, ast.Name) and any(name in v for k, v in _WRITING.items()
                                             if k in ("tempfile", "shutil")):
            found.append((node.lineno, name))  # from tempfile import mkstemp
    return found


def test_every_file_write_goes_through_write_file() -> None:
    """No module of the package but envlock/_io.py opens a file for writing, renames, links or
    creates a temporary file: every file envlock writes goes through write_file (never through
    a symbolic link) — a new writer elsewhere fails here."""
    offenders = []
    for p in sorted(PKG.rglob("*.py")):
        if p == PKG / "_io.py":
            continue
        for line, what in _writers(ast.parse(p.read_text(encoding="utf-8"))):
            offenders.append(f"{p.relative_to(PKG.parent)}:{line}: {what}")
    assert offenders == []


def test_the_source_check_sees_each_kind_of_writer() -> None:
    """The check itself: each way of writing a file is caught, reads and str.replace are not."""
    caught = """
open(p, "w"); open(p, mode="ab"); Path(p).open("w"); os.fdopen(fd, "wb"); p.write_text("x")
p.write_bytes(b""); os.replace(a, b); os.rename(a, b); os.link(a, b); tempfile.mkstemp()
os.open(p, os.O_WRONLY | os.O_CREAT); shutil.copyfile(a, b); json.dump(d, fh); os.dup2(a, 1)
mkstemp(); os.write(fd, b"x")
"""
    fine = """
open(p); open(p, "rb"); os.open(p, os.O_RDONLY | os.O_NONBLOCK); "a".replace("a", "b")
dataclasses.replace(x, y=1); Path(p).read_text(); os.fdopen(fd, "rb"); replace(x, y=1)
rec.link(p); sys.stdout.write("x")
"""
    assert len(_writers(ast.parse(caught))) == 16
    assert _writers(ast.parse(fine)) == []


def test_write_file_refuses_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.toml"
    link.symlink_to(victim)
    for force in (False, True):
        with pytest.raises(OutputExistsError, match="symbolic link"):
            write_file(link, "evil\n", force=force)
        with pytest.raises(OutputExistsError, match="symbolic link"):
            check_writable(link, force=force)
    assert victim.read_text() == "precious\n" and os.readlink(link) == str(victim)


def test_write_file_create_or_fail_and_force_replaces(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "out.txt"
    assert write_file(out, b"one\n") == out  # the directory is created
    with pytest.raises(OutputExistsError, match="exists; use --force"):
        write_file(out, b"two\n")
    assert out.read_bytes() == b"one\n"
    out.chmod(0o600)
    write_file(out, "two\n", force=True)
    assert out.read_text() == "two\n" and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(os.listdir(out.parent)) == ["out.txt"]


def test_write_file_special_files_only_when_asked(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputExistsError, match="FIFO"):
        write_file(fifo, b"x", force=True)  # special=False: a planted FIFO is not written into
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_file(fifo, b"through the pipe", force=True, special=True)
        assert os.read(rfd, 100) == b"through the pipe"
    finally:
        os.close(rfd)
    with pytest.raises(OutputExistsError, match="directory"):
        write_file(tmp_path, b"x", force=True, special=True)


def test_no_space_names_inodes_on_a_real_statvfs(tmp_path: Path) -> None:
    """The wording from a real statvfs: this file system has free inodes, so ENOSPC is 'no
    space'; the inode wording itself is tested on a full tmpfs (tests/record)."""
    exc = no_space(OSError(errno.ENOSPC, "No space left on device"), tmp_path / "m", tmp_path)
    assert os.statvfs(tmp_path).f_favail > 0
    assert exc.strerror == "no space left on the device" and exc.filename == str(tmp_path / "m")


def test_hold_lock_is_exclusive_across_processes_and_released_by_death(tmp_path: Path) -> None:
    from envlock._io import BusyError, hold_lock

    lock = tmp_path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from envlock._io import hold_lock; "
         "hold_lock(sys.argv[1], 'the holder'); print('held', flush=True); time.sleep(60)",
         str(lock)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(BusyError, match="locked by the holder") as info:
            hold_lock(lock, "me")
        assert info.value.owner == "the holder"
    finally:
        holder.kill()
        holder.wait(30)
    fd = hold_lock(lock, "me")  # SIGKILL released it
    os.close(fd)
    planted = tmp_path / "planted"
    planted.symlink_to(tmp_path / "victim")
    with pytest.raises(OutputExistsError, match="symbolic link"):
        hold_lock(planted, "me")
    assert not (tmp_path / "victim").exists()
