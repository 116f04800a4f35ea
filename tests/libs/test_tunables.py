"""``GLIBC_TUNABLES`` and ``LD_HWCAP_MASK`` change which ``glibc-hwcaps`` and legacy hwcap
subdirectories the loader searches; the model must follow them as glibc 2.36 does
(``sysdeps/x86/cpu-tunables.c``, ``sysdeps/x86/get-isa-level.h``, ``sysdeps/x86/cpu-features.c``,
``elf/dl-tunables.c``).

The oracle is the real loader run with the same variables: ``ld.so --help`` for the lists,
``LD_DEBUG=libs ld.so --list`` for every file tried, ``ldd`` for the file chosen, and a
setuid-root program for AT_SECURE.  The tunables push the real loader down to each ISA level the
CPU running the tests has, so every level is checked on an AVX-512 machine and as many as the CPU
allows elsewhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.hwcaps import parse_tunables, strtoul
from envlock.libs.config import detect_config, SearchConfig
from envlock.libs.linkmap import Process

from .conftest import Builder, _clean_env, real_ld_debug, real_ldd

LDSO = "/lib64/ld-linux-x86-64.so.2"
LEVELS = ("x86-64-v4", "x86-64-v3", "x86-64-v2")

pytestmark = pytest.mark.skipif(not os.path.exists(LDSO) or os.uname().machine != "x86_64",
                                reason="needs the x86-64 glibc loader")


def ld_so_help(env: dict[str, str]) -> tuple[list[str], str, list[str]]:
    """``ld.so --help`` under ``env``: active glibc-hwcaps levels, AT_PLATFORM, and the legacy
    names searched (glibc 2.33–2.36 print them)."""
    out = subprocess.run([LDSO, "--help"], check=False, capture_output=True, text=True, timeout=30,
                         env=_clean_env(env)).stdout
    if "Subdirectories of glibc-hwcaps" not in out:
        pytest.skip("ld.so --help does not list glibc-hwcaps subdirectories (glibc < 2.33)")
    hw, _, legacy = out.split("Subdirectories of glibc-hwcaps", 1)[1].partition("Legacy HWCAP")
    levels = re.findall(r"^\s+(\S+) \(supported, searched\)", hw, re.MULTILINE)
    platform = re.findall(r"^\s+(\S+) \(AT_PLATFORM", legacy, re.MULTILINE)
    names = re.findall(r"^\s+(\S+) \((?:AT_PLATFORM; )?supported, searched\)", legacy, re.MULTILINE)
    return levels, platform[0] if platform else "", names


def legacy_components(cfg: SearchConfig) -> set[str]:
    return {c for s in cfg.subdirs if not s.startswith("glibc-hwcaps/") for c in s.split("/")}


# Each value pushes the loader one level down on a CPU that has the level above, or masks one
# input of the legacy names; the last ones check the parser against glibc's.
CASES = [
    {},
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"},                # v4 off; avx512_1 stays (Intel)
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2"},          # v3 off; haswell off
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2,-SSE4_2"},  # v2 off: baseline
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512CD"},               # v4 and avx512_1 off
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-BMI1"},                   # v3 (BMI1 since the backport) and haswell
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-LZCNT"},
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-OSXSAVE"},                # AVX and AVX-512 go with it
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-XSAVE"},                  # XSAVEC still usable: nothing
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-XSAVE,-XSAVEC"},          # … now AVX goes too
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-SSE2"},                   # below baseline: no level
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-avx512f"},                # case-sensitive: no effect
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=AVX2,-,,-AVX2x"},          # no '-', empty, unknown
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2:glibc.cpu.hwcaps=-SSSE3"},  # the last one wins
    {"GLIBC_TUNABLES": "junk:glibc.cpu.hwcaps:glibc.malloc.check=1:glibc.cpu.hwcaps=-AVX512F"},
    {"GLIBC_TUNABLES": "glibc.cpu.x86_rep_movsb_threshold=4096"},   # not a search tunable
    {"GLIBC_TUNABLES": "glibc.cpu.hwcap_mask=0"},                   # legacy: tls and platform only
    {"GLIBC_TUNABLES": "glibc.cpu.hwcap_mask=0x4"},                 # avx512_1 only
    {"GLIBC_TUNABLES": "glibc.cpu.hwcap_mask= 02zz"},               # _dl_strtoul: octal, stops at z
    {"LD_HWCAP_MASK": "0"},                                         # the env alias
    {"LD_HWCAP_MASK": "0", "GLIBC_TUNABLES": "glibc.cpu.hwcap_mask=6"},  # the tunable wins
]


@pytest.mark.parametrize("env", CASES, ids=lambda e: " ".join(f"{k}={v}" for k, v in e.items()) or "none")
def test_config_matches_ld_so_help_under_tunables(env: dict[str, str]) -> None:
    """The active glibc-hwcaps levels, the platform and the legacy hwcap names are those
    ``ld.so --help`` prints under the same variables."""
    levels, platform, names = ld_so_help(env)
    cfg = detect_config(env=env)
    assert list(cfg.hwcaps_active) == levels
    assert [s for s in cfg.subdirs if s.startswith("glibc-hwcaps/")] == [f"glibc-hwcaps/{h}" for h in levels]
    if cfg.glibc < (2, 37):
        assert cfg.platform == platform
        assert legacy_components(cfg) == set(names)


def _hw_tree(build: Builder) -> Path:
    """``d/libhw.so.1`` in every glibc-hwcaps level and plain, each returning its level."""
    for i, level in enumerate(LEVELS):
        build.lib(f"d/glibc-hwcaps/{level}/libhw.so.1", f"int hw(void) {{ return {4 - i}; }}",
                  soname="libhw.so.1")
    build.lib("d/libhw.so.1", "int hw(void) { return 1; }", soname="libhw.so.1")
    return build.exe("prog", '#include <stdio.h>\nint hw(void);\nint main(void) { printf("%d\\n", hw()); return 0; }',
                     needed=["d/libhw.so.1"], rpath=f"{build.root}/d")


LEVEL_CASES = [
    ("x86-64-v4", ""),
    ("x86-64-v3", "glibc.cpu.hwcaps=-AVX512F"),
    ("x86-64-v2", "glibc.cpu.hwcaps=-AVX512F,-AVX2"),
    (None, "glibc.cpu.hwcaps=-AVX512F,-AVX2,-SSE4_2"),
    ("x86-64-v3", "glibc.cpu.hwcaps=-AVX512CD:glibc.cpu.hwcap_mask=0"),
]


@pytest.mark.parametrize(("level", "tunables"), LEVEL_CASES)
def test_each_level_picks_the_file_the_loader_picks(build: Builder, level: str | None,
                                                    tunables: str) -> None:
    """One library in ``glibc-hwcaps/x86-64-v4``, ``…/v3``, ``…/v2`` and plain: under each
    ``GLIBC_TUNABLES`` the model picks the copy ``ldd`` picks and tries, in order, every file
    ``LD_DEBUG=libs`` shows (glibc-hwcaps and legacy subdirectories of the RPATH and of the
    system directories).  Where the CPU has the level, it is the one picked."""
    exe = _hw_tree(build)
    env = {"GLIBC_TUNABLES": tunables} if tunables else {}
    cfg = detect_config(env=env)
    host_levels = detect_config(env={}).hwcaps_active
    if level is None or level in host_levels:
        assert cfg.hwcaps_active[:1] == ((level,) if level else ())
    proc = Process(cfg)
    proc.start(str(exe))
    chosen = next(r for r in proc.resolutions if r.name == "libhw.so.1")
    best = f"glibc-hwcaps/{cfg.hwcaps_active[0]}/" if cfg.hwcaps_active else ""
    assert chosen.path == f"{build.root}/d/{best}libhw.so.1"
    assert real_ldd(exe, env).paths["libhw.so.1"] == chosen.path
    real = real_ld_debug(exe, env)
    for name in ("libhw.so.1", "libc.so.6"):
        assert [a.path for r in proc.resolutions if r.name == name for a in r.tried] == real[name], name
    ran = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=30,
                         env=_clean_env(env))
    assert ran.stdout.strip() == str(4 - LEVELS.index(cfg.hwcaps_active[0]) if cfg.hwcaps_active else 1)


@pytest.mark.parametrize(("vendor", "platform", "avx512_1"), [("GenuineIntel", "haswell", True),
                                                                ("AuthenticAMD", "x86_64", False)])
def test_masked_features_on_intel_and_amd(vendor: str, platform: str, avx512_1: bool) -> None:
    """The same AVX-512 flags and ``-AVX512F`` give x86-64-v3 on both vendors (the report of
    issue 22: envlock said v4 on an AMD EPYC), but the legacy ``haswell`` platform and
    ``avx512_1`` hwcap only on Intel; ``-AVX512CD`` then drops ``avx512_1`` too
    (``init_cpu_features`` tests AVX512CD, not AVX512F)."""
    flags = frozenset("fpu cx8 cmov mmx fxsr sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt "
                      "xsave avx f16c lahf_lm abm bmi1 avx2 bmi2 avx512f avx512dq avx512cd avx512bw "
                      "avx512vl xsavec".split())
    plain = detect_config(env={}, cpu_flags=flags, vendor=vendor)
    masked = detect_config(env={"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"}, cpu_flags=flags,
                           vendor=vendor)
    assert plain.hwcaps_active == LEVELS
    assert masked.hwcaps_active == LEVELS[1:] and masked.cpu_masked == ("AVX512F",)
    if masked.glibc >= (2, 37):
        return
    assert masked.platform == platform
    assert ("avx512_1" in legacy_components(masked)) is avx512_1
    cd = detect_config(env={"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512CD"}, cpu_flags=flags, vendor=vendor)
    assert "avx512_1" not in legacy_components(cd) and cd.platform == platform
    amd_v2 = detect_config(env={"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}, cpu_flags=flags, vendor=vendor)
    assert amd_v2.hwcaps_active == LEVELS[2:] and amd_v2.platform == "x86_64"


def test_parser_and_strtoul_follow_glibc() -> None:
    """``parse_tunables``: ``:``-separated, the name up to the first ``=``, the last value wins;
    ``_dl_strtoul``: blanks, sign, ``0x``/``0`` prefixes, stop at the first non-digit.  (Each
    case of ``CASES`` that uses them is also checked against the real loader above.)"""
    assert parse_tunables("a:b=1=2:c=x,y:b=3") == {"b": "3", "c": "x,y"}
    assert parse_tunables("") == {} and parse_tunables("glibc.cpu.hwcaps") == {}
    assert [strtoul(s) for s in ("0", "6", "0x1F", "010", " 7z", "", "x", "-1")] == [
        0, 6, 31, 8, 7, 0, 0, 2 ** 64 - 1]
    assert strtoul("99999999999999999999999") == 2 ** 64 - 1


@pytest.fixture()
def setuid_dir() -> Path:
    """A world-searchable directory for a setuid-root program run by another user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a setuid program as another user")
    d = Path(tempfile.mkdtemp(prefix="envlock-secure-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def test_tunables_are_ignored_in_secure_mode(setuid_dir: Path) -> None:
    """AT_SECURE: ``glibc.cpu.hwcaps`` is ``SXID_ERASE`` (the default level; neither
    ``dl-tunables.list`` lowers it), so a setuid program ignores it.  The real loader runs a
    setuid-root program as ``nobody``; the copy it loads is the one the model picks with
    ``secure=True``, and not the one it picks without."""
    build = Builder(setuid_dir)
    exe = _hw_tree(build)
    os.chmod(exe, 0o4755)
    env = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2,-SSE4_2"}
    ran = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(exe)],
                         check=False, capture_output=True, text=True, timeout=30, env=_clean_env(env))
    if ran.returncode != 0:
        pytest.skip(f"the setuid program did not run: {ran.stderr.strip()}")
    secure = detect_config(env=env, secure=True)
    assert secure.tunables.ignored == "AT_SECURE" and secure.cpu_masked == ()
    proc = Process(secure)
    proc.start(str(exe))
    chosen = next(r for r in proc.resolutions if r.name == "libhw.so.1")
    level = secure.hwcaps_active[0] if secure.hwcaps_active else None
    assert chosen.path == f"{setuid_dir}/d/" + (f"glibc-hwcaps/{level}/" if level else "") + "libhw.so.1"
    assert ran.stdout.strip() == str(4 - LEVELS.index(level) if level else 1)
    assert detect_config(env=env).hwcaps_active == ()


