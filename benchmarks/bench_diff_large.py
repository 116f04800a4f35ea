"""Benchmark: ``envlock diff`` of very large inputs (issue 29), memory and time.

Two cases, each run as ``python -m envlock diff A B`` in a child process, reporting wall and
CPU seconds and the child's peak RSS (``ru_maxrss``, what ``/usr/bin/time -v`` calls "Maximum
resident set size") against the input size:

* ``freeze``: two pip freezes of ``--lines`` pins each (default 3,000,000: ~55 MB a file, under
  the 64 MiB read cap), every 50th pin different;
* ``manifest``: two envlock manifests of ``--packages`` packages each (default 300,000; half
  conda, half pip, as ``bench_diff.py`` builds them), ~5 % different.

``tests/diff/test_scaling.py`` is the scaled-down guard (90,000 lines, a time ratio).  The
defaults are over ``envlock.formats.MAX_PACKAGES`` (100,000 a file), so they measure the
refusal (one Error line, read up to the bound); ``--lines 100000 --packages 100000`` measures
the readers at the largest input they accept.

Run: ``python benchmarks/bench_diff_large.py [--lines N] [--packages N] [--only freeze|manifest]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def write_freeze(path: Path, n: int, variant: int) -> int:
    with open(path, "w") as f:
        for i in range(n):
            bump = ".1" if variant and i % 50 == 0 else ""
            f.write(f"pkg{i:07d}=={i % 7}.{i % 13}.{i % 5}{bump}\n")
    return path.stat().st_size


def write_manifest(path: Path, n: int, variant: int) -> int:
    from bench_diff import manifest

    from envlock.manifest import _toml

    path.write_text(_toml.dumps(manifest(n, variant), "toml"))
    return path.stat().st_size


#: A fresh parent per case: ``RUSAGE_CHILDREN``'s ``ru_maxrss`` is the largest of all its
#: children, so each diff gets its own.
_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t0 = time.perf_counter()\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(time.perf_counter() - t0, u.ru_utime + u.ru_stime, u.ru_maxrss * 1024, r.returncode)\n"
    "sys.stderr.write(r.stderr[-2000:])\n"
)


def run_diff(a: Path, b: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS bytes, exit status) of one ``envlock diff`` child."""
    r = subprocess.run([sys.executable, "-c", _WRAP, sys.executable, "-m", "envlock", "diff",
                        str(a), str(b)], cwd=ROOT, capture_output=True, text=True)
    wall, cpu, rss, code = r.stdout.split()
    if int(code) not in (0, 1):
        print(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {code}")
    return float(wall), float(cpu), int(rss), int(code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=3_000_000)
    ap.add_argument("--packages", type=int, default=300_000)
    ap.add_argument("--only", choices=("freeze", "manifest"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cases = []
        if args.only in (None, "freeze"):
            cases.append(("freeze", args.lines, write_freeze, ".txt"))
        if args.only in (None, "manifest"):
            cases.append(("manifest", args.packages, write_manifest, ".toml"))
        for name, n, write, ext in cases:
            a, b = d / f"a{ext}", d / f"b{ext}"
            size = write(a, n, 0) + write(b, n, 1)
            wall, cpu, rss, code = run_diff(a, b)
            print(f"{name:9s} {n:>9,} entries  input {size / 2**20:7.1f} MiB  wall {wall:7.1f} s  "
                  f"cpu {cpu:7.1f} s  peak RSS {rss / 2**20:8.1f} MiB ({rss / size:5.1f} x input)  "
                  f"exit {code}")
            os.unlink(a)
            os.unlink(b)


if __name__ == "__main__":
    main()
