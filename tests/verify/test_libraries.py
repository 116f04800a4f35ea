"""The library check: loader findings carried into verify (C01 shadowing through
LD_LIBRARY_PATH; C02/C03 a version node missing in the library picked), on ELF files compiled
here with gcc, through the loader model (``envlock.libs.analysis``)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from envlock.verify.checks.libraries import check_libraries
from envlock.probes.target import resolve_target
from envlock.verify.context import Context
from envlock.verify.live import Live
from envlock.verify.settings import Config
from tests.verify.conftest import install_dist, site_packages

GCC = shutil.which("gcc")
EXT = f"cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so"


def gcc(*args: str) -> None:
    subprocess.run([GCC, *args], check=True, capture_output=True, timeout=120)


def ctx_for(tmp_path, venv, env, modules=()):
    env = {**env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    target = resolve_target(python=str(venv / "bin/python"), environ=env)
    live = Live(target, environ=env, root="/")
    return Context(live=live, environ=env, config=Config(modules=tuple(modules)))


def test_no_framework_no_module_nothing_to_do(tmp_path, venv, job_env):
    assert check_libraries(ctx_for(tmp_path, venv, job_env)) == []


needs_loader = pytest.mark.skipif(GCC is None, reason="needs gcc to build the test libraries")


@needs_loader
def test_c01_ld_library_path_shadows_the_runpath_copy(tmp_path, venv, job_env):
    site = site_packages(venv)
    wheel_lib = site / "nvidia/cudnn/lib"
    wheel_lib.mkdir(parents=True)
    src = tmp_path / "cudnn.c"
    src.write_text('const char *cudnn_version(void) { return "8.3.2"; }\n')
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(wheel_lib / "libcudnn.so.8"), str(src))
    module_dir = tmp_path / "mod/cudnn/v8.0.3/lib64"
    module_dir.mkdir(parents=True)
    src.write_text('const char *cudnn_version(void) { return "8.0.3"; }\n')
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(module_dir / "libcudnn.so.8"), str(src))
    pkg = site / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    ext = tmp_path / "ext.c"
    ext.write_text("const char *cudnn_version(void);\nconst char *v(void) { return cudnn_version(); }\n")
    gcc("-shared", "-fPIC", "-o", str(pkg / f"_fast.{EXT}"), str(ext), f"-L{wheel_lib}", "-l:libcudnn.so.8",
        "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib")
    env = {**job_env, "LD_LIBRARY_PATH": str(module_dir)}
    out = check_libraries(ctx_for(tmp_path, venv, env, modules=["mylab._fast"]))
    shadowed = [f for f in out if f.id == "libs.shadowed"]
    assert shadowed, [f.id for f in out]
    f = shadowed[0]
    assert f.severity == "warning" and f.library == "libcudnn.so.8"
    assert str(module_dir) in f.cause and "LD_LIBRARY_PATH" in f.cause
    assert any(e.startswith("intended: ") and "nvidia/cudnn/lib/libcudnn.so.8" in e for e in f.evidence), f.evidence
    assert f.fix and "LD_LIBRARY_PATH" in f.fix[0]
    # The same library with DT_RPATH (later torch wheels): LD_LIBRARY_PATH is harmless.
    gcc("-shared", "-fPIC", "-o", str(pkg / f"_fast.{EXT}"), str(ext), f"-L{wheel_lib}", "-l:libcudnn.so.8",
        "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib")
    out = check_libraries(ctx_for(tmp_path, venv, env, modules=["mylab._fast"]))
    assert not [f for f in out if f.id == "libs.shadowed"]


@needs_loader
def test_c02_c03_version_node_missing_in_the_library_picked(tmp_path, venv, job_env):
    """The extension needs LIBFOO_2.0 (as an extension built with g++ 12 needs GLIBCXX_3.4.30);
    the copy the loader picks first defines only LIBFOO_1.0."""
    site = site_packages(venv)
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    (tmp_path / "v2.map").write_text("LIBFOO_1.0 { global: foo1; local: *; };\nLIBFOO_2.0 { global: foo2; } LIBFOO_1.0;\n")
    (tmp_path / "v1.map").write_text("LIBFOO_1.0 { global: foo1; local: *; };\n")
    (tmp_path / "foo2.c").write_text("int foo1(void) { return 1; }\nint foo2(void) { return 2; }\n")
    (tmp_path / "foo1.c").write_text("int foo1(void) { return 1; }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", f"-Wl,--version-script={tmp_path / 'v2.map'}",
        "-o", str(new / "libfoo.so.1"), str(tmp_path / "foo2.c"))
    gcc("-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", f"-Wl,--version-script={tmp_path / 'v1.map'}",
        "-o", str(old / "libfoo.so.1"), str(tmp_path / "foo1.c"))
    pkg = site / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (tmp_path / "ext.c").write_text("int foo2(void);\nint g(void) { return foo2(); }\n")
    gcc("-shared", "-fPIC", "-o", str(pkg / f"_fast.{EXT}"), str(tmp_path / "ext.c"), f"-L{new}", "-l:libfoo.so.1",
        "-Wl,--enable-new-dtags", f"-Wl,-rpath,{new}")
    env = {**job_env, "LD_LIBRARY_PATH": str(old)}
    out = check_libraries(ctx_for(tmp_path, venv, env, modules=["mylab._fast"]))
    missing = [f for f in out if f.id == "libs.missing-version"]
    assert missing, [f.id for f in out]
    f = missing[0]
    assert f.severity == "error"
    text = " ".join((f.title, f.cause, *f.evidence))
    assert "LIBFOO_2.0" in text and str(old / "libfoo.so.1") in text
    assert f.fix



@needs_loader
def test_c04_tensorflow_dlopens_libcudart_from_a_dir_on_no_search_path(tmp_path, venv, job_env):
    """pip TensorFlow (CUDA 11.2 build) in an env whose lib/ holds libcudart.so.11.0 (conda
    cudatoolkit), but lib/ is on no search path: dlopen("libcudart.so.11.0") fails at GPU start-up."""
    site = site_packages(venv)
    tf = site / "tensorflow"
    (tf / "python/platform").mkdir(parents=True)
    (tf / "__init__.py").write_text("")
    (tf / "python/platform/build_info.py").write_text(
        "build_info = {'cuda_version': '11.2', 'cudnn_version': '8', 'is_cuda_build': True}\n")
    install_dist(site, "tensorflow", "2.7.0", files={"tensorflow/__init__.py": ""})
    (tmp_path / "fw.c").write_text("int tf_framework(void) { return 1; }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,libtensorflow_framework.so.2", "-o",
        str(tf / "libtensorflow_framework.so.2"), str(tmp_path / "fw.c"))
    (tmp_path / "ext.c").write_text("int tf_framework(void);\nint init(void) { return tf_framework(); }\n")
    gcc("-shared", "-fPIC", "-o", str(tf / f"_pywrap_tensorflow_internal.{EXT}"), str(tmp_path / "ext.c"),
        f"-L{tf}", "-l:libtensorflow_framework.so.2", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN")
    env_lib = venv / "lib"
    (tmp_path / "cudart.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 11020; return 0; }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudart.so.11.0", "-o", str(env_lib / "libcudart.so.11.0"),
        str(tmp_path / "cudart.c"))
    env = {**job_env, "PATH": f"{env_lib}:{job_env['PATH']}"}  # PATH does not matter to the loader
    out = check_libraries(ctx_for(tmp_path, venv, env))
    found = [f for f in out if f.id == "libs.runtime-not-found" and f.library == "libcudart.so.11.0"]
    assert found, [(f.id, f.library) for f in out]
    f = found[0]
    assert f.severity in ("error", "warning") and f.cause and f.fix
    assert any(str(env_lib / "libcudart.so.11.0") in e for e in f.evidence)
    assert any(f"LD_LIBRARY_PATH={env_lib}" in x for x in f.fix)


def _c01_layout(tmp_path, venv):
    """The C01 layout: an extension with RUNPATH to the wheel's cuDNN, a module's cuDNN on
    LD_LIBRARY_PATH.  Returns (wheel lib dir, module lib dir, C source of the extension)."""
    site = site_packages(venv)
    wheel_lib = site / "nvidia/cudnn/lib"
    wheel_lib.mkdir(parents=True)
    src = tmp_path / "cudnn.c"
    src.write_text('const char *cudnn_version(void) { return "8.3.2"; }\n')
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(wheel_lib / "libcudnn.so.8"), str(src))
    module_dir = tmp_path / "mod/cudnn/v8.0.3/lib64"
    module_dir.mkdir(parents=True)
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(module_dir / "libcudnn.so.8"), str(src))
    pkg = site / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    ext = tmp_path / "ext.c"
    ext.write_text("const char *cudnn_version(void);\nconst char *v(void) { return cudnn_version(); }\n")
    gcc("-shared", "-fPIC", "-o", str(pkg / f"_fast.{EXT}"), str(ext), f"-L{wheel_lib}", "-l:libcudnn.so.8",
        "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib")
    return wheel_lib, module_dir


@needs_loader
def test_result_cache_is_reused_only_while_every_input_is_unchanged(tmp_path, venv, job_env, monkeypatch):
    from envlock import cache
    from envlock.libs.analysis import analyze_module

    monkeypatch.setattr(cache, "RACY_NS", 0)  # files change just before each run here

    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1])
        return analyze_module(*args, **kwargs)

    wheel_lib, module_dir = _c01_layout(tmp_path, venv)
    env = {**job_env, "LD_LIBRARY_PATH": str(module_dir)}

    def run():
        return check_libraries(ctx_for(tmp_path, venv, env, modules=["mylab._fast"]), analyze=counting)

    first = run()
    assert "libs.shadowed" in [f.id for f in first] and len(calls) == 1
    assert run() == first and len(calls) == 1                       # reused
    (module_dir / "libcudnn_ops.so.8").write_bytes(b"")             # a new file where the loader looks
    assert run() == first and len(calls) == 2
    assert run() == first and len(calls) == 2
    (module_dir / "libcudnn.so.8").unlink()                        # the shadowing copy is gone
    gone = run()
    assert "libs.shadowed" not in [f.id for f in gone] and len(calls) == 3
    env = {**job_env}                                               # another LD_LIBRARY_PATH: another entry
    run()
    assert len(calls) == 4
    assert list((tmp_path / "cache/envlock/verify-libs").glob("*.json"))
