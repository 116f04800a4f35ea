"""Fixtures for the loader tests: real ELF files compiled with gcc, and the real loader.

Every scenario is built from C sources in a temporary directory with ``gcc -shared -fPIC``
and the linker options that matter (``-soname``, ``--disable-new-dtags`` for DT_RPATH,
``--enable-new-dtags`` for DT_RUNPATH, ``-z nodefaultlib``, version scripts).  The oracle
is the real loader: ``ldd`` (``ld.so --list``) or a small program that calls ``dlopen``
and prints the ``l_name`` the loader chose, optionally under ``LD_DEBUG=libs``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

GCC = shutil.which("gcc")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if GCC is None:
        # Only the tests that compile their inputs need gcc; those on the committed files of
        # fixtures/elf/ run anywhere.
        skip = pytest.mark.skip(reason="gcc is needed to build the ELF fixtures")
        for item in items:
            if "tests/libs" in str(item.fspath) and not getattr(item.module, "NEEDS_NO_GCC", False):
                item.add_marker(skip)


def _clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment without the loader's variables (``LD_*``, and ``GLIBC_TUNABLES``,
    which masks CPU features), plus ``extra``: the oracle sees what the model is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_") and k != "GLIBC_TUNABLES"}
    env.update(extra or {})
    return env


@dataclass
class Builder:
    """Compiles C snippets into shared objects and programs under ``root``."""

    root: Path

    def lib(
        self,
        out: str,
        code: str = "int f(void) { return 1; }",
        *,
        soname: str | None = None,
        needed: Sequence[str] = (),
        rpath: str | None = None,
        runpath: str | None = None,
        version_script: str | None = None,
        extra: Sequence[str] = (),
    ) -> Path:
        """Build ``root/out`` as a shared library; ``needed`` are ``-L``/``-l`` style paths."""
        return self._build(out, code, shared=True, soname=soname, needed=needed, rpath=rpath,
                           runpath=runpath, version_script=version_script, extra=extra)

    def exe(
        self,
        out: str,
        code: str = "int main(void) { return 0; }",
        *,
        needed: Sequence[str] = (),
        rpath: str | None = None,
        runpath: str | None = None,
        extra: Sequence[str] = (),
    ) -> Path:
        """Build ``root/out`` as a program."""
        return self._build(out, code, shared=False, soname=None, needed=needed, rpath=rpath,
                           runpath=runpath, version_script=None, extra=extra)

    def _build(self, out: str, code: str, *, shared: bool, soname: str | None,
               needed: Sequence[str], rpath: str | None, runpath: str | None,
               version_script: str | None, extra: Sequence[str]) -> Path:
        target = self.root / out
        target.parent.mkdir(parents=True, exist_ok=True)
        src = target.with_name(target.name.replace(".", "_") + ".c")
        src.write_text(textwrap.dedent(code))
        argv = [GCC or "gcc", "-o", str(target), str(src), "-fPIC"]
        if shared:
            argv.append("-shared")
        if soname:
            argv.append(f"-Wl,-soname,{soname}")
        if rpath is not None:
            argv += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
        if runpath is not None:
            argv += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        if version_script is not None:
            vs = target.with_name(target.name + ".map")
            vs.write_text(textwrap.dedent(version_script))
            argv.append(f"-Wl,--version-script,{vs}")
        # Link against the given files by path but record only their SONAME (like -l);
        # Debian's gcc links --as-needed by default, which would drop unused ones.
        argv.append("-Wl,--no-as-needed")
        for n in needed:
            argv.append(str(self.root / n))
        argv += list(extra)
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
        return target


@pytest.fixture()
def build(tmp_path: Path) -> Builder:
    """A :class:`Builder` writing into this test's ``tmp_path``."""
    return Builder(tmp_path)


