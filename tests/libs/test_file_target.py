"""The one FILE rule of ``envlock libs [MODULE|FILE]`` (:func:`envlock.libs.argument.file_target`),
case by case, with the real loader (a program calling ``dlopen``) as the oracle of what a file
given by path does, and the same answer from the library and the command."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import TargetError
from envlock.libs.analysis import analyze_module, find_module_files
from envlock.libs.argument import file_target

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, real_dlopen


@pytest.fixture()
def dlopen_prog(build: Builder) -> Path:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    return build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath="$ORIGIN/caller")


def _cli(args: list[str], cache: Path):
    env = {"XDG_CACHE_HOME": str(cache), "LD_PRELOAD": "", "LD_LIBRARY_PATH": ""}
    return CliRunner().invoke(cli, ["libs", *args, "--python", sys.executable], env=env)


def test_module_names_are_not_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "numpy").mkdir()  # a source checkout named like the module: still the module
    for name in ("numpy", "torch.nn", "jax._src.lib"):
        assert file_target(name) is None and file_target(name, check=True) is None
    (tmp_path / "libx.so.1").write_bytes(b"")  # an existing regular file names itself
    assert file_target("libx.so.1", check=True) == str(tmp_path / "libx.so.1")
    assert find_module_files("libx.so.1", []) == (None, [str(tmp_path / "libx.so.1")])


def test_missing_file(build: Builder, dlopen_prog: Path, tmp_path: Path) -> None:
    """Refused by the command; the library models it as dlopen does: one open, its error."""
    missing = build.root / "gone" / "ext.so"
    with pytest.raises(TargetError, match=r"^" + str(missing) + ": no such file$"):
        file_target(str(missing), check=True)
    assert file_target(str(missing)) == str(missing)
    res = _cli([str(missing)], tmp_path / "c")
    assert (res.exit_code, res.output) == (2, f"Error: {missing}: no such file\n")
    real = real_dlopen(dlopen_prog, str(missing))
    report = analyze_module(sys.executable, str(missing), sys_path=[], env={}, runtime=False,
                            owners=False)
    got = next(r for r in report.requests if r.name == str(missing))
    assert f"{missing}: {got.error}" == real.error


def test_directory(build: Builder, dlopen_prog: Path, tmp_path: Path) -> None:
    d = build.root / "dir.so"
    d.mkdir()
    with pytest.raises(TargetError, match="dir.so: is a directory, not a shared object$"):
        file_target(str(d), check=True)
    res = _cli([str(d)], tmp_path / "c")
    assert (res.exit_code, res.output) == (2, f"Error: {d}: is a directory, not a shared object\n")
    assert real_dlopen(dlopen_prog, str(d)).path is None  # the loader refuses it too


def test_fifo_is_never_opened(tmp_path: Path) -> None:
    """A FIFO would block an open or a read forever: refused from its st_mode alone."""
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[str] = []

    def check() -> None:
        try:
            file_target(str(fifo), check=True)
        except TargetError as exc:
            errors.append(str(exc))
        done.set()

    threading.Thread(target=check, daemon=True).start()
    assert done.wait(30), "file_target opened the FIFO"
    assert errors == [f"{fifo}: is a FIFO (named pipe), not a regular file, so not a shared object"]
    res = _cli([str(fifo)], tmp_path / "c")
    assert (res.exit_code, res.output) == (2, f"Error: {errors[0]}\n")


def test_not_elf_is_the_loaders_to_judge(build: Builder, dlopen_prog: Path, tmp_path: Path) -> None:
    """A regular file that is not ELF passes the check; the analysis quotes dlopen's reason."""
    text = build.root / "script.so"
    text.write_text("#!/bin/sh\n# a wrapper script, longer than an ELF header (64 bytes)\n"
                    "exec python3 -c 'import sys; print(sys.path)'\n")
    assert file_target(str(text), check=True) == str(text)
    real = real_dlopen(dlopen_prog, str(text))
    assert real.path is None and real.error == f"{text}: invalid ELF header"
    res = _cli([str(text), "--format", "json"], tmp_path / "c")
    assert res.exit_code == 1, res.output
    assert f'"{real.error}"' in res.output and '"invalid-elf"' in res.output


def test_elf_file(build: Builder, dlopen_prog: Path, tmp_path: Path) -> None:
    lib = build.lib("ok/libok.so", soname="libok.so")
    assert file_target(str(lib), check=True) == str(lib)
    real = real_dlopen(dlopen_prog, str(lib))
    assert real.path == str(lib)
    report = analyze_module(sys.executable, str(lib), sys_path=[], env={}, runtime=False,
                            owners=False)
    assert report.files == (str(lib),) and not report.errors
    assert str(lib) in {o.path for o in report.objects}
    assert _cli([str(lib)], tmp_path / "c").exit_code == 0
