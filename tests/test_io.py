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
