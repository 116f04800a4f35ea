"""envlock.libs.search against the real loader, scenario by scenario.

Each test builds a small tree of gcc-compiled objects, asks the model, and asks glibc
(``ldd``, a ``dlopen`` program, or ``LD_DEBUG=libs``) the same question.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from envlock.libs.config import detect_config, expand_dst, split_path_list
from envlock.libs.linkmap import Process

from .conftest import (
    DLOPEN_CALLER,
    DLOPEN_MAIN,
    Builder,
    real_dlopen,
    real_ld_debug,
    real_ldd,
)

RTLD = "ld-linux-x86-64.so.2"


def model(path: Path | str, env: dict[str, str] | None = None) -> Process:
    proc = Process(detect_config(env=env or {}))
    proc.start(str(path))
    return proc


def answers(proc: Process) -> dict[str, str | None]:
    """name → path, first request of each name (what ldd lists)."""
    out: dict[str, str | None] = {}
    for r in proc.resolutions:
        out.setdefault(r.name, r.path)
    return out


def assert_same_as_ldd(proc: Process, path: Path | str, env: dict[str, str] | None = None) -> None:
    real = real_ldd(path, env)
    ours = answers(proc)
    assert real.paths, real.stderr
    for name, target in real.paths.items():
        assert ours.get(name, "<not asked>") == target, name
    listed = set(real.listed) | {p for p in real.paths.values() if p}
    for name in set(ours) - set(real.paths) - {RTLD}:
        assert ours[name] in listed, name


# -- configuration ---------------------------------------------------------------------------


def test_config_matches_ld_so_help() -> None:
    out = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--help"], check=False, capture_output=True,
                         text=True, timeout=30).stdout
    if "Shared library search path" not in out:
        pytest.skip("ld.so --help does not list search paths (glibc < 2.33)")
    sysdirs = re.findall(r"^\s+(/\S*) \(system search path\)", out, re.MULTILINE)
    hwcaps = re.findall(r"^\s+(\S+) \(supported, searched\)", out.split("Subdirectories of glibc-hwcaps")[1].split("Legacy")[0], re.MULTILINE)
    cfg = detect_config(env={})
    assert list(cfg.system_dirs) == sysdirs
    assert list(cfg.hwcaps_active) == hwcaps
    assert [s for s in cfg.subdirs if s.startswith("glibc-hwcaps/")] == [f"glibc-hwcaps/{h}" for h in hwcaps]


def test_split_and_expand() -> None:
    assert split_path_list("a::b/:/") == ["a", "", "b", "/"]
    assert split_path_list("x;y:z", ":;") == ["x", "y", "z"]
    assert expand_dst("$ORIGIN/../lib:${ORIGIN}", origin="/o", platform="p", lib="l") == "/o/../lib:/o"
    assert expand_dst("$LIB/$PLATFORM", origin=None, platform="x86_64", lib="lib64") == "lib64/x86_64"
    assert expand_dst("$ORIGIN/x", origin=None, platform="p", lib="l") is None
    assert expand_dst("$ORIGINAL", origin="/o", platform="p", lib="l") == "$ORIGINAL"


# -- search order ----------------------------------------------------------------------------


def test_rpath_chain_reaches_the_executable(build: Builder) -> None:
    """exe RPATH → liba (RUNPATH) → libb (neither) → libc3: found via the exe's RPATH."""
    build.lib("d_c/libc3.so", soname="libc3.so")
    build.lib("d_b/libb.so", soname="libb.so", needed=["d_c/libc3.so"])
    build.lib("d_a/liba.so", soname="liba.so", needed=["d_b/libb.so"], runpath="$ORIGIN/../d_b")
    exe = build.exe("bin/prog", needed=["d_a/liba.so"],
                    rpath=f"{build.root}/d_a:{build.root}/d_c")
    proc = model(exe)
    c3 = next(r for r in proc.resolutions if r.name == "libc3.so")
    assert c3.rule == "rpath" and c3.source == f"RPATH of {exe}"
    b = next(r for r in proc.resolutions if r.name == "libb.so")
    assert b.rule == "runpath" and b.path == f"{build.root}/d_a/../d_b/libb.so"
    assert_same_as_ldd(proc, exe)


