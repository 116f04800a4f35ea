"""The git probe on real repositories made in the test."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.probes.git import probe_git
from envlock.probes.world import World

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "train.py").write_text("lr = 0.1\n")
    git(r, "add", "train.py")
    git(r, "commit", "-qm", "first")
    git(r, "tag", "v1.0")
    git(r, "remote", "add", "origin", "https://alice:ghp_SECRETTOKEN123@github.com/lab/proj.git")
    git(r, "remote", "add", "backup", "git@gitlab.example.org:lab/proj.git")
    return r


def test_clean_checkout(repo: Path) -> None:
    info = probe_git(World(environ=ENV), path=repo / ".")
    assert info.status == "ok"
    assert info.path == str(repo)
    assert info.commit == git(repo, "rev-parse", "HEAD")
    assert info.branch == "main"
    assert info.describe == "v1.0"
    assert info.dirty is False
    assert info.untracked == 0
    assert info.diff_sha256 is None


def test_dirty_checkout_and_diff_hash(repo: Path) -> None:
    (repo / "train.py").write_text("lr = 0.2\n")
    (repo / "notes.txt").write_text("x")
    (repo / "more.txt").write_text("y")
    info = probe_git(World(environ=ENV), path=repo)
    assert info.dirty is True
    assert info.untracked == 2
    assert info.describe == "v1.0-dirty"
    diff = subprocess.run(["git", "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"], cwd=repo,
                          env=ENV, capture_output=True, check=True, timeout=60).stdout
    assert info.diff_sha256 == hashlib.sha256(diff).hexdigest()


def test_subdirectory_and_detached_head(repo: Path) -> None:
    sub = repo / "src"
    sub.mkdir()
    git(repo, "checkout", "-q", "--detach")
    info = probe_git(World(environ=ENV), path=sub)
    assert info.path == str(repo)
    assert info.branch is None
    assert info.commit == git(repo, "rev-parse", "HEAD")


def test_remote_credentials_stripped(repo: Path) -> None:
    info = probe_git(World(environ=ENV), path=repo)
    assert [(r.name, r.url) for r in info.remotes] == [
        ("backup", "git@gitlab.example.org:lab/proj.git"),
        ("origin", "https://github.com/lab/proj.git"),
    ]


def test_no_commit_yet(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    info = probe_git(World(environ=ENV), path=tmp_path)
    assert info.status == "ok"
    assert info.commit is None
    assert info.describe is None


def test_not_a_repository(tmp_path: Path) -> None:
    info = probe_git(World(environ={**ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}), path=tmp_path)
    assert info.status == "absent"
    assert "not a git repository" in info.error


def test_git_missing(tmp_path: Path) -> None:
    info = probe_git(World(environ={"PATH": str(tmp_path)}), path=tmp_path)
    assert info.status == "absent"
    assert info.error == "git is not installed"


def test_git_hanging_times_out(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nsleep 30\n")
    (fake / "git").chmod(0o755)
    info = probe_git(World(environ={"PATH": f"{fake}:/usr/bin:/bin"}, timeout=0.5), path=tmp_path)
    assert info.status == "timeout"
    assert "no answer within 0.5 s" in info.error


def test_observing_takes_no_index_lock(repo: Path) -> None:
    """GIT_OPTIONAL_LOCKS=0: a snapshot never rewrites the index (the observer doesn't perturb)."""
    (repo / "train.py").write_text("lr = 0.3\n")
    index = repo / ".git" / "index"
    before = index.stat().st_mtime_ns
    os.utime(repo / "train.py", None)
    probe_git(World(environ=ENV), path=repo)
    assert index.stat().st_mtime_ns == before


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}).stdout


