"""``envlock find``'s operands in each fact's own order, and what is refused before anything is
read: an operand the order cannot read (PEP 440 through packaging, conda's order through
py-rattler: the oracles), ``===`` (PEP 440's arbitrary equality), a mistyped WHERE, an
``--index`` in a directory that does not exist.  Real manifests: the snapshots of
``conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from envlock.errors import EnvlockError
from envlock.find import find

from .conftest import envlock_cmd


def _one_error(r: Any, start: str) -> str:
    """The single ``Error:`` line of a refused command (exit status 2, nothing on stdout)."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(start), r.stderr
    return str(r.stderr)


def test_the_index_directory_must_exist(results: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "deeper"
    index = missing / "ix.sqlite"
    _one_error(envlock_cmd("find", str(results), "numpy < 2", "--index", str(index)),
               f"Error: --index {index}: directory {missing} does not exist (create it first)")
    with pytest.raises(EnvlockError, match="does not exist"):
        find([results], "numpy < 2", index=str(index))
    assert not (tmp_path / "nope").exists()
    r = envlock_cmd("find", "--help")
    assert "in a directory that exists" in " ".join(r.stdout.split())
    # the default index, in the user's cache, is created with its directory
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = envlock_cmd("find", str(results), "numpy < 2", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cache" / "envlock" / "find" / "index.sqlite").is_file()
