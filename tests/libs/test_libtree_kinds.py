"""Scenarios of the kinds libtree's ``tests/`` exercise, rebuilt here (own code) and each
compared with ``ldd``: a direct dependency found only through another object's RPATH, $ORIGIN
of a library reached through a symlink, and RPATH order along the loader chain.

(libtree's other kinds — $ORIGIN, the RPATH of a parent's parent, RPATH over
LD_LIBRARY_PATH over RUNPATH, 32-bit candidates, symbol versions, ``-z nodefaultlib`` — are
in ``test_loader.py`` and ``test_cases.py``.)
"""

from __future__ import annotations

import os

from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .conftest import Builder, real_ldd


def model(path, env=None) -> Process:
    proc = Process(detect_config(env=env or {}))
    proc.start(str(path))
    return proc


def first_paths(proc: Process) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for r in proc.resolutions:
        out.setdefault(r.name, r.path)
    return out


def test_direct_dependency_not_on_the_programs_own_rpath(build: Builder) -> None:
    """exe needs lib_f directly and lib_g, whose RPATH has lib_f's directory: exe's own
    request for lib_f comes first (breadth-first) and fails; with lib_f's directory also on
    exe's RPATH it is found."""
    build.lib("some_dir/lib_f.so", soname="lib_f.so")
    build.lib("lib_g.so", "int f(void); int g(void) { return f(); }", soname="lib_g.so",
              needed=["some_dir/lib_f.so"], rpath=f"{build.root}/some_dir")
    code = "int f(void); int g(void); int main(void) { return f() + g(); }"
    exe_a = build.exe("exe_a", code, needed=["some_dir/lib_f.so", "lib_g.so"], rpath=str(build.root))
    exe_b = build.exe("exe_b", code, needed=["some_dir/lib_f.so", "lib_g.so"],
                      rpath=f"{build.root}:{build.root}/some_dir")
    for exe, found in ((exe_a, False), (exe_b, True)):
        real = real_ldd(exe)
        ours = first_paths(model(exe))
        assert ours["lib_f.so"] == real.paths["lib_f.so"]
        assert (ours["lib_f.so"] is not None) is found


def test_origin_of_a_library_reached_through_a_symlink(build: Builder) -> None:
    """b/libg.so is a symlink to a/libg.so, whose RPATH is $ORIGIN: the origin is b/ (the
    path opened), so a/libf.so is not found — unless LD_LIBRARY_PATH names a/."""
    build.lib("a/libf.so", soname="libf.so")
    build.lib("a/libg.so", "int f(void); int g(void) { return f(); }", soname="libg.so",
              needed=["a/libf.so"], rpath="$ORIGIN")
    (build.root / "b").mkdir()
    os.symlink("../a/libg.so", build.root / "b" / "libg.so")
    exe = build.exe("exe", "int g(void); int main(void) { return g(); }", needed=["a/libg.so"],
                    rpath="$ORIGIN/b")
    real = real_ldd(exe)
    ours = first_paths(model(exe))
    assert real.paths["libg.so"] == ours["libg.so"] == f"{build.root}/b/libg.so"
    assert real.paths["libf.so"] is None and ours["libf.so"] is None
    env = {"LD_LIBRARY_PATH": f"{build.root}/a"}
    real = real_ldd(exe, env)
    ours = first_paths(model(exe, env))
    assert ours["libf.so"] == real.paths["libf.so"] == f"{build.root}/a/libf.so"


def test_rpath_order_along_the_loader_chain(build: Builder) -> None:
    """exe (RPATH $ORIGIN, $ORIGIN/first) → liba (RPATH $ORIGIN/second) → libb: liba's own
    RPATH comes before the executable's, so second/libb.so wins."""
    build.lib("first/libb.so", "int g(void) { return 1; }", soname="libb.so")
    build.lib("second/libb.so", "int g(void) { return 2; }", soname="libb.so")
    build.lib("liba.so", "int g(void); int f(void) { return g(); }", soname="liba.so",
              needed=["second/libb.so"], rpath="$ORIGIN/second")
    exe = build.exe("exe", "int f(void); int main(void) { return f(); }", needed=["liba.so"],
                    rpath="$ORIGIN:$ORIGIN/first")
    real = real_ldd(exe)
    ours = first_paths(model(exe))
    assert ours["libb.so"] == real.paths["libb.so"] == f"{build.root}/second/libb.so"
