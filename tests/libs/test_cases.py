"""Cases C01–C04 (shared/cases/cases.md), each built from gcc-compiled stand-in libraries with
the real SONAMEs, diagnosed by envlock and checked against the real loader."""

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

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder, real_dlopen, real_ldd

EXT = "cpython-311-x86_64-linux-gnu.so"


def _cli(args: list[str], env: dict[str, str], root: Path, code: int = 0) -> tuple[str, dict]:
    """Run ``envlock libs ARGS`` in text and JSON; returns (text output, JSON document)."""
    env = {"XDG_CACHE_HOME": str(root / "xdg-cache"), **env}
    runner = CliRunner()
    text = runner.invoke(cli, ["libs", *args], env=env)
    assert text.exit_code == code, text.output
    js = runner.invoke(cli, ["libs", *args, "--format", "json"], env=env)
    assert js.exit_code == code, js.output
    return text.stdout, json.loads(js.stdout)


def make_dist(site: Path, name: str, version: str, files: list[str], requires: list[str] = ()) -> Path:
    """A pip .dist-info with METADATA and a RECORD listing ``files`` (relative to ``site``)."""
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (d / "METADATA").write_text("\n".join(meta) + "\n\n")
    (d / "INSTALLER").write_text("pip\n")
    rel = d.relative_to(site)
    lines = [f"{f},sha256=x,1" for f in files] + [f"{rel}/METADATA,,", f"{rel}/RECORD,,"]
    (d / "RECORD").write_text("\n".join(lines) + "\n")
    return d


# -- C01: LD_LIBRARY_PATH beats RUNPATH, not RPATH --------------------------------------------


@pytest.fixture()
def c01(build: Builder) -> dict:
    site = build.root / "env/lib/python3.11/site-packages"
    build.lib("env/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.8",
              "int cudnnGetVersion(void){return 8302;}", soname="libcudnn.so.8")
    build.lib("mod/cudnn/v8.0.3/lib64/libcudnn.so.8", "int cudnnGetVersion(void){return 8003;}",
              soname="libcudnn.so.8")
    make_dist(site, "nvidia-cudnn-cu11", "8.3.2", ["nvidia/cudnn/lib/libcudnn.so.8"])
    make_dist(site, "torch", "1.12.0", ["torch/lib/libtorch_cuda.so", f"torch/_C.{EXT}"],
              requires=["nvidia-cudnn-cu11==8.3.2"])
    return {"root": build.root, "site": site, "mod": build.root / "mod/cudnn/v8.0.3/lib64"}


def _torch(build: Builder, c: dict, tag: str) -> Path:
    kw = {tag: "$ORIGIN/../../nvidia/cudnn/lib"}
    lib = build.lib("env/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so", soname="libtorch_cuda.so",
                    needed=["env/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.8"], **kw)
    build.lib(f"env/lib/python3.11/site-packages/torch/_C.{EXT}",
              needed=["env/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"],
              **{tag: "$ORIGIN/lib"})
    (c["site"] / "torch/__init__.py").write_text("from torch._C import *\n")
    return lib


def test_c01_runpath_is_shadowed_by_ld_library_path(build: Builder, c01: dict) -> None:
    lib = _torch(build, c01, "runpath")
    env = {"LD_LIBRARY_PATH": str(c01["mod"])}
    report = analyze_module(sys.executable, "torch", sys_path=[str(c01["site"])],
                            prefix=str(build.root / "env"), env=env)
    got = next(r for r in report.requests if r.name == "libcudnn.so.8")
    assert got.path == f"{c01['mod']}/libcudnn.so.8" and got.rule == "ld_library_path"
    assert real_ldd(lib, env).paths["libcudnn.so.8"] == got.path  # the loader agrees
    f = next(f for f in report.findings if f.id == "shadowed")
    assert f.library == "libcudnn.so.8" and f.requester == str(lib)
    assert f"LD_LIBRARY_PATH entry {c01['mod']}" in f.cause
    assert any("owned by no package" in e and str(c01["mod"]) in e for e in f.evidence)
    assert any("nvidia-cudnn-cu11 8.3.2 (pip)" in e for e in f.evidence)
    assert any("torch requires nvidia-cudnn-cu11==8.3.2" in e for e in f.evidence)
    assert f.fix and f"Remove {c01['mod']} from LD_LIBRARY_PATH" in f.fix[0]


