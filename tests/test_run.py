"""The command runner: every outcome is a result, and a timeout kills the whole process group."""

from __future__ import annotations

import os
import time
from pathlib import Path

from envlock._run import run


def _script(tmp_path: Path, body: str) -> str:
    p = tmp_path / "prog"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return str(p)


def test_ok_and_output(tmp_path: Path) -> None:
    r = run([_script(tmp_path, "echo out; echo err >&2")])
    assert (r.status, r.returncode, r.stdout, r.stderr) == ("ok", 0, "out\n", "err\n")
    assert r.ok


def test_failed_keeps_last_line(tmp_path: Path) -> None:
    r = run([_script(tmp_path, "echo first >&2; echo 'NVIDIA-SMI has failed' >&2; exit 9")])
    assert r.status == "failed" and r.returncode == 9
    assert r.detail.endswith("exited with status 9: NVIDIA-SMI has failed")


def test_absent() -> None:
    r = run(["envlock-no-such-program-xyz"])
    assert r.status == "absent"
    assert r.detail == "envlock-no-such-program-xyz: command not found"


def test_not_executable(tmp_path: Path) -> None:
    p = tmp_path / "noexec"
    p.write_text("#!/bin/sh\n")
    r = run([str(p)])
    assert r.status == "error"
    assert "Permission denied" in r.detail


def test_timeout_kills_grandchildren(tmp_path: Path) -> None:
    """A shell script whose child (sleep) holds our pipes must not outlive the timeout."""
    pidfile = tmp_path / "pid"
    prog = _script(tmp_path, f"sleep 60 & echo $! > {pidfile}; wait")
    started = time.monotonic()
    r = run([prog], timeout=0.5)
    assert time.monotonic() - started < 5
    assert r.status == "timeout"
    assert r.detail.endswith("no answer within 0.5 s")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2.0  # a SIGKILL'ed process is gone soon, not at once
    while True:
        try:
            os.kill(child, 0)
            with open(f"/proc/{child}/stat") as fh:
                alive = fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not alive


def test_env_and_input(tmp_path: Path) -> None:
    r = run([_script(tmp_path, 'read x; echo "$x-$FOO"')], env={"FOO": "bar", "PATH": "/usr/bin:/bin"},
            input_text="hello\n")
    assert r.stdout == "hello-bar\n"
