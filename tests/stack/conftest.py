"""Fixtures of the stack probes' tests: fake worlds built in ``tmp_path``.

* ``make_tool(name, script)`` writes an executable shell script into a test ``bin`` directory
  (the fake ``nvidia-smi``, ``nvcc``, ``gcc``, ``mpirun`` …) and returns its path;
* ``make_dist(site, name, version, files=…, requires=…)`` writes a ``.dist-info`` with real
  METADATA/RECORD layouts and creates the listed files;
* ``make_conda(prefix, name, version, build)`` writes a ``conda-meta`` record as conda does.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    return d


@pytest.fixture
def make_tool(bin_dir: Path):
    def make(name: str, script: str, directory: Path | None = None) -> Path:
        d = directory or bin_dir
        d.mkdir(parents=True, exist_ok=True)
        path = d / name
        path.write_text("#!/bin/sh\n" + script.lstrip("\n"))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return make


def make_dist(
    site: Path,
    name: str,
    version: str,
    *,
    files: tuple[str, ...] = (),
    requires: tuple[str, ...] = (),
    file_contents: dict[str, str] | None = None,
) -> Path:
    """Write ``<site>/<name>-<version>.dist-info`` as pip installs it, plus the listed files."""
    dist_name = name.replace("-", "_")
    info = site / f"{dist_name}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        "Summary: test distribution",
    ]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n\nLong description.\n")
    (info / "INSTALLER").write_text("pip\n")
    record = []
    for f in files:
        p = site / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text((file_contents or {}).get(f, ""))
        record.append(f"{f},sha256=AAAA,{p.stat().st_size}")
    record += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def make_conda(
    prefix: Path, name: str, version: str, build: str, depends: tuple[str, ...] = ()
) -> Path:
    """Write ``<prefix>/conda-meta/<name>-<version>-<build>.json`` in conda's layout."""
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    rec = {
        "build": build,
        "build_number": int(build.rsplit("_", 1)[-1]) if build.rsplit("_", 1)[-1].isdigit() else 0,
        "channel": "https://conda.anaconda.org/conda-forge/linux-64",
        "depends": list(depends),
        "files": [],
        "fn": f"{name}-{version}-{build}.conda",
        "name": name,
        "subdir": "linux-64",
        "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda",
        "version": version,
    }
    path = meta / f"{name}-{version}-{build}.json"
    path.write_text(json.dumps(rec, indent=2))
    return path


def have_gcc() -> bool:
    return shutil.which("gcc") is not None


def compile_shared(tmp: Path, name: str, source: str, *, version_script: str | None = None) -> Path:
    """Compile ``source`` (C) into a real shared library ``tmp/name`` with gcc."""
    src = tmp / (name + ".c")
    src.write_text(source)
    args = ["gcc", "-shared", "-fPIC", "-o", str(tmp / name), str(src)]
    if version_script is not None:
        vs = tmp / (name + ".map")
        vs.write_text(version_script)
        args.append(f"-Wl,--version-script={vs}")
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    return tmp / name


@pytest.fixture
def clean_env(bin_dir: Path) -> dict[str, str]:
    """An environment whose PATH is only the test bin dir plus /bin for ``sh``/``sleep``."""
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LC_ALL": "C",
    }


@pytest.fixture
def dist():
    """``make_dist`` as a fixture."""
    return make_dist


@pytest.fixture
def conda():
    """``make_conda`` as a fixture."""
    return make_conda


@pytest.fixture
def cshared():
    """``compile_shared`` as a fixture; skips when gcc is missing."""
    if not have_gcc():
        pytest.skip("gcc not installed")
    return compile_shared
