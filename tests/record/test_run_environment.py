"""A run record (``run.toml``) read by ``show`` and ``diff`` brings the environment the run
ran in: the tables of the manifest it names, while that file is unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

from envlock.diff import diff
from envlock.manifest import load

from .conftest import envlock_run


def test_show_and_diff_of_run_records_see_their_environment(tmp_path: Path) -> None:
    r = envlock_run(["--dir", "a", "-q", "--python", sys.executable, "--", "true"], tmp_path)
    assert r.returncode == 0, r.stderr
    record, manifest = tmp_path / "a" / "run.toml", tmp_path / "a" / "manifest.toml"
    env = load(str(manifest))
    rec = load(str(record))
    assert rec.pip is not None and env.pip is not None
    assert [p.name for p in rec.pip.packages] == [p.name for p in env.pip.packages]
    assert "run" in rec.extra  # the record's own tables stay
    same = diff([str(record), str(manifest)])
    assert not same.differ
    # a manifest changed since the run is not the run's environment: not merged
    manifest.write_text(manifest.read_text().replace('version = "', 'version = "9', 1))
    assert load(str(record)).pip is None


def test_the_run_records_the_environment_of_the_interpreter_cmd_runs(tmp_path: Path) -> None:
    """`envlock run -- /envs/good/bin/python train.py` from a shell with another venv active:
    the snapshot is good's (chosen by "CMD"), not the active venv's."""
    import os
    import subprocess

    good = tmp_path / "good"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(good)], check=True, timeout=120)
    env = {**os.environ, "VIRTUAL_ENV": sys.prefix}  # another environment is "active"
    r = envlock_run(["--dir", "r", "-q", "--", str(good / "bin" / "python"), "-c", "print(1)"],
                    tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    m = load(str(tmp_path / "r" / "manifest.toml"))
    assert (m.target.prefix, m.target.chosen_by) == (str(good), "CMD")
    # a program that is not Python by name keeps the usual choice
    r = envlock_run(["--dir", "s", "-q", "--", "true"], tmp_path, env=env)
    assert load(str(tmp_path / "s" / "manifest.toml")).target.chosen_by == "VIRTUAL_ENV"
