"""GPU memory per process, sampled through ``nvidia-smi --query-compute-apps`` (a stand-in
script answering in nvidia-smi's CSV format, since this machine has no GPU): the run's own
process and a leftover child holding GPU memory are both reported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

from envlock.manifest.processtables import run_from_dict


def test_gpu_memory_of_the_run_and_of_leftovers(tmp_path: Path) -> None:
    pids = tmp_path / "gpu-pids"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    calls = tmp_path / "calls"
    smi.write_text("#!/bin/sh\n"  # pid, used_memory [MiB], gpu_uuid — as nvidia-smi prints them
                   f"n=2048; while read p; do echo \"$p, $n, GPU-4f3c\"; n=1024; done < {pids}\n"
                   f"echo x >> {calls}\n")
    smi.chmod(0o755)
    driver = tmp_path / "version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15\n")
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        open({str(pids)!r}, "w").write(f"{{os.getpid()}}\\n")
        c = subprocess.Popen([sys.executable, "-c",
            "import os, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\\\n'); time.sleep(60)"])
        def n():
            try:
                return len(open({str(calls)!r}).read().split())
            except OSError:
                return 0
        while len(open({str(pids)!r}).read().split()) < 2:
            time.sleep(0.02)
        seen = n()
        while n() <= seen:   # one GPU sample after both pids were listed
            time.sleep(0.05)
    """))
    driver_code = textwrap.dedent(f"""
        import os, sys
        from envlock.runs.supervise import supervise
        env = dict(os.environ, PATH={str(bindir)!r} + ":" + os.environ["PATH"])
        r = supervise([sys.executable, {str(job)!r}], record_path={str(tmp_path / "run.toml")!r},
                      environ=env, driver_file={str(driver)!r}, grace=1.0)
        sys.exit(r.exit_code)
    """)
    r = subprocess.run([sys.executable, "-c", driver_code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    rec = run_from_dict(tomllib.loads((tmp_path / "run.toml").read_text())["run"])
    res = rec.resources
    assert res is not None and res.gpu_status == "ok"
    main_pid = rec.pid
    used = {g.pid: g.memory for g in res.gpu_memory}
    assert used[main_pid] == 2048 * 2**20
    [left] = rec.children
    assert left.gpu_memory == 1024 * 2**20 and left.action == "killed"
    [f] = [f for f in rec.findings if f.id == "run.leftover-children"]
    assert "[1 GiB GPU]" in f.title
