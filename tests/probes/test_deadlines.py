"""A snapshot ends: FIFOs in place of metadata files are named, not waited on; a timed-out
compiler marks [toolchain]; Ctrl-C ends it within a second with its children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import envlock
from envlock.probes.toolchain import probe_toolchain
from envlock.probes.world import World


def _envlock(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], check=False, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def test_fifo_as_metadata_is_named_and_does_not_hang(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    dist = site / "hung-1.0.dist-info"
    dist.mkdir()
    os.mkfifo(dist / "METADATA")
    started = time.monotonic()
    r = _envlock("snapshot", "--python", str(venv / "bin" / "python"), "-o", str(tmp_path / "m.toml"))
    assert time.monotonic() - started < 20
    assert r.returncode == 0, r.stderr
    assert f"{dist / 'METADATA'}: is a FIFO (named pipe), not a regular file" in r.stderr


def test_fifo_as_conda_meta_record_is_named_and_does_not_hang(tmp_path: Path, conda_prefix: Path) -> None:
    fifo = conda_prefix / "conda-meta" / "hung-1.0-0.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    r = _envlock("snapshot", "--prefix", str(conda_prefix), "-o", str(tmp_path / "m.toml"))
    assert time.monotonic() - started < 20
    assert r.returncode == 0, r.stderr
    assert f"{fifo}: unreadable conda record (is a FIFO (named pipe), not a regular file)" in r.stderr
    m = envlock.load(str(tmp_path / "m.toml"))
    assert m.conda.status == "error"


def test_timed_out_compiler_marks_the_toolchain_table(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcc = bin_dir / "gcc"
    gcc.write_text("#!/bin/sh\nsleep 30\n")
    gcc.chmod(0o755)
    started = time.monotonic()
    info = probe_toolchain(World(root=tmp_path, path_dirs=[str(bin_dir)], timeout=0.5), tools=("gcc",))
    assert time.monotonic() - started < 5
    assert info.status == "timeout"
    assert info.error == f"{gcc}: no answer within 0.5 s"
    assert info.tools[0].status == "timeout"


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies, which nobody may reap in a
    container, do not count)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


def _members_after(pgid: int, within: float = 2.0) -> list[int]:
    """:func:`_live_members` once they are gone, or after ``within`` seconds: a SIGKILL'ed
    process leaves the run queue soon, not at once, on a loaded machine."""
    deadline = time.monotonic() + within
    while (left := _live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_ctrl_c_ends_within_a_second_and_kills_the_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hang = tmp_path / "env" / "bin" / "python"
    hang.parent.mkdir(parents=True)
    hang.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nsleep 30\n")
    hang.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "envlock", "snapshot", "--python", str(hang),
                             "-o", str(tmp_path / "m.toml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pidfile.read_text())
    time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert took <= 1.0, f"exit took {took:.2f} s"
    assert [ln for ln in err.splitlines() if ln.startswith("Error")] == ["Error: interrupted"]
    assert _members_after(child) == [], "the hung interpreter's process group survived Ctrl-C"
    assert not (tmp_path / "m.toml").exists()


def test_interrupted_library_snapshot_returns_at_once_and_commands_run_again(tmp_path: Path) -> None:
    """``envlock.snapshot()`` interrupted (KeyboardInterrupt in the caller's thread): it raises
    within a second, the child is killed, and later commands run normally."""
    import threading

    from envlock import _run

    pidfile = tmp_path / "pid"
    hang = tmp_path / "env" / "bin" / "python"
    hang.parent.mkdir(parents=True)
    hang.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nsleep 30\n")
    hang.chmod(0o755)

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C reaches the main thread

    main = threading.main_thread().ident
    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    try:
        envlock.snapshot(python=str(hang), stack=False, libraries=False)
        raise AssertionError("not interrupted")
    except KeyboardInterrupt:
        pass
    assert time.monotonic() - started < 3
    assert _members_after(int(pidfile.read_text())) == []
    assert _run.run(["true"]).ok  # commands run again
