"""Issue 6 acceptance on the real CPU torch venv: lock it, restore it elsewhere, same pip list.

torch 2.13.0+cpu is not on PyPI here: pip finds it through this machine's pip configuration
(``find-links``, extra indexes).  ``envlock lock --from-env`` reads that configuration from the
target's pip and hands it to uv, which does not read ``pip.conf``.
"""

from __future__ import annotations

import json
import subprocess
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner

from envlock.cli import cli

pytestmark = pytest.mark.realenv


def pip_list(python) -> list[dict[str, str]]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return sorted(json.loads(out), key=lambda d: d["name"].lower())


def test_cpu_venv_lock_and_restore_reproduce_pip_list(cpu_venv, tmp_path):
    from packaging.pylock import Pylock

    python = cpu_venv / "bin" / "python"
    out = tmp_path / "lock"
    args = ["lock", "--from-env", "--python", str(python), "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = tomllib.loads((out / "pylock.toml").read_text())
    lock = Pylock.from_dict(data)
    versions = {p.name: str(p.version) for p in lock.packages}
    assert versions["torch"] == "2.13.0+cpu"
    assert versions["numpy"] == "1.24.4"
    assert versions["scipy"] == "1.10.1"
    torch = next(p for p in lock.packages if p.name == "torch")
    assert torch.wheels[0].url.endswith("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert torch.wheels[0].hashes["sha256"]
    assert data["tool"]["envlock"]["index-source"] == f"pip config of {python}"
    assert "not-locked" not in data["tool"]["envlock"]

    fresh = tmp_path / "fresh"
    result = CliRunner().invoke(cli, ["restore", str(out / "pylock.toml"), "--prefix", str(fresh),
                                      "--python-version", "3.11", "--run"])
    assert result.exit_code == 0, result.output
    assert pip_list(fresh / "bin" / "python") == pip_list(python)


def test_cuda_venv_lock_pins_every_installed_distribution(cuda_venv, tmp_path):
    """The CUDA build with its nvidia-* wheels: every distribution pinned with a hash.

    (Restoring it would copy gigabytes of CUDA libraries; the CPU venv test covers restore.)
    """
    from packaging.pylock import Pylock
    from packaging.utils import canonicalize_name

    python = cuda_venv / "bin" / "python"
    args = ["lock", "--from-env", "--python", str(python), "-o", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lock = Pylock.from_dict(tomllib.loads((tmp_path / "pylock.toml").read_text()))
    locked = {p.name: str(p.version) for p in lock.packages}
    assert locked == {canonicalize_name(d["name"]): d["version"] for d in pip_list(python)}
    assert locked["torch"] == "2.14.1"
    assert any(name.startswith("nvidia-") for name in locked)
    for p in lock.packages:
        files = list(p.wheels or []) + ([p.sdist] if p.sdist else [])
        assert files and all(f.hashes.get("sha256") for f in files), p.name
