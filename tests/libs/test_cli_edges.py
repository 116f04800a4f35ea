"""``envlock libs`` on broken inputs: bad files given by path, missing files, directories,
bad LD_PRELOAD entries, wrapper scripts as the interpreter, and the text tree's drawing.

The loader's behaviour is checked against the real loader (a program calling ``dlopen``,
or a program run with ``LD_PRELOAD``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.analysis import analyze_module

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, real_dlopen


def _bad_files(root: Path) -> dict[str, Path]:
    """An empty file, random bytes, and a directory, each named like a shared object."""
    root.mkdir(parents=True, exist_ok=True)
    empty = root / "empty.so"
    empty.write_bytes(b"")
    rand = root / "rand.so"
    rand.write_bytes(os.urandom(4096).replace(b"\x7fELF", b"xELF"))
    somedir = root / "somedir.so"
    somedir.mkdir()
    return {"empty": empty, "rand": rand, "dir": somedir}


def _libs(args: list[str], cache: Path, env: dict[str, str] | None = None):
    full_env = {"XDG_CACHE_HOME": str(cache), "LD_PRELOAD": "", "LD_LIBRARY_PATH": "", **(env or {})}
    return CliRunner().invoke(cli, ["libs", *args], env=full_env)


@pytest.fixture()
def dlopen_prog(build: Builder) -> Path:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    return build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath="$ORIGIN/caller")


@pytest.mark.parametrize("which", ["empty", "rand"])
def test_bad_file_given_by_path_names_file_and_reason(build: Builder, dlopen_prog: Path,
                                                      tmp_path: Path, which: str) -> None:
    bad = _bad_files(build.root / "bad")[which]
    real = real_dlopen(dlopen_prog, str(bad))
    assert real.path is None and real.error is not None
    reason = real.error.split(": ", 1)[1]  # "file too short" / "invalid ELF header"
    result = _libs([str(bad), "--python", sys.executable, "--format", "json"], tmp_path)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    f = next(f for f in doc["findings"] if f["id"] == "invalid-elf")
    assert f"the loader opened {bad}, which fails its checks ({reason})" in f["cause"]
    assert f["evidence"][0] == f"{bad}: {reason}" == real.error
    assert f["fix"] == [f"Remove or rename {bad} (e.g. a linker script or a truncated copy)."]
    # the target interpreter is a real ELF program: no finding about it
    assert [x["id"] for x in doc["findings"]] == ["invalid-elf"]


def test_directory_on_a_search_path_stops_the_search_like_glibc(build: Builder,
                                                                dlopen_prog: Path) -> None:
    """A directory named like the library is a fatal ``open_verify`` error, not a miss."""
    (build.root / "first" / "libd.so.1").mkdir(parents=True)
    build.lib("second/libd.so.1", soname="libd.so.1")
    env = {"LD_LIBRARY_PATH": f"{build.root}/first:{build.root}/second"}
    real = real_dlopen(dlopen_prog, "libd.so.1", env)
    user = build.lib("t/libuser.so", soname="libuser.so", needed=["second/libd.so.1"])
    report = analyze_module(str(user), str(user), sys_path=[], env=env, mode="ldd", owners=False)
    res = next(r for r in report.requests if r.name == "libd.so.1")
    assert real.path is None and res.path is None
    assert real.error == res.error == (f"{build.root}/first/libd.so.1: cannot read file data: "
                                       "Is a directory")
    f = next(f for f in report.findings if f.id == "invalid-elf")
    assert f"opened {build.root}/first/libd.so.1, which fails its checks" in f.cause
    assert f.evidence[0] == f"{build.root}/first/libd.so.1: cannot read file data: Is a directory"


@pytest.mark.parametrize("which", ["missing", "dir"])
def test_missing_file_or_directory_is_a_one_line_error(build: Builder, tmp_path: Path,
                                                       which: str) -> None:
    files = _bad_files(build.root / "bad")
    arg = str(build.root / "bad" / "nonexist.so") if which == "missing" else str(files["dir"])
    result = _libs([arg, "--python", sys.executable], tmp_path)
    assert result.exit_code == 2
    want = f"Error: {arg}: no such file" if which == "missing" else \
        f"Error: {arg}: is a directory, not a shared object"
    assert result.output.strip() == want


def test_a_directory_is_never_a_copy(build: Builder) -> None:
    """A stray *directory* named like a missing library is not "a copy"."""
    site = build.root / "site"
    (site / "nvidia" / "x" / "lib" / "libmiss.so.3").mkdir(parents=True)
    # Give libt.so a DT_NEEDED on libmiss.so.3 through a stub, then remove the stub.
    build.lib("stub/libmiss.so.3", soname="libmiss.so.3")
    lib = build.lib("t/libt.so", soname="libt.so", needed=["stub/libmiss.so.3"])
    (build.root / "stub" / "libmiss.so.3").unlink()
    report = analyze_module(str(lib), str(lib), sys_path=[str(site)], env={}, mode="ldd",
                            owners=False)
    f = next(f for f in report.findings if f.id == "not-found")
    assert not any("a copy exists" in e for e in f.evidence)
    assert f.fix == ("Install the package that provides libmiss.so.3, or add its directory to "
                     "LD_LIBRARY_PATH.",)


@pytest.mark.parametrize("which", ["rand", "empty", "dir", "missing"])
def test_bad_ld_preload_entry_is_only_a_warning(build: Builder, tmp_path: Path, which: str) -> None:
    files = _bad_files(build.root / "bad")
    entry = str(build.root / "bad" / "nonexist.so") if which == "missing" else str(files[which])
    exe = build.exe("prog")
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "LD_PRELOAD": entry})
    assert real.returncode == 0  # glibc ignores the entry and runs the program
    result = _libs(["--python", sys.executable, "--format", "json"], tmp_path,
                   env={"LD_PRELOAD": entry})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [(f["id"], f["severity"]) for f in doc["findings"]] == [("preload-failed", "warning")]
    assert doc["findings"][0]["cause"] == real.stderr.strip()


def test_wrapper_script_interpreter_models_the_real_one(tmp_path: Path) -> None:
    """A pyenv-style shim (a script that execs the real interpreter) is not modelled as the
    program: the interpreter's own ``sys.executable`` is."""
    real_exe = os.path.realpath(sys.executable)
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{real_exe}" "$@"\n')
    shim.chmod(0o755)
    cache = tmp_path / "cache"
    result = _libs(["--python", str(shim), "--format", "json"], cache)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["findings"] == []
    assert doc["python"] == real_exe and doc["launcher"] == str(shim)
    assert doc["objects"][0]["path"] == real_exe and doc["objects"][0]["kind"] == "executable"
    # the same through the caches (sys.path and executable cached together), and in text
    again = _libs(["--python", str(shim)], cache)
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[0] == (f"target: {real_exe} (the interpreter itself, as the "
                                            f"main program; started by the wrapper {shim})")


