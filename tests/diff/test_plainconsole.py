"""The console that writes piped diffs without rich writes rich's bytes (rich is the oracle).

Every diff the tests of this folder compute is also checked this way (``conftest._check_plain``);
here are the prints a diff's text may make that are hard for it — control codes, tabs, wide
characters, lines wider than the console — and the rules that choose it (``FORCE_COLOR``,
``TTY_COMPATIBLE``, ``COLUMNS``), each against rich itself.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from envlock.render.plainconsole import PlainConsole, plain_console, rich_width

#: (text, soft_wrap) prints as difftext makes them
PRINTS = [
    ("envlock diff: a.toml → b.toml", False),
    ("", False),
    ("  1. numpy 1.26.4 → 2.0.0 (major)   ", True),
    ("bell\x07 back\x08space vt\x0b ff\x0c cr\r end", True),
    ("a line that is much wider than the console it is printed on, with blanks at its end      ",
     True),
    ("first\nsecond line that is wider than the console it is printed on, again  \n  third  ",
     True),
    ("  short heading", False),
    ("x" * 39, False),
    ("    (12 more; use --all)", False),
]


def _rich(prints: list[tuple[str, bool]], width: int) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, soft_wrap=False,
                      color_system=None, force_terminal=False)
    for text, soft in prints:
        console.print(Text(text, style="bold"), soft_wrap=soft)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("width", [40, 80, 200])
def test_prints_are_rich_bytes(width: int) -> None:
    plain = PlainConsole(width)
    for text, soft in PRINTS:
        plain.print(text, soft_wrap=soft)
    assert plain.exact() == (width >= 40)
    assert plain.text() == _rich(PRINTS, width)


@pytest.mark.parametrize("text", ["a\ttab", "wide 漢字 text", "a heading wider than the console is"])
def test_what_rich_would_change_is_left_to_rich(text: str) -> None:
    """A tab (rich expands it), a wide character (two cells) or a wrapped line wider than the
    console: not exact, so the command renders with rich."""
    plain = PlainConsole(20)
    plain.print(text, soft_wrap="heading" not in text)
    assert not plain.exact()
    if "heading" in text:
        assert _rich([(text, False)], 20) != plain.text()  # rich wraps it: rightly refused


@pytest.mark.parametrize("env, expect", [
    ({}, True), ({"FORCE_COLOR": "1"}, False), ({"FORCE_COLOR": ""}, True),
    ({"TTY_COMPATIBLE": "1"}, False), ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True),
])
def test_chosen_when_rich_sees_no_terminal(env: dict[str, str], expect: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    rich_terminal = Console(file=sys.stdout).is_terminal
    assert (plain_console(None) is not None) == expect == (not rich_terminal)


@pytest.mark.parametrize("columns, width", [(None, None), ("57", None), ("x", None),
                                            ("57", 100), (None, 41)])
def test_width_is_rich_width(columns: str | None, width: int | None,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    assert rich_width(width) == Console(file=io.StringIO(), width=width).width


def test_cli_piped_is_rich_output(tmp_path: Path) -> None:
    """``envlock diff a b | cat``: the bytes rich writes for the same result, in a real child
    process with its stdout a pipe."""
    from envlock.manifest._toml import dumps

    def manifest(numpy: str, omp: str) -> dict[str, object]:
        return {"envlock": {"schema": 1, "host": "node-with-a-rather-long-name-" + omp},
                "python": {"status": "ok", "version": "3.11.8"},
                "env": {"status": "ok", "vars": {"OMP_NUM_THREADS": omp,
                                                 "NOTE": "tab\there, bell\x07"}},
                "pip": {"status": "ok", "packages": [{"name": "numpy", "version": numpy}]}}

    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(dumps(manifest("1.26.4", "1")))
    b.write_text(dumps(manifest("2.0.0", "8")))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["COLUMNS"] = "80"
    piped = subprocess.run([sys.executable, "-m", "envlock", "diff", str(a), str(b)],
                           capture_output=True, text=True, timeout=60, env=env)
    assert piped.returncode == 1, piped.stderr
    from envlock.diff import diff
    from envlock.render.difftext import render_text

    console = Console(file=io.StringIO(), highlight=False, soft_wrap=False, width=80)
    render_text(diff([a, b]), console, cut=False)
    assert piped.stdout == console.file.getvalue()  # type: ignore[attr-defined]
