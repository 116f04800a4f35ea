"""The stat-witness answer cache: an answer is reused only while its inputs are unchanged."""

from __future__ import annotations

import os
from pathlib import Path

from envlock import cache as _statcache


def test_reused_while_unchanged_and_dropped_when_a_witness_changes(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    lib = tmp_path / "lib"
    lib.mkdir()
    f = lib / "libx.so"
    f.write_bytes(b"one")
    entry = _statcache.entry_path("test", {"q": 1}, env)
    assert entry.startswith(str(tmp_path / "cache" / "envlock" / "test"))
    assert _statcache.load(entry) is None
    _statcache.store(entry, [str(f), str(lib), str(lib / "missing.so")], {"answer": [1, 2]})
    assert _statcache.load(entry) == {"answer": [1, 2]}

    (lib / "missing.so").write_bytes(b"")  # a file that did not exist appears
    assert _statcache.load(entry) is None
    os.unlink(lib / "missing.so")
    _statcache.store(entry, [str(f), str(lib)], "v2")
    assert _statcache.load(entry) == "v2"
    f.write_bytes(b"two!")  # same path, new content (size and mtime change)
    assert _statcache.load(entry) is None


def test_other_keys_other_entries_and_junk_is_ignored(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    a = _statcache.entry_path("ns", {"module": "torch"}, env)
    b = _statcache.entry_path("ns", {"module": "numpy"}, env)
    assert a != b
    Path(a).parent.mkdir(parents=True)
    Path(a).write_text("{not json")
    assert _statcache.load(a) is None
    Path(a).write_text('{"witness": 3, "payload": 1}')
    assert _statcache.load(a) is None
    _statcache.store(str(tmp_path / "file-not-dir" / "x" / "e.json"), [], 1)  # parent is creatable
    (tmp_path / "blocker").write_text("")
    _statcache.store(str(tmp_path / "blocker" / "e.json"), [], 1)  # cannot create: ignored
