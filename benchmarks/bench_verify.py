"""Benchmark ``envlock verify`` against ``pip freeze`` and ``import torch`` on a real torch venv.

Usage: ``python benchmarks/bench_verify.py [--python VENV/bin/python] [--runs 7]``

Times whole commands (interpreter start included; each run a new process), median of
``--runs`` rounds after one warm-up round; the commands run interleaved, one of each per round,
so that a change in the machine's load hits all of them alike: ``envlock verify --manifest <fresh
snapshot>`` of the venv, ``pip freeze`` and ``python -c "import torch"`` in it.  Targets (issue 7): verify ≤ 0.5 ×
``pip freeze`` and ≤ 0.1 × ``import torch``.  Prints the medians and both ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import statistics
import time
from collections.abc import Sequence

from _timing import default_venv, envlock_argv, report


def time_interleaved(commands: Sequence[tuple[str, Sequence[str]]], runs: int,
                     env: dict[str, str]) -> list[tuple[str, float | None]]:
    """Median wall time (seconds) of each command over ``runs`` rounds, after one warm-up round;
    ``None`` for a command that failed."""
    times: dict[str, list[float]] = {name: [] for name, _ in commands}
    failed: set[str] = set()
    for round_ in range(runs + 1):
        for name, argv in commands:
            if name in failed:
                continue
            t0 = time.perf_counter()
            proc = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                  timeout=600, check=False)
            dt = time.perf_counter() - t0
            if proc.returncode != 0:
                tail = proc.stderr.decode(errors="replace")[-300:]
                sys.stderr.write(f"  ! {name} exited {proc.returncode}: {tail}\n")
                failed.add(name)
            elif round_ > 0:
                times[name].append(dt)
    return [(name, None if name in failed else statistics.median(times[name])) for name, _ in commands]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=str(default_venv("cuda") / "bin" / "python"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if args.runs < 5:
        ap.error("--runs must be at least 5")
    py = args.python
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # An installed package has its bytecode compiled (pip does it at install time; pip and torch
    # in the venv have theirs).  A development checkout under PYTHONDONTWRITEBYTECODE=1 would
    # recompile envlock's sources on every run, so compile them once, as pip would.
    import compileall

    import envlock

    compileall.compile_dir(os.path.dirname(envlock.__file__), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = str(Path(tmp) / "m.toml")
        subprocess.run([*envlock_argv(), "snapshot", "--python", py, "-o", manifest, "-q"],
                       check=True, env=env, timeout=300)
        verify = [*envlock_argv(), "verify", "--python", py, "--manifest", manifest, "-q"]
        rows = time_interleaved([
            ("envlock verify", verify),
            ("pip freeze", [py, "-m", "pip", "freeze"]),
            ("import torch", [py, "-c", "import torch"]),
        ], args.runs, env)
    print(f"target: {py}  (median of {args.runs} interleaved rounds)")
    report(rows, "pip freeze")
    t = dict(rows)
    ok = True
    if t["envlock verify"] and t["pip freeze"] and t["import torch"]:
        r_pip = t["envlock verify"] / t["pip freeze"]
        r_torch = t["envlock verify"] / t["import torch"]
        ok = r_pip <= 0.5 and r_torch <= 0.1
        print(f"verify / pip freeze   = {r_pip:.3f}  (target ≤ 0.5)")
        print(f"verify / import torch = {r_torch:.3f}  (target ≤ 0.1)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
