"""Fixtures for the snapshot tests: wheels built here, real venvs, a real conda-prefix layout."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _wheels import make_wheel

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pip_install(python: Path, *args: str, index: bool = False) -> None:
    """Run ``python -m pip install``; offline (``--no-index``) unless ``index`` is true."""
    env = dict(os.environ) if index else {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    offline = [] if index else ["--no-index"]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *offline, *args],
                   check=True, timeout=600, env=env, capture_output=True)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of small wheels built by the tests."""
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "alpha", "1.0.0")
    make_wheel(d, "Beta_Pkg", "2.1")
    make_wheel(d, "gamma", "0.5.0")
    make_wheel(d, "alpha", "0.9.0")
    return d


@pytest.fixture(scope="session")
def small_venv(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """A real venv (``python -m venv``) with alpha, Beta_Pkg (from the index dir) and gamma
    (from a wheel file path, so it gets a PEP 610 ``archive_info``)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    pip_install(py, "--find-links", str(wheelhouse), "alpha==1.0.0", "beta-pkg")
    pip_install(py, str(wheelhouse / "gamma-0.5.0-py3-none-any.whl"))
    return venv


def pip_list(python: Path) -> dict[str, str]:
    """``{normalized name: version}`` from ``python -m pip list --format=json`` (the oracle)."""
    import json
    import re

    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                         check=True, timeout=120, capture_output=True, text=True).stdout
    return {re.sub(r"[-_.]+", "-", d["name"]).lower(): d["version"] for d in json.loads(out)}


