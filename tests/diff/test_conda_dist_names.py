"""conda ↔ PyPI names through the dist-info a conda package ships.

conda's ``pytables`` installs ``tables-3.9.2.dist-info``: Python, pip and every pip-side input
(a freeze, a pylock) call it ``tables``.  The alias table does not list it; the conda-meta
record's ``files`` do, so a snapshot of the conda prefix and a pip freeze of the same packages
compare identical.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import envlock
from envlock.diff import diff

from .conftest import build_manifest


def _add_conda_package(prefix: Path, name: str, version: str, dist: str, build: str) -> None:
    """A conda-meta record (as conda writes it) whose ``files`` install ``dist``'s dist-info."""
    site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    info = prefix / site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("conda\n")
    files = [f"{site}/{dist}-{version}.dist-info/{f}" for f in ("INSTALLER", "METADATA")]
    record = {
        "name": name, "version": version, "build": build, "build_number": 0,
        "channel": "https://conda.anaconda.org/conda-forge/linux-64", "subdir": "linux-64",
        "depends": [], "files": files, "md5": "0" * 32,
        "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda",
        "fn": f"{name}-{version}-{build}.conda", "requested_spec": name,
    }
    (prefix / "conda-meta" / f"{name}-{version}-{build}.json").write_text(json.dumps(record))


def test_conda_package_keyed_by_the_dist_info_it_ships(conda_prefix: Path, tmp_path: Path) -> None:
    _add_conda_package(conda_prefix, "pytables", "3.9.2", "tables", "py311h0_0")
    _add_conda_package(conda_prefix, "pyyaml", "6.0.1", "PyYAML", "py311h1_1")
    m = envlock.snapshot(prefix=str(conda_prefix), stack=False, libraries=False)
    by_name = {c.name: c for c in m.conda.packages}
    assert by_name["pytables"].python_dist.endswith("tables-3.9.2.dist-info")
    snap = tmp_path / "conda.toml"
    snap.write_text(m.dumps())
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("tables==3.9.2\nPyYAML==6.0.1\nnumpy==1.26.4\nrequests==2.31.0\n")
    result = diff([str(snap), str(freeze)])
    changes = {(c.area, c.key): c.values for c in result.changes}
    # one fact "package tables", not "pytables removed" + "tables added"
    assert ("package", "pytables") not in changes and ("package", "tables") not in changes
    assert ("package", "pyyaml") not in changes
    assert result.identical["package"] >= 4


def test_the_alias_table_still_decides_when_no_dist_info_is_named(write, tmp_path) -> None:
    """An environment.yml says nothing about dist-infos: ``pytorch`` is ``torch`` by alias."""
    a = build_manifest()
    spec = tmp_path / "environment.yml"
    spec.write_text("name: x\ndependencies:\n  - pytorch=2.1.2\n  - numpy\n")
    result = diff([write("a.toml", a), spec])
    assert ("package", "pytorch") not in {(c.area, c.key) for c in result.changes}
    assert result.satisfied.get("package", 0) >= 2


def test_the_project_a_lock_is_for_is_not_a_difference(write) -> None:
    """The real comfy-cli uv.lock against an environment with comfy-cli installed editable:
    the project is the lock's own workspace member, not one of its packages."""
    from .conftest import editable

    m = build_manifest(extra_pip=[editable("comfy-cli", "/home/u/comfy-cli")])
    lock = Path(__file__).resolve().parents[1] / "formats" / "foreign" / "Comfy-Org__comfy-cli__uv.lock"
    result = diff([write("m.toml", m), lock])
    assert ("package", "comfy-cli") not in {(c.area, c.key) for c in result.changes}
    assert any(n.startswith("comfy-cli: the project") for n in result.a.notes)
