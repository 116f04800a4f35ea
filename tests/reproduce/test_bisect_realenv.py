"""Issue 15 acceptance on the real CPU torch venv: bisect it against a copy of its manifest with
one numerical package changed (numpy 1.24.4 → 1.26.4, from this machine's local index)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from _realenv import manifest_pins

pytestmark = pytest.mark.realenv

CHECK = ("import numpy as np, torch\n"
         "x = np.random.default_rng(0).random(1_000_003, dtype=np.float32)\n"
         "print('sum=%r' % float(np.add.reduce(x)), 'torch', torch.__version__)\n")


def test_cpu_venv_against_a_numpy_change(cpu_venv, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # bisect's logs stay in tmp_path
    good = tmp_path / "good.toml"
    result = CliRunner().invoke(cli, ["snapshot", "--python", str(cpu_venv / "bin" / "python"),
                                      "-o", str(good), "-q"])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.toml"
    text = good.read_text()
    assert 'name = "numpy"\nversion = "1.24.4"' in text
    bad.write_text(text.replace('name = "numpy"\nversion = "1.24.4"',
                                'name = "numpy"\nversion = "1.26.4"'))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels),
                    "torch==2.13.0+cpu", "numpy==1.24.4", "scipy==1.10.1",
                    *manifest_pins(good, "pip", "setuptools")], check=True, timeout=600)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                    str(wheels), "numpy==1.26.4"], check=True, timeout=600)
    args = ["bisect", str(good), str(bad), "--no-index", "--find-links", str(wheels),
            "--format", "json", "--", "python", "-c",
            "import numpy, sys; print(numpy.__version__); sys.exit(numpy.__version__ != '1.24.4')"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [g["label"] for g in doc["culprit"]] == ["numpy 1.24.4 → 1.26.4"]
    assert doc["envs_built"] == 1  # GOOD ran in the venv itself; BAD = GOOD + numpy 1.26.4
    assert [s["exit"] for s in doc["steps"]] == [[0], [1]]
    metric = CliRunner().invoke(cli, [*args[:8], "--metric", r"sum=(\S+)", "--", "python",
                                      "-c", CHECK])
    # Measured here: numpy 1.24.4 and 1.26.4 reduce these float32 numbers to the same
    # 500379.65625 (same pairwise summation, same SIMD path on this CPU), so bisect says
    # "same" and exits 1: the cause of a moved number would not be this numpy change.
    assert metric.exit_code == 1, metric.output
    doc = json.loads(metric.stdout)
    assert doc["status"] == "same"
    assert doc["good_value"] == doc["bad_value"]
