"""The in-process observer on this test process: nothing perturbed, libraries as mapped."""

from __future__ import annotations

import ctypes.util
import os
import random
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import envlock
from envlock.manifest.processtables import process_from_dict
from envlock.runs.processprobe import mapped_libraries, native_threadpools, observe

MAPS = """\
7f1c2a000000-7f1c2a021000 r--p 00000000 08:01 123  /venv/lib/python3.11/site-packages/numpy.libs/libopenblas64_p-r0-15028c96.3.21.so
7f1c2a021000-7f1c2a400000 r-xp 00021000 08:01 123  /venv/lib/python3.11/site-packages/numpy.libs/libopenblas64_p-r0-15028c96.3.21.so
7f1c2b000000-7f1c2b001000 r--p 00000000 08:01 124  /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7f1c2c000000-7f1c2c001000 rw-p 00000000 00:00 0    [heap]
7f1c2d000000-7f1c2d001000 r--p 00000000 08:01 125  /tmp/x/libold.so (deleted)
7f1c2e000000-7f1c2e001000 r--p 00000000 08:01 126  /usr/share/locale/locale-archive
7f1c2f000000-7f1c2f001000 r--p 00000000 08:01 127  /usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so
"""


def test_mapped_libraries_from_maps() -> None:
    assert mapped_libraries(MAPS) == [
        "/venv/lib/python3.11/site-packages/numpy.libs/libopenblas64_p-r0-15028c96.3.21.so",
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
        "/tmp/x/libold.so",
        "/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
    ]


def test_observe_does_not_perturb() -> None:
    random.seed(7)
    state = random.getstate()
    mods = set(sys.modules)
    info = observe(owners=False)
    assert random.getstate() == state
    assert not [m for m in set(sys.modules) - mods if m.split(".")[0] in ("torch", "numpy", "scipy")]
    assert info.pid == os.getpid() and info.threads and info.threads >= 1
    assert info.seeds and info.seeds.python
    mine = {p for p in mapped_libraries()}
    assert {lib.path for lib in info.libraries} <= mine
    assert info.torch is None or "torch" in mods


def test_native_pool_never_loads_a_library() -> None:
    """RTLD_NOLOAD: a BLAS/OpenMP library that is not mapped is not loaded by asking it."""
    name = ctypes.util.find_library("gomp")
    if name is None:
        return
    candidates = [os.path.join(d, name) for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                                                  "/usr/lib/aarch64-linux-gnu", "/usr/lib")]
    path = next((c for c in candidates if os.path.exists(c)), None)
    if path is None or any(os.path.basename(p).startswith("libgomp") for p in mapped_libraries()):
        return
    [pool] = native_threadpools([path])
    assert pool.internal_api == "openmp" and pool.num_threads is None
    assert not any(os.path.basename(p).startswith("libgomp") for p in mapped_libraries())


def test_record_writes_rank_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.delenv("RANK", raising=False)
    m = envlock.record("out/{rank}.toml", extra={"lr": 0.1, "tag": "a"}, snapshot=False)
    doc = tomllib.loads((tmp_path / "out" / "5.toml").read_text())
    proc = process_from_dict(doc["process"])
    assert proc.rank == 5 and dict(proc.extra) == {"lr": 0.1, "tag": "a"}
    assert m.extra["process"]["rank"] == 5
    assert callable(envlock.record)


def test_envlock_record_is_a_plain_function_whatever_was_imported() -> None:
    """The public face is a function (issue 27): the package of run records is ``envlock.runs``,
    so importing its submodules cannot put a module where ``envlock.record`` is."""
    import inspect
    import subprocess
    import sys

    code = ("import envlock, envlock.runs.job, envlock.runs.supervise, inspect; "
            "print(inspect.isfunction(envlock.record), envlock.record.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "envlock.runs"], out.stderr
    assert inspect.isfunction(envlock.record)


PROGRAM = r'''
import json, sys
{pre}
import envlock
m = envlock.record(sys.argv[1], snapshot=False)
import tomllib
doc = tomllib.load(open(sys.argv[1], "rb"))
print(json.dumps({{"modules": doc["process"].get("modules", []),
                  "sources": sorted({{p.get("source") for p in doc["process"].get("threadpools", [])}}),
                  "left": sorted(n for n in sys.modules if n.startswith("threadpoolctl"))}}))
'''


def test_record_does_not_list_threadpoolctl_it_imported_itself(tmp_path: Path) -> None:
    """Issue 25: envlock imports threadpoolctl to read the pools; that is not the program's import.
    threadpoolctl is installed by pip (local wheels) into a directory on PYTHONPATH."""
    import json
    import subprocess

    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(site), "threadpoolctl"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        import pytest

        pytest.skip(f"threadpoolctl not installable here: {r.stderr.strip()[-200:]}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path[1:]]))

    def run(pre: str) -> dict:
        prog = tmp_path / "prog.py"
        prog.write_text(PROGRAM.format(pre=pre))
        out = subprocess.run([sys.executable, str(prog), str(tmp_path / "r.toml")], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    alone = run("")
    assert "threadpoolctl" not in alone["modules"]
    assert alone["sources"] in ([], ["threadpoolctl"])  # read through threadpoolctl all the same
    assert alone["left"] == []  # and the program's sys.modules is as it was
    mine = run("import threadpoolctl")
    assert "threadpoolctl" in mine["modules"] and mine["left"] == ["threadpoolctl"]
