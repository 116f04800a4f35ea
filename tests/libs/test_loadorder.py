"""When glibc meets a problem (envlock.libs.loadorder), against the real loader: a dlopen
probe (``RTLD_NOW``: exit status, ``dlerror()``, stderr) for check_match's assertion, filters
(``ld -F``/``ld -f``), and the first fatal error with what it leaves unreached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.analysis import analyze_module
from envlock.libs.loadorder import assertion_message
from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, _clean_env

VERSIONED = "V1 { global: g; h; local: *; };"
P_CODE = "int g(void) { return 2; } int h(void) { return 3; }"


def probe(build: Builder) -> Path:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    return build.exe("python", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")


def real(exe: Path, target: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the dlopen probe, under LD_BIND_NOW=1."""
    p = subprocess.run([str(exe), str(target)], capture_output=True, text=True, timeout=30,
                       env=_clean_env({**env, "LD_BIND_NOW": "1"}), check=False)
    return p.returncode, p.stdout, p.stderr


def ours(exe: Path, target: Path, env: dict[str, str], symbols: bool = False):
    return analyze_module(str(exe), str(target), sys_path=[], env=env, owners=False,
                          runtime=False, check_symbols=symbols).findings


def cli_run(target: Path, env: dict[str, str], tmp: Path, *extra: str):
    full = {"XDG_CACHE_HOME": str(tmp / "cache"), "LD_PRELOAD": "", "LD_LIBRARY_PATH": "", **env}
    return CliRunner().invoke(cli, ["libs", str(target), "--python", sys.executable, *extra], env=full)


def versioned_setup(build: Builder, picked: str, consumer: str = "int g(void); int use(void) { return g(); }"):
    build.lib("good/libp.so", P_CODE, soname="libp.so", version_script=VERSIONED)
    # --as-needed drops the unused libc, and with it every Verneed: no version table at all
    build.lib("picked/libp.so", picked, soname="libp.so",
              extra=[] if "puts" in picked else ["-Wl,--as-needed"])
    return build.lib("mod.so", consumer, soname="mod.so", needed=["good/libp.so"],
                     runpath=f"{build.root}/good")


def test_check_match_assertion_aborts(build: Builder, tmp_path: Path) -> None:
    """An unversioned rebuild of libp.so on LD_LIBRARY_PATH: ld.so asserts and aborts (127)."""
    mod = versioned_setup(build, P_CODE)
    exe = probe(build)
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked"}
    rc, out, err = real(exe, mod, env)
    msg = assertion_message((2, 36))
    assert rc == 127 and msg in err and "OK" not in out
    first = ours(exe, mod, env)[0]  # found without --symbols
    assert first.id == "check-match-assertion" and first.severity == "error"
    assert msg in first.cause and first.requester == str(mod)
    res = cli_run(mod, env, tmp_path)
    assert res.exit_code == 1 and msg in res.output
    assert "error [check-match-assertion]" in res.output.split("findings (")[1].splitlines()[1]
    # the versioned copy: fine for both
    rc, out, _ = real(exe, mod, {})
    assert rc == 0 and out.startswith("OK")
    assert not [f for f in ours(exe, mod, {}, symbols=True) if f.severity == "error"]


def test_check_match_weak_reference_aborts_too(build: Builder) -> None:
    mod = versioned_setup(build, P_CODE, "__attribute__((weak)) int g(void); "
                                         "int use(void) { return g ? g() : 0; }")
    exe = probe(build)
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked"}
    rc, _out, err = real(exe, mod, env)
    assert rc == 127 and assertion_message((2, 36)) in err
    assert ours(exe, mod, env)[0].id == "check-match-assertion"


def test_check_match_definer_with_a_version_table_binds(build: Builder) -> None:
    """The rebuild calls puts: a Verneed on libc gives it a version table, so check_match
    accepts its unversioned g (no assertion)."""
    mod = versioned_setup(build, '#include <stdio.h>\nint g(void) { return puts("x"); }')
    assert "GLIBC_2.2.5" in subprocess.run(["readelf", "-V", str(build.root / "picked/libp.so")],
                                           capture_output=True, text=True, timeout=30).stdout
    exe = probe(build)
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked"}
    rc, out, _err = real(exe, mod, env)
    assert rc == 0 and out.startswith("OK")
    assert not [f for f in ours(exe, mod, env, symbols=True) if f.severity == "error"]


def test_check_match_other_unversioned_definer_first(build: Builder) -> None:
    """An unversioned libq.so preloaded defines g first: not the Verneed's file, accepted."""
    mod = versioned_setup(build, P_CODE)
    build.lib("q/libq.so", "int g(void) { return 9; }", soname="libq.so")
    exe = probe(build)
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked", "LD_PRELOAD": f"{build.root}/q/libq.so"}
    rc, out, _err = real(exe, mod, env)
    assert rc == 0 and out.startswith("OK")
    assert not [f for f in ours(exe, mod, env, symbols=True) if f.severity == "error"]


def test_check_match_unversioned_without_the_symbol(build: Builder) -> None:
    """The rebuild lacks g altogether: an ordinary `undefined symbol: g, version V1`."""
    mod = versioned_setup(build, "int h(void) { return 3; }")
    exe = probe(build)
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked"}
    rc, out, _err = real(exe, mod, env)
    assert rc == 1 and out.startswith(f"ERR {mod}: undefined symbol: g, version V1")
    first = ours(exe, mod, env, symbols=True)[0]
    assert first.id == "missing-symbol" and first.evidence[0].startswith("undefined symbol: g, version V1")