@pytest.fixture(scope="session")
def session_build(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """A :class:`Builder` shared by the whole session (for read-only fixtures)."""
    return Builder(tmp_path_factory.mktemp("elf"))


_LDD_LINE = re.compile(r"^\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$")


@dataclass
class LddResult:
    """What ``ldd`` said: name → path (``None`` for "not found") and version errors."""

    paths: dict[str, str | None]
    order: list[str]
    listed: list[str]
    version_errors: list[str]
    returncode: int
    stderr: str


def real_ldd(path: Path | str, env: Mapping[str, str] | None = None) -> LddResult:
    """Run ``ldd`` (the real loader in trace mode) on ``path``."""
    proc = subprocess.run(["ldd", str(path)], check=False, capture_output=True, text=True, timeout=30,
                          env=_clean_env(env))
    paths: dict[str, str | None] = {}
    order: list[str] = []
    listed: list[str] = []
    errors: list[str] = []
    for line in proc.stdout.splitlines():
        bare = re.match(r"^\s*(/\S+) \(0x[0-9a-f]+\)$", line)
        if bare:
            listed.append(bare.group(1))
            continue
        if "version `" in line:
            errors.append(line.strip())
            continue
        m = _LDD_LINE.match(line)
        if m:
            target = None if m.group(2) == "not found" else m.group(2)
            paths.setdefault(m.group(1), target)
            order.append(m.group(1))
    return LddResult(paths=paths, order=order, listed=listed, version_errors=errors,
                     returncode=proc.returncode, stderr=proc.stderr)


DLOPEN_MAIN = r"""
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int do_open(const char *name);
int main(int argc, char **argv) { return do_open(argv[1]); }
"""

DLOPEN_CALLER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int do_open(const char *name) {
    void *h = dlopen(name, RTLD_NOW);
    if (!h) { printf("ERR %s\n", dlerror()); return 1; }
    struct link_map *lm = 0;
    dlinfo(h, RTLD_DI_LINKMAP, &lm);
    printf("OK %s\n", lm->l_name);
    for (struct link_map *l = lm; l; l = l->l_next) printf("MAP %s\n", l->l_name);
    return 0;
}
"""


@dataclass
class DlopenResult:
    """What a real ``dlopen`` did: the chosen ``l_name`` or the ``dlerror()`` text."""

    path: str | None
    error: str | None
    maps: list[str]
    debug: str


def real_dlopen(program: Path, name: str, env: Mapping[str, str] | None = None,
                debug: bool = False) -> DlopenResult:
    """Run a dlopen test program built with :data:`DLOPEN_MAIN`/:data:`DLOPEN_CALLER`."""
    extra = dict(env or {})
    if debug:
        extra["LD_DEBUG"] = "libs"
    proc = subprocess.run([str(program), name], check=False, capture_output=True, text=True, timeout=30,
                          env=_clean_env(extra))
    path = error = None
    maps = []
    for line in proc.stdout.splitlines():
        if line.startswith("OK "):
            path = line[3:]
        elif line.startswith("ERR "):
            error = line[4:]
        elif line.startswith("MAP "):
            maps.append(line[4:])
    return DlopenResult(path=path, error=error, maps=maps, debug=proc.stderr)


def ld_debug_trials(debug_text: str) -> dict[str, list[str]]:
    """Parse ``LD_DEBUG=libs`` output: library name → every ``trying file=`` in order."""
    out: dict[str, list[str]] = {}
    current = None
    for line in debug_text.splitlines():
        m = re.search(r"find library=(\S+) \[\d+\]; searching", line)
        if m:
            current = m.group(1)
            out.setdefault(current, [])
            continue
        m = re.search(r"trying file=(\S+)", line)
        if m and current is not None:
            out[current].append(m.group(1))
    return out


def real_ld_debug(path: Path | str, env: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """``LD_DEBUG=libs ld.so --list path``: library name → files tried, in order."""
    extra = dict(env or {})
    extra["LD_DEBUG"] = "libs"
    proc = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list", str(path)],
                          check=False, capture_output=True, text=True, timeout=30,
                          env=_clean_env(extra))
    return ld_debug_trials(proc.stderr)


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """``envlock libs`` folds its text to the terminal's width (80 in a log, as rich does); these
    tests read whole lines, so they give it a wide one (``COLUMNS``, which
    :func:`shutil.get_terminal_size` reads first).  tests/libs/test_fit.py checks the folding."""
    monkeypatch.setenv("COLUMNS", "4000")
