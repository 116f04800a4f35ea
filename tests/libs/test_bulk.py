"""Bulk comparison with the real loader over the system's ELF files (``--realenv``).

Every ELF file under ``/usr/lib/x86_64-linux-gnu`` and ``/usr/bin``:

* as the main program: ``ld.so --list FILE`` against the model (``Process.start``): the same
  names resolved to the same paths, or both refuse;
* under ``dlopen`` (programs only: a PIE or ``ET_EXEC`` is refused before any of its code
  runs): the ``dlerror()`` text against the model's refusal.

Differences are collected and printed; the test fails on any that is not listed in
``KNOWN`` with its reason.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from envlock.libs.elfread import read_elf
from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .conftest import DLOPEN_CALLER, DLOPEN_MAIN, Builder

pytestmark = pytest.mark.realenv
LDSO = "/lib64/ld-linux-x86-64.so.2"
DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/bin")
#: Remaining differences and why (empty: none known).
KNOWN: dict[str, str] = {}


def _elf_files() -> list[str]:
    out = []
    for d in DIRS:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                with open(p, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
            except OSError:
                continue
            out.append(p)
    return out


def _ld_so(path: str) -> tuple[int, dict[str, str | None], str]:
    proc = subprocess.run([LDSO, "--list", path], capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    text = proc.stdout.decode("utf-8", "surrogateescape")
    got: dict[str, str | None] = {}
    for line in text.splitlines():
        m = re.match(r"^\t(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if m:
            got.setdefault(m.group(1), None if m.group(2) == "not found" else m.group(2))
    return proc.returncode, got, (text + proc.stderr.decode("utf-8", "replace")).strip()


def _model(path: str) -> tuple[dict[str, str | None], str | None]:
    proc = Process(detect_config(env={}))
    main = proc.start(path)
    err = proc.main_error or (main.info.error.message if main.info.error else None)
    rtld = {o.id for o in proc.objects if o.kind in ("interpreter", "executable")}
    got: dict[str, str | None] = {}
    for r in proc.resolutions:
        if r.kind == "needed" and r.object_id not in rtld:
            got.setdefault(r.name, r.path)
    return got, err


@pytest.mark.skipif(not os.path.exists(LDSO), reason="no x86-64 loader")
def test_every_system_elf_file_as_the_main_program() -> None:
    diffs: list[str] = []
    files = _elf_files()
    for path in files:
        rc, real, text = _ld_so(path)
        ours, err = _model(path)
        if "not a dynamic executable" in text or "statically linked" in text:
            continue  # static programs: nothing to load
        if rc != 0 and not real:
            if err is None and not any(v is None for v in ours.values()):
                diffs.append(f"{path}: ld.so refuses ({text.splitlines()[-1] if text else rc}), "
                             "envlock accepts")
            continue
        if err is not None:
            diffs.append(f"{path}: ld.so lists it, envlock refuses ({err})")
            continue
        if real != ours:
            diffs.append(f"{path}: ld.so {real} envlock {ours}")
    unknown = [d for d in diffs if d.split(":")[0] not in KNOWN]
    print(f"{len(files)} files compared, {len(diffs)} differences")
    for d in diffs:
        print("  ", d)
    assert not unknown, unknown[:10]


@pytest.mark.skipif(not os.path.exists(LDSO), reason="no x86-64 loader")
def test_programs_under_dlopen_are_refused_as_glibc_does(build: Builder) -> None:
    build.lib("caller/libcaller.so", DLOPEN_CALLER, soname="libcaller.so", extra=["-ldl"])
    exe = build.exe("prog", DLOPEN_MAIN, needed=["caller/libcaller.so"], rpath=f"{build.root}/caller")
    diffs = []
    n = 0
    for path in _elf_files():
        if not path.startswith("/usr/bin/"):
            continue
        info = read_elf(path)
        if not info.ok or not (info.pie or info.type == "ET_EXEC"):
            continue  # not a program by its headers: dlopen would run its constructors
        n += 1
        proc = subprocess.run([str(exe), path], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin"})
        real = next((x[4:] for x in proc.stdout.splitlines() if x.startswith("ERR ")), None)
        model = Process(detect_config(env={}))
        model.start(str(exe))
        res = model.dlopen(path, model.find("libcaller.so"))
        if res.error != real:
            diffs.append(f"{path}: dlopen {real!r} envlock {res.error!r}")
    print(f"{n} programs dlopen'ed, {len(diffs)} differences")
    assert not diffs, diffs[:10]
