"""A console for piped text output that writes what :class:`rich.console.Console` would, without
importing rich (~15 ms of a diff's start-up, and rich's per-print set-up).

Only for output that is not a terminal (:func:`plain_console` says when: then rich has no
colour system and writes its text unstyled), and only for the prints :mod:`envlock.render.
difftext` makes: texts printed with ``soft_wrap=True`` (rich 13 neither wraps, crops nor
strips them: ``Text.wrap`` with overflow ``"ignore"``), and lines printed without it, which
rich wraps at the width (:func:`_divide`: its word wrap, for words that fit a line).
:meth:`PlainConsole.exact` says whether every print is one this class renders as rich does
(no tab, which rich expands; no character of two cells; no word wider than the console in a
line rich wraps); when not, the caller renders with rich instead.  Control codes rich strips from a text (bell,
backspace, vertical tab, form feed, carriage return: ``rich.control.STRIP_CONTROL_CODES``) are
stripped here too.  ``tests/diff/test_plainconsole.py`` holds the two byte for byte.
"""

from __future__ import annotations

import builtins
import os
import re
import sys

__all__ = ["PlainConsole", "plain_console", "plain_text"]

#: the control codes rich's ``Text`` strips (``rich.control.STRIP_CONTROL_CODES``)
_STRIP = {7: None, 8: None, 11: None, 12: None, 13: None}
#: characters from U+1100 on (where East Asian wide ones, two cells, begin) that take one cell
#: (``rich.cells.cell_len``): the arrows, dashes and signs envlock's own texts use
_NARROW = {ord(c): None for c in "–—…→↔≤≥─×"}


def _cells_are_chars(text: str) -> bool:
    """Whether every character of ``text`` takes one cell (or none) and none is a tab."""
    if "\t" in text:
        return False
    return text.isascii() or not text or max(text) < "\u1100" or max(
        text.translate(_NARROW) or " ") < "\u1100"


def plain_text(text: str, style: str = "") -> str:
    """What :class:`PlainConsole` prints for ``rich.text.Text(text, style=style)``: the text
    (a console without a colour system writes no style)."""
    return text


def rich_width(width: int | None) -> int:
    """The width ``rich.console.Console(width=width)`` takes on Linux outside Jupyter, for a
    console that is not a terminal: ``width``, else ``$COLUMNS`` (digits), else the size of
    the first of stdin, stdout, stderr that is a terminal, else 80 (rich 13's ``Console.size``).
    """
    if width is not None:
        return width
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    size = None
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return size or 80


def plain_console(width: int | None) -> PlainConsole | None:
    """A :class:`PlainConsole` when rich would write to ``sys.stdout`` without a terminal
    (``Console.is_terminal`` false: stdout is no tty, ``TTY_COMPATIBLE`` is not ``1`` and
    ``FORCE_COLOR`` is unset or empty, or ``TTY_COMPATIBLE`` is ``0``; not in IPython/IDLE);
    ``None`` otherwise (rich renders)."""
    env = os.environ
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return None
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    tty_compatible = env.get("TTY_COMPATIBLE", "")
    if tty_compatible == "1":
        return None
    if tty_compatible != "0":
        if env.get("FORCE_COLOR"):
            return None
        try:
            if sys.stdout.isatty():
                return None
        except (ValueError, AttributeError):
            pass  # closed: rich says "not a terminal" too
    return PlainConsole(rich_width(width))


class PlainConsole:
    """The prints of a text diff, kept until :meth:`text` joins them as rich would write them.

    :ivar width: the width rich would lay out for (:func:`rich_width`).
    """

    is_terminal = False

    def __init__(self, width: int) -> None:
        self.width = width
        self._lines: list[str] = []
        self._exact = True

    def print(self, obj: str = "", *, soft_wrap: bool = False) -> None:
        """``Console.print(Text(obj), soft_wrap=soft_wrap)``."""
        text = obj.translate(_STRIP)
        if not _cells_are_chars(text):
            self._exact = False
        if not soft_wrap and len(text) > self.width:
            lines = _divide(text, self.width) if "\n" not in text else None
            if lines is None:
                self._exact = False
            else:
                text = "\n".join(lines)
        self._lines.append(text)

    def exact(self) -> bool:
        """Whether every print so far is written here as rich writes it."""
        return self._exact

    def text(self) -> str:
        """Everything printed, each print ended by a newline."""
        return "".join(line + "\n" for line in self._lines)


#: a word and the blanks after it (``rich._wrap.re_word``)
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING = re.compile(r"\s+$")


def _divide(text: str, width: int) -> list[str] | None:
    """The lines rich wraps a one-line ``text`` of one-cell characters into at ``width``
    (``rich._wrap.divide_line``, then ``Text.rstrip_end`` and the crop to the width of each
    line), or ``None`` when a word is wider than the width (rich folds it: left to rich)."""
    breaks: list[int] = []
    offset = 0
    for m in _WORD.finditer(text):
        start, word = m.start(), m.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            return None
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    out = []
    for a, b in zip([0, *breaks], [*breaks, len(text)], strict=True):
        line = text[a:b]
        if len(line) > width:
            blanks = _TRAILING.search(line)
            if blanks:
                line = line[: len(line) - min(len(blanks.group(0)), len(line) - width)]
            line = line[:width]
        out.append(line)
    return out
