"""The program-header reader on the committed hand-made files of fixtures/elf/ (no gcc needed).

Each file's facts are checked against what ``fixtures/elf/make.py`` wrote, and, where this
machine has the x86-64 loader, against ``ld.so --list`` on the same file (its refusal message
or the dependency list it prints).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.libs.elf import check_ident, elf_hash
from envlock.libs.elfread import read_elf
from envlock.libs.elfsyms import provides, read_symbols

NEEDS_NO_GCC = True
FIX = Path(__file__).resolve().parents[2] / "fixtures" / "elf"
LDSO = "/lib64/ld-linux-x86-64.so.2"
HAVE_LDSO = os.path.exists(LDSO) and os.uname().machine == "x86_64"


def ld_so_list(path: Path) -> tuple[int, str]:
    """``ld.so --list path``: (exit status, stdout + stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    proc = subprocess.run([LDSO, "--list", str(path)], capture_output=True, text=True, timeout=30,
                          env=env, cwd=str(FIX))
    return proc.returncode, proc.stdout + proc.stderr


def test_tiny_library_without_section_headers() -> None:
    info = read_elf(FIX / "libtiny.so")
    assert info.ok and info.load_error is None and info.has_dynamic
    assert info.soname == "libtiny.so.1" and info.needed == ("libc.so.6",)
    assert info.runpath == "$ORIGIN/lib" and info.rpath is None
    assert info.comments == ()  # no section headers at all
    # vn_cnt says 9999 entries: the chain ends at vna_next == 0 after one.
    (need,) = info.verneed
    assert need.file == "libc.so.6"
    assert [(v.name, v.index, v.hash) for v in need.versions] == [
        ("GLIBC_2.2.5", 2, elf_hash("GLIBC_2.2.5"))]
    assert info.refusal(dlopen=True) is None
    if HAVE_LDSO:
        rc, out = ld_so_list(FIX / "libtiny.so")
        assert rc == 0 and "libc.so.6 => " in out


def test_tiny_symbols_through_dt_hash() -> None:
    syms = read_symbols(FIX / "libtiny.so")
    assert syms.error is None
    assert syms.defined == (("tiny_fn", None),)
    # puts is undefined in .dynsym, but the hand-made file has no relocation that names it:
    # glibc binds relocations (elf/do-rel.h), so it never looks puts up, and neither does envlock.
    assert syms.undefined == ()
    idx = syms.index()
    assert provides(idx, "tiny_fn", None) and provides(idx, "tiny_fn", "ANY_1")
    assert not provides(idx, "puts", None)


@pytest.mark.parametrize(("name", "message"), [
    ("libnoload.so", "object file has no loadable segments"),
    ("libnodyn.so", "object file has no dynamic section"),
    ("libmisaligned.so", "ELF load command address/offset not page-aligned"),
])
def test_refused_whatever_the_mode(name: str, message: str) -> None:
    info = read_elf(FIX / name)
    assert info.ok and info.load_error == message
    assert info.refusal(dlopen=False, main=True) == message
    if HAVE_LDSO:
        rc, out = ld_so_list(FIX / name)
        assert rc != 0 and f"{name}: {message}" in out


def test_phnum_past_the_end() -> None:
    info = read_elf(FIX / "libphnum.so")
    assert not info.ok and info.error.message == "cannot read file data"
    if HAVE_LDSO:
        rc, out = ld_so_list(FIX / "libphnum.so")
        assert rc != 0 and "cannot read file data" in out


def test_mode_dependent_refusals() -> None:
    pie, noopen, exe = (read_elf(FIX / n) for n in ("pie", "libnoopen.so", "exec"))
    assert pie.pie and noopen.noopen and exe.type == "ET_EXEC"
    # As the main program (ld.so --list, __RTLD_OPENEXEC) all three load ...
    for info in (pie, noopen, exe):
        assert info.refusal(dlopen=False, main=True) is None
    # ... under dlopen they are refused with glibc's messages.
    assert pie.refusal(dlopen=True) == "cannot dynamically load position-independent executable"
    assert noopen.refusal(dlopen=True) == "shared object cannot be dlopen()ed"
    assert noopen.refusal(dlopen=False) is None  # a DT_NEEDED of the program may be nodlopen
    assert exe.refusal(dlopen=True) == "cannot dynamically load executable"
    if HAVE_LDSO:
        for n in ("pie", "libnoopen.so", "exec"):
            rc, out = ld_so_list(FIX / n)
            assert rc == 0 and "libc.so.6 => " in out, (n, out)


def test_chain_running_off_the_image_is_corrupt_not_a_hang() -> None:
    info = read_elf(FIX / "libfar.so")
    assert not info.ok and info.error.kind == "corrupt"
    if HAVE_LDSO:
        rc, _out = ld_so_list(FIX / "libfar.so")
        assert rc != 0  # the real loader follows vna_next off the map and crashes


def test_foreign_class_and_byte_order() -> None:
    c32, be = read_elf(FIX / "lib32.so"), read_elf(FIX / "libbe.so")
    assert c32.ok and c32.elfclass == 32 and c32.machine == 3 and c32.needed == ("libc.so.6",)
    assert be.ok and be.data == "msb"
    assert check_ident((FIX / "lib32.so").read_bytes()[:64]).status == "skip"
    assert check_ident((FIX / "libbe.so").read_bytes()[:64]).status == "skip"
    if HAVE_LDSO:
        _rc, out = ld_so_list(FIX / "lib32.so")
        assert "wrong ELF class: ELFCLASS32" in out
        _rc, out = ld_so_list(FIX / "libbe.so")
        # skipped like a missing file (not a fatal "data encoding" error)
        assert "cannot open shared object file" in out


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf not installed")
def test_readelf_agrees_on_needed_and_soname() -> None:
    out = subprocess.run(["readelf", "-dW", str(FIX / "libtiny.so")], capture_output=True,
                         text=True, timeout=30).stdout
    assert "Shared library: [libc.so.6]" in out and "Library soname: [libtiny.so.1]" in out
