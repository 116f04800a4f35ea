"""A conda-forge ``external_*`` MPI placeholder is named when libmpi is not found (issue 25).

``conda install "mpich=*=external_*"`` installs conda-forge's placeholder for the system's MPI
(conda-forge docs, "Using External Message Passing Interface (MPI) Libraries"): no
libmpi.so.12 comes with it.  "Install the package that provides libmpi.so.12" would mislead —
the package is installed; the system MPI has to be on the loader's path.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from click.testing import CliRunner

from envlock.cli import cli

from .conftest import Builder


def _mpi_prefix(build: Builder, prefix: Path, meta: str) -> None:
    site = next((prefix / "lib").glob("python3.*")) / "site-packages"
    stub = build.lib("stub/libmpi.so.12", soname="libmpi.so.12")
    pkg = site / "mpiext"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import MPI\n")
    tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu"
    ext = build.lib(f"ext/MPI.{tag}.so", needed=[str(stub)])
    shutil.copy(ext, pkg / ext.name)
    shutil.rmtree(stub.parent)  # the placeholder ships no libmpi
    (prefix / "conda-meta" / meta).write_text(json.dumps(
        {"name": meta.split("-")[0], "version": meta.split("-")[1],
         "build": meta.rsplit("-", 1)[1].removesuffix(".json"), "build_number": 0,
         "channel": "https://conda.anaconda.org/conda-forge/linux-64", "subdir": "linux-64",
         "depends": [], "files": []}))


def _findings(prefix: Path) -> list[dict]:
    res = CliRunner().invoke(cli, ["libs", "mpiext", "--prefix", str(prefix), "--format", "json"])
    doc = json.loads(res.stdout)
    return [f for f in doc["findings"] if f.get("library") == "libmpi.so.12"]


def test_the_external_mpich_placeholder_is_named(build: Builder, conda_prefix: Path) -> None:
    _mpi_prefix(build, conda_prefix, "mpich-4.2.1-external_0.json")
    [f] = _findings(conda_prefix)
    assert f["id"] == "not-found"
    assert any("mpich 4.2.1 external_0 is conda-forge's placeholder for an MPI outside conda"
               in e for e in f["evidence"])
    assert f["fix"][0].startswith("Put the system mpich on the loader's path: `module load mpich`")
    assert "conda install 'mpich=4.2.1=h*'" in f["fix"][1]
    assert not any("Install the package that provides" in x for x in f["fix"])


def test_a_real_mpich_build_keeps_the_plain_fix(build: Builder, conda_prefix: Path) -> None:
    _mpi_prefix(build, conda_prefix, "mpich-4.2.1-h4a8ded7_100.json")
    [f] = _findings(conda_prefix)
    assert not any("placeholder" in e for e in f["evidence"])
