"""``snapshot``, ``verify --manifest`` and ``diff`` on the two real torch venvs, held byte for
byte (issue 27: the house may be rebuilt, its outputs may not move).

Each command runs as users run it: ``python -m envlock …`` in a child process whose whole
environment is set here (``PATH=/usr/bin:/bin``, ``LANG=C.UTF-8``, ``COLUMNS=100``, ``HOME`` and
``XDG_CACHE_HOME`` inside the test's own directory, so no cache or setting of the machine's
user takes part), in a directory that is no git checkout.  Its standard output (and, for
``snapshot``, the manifest it writes) is compared with the golden text.

The outputs hold facts of the machine (host name, kernel, CPU, memory, the interpreter that
built the venvs and where they are, so their paths), so the goldens are kept per machine under
``tests/golden/real-venvs/<key>/``: ``<key>`` is a digest of :func:`_machine` (written there as
``machine.json``), and a machine without goldens is skipped with its facts in the reason.
``ENVLOCK_UPDATE_GOLDEN=1 pytest --realenv tests/test_real_venv_outputs.py`` writes them.

Only what differs from one run to the next on one machine is normalized, nothing else:

* the test's temporary directory (the working directory, ``HOME``, the cache) → ``<TMP>``;
* the snapshot's ``created`` time (``[envlock]``, UTC to the second) → ``<TIME>``;
* the seconds a command took: the snapshot's ``duration`` (``[envlock]``) and its ``wrote … in
  0.24 s`` line, verify's ``(16 checks, 0.21 s)`` summary and the ``"duration"`` of its JSON
  (the whole run's and each check's) → ``<SECONDS>``;
* the two digests of the manifest's ``[libraries.answer]``: ``key`` holds envlock's code and the
  working directory, ``inputs`` the ctimes of the files the loader read → ``<DIGEST>``.

diff compares the manifests' environments, not their files, so neither value reaches its output.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _realenv import interpreter_key, venv_root

GOLDEN = Path(__file__).with_name("golden") / "real-venvs"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"


def _machine() -> dict[str, object]:
    """The facts of this machine that the outputs hold, read here without envlock."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    mem = Path("/proc/meminfo").read_text(encoding="utf-8").split("\n", 1)[0]
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    return {"host": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
            "cpu": model, "cpu_flags": hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:12],
            "cores": os.cpu_count(), "memory": mem.split()[1] if mem.startswith("MemTotal") else mem,
            "interpreter": interpreter_key(), "venvs": str(venv_root())}


def _envlock(args: list[str], cwd: Path) -> tuple[int, str]:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "100", "HOME": str(cwd / "home"),
           "XDG_CACHE_HOME": str(cwd / "cache")}
    proc = subprocess.run([sys.executable, "-m", "envlock", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout + (f"\n[stderr]\n{proc.stderr}" if proc.stderr else "")


_CREATED = re.compile(r'^created = "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"$', re.M)
_SECONDS = (
    (re.compile(r"^duration = \d+(?:\.\d+)?$", re.M), "duration = <SECONDS>"),  # snapshot's [envlock]
    (re.compile(r"^(wrote .* in )\d+(?:\.\d+)? s$", re.M), r"\1<SECONDS> s"),  # snapshot's last line
    (re.compile(r"(\(\d+ checks, )\d+(?:\.\d+)? s\)"), r"\1<SECONDS> s)"),  # verify's summary
    (re.compile(r'"duration": \d+(?:\.\d+)?'), '"duration": "<SECONDS>"'),  # verify's JSON
)


_ANSWER = re.compile(r'^(\[libraries\.answer\]\nkey = )"[0-9a-f]{64}"\ninputs = "[0-9a-f]{64}"$', re.M)


def _normalize(text: str, tmp: Path) -> str:
    text = text.replace(str(tmp.resolve()), "<TMP>").replace(str(tmp), "<TMP>")
    text = _CREATED.sub('created = "<TIME>"', text)
    text = _ANSWER.sub('\\1"<DIGEST>"\ninputs = "<DIGEST>"', text)
    for pattern, placeholder in _SECONDS:
        text = pattern.sub(placeholder, text)
    return text


@pytest.mark.realenv
def test_snapshot_verify_diff_outputs_are_the_golden_ones(cpu_venv: Path, cuda_venv: Path,
                                                          tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "home").mkdir(parents=True)
    got: dict[str, str] = {}
    for name, venv in (("cpu", cpu_venv), ("cuda", cuda_venv)):
        py = str(venv / "bin" / "python")
        code, out = _envlock(["snapshot", "--python", py, "-o", f"{name}.toml", "--repo", str(work)], work)
        assert code == 0, out
        got[f"snapshot-{name}.out"] = f"exit {code}\n{out}"
        got[f"{name}.toml"] = (work / f"{name}.toml").read_text(encoding="utf-8")
    for name, venv, manifest in (("cpu", cpu_venv, "cpu"), ("cuda", cuda_venv, "cuda"),
                                 ("cuda-against-cpu", cuda_venv, "cpu")):
        py = str(venv / "bin" / "python")
        for fmt in ("text", "json"):
            code, out = _envlock(["verify", "--manifest", f"{manifest}.toml", "--python", py,
                                  "--format", fmt], work)
            got[f"verify-{name}.{fmt}"] = f"exit {code}\n{out}"
    for fmt in ("text", "markdown", "json"):
        code, out = _envlock(["diff", "cpu.toml", "cuda.toml", "--format", fmt, "--width", "100"], work)
        got[f"diff.{fmt}"] = f"exit {code}\n{out}"
    got = {k: _normalize(v, work) for k, v in got.items()}
    assert "<TIME>" in got["cpu.toml"] and "<SECONDS>" in got["cuda.toml"]
    assert got["verify-cpu.text"].startswith("exit 0\n")  # each venv matches its own manifest
    assert not got["verify-cuda-against-cpu.text"].startswith("exit 0\n")  # but not the other's

    machine = _machine()
    key = hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:10]
    where = GOLDEN / key
    if UPDATE:
        where.mkdir(parents=True, exist_ok=True)
        for old in where.iterdir():
            old.unlink()
        (where / "machine.json").write_text(json.dumps(machine, indent=1, sort_keys=True) + "\n")
        for name, text in got.items():
            (where / name).write_text(text, encoding="utf-8")
    if not (where / "machine.json").is_file():
        pytest.skip(f"no golden outputs were taken on a machine like this one ({key}: {machine})")
    want = {p.name: p.read_text(encoding="utf-8") for p in where.iterdir() if p.name != "machine.json"}
    assert sorted(got) == sorted(want)
    for name in sorted(want):
        assert got[name] == want[name], f"{name} differs from {where / name}"
