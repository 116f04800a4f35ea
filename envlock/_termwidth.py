"""The width click lays help text out for, found without importing click or :mod:`shutil`."""

from __future__ import annotations

import os
import sys

__all__ = ["help_width"]


def help_width() -> int:
    """The width click 8's ``HelpFormatter`` lays help out for, without importing click:
    ``max(min(columns, 80) - 2, 50)``, ``columns`` as :func:`shutil.get_terminal_size` finds it
    (``$COLUMNS``, else stdout's terminal, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
        columns = columns or 80
    return max(min(columns, 80) - 2, 50)
