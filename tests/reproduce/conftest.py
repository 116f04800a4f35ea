"""Fixtures for bisect: small pure-Python wheels written here (PEP 427 layout, RECORD with
sha256), uv venvs made from them offline, and manifests taken of those venvs by envlock.

``numsum`` is the numerical package: version 1.0 adds its numbers left to right, 2.0 right to
left, so ``1.0 + 1e16 - 1e16`` is ``0.0`` with one and ``1.0`` with the other.  ``flipa`` and
``flipb`` flip the order only when both are at 2.0 (an interacting pair).  ``p01`` … ``p11``
change version and nothing else.  ``tied`` 2.0 requires ``tiedto>=2`` (a pin that ties them).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from _wheels import make_wheel
from click.testing import CliRunner

NUMSUM = {
    "1.0": "def total(xs):\n    s = 0.0\n    for x in xs:\n        s += x\n    return s\n",
    "2.0": "def total(xs):\n    s = 0.0\n    for x in reversed(xs):\n        s += x\n    return s\n",
}
FLIP = "FLIP = {flip}\n"
CMD = ("import numsum, os\n"
       "xs = [1.0, 1e16, -1e16]\n"
       "try:\n    import flipa, flipb\n    both = flipa.FLIP and flipb.FLIP\n"
       "except ImportError:\n    both = False\n"
       "print('sum=%r' % numsum.total(list(reversed(xs)) if both else xs))\n")


UNRELATED = [f"p{i:02d}" for i in range(1, 12)]


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bisect-wheels")
    for version, code in NUMSUM.items():
        make_wheel(root, "numsum", version, code=code)
        # the same code as a minor release, sorted last by name: no size or name ranks it first
        make_wheel(root, "zsum", {"1.0": "1.0", "2.0": "1.1"}[version], code=code)
    for name in ("flipa", "flipb"):
        make_wheel(root, name, "1.0", code=FLIP.format(flip=False))
        make_wheel(root, name, "2.0", code=FLIP.format(flip=True))
    for name in UNRELATED:
        for version in ("1.0", "1.1"):
            make_wheel(root, name, version)
    make_wheel(root, "tied", "1.0", requires=["tiedto<2"])
    make_wheel(root, "tied", "2.0", requires=["tiedto>=2"])
    make_wheel(root, "tiedto", "1.0")
    make_wheel(root, "tiedto", "2.0")
    return root


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No pip configuration of this machine, the numerics variables unset, and bisect's
    default work directory (logs are kept) under the test's own tmp_path."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX",
                "OMP_NUM_THREADS", "MKL_CBWR", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def env_from(tmp_path: Path, wheels: Path):
    """``env_from(name, pins, variables)``: a uv venv with exactly ``pins`` from the wheels,
    and the manifest envlock takes of it with ``variables`` set; returns the manifest path."""
    from envlock.cli import cli

    def make(name: str, pins: Iterable[str], variables: Mapping[str, str] | None = None) -> Path:
        venv = tmp_path / name
        subprocess.run([uv(), "venv", "-q", str(venv)], check=True, timeout=120)
        subprocess.run([uv(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                        "--no-index", "--no-deps", "--find-links", str(wheels), *pins],
                       check=True, timeout=300)
        out = tmp_path / f"{name}.toml"
        result = CliRunner().invoke(cli, ["snapshot", "--python", str(venv / "bin" / "python"),
                                          "-o", str(out), "-q", "--repo", str(tmp_path)],
                                    env=dict(variables or {}))
        assert result.exit_code == 0, result.output
        return out

    return make