def test_c01_rpath_is_not_affected(build: Builder, c01: dict) -> None:
    lib = _torch(build, c01, "rpath")
    env = {"LD_LIBRARY_PATH": str(c01["mod"])}
    report = analyze_module(sys.executable, "torch", sys_path=[str(c01["site"])],
                            prefix=str(build.root / "env"), env=env)
    got = next(r for r in report.requests if r.name == "libcudnn.so.8")
    want = f"{c01['site']}/torch/lib/../../nvidia/cudnn/lib/libcudnn.so.8"
    assert got.path == want and got.rule == "rpath"
    assert real_ldd(lib, env).paths["libcudnn.so.8"] == want
    assert not [f for f in report.findings if f.id == "shadowed"]


def test_c01_cli_text_and_json(build: Builder, c01: dict, tmp_path: Path) -> None:
    _torch(build, c01, "runpath")
    env = {"LD_LIBRARY_PATH": str(c01["mod"]), "PYTHONPATH": str(c01["site"]),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    runner = CliRunner()
    text = runner.invoke(cli, ["libs", "torch", "--python", sys.executable], env=env)
    assert text.exit_code == 0, text.output
    assert "warning [shadowed] libcudnn.so.8 is shadowed" in text.output
    assert f"libcudnn.so.8 => {c01['mod']}/libcudnn.so.8  [LD_LIBRARY_PATH]  (no package)" in text.output
    js = runner.invoke(cli, ["libs", "torch", "--python", sys.executable, "--format", "json"], env=env)
    doc = json.loads(js.output)
    assert doc["schema"] == 1 and doc["target"] == "torch"
    assert doc["config"]["ld_library_path"] == str(c01["mod"])
    shadow = [f for f in doc["findings"] if f["id"] == "shadowed"]
    assert shadow and shadow[0]["library"] == "libcudnn.so.8" and shadow[0]["fix"]
    obj = next(o for o in doc["objects"] if o["soname"] == "libcudnn.so.8")
    assert obj["rule"] == "ld_library_path" and obj["owner"] is None
    why = runner.invoke(cli, ["libs", "torch", "--python", sys.executable, "--why", "libcudnn.so.8"], env=env)
    lines = why.output.splitlines()
    assert lines[0].startswith("libcudnn.so.8 (needed) requested by ")
    assert any(f"{c01['mod']}/libcudnn.so.8  [LD_LIBRARY_PATH]  found" in line for line in lines)
    assert lines[-1] == f"  => {c01['mod']}/libcudnn.so.8  (rule: LD_LIBRARY_PATH)"


# -- C02: a provider without the versioned symbol --------------------------------------------

LT_NEW = "int cublasLtOld(void){return 1;}\nint cublasLtNew(void){return 2;}\n"
LT_OLD = "int cublasLtOld(void){return 1;}\n"
LT_MAP_NEW = "libcublasLt.so.11 { global: cublasLtOld; cublasLtNew; local: *; };\n"
LT_MAP_OLD = "libcublasLt.so.11 { global: cublasLtOld; local: *; };\n"


def test_c02_symbol_version_missing_in_picked_library(build: Builder) -> None:
    site = build.root / "site"
    wheel = "site/nvidia/cublas/lib"
    build.lib(f"{wheel}/libcublasLt.so.11", LT_NEW, soname="libcublasLt.so.11", version_script=LT_MAP_NEW)
    build.lib("usr_local_cuda/lib64/libcublasLt.so.11", LT_OLD, soname="libcublasLt.so.11",
              version_script=LT_MAP_OLD)
    cublas = build.lib(f"{wheel}/libcublas.so.11",
                       "int cublasLtNew(void); int cublasCreate(void){return cublasLtNew();}",
                       soname="libcublas.so.11", needed=[f"{wheel}/libcublasLt.so.11"], runpath="$ORIGIN")
    make_dist(site, "nvidia-cublas-cu11", "11.10.3.66",
              ["nvidia/cublas/lib/libcublas.so.11", "nvidia/cublas/lib/libcublasLt.so.11"])
    env = {"LD_LIBRARY_PATH": str(build.root / "usr_local_cuda/lib64")}
    report = analyze_module(sys.executable, str(cublas), sys_path=[str(site)], env=env,
                            check_symbols=True)
    f = next(f for f in report.findings if f.id == "missing-symbol")
    picked = f"{build.root}/usr_local_cuda/lib64/libcublasLt.so.11"
    assert f.requester == str(cublas) and f.library == "libcublasLt.so.11"
    assert "needs cublasLtNew (version libcublasLt.so.11)" in f.title and picked in f.title
    assert f"{site}/nvidia/cublas/lib/libcublasLt.so.11 defines them (from package nvidia-cublas-cu11 11.10.3.66 (pip))".replace("them", "it") in f.evidence
    assert f"remove {build.root}/usr_local_cuda/lib64 from LD_LIBRARY_PATH" in f.fix[0]
    # The real loader: relocation processing (ldd -r) reports the same symbol and version.
    real = subprocess.run(["ldd", "-r", str(cublas)], check=False, capture_output=True, text=True, timeout=30,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("LD_")}, **env})
    assert f"undefined symbol: cublasLtNew, version libcublasLt.so.11\t({cublas})" in real.stdout + real.stderr
    assert f.evidence[0] == f"undefined symbol: cublasLtNew, version libcublasLt.so.11 ({cublas})"
    # The same diagnosis from the command line, in text and JSON.
    text, doc = _cli([str(cublas), "--python", sys.executable, "--symbols"],
                     {**env, "PYTHONPATH": str(site)}, build.root, code=1)
    assert "error [missing-symbol] libcublas.so.11 needs cublasLtNew (version libcublasLt.so.11)" in text
    assert f"evidence: {site}/nvidia/cublas/lib/libcublasLt.so.11 defines it" in text
    got = next(x for x in doc["findings"] if x["id"] == "missing-symbol")
    assert got["evidence"] == list(f.evidence) and got["fix"] == list(f.fix)


