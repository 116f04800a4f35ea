"""Write a diff as text on a rich console (rich imported here only, when a diff is printed to a
terminal; piped, on :class:`envlock.render.plainconsole.PlainConsole`, which writes the same).

The sections and their order are those of :mod:`envlock.render.diffreport`'s JSON and
markdown: the code, the most likely explanations, the differences by area, what is identical
(counts) and what could not be compared.  Tables are laid out here (:func:`layout_columns`),
not by rich, and cells are cut only for a terminal (:func:`ellipsize`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from envlock.diff.engine import ManyDiff, PairDiff
from envlock.diff.facts import Pkg, display
from envlock.render.plainconsole import PlainConsole, plain_text
from envlock.render.diffreport import (NO_MAJORITY, _md_summary, _named, _no_code, _short,
                                       _spread_first, to_json, varying_cells)

__all__ = ["render_text", "layout_columns", "ellipsize", "compact_values"]


def compact_values(values: tuple[Any, Any], *, full: bool = False) -> list[str]:
    """The two values of a change as short table cells: for packages only what differs
    besides the version (the build string, the channel); commit ids and hashes shortened
    unless ``full`` (piped output, which is never cut).  The JSON keeps the whole values."""
    a, b = values
    if isinstance(a, Pkg) and isinstance(b, Pkg):
        def short(p: Pkg) -> str:
            extra = []
            if p.build and b.build != a.build:
                extra.append(p.build)
            if p.channel and b.channel != a.channel:
                extra.append(p.channel)
            text = p.version or "(any version)"
            return f"{text} ({', '.join(extra)})" if extra else text

        return [short(a), short(b)]
    show = display if full else (lambda v: _short(display(v)))
    return [show(v) if v is not None else "(absent)" for v in values]


#: a version-like word: ``0.3.21``, ``2.13.0+cpu``, ``(12.4)``.
_VERSION = re.compile(r"[(]?v?\d+(?:\.\d+)+\S*")


def ellipsize(text: str, width: int) -> str:
    """Shorten ``text`` to ``width`` characters with ``…``, keeping what a reader needs.

    A cell with version numbers keeps every version whole and shortens the other words,
    longest first (``openblas 0.3.21 (ilp64)`` → ``open… 0.3.21 (ilp64)``); otherwise the
    middle is replaced, and a path keeps its file name whole when that fits
    (``/cvmfs/…/libgomp.so.1``).  Used only for a terminal: piped output is never cut.
    """
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    words = text.split(" ")
    keep = [bool(_VERSION.fullmatch(w)) for w in words]
    if any(keep) and "/" not in text and sum(len(w) + 1 for w, k in zip(words, keep, strict=True)
                                             if k) <= width:
        while len(" ".join(words)) > width:
            cands = [i for i, w in enumerate(words) if not keep[i] and w != "…"]
            if not cands:
                break
            i = max(cands, key=lambda j: (len(words[j]), -j))
            excess = len(" ".join(words)) - width
            w = words[i]
            words[i] = w[:max(0, len(w) - excess - 1)] + "…"
        out = " ".join(words)
        if len(out) <= width:
            return out
    tail = (width - 1) - width // 2
    if "/" in text:  # keep the file name whole when it fits
        tail = max(tail, min(len(text.rsplit("/", 1)[1]) + 1, width - 2))
    return text[:width - 1 - tail] + "…" + text[len(text) - tail:]


def layout_columns(head: list[str], rows: list[list[str]], width: int, gap: int = 2
                   ) -> list[str]:
    """Lay out a table as text lines: header, a rule, then one line per row.

    Columns get their natural width.  When the table is wider than ``width``, the widest of
    the key and value columns (all but the first and the last two) is narrowed, one
    character at a time, down to 20 characters or its header up to 30 (the key to 24),
    which it never goes below; short columns (area,
    change, class) keep their width.  A cell or header wider than its column is shortened
    in the middle with ``…`` (:func:`ellipsize`), never wrapped, so a file name or a path
    stays on one line.  Rich's ``Table`` does more, but takes ~3 ms per row, which a 500-row
    diff cannot afford.
    """
    n = len(head)
    widths = [max([len(head[i])] + [len(r[i]) for r in rows]) for i in range(n)]
    shrink = [i for i in range(1, n) if n <= 4 or i < n - 2]
    # a value column keeps its header (an input's file name) whole up to 30 characters
    floor = {i: min(widths[i], 24 if i == 1 else max(20, min(len(head[i]), 30)))
             for i in shrink}
    while sum(widths) + gap * (n - 1) > width:
        i = max(shrink, key=lambda j: (widths[j] - floor[j], j))
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    sep = " " * gap

    def line(cols: list[str]) -> str:
        return sep.join(ellipsize(c, widths[i]).ljust(widths[i])
                        for i, c in enumerate(cols)).rstrip()

    out = [line(head), "─" * min(width, sum(widths) + gap * (n - 1))]
    out.extend(line(r) for r in rows)
    return out


#: the whitespace ``textwrap`` turns into spaces (its ``_whitespace``), space aside.
_OTHER_SPACE = "\t\n\x0b\x0c\r"
_WRAPPERS: dict[tuple[int, int, bool], Any] = {}


def _wrap(text: str, width: int, hang: int) -> list[str]:
    """``textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False,
    subsequent_indent=" " * hang)``, one wrapper per layout; a text with no whitespace but
    spaces skips the whitespace translation, which would change nothing (a diff of 10,000
    packages spent 60 ms there)."""
    plain = not any(c in text for c in _OTHER_SPACE)
    w = _WRAPPERS.get((width, hang, plain))
    if w is None:
        import textwrap

        w = _WRAPPERS[(width, hang, plain)] = textwrap.TextWrapper(
            width=width, break_long_words=False, break_on_hyphens=False,
            subsequent_indent=" " * hang, replace_whitespace=not plain, expand_tabs=not plain)
    return w.wrap(text)  # type: ignore[no-any-return]


class _Out:
    """Where a text diff goes: the console, its width, whether cells may be cut, and what a
    text is made with (rich's ``Text``, or a plain string for a plain console).  A plain class,
    not a dataclass: ``dataclasses`` would build its methods with ``exec`` on every import."""

    __slots__ = ("console", "width", "cut", "text")

    def __init__(self, console: Any, width: int, cut: bool, text: Any) -> None:
        self.console, self.width, self.cut, self.text = console, width, cut, text

    def heading(self, title: str) -> None:
        self.console.print(self.text(title, style="bold underline"))

    def say(self, text: str, indent: int, style: str = "", hang: int = 0) -> None:
        """Print ``text`` wrapped at spaces to the console's width, indented by ``indent``
        and its later lines by ``hang`` more."""
        room = max(self.width - indent, 20)
        # a backticked command that fits on a line is never split: it is copied as one line
        glued = re.sub(r"`[^`]+`", lambda m: m.group(0).replace(" ", "\0")
                       if len(m.group(0)) <= room - hang else m.group(0), text)
        lines = [x.replace("\0", " ") for x in _wrap(glued, room, hang)]
        for line in lines or [""]:
            self.console.print(self.text(" " * indent + line, style=style), soft_wrap=True)

    def explanations(self, exps: list[dict[str, Any]], more: int, indent: str = "  ") -> None:
        """The ranked explanations (title, why, do), then how many more ``--all`` shows."""
        pad = len(indent)
        for e in exps:
            self.say(f"{e['rank']}. {e['title']}", pad, "bold", 3)
            self.say(f"why: {e['why']}", pad + 3, "", 5)
            self.say(f"do:  {e['do']}", pad + 3, "cyan", 5)
        if more:
            self.console.print(self.text(f"{indent}({more} more; use --all)"))
        if not exps:
            self.console.print(self.text(f"{indent}(none)"))

    def table(self, head: list[str], rows: list[list[Any]],
              one_line: Callable[[list[str]], str]) -> None:
        """A table laid out to the width, or, when nothing may be cut and it is wider than
        the console, one ``one_line`` per row, wrapped at spaces."""
        cells = [[str(c if c is not None else "(absent)") for c in r] for r in rows]
        natural = sum(max([len(head[i])] + [len(r[i]) for r in cells])
                      for i in range(len(head))) + 2 * (len(head) - 1)
        # Rows go out as one text each time, not one print a row: a diff of 10,000
        # packages spent most of its time in rich's per-call set-up.
        if not self.cut and natural > self.width:
            wrapped = []
            for r in cells:
                wrapped.extend(_wrap(one_line(r), max(self.width - 2, 20), 6) or [""])
            self.console.print(self.text("\n".join("  " + w for w in wrapped)), soft_wrap=True)
            return
        lines = layout_columns(head, cells, self.width if self.cut else natural)
        self.console.print(self.text(lines[0], style="bold"), soft_wrap=True)
        self.console.print(self.text(lines[1], style="dim"), soft_wrap=True)
        if lines[2:]:
            self.console.print(self.text("\n".join(lines[2:])), soft_wrap=True)


def _code_and_context(out: _Out, doc: dict[str, Any]) -> None:
    """The code section (one line a scope, red where it differs), then the context."""
    for r in doc["code"]:
        out.say(f"{r['scope']}: {r['text']}", 2, "red" if r["differs"] else "green", 4)
    if not doc["code"]:
        out.say(_no_code(doc), 2, "", 2)
    out.console.print()
    if doc["context"]:
        out.heading("Context")
        for c in doc["context"]:
            out.say(c, 2, "", 4)
        out.console.print()


def _pair_sections(out: _Out, doc: dict[str, Any], result: PairDiff) -> None:
    """A diff of two inputs: its explanations, then its differences as a table."""
    names = [i["label"] for i in doc["inputs"]]
    out.heading("Most likely explanations")
    out.explanations(doc["explanations"], doc["more_explanations"])
    out.console.print()
    out.heading(f"Differences ({len(doc['differences'])})")
    if doc["differences"]:
        out.table(["area", "key", names[0], names[1], "change", "class"],
                  [[c.area, c.key, *compact_values(c.values, full=not out.cut), c.size, c.cls]
                   for c in result.changes],
                  lambda r: f"{r[0]} {r[1]}: {r[2]} → {r[3]} ({r[4]}, {r[5]})")


def _many_sections(out: _Out, doc: dict[str, Any]) -> None:
    """A diff of many inputs: the facts without a majority (first when they hold the
    likeliest explanation), the deviants' explanations, then the facts that vary."""
    nm = doc["no_majority"]

    def spread() -> None:
        out.heading(NO_MAJORITY)
        out.explanations(nm["explanations"], nm["more_explanations"])
        out.console.print()

    first = _spread_first(doc)
    if first:
        spread()
    out.heading(f"Inputs that deviate from the majority ({len(doc['deviants'])})")
    for d in doc["deviants"]:
        out.console.print(out.text(f"  {_named(d)}", style="bold"))
        out.explanations(d["explanations"], d["more_explanations"], indent="    ")
    if not doc["deviants"]:
        out.console.print(out.text("  (none)"))
    out.console.print()
    if nm["explanations"] and not first:
        spread()
    out.heading(f"Facts that vary ({len(doc['varying'])})")
    if doc["varying"]:
        out.table(["area", "key", "majority (count)", "deviants"],
                  [varying_cells(v) for v in doc["varying"]],
                  lambda r: f"{r[0]} {r[1]}: {r[2]}" + (f"; {r[3]}" if r[3] else ""))


def _text_kind(console: Any) -> Any:
    """What a text is made with on ``console``: rich's ``Text``, or a plain string."""
    if isinstance(console, PlainConsole):
        return plain_text
    from rich.text import Text

    return Text


def render_text(result: PairDiff | ManyDiff, console: Any, *, show_all: bool = False,
                cut: bool | None = None) -> None:
    """Print the diff on a :class:`rich.console.Console`, or on a
    :class:`envlock.render.plainconsole.PlainConsole` (piped output, without rich).

    :param cut: whether table cells may be shortened to fit ``console.width`` (default: when
        the console is a terminal).  When false (output to a file or a pipe, the normal case
        on a cluster) nothing is cut: a table wider than the console becomes one fact per
        line, wrapped at spaces, so every value reaches the log whole.
    """
    text = _text_kind(console)
    doc = to_json(result, show_all=show_all)
    names = [i["label"] for i in doc["inputs"]]
    head = f"{names[0]} → {names[1]}" if len(names) == 2 else f"{len(names)} inputs"
    console.print(text(f"envlock diff: {head}", style="bold"))
    console.print()
    console.print(text("The code", style="bold underline"))
    out = _Out(console, console.width, bool(console.is_terminal) if cut is None else cut, text)
    _code_and_context(out, doc)
    if doc["mode"] == "pair":
        assert isinstance(result, PairDiff)
        _pair_sections(out, doc, result)
    else:
        _many_sections(out, doc)
    console.print()
    for line in _md_summary(doc):
        out.say(line.replace("**", ""), 0, "", 2)
