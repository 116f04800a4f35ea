"""Benchmark: ``probe_stack`` on a real venv against ``pip freeze`` (not a test; run by hand).

    python benchmarks/bench_stack.py [VENV]   # default: this interpreter's real CUDA test venv

Prints the median of N runs of each, in seconds.  Target (issue 3): probe_stack well under
0.5 s on the CUDA venv, and the whole snapshot ≤ 0.5 × ``pip freeze``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envlock.probes.stack import probe_stack
from envlock.probes.world import World


def main(venv: str, runs: int = 7) -> None:
    v = Path(venv).expanduser()
    (site,) = sorted((v / "lib").glob("python3*/site-packages"))
    env = dict(os.environ)
    env["PATH"] = f"{v}/bin:{env.get('PATH', '')}"
    stack = []
    for _ in range(runs):
        t0 = time.perf_counter()
        probe_stack(World(environ=env, prefix=str(v), site_dirs=(str(site),),
                          path_dirs=tuple(env["PATH"].split(":"))))
        stack.append(time.perf_counter() - t0)
    freeze = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(
            [str(v / "bin/python"), "-m", "pip", "freeze"],
            capture_output=True,
            check=True,
            timeout=300,
        )
        freeze.append(time.perf_counter() - t0)
    print(
        f"probe_stack: median {statistics.median(stack):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in stack)})"
    )
    print(f"pip freeze:  median {statistics.median(freeze):.3f} s")


if __name__ == "__main__":
    from _timing import default_venv

    main(sys.argv[1] if len(sys.argv) > 1 else str(default_venv("cuda")))