def test_c02_version_node_missing(build: Builder) -> None:
    """The same, one level up: the picked copy lacks the whole version node (fatal at load).

    (A version named like the SONAME is always met: glibc also matches the base Verdef entry,
    which carries the SONAME; so the nodes here have their own names.)
    """
    build.lib("new/libcublasLt.so.11", LT_NEW, soname="libcublasLt.so.11",
              version_script="LT_11.0 { global: cublasLtOld; local: *; };\nLT_11.2 { global: cublasLtNew; } LT_11.0;\n")
    build.lib("old/libcublasLt.so.11", LT_OLD, soname="libcublasLt.so.11",
              version_script="LT_11.0 { global: cublasLtOld; local: *; };\n")
    cublas = build.lib("new/libcublas.so.11", "int cublasLtNew(void); int f(void){return cublasLtNew();}",
                       soname="libcublas.so.11", needed=["new/libcublasLt.so.11"], runpath="$ORIGIN")
    env = {"LD_LIBRARY_PATH": str(build.root / "old")}
    report = analyze_module(sys.executable, str(cublas), sys_path=[], env=env)
    f = next(f for f in report.findings if f.id == "missing-version")
    assert f.title.startswith("libcublas.so.11 requires LT_11.2; the libcublasLt.so.11 that will be loaded")
    assert f.title.endswith("provides up to LT_11.0")
    assert f"{build.root}/new/libcublasLt.so.11 defines LT_11.2 (owned by no package)" in f.evidence
    assert real_ldd(cublas, env).version_errors == [
        f"{cublas}: {build.root}/old/libcublasLt.so.11: version `LT_11.2' not found (required by {cublas})"]
    assert f.evidence[0] == real_ldd(cublas, env).version_errors[0].split(": ", 1)[1]


# -- C03: GLIBCXX_3.4.30 against an older libstdc++ in the env ------------------------------


def _glibcxx_script(last: int) -> str:
    nodes = []
    prev = None
    for i in range(25, last + 1):
        name = f"GLIBCXX_3.4.{i}"
        body = f"{{ global: sym_{i}; }}" if i > 25 else "{ global: sym_25; local: *; }"
        nodes.append(f"{name} {body}" + (f" {prev};" if prev else ";"))
        prev = name
    return "\n".join(nodes) + "\n"