def test_script_that_is_no_interpreter_says_so(tmp_path: Path) -> None:
    script = tmp_path / "notpython"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    result = _libs(["--python", str(script), "--format", "json"], tmp_path / "cache")
    assert result.exit_code == 1
    doc = json.loads(result.output.split("\n", 1)[1] if result.output.startswith("warning")
                     else result.output)
    f = next(f for f in doc["findings"] if f["id"] == "invalid-elf")
    assert f["title"] == f"{script} is not an ELF program (invalid ELF header)"
    assert "it is a script" in f["cause"] and "not-elf" not in f["cause"]
    assert f["evidence"][1] == f"{script} starts with #!/bin/sh"


def test_empty_why_is_a_usage_error(tmp_path: Path) -> None:
    result = _libs(["--python", sys.executable, "--why", ""], tmp_path)
    assert result.exit_code == 2
    assert result.output.strip() == "Error: --why needs a SONAME or file name (got an empty string)"


def test_tree_draws_last_child_with_corner(build: Builder, tmp_path: Path) -> None:
    """The last child drawn under a node uses └──, even when later requests are not drawn
    (system libraries already shown)."""
    build.lib("lib/liba.so", soname="liba.so", extra=["-lm"])
    build.lib("lib/libb.so", soname="libb.so", extra=["-lm"])
    ext = build.lib("pkg/ext.so", needed=["lib/liba.so", "lib/libb.so"], rpath="$ORIGIN/../lib",
                    extra=["-lm"])
    result = _libs([str(ext), "--python", sys.executable], tmp_path)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index(f"import {ext}")
    tree = lines[start:lines.index("", start)]
    assert len(tree) > 3
    checked = 0
    for i, line in enumerate(tree):
        col = max(line.find("├── "), line.find("└── "))
        if col < 0:
            continue
        later_sibling = False
        for t in tree[i + 1:]:
            c = max(t.find("├── "), t.find("└── "))
            if c < col:
                break
            if c == col:
                later_sibling = True
                break
        assert line[col] == ("├" if later_sibling else "└"), "\n".join(tree)
        checked += 1
    assert checked == len(tree) - 1