def test_runpath_is_not_transitive(build: Builder) -> None:
    build.lib("d_b/libc3.so", soname="libc3.so")
    build.lib("d_b/libb.so", soname="libb.so", needed=["d_b/libc3.so"])
    build.lib("d_a/liba.so", soname="liba.so", needed=["d_b/libb.so"], runpath="$ORIGIN/../d_b")
    exe = build.exe("prog", needed=["d_a/liba.so"], runpath=f"{build.root}/d_a")
    proc = model(exe)
    c3 = next(r for r in proc.resolutions if r.name == "libc3.so")
    assert c3.path is None and "No such file" in c3.error
    assert_same_as_ldd(proc, exe)


def test_rpath_beats_ld_library_path_runpath_does_not(build: Builder) -> None:
    build.lib("good/libdnn.so.8", "int v(void){return 832;}", soname="libdnn.so.8")
    build.lib("mod/libdnn.so.8", "int v(void){return 803;}", soname="libdnn.so.8")
    rp = build.lib("torch_rpath/libt.so", soname="libt.so", needed=["good/libdnn.so.8"],
                   rpath="$ORIGIN/../good")
    ru = build.lib("torch_runpath/libt.so", soname="libt.so", needed=["good/libdnn.so.8"],
                   runpath="$ORIGIN/../good")
    env = {"LD_LIBRARY_PATH": f"{build.root}/mod"}
    p_rp, p_ru = model(rp, env), model(ru, env)
    assert answers(p_rp)["libdnn.so.8"] == f"{build.root}/torch_rpath/../good/libdnn.so.8"
    assert answers(p_ru)["libdnn.so.8"] == f"{build.root}/mod/libdnn.so.8"
    assert_same_as_ldd(p_rp, rp, env)
    assert_same_as_ldd(p_ru, ru, env)


@pytest.mark.parametrize("token", ["$LIB", "$PLATFORM", "${ORIGIN}/../x"])
def test_dynamic_string_tokens_expand_like_the_loader(build: Builder, token: str) -> None:
    cfg = detect_config(env={})
    value = {"$LIB": cfg.lib, "$PLATFORM": cfg.platform, "${ORIGIN}/../x": "bin/../x"}[token]
    build.lib(f"{value}/libtok.so", soname="libtok.so")
    where = f"{build.root}/{token}" if token.startswith(("$L", "$P")) else token
    exe = build.exe("bin/prog", needed=[f"{value}/libtok.so"], rpath=where)
    proc = model(exe)
    assert answers(proc)["libtok.so"] == f"{build.root}/{value}/libtok.so"
    assert_same_as_ldd(proc, exe)


def test_tried_files_match_ld_debug(build: Builder) -> None:
    build.lib("d_c/libc3.so", soname="libc3.so")
    build.lib("d_b/libb.so", soname="libb.so", needed=["d_c/libc3.so"])
    (build.root / "empty").mkdir()
    exe = build.exe("prog", needed=["d_b/libb.so"],
                    rpath=f"{build.root}/nonexistent:{build.root}/empty:{build.root}/d_b:{build.root}/d_c")
    env = {"LD_LIBRARY_PATH": f"{build.root}/also-missing"}
    proc = model(exe, env)
    real = real_ld_debug(exe, env)
    for name in ("libb.so", "libc3.so", "libc.so.6"):
        ours = [a.path for r in proc.resolutions if r.name == name for a in r.tried]
        assert ours == real[name], name


_V4 = frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3", "avx", "avx2", "bmi1",
                 "bmi2", "f16c", "fma", "abm", "movbe", "xsave", "avx512f", "avx512bw", "avx512cd",
                 "avx512dq", "avx512vl"})


