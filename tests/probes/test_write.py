"""Writing a manifest is safe: create-or-fail without --force, nothing partial or temporary left
by kill -9, protected symlinks, the replaced file's mode, inodes named, undecodable bytes."""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envlock.errors import OutputExistsError
from envlock import _io
from envlock.manifest._toml import atomic_write

STRESS = bool(os.environ.get("ENVLOCK_STRESS"))


def _envlock(*args: str | bytes, env: dict | None = None, cwd: Path | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], check=False, capture_output=True,
                          timeout=timeout, env=env, cwd=cwd)


def _leftovers(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def _writer(path: str, barrier: multiprocessing.synchronize.Barrier, text: str,
            results: multiprocessing.queues.Queue) -> None:
    barrier.wait()
    try:
        atomic_write(Path(path), text)
        results.put("ok")
    except OutputExistsError as exc:
        results.put(f"exists: {exc}")


@pytest.mark.parametrize("temp", ["O_TMPFILE", "named"])
def test_32_concurrent_writers_exactly_one_wins(tmp_path: Path, temp: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """create-or-fail: link(2) of the finished file fails when the name exists (also where
    O_TMPFILE is missing and a named temporary file is linked)."""
    if temp == "named":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    target = tmp_path / "m.toml"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(32)
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(target), barrier, f"writer = {i}\n" * 2000, results))
             for i in range(32)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    got = [results.get(timeout=5) for _ in procs]
    assert got.count("ok") == 1, got
    assert all(g.startswith("exists: ") and "use --force" in g for g in got if g != "ok")
    text = target.read_text()
    assert text.count("\n") == 2000 and len(set(text.splitlines())) == 1  # one writer's, whole
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(not STRESS, reason="32 whole snapshots; set ENVLOCK_STRESS=1")
def test_32_concurrent_cli_snapshots(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "envlock", "snapshot", "-q", "--python",
                               sys.executable, "-o", str(tmp_path / "m.toml")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(32)]
    outs = [(p.wait(300), p.stderr.read().decode()) for p in procs]
    assert [rc for rc, _ in outs].count(0) == 1
    for rc, err in outs:
        if rc:
            assert rc == 2 and err.count("\n") == 1 and err.startswith("Error: ") and "exists" in err
    assert _leftovers(tmp_path) == []


_KILL_CHILD = r"""
import sys
from pathlib import Path
from envlock.manifest._toml import atomic_write
d = Path(sys.argv[1]); force = sys.argv[2] == "force"
body = "".join(f"line{i} = {i}\n" for i in range(60000)) + "end = true\n"
print("ready", flush=True)
i = 0
while True:
    atomic_write(d / ("m.toml" if force else f"m{i}.toml"), body, force=force)
    i += 1
"""


@pytest.mark.parametrize("mode", ["force", "create"])
def test_kill_9_leaves_no_partial_file_and_no_temp(tmp_path: Path, mode: str) -> None:
    """SIGKILL at random times while writing ~0.8 MB manifests: every file present is whole,
    no temporary file is left (O_TMPFILE: the unnamed file dies with the process)."""
    runs = 200 if STRESS else 12
    rng = random.Random(13)
    for _ in range(runs):
        p = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(tmp_path), mode],
                             stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.08))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        for name in os.listdir(tmp_path):
            if name.endswith(".toml"):
                data = (tmp_path / name).read_bytes()
                assert data.endswith(b"end = true\n"), f"partial {name}: {len(data)} bytes"
        left = _leftovers(tmp_path)
        if mode == "create":
            assert left == []
        else:
            # linkat to a temporary name, then rename: a kill between the two leaves one, which
            # the next write removes (its writer is dead).
            assert len(left) <= 1
    atomic_write(tmp_path / "m.toml", "end = true\n", force=True)
    assert _leftovers(tmp_path) == []


def test_stale_named_temp_of_a_dead_writer_is_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = _io._host()
    stale = tmp_path / f".m.toml.{host}.{dead.pid}.abcd1234.tmp"
    stale.write_text("half")
    other = tmp_path / f".other.toml.{host}.{dead.pid}.abcd1234.tmp"
    other.write_text("another file's")
    remote = tmp_path / f".m.toml.othernode.{dead.pid}.abcd1234.tmp"  # shared FS: not ours to judge
    remote.write_text("half")
    atomic_write(tmp_path / "m.toml", "x = 1\n")
    assert not stale.exists() and other.exists() and remote.exists()


