"""glibc's acceptance and refusal rules, each compared with the real loader in the same test.

Sources: glibc 2.36 ``elf/dl-load.c`` (``open_verify``, ``open_path``,
``_dl_map_object_from_fd``) and ``elf/dl-open.c``.  The oracle: ``ldd`` / ``ld.so --list``
for DT_NEEDED and a small ``dlopen`` program (``dlerror()``) for dlopen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, real_dlopen, real_ldd

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "elf"


def model(path: Path | str, env: dict[str, str] | None = None) -> Process:
    proc = Process(detect_config(env=env or {}))
    proc.start(str(path))
    return proc


def first(proc: Process, name: str):
    return next(r for r in proc.resolutions if r.name == name)


@pytest.fixture()
def dlopener(build: Builder) -> tuple[Path, Process]:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    return exe, model(exe)


def test_dlopen_of_a_pie_is_refused(build: Builder, dlopener) -> None:
    exe, proc = dlopener
    pie = build.exe("pie", "int main(void) { return 0; }", extra=["-pie", "-fPIE"])
    real = real_dlopen(exe, str(pie))
    assert real.error == f"{pie}: cannot dynamically load position-independent executable"
    res = proc.dlopen(str(pie), proc.find("libcaller.so"))
    assert res.path is None and res.error == real.error


def test_dlopen_of_an_et_exec_is_refused(build: Builder, dlopener) -> None:
    exe, proc = dlopener
    fixed = build.exe("fixed", "int main(void) { return 0; }", extra=["-no-pie", "-fno-pie"])
    real = real_dlopen(exe, str(fixed))
    assert real.error == f"{fixed}: cannot dynamically load executable"
    res = proc.dlopen(str(fixed), proc.find("libcaller.so"))
    assert res.error == real.error


def test_nodlopen_library_refused_under_dlopen_only(build: Builder, dlopener) -> None:
    exe, proc = dlopener
    lib = build.lib("nd/libnd.so", soname="libnd.so", extra=["-Wl,-z,nodlopen"])
    real = real_dlopen(exe, str(lib))
    assert real.error == f"{lib}: shared object cannot be dlopen()ed"
    assert proc.dlopen(str(lib), proc.find("libcaller.so")).error == real.error
    # As a DT_NEEDED of the program it loads.
    prog = build.exe("uses_nd", needed=["nd/libnd.so"], rpath=f"{build.root}/nd")
    assert real_ldd(prog).paths["libnd.so"] == str(lib)
    assert first(model(prog), "libnd.so").path == str(lib)


def _prog_and_good(build: Builder) -> tuple[Path, Path]:
    good = build.lib("B/libx.so", soname="libx.so")
    prog = build.exe("m", "int f(void); int main(void) { return f(); }", needed=["B/libx.so"])
    (build.root / "A").mkdir(exist_ok=True)
    return prog, good


def _mutant(src: Path, dst: Path, **patch: int) -> None:
    data = bytearray(src.read_bytes())
    for off, val in patch.items():
        o = int(off[1:])
        if o in (16, 18):
            data[o:o + 2] = val.to_bytes(2, "little")
        else:
            data[o] = val
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize(("how", "patch"), [
    ("wrong-class", None),
    ("foreign-byte-order", None),
    ("wrong-machine", {"o18": 183}),
    ("bad-osabi-and-wrong-machine", {"o7": 9, "o18": 183}),
    ("bad-osabi", {"o7": 9}),
    ("byte-order-flag-only", {"o5": 2}),
    ("no-loadable-segments", None),
    ("misaligned", None),
    ("symlink-loop", None),
    ("not-readable", None),
])
def test_candidate_on_ld_library_path_before_the_good_copy(build: Builder, how: str, patch) -> None:
    """A bad candidate in A, the good library in B, LD_LIBRARY_PATH=A:B: does the search skip
    A's file, stop the list, or fail the load? The model must say what ldd says."""
    prog, good = _prog_and_good(build)
    bad = build.root / "A" / "libx.so"
    fixture = {"wrong-class": "lib32.so", "foreign-byte-order": "libbe.so",
               "no-loadable-segments": "libnoload.so", "misaligned": "libmisaligned.so"}
    if how in fixture:
        shutil.copy(FIX / fixture[how], bad)
    elif how == "symlink-loop":
        os.symlink("loop2", bad)
        os.symlink("libx.so", build.root / "A" / "loop2")
    elif how == "not-readable":
        if os.geteuid() == 0:
            pytest.skip("root reads every file")
        shutil.copy(good, bad)
        bad.chmod(0)
    else:
        _mutant(good, bad, **patch)
    env = {"LD_LIBRARY_PATH": f"{build.root}/A:{build.root}/B"}
    real = real_ldd(prog, env)
    ours = first(model(prog, env), "libx.so")
    if real.paths.get("libx.so"):
        assert ours.path == real.paths["libx.so"], (how, ours)
    else:
        assert ours.path is None, (how, ours)
        # ldd prints a fatal error on stdout and stops; "not found" is not fatal.
        text = subprocess.run(["ldd", str(prog)], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin", **env})
        out = text.stdout + text.stderr
        if "error while loading shared libraries: " in out:
            message = out.strip().rsplit("error while loading shared libraries: ", 1)[-1]
            assert ours.error == message, (how, out)
        else:
            assert "libx.so => not found" in out and ours.error.startswith("cannot open")
    expected = {"wrong-class": str(good), "foreign-byte-order": str(good),
                "wrong-machine": str(good), "bad-osabi-and-wrong-machine": str(good),
                "not-readable": str(good), "symlink-loop": None}
    if how in expected:
        assert ours.path == expected[how]
    elif how in ("bad-osabi", "byte-order-flag-only"):
        assert ours.path is None and ours.error.startswith(str(bad))  # open_verify names the file
    else:
        assert ours.path is None and ours.error.startswith("libx.so: ")  # mapping names the request


def test_symlink_loop_stops_the_list_not_the_search(build: Builder) -> None:
    """ELOOP ends LD_LIBRARY_PATH (B is never tried) but the RUNPATH step still runs."""
    good = build.lib("B/libx.so", soname="libx.so")
    prog = build.exe("m", "int f(void); int main(void) { return f(); }", needed=["B/libx.so"],
                     runpath=f"{build.root}/B")
    (build.root / "A").mkdir()
    os.symlink("loop2", build.root / "A" / "libx.so")
    os.symlink("libx.so", build.root / "A" / "loop2")
    env = {"LD_LIBRARY_PATH": f"{build.root}/A"}
    real = real_ldd(prog, env)
    res = first(model(prog, env), "libx.so")
    assert res.path == real.paths["libx.so"] == str(good) and res.rule == "runpath"
    assert any(a.outcome == "Too many levels of symbolic links" for a in res.tried)


def test_import_of_a_pie_extension_is_an_error_finding(build: Builder) -> None:
    """An 'extension module' that is really a PIE: Python's dlopen fails; the report says so
    with glibc's message (it used to say "findings: none")."""
    from envlock.libs.analysis import analyze_module

    pie = build.exe("pkg/mod.cpython-311-x86_64-linux-gnu.so", "int main(void) { return 0; }",
                    extra=["-pie", "-fPIE"])
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("python", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    real = real_dlopen(exe, str(pie))
    report = analyze_module(str(exe), str(pie), sys_path=[], env={}, owners=False, runtime=False)
    refused = [f for f in report.findings if f.id == "refused"]
    assert refused and refused[0].severity == "error"
    assert real.error and real.error.endswith("cannot dynamically load position-independent executable")
    assert "cannot dynamically load position-independent executable" in refused[0].title


def test_runtime_check_of_a_refused_extension_is_not_ok(build: Builder, tmp_path: Path) -> None:
    """--runtime really loads the file in the target Python: the PIE is refused there too, and
    the check says the import failed (exit 1) instead of "ok"."""
    import json
    import sys

    from click.testing import CliRunner

    from envlock.cli import cli

    pie = build.exe("pkg/mod.cpython-311-x86_64-linux-gnu.so", "int main(void) { return 0; }",
                    extra=["-pie", "-fPIE"])
    result = CliRunner().invoke(cli, ["libs", str(pie), "--python", sys.executable, "--runtime",
                                      "--format", "json"], env={"XDG_CACHE_HOME": str(tmp_path)})
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert doc["runtime_check"]["status"] == "import-failed"
    assert "cannot dynamically load position-independent executable" in doc["runtime_check"]["error"]
    assert any(f["id"] == "refused" for f in doc["findings"])
