"""``envlock restore`` checks every lockfile before it prints or runs anything, and a failed
``--run`` leaves no half-built environment behind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.lock import _condalock
from envlock.formats._load import load_yaml
from envlock.formats.locks import check_conda_lock_layout
from envlock.lock._restore import validate_lockfile
from envlock.manifest import CondaPackage


def _check_conda_lock_layout(path: Path, text: str) -> None:
    check_conda_lock_layout(load_yaml(text, str(path)), str(path))


pytestmark = pytest.mark.usefixtures("offline_pip")


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def pylock(wheel: Path, sha256: str, lock_version: str = "1.0") -> str:
    """A PEP 751 lock of one wheel, as uv writes it."""
    name, version = wheel.name.split("-")[:2]
    return (f'lock-version = "{lock_version}"\ncreated-by = "uv"\nrequires-python = ">=3.8"\n\n'
            f'[[packages]]\nname = "{name}"\nversion = "{version}"\n'
            f'wheels = [{{ url = "{wheel.as_uri()}", hashes = {{ sha256 = "{sha256}" }} }}]\n')


def real_conda_lock(path: Path) -> Path:
    pkg = CondaPackage(
        name="zlib", version="1.3.1", build="hb9d3cd8_2", build_number=2, channel="conda-forge",
        subdir="linux-64",
        url="https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda",
        md5="c9f075ab2f33b3bbee9e62d4ad0a6cd8",
        sha256="5d7c0e5f0005f74112a34a7425179f4eb6e73c92f5d109e6af4ddeca407c92ab",
        depends=("__glibc >=2.17,<3.0.a0", "libgcc >=13", "libzlib 1.3.1 hb9d3cd8_2"))
    entry = _condalock.entry_from_conda_package(pkg, "linux-64")
    path.write_text(_condalock.render([entry], platforms=["linux-64"], channels=["conda-forge"],
                                      sources=["environment.yml"],
                                      content_hashes={"linux-64": "0" * 64}))
    return path


def test_binary_conda_lock_is_refused_before_printing(tmp_path):
    lock = tmp_path / "conda-lock.yml"
    lock.write_bytes(bytes(range(256)) * 4)  # e.g. a .conda archive saved under that name
    result = invoke("restore", lock, "--prefix", tmp_path / "rr")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: {lock}: not a text file (invalid UTF-8 at byte 128)"]


def test_conda_lock_of_another_schema_is_refused(tmp_path):
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("version: 1\nmetadata:\n  platforms: [linux-64]\n")  # no package list
    result = invoke("restore", lock)
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {lock}: not a valid conda-lock file (")
    assert len(result.output.splitlines()) == 1


def test_unsupported_pylock_version_is_refused(tmp_path, wheelhouse):
    wheel = wheelhouse / "beta-2.5-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock(wheel, hashlib.sha256(wheel.read_bytes()).hexdigest(), "9.0"))
    result = invoke("restore", lock, "--prefix", tmp_path / "rr")
    assert result.exit_code == 2
    assert result.output == (f"Error: {lock}: not a valid PEP 751 lock file (pylock version 9.0 "
                             "is not supported)\n")


def test_bad_pylock_with_run_creates_nothing(tmp_path, wheelhouse):
    wheel = wheelhouse / "beta-2.5-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock(wheel, hashlib.sha256(wheel.read_bytes()).hexdigest(), "9.0"))
    rr = tmp_path / "rr"
    result = invoke("restore", lock, "--prefix", rr, "--run")
    assert result.exit_code == 2
    assert len(result.output.splitlines()) == 1
    assert not rr.exists()


def test_failed_install_removes_the_environment_it_created(tmp_path, wheelhouse):
    wheel = wheelhouse / "beta-2.5-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock(wheel, "0" * 64))  # valid lock, but the wheel's hash differs
    rr = tmp_path / "rr"
    result = invoke("restore", lock, "--prefix", rr, "--run")
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[:2] == ["# --run contacts:", f"#   wheel {wheel.as_uri()}"]  # said first
    first = next(ln for ln in lines if ln.startswith("Error: "))
    assert "uv exited with status 1: " in first
    assert "Hash mismatch for `beta==2.5`" in result.output
    assert first.endswith(f"; removed the partial environment {rr}")
    assert "-r " + str(lock) in first
    assert not rr.exists()


def test_failed_install_into_a_given_empty_directory_empties_it(tmp_path, wheelhouse):
    wheel = wheelhouse / "beta-2.5-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock(wheel, "0" * 64))
    rr = tmp_path / "rr"
    rr.mkdir()  # e.g. made by the job script
    result = invoke("restore", lock, "--prefix", rr, "--run")
    assert result.exit_code == 2
    assert next(ln for ln in result.output.splitlines()
                if ln.startswith("Error: ")).endswith(f"; emptied {rr} again")
    assert rr.is_dir() and list(rr.iterdir()) == []


def test_good_pylock_still_restores(tmp_path, wheelhouse, h):
    wheel = wheelhouse / "beta-2.5-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock(wheel, hashlib.sha256(wheel.read_bytes()).hexdigest()))
    rr = tmp_path / "rr"
    result = invoke("restore", lock, "--prefix", rr, "--run")
    assert result.exit_code == 0, result.output
    assert h.installed(rr) == {"beta": "2.5"}


def test_corrupt_lockfile_recorded_in_a_manifest_is_refused(tmp_path):
    from envlock.manifest import EnvlockInfo, LockfileRef, LockfilesInfo, Manifest, Target

    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "beta"\n')
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    m = Manifest(envlock=EnvlockInfo(version="0.1", created="2026-11-30T00:00:00Z", host="h"),
                 target=Target(kind="venv", prefix="/env", chosen_by="--prefix"),
                 lockfiles=LockfilesInfo(files=(LockfileRef(path="pylock.toml", kind="pylock",
                                                            sha256=digest),)))
    mpath = tmp_path / "manifest.toml"
    m.write(mpath)
    result = invoke("restore", mpath)
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {lock}: not a valid PEP 751 lock file (")
    assert "# Recreate" not in result.output


def test_hashed_requirements_with_a_broken_line(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("alpha==1.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n"
                   "beta=>2.0 --hash=sha256:" + "cd" * 32 + "\n")
    with pytest.raises(ManifestError, match=r"requirement 'beta=>2.0' is not valid PEP 508"):
        validate_lockfile(req, "requirements")
    req.write_text("alpha==1.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n")
    validate_lockfile(req, "requirements")


def test_explicit_conda_lock_lines_are_urls(tmp_path):
    url = "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda"
    lock = tmp_path / "conda-linux-64.lock"
    lock.write_text(f"# platform: linux-64\n@EXPLICIT\n{url}#c9f075ab2f33b3bbee9e62d4ad0a6cd8\n")
    validate_lockfile(lock, "conda-explicit")
    lock.write_text(f"@EXPLICIT\n{url}\nzlib=1.3.1\n")
    with pytest.raises(ManifestError, match=r"line 3 is not a conda package URL: zlib=1.3.1"):
        validate_lockfile(lock, "conda-explicit")


def test_structural_check_without_conda_lock(tmp_path):
    """The fallback used when conda-lock is not installed accepts what conda-lock writes."""
    good = real_conda_lock(tmp_path / "conda-lock.yml")
    _check_conda_lock_layout(good, good.read_text())
    text = good.read_text().replace("  manager: conda\n", "")
    with pytest.raises(ManifestError, match=r"package\[0\]\.manager missing"):
        _check_conda_lock_layout(good, text)
    with pytest.raises(ManifestError, match="version 2 is not 1"):
        _check_conda_lock_layout(good, "version: 2\n")
