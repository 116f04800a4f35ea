"""``envlock run`` in a directory others can write to, with streams closed, under signals
(issue 29): links planted in the run directory are refused, one run owns a directory,
closed stdout/stderr never stop the job, SIGHUP/SIGQUIT are forwarded and recorded, SIGPIPE is
the normal end of a producer, a full inode table is named."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest

from envlock.manifest.processtables import run_from_dict
from tests.record.conftest import envlock_run

ENVLOCK = [sys.executable, "-m", "envlock"]


def _record(d: Path):
    return run_from_dict(tomllib.loads((d / "run.toml").read_text())["run"])


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    [line] = [ln for ln in stderr.splitlines() if ln.startswith("Error: ")]
    return line


def _shared_dir(tmp_path: Path) -> Path:
    """A /tmp-like run directory (1777), as a job script's --dir /tmp/run-$USER may be."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


@pytest.mark.parametrize("name", ["manifest.toml", "run.toml", ".envlock-run.lock"])
@pytest.mark.parametrize("force", [False, True], ids=["no-force", "force"])
@pytest.mark.parametrize("where", ["sticky-foreign", "plain-own"])
def test_a_link_planted_in_the_run_directory_is_not_followed(tmp_path: Path, name: str,
                                                             force: bool, where: str) -> None:
    """An attacker's ``D/manifest.toml -> ~/victim`` — in a /tmp-like 1777 directory, owned
    by another uid (where root can arrange it), or in a plain group-writable directory where
    its owner is not what tells it apart: refused with one line, exit 2, before CMD runs; the
    victim is untouched."""
    if where == "sticky-foreign":
        d = _shared_dir(tmp_path)
    else:
        d = tmp_path / "group"
        d.mkdir()
    victim = tmp_path / "victim.toml"
    victim.write_text("precious\n")
    link = d / name
    link.symlink_to(victim)
    if where == "sticky-foreign" and os.geteuid() == 0:
        os.lchown(link, 4242, 4242)
    marker = tmp_path / "ran"
    args = ["--dir", str(d), *(["--force"] if force else []), "--", "touch", str(marker)]
    r = envlock_run(args, tmp_path)
    assert r.returncode == 2, r.stderr
    line = _one_error_line(r.stderr)
    assert f"{link} is a symbolic link" in line, line
    assert victim.read_text() == "precious\n" and link.is_symlink()
    assert not marker.exists()  # refused before the command