@pytest.mark.parametrize(("vendor", "flags", "platform", "first_legacy"), [
    # Intel with AVX-512 (Skylake-SP and later): HWCAP_X86_AVX512_1 and platform haswell
    ("GenuineIntel", _V4, "haswell", "tls/haswell/avx512_1/x86_64"),
    # Intel Haswell/Broadwell (AVX2, no AVX-512)
    ("GenuineIntel", _V4 - {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}, "haswell",
     "tls/haswell/x86_64"),
    # Knights Landing: AVX512ER and AVX512PF make the platform xeon_phi, no avx512_1
    ("GenuineIntel", _V4 | {"avx512er", "avx512pf"}, "xeon_phi", "tls/xeon_phi/x86_64"),
    # AMD Zen 4 (AVX-512): glibc sets neither the platform nor avx512_1 for other vendors
    ("AuthenticAMD", _V4, "x86_64", "tls/x86_64/x86_64"),
])
def test_legacy_hwcaps_follow_glibc_2_36_cpu_features(vendor: str, flags: frozenset[str],
                                                      platform: str, first_legacy: str) -> None:
    """glibc 2.36 ``sysdeps/x86/cpu-features.c`` and ``elf/dl-hwcaps.c``: the platform, the
    masked AT_HWCAP names and the power set of legacy subdirectories, largest first."""
    cfg = detect_config(env={}, cpu_flags=flags, vendor=vendor)
    if cfg.glibc >= (2, 37):
        pytest.skip("legacy hwcaps were removed in glibc 2.37")
    assert cfg.platform == platform
    legacy = [d for d in cfg.subdirs if not d.startswith("glibc-hwcaps/")]
    assert legacy[0] == first_legacy
    n = len(first_legacy.split("/"))
    assert len(legacy) == 2 ** n - 1 and legacy[-1] == first_legacy.split("/")[-1]
    assert legacy[2 ** (n - 1) - 1] == "tls"  # every subset with tls comes before those without


def test_glibc_hwcaps_subdirectory_wins(build: Builder) -> None:
    cfg = detect_config(env={})
    if not cfg.hwcaps_active:
        pytest.skip("no glibc-hwcaps level active on this CPU")
    level = cfg.hwcaps_active[-1]
    build.lib("d/libh.so.1", soname="libh.so.1")
    build.lib(f"d/glibc-hwcaps/{level}/libh.so.1", soname="libh.so.1")
    exe = build.exe("prog", needed=["d/libh.so.1"], rpath=f"{build.root}/d")
    proc = model(exe)
    assert answers(proc)["libh.so.1"] == f"{build.root}/d/glibc-hwcaps/{level}/libh.so.1"
    assert_same_as_ldd(proc, exe)


def test_preload_satisfies_needed_by_soname(build: Builder) -> None:
    renamed = build.lib("pre/renamed_file.so", soname="libc3.so")
    build.lib("tmp/libc3.so", soname="libc3.so")
    exe = build.exe("prog", needed=["tmp/libc3.so"])
    env = {"LD_PRELOAD": str(renamed)}
    proc = model(exe, env)
    c3 = next(r for r in proc.resolutions if r.name == "libc3.so")
    assert c3.rule == "already-loaded" and c3.path == str(renamed)
    assert proc.objects[2].kind == "preload"
    assert_same_as_ldd(proc, exe, env)


def test_wrong_class_candidate_is_skipped(build: Builder) -> None:
    good = build.lib("good/libw.so.1", soname="libw.so.1")
    bad = bytearray(good.read_bytes())
    bad[4] = 1  # ELFCLASS32
    (build.root / "bad").mkdir()
    (build.root / "bad" / "libw.so.1").write_bytes(bytes(bad))
    exe = build.exe("prog", needed=["good/libw.so.1"],
                    rpath=f"{build.root}/bad:{build.root}/good")
    proc = model(exe)
    w = next(r for r in proc.resolutions if r.name == "libw.so.1")
    assert w.path == f"{build.root}/good/libw.so.1"
    assert any(a.outcome == "wrong ELF class: ELFCLASS32" for a in w.tried)
    assert_same_as_ldd(proc, exe)
    from envlock.libs.analysis import analyze_module

    report = analyze_module(str(exe), str(exe), sys_path=[], env={}, mode="ldd")
    info = [f for f in report.findings if f.id == "wrong-class"]
    assert [f.severity for f in info] == ["info"]
    assert info[0].title.startswith(f"{build.root}/bad/libw.so.1 is skipped (wrong ELF class: ELFCLASS32)")