def _glibcxx_code(last: int) -> str:
    return "".join(f"int sym_{i}(void){{return {i};}}\n" for i in range(25, last + 1))


def test_c03_glibcxx_not_found(build: Builder) -> None:
    env_dir = build.root / "env"
    build.lib("env/lib/libstdc++.so.6", _glibcxx_code(29), soname="libstdc++.so.6",
              version_script=_glibcxx_script(29))
    build.lib("newer/libstdc++.so.6", _glibcxx_code(30), soname="libstdc++.so.6",
              version_script=_glibcxx_script(30))
    site = env_dir / "lib/python3.11/site-packages"
    ext = build.lib(f"env/lib/python3.11/site-packages/myext.{EXT}",
                    "int sym_30(void); int PyInit_myext(void){return sym_30();}",
                    needed=["newer/libstdc++.so.6"])
    meta = env_dir / "conda-meta"
    meta.mkdir()
    (meta / "libstdcxx-ng-11.2.0-h1234567_1.json").write_text(json.dumps({
        "name": "libstdcxx-ng", "version": "11.2.0", "build": "h1234567_1", "build_number": 1,
        "channel": "https://repo.anaconda.com/pkgs/main", "files": ["lib/libstdc++.so.6"]}))
    # A stand-in for conda's python: DT_RPATH $ORIGIN/../lib, dlopen()s extension modules.
    build.lib("env/bin_caller/libpyload.so", DLOPEN_CALLER, soname="libpyload.so", extra=["-ldl"])
    python = build.exe("env/bin/python", DLOPEN_MAIN, needed=["env/bin_caller/libpyload.so"],
                       rpath="$ORIGIN/../lib:$ORIGIN/../bin_caller")
    report = analyze_module(str(python), str(ext), sys_path=[str(site)], prefix=str(env_dir), env={})
    f = next(f for f in report.findings if f.id == "missing-version")
    provider = f"{env_dir}/bin/../lib/libstdc++.so.6"
    assert f.title == (f"myext.{EXT} requires GLIBCXX_3.4.30; the libstdc++.so.6 that will be loaded "
                       f"({provider}, from package libstdcxx-ng 11.2.0 (conda)) provides up to GLIBCXX_3.4.29")
    assert any("conda install -c conda-forge 'libstdcxx-ng>=12.1'" in x for x in f.fix)
    assert any("rebuild" in x for x in f.fix)
    if any(e.endswith("(dpkg))") and "defines GLIBCXX_3.4.30" in e for e in f.evidence):
        # The system's copy would do, but the executable's RPATH beats LD_LIBRARY_PATH.
        assert any("LD_LIBRARY_PATH cannot make the loader pick it" in x and "LD_PRELOAD=" in x
                   for x in f.fix)
    assert f"libstdc++.so.6 is found through RPATH of {os.path.realpath(python)} (the executable)" in f.evidence
    # The real loader says the same thing, word for word.
    real = real_dlopen(python, str(ext))
    assert real.error == f.evidence[0]
    assert real.error == f"{provider}: version `GLIBCXX_3.4.30' not found (required by {ext})"
    # From the command line: the stand-in python cannot answer the sys.path query, so envlock
    # says so and uses the prefix's site-packages; the diagnosis is the same.
    text, doc = _cli([str(ext), "--python", str(python)], {}, build.root, code=1)
    assert f"error [missing-version] {f.title}" in text
    assert [x["title"] for x in doc["findings"] if x["id"] == "missing-version"] == [f.title]


# -- C04: dlopen by SONAME of a library on disk but on no search path -------------------------


