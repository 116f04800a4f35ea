"""A snapshot taken in a lock's directory records the lockfiles (path, kind, sha256)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import envlock

PYLOCK = '''lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.10"

[[packages]]
name = "alpha"
version = "1.0.0"
'''


def test_snapshot_records_lockfiles(tmp_path: Path) -> None:
    (tmp_path / "pylock.toml").write_text(PYLOCK)
    (tmp_path / "requirements.txt").write_text("alpha==1.0.0\n")  # no hashes: not a lock
    m = envlock.snapshot(python=sys.executable, lock_dir=str(tmp_path), stack=False)
    assert m.lockfiles.status == "ok"
    (ref,) = m.lockfiles.files
    assert ref.path == str((tmp_path / "pylock.toml").resolve())
    assert ref.kind == "pylock"
    assert ref.sha256 == hashlib.sha256(PYLOCK.encode()).hexdigest()


def test_no_lockfiles_is_absent(tmp_path: Path) -> None:
    m = envlock.snapshot(python=sys.executable, lock_dir=str(tmp_path), stack=False)
    assert m.lockfiles.status == "absent"
    assert m.lockfiles.files == ()
