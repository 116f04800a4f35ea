"""Benchmark ``envlock verify`` against ``pip freeze`` and ``import torch`` on a real torch venv.

Usage: ``python benchmarks/bench_verify.py [--python VENV/bin/python] [--runs 7]``

Times whole commands (interpreter start included; each run a new process), median of
``--runs`` runs after one warm-up: ``envlock verify --manifest <fresh snapshot>`` of the venv,
``pip freeze`` and ``python -c "import torch"`` in it.  Targets (issue 7): verify ≤ 0.5 ×
``pip freeze`` and ≤ 0.1 × ``import torch``.  Prints the medians and both ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import default_venv, envlock_argv, report, time_command


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=str(default_venv("cuda") / "bin" / "python"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if args.runs < 5:  # noqa: PLR2004
        ap.error("--runs must be at least 5")
    py = args.python
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # An installed package has its bytecode compiled (pip does it at install time; pip and torch
    # in the venv have theirs).  A development checkout under PYTHONDONTWRITEBYTECODE=1 would
    # recompile envlock's sources on every run, so compile them once, as pip would.
    import compileall

    import envlock

    compileall.compile_dir(os.path.dirname(envlock.__file__), quiet=1)
    rows: list[tuple[str, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        manifest = str(Path(tmp) / "m.toml")
        subprocess.run([*envlock_argv(), "snapshot", "--python", py, "-o", manifest, "-q"],
                       check=True, env=env, timeout=300)
        verify = [*envlock_argv(), "verify", "--python", py, "--manifest", manifest, "-q"]
        rows.append(("envlock verify", time_command(verify, args.runs, env=env)))
        rows.append(("pip freeze", time_command([py, "-m", "pip", "freeze"], args.runs, env=env)))
        rows.append(("import torch", time_command([py, "-c", "import torch"], args.runs, env=env)))
    print(f"target: {py}  (median of {args.runs} runs each)")
    report(rows, "pip freeze")
    t = dict(rows)
    ok = True
    if t["envlock verify"] and t["pip freeze"] and t["import torch"]:
        r_pip = t["envlock verify"] / t["pip freeze"]
        r_torch = t["envlock verify"] / t["import torch"]
        ok = r_pip <= 0.5 and r_torch <= 0.1  # noqa: PLR2004
        print(f"verify / pip freeze   = {r_pip:.3f}  (target ≤ 0.5)")
        print(f"verify / import torch = {r_torch:.3f}  (target ≤ 0.1)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
