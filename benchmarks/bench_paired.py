"""Paired benchmark of two envlock source trees on the same machine, in one run.

Each round runs every command once for tree A and once for tree B (the order alternates by
round), so load from other processes falls on both; the figures are medians over the rounds and
the ratio B/A.  Used for "no slower than before" checks::

    python benchmarks/bench_paired.py --a /path/to/old/checkout --b . --rounds 15

Both trees run under this interpreter with ``PYTHONPATH`` set to the tree (its dependencies
must be installed here).  Commands: ``envlock --help``, a warm ``snapshot`` and a warm
``verify --manifest`` of the CUDA test venv, cold versions with ``XDG_CACHE_HOME`` emptied, and
``pip freeze`` / ``ldd`` / ``ldd -r`` as the yardsticks the targets are stated in (issue 11: cold
``libs --no-symbols`` ≤ 8 × ``ldd``, cold ``libs`` ≤ 5 × ``ldd -r``, cold ``snapshot`` ≤ 0.8 ×
``pip freeze``; the ratios are printed last).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import default_venv


def _run(argv: list[str], env: dict[str, str], cwd: str | None = None) -> float | None:
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                       timeout=600, check=False, cwd=cwd)
    dt = time.perf_counter() - t0
    return dt if p.returncode in (0, 1) else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the old tree")
    ap.add_argument("--b", default=".", help="the new tree")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    venv = default_venv("cuda")
    py = str(venv / "bin" / "python")
    work = Path(tempfile.mkdtemp(prefix="envlock-bench-"))
    trees = {"A": str(Path(args.a).resolve()), "B": str(Path(args.b).resolve())}
    caches = {k: work / f"cache-{k}" for k in trees}
    manifests = {k: work / f"m-{k}.toml" for k in trees}

    def env(k: str, cold: bool = False) -> dict[str, str]:
        e = {x: v for x, v in os.environ.items() if x not in ("PYTHONDONTWRITEBYTECODE",
                                                               "ENVLOCK_NO_CACHE")}
        e["PYTHONPATH"] = trees[k]
        e["XDG_CACHE_HOME"] = str(work / f"cold-{k}") if cold else str(caches[k])
        return e

    base = [sys.executable, "-m", "envlock"]
    # ``python -m`` puts the working directory first on sys.path, before PYTHONPATH: run from
    # a checkout, both trees would import that checkout's envlock.  Commands run in ``work``.
    cwd = str(work)
    for k in trees:  # warm the caches, write the manifests verify reads
        subprocess.run([*base, "snapshot", "--python", py, "-o", str(manifests[k]), "--force"],
                       env=env(k), check=True, capture_output=True, timeout=600, cwd=cwd)
        subprocess.run([*base, "libs", "--no-symbols", "--python", py, "torch"], env=env(k),
                       check=False, capture_output=True, timeout=600, cwd=cwd)
    cmds = {
        "envlock --help": lambda k: [*base, "--help"],
        "snapshot (warm)": lambda k: [*base, "snapshot", "--python", py, "-o", str(work / f"s-{k}.toml"), "--force"],
        "verify --manifest (warm)": lambda k: [*base, "verify", "--python", py, "--manifest", str(manifests[k])],
        "snapshot (cold)": lambda k: [*base, "snapshot", "--python", py, "-o", str(work / f"c-{k}.toml"), "--force"],
        "libs torch (cold)": lambda k: [*base, "libs", "--python", py, "torch"],
        "libs --no-symbols (cold)": lambda k: [*base, "libs", "--no-symbols", "--python", py, "torch"],
        "libs --no-symbols (warm)": lambda k: [*base, "libs", "--no-symbols", "--python", py, "torch"],
    }
    cold = {"snapshot (cold)", "libs torch (cold)", "libs --no-symbols (cold)"}
    times: dict[tuple[str, str], list[float]] = {}
    yard: dict[str, list[float]] = {"pip freeze": [], "ldd torch/_C": [], "ldd -r torch/_C": []}
    torch_c = next((venv / "lib").glob("python3*/site-packages/torch/_C*.so"))
    for r in range(args.rounds):
        order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
        for name, make in cmds.items():
            for k in order:
                if name in cold:
                    shutil.rmtree(work / f"cold-{k}", ignore_errors=True)
                dt = _run(make(k), env(k, cold=name in cold), cwd)
                if dt is not None:
                    times.setdefault((name, k), []).append(dt)
        yard["pip freeze"].append(_run([py, "-m", "pip", "freeze"], dict(os.environ)) or 0)
        yard["ldd torch/_C"].append(_run(["ldd", str(torch_c)], dict(os.environ)) or 0)
        yard["ldd -r torch/_C"].append(_run(["ldd", "-r", str(torch_c)], dict(os.environ)) or 0)
    print(f"{args.rounds} rounds; A = {trees['A']}, B = {trees['B']}")
    for name in cmds:
        a = statistics.median(times.get((name, "A"), [float("nan")]))
        b = statistics.median(times.get((name, "B"), [float("nan")]))
        print(f"{name:28s} A {a * 1e3:7.1f} ms   B {b * 1e3:7.1f} ms   B/A {b / a:5.2f}")
    for name, ts in yard.items():
        print(f"{name:28s} {statistics.median(ts) * 1e3:7.1f} ms")
    med = {n: statistics.median(ts) for n, ts in yard.items()}
    for name, unit, limit in (("libs --no-symbols (cold)", "ldd torch/_C", 8),
                              ("libs torch (cold)", "ldd -r torch/_C", 5),
                              ("snapshot (cold)", "pip freeze", 0.8)):
        for k in trees:
            t = statistics.median(times.get((name, k), [float("nan")]))
            print(f"{name:28s} {k}: {t / med[unit]:5.2f} x {unit} (target <= {limit})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
