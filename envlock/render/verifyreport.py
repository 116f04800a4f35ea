"""Text output of ``envlock verify``: one line when all is well, a short table otherwise.

On a terminal the table is drawn with rich (imported only then, with colours); into a file or
pipe — a job's log — the same two columns are written as plain text, which costs nothing to
import and reads the same in ``less``.
"""

from __future__ import annotations

import sys
from typing import IO, Any

__all__ = ["summary_line", "print_report", "format_plain"]

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def summary_line(report: Any) -> str:
    """The one-line verdict, e.g. ``envlock verify: ok (14 checks, 0.21 s)``; when ok, the
    install each lock was read for is said in it too (``packages.lock-selection``: ``lockfile
    pixi.lock read for environment default, platform p2 (linux-64)``)."""
    c = report.counts
    n = len(report.checks)
    inputs = [x for x in (report.manifest, *report.locks) if x]
    where = f" against {', '.join(inputs)}" if inputs else ""
    if report.status == "ok":
        notes = f", {c['info']} note(s) in --format json" if c["info"] else ""
        notes += "".join(f"; {f.title}" for f in report.findings if f.id == "packages.lock-selection")
        return f"envlock verify: ok{where} ({n} checks, {report.duration:.2f} s{notes})"
    parts = [f"{c['error']} error(s)" if c["error"] else "", f"{c['warning']} warning(s)" if c["warning"] else ""]
    return f"envlock verify: {', '.join(p for p in parts if p)}{where} ({n} checks, {report.duration:.2f} s)"


def _lines(f: Any) -> list[tuple[str, str]]:
    """``(style, text)`` lines of one finding's right-hand column."""
    out = [("bold", f"{f.title}  [{f.id}]")]
    if f.cause:
        out.append(("", f.cause))
    out += [("dim", "  • " + e) for e in f.evidence[:6]]
    if len(f.evidence) > 6:
        out.append(("dim", f"  • … {len(f.evidence) - 6} more (--format json)"))
    out += [("green", ("  fix: " if i == 0 else "   or: ") + fix) for i, fix in enumerate(f.fix)]
    return out


#: the width of verify's plain text (a log, a pipe): the 80 columns of a terminal and a
#: Slurm log viewer; words longer than a line (paths) are kept whole.
PLAIN_WIDTH = 80


def format_plain(report: Any, width: int = PLAIN_WIDTH) -> str:
    """The table as plain text: severity in the first column, the finding wrapped in the second,
    every finding line at most ``width`` columns (unless one word is longer); the summary
    line is one line."""
    import textwrap

    text_width = max(40, width - 9)
    rows = []
    for f in report.findings:
        first = True
        for _style, line in _lines(f):
            hang = 2 if line.lstrip().startswith(("•", "fix:", "or:")) else 0
            indent = " " * (len(line) - len(line.lstrip(" ")) + hang)
            for piece in textwrap.wrap(line, text_width, subsequent_indent=indent, break_on_hyphens=False,
                                       break_long_words=False) or [""]:
                rows.append(f"{f.severity if first else '':<7}  {piece}")
                first = False
        rows.append("")
    rows.append(summary_line(report))  # one line, as scripts grep it
    return "\n".join(rows) + "\n"


def print_report(report: Any, *, file: IO[str] | None = None, width: int | None = None,
                 color: bool | None = None) -> None:
    """Print the findings as a table (severity | title [id], cause, evidence, fix), then the
    summary line; with rich on a terminal (``color`` None: when ``file`` is a TTY), plain text
    otherwise."""
    out = file or sys.stdout
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)())
    if not color:
        out.write(format_plain(report, width or PLAIN_WIDTH))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for f in report.findings:
        what = Text()
        for i, (style, line) in enumerate(_lines(f)):
            what.append(("\n" if i else "") + line, style=style)
        table.add_row(Text(f.severity, style=_STYLE.get(f.severity, "")), what)
        table.add_row("", "")
    console.print(table)
    out.write(summary_line(report) + "\n")
