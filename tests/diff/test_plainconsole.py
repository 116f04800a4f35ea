"""The console that writes piped diffs without rich writes rich's bytes (rich is the oracle).

Every diff the tests of this folder compute is also checked this way (``conftest._check_plain``);
here are the prints a diff's text may make that are hard for it — control codes, tabs, wide
characters, lines wider than the console — and the rules that choose it (``FORCE_COLOR``,
``TTY_COMPATIBLE``, ``COLUMNS``), each against rich itself.
"""

from __future__ import annotations

import io
import os
import re
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


@pytest.mark.parametrize("text", ["a\ttab", "wide 漢字 text", "a heading /with/a/path/longer/than/20"])
def test_what_rich_would_change_is_left_to_rich(text: str) -> None:
    """A tab (rich expands it), a wide character (two cells) or, in a line rich wraps, a word
    wider than the console (rich folds it): not exact, so the command renders with rich."""
    plain = PlainConsole(20)
    plain.print(text, soft_wrap="heading" not in text)
    assert not plain.exact()


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


def test_wrapped_lines_are_rich_bytes() -> None:
    """Lines rich wraps (headings, a deviant's name, long labels of two paths): rich's word
    wrap, at every width from 20 to 100, for texts of words, runs of blanks and words that
    exactly fill a line; a word wider than the console is left to rich."""
    import random

    rng = random.Random(26)
    texts = ["envlock diff: runs/4815162/n0001/manifest.toml → runs/4815162/n0002/manifest.toml",
             "  n0017 (runs/4815162/n0017.toml)   ", "a " * 40, "x" * 20 + " " + "y" * 20]
    for _ in range(200):
        texts.append("".join(rng.choice(["word", "  ", " ", "→", "…", "abcdefghij", "-", "x" * 19])
                             + rng.choice([" ", "  ", ""]) for _ in range(rng.randint(1, 30))))
    for width in range(20, 101, 7):
        for text in texts:
            plain = PlainConsole(width)
            plain.print(text)
            rich = _rich([(text, False)], width)
            if plain.exact():
                assert plain.text() == rich, (width, text)
            else:  # a word with the blanks before it (rich's words) wider than the console
                assert any(len(w.rstrip()) > width for w in re.findall(r"\s*\S+\s*", text))
