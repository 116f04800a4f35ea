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
    # uv export --frozen: "Exact Git revision `0dac…` does not match precise commit `b270…`"
    "inline__git_secret_mismatch__uv.lock": "does not match precise commit",
    # uv's ecosystem snapshot with its versions filtered to "3.11.[X]": not PEP 440, which
    # uv's own reader (and envlock's) refuses
    "ecosystem__warehouse__uv.lock": "package[160] (orjson).version: '3.11.[X]' is not a version",
    # conda-lock's explicit render without @EXPLICIT: conda reads its URLs as MatchSpecs
    # (tests/formats/test_explicit_oracle.py)
    "test-lockfile__test.lock": "without its @EXPLICIT line",
    "test-lockfile-with-auth__test.lock": "without its @EXPLICIT line",
}

def _files() -> list[pytest.param]:
    out = []
    for p in sorted(x for d in (CASES / "peers", CASES / "foreign") if d.is_dir()
                    for x in d.rglob("*") if x.is_file()):
        if p.suffix == ".md" or p.name == "index.tsv":
            continue
        out.append(pytest.param(p, id=str(p.relative_to(CASES))))
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


def test_an_empty_lock_is_identical_to_itself_and_differs_from_a_full_one() -> None:
    """rattler reads v6__empty-lock.yml as a lock with no package (the oracle); two empty
    complete listings are one empty environment (exit 0, said), not "nothing to compare"."""
    import rattler

    empty = CASES / "peers" / "rattlerlock" / "v6__empty-lock.yml"
    full = CASES / "peers" / "rattlerlock" / "v4__python-lock.yml"
    lock = rattler.LockFile.from_path(empty)
    assert lock.environments() and all(not env.packages_by_platform()
                                       for _, env in lock.environments())
    same = CliRunner().invoke(cli, ["diff", str(empty), str(empty)])
    assert same.exit_code == 0, same.output
    assert "neither lists a package" in " ".join(same.output.split())
    other = CliRunner().invoke(cli, ["diff", str(empty), str(full)])
    assert other.exit_code == 1, other.output
