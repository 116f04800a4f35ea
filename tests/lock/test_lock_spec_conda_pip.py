"""``lock -f environment.yml`` with conda torch/numpy and a ``pip:`` section (issue 23, item 1).

The pip part is resolved against the conda solution, as conda-lock does: the channel's conda
``pytorch`` carries conda-forge's ``purls`` (``pkg:pypi/torch@1.13.1``), ``numpy`` depends on
python and has none (conda-lock's identity rule); the wheelhouse has what PyPI would offer
(torch 2.14.1 with a CUDA wheel dependency, numpy 2.2.6).  Oracles: conda-lock's parser for the
lock, envlock's ``diff spec lock`` for the spec, py-rattler + uv for the install, the installed
dist-info for what uv put there.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

pytestmark = pytest.mark.usefixtures("no_conda", "offline_pip")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, h) -> dict[str, Path]:
    make_conda_package = h.make_conda_package  # tests/lock/conftest.py's builder
    ch = tmp_path_factory.mktemp("torch-channel")
    make_conda_package(ch, "noarch", "docs-theme", "2.1", "0", [], noarch="generic")
    real = Path(sys.executable).resolve()
    # python 3.11: a venv interpreter once installed (pyvenv.cfg + bin/python → this python).
    make_conda_package(ch, "linux-64", "python", "3.11.7", "h_0", [], files={
        "pyvenv.cfg": f"home = {real.parent}\ninclude-system-site-packages = false\n"
                      "version = 3.11.7\n"}, symlinks={"bin/python": str(real)})
    make_conda_package(ch, "linux-64", "numpy", "1.23.4", "py311_0", ["python >=3.11,<3.12"],
                       files=_dist("numpy", "1.23.4"))
    make_conda_package(ch, "linux-64", "pytorch", "1.13.1", "py311_0",
                       ["python >=3.11,<3.12", "numpy >=1.21"], files=_dist("torch", "1.13.1"),
                       purls=["pkg:pypi/torch@1.13.1"])
    wh = tmp_path_factory.mktemp("torch-wheels")
    h.make_wheel(wh, "torch", "2.14.1", ["nvidia-cublas-cu12"])
    h.make_wheel(wh, "nvidia-cublas-cu12", "12.8.4.1")
    h.make_wheel(wh, "numpy", "2.2.6")
    h.make_wheel(wh, "torchmetrics", "1.4.0", ["torch>=1.10", "numpy>1.20", "lightning-utilities"])
    h.make_wheel(wh, "lightning-utilities", "0.11.0")
    h.make_wheel(wh, "needs-new-torch", "1.0", ["torch>=2.0"])
    return {"channel": ch, "wheels": wh}


def _dist(name: str, version: str) -> dict[str, str]:
    site = "lib/python3.11/site-packages"
    info = f"{site}/{name}-{version}.dist-info"
    return {f"{site}/{name}/__init__.py": f"__version__ = {version!r}\n",
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            f"{info}/INSTALLER": "conda\n"}


def _spec(tmp_path: Path, world: dict[str, Path], pip: list[str]) -> Path:
    spec = tmp_path / "environment.yml"
    spec.write_text(textwrap.dedent(f"""\
        name: demo
        channels:
          - {world["channel"].as_uri()}
          - nodefaults
        dependencies:
          - python=3.11
          - pytorch
          - numpy
          - pip:
        """) + "".join(f"    - {r}\n" for r in pip))
    return spec


def _lock(spec: Path, out: Path, wheels: Path):
    return CliRunner().invoke(cli, ["lock", "-f", str(spec), "-o", str(out), "-p", "linux-64",
                                    "--no-index", "--find-links", str(wheels)])


def test_pip_adds_only_what_conda_lacks_and_the_lock_installs_and_verifies(tmp_path, world):
    from conda_lock.lockfile import parse_conda_lock_file

    spec = _spec(tmp_path, world, ["torchmetrics"])
    result = _lock(spec, tmp_path / "out", world["wheels"])
    assert result.exit_code == 0, result.output
    lockfile = tmp_path / "out" / "conda-lock.yml"
    doc = parse_conda_lock_file(lockfile)
    got = {(p.manager, p.name): p.version for p in doc.package}
    assert got == {("conda", "python"): "3.11.7", ("conda", "numpy"): "1.23.4",
                   ("conda", "pytorch"): "1.13.1", ("pip", "torchmetrics"): "1.4.0",
                   ("pip", "lightning-utilities"): "0.11.0"}
    # envlock's own spec check: every conda and pip requirement satisfied, nothing violated.
    diff = CliRunner().invoke(cli, ["diff", str(spec), str(lockfile), "--format", "json"])
    assert diff.exit_code == 0, diff.output
    report = json.loads(diff.output)
    assert (report["differ"], report["differences"]) == (False, [])
    assert report["satisfied"]["areas"] == {"package": 3, "python": 1}
    # Install it (py-rattler for conda, uv --no-deps for the pip entries) and verify the prefix.
    prefix = tmp_path / "env"
    result = CliRunner().invoke(cli, ["restore", str(lockfile), "--prefix", str(prefix), "--run",
                                      "--no-index", "--find-links", str(world["wheels"])])
    assert result.exit_code == 0, result.output
    site = prefix / "lib" / "python3.11" / "site-packages"
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    assert dists == ["lightning_utilities-0.11.0.dist-info", "numpy-1.23.4.dist-info",
                     "torch-1.13.1.dist-info", "torchmetrics-1.4.0.dist-info"]
    result = CliRunner().invoke(cli, ["verify", "--lock", str(lockfile), "--prefix", str(prefix)])
    assert result.exit_code == 0, result.output


def test_a_pip_pin_against_a_conda_pin_is_one_error_naming_both(tmp_path, world):
    spec = _spec(tmp_path, world, ["torch>=2"])
    result = _lock(spec, tmp_path, world["wheels"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("Error: ")
    assert "'torch>=2'" in line and "conda package pytorch 1.13.1 py311_0" in line
    assert not (tmp_path / "conda-lock.yml").exists()


def test_a_pip_dependency_against_a_conda_pin_names_both(tmp_path, world):
    spec = _spec(tmp_path, world, ["needs-new-torch"])
    result = _lock(spec, tmp_path, world["wheels"])
    assert result.exit_code == 2
    out = result.output
    assert out.startswith("Error: uv found no solution for the pip: section of ")
    assert "needs-new-torch" in out and "torch>=2" in out  # uv's own explanation, in full
    assert "torch 1.13.1 (conda pytorch 1.13.1 py311_0)" in out
    assert "requirements.in" not in out
    assert not (tmp_path / "conda-lock.yml").exists()


def test_provided_dists_follow_conda_locks_rules():
    from envlock.lock._conda_pypi import provided_dists
    from envlock.lock._spec import SolvedRecord

    def rec(name, version, depends=(), purls=()):
        return SolvedRecord(name=name, version=version, build="0", url="", md5=None,
                            sha256=None, depends=tuple(depends), purls=tuple(purls))

    got = provided_dists([
        rec("python", "3.11.7"), rec("libzlib", "1.3"),            # not Python distributions
        rec("pytorch", "2.3.1", ["python >=3.11"]),                # grayskull's rename
        rec("ruamel.yaml", "0.18.6", ["python"]),
        rec("xxhash", "0.8.2"), rec("python-xxhash", "3.4.1", ["python"]),
        rec("pillow", "10.4.0", purls=["pkg:pypi/pillow@10.4.0"]),  # the record's own purl
        rec("tzdata-py", "2021e", ["python"]),                      # not PEP 440: no fact
    ])
    assert {n: (d.version, d.how) for n, d in got.items()} == {
        "torch": ("2.3.1", "mapping"), "ruamel-yaml": ("0.18.6", "mapping"),
        "xxhash": ("3.4.1", "mapping"), "pillow": ("10.4.0", "purl")}


def test_a_pin_under_a_marker_is_the_targets(tmp_path, world):
    """``torch>=2; sys_platform == 'win32'`` does not apply to linux-64: no conflict, no pip
    torch; uv evaluates the marker for the target."""
    spec = _spec(tmp_path, world, ["torch>=2; sys_platform == 'win32'", "torchmetrics"])
    result = _lock(spec, tmp_path, world["wheels"])
    assert result.exit_code == 0, result.output
    from conda_lock.lockfile import parse_conda_lock_file

    pip = {p.name for p in parse_conda_lock_file(tmp_path / "conda-lock.yml").package
           if p.manager == "pip"}
    assert pip == {"torchmetrics", "lightning-utilities"}