def test_why_and_text_name_the_tunables(build: Builder, tmp_path: Path) -> None:
    """``envlock libs FILE --why NAME`` and the text report say what GLIBC_TUNABLES did, and
    the list of places tried starts at the level it leaves."""
    exe = _hw_tree(build)
    mod = build.lib("mod/ext.so", soname="ext.so", needed=["d/libhw.so.1"], rpath=f"{build.root}/d")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "LD_PRELOAD": "", "LD_LIBRARY_PATH": "",
           "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2"}
    runner = CliRunner()
    why = runner.invoke(cli, ["libs", str(mod), "--python", sys.executable, "--why", "libhw.so.1"], env=env)
    assert why.exit_code in (0, 1), why.output
    cfg = detect_config(env=env)
    note = (f"tunables: GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX2: masks "
            f"{', '.join(cfg.cpu_masked)}; glibc-hwcaps searched: {', '.join(cfg.hwcaps_active) or 'none'}; "
            f"platform {cfg.platform}")
    lines = why.output.splitlines()
    assert lines[0] == note
    first = next(line for line in lines if line.lstrip().startswith("1. "))
    best = f"glibc-hwcaps/{cfg.hwcaps_active[0]}/" if cfg.hwcaps_active else ""
    assert first.split()[1] == f"{build.root}/d/{best}libhw.so.1"
    assert lines[-1] == f"  => {build.root}/d/{best}libhw.so.1  (rule: RPATH)"
    assert real_ldd(exe, {"GLIBC_TUNABLES": env["GLIBC_TUNABLES"]}).paths["libhw.so.1"] == \
        f"{build.root}/d/{best}libhw.so.1"
    text = runner.invoke(cli, ["libs", str(mod), "--python", sys.executable], env=env)
    assert note in text.output.splitlines()
    plain = runner.invoke(cli, ["libs", str(mod), "--python", sys.executable, "--why", "libhw.so.1"],
                          env={**env, "GLIBC_TUNABLES": ""})
    assert "GLIBC_TUNABLES=: changes no library search" in plain.output.splitlines()[0]
