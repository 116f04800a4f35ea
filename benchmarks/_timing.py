"""Shared helpers for the benchmarks: time whole commands, median of N runs."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def time_command(argv: Sequence[str], runs: int = 7, warmup: int = 1, env: dict | None = None,
                 timeout: float = 600) -> float | None:
    """Median wall time in seconds of ``argv`` over ``runs`` runs (after ``warmup`` runs);
    ``None`` when the command fails."""
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        proc = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, timeout=timeout, check=False)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.stderr.write(f"  ! {' '.join(argv[:4])}… exited {proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace').strip()[-300:]}\n")
            return None
        if i >= warmup:
            times.append(dt)
    return statistics.median(times)


def bench_env(**extra: str) -> dict[str, str]:
    """The environment for timed commands: this one without ``PYTHONDONTWRITEBYTECODE``, so
    that envlock runs from cached bytecode as an installed copy does (pip's own modules are
    compiled at install time; timing envlock's compilation on every run would be unfair)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def envlock_argv() -> list[str]:
    """The envlock console script installed beside this interpreter (else ``python -m envlock``)."""
    script = Path(sys.executable).parent / "envlock"
    return [str(script)] if script.exists() else [sys.executable, "-m", "envlock"]


def uv_binary() -> str | None:
    """The uv binary of the ``uv`` PyPI package if installed, else one on PATH."""
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return find_uv_bin()
    except Exception:  # optional tool
        return shutil.which("uv")


def default_venv(name: str) -> Path:
    """This interpreter's real test venv ``name`` (``tests/_realenv.py``: keyed by the interpreter)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    try:
        from _realenv import venv_dir  # the tests' helper, found by path
    finally:
        sys.path.pop(0)
    return venv_dir(name)


def report(rows: list[tuple[str, float | None]], base: str) -> None:
    """Print a table of median times and ratios relative to the row named ``base``."""
    ref = dict(rows).get(base)
    width = max(len(n) for n, _ in rows)
    for name, t in rows:
        if t is None:
            print(f"{name:<{width}}  failed")
            continue
        ratio = f"{t / ref:6.2f} x {base}" if ref else ""
        print(f"{name:<{width}}  {t * 1000:9.1f} ms  {ratio}")
