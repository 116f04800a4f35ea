"""Seeded-mutation fuzz of every reader (``fuzz_driver.py``, in a child process so that its
memory is measured alone): hundreds of mutants of a file of each format through what ``diff``,
``show``, ``verify --lock`` and ``restore`` call — no traceback, exit 0/1/2 with one ``Error:``
line of bounded length, bounded time and memory — and ``verify --lock``/``restore`` accept
exactly what conda-lock's and packaging's own parsers accept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted(p for p in (ROOT / "fixtures" / "diff").iterdir() if p.is_file()) + [
    ROOT / "tests" / "data" / "manifest.example.toml"]


def _fuzz(tmp_path: Path, seed: int, per_file: int) -> dict:
    report = tmp_path / "fuzz.json"
    subprocess.run([sys.executable, str(Path(__file__).with_name("fuzz_driver.py")), str(report),
                    str(seed), str(per_file), *map(str, SEEDS)], check=True, timeout=900,
                   cwd=tmp_path)
    return json.loads(report.read_text())


def _check(report: dict, per_file: int) -> None:
    assert report["count"] == per_file * len(SEEDS)
    assert report["failures"] == [], json.dumps(report["failures"][:3], indent=1)
    for kind, (agreed, compared) in report["agree"].items():
        assert compared > 0 and agreed == compared, kind
    assert report["max_rss_mb"] < 512  # no input makes envlock use more than 512 MB


def test_fuzz_every_format(tmp_path: Path) -> None:
    assert {p.suffix for p in SEEDS} >= {".yml", ".toml", ".txt", ".lock"}
    _check(_fuzz(tmp_path, seed=12, per_file=24), 24)


@pytest.mark.realenv
def test_fuzz_every_format_thoroughly(tmp_path: Path) -> None:
    _check(_fuzz(tmp_path, seed=1212, per_file=400), 400)
