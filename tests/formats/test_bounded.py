"""Bounded, safe reading everywhere: what no input file may do to ``diff``, ``show``,
``verify --lock``, ``restore`` and ``lock -f`` — hang (a FIFO), read gigabytes, expand a YAML
alias bomb, recurse without bound, or answer with anything but one ``Error:`` line that echoes at
most ~200 characters of the input."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock import formats
from envlock._io import MAX_INPUT_BYTES
from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.formats._load import load_toml, load_yaml

ROOT = Path(__file__).resolve().parents[2]
PYLOCK = ROOT / "fixtures" / "diff" / "pylock.toml"

COMMANDS = {
    "diff": lambda p: ["diff", str(p), str(PYLOCK)],
    "show": lambda p: ["show", str(p)],
    "verify --lock": lambda p: ["verify", "--lock", str(p)],
    "restore": lambda p: ["restore", str(p), "--prefix", str(p.parent / "env")],
    "lock -f": lambda p: ["lock", "-f", str(p), "-o", str(p.parent / "out"), "-p", "linux-64"],
}

BOMB = ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(9)))


def _one_error_line(argv: list[str], limit: float = 10.0) -> str:
    start = time.monotonic()
    res = CliRunner().invoke(cli, argv)
    assert time.monotonic() - start < limit
    assert res.exit_code == 2, (res.exit_code, res.output[-500:], res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, res.output[-800:]
    assert len(errors[0]) < 600
    return errors[0]


def _inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name → (file, what its one error line must say)."""
    out: dict[str, tuple[Path, str]] = {}
    fifo = tmp_path / "fifo" / "environment.yml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    out["fifo"] = (fifo, "is a FIFO (named pipe), not a regular file")
    d = tmp_path / "dir.yml"
    d.mkdir()
    out["directory"] = (d, "is a directory")
    big = tmp_path / "big" / "conda-lock.yml"
    big.parent.mkdir()
    with big.open("wb") as fh:  # sparse: the cap is checked before a byte is read
        fh.truncate(MAX_INPUT_BYTES + 1)
    out["over 64 MiB"] = (big, "too large")
    bomb = tmp_path / "bomb" / "environment.yml"
    bomb.parent.mkdir()
    bomb.write_text(BOMB + "dependencies: [numpy]\n")
    out["YAML alias bomb"] = (bomb, "aliases are bounded")
    for name, text in (("deep.toml", "x = " + "[" * 500 + "1" + "]" * 500 + "\n"),
                       ("deep.json", '{"envlock": ' + "[" * 3000 + "]" * 3000 + "}")):
        p = tmp_path / name
        p.write_text(text)
        out[f"500 levels ({name})"] = (p, "nested")
    bad = tmp_path / "utf8" / "pylock.toml"
    bad.parent.mkdir()
    bad.write_bytes(b'lock-version = "1.0"\n# caf\xe9\n')
    out["invalid UTF-8"] = (bad, "invalid UTF-8")
    return out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_hostile_files_are_one_line_errors(tmp_path: Path, command: str) -> None:
    for name, (path, says) in _inputs(tmp_path).items():
        if command == "lock -f" and path.suffix != ".yml":
            continue
        line = _one_error_line(COMMANDS[command](path))
        if command == "diff" and name == "directory":
            says = "directory holds no *.toml manifest"  # diff reads a directory of manifests
        assert says in line, (name, line)


def test_a_character_device_is_refused() -> None:
    line = _one_error_line(["diff", "/dev/zero", str(PYLOCK)])
    assert "character device" in line


def test_error_lines_echo_at_most_about_200_characters(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy==1.26.4\n" + "x" * 1_000_000 + " !!! not a requirement\n")
    line = _one_error_line(["diff", str(req), str(PYLOCK)])
    assert "line 2" in line and len(line) < 600
    env = tmp_path / "environment.yml"
    env.write_text("dependencies:\n  - 'numpy >=1 ' \n  - \"" + "é\\n" * 100_000 + "?\"\n")
    line = _one_error_line(["diff", str(env), str(PYLOCK)])
    assert len(line) < 600


def test_bounded_parsers_directly() -> None:
    with pytest.raises(ManifestError, match="aliases are bounded"):
        load_yaml(BOMB, "bomb.yml")
    with pytest.raises(ManifestError, match="refers to a collection that contains it"):
        load_yaml("a: &a [*a]\n", "self.yml")
    with pytest.raises(ManifestError, match="nested more than 100 levels"):
        load_toml("x = " + "[" * 101 + "]" * 101, "deep.toml")
    # brackets inside strings and comments do not count as nesting
    assert load_toml('x = "' + "[" * 500 + '" # ' + "{" * 500 + "\n", "s.toml") == {"x": "[" * 500}
    # and what a YAML document means is what PyYAML's safe loader makes of it
    import yaml

    text = (ROOT / "fixtures" / "diff" / "conda-lock.yml").read_text()
    assert load_yaml(text, "conda-lock.yml") == yaml.safe_load(text)


def test_a_bare_editable_option_and_a_non_list_pip_section(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy==1.26.4\n--editable\n")
    assert "--editable without a path or URL" in _one_error_line(["diff", str(req), str(PYLOCK)])
    env = tmp_path / "environment.yml"
    env.write_text("dependencies:\n  - numpy=1.26.4=py311h64a7726_0\n  - pip: 5\n")
    assert "pip must be a list" in _one_error_line(["diff", str(env), str(PYLOCK)])
    with pytest.raises(ManifestError):
        formats.read(env)
