"""``show F``, ``diff F F`` and ``diff F G`` (two files of one tool) of every real file in
``shared/cases/peers`` and ``shared/cases/foreign`` print what they printed when the golden
files under ``tests/formats/golden/`` were written (issue 27: the format registry and the
split readers change no output).

An intended change of output updates the golden files in its own commit::

    ENVLOCK_UPDATE_GOLDEN=1 python -m pytest -q tests/formats/test_golden.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"


def _inputs() -> list[Path]:
    return sorted(x for d in (CASES / "peers", CASES / "foreign") if d.is_dir()
                  for x in d.rglob("*") if x.is_file() and x.suffix != ".md"
                  and x.name != "index.tsv")


def _tool(path: Path) -> str:
    """Which tool wrote a file: its peers folder, or a foreign file's name after the repo."""
    if path.parent.name != "foreign":
        return path.parent.name
    tail = path.name.split("__")[-1]
    return re.sub(r"^.*?(conda-lock|environment|pip_freeze|spec-file|requirements|conda_list)",
                  r"\1", tail)


def _pairs() -> list[tuple[Path, Path]]:
    """The first two neighbouring pairs of files of each tool."""
    by: dict[str, list[Path]] = {}
    for p in _inputs():
        by.setdefault(_tool(p), []).append(p)
    return [(fs[i], fs[i + 1]) for _tool_name, fs in sorted(by.items())
            for i in range(min(2, len(fs) - 1))]


def _rel(path: Path) -> str:
    return str(path.relative_to(CASES))


def _run(args: list[str]) -> str:
    """Run envlock in ``CASES``'s parent with each input named ``cases/...``: a path of the
    same length on every checkout, so that wrapping at ``--width`` does not move with where
    the checkout lies (``/work/shared`` here, ``/check/work/shared`` in CI)."""
    here = os.getcwd()
    os.chdir(CASES.parent)
    try:
        res = CliRunner().invoke(cli, [_short(a) for a in args])
    finally:
        os.chdir(here)
    return f"$ envlock {' '.join(_short(a) for a in args)}\n" \
           f"exit {res.exit_code}\n{res.output}"


def _short(arg: str) -> str:
    return arg.replace(str(CASES), "cases") if arg.startswith(str(CASES)) else arg


def _check(name: str, text: str) -> None:
    golden = GOLDEN / (name.replace("/", "__") + ".txt")
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
        return
    assert golden.is_file(), f"no golden output {golden.name}: run with ENVLOCK_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", _inputs(), ids=_rel)
def test_show_and_diff_itself_unchanged(path: Path) -> None:
    text = _run(["show", "--width", "100", str(path)]) + \
        _run(["diff", "--width", "100", str(path), str(path)])
    _check(_rel(path), text)


@pytest.mark.parametrize("pair", _pairs(), ids=lambda pr: f"{_rel(pr[0])}~{pr[1].name}")
def test_diff_of_two_files_of_one_tool_unchanged(pair: tuple[Path, Path]) -> None:
    a, b = pair
    _check(f"pair__{_rel(a)}~{b.name}", _run(["diff", "--width", "100", "--all", str(a), str(b)]))


def test_every_golden_file_is_used() -> None:
    """A golden file no test writes is stale (a renamed or removed case)."""
    names = {_rel(p).replace("/", "__") + ".txt" for p in _inputs()}
    names |= {f"pair__{_rel(a)}~{b.name}".replace("/", "__") + ".txt" for a, b in _pairs()}
    assert {p.name for p in GOLDEN.glob("*.txt")} == names