def test_c04_runtime_dlopen_not_on_any_path(build: Builder) -> None:
    env_dir = build.root / "env"
    site = env_dir / "lib/python3.11/site-packages"
    tf = "env/lib/python3.11/site-packages/tensorflow"
    build.lib("env/lib/libcudart.so.11.0", "int cudaRuntimeGetVersion(int*v){*v=11020;return 0;}",
              soname="libcudart.so.11.0")
    framework = build.lib(f"{tf}/libtensorflow_framework.so.2", DLOPEN_CALLER,
                          soname="libtensorflow_framework.so.2", extra=["-ldl"], runpath="$ORIGIN")
    build.lib(f"{tf}/python/_pywrap_tensorflow_internal.so", needed=[f"{tf}/libtensorflow_framework.so.2"],
              runpath="$ORIGIN/..")
    (site / "tensorflow/__init__.py").write_text("")
    (site / "tensorflow/python/platform").mkdir(parents=True)
    (site / "tensorflow/python/platform/build_info.py").write_text(
        "build_info = {'cuda_version': '11.2', 'cudnn_version': '8', 'is_cuda_build': True}\n")
    env = {"PATH": f"{env_dir}/lib:/usr/bin:/bin"}  # PATH does not matter to the loader
    report = analyze_module(sys.executable, "tensorflow", sys_path=[str(site)], prefix=str(env_dir), env=env)
    rt = next(r for r in report.runtime if r.name == "libcudart.so.11.0")
    assert rt.framework == "tensorflow" and rt.resolution.path is None
    assert rt.caller == f"{site}/tensorflow/python/../libtensorflow_framework.so.2"  # via $ORIGIN/..
    f = next(f for f in report.findings if f.library == "libcudart.so.11.0")
    assert f.id == "runtime-not-found"
    assert f"a copy exists at {env_dir}/lib/libcudart.so.11.0 (owned by no package), on no search path" in f.evidence
    assert f.fix[0].startswith(f"export LD_LIBRARY_PATH={env_dir}/lib")
    # The real loader: a dlopen from the framework library fails, and succeeds with the fix.
    prog = build.exe("tfprog", DLOPEN_MAIN, needed=[f"{tf}/libtensorflow_framework.so.2"],
                     rpath=str(framework.parent))
    assert real_dlopen(prog, "libcudart.so.11.0", env).error is not None
    fixed = real_dlopen(prog, "libcudart.so.11.0", {"LD_LIBRARY_PATH": f"{env_dir}/lib"})
    assert fixed.path == f"{env_dir}/lib/libcudart.so.11.0"
    (env_dir / "bin").mkdir()
    (env_dir / "bin/python").symlink_to(sys.executable)  # the env's interpreter
    text, doc = _cli(["tensorflow", "--python", str(env_dir / "bin/python")], {"PYTHONPATH": str(site)},
                     build.root, code=1)
    assert "libcudart.so.11.0 <- libtensorflow_framework.so.2 (GPU start-up): NOT FOUND" in text
    assert f"fix: export LD_LIBRARY_PATH={env_dir}/lib" in text
    got = next(x for x in doc["findings"] if x["library"] == "libcudart.so.11.0")
    assert got["id"] == "runtime-not-found" and got["fix"][0].startswith(f"export LD_LIBRARY_PATH={env_dir}/lib")


def test_soname_provider_under_another_name_is_reported(build: Builder) -> None:
    """env/lib holds libstdc++-like libfoo.so.6.0.33 (SONAME libfoo.so.6) without the link; the
    loader passes over it and takes the system-path copy. ldd agrees on the pick; envlock says
    that the file providing the SONAME is there under another name."""
    build.lib("env/lib/libfoo.so.6.0.33", soname="libfoo.so.6")
    build.lib("sys/libfoo.so.6", soname="libfoo.so.6")
    prog = build.exe("env/bin/prog", "int f(void); int main(void) { return f(); }",
                     needed=["sys/libfoo.so.6"], rpath="$ORIGIN/../lib")
    env = {"LD_LIBRARY_PATH": str(build.root / "sys")}
    # RPATH is searched before LD_LIBRARY_PATH: env/lib comes first, but has no libfoo.so.6.
    real = real_ldd(prog, env)
    assert real.paths["libfoo.so.6"] == f"{build.root}/sys/libfoo.so.6"
    report = analyze_module(str(prog), str(prog), sys_path=[], env=env, mode="ldd", owners=False,
                            runtime=False)
    f = next(f for f in report.findings if f.id == "missing-soname-symlink")
    assert f.severity == "warning"
    assert f"{build.root}/env/bin/../lib/libfoo.so.6.0.33 provides it under another name" in f.title
    assert f.fix[0].startswith("ln -s libfoo.so.6.0.33 ")
