"""Everything ``envlock snapshot`` can do, ``envlock.snapshot()`` does from Python: the patch of
the uncommitted changes (``save_patch``) and the refusal of a program that is not Python; git is
the oracle of the patch, the CLI's output of the same inputs the oracle of the rule."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import envlock
from envlock.cli import cli
from envlock.errors import ArgumentsError, OutputExistsError, TargetError

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, timeout=60, env=GIT_ENV).stdout


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "train.py").write_text("lr = 0.1\n")
    _git(r, "add", ".")
    _git(r, "commit", "-qm", "one")
    (r / "train.py").write_text("lr = 0.01  # tuned\n")
    return r


def test_save_patch_from_python(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "run.toml"
    out.parent.mkdir()
    m = envlock.snapshot(python=sys.executable, repo=str(repo), output=out, save_patch=True,
                         stack=False, libraries=False)
    patch = out.with_suffix(".patch")
    assert m.git is not None and m.git.patch == "run.patch" and m.git.patch_note is None
    assert m.git.patch_sha256 == hashlib.sha256(patch.read_bytes()).hexdigest()
    m.write(out)
    assert envlock.load(str(out)).git.patch_sha256 == m.git.patch_sha256
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, timeout=60,
                   capture_output=True)
    _git(clone, "checkout", "-q", m.git.commit)
    _git(clone, "apply", "--binary", str(patch))
    assert (clone / "train.py").read_text() == "lr = 0.01  # tuned\n"
    with pytest.raises(OutputExistsError):  # create-or-fail, as the manifest
        envlock.snapshot(python=sys.executable, repo=str(repo), output=out, save_patch=True,
                         stack=False, libraries=False)
    m2 = envlock.snapshot(python=sys.executable, repo=str(repo), output=out, save_patch=True,
                          force=True, stack=False, libraries=False)
    assert m2.git.patch_sha256 == m.git.patch_sha256


def test_save_patch_needs_an_output_and_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(ArgumentsError, match="needs -o FILE"):
        envlock.snapshot(python=sys.executable, save_patch=True, stack=False, libraries=False)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ArgumentsError, match="is not a git checkout"):
        envlock.snapshot(python=sys.executable, repo=str(plain), output=tmp_path / "m.toml",
                         save_patch=True, stack=False, libraries=False)
    assert not (tmp_path / "m.patch").exists()
    # the command line says the same, as a usage error
    res = CliRunner().invoke(cli, ["snapshot", "-q", "--python", sys.executable, "--repo",
                                   str(plain), "--save-patch", "-o", str(tmp_path / "c.toml")])
    assert res.exit_code == 2
    assert "Error: --save-patch: the working directory (or --repo) is not a git checkout" \
        in res.output


@pytest.mark.parametrize("program", ["/bin/true", "script"])
def test_not_a_python_from_python(tmp_path: Path, program: str) -> None:
    """The library refuses what the CLI refuses, with the same line."""
    if program == "script":
        p = tmp_path / "env" / "bin" / "python"
        p.parent.mkdir(parents=True)
        p.write_text("#!/bin/sh\necho hello\n")
        p.chmod(0o755)
        program = str(p)
    m = envlock.snapshot(python=program, stack=False, libraries=False)  # recorded by default
    assert m.python is not None and m.python.status == "error"
    with pytest.raises(TargetError) as info:
        envlock.snapshot(python=program, stack=False, libraries=False, require_python=True)
    assert str(info.value).startswith(f"--python {program}: not a working Python interpreter (")
    res = CliRunner().invoke(cli, ["snapshot", "--python", program, "-o", "-"])
    assert res.exit_code == 2 and res.stderr == f"Error: {info.value}\n"
