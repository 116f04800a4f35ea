"""Issue 26's table in one paired run: every row a ratio against its yardstick, interleaved.

Each round runs, for every row, the envlock command and its yardstick back to back (the order
alternates by round), so load from other processes falls on both; a row's figure is the median
of the per-round ratios (with their range).  "cold" runs get an empty ``XDG_CACHE_HOME`` (every
envlock cache empty) for each run; "warm" runs share one, filled before the rounds.  The floor,
``python -c pass`` and ``python -c "import click"``, is printed beside the table, and the load
average before and after.

Rows (issue 26 goals): ``snapshot`` cold/warm and ``verify --manifest`` cold/warm vs ``pip
freeze`` of the same venv; ``libs torch --no-symbols`` cold/warm vs ``ldd torch/_C*.so``;
``libs torch`` (symbols) cold vs ``ldd -r``; ``diff`` of two 1k- and 10k-package manifests in
ms (paired with ``python -c pass``); ``envlock --help`` vs ``python -c pass``.  ``bisect`` builds
environments and is not timed here (``tests/reproduce`` counts the environments it builds).

Run: ``python benchmarks/bench_table.py [--rounds 11] [--venv DIR]``.
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import bench_env, default_venv, envlock_argv


_Env = Callable[[], dict[str, str]]


def _run(argv: list[str], env: dict[str, str], cwd: str) -> float | None:
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=600,
                       check=False, cwd=cwd)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        sys.stderr.write(f"  ! {' '.join(argv[:4])}… exited {p.returncode}: "
                         f"{p.stderr.decode(errors='replace').strip()[-300:]}\n")
        return None
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--venv", type=Path, default=None, help="the torch venv (default: the CUDA test venv)")
    ap.add_argument("--rows", default="", help="only the rows whose name holds one of these "
                    "comma-separated words (e.g. 'diff,--help': those need no torch venv)")
    args = ap.parse_args()
    words = [w for w in args.rows.split(",") if w]
    light = bool(words) and all(w in ("diff", "--help") for w in words)
    venv = args.venv or (Path(sys.prefix) if light else default_venv("cuda"))
    py = str(venv / "bin" / "python")
    torch_c = "" if light else str(next((venv / "lib").glob("python3*/site-packages/torch/_C*.so")))
    work = Path(tempfile.mkdtemp(prefix="envlock-bench26-"))
    cwd = str(work)
    envlock = envlock_argv()
    warm_env = bench_env(XDG_CACHE_HOME=str(work / "warm"))
    warm_env.pop("ENVLOCK_NO_CACHE", None)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}

    def cold_env() -> dict[str, str]:
        d = work / "cold"
        shutil.rmtree(d, ignore_errors=True)
        return {**warm_env, "XDG_CACHE_HOME": str(d)}

    from bench_diff import manifest

    from envlock.manifest import _toml

    for n in (1000, 10000):
        for v in (0, 1):
            (work / f"d{n}-{v}.toml").write_text(_toml.dumps(manifest(n, v), "toml"))
    m = str(work / "m.toml")
    for argv in [] if light else [[*envlock, "snapshot", "--python", py, "-o", m, "--force"]]:
        subprocess.run(argv, env=warm_env, check=True, capture_output=True, timeout=600, cwd=cwd)
    for argv in [] if light else [[*envlock, "verify", "--python", py, "--manifest", m],
                 [*envlock, "libs", "--no-symbols", "--python", py, "torch"],
                 [*envlock, "libs", "--python", py, "torch"]]:
        subprocess.run(argv, env=warm_env, check=False, capture_output=True, timeout=600, cwd=cwd)

    snap = [*envlock, "snapshot", "--python", py, "-o", str(work / "s.toml"), "--force"]
    verify = [*envlock, "verify", "--python", py, "--manifest", m]
    libs = [*envlock, "libs", "--python", py, "torch"]
    freeze = [py, "-m", "pip", "freeze"]
    floor = [sys.executable, "-c", "pass"]
    def warm() -> dict[str, str]:
        return warm_env

    def base() -> dict[str, str]:
        return plain

    # (row, goal, envlock argv, its env, yardstick argv, unit)
    rows: list[tuple[str, str, list[str], _Env, list[str], str]] = [
        ("snapshot cold / pip freeze", "<= 0.8", snap, cold_env, freeze, "x"),
        ("snapshot warm / pip freeze", "<= 0.35", snap, warm, freeze, "x"),
        ("verify --manifest cold / pip freeze", "<= 0.6", verify, cold_env, freeze, "x"),
        ("verify --manifest warm / pip freeze", "<= 0.3", verify, warm, freeze, "x"),
        ("libs torch --no-symbols cold / ldd", "<= 8", [*libs, "--no-symbols"], cold_env, ["ldd", torch_c], "x"),
        ("libs torch --no-symbols warm / ldd", "<= 4", [*libs, "--no-symbols"], warm, ["ldd", torch_c], "x"),
        ("libs torch (symbols) cold / ldd -r", "<= 3", libs, cold_env, ["ldd", "-r", torch_c], "x"),
        ("diff 1k-package manifests", "<= 60 ms",
         [*envlock, "diff", str(work / "d1000-0.toml"), str(work / "d1000-1.toml")], warm, floor, "ms"),
        ("diff 10k-package manifests", "<= 150 ms",
         [*envlock, "diff", str(work / "d10000-0.toml"), str(work / "d10000-1.toml")], warm, floor, "ms"),
        ("envlock --help / python -c pass", "<= 3", [*envlock, "--help"], warm, floor, "x"),
    ]
    if words:
        rows = [r for r in rows if any(w in r[0] for w in words)]
    floors = {"python -c pass": floor, 'python -c "import click"': [sys.executable, "-c", "import click"]}
    load0 = os.getloadavg()
    ratios: dict[str, list[float]] = {r[0]: [] for r in rows}
    abs_ms: dict[str, list[float]] = {r[0]: [] for r in rows}
    yard_ms: dict[str, list[float]] = {r[0]: [] for r in rows}
    floor_ms: dict[str, list[float]] = {k: [] for k in floors}
    for r in range(args.rounds):
        for name, _goal, cmd, env, yard, _unit in rows:
            pair = [("e", cmd, env), ("y", yard, base)]
            if r % 2:
                pair.reverse()
            got = {k: _run(argv, e(), cwd) for k, argv, e in pair}
            if got["e"] is None or got["y"] is None:
                continue
            ratios[name].append(got["e"] / got["y"])
            abs_ms[name].append(got["e"] * 1e3)
            yard_ms[name].append(got["y"] * 1e3)
        for k, argv in floors.items():
            t = _run(argv, plain, cwd)
            if t is not None:
                floor_ms[k].append(t * 1e3)
    load1 = os.getloadavg()
    print(f"{args.rounds} rounds, paired and interleaved; venv {venv}; {os.cpu_count()} CPUs; "
          f"load average {load0[0]:.1f} before, {load1[0]:.1f} after")
    print(f"{'measure':40s} {'now (median, range)':>38s} {'goal':>10s}  {'envlock ms':>10s} {'yardstick ms':>12s}")
    for name, goal, _cmd, _env, _yard, unit in rows:
        if not ratios[name]:
            print(f"{name:40s} {'failed':>38s} {goal:>10s}")
            continue
        if unit == "ms":
            vals = abs_ms[name]
            fig = (f"{statistics.median(vals):.0f} ms ({min(vals):.0f}-{max(vals):.0f}) "
                   f"= {statistics.median(ratios[name]):.1f} x floor")
        else:
            vals = ratios[name]
            fig = f"{statistics.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"
        print(f"{name:40s} {fig:>38s} {goal:>10s}  {statistics.median(abs_ms[name]):10.1f} "
              f"{statistics.median(yard_ms[name]):12.1f}")
    for k, vals in floor_ms.items():
        print(f"floor: {k:33s} {statistics.median(vals):8.1f} ms")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
