"""Every real file in ``shared/cases/peers`` and ``shared/cases/foreign``: ``diff F F`` says
identical (exit 0) and ``show F`` prints a summary, or — a file invalid for its own tool — both
give one ``Error:`` line naming the real fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

CASES = Path("/work/shared/cases")
_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else CASES

#: files invalid for their own tool, and the fault the one error line names.
INVALID = {
    "incompatible_lock__poetry.lock": "lock-version '999.0' is not supported",
    "pip__pylock.invalid.toml": "no lock-version",
    "conda-lock__forward-compatible-lock.yml": "unknown version 1000",
    "v7__missing_platform.yml": "uses platform 'UNKNOWN', which is not in 'platforms'",
}

#: known gaps: locks with no package at all, whose ``diff F F`` is "nothing to compare" (exit 2)
#: where it should be exit 0.  Strict: each is an expected failure until that rule changes,
#: then this list must shrink.
GAPS = {"v6__empty-lock.yml", "inline__lock_writes_without_package_metadata__1__uv.lock",
        "uvexport__pep_751_relative_and_absolute_paths__1.pylock.toml"}


def _files() -> list[pytest.param]:
    out = []
    for p in sorted(x for d in (CASES / "peers", CASES / "foreign") if d.is_dir()
                    for x in d.rglob("*") if x.is_file()):
        if p.suffix == ".md" or p.name == "index.tsv":
            continue
        marks = [pytest.mark.xfail(strict=True, reason="known reader gap")] if p.name in GAPS else []
        out.append(pytest.param(p, id=str(p.relative_to(CASES)), marks=marks))
    return out


@pytest.mark.parametrize("path", _files())
def test_diff_itself_and_show(path: Path) -> None:
    runner = CliRunner()
    diff = runner.invoke(cli, ["diff", str(path), str(path)])
    show = runner.invoke(cli, ["show", str(path)])
    if path.name in INVALID:
        for res in (diff, show):
            lines = res.output.strip().splitlines()
            assert res.exit_code == 2 and len(lines) == 1, res.output
            assert lines[0].startswith("Error: ") and INVALID[path.name] in lines[0], res.output
        return
    assert diff.exit_code == 0, diff.output
    assert "Differences (0)" in diff.output
    assert "Pkg(" not in diff.output and " None" not in diff.output
    assert show.exit_code == 0, show.output
    text = show.output
    assert "Traceback" not in text and "Pkg(" not in text
    if "[envlock]" not in path.read_text(errors="replace")[:4096]:
        assert "kind: " in text and "packages: " in text and "python: " in text, text
