"""The READMEs say what envlock does (issue 25): the English one's three workflows show real
output (re-run here and compared line by line), the Chinese one covers every command, the test
time and disk notes, and each command's exit statuses as its --help states them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from envlock.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EN = (ROOT / "README.md").read_text(encoding="utf-8")
ZH = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")


def _block(after: str) -> list[str]:
    """The console block that follows the line ``$ <after>`` in README.md (without "...")."""
    start = EN.index(f"$ {after}\n") + len(after) + 3
    body = EN[start: EN.index("```", start)]
    return [x for x in body.splitlines() if x.strip() and x.strip() != "..."]


def test_the_workflow_samples_are_real_output(tmp_path: Path) -> None:
    ml = tmp_path / "ml"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ml)], check=True, timeout=120)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}

    def envlock(*args: str, extra: dict[str, str] | None = None) -> str:
        r = subprocess.run([sys.executable, "-m", "envlock", *args], cwd=tmp_path,
                           env={**env, **(extra or {})}, capture_output=True, text=True, timeout=120)
        return r.stdout + r.stderr

    envlock("snapshot", "--python", "ml/bin/python", "-o", "ws01.toml")
    envlock("snapshot", "--python", "ml/bin/python", "-o", "node17.toml",
            extra={"OMP_NUM_THREADS": "1"})
    out = CliRunner().invoke(cli, ["diff", str(tmp_path / "ws01.toml"),
                                   str(tmp_path / "node17.toml")]).output
    lines = out.splitlines()
    want = _block("envlock diff ws01.toml node17.toml")
    i = lines.index(want[0])
    assert lines[i:i + len(want)] == want
    got = envlock("verify", "--python", "ml/bin/python", "--manifest", "node17.toml")
    for line in _block("envlock verify --python ml/bin/python --manifest node17.toml"):
        if line.startswith("envlock verify:"):  # its timing differs run to run
            line = line.split(" (")[0]
        assert line in got, (line, got)


def _commands() -> list[str]:
    return sorted(cli.list_commands(None))  # type: ignore[arg-type]


def test_the_chinese_readme_covers_every_command_and_the_notes() -> None:
    for name in _commands():
        assert f"envlock {name}" in ZH, name
    assert "6.7 GB" in ZH and "1.1 GB" in ZH and "5.6 GB" in ZH
    # the test-time note says what the English one says (its minutes, in Chinese numerals)
    numerals = {"two": "两", "three": "三", "four": "四", "five": "五", "six": "六", "seven": "七"}
    words = re.findall(r"\b(two|three|four|five|six|seven) minutes", EN)
    assert words and all(f"{numerals[w]}分钟" in ZH for w in words), words


def _help(name: str) -> str:
    return re.sub(r"\s+", " ", CliRunner().invoke(cli, [name, "--help"]).output)


def test_the_exit_statuses_are_those_of_the_commands() -> None:
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", ZH, re.M)}
    assert "0 culprit found, 1 GOOD and BAD agree" in _help("bisect")
    assert "找到了原因" in rows["bisect"] and "相同" in rows["bisect"]
    assert "Exit status: CMD's (128+n for signal n" in _help("run")
    assert "128+n" in rows["run"] and "--verify" in rows["run"]
    assert "0 identical, 1 different" in _help("diff")
    assert "3 no verdict" in _help("verify") and rows["verify"].count("3") == 1
    # the English README says the same
    assert "`bisect` 0 culprit found, 1 GOOD and BAD" in EN and "`run` the command's own status" in EN