def test_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "m.toml"
    target.write_text("old\n")
    target.chmod(0o600)
    atomic_write(target, "new = 1\n", force=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == "new = 1\n"


def test_new_file_follows_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "m.toml", "x = 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.toml").stat().st_mode) == 0o640


def test_own_symlink_is_refused_even_with_force(tmp_path: Path) -> None:
    """The final component is never followed: a link is refused with and without --force,
    and neither the link nor its target changes."""
    real = tmp_path / "real.toml"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    for force in (False, True):
        with pytest.raises(OutputExistsError, match="is a symbolic link; envlock never writes through"):
            atomic_write(link, "new = 1\n", force=force)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "old\n" and stat.S_IMODE(real.stat().st_mode) == 0o640
    dangling = tmp_path / "dangling.toml"
    dangling.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(OutputExistsError, match="symbolic link"):
        atomic_write(dangling, "x = 1\n", force=True)
    assert not (tmp_path / "created-through-the-link").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a symlink owned by another user needs root")
def test_foreign_symlink_in_sticky_dir_is_not_followed(tmp_path: Path) -> None:
    """A /tmp-like dir (1777), a link owned by uid 4242 ≠ us ≠ dir owner, as an attacker
    plants it where fs.protected_symlinks is 0: refused, the victim untouched (CLI too)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.toml"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    link = shared / "manifest.toml"
    link.symlink_to(victim)
    os.lchown(link, 4242, 4242)
    with pytest.raises(OutputExistsError, match="symbolic link"):
        atomic_write(link, "evil = 1\n", force=True)
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    result = _envlock("snapshot", "-q", "--python", sys.executable, "--force", "-o", str(link))
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and b"Traceback" not in result.stderr
    assert "symbolic link" in result.stderr.decode()
    assert victim.read_text() == "precious\n"


class _Vfs:
    f_favail = 0
    f_files = 1000


def test_inode_exhaustion_is_named_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def full(path, flags, *a, **k):
        if Path(os.fsdecode(path)) == tmp_path or ".tmp" in os.fsdecode(path):
            raise OSError(errno.ENOSPC, "No space left on device", os.fsdecode(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", full)
    monkeypatch.setattr(_io, "_statvfs", lambda d: _Vfs())
    with pytest.raises(OSError) as info:
        atomic_write(tmp_path / "m.toml", "x = 1\n")
    assert "inodes" in info.value.strerror and info.value.filename == str(tmp_path / "m.toml")


def _can_mount_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "nr_inodes=4,size=4m", "tmpfs", str(where)],
                       check=False, capture_output=True, timeout=30)
    return r.returncode == 0


def test_inode_exhaustion_on_a_real_tmpfs(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    if not _can_mount_tmpfs(mnt):
        pytest.skip("needs root and mount(8) for a tmpfs with nr_inodes=")
    try:
        n = 0
        while True:  # use up every inode
            try:
                (mnt / f"f{n}").write_text("")
            except OSError:
                break
            n += 1
        assert os.statvfs(mnt).f_favail == 0
        result = _envlock("snapshot", "-q", "--python", sys.executable, "-o", str(mnt / "m.toml"))
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert err.startswith("Error: ") and err.count("\n") == 1 and "inodes" in err, err
        assert str(mnt / "m.toml") in err and ".tmp" not in err
    finally:
        subprocess.run(["umount", str(mnt)], timeout=30, check=False)


def test_undecodable_bytes_in_output_path_and_environment(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "4", "OMP_WEIRD": "caf\udce9"}
    env_bytes = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    out = os.fsencode(str(tmp_path)) + b"/m\xff.toml"
    result = subprocess.run([sys.executable.encode(), b"-m", b"envlock", b"snapshot", b"-q",
                             b"--python", sys.executable.encode(), b"-o", out],
                            check=False, capture_output=True, timeout=120, env=env_bytes)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    text = Path(os.fsdecode(out)).read_text(encoding="utf-8")
    assert 'OMP_WEIRD = "caf\\\\xe9"' in text
    assert "m\\\\xff.toml" in text  # the recorded command
