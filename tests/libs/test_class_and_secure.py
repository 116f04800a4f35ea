"""A 32-bit file or program, and secure mode (issue 22, item 6), with the real loader as oracle:
a real dlopen of a 32-bit file from this 64-bit interpreter, ``ld.so --list`` of the mirror case,
and a real setuid program run by another user (``AT_SECURE``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.analysis import analyze_module
from envlock.libs.config import detect_config

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, _clean_env, real_dlopen, real_ldd


def _gcc32(out: Path, code: str, *extra: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(code)
    proc = subprocess.run(["gcc", "-m32", "-nostdlib", "-fPIC", "-o", str(out), str(src), *extra],
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        pytest.skip(f"no 32-bit gcc here: {proc.stderr.strip()[:200]}")
    return out


def test_a_32_bit_file_gets_the_loaders_wrong_class(build: Builder, tmp_path: Path) -> None:
    lib = _gcc32(build.root / "lib32.so", "int f(void) { return 1; }", "-shared")
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    prog = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath="$ORIGIN/caller")
    real = real_dlopen(prog, str(lib))
    assert real.error == f"{lib}: wrong ELF class: ELFCLASS32"
    result = CliRunner().invoke(cli, ["libs", str(lib), "--python", sys.executable, "--no-cache"],
                                env={"XDG_CACHE_HOME": str(tmp_path), "LD_PRELOAD": None,
                                     "LD_LIBRARY_PATH": None})
    assert result.exit_code == 1, result.output
    assert f"{lib} => NOT FOUND (wrong ELF class: ELFCLASS32)" in result.output
    assert "error [wrong-class]" in result.output and "no such file" not in result.output


def test_a_32_bit_program_is_modelled_as_32_bit(build: Builder) -> None:
    # the same two directories for a 32-bit and a 64-bit program: each skips the other class
    (build.root / "a").mkdir()
    (build.root / "b").mkdir()
    _gcc32(build.root / "a/libf.so", "int f(void) { return 32; }", "-shared", "-Wl,-soname,libf.so")
    build.lib("b/libf.so", "int f(void) { return 64; }", soname="libf.so")
    prog32 = _gcc32(build.root / "prog32", "int f(void); int _start(void) { return f(); }",
                    "-pie", str(build.root / "a/libf.so"), "-Wl,--disable-new-dtags,-rpath,$ORIGIN/b:$ORIGIN/a",
                    "-Wl,--dynamic-linker=/lib/ld-linux.so.2")
    prog64 = build.exe("prog64", "int f(void); int main(void) { return f(); }", needed=["b/libf.so"],
                       rpath="$ORIGIN/a:$ORIGIN/b")
    assert real_ldd(prog64).paths["libf.so"] == f"{build.root}/b/libf.so"  # 32-bit copy skipped
    for prog, want, skipped in ((prog64, "b", "ELFCLASS32"), (prog32, "a", "ELFCLASS64")):
        report = analyze_module(str(prog), str(prog), sys_path=[], env={}, mode="ldd", runtime=False)
        (res,) = [r for r in report.requests if r.name == "libf.so"]
        assert res.path == f"{build.root}/{want}/libf.so"
        assert [a.outcome for a in res.tried if a.outcome.startswith("wrong")] == [f"wrong ELF class: {skipped}"]
    assert report.config.host.elfclass == 32 and report.config.system_dirs == ("/lib", "/usr/lib")


@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A directory another user can enter (pytest's own is the owner's alone)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a setuid program as another user")
    d = Path(tempfile.mkdtemp(prefix="envlock-secure-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def _as_nobody(prog: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run setuid-root ``prog`` as uid 65534: the kernel sets AT_SECURE."""
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                           *(f"{k}={v}" for k, v in env.items()), str(prog)],
                          capture_output=True, text=True, timeout=30, env=_clean_env(), check=False)


def test_secure_mode_against_a_real_setuid_program(shared_dir: Path, tmp_path: Path) -> None:
    b = Builder(shared_dir)
    b.lib("lib/libf.so", "int f(void) { return 1; }", soname="libf.so")
    b.lib("other/libf.so", "int f(void) { return 2; }", soname="libf.so")
    runpath = b.exe("runpath", "int f(void); int main(void) { return f(); }", needed=["lib/libf.so"],
                    runpath=str(shared_dir / "lib"))
    origin = b.exe("origin", "int f(void); int main(void) { return f(); }", needed=["lib/libf.so"],
                   rpath="$ORIGIN/lib")
    for p in shared_dir.rglob("*"):
        p.chmod(0o4755 if p in (runpath, origin) else 0o755)
    env = {"LD_LIBRARY_PATH": str(shared_dir / "other")}
    assert subprocess.run([str(runpath)], env=_clean_env(env), timeout=30, check=False).returncode == 2
    assert _as_nobody(runpath, env).returncode == 1  # LD_LIBRARY_PATH ignored
    real = _as_nobody(origin, {})
    assert real.returncode == 127 and "libf.so: cannot open shared object file" in real.stderr
    for secure, want in ((False, "other"), (True, "lib")):
        cfg = detect_config(root="/", env=env, secure=secure, cwd="/")
        report = analyze_module(str(runpath), str(runpath), sys_path=[], env=env, mode="ldd", runtime=False,
                                config=cfg)
        assert [r.path for r in report.requests if r.name == "libf.so"] == [f"{shared_dir}/{want}/libf.so"]
    cfg = detect_config(root="/", env={}, secure=True, cwd="/")
    report = analyze_module(str(origin), str(origin), sys_path=[], env={}, mode="ldd", runtime=False, config=cfg)
    (res,) = [r for r in report.requests if r.name == "libf.so"]
    assert res.path is None and res.error == "cannot open shared object file: No such file or directory"
    # the command line asks for it too: a FILE's RUNPATH dependency, LD_LIBRARY_PATH ignored
    user = b.lib("user/libuser.so", "int f(void); int u(void) { return f(); }", needed=["lib/libf.so"],
                 runpath=str(shared_dir / "lib"))
    args = ["libs", str(user), "--python", sys.executable, "--no-cache", "--no-symbols"]
    cli_env = {"XDG_CACHE_HOME": str(tmp_path), "LD_PRELOAD": None, **env}
    plain = CliRunner().invoke(cli, args, env=cli_env).output
    secure = CliRunner().invoke(cli, [*args, "--secure"], env=cli_env).output
    assert f"libf.so => {shared_dir}/other/libf.so  [LD_LIBRARY_PATH]" in plain
    assert f"libf.so => {shared_dir}/lib/libf.so  [RUNPATH]" in secure
    assert "secure mode (AT_SECURE" in secure and "secure mode" not in plain
