"""Issue 15 acceptance on the real CPU torch venv: restored from its manifest alone (no
lockfile) into a new directory with a local wheel directory as ``--find-links``; ``verify`` of
the result exits 0 and ``diff`` finds nothing apart from the target paths.

The wheel directory is made with ``pip download`` from this machine's own indexes (its pip
configuration: a local ``find-links`` holding ``torch 2.13.0+cpu`` and local simple indexes),
so uv then runs with ``--no-index``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from _realenv import manifest_pins

pytestmark = pytest.mark.realenv


def test_cpu_venv_restored_from_its_manifest_alone(cpu_venv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # both snapshots record the same (absent) git checkout
    manifest = tmp_path / "cpu.toml"
    result = CliRunner().invoke(cli, ["snapshot", "--python", str(cpu_venv / "bin" / "python"),
                                      "-o", str(manifest), "-q"])
    assert result.exit_code == 0, result.output
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels),
                    "torch==2.13.0+cpu", "numpy==1.24.4", "scipy==1.10.1",
                    *manifest_pins(manifest, "pip", "setuptools")], check=True, timeout=600)
    result = CliRunner().invoke(cli, ["restore", str(manifest), "--no-index", "--find-links",
                                      str(wheels), "--run"])
    assert result.exit_code == 0, result.output
    new = tmp_path / "cpu-restored"  # the default: beside the manifest
    import envlock

    recorded = len(envlock.load(manifest).pip.packages)  # the venv's own pip and setuptools included
    assert f"# Came back exactly: {recorded} package(s)" in result.stdout
    assert "#   torch 2.13.0+cpu" in result.stdout
    assert "# Packages and Python that differ from the manifest: none" in result.stdout
    shutil.rmtree(wheels)
    check = CliRunner().invoke(cli, ["verify", "--manifest", str(manifest), "--python",
                                     str(new / "bin" / "python")])
    assert check.exit_code == 0, check.output
    again = tmp_path / "restored.toml"
    result = CliRunner().invoke(cli, ["snapshot", "--python", str(new / "bin" / "python"),
                                      "-o", str(again), "-q"])
    assert result.exit_code == 0, result.output
    same = CliRunner().invoke(cli, ["diff", str(manifest), str(again)])
    assert same.exit_code == 0, same.output
    assert "Differences (0)" in same.output
