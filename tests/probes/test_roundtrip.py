"""A real snapshot survives write → load → write byte for byte."""

from __future__ import annotations

from pathlib import Path

import envlock


def test_real_snapshot_round_trip(tmp_path: Path, small_venv: Path) -> None:
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"))
    first = tmp_path / "a.toml"
    m.write(first)
    loaded = envlock.load(str(first))
    assert loaded == m
    second = tmp_path / "b.toml"
    loaded.write(second)
    assert first.read_bytes() == second.read_bytes()
