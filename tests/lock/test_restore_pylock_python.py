"""``restore`` of a pylock gets the Python the lock was made for (``requires-python = ">=X.Y.Z"``,
as ``uv pip compile`` writes it from the locked interpreter), not whichever Python uv finds
first, and says so; a different ``--python-version`` is said too (issue 25)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

pytestmark = pytest.mark.usefixtures("offline_pip")


def _other_python() -> tuple[str, str]:
    """Debian's python3 and its version, when it is another patch level than this one's."""
    exe = "/usr/bin/python3"
    try:
        v = subprocess.run([exe, "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no /usr/bin/python3 here")
    if v == ".".join(map(str, sys.version_info[:3])):
        pytest.skip("/usr/bin/python3 is this Python's version")
    return exe, v


def _pylock(tmp_path: Path, wheel: Path, requires: str) -> Path:
    lock = tmp_path / "pylock.toml"
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock.write_text(f'lock-version = "1.0"\ncreated-by = "uv"\nrequires-python = "{requires}"\n\n'
                    f'[[packages]]\nname = "beta"\nversion = "2.5"\n'
                    f'wheels = [{{ url = "{wheel.as_uri()}", hashes = {{ sha256 = "{sha}" }} }}]\n')
    return lock


def _venv_version(prefix: Path) -> str:
    cfg = dict(line.split(" = ", 1) for line in (prefix / "pyvenv.cfg").read_text().splitlines()
               if " = " in line)
    return cfg.get("version_info") or cfg["version"]


def test_pylock_restores_the_python_it_was_locked_for(tmp_path, wheelhouse, h):
    _, deb = _other_python()
    lock = _pylock(tmp_path, wheelhouse / "beta-2.5-py3-none-any.whl", f">={deb}")
    plan = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(tmp_path / "rr")])
    assert plan.exit_code == 0, plan.output
    assert f"uv venv {tmp_path / 'rr'} --python {deb}" in plan.output
    assert f"locked for Python {deb}; the new venv gets exactly {deb}" in plan.output
    rr = tmp_path / "rr"
    done = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(rr), "--run"])
    assert done.exit_code == 0, done.output
    assert _venv_version(rr).startswith(deb)  # uv's own record of the interpreter it used
    assert h.installed(rr) == {"beta": "2.5"}
    # a verification report, as the manifest restores print: verify against the lock itself
    assert "# Came back exactly: 1 package(s)\n#   beta 2.5\n" in done.output
    assert "# Packages and Python that differ from the lockfile: none" in done.output


def test_a_pylock_restore_that_differs_says_so_and_exits_1(tmp_path, wheelhouse, h):
    """The report is verify's: a package changed after the install is a difference, exit 1."""
    lock = _pylock(tmp_path, wheelhouse / "beta-2.5-py3-none-any.whl", ">=3.8")
    rr = tmp_path / "rr"
    from envlock.lock._api import apply_restore, restore
    from envlock.lock._apply import verify_restored

    plan = restore([str(lock)], rr).plan
    assert apply_restore(plan).check.differs == ()
    subprocess.run([h.uv(), "pip", "install", "-q", "--python", str(rr / "bin/python"), "--no-index",
                    "--find-links", str(wheelhouse), "beta==2.0"], check=True, timeout=120)
    check = verify_restored(plan)
    assert check.exit_code == 1 and any("beta" in d and "2.0" in d for d in check.differs)
    assert "beta 2.5" not in check.exact


def test_another_version_asked_is_said(tmp_path, wheelhouse):
    _, deb = _other_python()
    mine = ".".join(map(str, sys.version_info[:3]))
    lock = _pylock(tmp_path, wheelhouse / "beta-2.5-py3-none-any.whl", f">={deb}")
    plan = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(tmp_path / "rr"),
                                    "--python-version", mine])
    assert plan.exit_code == 0, plan.output
    assert f"locked for Python {deb}; the new venv gets {mine}, as --python-version asks" in plan.output
    assert f"--python {mine}" in plan.output


def test_a_range_is_not_a_version(tmp_path, wheelhouse):
    """``>=3.8`` (a project's range, not the locked interpreter): uv's choice, nothing said."""
    lock = _pylock(tmp_path, wheelhouse / "beta-2.5-py3-none-any.whl", ">=3.8")
    plan = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(tmp_path / "rr")])
    assert plan.exit_code == 0 and "locked for Python" not in plan.output
    assert f"uv venv {tmp_path / 'rr'}\n" in plan.output