def test_save_patch_applies_to_the_recorded_commit(tmp_path: Path) -> None:
    """git itself is the oracle: the patch, applied to a clone at [git] commit, gives the tree."""
    import hashlib

    import envlock

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text("lr = 0.1\n")
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 4)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    (repo / "train.py").write_text("lr = 0.01  # tuned\n")
    (repo / "weights.bin").write_bytes(bytes(reversed(range(256))) * 4)
    (repo / "notes new.txt").write_text("untracked\n")
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, "-m", "envlock", "snapshot", "-q", "--python", sys.executable,
                        "--repo", str(repo), "--save-patch", "-o", str(out / "manifest.toml")],
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = envlock.load(str(out / "manifest.toml"))
    patch = out / "manifest.patch"
    assert m.git.patch == "manifest.patch" and m.git.patch_note is None
    assert m.git.patch_sha256 == hashlib.sha256(patch.read_bytes()).hexdigest()
    text = patch.read_text()
    assert "# untracked files (names only, not in the diff): 1\n#   notes new.txt\n" in text
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, timeout=60)
    _git(clone, "checkout", "-q", m.git.commit)
    _git(clone, "apply", "--binary", str(patch))
    assert (clone / "train.py").read_text() == "lr = 0.01  # tuned\n"
    assert (clone / "weights.bin").read_bytes() == (repo / "weights.bin").read_bytes()
    # No force: the patch beside an existing one is refused like the manifest.
    again = subprocess.run([sys.executable, "-m", "envlock", "snapshot", "-q", "--python",
                            sys.executable, "--repo", str(repo), "--save-patch", "-o",
                            str(out / "manifest.toml")], check=False, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1


def test_save_patch_over_the_cap_says_so(tmp_path: Path) -> None:
    from envlock.probes.git import make_patch

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    (repo / "a.txt").write_text("b\n" * 1000)
    head = _git(repo, "rev-parse", "HEAD").strip()
    data, note = make_patch(str(repo), head, cap=100)
    assert note is not None and "over the cap of 100 bytes: not saved" in note
    assert b"diff --git" not in data and b"# INCOMPLETE: the diff is" in data


def test_untracked_counts_files_as_git_ls_files_does_and_the_patch_header_agrees(repo: Path) -> None:
    """``[git] untracked`` and the ``--save-patch`` header count one list: every untracked, not
    ignored file (``git ls-files --others --exclude-standard``, the oracle), a new directory's
    files each — not 1 for the directory as ``--untracked-files=normal`` would."""
    from envlock.probes.git import make_patch

    (repo / "data").mkdir()
    for name in ("a.csv", "b.csv", "c.csv"):
        (repo / "data" / name).write_text("1\n")
    (repo / "notes.txt").write_text("x")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "run.log").write_text("ignored\n")
    oracle = git(repo, "ls-files", "--others", "--exclude-standard").splitlines()
    assert len(oracle) == 5  # 3 csv, notes.txt, .gitignore
    assert probe_git(World(environ=ENV), path=repo).untracked == len(oracle)
    data, _note = make_patch(str(repo), git(repo, "rev-parse", "HEAD"), environ=ENV)
    assert f"# untracked files (names only, not in the diff): {len(oracle)}\n".encode() in data


def test_envlock_outputs_in_the_checkout_are_not_untracked_code(repo: Path, tmp_path: Path) -> None:
    """Two snapshots of one unchanged checkout, the first written into it: the first manifest,
    its patch, a run directory's files are envlock's outputs about the code, not code — the
    second snapshot's ``[git]`` equals the first's and ``diff`` finds no difference (exit 0).
    A TOML file that is not envlock's still counts."""
    from click.testing import CliRunner

    from envlock.cli import cli

    def snap(name: str) -> None:
        r = CliRunner().invoke(cli, ["snapshot", "--python", sys.executable, "--repo", str(repo),
                                     "--save-patch", "-o", str(repo / name), "-q"])
        assert r.exit_code == 0, r.output

    snap("first.toml")
    (repo / "runs" / "1").mkdir(parents=True)
    (repo / "runs" / "1" / "run.toml").write_text('[run]\nschema = 1\noutcome = "succeeded"\n')
    (repo / "runs" / "1" / ".envlock-run.lock").write_text("")
    snap("second.toml")
    import envlock

    first, second = envlock.load(repo / "first.toml").git, envlock.load(repo / "second.toml").git
    assert first is not None and second is not None
    assert (first.untracked, first.dirty) == (second.untracked, second.dirty) == (0, False)
    r = CliRunner().invoke(cli, ["diff", str(repo / "first.toml"), str(repo / "second.toml")])
    assert r.exit_code == 0, r.output
    (repo / "config.toml").write_text("[train]\nlr = 0.1\n")  # the user's own file: code
    assert probe_git(World(environ=ENV), path=repo).untracked == 1
