"""Bounded fuzz: seeded mutations of real libraries, read by envlock and by the real loader.

Each mutant (bytes flipped in the headers, the dynamic section, the string and version tables;
header fields set to extreme values; the file cut short) must be read without an exception
and within a time limit, by :func:`read_elf`, :func:`read_symbols` and the loader model; where
``ld.so --list`` accepts the file as the main program, envlock must name the same
dependencies.  ``ENVLOCK_FUZZ=N`` runs N mutants instead of the default few hundred
(the issue's run used 10,000).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from envlock.libs.elfread import read_elf
from envlock.libs.elfsyms import read_symbols
from envlock.libs.config import detect_config
from envlock.libs.linkmap import Process

from .dlopen_oracle import build_probe, compare

NEEDS_NO_GCC = True
LDSO = "/lib64/ld-linux-x86-64.so.2"
SEEDS = [p for p in ("/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                     "/lib/x86_64-linux-gnu/libutil.so.1", "/lib/x86_64-linux-gnu/libstdc++.so.6")
         if os.path.exists(p)]
COUNT = int(os.environ.get("ENVLOCK_FUZZ", "200"))
LIMIT_S = 5

pytestmark = pytest.mark.skipif(not SEEDS or not os.path.exists(LDSO), reason="no x86-64 system libraries")


def _hot_ranges(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges worth mutating: headers, program headers, PT_DYNAMIC and the start of
    each PT_LOAD (where .dynsym/.dynstr/.gnu.version* live)."""
    phoff = int.from_bytes(data[32:40], "little")
    phnum = int.from_bytes(data[56:58], "little")
    out = [(0, 64), (phoff, phoff + 56 * phnum)]
    for i in range(phnum):
        ph = data[phoff + 56 * i: phoff + 56 * (i + 1)]
        p_type = int.from_bytes(ph[0:4], "little")
        off = int.from_bytes(ph[8:16], "little")
        size = int.from_bytes(ph[32:40], "little")
        if p_type == 2:
            out.append((off, off + size))
        elif p_type == 1:
            out.append((off, off + min(size, 16384)))
    return [(a, min(b, len(data))) for a, b in out if a < b <= len(data) + 16384]


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    how = rng.random()
    if how < 0.1:
        return bytes(buf[: rng.randrange(1, len(buf))])
    ranges = _hot_ranges(data)
    if how < 0.25:
        # A header field set to an extreme value (e_phnum, e_shoff, e_shnum, e_phoff, …).
        off, width = rng.choice([(56, 2), (40, 8), (60, 2), (32, 8), (62, 2), (54, 2), (16, 2)])
        buf[off:off + width] = rng.choice([b"\xff" * width, b"\0" * width,
                                           rng.randbytes(width)])
        return bytes(buf)
    for _ in range(rng.randrange(1, 9)):
        a, b = rng.choice(ranges)
        i = rng.randrange(a, b)
        buf[i] = rng.randrange(256) if rng.random() < 0.7 else buf[i] ^ (1 << rng.randrange(8))
    return bytes(buf)


class _Timeout(Exception):
    pass


def _alarm(_sig, _frm):
    raise _Timeout


