"""Symbol binding (glibc ``elf/dl-lookup.c``) against the real loader's ``dlopen(RTLD_NOW)``.

Each scenario builds a consumer linked against one copy of a library, then lets the loader
pick another copy (through ``LD_LIBRARY_PATH``) and compares envlock's ``missing-symbol``
findings with what ``dlopen`` says (``dlerror()``: ``…: undefined symbol: NAME``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.libs.analysis import analyze_module
from envlock.libs.elfsyms import read_symbols

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, real_dlopen

GOOD = "int f(void) { return 1; } int g(void) { return 2; }"
UNIQUE = (
    'int f(void) { return 1; }\n'
    '__asm__(".globl g\\n.type g, @gnu_unique_object\\n.data\\n.align 4\\ng: .long 7\\n.size g, 4\\n");\n'
)
PROTECTED = 'int f(void) { return 1; } __attribute__((visibility("protected"))) int g(void) { return 2; }'
HIDDEN = 'int f(void) { return 1; } __attribute__((visibility("hidden"))) int g(void) { return 2; }'
OLD = "int f(void) { return 1; }"


def scenario(build: Builder, picked_code: str, consumer_code: str = "int g(void); int use(void) { return g(); }"):
    """good/libp.so (has g), picked/libp.so (``picked_code``), plug/mod.so linked against the
    good one with RUNPATH to it; LD_LIBRARY_PATH (searched first) points at the picked one."""
    build.lib("good/libp.so", GOOD, soname="libp.so")
    build.lib("picked/libp.so", picked_code, soname="libp.so")
    mod = build.lib("plug/mod.cpython-311-x86_64-linux-gnu.so", consumer_code, soname="mod.so",
                    needed=["good/libp.so"], runpath=f"{build.root}/good")
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("python", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    env = {"LD_LIBRARY_PATH": f"{build.root}/picked"}
    real = real_dlopen(exe, str(mod), env)
    report = analyze_module(str(exe), str(mod), sys_path=[], env=env, owners=False, runtime=False,
                            check_symbols=True)
    return mod, real, [f for f in report.findings if f.id == "missing-symbol"]


def test_missing_unversioned_symbol(build: Builder) -> None:
    mod, real, found = scenario(build, OLD)
    assert real.error == f"{mod}: undefined symbol: g"
    (f,) = found
    assert f.severity == "error" and f.requester == str(mod)
    assert f.evidence[0] == f"undefined symbol: g ({mod})"
    assert f"{build.root}/picked/libp.so" in f.title  # the picked library that lacks it
    # the copy on disk that has it (on the module's own RUNPATH)
    assert any(e.startswith(f"{build.root}/good/libp.so defines it") for e in f.evidence)
    assert f.fix[0].startswith(f"Make the loader pick {build.root}/good/libp.so")


@pytest.mark.parametrize("code", [UNIQUE, PROTECTED], ids=["gnu-unique", "protected"])
def test_unique_and_protected_definitions_bind(build: Builder, code: str) -> None:
    consumer = ("extern int g; int use(void) { return g; }" if code is UNIQUE else
                "int g(void); int use(void) { return g(); }")
    build.lib("good/libp.so", code, soname="libp.so")
    mod, real, found = scenario_same(build, consumer)
    assert real.error is None and real.path == str(mod)
    assert found == []
    if code is UNIQUE:
        syms = read_symbols(build.root / "good" / "libp.so")
        assert ("g", None) in syms.defined


def scenario_same(build: Builder, consumer_code: str):
    mod = build.lib("plug/mod.cpython-311-x86_64-linux-gnu.so", consumer_code, soname="mod.so",
                    needed=["good/libp.so"], rpath=f"{build.root}/good")
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("python", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    real = real_dlopen(exe, str(mod))
    report = analyze_module(str(exe), str(mod), sys_path=[], env={}, owners=False, runtime=False,
                            check_symbols=True)
    return mod, real, [f for f in report.findings if f.id == "missing-symbol"]


def test_hidden_definition_does_not_bind(build: Builder) -> None:
    mod, real, found = scenario(build, HIDDEN)
    assert real.error == f"{mod}: undefined symbol: g"
    assert [f.evidence[0] for f in found] == [f"undefined symbol: g ({mod})"]


def test_weak_undefined_may_stay_unbound(build: Builder) -> None:
    consumer = ("extern int g(void) __attribute__((weak)); "
                "int use(void) { return g ? g() : 0; }")
    mod, real, found = scenario(build, OLD, consumer)
    assert real.error is None and real.path == str(mod)
    assert found == []


def test_symbol_from_the_global_scope_binds(build: Builder) -> None:
    """A symbol that none of the module's own dependencies define, but the program does."""
    build.lib("glob/libglob.so", "int g(void) { return 3; }", soname="libglob.so")
    mod = build.lib("plug/mod.cpython-311-x86_64-linux-gnu.so",
                    "int g(void); int use(void) { return g(); }", soname="mod.so",
                    extra=["-Wl,--allow-shlib-undefined"])
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("python", DLOPEN_MAIN, needed=["caller/libcaller.so", "glob/libglob.so"],
                    rpath=f"{build.root}/caller:{build.root}/glob")
    real = real_dlopen(exe, str(mod))
    report = analyze_module(str(exe), str(mod), sys_path=[], env={}, owners=False, runtime=False,
                            check_symbols=True)
    assert real.error is None
    assert [f for f in report.findings if f.id == "missing-symbol"] == []
    # ... while a program without it fails, and so does the model.
    exe2 = build.exe("python2", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    real2 = real_dlopen(exe2, str(mod))
    report2 = analyze_module(str(exe2), str(mod), sys_path=[], env={}, owners=False, runtime=False,
                             check_symbols=True)
    assert real2.error == f"{mod}: undefined symbol: g"
    (f,) = [f for f in report2.findings if f.id == "missing-symbol"]
    assert "no object in its scope defines it" in f.title


def test_cplusplus_name_is_demangled(build: Builder, tmp_path: Path) -> None:
    mod, real, found = scenario(build, OLD, "int _ZN2ns4funcEv(void); int use(void) { return _ZN2ns4funcEv(); }")
    assert real.error == f"{mod}: undefined symbol: _ZN2ns4funcEv"
    (f,) = found
    assert "_ZN2ns4funcEv" in f.title
    import shutil

    if shutil.which("c++filt"):
        assert "ns::func()" in f.title
