"""Fixtures for the lock tests: real wheels, a real local conda channel, real venvs.

* :func:`make_wheel` writes a pure-Python wheel following the wheel spec (PEP 427/491:
  ``METADATA``, ``WHEEL``, ``RECORD`` with urlsafe-base64 sha256 digests).
* :func:`make_conda_package` writes a ``.tar.bz2`` (or ``.conda``: a stored zip of
  ``metadata.json`` and two zstd tarballs) with ``info/index.json``, ``info/paths.json`` and
  ``info/files``, and adds its record to the subdir's ``repodata.json``, as ``conda index``
  would.  The channel is read through ``file://`` by the solver.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from _wheels import make_wheel

EPOCH = 1_700_000_000


def _tar(members: Mapping[str, bytes], mode: str, fileobj: io.BytesIO,
         links: Mapping[str, str] | None = None) -> None:
    with tarfile.open(fileobj=fileobj, mode=mode) as tf:
        for name, target in (links or {}).items():
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname, ti.mtime, ti.mode = tarfile.SYMTYPE, target, EPOCH, 0o777
            tf.addfile(ti)
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = EPOCH
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))


def _zstd_tar(members: Mapping[str, bytes]) -> bytes:
    import zstandard  # a dependency of conda-lock

    raw = io.BytesIO()
    _tar(members, "w", raw)
    return zstandard.ZstdCompressor().compress(raw.getvalue())


def make_conda_package(
    channel: Path,
    subdir: str,
    name: str,
    version: str,
    build: str,
    depends: Iterable[str] = (),
    *,
    build_number: int = 0,
    noarch: str | None = None,
    files: Mapping[str, str] | None = None,
    fmt: str = "tar.bz2",
    symlinks: Mapping[str, str] | None = None,
    purls: Iterable[str] = (),
) -> dict:
    """Write a conda package into ``channel/subdir`` and index it; return its repodata record.

    :param symlinks: path → target of symbolic links (``path_type: softlink`` in paths.json).
    :param purls: the record's package URLs (``pkg:pypi/torch@1.13.1``), as conda-forge's
        repodata carries them (the ``purls`` field of a repodata record).
    """
    files = dict(files or {f"share/{name}/{name}.txt": f"{name} {version}\n"})
    index = {
        "name": name, "version": version, "build": build, "build_number": build_number,
        "depends": list(depends), "subdir": subdir, "license": "MIT",
        "timestamp": EPOCH * 1000,
    }
    if noarch:
        index["noarch"] = noarch
    if subdir != "noarch":
        index["platform"], index["arch"] = subdir.split("-")[0], "x86_64"
    paths = {"paths_version": 1, "paths": [
        {"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(t.encode()).hexdigest(),
         "size_in_bytes": len(t.encode())} for p, t in sorted(files.items())]
        + [{"_path": p, "path_type": "softlink"} for p in sorted(symlinks or {})]}
    info = {
        "info/index.json": json.dumps(index, indent=2).encode(),
        "info/paths.json": json.dumps(paths, indent=2).encode(),
        "info/files": "".join(p + "\n" for p in sorted([*files, *(symlinks or {})])).encode(),
    }
    payload = {p: t.encode() for p, t in files.items()}
    stem = f"{name}-{version}-{build}"
    if fmt == "tar.bz2":
        buf = io.BytesIO()
        _tar({**info, **payload}, "w:bz2", buf, symlinks)
        raw, key = buf.getvalue(), "packages"
    else:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
            zf.writestr(f"pkg-{stem}.tar.zst", _zstd_tar(payload))
            zf.writestr(f"info-{stem}.tar.zst", _zstd_tar(info))
        raw, key = buf.getvalue(), "packages.conda"
    fn = f"{stem}.{fmt}"
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    (channel / subdir / fn).write_bytes(raw)
    record = {**index, "md5": hashlib.md5(raw).hexdigest(),  # conda's own digest
              "sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}
    if purls:
        record["purls"] = list(purls)
    repodata = channel / subdir / "repodata.json"
    data = (json.loads(repodata.read_text()) if repodata.exists() else
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {},
             "repodata_version": 1})
    data[key][fn] = record
    repodata.write_text(json.dumps(data, indent=1, sort_keys=True))
    return record


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A find-links directory: alpha 1.0/1.1 (needs beta>=2), beta 2.0/2.5, gamma-pkg 0.3."""
    root = tmp_path_factory.mktemp("wheelhouse")
    make_wheel(root, "alpha", "1.0", ["beta>=2"])
    make_wheel(root, "alpha", "1.1", ["beta>=2"])
    make_wheel(root, "beta", "2.0")
    make_wheel(root, "beta", "2.5")
    make_wheel(root, "gamma-pkg", "0.3", ["alpha==1.0"])
    return root


