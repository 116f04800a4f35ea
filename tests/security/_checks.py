"""Assertions the crafted-input tests share."""

from __future__ import annotations


def one_error(result: object, *fragments: str) -> None:
    """Exit 2 and exactly one line of output, ``Error: …`` with every fragment in it."""
    out = result.output.strip().splitlines()  # type: ignore[attr-defined]
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert len(out) == 1 and out[0].startswith("Error: "), out
    for f in fragments:
        assert f in out[0], out[0]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
