"""Text output of ``envlock verify``: one line when all is well, a short table otherwise.

rich is imported only to print the table.
"""

from __future__ import annotations

import sys
from typing import IO, Any

__all__ = ["summary_line", "print_report"]

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def summary_line(report: Any) -> str:
    """The one-line verdict, e.g. ``envlock verify: ok (14 checks, 0.21 s)``."""
    c = report.counts
    n = len(report.checks)
    where = f" against {report.manifest}" if report.manifest else ""
    if report.status == "ok":
        notes = f", {c['info']} note(s) in --format json" if c["info"] else ""
        return f"envlock verify: ok{where} ({n} checks, {report.duration:.2f} s{notes})"
    parts = [f"{c['error']} error(s)" if c["error"] else "", f"{c['warning']} warning(s)" if c["warning"] else ""]
    return f"envlock verify: {', '.join(p for p in parts if p)}{where} ({n} checks, {report.duration:.2f} s)"


def print_report(report: Any, *, file: IO[str] | None = None, width: int | None = None) -> None:
    """Print the findings as a table (severity | title [id], cause, evidence, fix), then the summary line."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    out = file or sys.stdout
    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for f in report.findings:
        what = Text()
        what.append(f.title, style="bold")
        what.append(f"  [{f.id}]", style="dim")
        if f.cause:
            what.append("\n" + f.cause)
        for e in f.evidence[:6]:
            what.append("\n  • " + e, style="dim")
        if len(f.evidence) > 6:  # noqa: PLR2004
            what.append(f"\n  • … {len(f.evidence) - 6} more (--format json)", style="dim")
        for i, fix in enumerate(f.fix):
            what.append(("\n  fix: " if i == 0 else "\n   or: ") + fix, style="green")
        table.add_row(Text(f.severity, style=_STYLE.get(f.severity, "")), what)
        table.add_row("", "")
    console.print(table)
    out.write(summary_line(report) + "\n")
