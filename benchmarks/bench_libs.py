"""Benchmark: ``envlock libs torch`` against ``ldd`` (and ``libtree``) on the CUDA torch venv.

Targets (issue 4): cold (no cache of parsed ELF facts) ≤ 10 × ldd's wall time; with the cache
≤ 4 × ldd.  ``ldd`` and ``libtree`` are given ``torch/_C*.so``; envlock answers more (the
import sequence, run-time dlopens, owners, findings) for ``torch``.

Run: ``.venv/bin/python benchmarks/bench_libs.py [--runs N] [--venv DIR]``.  The envlock
runs use their own cache directory (``XDG_CACHE_HOME`` in a temporary directory) and compiled
bytecode (``PYTHONDONTWRITEBYTECODE`` removed), as an installed envlock has.
"""

from __future__ import annotations

import argparse
import compileall
import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import default_venv, envlock_argv, report, time_command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (median)")
    parser.add_argument("--venv", type=Path, default=default_venv("cuda"), help="the torch venv")
    args = parser.parse_args()
    python = args.venv / "bin" / "python"
    found = glob.glob(str(args.venv / "lib" / "python3*" / "site-packages" / "torch" / "_C*.so"))
    if not python.exists() or not found:
        print(f"no torch venv at {args.venv}", file=sys.stderr)
        return 2
    torch_c = found[0]
    package = Path(__file__).resolve().parent.parent / "envlock"
    compileall.compile_dir(str(package), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("LD_")}
    with tempfile.TemporaryDirectory() as cache:
        env["XDG_CACHE_HOME"] = cache
        envlock = [*envlock_argv(), "libs", "torch", "--python", str(python)]
        rows = [("ldd", time_command(["ldd", torch_c], runs=args.runs, env=env))]
        if shutil.which("libtree"):
            rows.append(("libtree", time_command(["libtree", torch_c], runs=args.runs, env=env)))
        rows.append(("envlock libs torch (cold)",
                     time_command([*envlock, "--no-cache"], runs=args.runs, env=env)))
        rows.append(("envlock libs torch (cached)",
                     time_command(envlock, runs=args.runs, warmup=2, env=env)))
        rows.append(("envlock --help", time_command([*envlock_argv(), "--help"], runs=args.runs, env=env)))
    print(f"torch/_C: {torch_c}; median of {args.runs} runs")
    report(rows, "ldd")
    ref = dict(rows)["ldd"]
    cold, cached = dict(rows)["envlock libs torch (cold)"], dict(rows)["envlock libs torch (cached)"]
    if ref and cold and cached:
        print(f"targets: cold {cold / ref:.1f} x ldd (target <= 10), cached {cached / ref:.1f} x ldd "
              "(target <= 4)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
