"""A real ``dlopen`` of a mutant, in a subprocess with a deadline, beside envlock's model of it.

The probe is a small C program (:data:`PROBE_C`) that calls ``dlopen(path, RTLD_NOW)`` under
``LD_BIND_NOW=1`` and prints ``ERR <dlerror()>`` or ``OK`` and every object of the link map.
A mutant's constructors run in the probe (a crash or a hang there is its own outcome,
``signal N`` / ``timeout``), never in the test's process.  :func:`compare` gives one line per
disagreement between that and ``analyze_module`` of the same file from the same probe.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envlock.libs.analysis import analyze_module

PROBE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("ERR %s\n", dlerror()); fflush(stdout); return 1; }
    struct link_map *lm = 0;
    dlinfo(h, RTLD_DI_LINKMAP, &lm);
    while (lm && lm->l_prev) lm = lm->l_prev;
    for (; lm; lm = lm->l_next) printf("MAP %s\n", lm->l_name);
    printf("OK\n");
    fflush(stdout);
    return 0;
}
"""
DEADLINE_S = 10


def build_probe(root: Path) -> Path:
    """Compile :data:`PROBE_C` into ``root/probe`` with gcc (raises ``CalledProcessError``)."""
    src = root / "probe.c"
    src.write_text(PROBE_C)
    exe = root / "probe"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src), "-ldl"], check=True, timeout=120)
    return exe


@dataclass(frozen=True)
class Outcome:
    """One side's answer: ``error`` (``None``: loaded) and the real paths loaded for the file."""

    error: str | None
    deps: frozenset[str]


def real_dlopen(probe: Path, path: Path) -> Outcome:
    """What ``dlopen(path, RTLD_NOW)`` does in ``probe`` (``LD_BIND_NOW=1``, a deadline).

    The objects the probe itself has before the call (itself, the vDSO, libc, ld.so) are
    the same on both sides and are left in; the mutant itself is left out.
    """
    try:
        proc = subprocess.run([str(probe), str(path)], capture_output=True, timeout=DEADLINE_S,
                              env={"PATH": "/usr/bin:/bin", "LD_BIND_NOW": "1"}, cwd=path.parent)
    except subprocess.TimeoutExpired:
        return Outcome("timeout", frozenset())
    out = proc.stdout.decode("utf-8", "surrogateescape").split("\n")  # not splitlines(): names may hold \v
    if proc.returncode < 0:
        return Outcome(f"signal {-proc.returncode}", frozenset())
    err = next((x[4:] for x in out if x.startswith("ERR ")), None)
    if err is not None or "OK" not in out:
        return Outcome(err or f"exit {proc.returncode}", frozenset())
    me = os.path.realpath(path)
    maps = {os.path.realpath(x[4:]) for x in out if x.startswith("MAP /")}
    return Outcome(None, frozenset(maps - {me, os.path.realpath(probe)}))


def model_dlopen(probe: Path, path: Path) -> Outcome:
    """envlock's answer for the same ``dlopen``: the first error the loader reports
    (a finding of severity ``error`` that is no consequence of an earlier one; a refusal of
    the file itself), and the real paths of every object in the modelled process."""
    report = analyze_module(str(probe), str(path), sys_path=[], env={"LD_BIND_NOW": "1"},
                            owners=False, runtime=False, check_symbols=True)
    first = next((f for f in report.findings if f.severity == "error"
                  and getattr(f, "consequence_of", None) is None), None)
    me = os.path.realpath(path)
    deps = {os.path.realpath(o.path) for o in report.objects if o.path}
    err = None if first is None else first.title
    if err is None and report.errors:
        err = report.errors[0]
    return Outcome(err, frozenset(deps - {me, os.path.realpath(probe)}) if err is None else frozenset())


#: dlopen failures that the file's bytes as envlock reads them do not decide: the kernel
#: refusing an mmap, TLS allocation (the same list as ``test_fuzz._NOT_MODELLED``).
NOT_MODELLED = ("failed to map segment from shared object", "cannot map zero-fill pages",
                "cannot allocate TLS data structures", "cannot allocate memory",
                "cannot apply additional memory protection after relocation")


def compare(probe: Path, path: Path) -> tuple[str, str] | None:
    """``(kind, line)`` when envlock and the real ``dlopen`` disagree on ``path``, else ``None``.

    kinds: ``accepts-refused`` (glibc loads it, envlock refuses), ``refuses-accepted``,
    ``deps`` (both load it, other objects); and, counted apart: ``not-modelled`` (the probe
    crashed, hung, hit one of ld.so's assertions, or an mmap failed: not decided by the bytes
    as read), ``relocations`` (a relocation of a type glibc does not know: envlock does not
    check relocation types; docs/libs.md).  A symbol of the file itself that its own
    relocation names and its damaged table hides is modelled (envlock/libs/elfselfrefs.py):
    a disagreement there is ``refuses-accepted``.
    """
    real = real_dlopen(probe, path)
    ours = model_dlopen(probe, path)
    if real.error is not None and (real.error.startswith(("signal ", "timeout", "exit "))
                                   or any(m in real.error for m in NOT_MODELLED)):
        return ("not-modelled", f"dlopen {real.error}; envlock {ours.error!r}") if ours.error is None else None
    if real.error is None and ours.error is not None:
        return "accepts-refused", f"dlopen loads it, envlock: {ours.error}"
    if real.error is not None and ours.error is None:
        if "unexpected reloc type" in real.error:
            return "relocations", f"dlopen: {real.error}; envlock accepts"
        return "refuses-accepted", f"dlopen: {real.error}; envlock accepts"
    if real.error is None and real.deps != ours.deps:
        return "deps", f"only dlopen: {sorted(real.deps - ours.deps)}, only envlock: {sorted(ours.deps - real.deps)}"
    return None
