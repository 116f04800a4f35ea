"""Each findings rule of the table (envlock.libs.diagnose), on its own: a gcc-built scenario,
the loader model run on it, the rule called alone, and the real loader (``ld.so --list``, a
real ``dlopen``) as the oracle of what happens.  The whole table's output is held by
test_golden.py; these say that each rule answers for its own case and stays silent otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.libs import rules_process as rp
from envlock.libs import rules_request as rq
from envlock.libs.analysis import _entries
from envlock.libs.config import detect_config
from envlock.libs.diagnose import report_findings
from envlock.libs.owners import OwnerIndex
from envlock.libs.linkmap import Process
from envlock.libs.ruleset import Context
from envlock.libs.runtime import TorchPlan

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, _clean_env, real_dlopen, real_ldd


def _model(exe: Path, *, dlopen: list[Path] = (), env: dict[str, str] | None = None,
           plan: TorchPlan | None = None, sys_path: list[str] = (), index: OwnerIndex | None = None) -> Context:
    cfg = detect_config(root="/", env=env or {}, cwd="/")
    proc = Process(cfg)
    proc.start(str(exe))
    for f in dlopen:
        proc.dlopen(str(f), proc.main)
    return Context(proc=proc, entries=_entries(proc, index, {}, {}), runtime=[], index=index, plan=plan,
                   sys_path=list(sys_path), prefix=None, cfg=cfg)


def _missing(ctx: Context, name: str) -> rq.Missing:
    (res,) = [r for r in ctx.proc.resolutions if r.name == name and r.path is None]
    return rq.Missing.of(ctx, res)


def _ld_list(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list", str(path)], capture_output=True,
                          text=True, timeout=30, env=_clean_env(env), check=False)


@pytest.fixture()
def prog(build: Builder) -> Path:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    return build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath="$ORIGIN/caller")


def _flip_class(src: Path, dst: Path) -> Path:
    data = bytearray(src.read_bytes())
    data[4] = 1  # EI_CLASS: ELFCLASS32
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(bytes(data))
    return dst


def test_refused_names_glibcs_refusal(build: Builder, prog: Path) -> None:
    pie = build.exe("other/pieprog")
    ctx = _model(prog, dlopen=[pie])
    got = rq.refused(ctx, _missing(ctx, str(pie)))
    real = real_dlopen(prog, str(pie))
    assert got is not None and got.id == "refused" and real.error is not None
    assert real.error.endswith("cannot dynamically load position-independent executable")
    assert real.error in got.cause and rq.not_found(ctx, _missing(ctx, str(pie))) is not None


def test_invalid_elf_stops_the_search(build: Builder) -> None:
    build.lib("good/libq.so.1", soname="libq.so.1")
    (build.root / "bad").mkdir()
    (build.root / "bad/libq.so.1").write_bytes(b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 9)
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["good/libq.so.1"],
                    rpath="$ORIGIN/bad:$ORIGIN/good")
    ctx = _model(exe)
    m = _missing(ctx, "libq.so.1")
    got = rq.invalid_elf(ctx, m)
    assert rq.refused(ctx, m) is None and got is not None and got.id == "invalid-elf"
    assert str(build.root / "bad/libq.so.1") in got.title + got.cause
    real = _ld_list(exe)
    assert real.returncode != 0 and "bad/libq.so.1" in real.stderr + real.stdout


def test_wrong_class_when_every_copy_is_32_bit(build: Builder) -> None:
    lib = build.lib("w/libw.so.1", soname="libw.so.1")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["w/libw.so.1"],
                    rpath="$ORIGIN/w")
    _flip_class(lib, lib)
    ctx = _model(exe)
    m = _missing(ctx, "libw.so.1")
    got = rq.wrong_class(ctx, m)
    assert rq.invalid_elf(ctx, m) is None and got is not None and got.severity == "error"
    assert real_ldd(exe).paths["libw.so.1"] is None  # the real loader skips it: not found


def test_soname_elsewhere_finds_the_file_without_its_link(build: Builder) -> None:
    build.lib("s/libs9.so.1.2", soname="libs9.so.1")
    (build.root / "s/libs9.so.1").symlink_to("libs9.so.1.2")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["s/libs9.so.1"],
                    rpath="$ORIGIN/s")
    (build.root / "s/libs9.so.1").unlink()
    ctx = _model(exe)
    m = _missing(ctx, "libs9.so.1")
    got = rq.soname_elsewhere(ctx, m)
    assert got is not None and got.fix[0] == f"ln -s libs9.so.1.2 {build.root}/s/libs9.so.1"
    assert rq.wrong_class(ctx, m) is None and real_ldd(exe).paths["libs9.so.1"] is None


def test_not_found_always_answers(build: Builder) -> None:
    build.lib("n/libn.so.3", soname="libn.so.3")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["n/libn.so.3"])
    ctx = _model(exe)
    m = _missing(ctx, "libn.so.3")
    assert rq.soname_elsewhere(ctx, m) is None
    got = rq.not_found(ctx, m)
    assert got is not None and got.id == "not-found" and real_ldd(exe).paths["libn.so.3"] is None
    assert [f.id for f in report_findings(ctx.proc, ctx.entries, [], None, None, [], None, ctx.cfg)] == [
        "not-found"]


def test_shadowed_by_ld_library_path(build: Builder) -> None:
    build.lib("mine/libsh.so.1", soname="libsh.so.1")
    build.lib("other/libsh.so.1", soname="libsh.so.1")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["mine/libsh.so.1"],
                    runpath="$ORIGIN/mine")
    env = {"LD_LIBRARY_PATH": str(build.root / "other")}
    ctx = _model(exe, env=env)
    (res,) = [r for r in ctx.proc.resolutions if r.name == "libsh.so.1"]
    got = rq.shadowed(ctx, res)
    assert real_ldd(exe, env).paths["libsh.so.1"] == res.path == str(build.root / "other/libsh.so.1")
    assert got is not None and got.id == "shadowed" and f"Remove {build.root}/other" in got.fix[0]
    assert rq.shadowed(_model(exe), [r for r in _model(exe).proc.resolutions if r.name == "libsh.so.1"][0]) is None


def test_missing_versions(build: Builder) -> None:
    build.lib("v2/libpv.so.1", "int p(void) { return 2; } int q(void) { return 3; }", soname="libpv.so.1",
              version_script="PV_1 { global: p; local: *; }; PV_2 { global: q; } PV_1;")
    build.lib("v1/libpv.so.1", "int p(void) { return 1; }", soname="libpv.so.1",
              version_script="PV_1 { global: p; local: *; };")
    exe = build.exe("v1/prog", "int q(void); int main(void) { return q(); }", needed=["v2/libpv.so.1"],
                    runpath="$ORIGIN")
    ctx = _model(exe)
    (got,) = rp.missing_versions(ctx)
    (real,) = real_ldd(exe).version_errors
    assert got.id == "missing-version" and real.split(": ", 1)[1] in got.cause


def test_renamed_soname_in_an_earlier_directory(build: Builder) -> None:
    build.lib("a/librn.so.1.0", soname="librn.so.1")
    build.lib("b/librn.so.1", soname="librn.so.1")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["b/librn.so.1"],
                    rpath="$ORIGIN/a:$ORIGIN/b")
    ctx = _model(exe)
    (got,) = rp.renamed_soname(ctx)
    assert real_ldd(exe).paths["librn.so.1"] == f"{build.root}/b/librn.so.1"
    assert got.severity == "warning" and f"{build.root}/a/librn.so.1.0" in got.title


def test_skipped_other_class(build: Builder) -> None:
    good = build.lib("b/libsk.so.1", soname="libsk.so.1")
    _flip_class(good, build.root / "a/libsk.so.1")
    exe = build.exe("prog", "int f(void); int main(void) { return f(); }", needed=["b/libsk.so.1"],
                    rpath="$ORIGIN/a:$ORIGIN/b")
    ctx = _model(exe)
    (got,) = rp.skipped_other_class(ctx)
    assert real_ldd(exe).paths["libsk.so.1"] == f"{build.root}/b/libsk.so.1"
    assert got.severity == "info" and "wrong ELF class: ELFCLASS32" in got.title


def test_unreadable_objects(build: Builder) -> None:
    script = build.root / "python"
    script.write_text("#!/bin/sh\nexec python3 \"$@\"\n")
    script.chmod(0o755)
    got = rp.unreadable_objects(_model(script))
    real = _ld_list(script)
    assert [f.id for f in got] == ["invalid-elf"] and "#!/bin/sh" in got[0].evidence[-1]
    assert real.returncode != 0
    assert rp.unreadable_objects(_model(build.exe("prog"))) == []


def test_preload_failed_quotes_ld_so(build: Builder) -> None:
    exe = build.exe("prog")
    env = {"LD_PRELOAD": str(build.root / "nowhere.so")}
    ctx = _model(exe, env=env)
    (got,) = rp.preload_failed(ctx)
    real = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, env=_clean_env(env), check=False)
    assert got.cause == real.stderr.strip()


def test_duplicate_soname(build: Builder, prog: Path) -> None:
    one = build.lib("x/libdup.so.1", "int f(void) { return 1; }", soname="libdup.so.1")
    two = build.lib("y/libdup.so.1", "int f(void) { return 2; }", soname="libdup.so.1")
    ctx = _model(prog, dlopen=[one, two])
    (got,) = rp.duplicate_soname(ctx)
    assert got.library == "libdup.so.1" and len(got.evidence) == 2
    assert rp.duplicate_soname(_model(prog, dlopen=[one])) == []


def test_duplicate_openmp(build: Builder, prog: Path) -> None:
    gomp = build.lib("g/libgomp.so.1", soname="libgomp.so.1")
    iomp = build.lib("i/libiomp5.so", soname="libiomp5.so")
    (got,) = rp.duplicate_openmp(_model(prog, dlopen=[gomp, iomp]))
    assert "gomp" in got.cause and "iomp5" in got.cause
    assert rp.duplicate_openmp(_model(prog, dlopen=[gomp])) == []


def test_cuda_pins(build: Builder, prog: Path) -> None:
    site = build.root / "site"
    lib = build.lib("site/nvidia/foo/lib/libfoo.so.1", soname="libfoo.so.1")
    for name, version, record, requires in (
            ("torch", "2.9.0", "torch/__init__.py,,\n", "Requires-Dist: nvidia-foo==1.5.0\n"),
            ("nvidia_foo", "1.4.0", "nvidia/foo/lib/libfoo.so.1,,\n", "")):
        dist = site / f"{name}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "RECORD").write_text(record)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}")
    index = OwnerIndex([str(site)], root="/")
    plan = TorchPlan(package_dir=str(site / "torch"), version="2.9.0", cuda="13.0")
    (got,) = rp.cuda_pins(_model(prog, dlopen=[lib], plan=plan, sys_path=[str(site)], index=index))
    assert got.id == "cuda-pin-mismatch" and got.fix == ("pip install 'nvidia-foo==1.5.0'",)
    assert rp.cuda_pins(_model(prog, dlopen=[lib], sys_path=[str(site)], index=index)) == []


def test_the_table_holds_every_rule() -> None:
    assert rq.MISSING_RULES[-1] is rq.not_found
    assert {f.__name__ for f in rp.PROCESS_RULES} == set(rp.__all__) - {"PROCESS_RULES"}
    assert os.path.exists(shutil.which("gcc") or "")
