"""A conda package that ships the dist-info of several distributions (a framework package with
its plugins, conda-meta ``files`` listing them all): every one is conda's, never pip's, and
``lock --from-env`` neither pins them in pylock.toml nor asks an index for them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner

import envlock
from envlock.cli import cli

pytestmark = pytest.mark.usefixtures("offline_pip")

DISTS = {"torchframe": "1.4.0", "torchframe-plugin-a": "0.2.0", "torchframe_plugin_b": "0.3.1"}


def _dist_info(site: Path, name: str, version: str, installer: str) -> list[str]:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (d / "INSTALLER").write_text(installer + "\n")
    return [f"{d.relative_to(site.parents[2])}/{f}" for f in ("METADATA", "INSTALLER")]


def _three_dist_world(prefix: Path) -> None:
    site = next((prefix / "lib").glob("python3*/site-packages"))
    # Only conda's own dist-infos stay, plus one pip-installed package pylock must pin.
    for d in site.glob("*.dist-info"):
        if (d / "INSTALLER").read_text().strip() != "conda":
            import shutil

            shutil.rmtree(d)
    files: list[str] = []
    for name, version in DISTS.items():
        files += _dist_info(site, name, version, "conda")
    _dist_info(site, "alpha", "1.0", "pip")
    _dist_info(site, "beta", "2.5", "pip")
    record = {
        "name": "torchframe", "version": "1.4.0", "build": "py_0", "build_number": 0,
        "channel": "https://conda.anaconda.org/conda-forge/noarch", "subdir": "noarch",
        "url": "https://conda.anaconda.org/conda-forge/noarch/torchframe-1.4.0-py_0.conda",
        "md5": "0" * 32, "sha256": "1" * 64, "depends": ["python >=3.9"], "files": files,
    }
    (prefix / "conda-meta" / "torchframe-1.4.0-py_0.json").write_text(json.dumps(record))


def test_all_three_are_conda_owned_and_not_in_the_pylock(tmp_path: Path, conda_prefix: Path,
                                                          wheelhouse: Path) -> None:
    _three_dist_world(conda_prefix)
    m = envlock.snapshot(prefix=str(conda_prefix), stack=False, libraries=False)
    pkgs = {p.name: p for p in m.pip.packages}
    for name in ("torchframe", "torchframe-plugin-a", "torchframe-plugin-b"):
        assert pkgs[name].origin == "conda", name
        assert pkgs[name].conda_package == "torchframe", name
    assert pkgs["alpha"].origin is None or pkgs["alpha"].origin == "index"

    out = tmp_path / "lock"
    result = CliRunner().invoke(cli, ["lock", "--from-env", "--prefix", str(conda_prefix), "-o",
                                      str(out), "--no-index", "--find-links", str(wheelhouse)])
    assert result.exit_code == 0, result.output
    lock = tomllib.loads((out / "pylock.toml").read_text())
    locked = {p["name"] for p in lock["packages"]}
    assert locked == {"alpha", "beta"}  # the index was asked only for these
    not_locked = {t["name"]: t for t in lock["tool"]["envlock"]["not-locked"]}
    for name in ("torchframe", "torchframe-plugin-a", "torchframe-plugin-b"):
        assert "installed by conda package torchframe" in not_locked[name]["reason"]
    assert "torchframe-1.4.0-py_0.conda" in (out / "conda-lock.yml").read_text()
