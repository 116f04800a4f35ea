"""Benchmark: ``envlock diff`` of two manifests of 1,000 packages each.

Target (issue 5): at most 100 ms beyond interpreter start.  Measured three ways:

* ``library``: :func:`envlock.diff.diff` plus JSON rendering, in-process (best of N);
* ``cli``: ``python -m envlock diff A B --format json``, median wall and CPU (user + sys) time
  of N runs, minus those of ``python -c pass`` (interpreter start); CPU time is the steadier
  figure on a busy machine.  ``envlock --help`` (click and the CLI group) is shown for scale;
* ``cli-text``: the same with the rich text output.

The manifests are a realistic conda env grown to 1,000 packages (half conda with build strings,
half pip), differing in ~5 % of the packages, some env vars and the CPU.

Run: ``python benchmarks/bench_diff.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envlock.manifest import _toml


def manifest(n: int, variant: int) -> dict[str, Any]:
    """A manifest dict with ``n`` packages; ``variant`` 1 changes about 5 % of them."""
    conda = []
    pip = []
    for i in range(n):
        bump = variant and i % 20 == 0
        version = f"{1 + i % 7}.{i % 13}.{(i % 5) + (1 if bump else 0)}"
        if i % 2 == 0:
            build = f"py311h{i:07x}_{1 if bump else 0}"
            conda.append({"name": f"pkg-{i:04d}", "version": version, "build": build,
                          "build-number": 0, "channel": "conda-forge", "subdir": "linux-64",
                          "url": f"https://conda.anaconda.org/conda-forge/linux-64/pkg-{i:04d}"
                                 f"-{version}-{build}.conda"})
        else:
            pip.append({"name": f"pkg-{i:04d}", "version": version,
                        "location": "/opt/env/lib/python3.11/site-packages", "installer": "pip"})
    conda += [{"name": "numpy", "version": "1.26.4" if variant else "1.24.4",
               "build": "py311h64a7726_0", "channel": "conda-forge"},
              {"name": "libblas", "version": "3.9.0",
               "build": "21_linux64_mkl" if variant else "21_linux64_openblas",
               "channel": "conda-forge"}]
    return {
        "envlock": {"schema": 1, "version": "0.1.0", "created": "2026-11-29T23:58:00Z",
                    "host": f"node{variant}"},
        "target": {"kind": "conda", "prefix": "/opt/env", "chosen-by": "--prefix"},
        "python": {"status": "ok", "version": "3.11.8", "implementation": "cpython"},
        "cpu": {"status": "ok", "vendor": "GenuineIntel", "model": "Xeon" if variant else "EPYC",
                "usable-cores": 8 if variant else 64,
                "flags": ["avx", "avx2", "fma"] + (["avx512f"] if variant else [])},
        "env": {"status": "ok", "vars": {"OMP_NUM_THREADS": "1" if variant else "8",
                                         "CONDA_PREFIX": "/opt/env"}},
        "conda": {"status": "ok", "packages": conda},
        "pip": {"status": "ok", "packages": pip},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--packages", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.toml", Path(tmp) / "b.toml"
        a.write_text(_toml.dumps(manifest(args.packages, 0)))
        b.write_text(_toml.dumps(manifest(args.packages, 1)))

        from envlock.diff import diff
        from envlock.render import diffreport as render

        best = float("inf")
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = diff([a, b])
            render.render_json(result)
            best = min(best, time.perf_counter() - t0)
        print(f"library   diff+json of 2 x {args.packages + 2} packages: "
              f"best {best * 1000:.1f} ms ({len(result.changes)} differences)")

        # as installed by pip: byte-code compiled (a first run writes __pycache__)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

        def wall(argv: list[str]) -> tuple[float, float]:
            """Median wall time and median CPU time (user + sys) of ``argv``, in seconds."""
            subprocess.run(argv, check=False, capture_output=True, timeout=60, env=env)
            walls, cpus = [], []
            for _ in range(args.runs):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(argv, check=False, capture_output=True, timeout=60, env=env)
                walls.append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            return statistics.median(walls), statistics.median(cpus)

        base, base_cpu = wall([sys.executable, "-c", "pass"])
        helpw, help_cpu = wall([sys.executable, "-m", "envlock", "--help"])
        print(f"start     interpreter {base * 1000:.1f} ms wall / {base_cpu * 1000:.1f} ms cpu; "
              f"envlock --help {helpw * 1000:.1f} / {help_cpu * 1000:.1f} ms")
        for label, fmt in (("cli", "json"), ("cli-text", "text")):
            t, cpu = wall([sys.executable, "-m", "envlock", "diff", str(a), str(b), "--format",
                           fmt])
            print(f"{label:9s} median {t * 1000:.1f} ms wall / {cpu * 1000:.1f} ms cpu; beyond "
                  f"interpreter start {(t - base) * 1000:.1f} ms wall / "
                  f"{(cpu - base_cpu) * 1000:.1f} ms cpu")


if __name__ == "__main__":
    main()