def test_bad_etc_ld_so_preload_entry_is_reported_like_glibc(build: Builder) -> None:
    """An unusable /etc/ld.so.preload entry is ignored with glibc's message (rtld.c
    ``do_preload``: ``object '%s' from %s cannot be preloaded (%s): ignored.``)."""
    root = build.root / "sysroot"
    build.exe("sysroot/usr/bin/prog")
    (root / "etc").mkdir()
    (root / "etc" / "ld.so.preload").write_text("/usr/lib/empty.so\n")
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "empty.so").write_bytes(b"")
    from envlock.libs.config import detect_config
    from envlock.libs.linkmap import Process

    proc = Process(detect_config(root=str(root), env={}))
    proc.start("/usr/bin/prog")
    assert proc.preload_errors == [
        "ERROR: ld.so: object '/usr/lib/empty.so' from /etc/ld.so.preload cannot be preloaded "
        "(file too short): ignored."]
    assert [o.path for o in proc.objects if o.kind == "preload"] == []


def test_missing_path_is_opened_not_searched(build: Builder, dlopen_prog: Path) -> None:
    """Through the library API (the CLI rejects it first): a dlopen'ed path that does not
    exist is one open, not a search; the finding says so and names no stray copies."""
    missing = build.root / "gone" / "ext.so"
    real = real_dlopen(dlopen_prog, str(missing))
    assert real.error == f"{missing}: cannot open shared object file: No such file or directory"
    report = analyze_module(sys.executable, str(missing), sys_path=[], env={}, runtime=False,
                            owners=False)
    res = next(r for r in report.requests if r.name == str(missing))
    assert f"{missing}: {res.error}" == real.error
    f = next(f for f in report.findings if f.id == "not-found")
    assert "the name contains a slash, so the loader opens exactly that path" in f.cause
    assert f.evidence[1:] == (f"tried {missing} (the name contains a slash): absent",)
    assert f.fix == (f"{missing} does not exist: reinstall the package that should contain it, "
                     "or correct the path.",)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_given_by_path_is_one_error_line(tmp_path: Path, kind: str) -> None:
    """Never opened (a FIFO would block, /dev/zero never ends): Error, exit 2."""
    if kind == "fifo":
        path = tmp_path / "libx.so"
        os.mkfifo(path)
        what = "is a FIFO (named pipe), not a regular file"
    else:
        path, what = Path("/dev/zero"), "is a character device, not a regular file"
    result = _libs([str(path), "--python", sys.executable], tmp_path)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {path}: {what}, so not a shared object"