def ld_so_names(path: Path) -> list[str] | None:
    """The names ``ld.so --list`` prints for ``path`` (``None``: it refuses or crashes)."""
    try:
        proc = subprocess.run([LDSO, "--list", str(path)], capture_output=True, timeout=10,
                              env={"PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None
    names = []
    for raw in proc.stdout.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape")
        m = re.match(r"^\t(.+?) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        # ld.so prints itself as "<PT_INTERP string> => its path" when the string read at
        # PT_INTERP's p_vaddr is not its path (a mutated PT_INTERP): not a dependency.
        if m and m.group(2) != LDSO:
            names.append(m.group(1))
    return names


def model_names(path: Path) -> tuple[list[str], str | None]:
    proc = Process(detect_config(env={}))
    main = proc.start(str(path))
    err = proc.main_error or (main.info.error.message if main.info.error else None)
    out = []
    rtld = {o.id for o in proc.objects if o.kind in ("interpreter", "executable")}
    for r in proc.resolutions:
        # ld.so lists itself without "=>" and never the main program.
        if r.name not in out and r.kind == "needed" and r.object_id not in rtld:
            out.append(r.name)
    return out, err


def test_mutants_read_without_exception_or_hang_and_agree_with_ld_so(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    seeds = [Path(p).read_bytes() for p in SEEDS]
    old = signal.signal(signal.SIGALRM, _alarm)
    compared = disagreements = 0
    problems: list[str] = []
    try:
        for n in range(COUNT):
            data = mutate(rng.choice(seeds), rng)
            path = tmp_path / f"m{n % 8}.so"
            path.write_bytes(data)
            signal.alarm(LIMIT_S)
            try:
                info = read_elf(path)
                read_symbols(path)
                ours, err = model_names(path)
            except _Timeout:
                problems.append(f"mutant {n}: more than {LIMIT_S} s")
                continue
            finally:
                signal.alarm(0)
            assert info.path == str(path)
            real = ld_so_names(path)
            if real is None or err is not None:
                continue
            compared += 1
            if sorted(set(real)) != sorted(ours):
                disagreements += 1
                problems.append(f"mutant {n}: ld.so {real} envlock {ours}")
    finally:
        signal.signal(signal.SIGALRM, old)
    assert not problems, problems[:5]
    assert compared > COUNT // 10  # most mutants are still accepted by the loader


#: What ld.so does that the model, reading the file, does not decide: a crash on a mutated
#: table (SIGSEGV/SIGBUS), one of ld.so's own assertions, or the kernel refusing the mmap.
_NOT_MODELLED = ("Inconsistency detected by ld.so", "failed to map segment from shared object",
                 "cannot map zero-fill pages", "cannot allocate TLS data structures", "signal")


def _ld_so_verdict(path: Path) -> tuple[bool, str]:
    """``(accepted, message)`` of ``ld.so --list path`` (the message after the file name)."""
    proc = subprocess.run([LDSO, "--list", str(path)], capture_output=True, timeout=10,
                          env={"PATH": "/usr/bin:/bin"})
    if proc.returncode == 0:
        return True, ""
    if proc.returncode < 0:
        return False, f"signal {-proc.returncode}"
    # Lines end at "\n" only: a damaged name may hold \v, \x1c-\x1e, … that splitlines() breaks
    # at (mutant 1987 of bench_mutants' seed: ld.so's whole message, read as its last fragment).
    text = proc.stderr.decode("utf-8", "surrogateescape").strip().split("\n")
    line = text[-1] if text else ""
    marker = "error while loading shared libraries: "
    rest = line.split(marker, 1)[1] if marker in line else line
    return False, rest[len(f"{path}: "):] if rest.startswith(f"{path}: ") else rest


def ld_so_disagreement(path: Path) -> tuple[str, str] | None:
    """``(kind, line)`` where envlock and ``ld.so --list`` disagree on the mutant ``path``
    as the main program, else ``None``: ``accepts-refused``, ``refuses-accepted``,
    ``message`` (both refuse, other words), ``missing`` (a dependency ld.so cannot find that
    envlock does not ask for), ``names`` (both accept, other dependency names), or
    ``not-modelled`` (ld.so crashed, asserted or the mmap failed: counted, not a failure)."""
    ours, err = model_names(path)
    accepted, msg = _ld_so_verdict(path)
    missing = msg.split(": cannot open shared object file", 1)[0] if "cannot open shared" in msg else None
    if missing is not None and err is None:
        if missing not in ours:  # the main file is fine; one of its dependencies is not found
            return "missing", f"ld.so misses {missing!r}, envlock asks for {ours}"
    elif accepted and err is not None:
        return "accepts-refused", f"ld.so accepts it, envlock refuses it ({err})"
    elif not accepted and err is None:
        if any(m in msg for m in _NOT_MODELLED):
            return "not-modelled", msg
        return "refuses-accepted", f"ld.so refuses it ({msg}), envlock accepts it"
    elif not accepted and err is not None and msg.startswith(("invalid ELF", "nonzero padding", "ELF file",
                                                              "only ET_DYN", "cannot read file data")):
        if err != msg:
            return "message", f"ld.so says {msg!r}, envlock {err!r}"
    elif accepted:
        real = ld_so_names(path)
        if real is not None and sorted(set(real)) != sorted(ours):
            return "names", f"ld.so {real} envlock {ours}"
    return None


def test_mutants_get_ld_sos_verdict_and_message(tmp_path: Path) -> None:
    """Issue 22, item 8: envlock refuses a mutant exactly when ``ld.so --list`` does, with
    glibc's own message, except where ld.so crashes, asserts or the mmap fails (not decided by
    the file's bytes as read; counted, and at most a fifth of the mutants).  Mutant 377 of this
    seed (``ENVLOCK_FUZZ=600``: a ``Verdaux`` name outside the segments, which glibc keeps as
    a pointer and never reads) is accepted now; ``benchmarks/bench_mutants.py`` runs 10,000."""
    rng = random.Random(20261202)
    seeds = [Path(p).read_bytes() for p in SEEDS]
    problems: list[str] = []
    not_modelled = 0
    for n in range(COUNT):
        path = tmp_path / f"v{n % 8}.so"
        path.write_bytes(mutate(rng.choice(seeds), rng))
        got = ld_so_disagreement(path)
        if got is not None and got[0] == "not-modelled":
            not_modelled += 1
        elif got is not None:
            problems.append(f"mutant {n}: {got[1]}")
    assert not problems, problems[:5]
    assert not_modelled <= COUNT // 5


def test_mutant_377_a_verdaux_name_outside_the_segments_loads(tmp_path: Path) -> None:
    """The case once known as mutant 377: libgcc_s.so.1 with the ``vda_name`` of one version
    definition pointing past every segment.  glibc (``_dl_check_map_versions``) keeps the
    pointer without reading it, so ``ld.so --list`` and ``dlopen`` load the file; envlock
    must not call it corrupt."""
    seed = Path("/lib/x86_64-linux-gnu/libgcc_s.so.1")
    if not seed.exists():
        pytest.skip("no libgcc_s.so.1")
    rng = random.Random(20261202)
    seeds = [Path(p).read_bytes() for p in SEEDS]
    for _ in range(378):
        data = mutate(rng.choice(seeds), rng)
    path = tmp_path / "m377.so"
    path.write_bytes(data)
    info = read_elf(path)
    if SEEDS != [p for p in SEEDS] or data[:16] != seed.read_bytes()[:16]:
        pytest.skip("the seed libraries differ from the ones mutant 377 was drawn from")
    accepted, msg = _ld_so_verdict(path)
    assert accepted, msg
    assert info.error is None and info.needed == ("libc.so.6",)
    assert model_names(path) == (ld_so_names(path), None)


#: Mutants of seed 20261204 where envlock and the real dlopen still disagree, and why
#: (docs/libs.md, "What envlock does not model").  Mutant 191 (a flipped .dynstr byte renames
#: the file's own __register_frame_info, which its own relocation then looks up) is modelled
#: now (envlock/libs/elfselfrefs.py).
DLOPEN_KNOWN: dict[int, str] = {}


def test_mutants_get_a_real_dlopens_verdict_and_dependencies(tmp_path: Path) -> None:
    """Issue 22, item 8: each mutant ``dlopen``'ed for real (``RTLD_NOW``, ``LD_BIND_NOW=1``, in
    a subprocess with a deadline): envlock's accept/refuse verdict and the objects loaded equal
    it.  A probe that crashes or hangs (the mutant's own code ran), an mmap failure, and what
    a relocation of an unknown type (``compare``'s ``relocations``) are counted, at most a
    fifth."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc for the dlopen probe")
    probe = build_probe(tmp_path)
    rng = random.Random(20261204)
    seeds = [Path(p).read_bytes() for p in SEEDS]
    problems: list[str] = []
    not_modelled = 0
    for n in range(COUNT):
        path = tmp_path / f"d{n % 8}.so"
        path.write_bytes(mutate(rng.choice(seeds), rng))
        got = compare(probe, path)
        if got is not None and got[0] in ("not-modelled", "relocations"):
            not_modelled += 1
        elif got is not None and n not in DLOPEN_KNOWN:
            problems.append(f"mutant {n}: {got[0]}: {got[1]}")
    assert not problems, problems
    assert not_modelled <= COUNT // 5