def test_wrong_class_only_gives_class_error(build: Builder) -> None:
    good = build.lib("good/libw.so.1", soname="libw.so.1")
    bad = bytearray(good.read_bytes())
    bad[4] = 1
    (build.root / "bad").mkdir()
    (build.root / "bad" / "libw.so.1").write_bytes(bytes(bad))
    exe = build.exe("prog", needed=["good/libw.so.1"], rpath=f"{build.root}/bad")
    proc = model(exe)
    w = next(r for r in proc.resolutions if r.name == "libw.so.1")
    assert w.path is None and w.error == "wrong ELF class: ELFCLASS32"
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    assert "wrong ELF class: ELFCLASS32" in real.stderr


def test_non_elf_candidate_is_fatal(build: Builder) -> None:
    build.lib("good/libw.so.1", soname="libw.so.1")
    (build.root / "script").mkdir()
    (build.root / "script" / "libw.so.1").write_text("/* GNU ld script */\n" * 4 + "INPUT(libw.so.1)\n")
    exe = build.exe("prog", needed=["good/libw.so.1"],
                    rpath=f"{build.root}/script:{build.root}/good")
    proc = model(exe)
    w = next(r for r in proc.resolutions if r.name == "libw.so.1")
    assert w.path is None and w.error.endswith("invalid ELF header")
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    assert real.returncode != 0
    assert f"{build.root}/script/libw.so.1: invalid ELF header" in real.stderr


def test_short_non_elf_candidate_is_too_short(build: Builder) -> None:
    build.lib("good/libw.so.1", soname="libw.so.1")
    (build.root / "script").mkdir()
    (build.root / "script" / "libw.so.1").write_text("INPUT(libw.so.1)\n")
    exe = build.exe("prog", needed=["good/libw.so.1"],
                    rpath=f"{build.root}/script:{build.root}/good")
    w = next(r for r in model(exe).resolutions if r.name == "libw.so.1")
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    assert w.error == f"{build.root}/script/libw.so.1: file too short"
    assert w.error in real.stderr


def test_missing_soname_symlink(build: Builder) -> None:
    build.lib("d/libm2.so.1", soname="libm2.so.1")
    exe = build.exe("prog", needed=["d/libm2.so.1"], rpath=f"{build.root}/d")
    (build.root / "d" / "libm2.so.1").rename(build.root / "d" / "libm2.so.1.0.0")
    proc = model(exe)
    assert answers(proc)["libm2.so.1"] is None
    assert_same_as_ldd(proc, exe)


def test_nodeflib_skips_cache_and_default_dirs(build: Builder) -> None:
    build.lib("d/libn.so", soname="libn.so", needed=[], extra=["-lz"])
    exe = build.exe("prog", needed=["d/libn.so"], rpath=f"{build.root}/d")
    lib = build.lib("d2/libn.so", soname="libn.so", extra=["-lz", "-Wl,-z,nodefaultlib"])
    exe2 = build.exe("prog2", needed=["d2/libn.so"], rpath=f"{build.root}/d2")
    p1, p2 = model(exe), model(exe2)
    assert answers(p1)["libz.so.1"] is not None
    assert answers(p2)["libz.so.1"] is None
    assert lib.exists()
    assert_same_as_ldd(p1, exe)
    assert_same_as_ldd(p2, exe2)


def test_missing_symbol_version_message(build: Builder) -> None:
    script2 = "V_1 { global: a; local: *; };\nV_2 { global: b; } V_1;\n"
    script1 = "V_1 { global: a; local: *; };\n"
    code = "int a(void){return 1;}\nint b(void){return 2;}\n"
    build.lib("new/libv.so.1", code, soname="libv.so.1", version_script=script2)
    build.lib("old/libv.so.1", "int a(void){return 1;}\n", soname="libv.so.1",
              version_script=script1)
    exe = build.exe("prog", "int b(void); int main(void){return b();}", needed=["new/libv.so.1"],
                    rpath=f"{build.root}/old")
    proc = model(exe)
    assert [p.version for p in proc.version_problems] == ["V_2"]
    real = real_ldd(exe)
    assert real.version_errors == [f"{exe}: {proc.version_problems[0].message}"]
    assert_same_as_ldd(proc, exe)