@pytest.fixture(scope="session")
def conda_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local channel (linux-64 + noarch).

    liba 1.0 needs __glibc>=2.17, liba 2.0 needs __glibc>=2.40; appcuda needs __cuda>=12;
    tool (noarch: generic) needs liba; docs-theme (noarch) needs nothing; zlib-ng is a
    ``.conda`` archive; python 3.11.7 is a stand-in (its version is what uv resolves the pip:
    section for, and what places the ``noarch: python`` package pyfoo in
    ``lib/python3.11/site-packages``).
    """
    ch = tmp_path_factory.mktemp("channel")
    make_conda_package(ch, "noarch", "tool", "0.5", "pyh_0", ["liba >=1"], noarch="generic")
    make_conda_package(ch, "noarch", "docs-theme", "2.1", "0", [], noarch="generic")
    make_conda_package(ch, "linux-64", "liba", "1.0", "h0_0", ["__glibc >=2.17"])
    make_conda_package(ch, "linux-64", "liba", "2.0", "h0_0", ["__glibc >=2.40"])
    make_conda_package(ch, "linux-64", "appcuda", "1.0", "cuda12_0", ["liba", "__cuda >=12"])
    make_conda_package(ch, "linux-64", "zlib-ng", "2.2.4", "h7955e40_1", [], build_number=1,
                       fmt="conda")
    make_conda_package(ch, "linux-64", "python", "3.11.7", "h_cpython_0", ["zlib-ng"])
    make_conda_package(ch, "noarch", "pyfoo", "1.0", "pyh_0", ["python >=3.8"], noarch="python",
                       files={"site-packages/pyfoo/__init__.py": "answer = 42\n",
                              "site-packages/pyfoo-1.0.dist-info/METADATA":
                              "Metadata-Version: 2.1\nName: pyfoo\nVersion: 1.0\n",
                              "site-packages/pyfoo-1.0.dist-info/INSTALLER": "conda\n"})
    return ch


@pytest.fixture
def no_conda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure no conda/mamba executable is found, so py-rattler solves."""
    for var in ("CONDA_EXE", "MAMBA_EXE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def offline_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neutralise this machine's pip configuration for processes the test starts."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def make_venv(path: Path, wheelhouse: Path, *requirements: str) -> Path:
    """Create a venv with uv and install ``requirements`` from ``wheelhouse`` only."""
    subprocess.run([uv(), "venv", "-q", str(path)], check=True, timeout=120)
    if requirements:
        subprocess.run(
            [uv(), "pip", "install", "-q", "--python", str(path / "bin" / "python"), "--no-index",
             "--find-links", str(wheelhouse), *requirements],
            check=True, timeout=300,
        )
    return path


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def installed(venv: Path) -> dict[str, str]:
    """name → version of the dist-info directories in a venv (read from METADATA)."""
    out = {}
    for meta in site_packages(venv).glob("*.dist-info/METADATA"):
        fields = dict(
            line.split(": ", 1) for line in meta.read_text().splitlines()[:3] if ": " in line
        )
        out[fields["Name"].lower().replace("_", "-")] = fields["Version"]
    return out


@pytest.fixture(scope="session")
def h() -> object:
    """The builders above, for tests (conftest modules are not imported by name)."""
    import types

    return types.SimpleNamespace(
        make_wheel=make_wheel, make_conda_package=make_conda_package, make_venv=make_venv,
        installed=installed, site_packages=site_packages, uv=uv,
    )


@pytest.fixture
def conda_prefix(tmp_path: Path) -> Path:
    """A copy of ``fixtures/conda-prefix`` (real conda-meta JSON: C11 twine overwritten by pip,
    C12 conda-build ``direct_url.json``, a private ``/t/<token>/`` channel) given a real
    interpreter by ``python -m venv --without-pip`` over it."""
    import shutil
    import sys

    prefix = tmp_path / "conda-env"
    shutil.copytree(Path(__file__).parents[2] / "fixtures" / "conda-prefix", prefix, symlinks=True)
    want = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    lib = prefix / "lib"
    if not (lib / want).exists():
        (lib / "python3.11").rename(lib / want)
        for meta in (prefix / "conda-meta").glob("*.json"):
            meta.write_text(meta.read_text().replace("python3.11/", f"{want}/"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True,
                   timeout=300)
    return prefix