def test_an_existing_manifest_needs_force(tmp_path: Path) -> None:
    """A manifest.toml already in the directory (a killed run's, or planted) is not replaced
    without --force; with --force it is, by rename (a new inode, the old file's links
    untouched)."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "manifest.toml").write_text("planted = true\n")
    other = tmp_path / "hardlink.toml"
    os.link(d / "manifest.toml", other)
    r = envlock_run(["--dir", str(d), "--", "true"], tmp_path)
    assert r.returncode == 2 and "manifest.toml exists; use --force" in _one_error_line(r.stderr)
    r = envlock_run(["--dir", str(d), "--force", "-q", "--", "true"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert other.read_text() == "planted = true\n"  # replaced, not written into
    rec = _record(d)
    assert rec.manifest_sha256 == hashlib.sha256((d / "manifest.toml").read_bytes()).hexdigest()


def test_one_run_owns_a_directory(tmp_path: Path) -> None:
    """8 concurrent ``envlock run --dir D``: exactly one runs CMD (it waits until the other 7
    have ended, so they all meet its lock); each other one fails with one line naming the
    owner's pid, exit 2; the record kept is the owner's and its sha256 is its manifest's."""
    d = tmp_path / "D"
    ran = tmp_path / "ran"
    release = tmp_path / "release"
    # CMD's parent is envlock's launcher shell (supervise._launcher), whose parent is envlock
    cmd = f'cut -d" " -f4 /proc/$PPID/stat >> {ran}; while [ ! -e {release} ]; do sleep 0.05; done'
    procs = [subprocess.Popen([*ENVLOCK, "run", "--dir", str(d), "-q", "--", "sh", "-c", cmd],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(8)]
    try:
        deadline = time.monotonic() + 240
        while sum(p.poll() is not None for p in procs) < 7:
            assert time.monotonic() < deadline, "the 7 others did not end"
            time.sleep(0.05)
        release.touch()
        results = [(p, *p.communicate(timeout=120)) for p in procs]
    finally:
        release.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    [owner] = [p for p, _o, _e in results if p.returncode == 0]
    for p, _out, err in results:
        if p is owner:
            continue
        assert p.returncode == 2, err
        line = _one_error_line(err)
        assert line.startswith(f"Error: --dir {d}: in use by another envlock run pid {owner.pid} "), line
    assert ran.read_text().split() == [str(owner.pid)]  # CMD ran once, under the owner
    rec = _record(d)
    assert rec.outcome == "succeeded"
    assert rec.manifest_sha256 == hashlib.sha256((d / "manifest.toml").read_bytes()).hexdigest()
    data = tomllib.loads((d / "run.toml").read_text())
    assert data["envlock"]["command"][:3] == ["envlock", "run", "--dir"]
    # the lock goes with the process: a later run of the directory meets the record instead
    r = envlock_run(["--dir", str(d), "--", "true"], tmp_path)
    assert r.returncode == 2 and "run.toml exists (an earlier run)" in _one_error_line(r.stderr)


_FD_PROBE = ("import os, sys; s = ' '.join(str(os.path.exists(f'/proc/self/fd/{n}')) for n in "
             "(1, 2)); open(sys.argv[1], 'w').write(s)")  # looked at before open() takes fd 1


@pytest.mark.parametrize("closed", [">&-", "2>&-", ">&- 2>&-"])
def test_closed_streams_never_stop_the_job(tmp_path: Path, closed: str) -> None:
    """``envlock run … >&-`` in a job script: CMD runs, with the streams as envlock got them
    (closed: nothing is put in their place for CMD), and the record is final."""
    marker = tmp_path / "fds"
    script = (f'exec "$0" -m envlock run --dir d -- "$0" -c "$1" {marker} {closed}')
    r = subprocess.run(["sh", "-c", script, sys.executable, _FD_PROBE], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    want = {">&-": "False True", "2>&-": "True False", ">&- 2>&-": "False False"}[closed]
    assert marker.read_text() == want
    assert _record(tmp_path / "d").outcome == "succeeded"


@pytest.mark.parametrize("argv", [["snapshot", "--python", sys.executable, "-o", "m.toml"],
                                  ["diff", "a.toml", "a.toml"]], ids=["snapshot", "diff"])
def test_snapshot_and_diff_with_stdout_closed(tmp_path: Path, argv: list[str]) -> None:
    """Their stdout closed: no traceback; snapshot writes its file, diff exits with its status
    (0: equal), their output to the closed stream dropped."""
    subprocess.run([*ENVLOCK, "snapshot", "-q", "--python", sys.executable, "-o", "a.toml"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=120)
    r = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *ENVLOCK, *argv],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if argv[0] == "snapshot":
        assert (tmp_path / "m.toml").read_text().startswith("[envlock]")


_TRAP = r"""
import signal, sys, time
def stop(signum, frame):
    open("checkpoint", "w").write(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGHUP, stop)
signal.signal(signal.SIGQUIT, stop)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT], ids=["SIGHUP", "SIGQUIT"])
def test_hup_and_quit_are_forwarded_and_recorded(tmp_path: Path, sig: signal.Signals) -> None:
    """kill -HUP / -QUIT of envlock only (CMD is in its own process group): forwarded to CMD,
    recorded, and the record finalised — not left at 'running' with CMD unsupervised."""
    script = tmp_path / "job.py"
    script.write_text(_TRAP)
    # envlock must get the signal's default disposition: under nohup (SIGHUP ignored) it keeps
    # it ignored, as it should, and the command never sees it
    p = subprocess.Popen([*ENVLOCK, "run", "--dir", "t", "-q", "--", sys.executable, str(script)],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(sig)
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert (tmp_path / "checkpoint").read_text() == sig.name
    rec = _record(tmp_path / "t")
    assert rec.outcome == "terminated" and rec.exit_status == 0
    assert [(s.name, s.forwarded) for s in rec.signals] == [(sig.name, True)]
    assert any(f.id == "run.terminated" and sig.name in f.title for f in rec.findings)


def test_sigquit_kills_a_command_without_a_handler_and_is_recorded(tmp_path: Path) -> None:
    p = subprocess.Popen([*ENVLOCK, "run", "--dir", "t", "-q", "--", "sh", "-c",
                          "echo ready; exec sleep 120"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGQUIT)
    p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGQUIT
    rec = _record(tmp_path / "t")
    assert rec.outcome == "terminated" and rec.signal == "SIGQUIT"


def test_a_producer_ended_by_sigpipe_is_not_a_crash(tmp_path: Path) -> None:
    """``envlock run -- yes | head -1``: yes ends by SIGPIPE when head has its line — the
    normal end of a producer; recorded as output-closed (info), not 'the command crashed'."""
    r = subprocess.run(["sh", "-c", '"$0" -m envlock run --dir p -- yes | head -1',
                        sys.executable], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.stdout == "y\n", r.stderr
    rec = _record(tmp_path / "p")
    assert rec.outcome == "output-closed" and rec.signal == "SIGPIPE"
    assert rec.exit_code == 128 + signal.SIGPIPE  # as the shell reports it
    ids = {f.id: f.severity for f in rec.findings}
    assert ids.get("run.output-closed") == "info" and "run.crashed" not in ids
    assert "crashed" not in r.stderr


def _mount_tiny_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=8", "tmpfs", str(where)],
                       check=False, capture_output=True, timeout=30)
    return r.returncode == 0


@pytest.mark.parametrize("existing", [True, False], ids=["dir-exists", "dir-created"])
def test_a_full_inode_table_is_named(tmp_path: Path, existing: bool) -> None:
    """A real tmpfs with 8 inodes, all used: ``run --dir`` says inodes (statvfs f_favail = 0),
    as snapshot does, in one line, exit 2, without running CMD."""
    mnt = tmp_path / "mnt"
    if not _mount_tiny_tmpfs(mnt):
        pytest.skip("needs root and mount(8) for a tmpfs with nr_inodes=")
    try:
        d = mnt / "run"
        if existing:
            d.mkdir()
        n = 0
        while True:
            try:
                (mnt / f"f{n}").write_text("")
            except OSError:
                break
            n += 1
        assert os.statvfs(mnt).f_favail == 0
        marker = tmp_path / "ran"
        r = envlock_run(["--dir", str(d), "--", "touch", str(marker)], tmp_path)
        assert r.returncode == 2, r.stderr
        line = _one_error_line(r.stderr)
        assert "no free inodes left on the file system of" in line and str(mnt) in line, line
        assert not marker.exists()
    finally:
        subprocess.run(["umount", str(mnt)], timeout=30, check=False)