# -- dlopen ----------------------------------------------------------------------------------


@pytest.mark.parametrize("caller_tag", ["rpath", "runpath"])
def test_dlopen_uses_the_callers_paths(build: Builder, caller_tag: str) -> None:
    """A dlopen from a library: its RPATH and then the exe's RPATH, unless it has RUNPATH."""
    build.lib("exedir/libt.so", soname="libt.so")
    kw = {caller_tag: f"{build.root}/nowhere"}
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"], **kw)
    exe = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"],
                    rpath=f"{build.root}/caller:{build.root}/exedir")
    real = real_dlopen(exe, "libt.so")
    proc = model(exe)
    caller = proc.find("libcaller.so")
    res = proc.dlopen("libt.so", caller)
    assert res.path == real.path
    if caller_tag == "rpath":
        assert res.path == f"{build.root}/exedir/libt.so" and res.rule == "rpath"
    else:
        assert res.path is None and real.error is not None


def test_dlopen_by_path_then_dependencies_use_its_rpath(build: Builder) -> None:
    build.lib("deps/libd.so", soname="libd.so")
    plugin = build.lib("plug/plugin.so", soname="plugin.so", needed=["deps/libd.so"],
                       rpath="$ORIGIN/../deps")
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"],
                    rpath=f"{build.root}/caller")
    real = real_dlopen(exe, str(plugin))
    proc = model(exe)
    res = proc.dlopen(str(plugin), proc.find("libcaller.so"))
    assert res.rule == "slash" and res.path == real.path == str(plugin)
    dep = proc.find("libd.so")
    assert dep.path == f"{build.root}/plug/../deps/libd.so"
    assert dep.path in real.maps


def test_truncated_library_is_picked_then_fails(build: Builder) -> None:
    good = build.lib("d/libcut.so.1", soname="libcut.so.1")
    exe = build.exe("prog", needed=["d/libcut.so.1"], rpath=f"{build.root}/d")
    good.write_bytes(good.read_bytes()[:300])  # a copy cut short: header intact, tables gone
    from envlock.libs.analysis import analyze_module

    report = analyze_module(str(exe), str(exe), sys_path=[], env={}, mode="ldd")
    req = next(r for r in report.requests if r.name == "libcut.so.1")
    # Its ELF header is fine, but open_verify's read of the program headers comes back short:
    # a fatal error naming the file.
    assert req.path is None and req.error == f"{good}: cannot read file data"
    bad = next(f for f in report.findings if f.id == "invalid-elf")
    assert bad.severity == "error" and str(good) in " ".join(bad.evidence)
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    assert real.returncode != 0 and req.error in real.stderr


