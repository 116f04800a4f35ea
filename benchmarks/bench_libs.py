"""Benchmark: ``envlock libs torch`` against ``ldd`` / ``ldd -r`` on the CUDA torch venv.

Targets (issue 11), whole commands with no cache at all (``--no-cache``): ``libs torch
--no-symbols`` ≤ 8 × ``ldd``; ``libs torch`` (the symbol check is on by default) ≤ 5 ×
``ldd -r``.  ``ldd`` and ``ldd -r`` are given ``torch/_C*.so``; envlock answers more (the
import sequence with torch's preloading, run-time dlopens, owners, findings) for ``torch``.

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
        rows = [("ldd", time_command(["ldd", torch_c], runs=args.runs, env=env)),
                ("ldd -r", time_command(["ldd", "-r", torch_c], runs=args.runs, env=env))]
        if shutil.which("libtree"):
            rows.append(("libtree", time_command(["libtree", torch_c], runs=args.runs, env=env)))
        rows.append(("envlock libs torch --no-symbols (cold)",
                     time_command([*envlock, "--no-cache", "--no-symbols"], runs=args.runs, env=env)))
        rows.append(("envlock libs torch (cold, symbols)",
                     time_command([*envlock, "--no-cache"], runs=args.runs, env=env)))
        rows.append(("envlock libs torch (cached answer)",
                     time_command(envlock, runs=args.runs, warmup=2, env=env)))
        rows.append(("envlock --help", time_command([*envlock_argv(), "--help"], runs=args.runs, env=env)))
    print(f"torch/_C: {torch_c}; median of {args.runs} runs")
    report(rows, "ldd")
    got = dict(rows)
    ldd, lddr = got["ldd"], got["ldd -r"]
    cold = got["envlock libs torch --no-symbols (cold)"]
    sym = got["envlock libs torch (cold, symbols)"]
    if ldd and lddr and cold and sym:
        print(f"targets: cold --no-symbols {cold / ldd:.1f} x ldd (target <= 8), "
              f"cold with symbols {sym / lddr:.1f} x ldd -r (target <= 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
