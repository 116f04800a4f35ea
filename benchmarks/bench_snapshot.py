"""Benchmark ``envlock snapshot`` against the tools users know, on a real torch venv.

Usage: ``python benchmarks/bench_snapshot.py [--python VENV/bin/python] [--runs 7]``

Times whole commands (interpreter start included), median of ``--runs`` runs after one warm-up:
``envlock snapshot``, ``pip freeze``, ``pip list --format=json``, ``uv pip freeze`` (when uv is
installed) and ``python -m torch.utils.collect_env`` (when torch is installed), and
``envlock --help``.  Targets (issue 2/3): snapshot ≤ 0.5 × ``pip freeze``; ``--help`` < 100 ms.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _timing import bench_env, default_venv, envlock_argv, report, time_command, uv_binary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=str(default_venv("cuda") / "bin" / "python"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--collect-env-runs", type=int, default=3)
    args = ap.parse_args()
    py = args.python
    env = bench_env(PIP_DISABLE_PIP_VERSION_CHECK="1")
    rows: list[tuple[str, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "m.toml")
        rows.append(("envlock snapshot", time_command(
            [*envlock_argv(), "snapshot", "--python", py, "-o", out, "--force", "-q"], args.runs, env=env)))
        rows.append(("pip freeze", time_command([py, "-m", "pip", "freeze"], args.runs, env=env)))
        rows.append(("pip list --format=json",
                     time_command([py, "-m", "pip", "list", "--format=json"], args.runs, env=env)))
        uv = uv_binary()
        if uv:
            rows.append(("uv pip freeze", time_command([uv, "pip", "freeze", "--python", py], args.runs, env=env)))
        if (Path(py).parent.parent / "lib").glob("python3*/site-packages/torch"):
            rows.append(("torch collect_env", time_command(
                [py, "-m", "torch.utils.collect_env"], args.collect_env_runs, env=env)))
        rows.append(("envlock --help", time_command([*envlock_argv(), "--help"], args.runs, env=env)))
    print(f"target: {py}")
    report(rows, "pip freeze")


if __name__ == "__main__":
    main()
