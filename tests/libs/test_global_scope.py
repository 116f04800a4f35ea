"""RTLD_GLOBAL loads a package's own ``__init__.py`` makes (issue 22, item 3), read from the
source and modelled as glibc's global scope, with the real interpreter importing the package
as the oracle: where the import succeeds envlock finds no missing symbol, where it fails
envlock names the same symbol, and where the source does not decide the path envlock says so."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.analysis import analyze_module
from envlock.libs.globalscope import read_global_loads

from .conftest import Builder, _clean_env

EXT = r"""
#include <Python.h>
int {use}(void);
static PyObject *call(PyObject *self, PyObject *args) {{ return PyLong_FromLong({use}()); }}
static PyMethodDef methods[] = {{{{"call", call, METH_NOARGS, ""}}, {{0}}}};
static struct PyModuleDef mod = {{PyModuleDef_HEAD_INIT, "{name}", 0, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&mod); }}
"""

DEFINER = r"""
#include <Python.h>
int a_fn(void) { return 7; }
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_a", 0, -1, 0};
PyMODINIT_FUNC PyInit__a(void) { return PyModule_Create(&mod); }
"""


def _ext(build: Builder, out: str, code: str) -> Path:
    inc = sysconfig.get_paths()["include"]
    return build.lib(out, code, extra=[f"-I{inc}"])


def _real_import(site: Path, pkg: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import {pkg}"], capture_output=True, text=True,
                          timeout=60, env=_clean_env({"PYTHONPATH": str(site)}), cwd="/", check=False)


def _missing(site: Path, pkg: str) -> list[str]:
    report = analyze_module(sys.executable, pkg, sys_path=[str(site), *sys.path], env={},
                            check_symbols=True, runtime=False)
    return [f.title for f in report.findings if f.id == "missing-symbol"]


@pytest.fixture()
def base(build: Builder) -> Path:
    return build.lib("site/pkg/lib/libbase.so", "int base_fn(void) { return 3; }", soname="libbase.so")


@pytest.mark.parametrize("mode", ["ctypes.RTLD_GLOBAL", "os.RTLD_GLOBAL | os.RTLD_NOW", "256", "ctypes.RTLD_LOCAL"])
def test_ctypes_cdll_with_rtld_global(build: Builder, base: Path, mode: str) -> None:
    site = build.root / "site"
    _ext(build, "site/pkg/_ext.cpython-311-x86_64-linux-gnu.so", EXT.format(use="base_fn", name="_ext"))
    (site / "pkg/__init__.py").write_text(
        "import ctypes, os\n"
        f"ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libbase.so'), mode={mode})\n"
        "from . import _ext\n")
    real = _real_import(site, "pkg")
    ours = _missing(site, "pkg")
    # the command's exit status and first finding are the import's: 1 and glibc's message
    cli_env = {"XDG_CACHE_HOME": str(build.root / "cache"), "PYTHONPATH": str(site),
               "LD_PRELOAD": "", "LD_LIBRARY_PATH": ""}
    res = CliRunner().invoke(cli, ["libs", "pkg", "--python", sys.executable, "--no-cache"], env=cli_env)
    assert res.exit_code == (0 if real.returncode == 0 else 1), res.output
    if mode == "ctypes.RTLD_LOCAL":  #: the symbol stays out of the global scope
        assert real.returncode != 0 and "undefined symbol: base_fn" in real.stderr
        assert len(ours) == 1 and "base_fn" in ours[0]
        first = res.output.split("findings (")[1].splitlines()[1]
        assert "error [missing-symbol]" in first, res.output
        glibc = real.stderr.strip().splitlines()[-1].split(": ", 1)[1]  # "…/_ext….so: undefined symbol: base_fn"
        assert glibc.split(": ", 1)[1] in res.output, (glibc, res.output)
    else:
        assert real.returncode == 0, real.stderr
        assert ours == []
        loads = read_global_loads(str(site / "pkg"))
        assert loads is not None and loads.libraries == ((2, str(base)),)


@pytest.mark.parametrize("flags", [True, False])
def test_setdlopenflags_makes_extension_imports_global(build: Builder, flags: bool) -> None:
    site = build.root / "site"
    _ext(build, "site/pkg2/_a.cpython-311-x86_64-linux-gnu.so", DEFINER)
    _ext(build, "site/pkg2/_b.cpython-311-x86_64-linux-gnu.so", EXT.format(use="a_fn", name="_b"))
    (site / "pkg2/__init__.py").write_text(
        "import os, sys\n"
        + ("sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)\n" if flags else "")
        + "from . import _a\nfrom . import _b\n")
    real = _real_import(site, "pkg2")
    ours = _missing(site, "pkg2")
    assert (real.returncode == 0) is flags, real.stderr
    assert (ours == []) is flags


def test_a_path_the_source_does_not_decide_is_said(build: Builder, base: Path) -> None:
    site = build.root / "site"
    _ext(build, "site/pkg3/_ext.cpython-311-x86_64-linux-gnu.so", EXT.format(use="base_fn", name="_ext"))
    base.rename(site / "pkg3" / "libbase.so")
    (site / "pkg3/__init__.py").write_text(
        "import ctypes, glob, os\n"
        "for p in glob.glob(os.path.join(os.path.dirname(__file__), 'lib*.so')):\n"
        "    ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)\n"
        "from . import _ext\n")
    assert _real_import(site, "pkg3").returncode == 0
    report = analyze_module(sys.executable, "pkg3", sys_path=[str(site), *sys.path], env={},
                            check_symbols=True, runtime=False)
    (note,) = [f for f in report.findings if f.id == "rtld-global-unknown"]
    assert note.severity == "info" and "ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)" in note.evidence[0]
    assert any(f.id == "missing-symbol" for f in report.findings)  # what it cannot know, it says