def _system_elf_files(limit: int) -> list[str]:
    import glob
    import os

    found = []
    for pattern in ("/usr/bin/*", "/usr/lib/x86_64-linux-gnu/*.so.*"):
        for f in sorted(glob.glob(pattern)):
            if os.path.islink(f) or not os.path.isfile(f):
                continue
            with open(f, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    found.append(f)
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def test_system_binaries_resolve_like_ldd() -> None:
    """A sample of this machine's own programs and libraries: the model agrees with ldd on
    every name (a sweep of 390 files found no difference)."""
    files = _system_elf_files(60)
    if not files:
        pytest.skip("no ELF files in /usr/bin")
    cfg = detect_config(env={})
    checked = 0
    for f in files:
        real = real_ldd(f)
        if not real.paths:
            continue  # static, or not runnable by ldd
        proc = Process(cfg)
        proc.start(f)
        ours: dict[str, str | None] = {}
        for r in proc.resolutions:
            ours.setdefault(r.name, r.path)
        for name, path in real.paths.items():
            assert ours.get(name, "<not asked>") == path, (f, name)
        checked += 1
    assert checked >= min(10, len(files) // 2)


# -- findings that need a whole process ------------------------------------------------------


def test_preload_failure_message_is_glibcs(build: Builder) -> None:
    from envlock.libs.analysis import analyze_module

    exe = build.exe("prog")
    env = {"LD_PRELOAD": f"{build.root}/nonexistent.so"}
    report = analyze_module(str(exe), str(exe), sys_path=[], env=env, mode="ldd")
    f = next(f for f in report.findings if f.id == "preload-failed")
    real = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", **env})
    assert f.cause == real.stderr.strip()


def test_preload_shadows_the_rpath_copy(build: Builder) -> None:
    from envlock.libs.analysis import analyze_module

    build.lib("good/libdnn.so.8", soname="libdnn.so.8")
    pre = build.lib("elsewhere/libdnn.so.8", soname="libdnn.so.8")
    lib = build.lib("t/libt.so", soname="libt.so", needed=["good/libdnn.so.8"], rpath="$ORIGIN/../good")
    env = {"LD_PRELOAD": str(pre)}
    report = analyze_module(str(lib), str(lib), sys_path=[], env=env, mode="ldd")
    f = next(f for f in report.findings if f.id == "shadowed")
    assert "already loaded by LD_PRELOAD" in f.cause and f.fix == ("Unset LD_PRELOAD for this job.",)
    assert real_ldd(lib, env).listed[0] == str(pre) or str(pre) in real_ldd(lib, env).listed


def test_two_files_with_one_soname_and_two_openmp_runtimes(build: Builder) -> None:
    import os

    from envlock.libs.analysis import analyze_module

    a = build.lib("a/libdup.so.1", soname="libdup.so.1")
    b = build.lib("b/libdup.so.1", soname="libdup.so.1")
    iomp = build.lib("intel/libiomp5.so", soname="libiomp5.so")
    gomp = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
    uses = build.lib("u/libuses.so", soname="libuses.so", needed=["intel/libiomp5.so"],
                     rpath="$ORIGIN/../intel", extra=["-lgomp"] if os.path.exists(gomp) else [])
    # dlopen by path does not match by SONAME: both copies end up in the process.
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    report = analyze_module(str(exe), str(a), sys_path=[], env={}, extra_modules=[str(b), str(uses)])
    dup = next(f for f in report.findings if f.id == "duplicate-soname")
    assert dup.library == "libdup.so.1" and len(dup.evidence) == 2
    if os.path.exists(gomp):
        omp = next(f for f in report.findings if f.id == "duplicate-openmp")
        assert any(e.startswith(f"{build.root}/u/../intel/libiomp5.so") for e in omp.evidence)
        assert any("libgomp.so.1" in e for e in omp.evidence) and iomp.exists()


@pytest.mark.parametrize("entry", ["$ORIGIN/sub", "sub", "./sub", "sub/", ""])
def test_ld_library_path_entries_as_ldd_prints_them(build: Builder, entry: str) -> None:
    """$ORIGIN in LD_LIBRARY_PATH is the main program's directory; relative entries stay
    relative in the path the loader records (ldd prints ``sub/libx.so``); JSON also gives the
    absolute path."""
    from envlock.libs.analysis import analyze_module

    build.lib("sub/libx.so", soname="libx.so")
    if entry == "":
        (build.root / "libx.so").symlink_to("sub/libx.so")
    prog = build.exe("m", "int f(void); int main(void) { return f(); }", needed=["sub/libx.so"])
    env = {"LD_LIBRARY_PATH": entry if entry else ":"}
    real = subprocess.run(["ldd", "./m"], capture_output=True, text=True, timeout=30, cwd=build.root,
                          env={"PATH": "/usr/bin:/bin", **env})
    line = next(x for x in real.stdout.splitlines() if "libx.so" in x)
    got = re.match(r"\s*libx\.so(?: => (\S+))? \(0x", line)
    assert got, line
    expected = got.group(1) or "libx.so"
    cfg = detect_config(env=env, cwd=str(build.root))
    proc = Process(cfg)
    proc.start("./m")  # as ldd ./m: the main map is named and given $ORIGIN as typed
    res = next(r for r in proc.resolutions if r.name == "libx.so")
    assert res.path == expected
    report = analyze_module(str(prog), str(prog), sys_path=[], env=env, mode="ldd", owners=False,
                            runtime=False, config=cfg)
    doc = report.to_json()
    req = next(r for r in doc["requests"] if r["name"] == "libx.so")
    assert req["abspath"] == os.path.normpath(os.path.join(build.root, expected))
