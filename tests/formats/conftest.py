"""Shared paths of the real files (cases F01–F13, ``foreign/SOURCES.md``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from diff.conftest import build_manifest  # noqa: F401 - the diff tests' realistic manifest

from envlock.manifest import _toml

FOREIGN = Path(__file__).parent / "foreign"


def real(name: str) -> Path:
    """The path of the real file whose name ends with ``name``."""
    found = [p for p in FOREIGN.iterdir() if p.name.endswith(name)]
    assert len(found) == 1, (name, found)
    return found[0]


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """``write(name, data)`` writes a manifest dict as TOML under ``tmp_path``."""

    def _write(name: str, data: Mapping[str, Any]) -> Path:
        path = tmp_path / name
        path.write_text(_toml.dumps(dict(data)), encoding="utf-8")
        return path

    return _write