def filters(build: Builder, flag: str, *, nested: bool = False):
    """libfilter.so (f) with DT_FILTER/DT_AUXILIARY libfiltee.so (f, only); mod.so uses both."""
    if nested:
        build.lib("lib/libinner.so", "int only(void) { return 7; }", soname="libinner.so")
        build.lib("lib/libfiltee.so", "int f(void) { return 1; }", soname="libfiltee.so",
                  runpath=f"{build.root}/lib", extra=[f"-Wl,{flag},libinner.so"])
    else:
        build.lib("lib/libfiltee.so", "int f(void) { return 1; } int only(void) { return 7; }",
                  soname="libfiltee.so")
    build.lib("lib/libfilter.so", "int f(void) { return 2; }", soname="libfilter.so",
              runpath=f"{build.root}/lib", extra=[f"-Wl,{flag},libfiltee.so"])
    return build.lib("mod.so", "int f(void); int only(void); int use(void) { return f() * 10 + only(); }",
                     soname="mod.so", needed=["lib/libfilter.so"], runpath=f"{build.root}/lib")


def test_filter_symbols_come_from_the_filtee(build: Builder) -> None:
    for nested in (False, True):
        mod = filters(build, "-F", nested=nested)
        exe = probe(build)
        rc, out, _err = real(exe, mod, {})
        assert rc == 0 and out.startswith("OK"), out
        found = ours(exe, mod, {}, symbols=True)
        assert not [f for f in found if f.severity == "error"], found
        assert any(f.id == "filter" and f.requester == f"{build.root}/lib/libfilter.so" for f in found)


def test_filter_scope_puts_the_filtee_first(build: Builder) -> None:
    """f() is defined by both: glibc binds the filtee's (probe: use() == 17 via ld.so order)."""
    mod = filters(build, "-F")
    exe = probe(build)
    proc = Process(detect_config(env={}))
    proc.start(str(exe))
    proc.dlopen(str(mod), proc.main)
    obj = proc.find(str(mod))
    names = [o.path for o in proc.scope(obj)]
    assert names.index(f"{build.root}/lib/libfiltee.so") < names.index(f"{build.root}/lib/libfilter.so")


def test_missing_filtee_is_fatal(build: Builder, tmp_path: Path) -> None:
    mod = filters(build, "-F")
    (build.root / "lib" / "libfiltee.so").unlink()
    exe = probe(build)
    rc, out, _err = real(exe, mod, {})
    assert rc == 1 and out.strip() == "ERR libfiltee.so: cannot open shared object file: No such file or directory"
    first = ours(exe, mod, {}, symbols=True)[0]
    assert first.id == "filtee-not-found" and first.library == "libfiltee.so"
    assert "libfiltee.so: cannot open shared object file: No such file or directory" in first.cause
    assert cli_run(mod, {}, tmp_path).exit_code == 1


def test_missing_auxiliary_filtee_is_ignored(build: Builder, tmp_path: Path) -> None:
    """DT_AUXILIARY missing: the load goes on; here `only` then has no definer."""
    mod = filters(build, "-f")
    exe = probe(build)
    rc, out, _ = real(exe, mod, {})
    assert rc == 0 and out.startswith("OK")
    (build.root / "lib" / "libfiltee.so").unlink()
    rc, out, _ = real(exe, mod, {})
    assert rc == 1 and out.strip() == f"ERR {mod}: undefined symbol: only"
    found = ours(exe, mod, {}, symbols=True)
    assert found[0].id == "missing-symbol" and found[0].evidence[0] == f"undefined symbol: only ({mod})"
    assert any(f.id == "auxiliary-not-loaded" and f.severity == "info" for f in found)
    # without the symbol, a missing auxiliary filtee is not an error at all
    mod2 = build.lib("mod2.so", "int f(void); int use(void) { return f(); }", soname="mod2.so",
                     needed=["lib/libfilter.so"], runpath=f"{build.root}/lib")
    rc, out, _ = real(exe, mod2, {})
    assert rc == 0 and out.startswith("OK")
    assert cli_run(mod2, {}, tmp_path, "--symbols").exit_code == 0


def test_first_fatal_error_and_what_it_leaves_unreached(build: Builder, tmp_path: Path) -> None:
    """mod.so needs libmpi.so.12 (absent) and its symbol: the loader stops at the not-found;
    the missing symbol is a consequence, not a further cause (libtree's tests 02/07)."""
    build.lib("gone/libmpi.so.12", "int mpi_init(void) { return 0; }", soname="libmpi.so.12")
    mod = build.lib("mod.so", "int mpi_init(void); int use(void) { return mpi_init(); }",
                    soname="mod.so", needed=["gone/libmpi.so.12"])
    (build.root / "gone" / "libmpi.so.12").unlink()
    exe = probe(build)
    rc, out, _ = real(exe, mod, {})
    assert rc == 1 and out.strip() == "ERR libmpi.so.12: cannot open shared object file: No such file or directory"
    found = ours(exe, mod, {}, symbols=True)
    assert found[0].id == "not-found" and found[0].library == "libmpi.so.12" and found[0].consequence_of is None
    sym = next(f for f in found if f.id == "missing-symbol")
    assert sym.consequence_of == found[0].title
    res = cli_run(mod, {}, tmp_path, "--symbols")
    assert res.exit_code == 1
    assert "then (not reached by ld.so): error [missing-symbol]" in res.output
    js = cli_run(mod, {}, tmp_path, "--symbols", "--format", "json")
    doc = json.loads(js.output)
    assert doc["findings"][0]["id"] == "not-found"
    assert any(f.get("consequence_of") == found[0].title for f in doc["findings"])
