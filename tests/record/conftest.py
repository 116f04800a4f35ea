"""Helpers for the run-record tests: a real job script, run under ``envlock run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: a job: allocates memory in steps (touching every page), prints, spawns a child that
#: outlives it, reports its own peak RSS (VmHWM, the kernel's figure) and exits with status 3.
JOB = r'''
import os, subprocess, sys, time
blocks = []
for i in range(4):
    b = bytearray(30 * 2**20)
    for j in range(0, len(b), 4096):
        b[j] = 1
    blocks.append(b)
    print("step", i, flush=True)
    time.sleep(0.1)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print("child", child.pid, flush=True)
print("hwm", hwm, flush=True)
sys.exit(3)
'''


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    p = tmp_path / "job.py"
    p.write_text(JOB)
    return p


def envlock_run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m envlock run ARGS`` in ``cwd``, output captured."""
    return subprocess.run([sys.executable, "-m", "envlock", "run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else dict(os.environ))


def gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (absent, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:
        return True
