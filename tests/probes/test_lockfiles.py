"""[lockfiles]: the lockfiles beside the manifest (and --lock), hashed and checked against the
snapshot; one in the working directory only is not the manifest's; restore refuses a recorded
lock that contradicts the manifest."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

import envlock
from envlock.probes.lockfiles import contradictions

PYLOCK = '''lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.10"

[[packages]]
name = "alpha"
version = "1.0.0"
'''


def pylock(pins: dict[str, str], marker: dict[str, str] | None = None) -> str:
    """A PEP 751 file that packaging.pylock accepts (one wheel per package)."""
    out = ['lock-version = "1.0"', 'created-by = "tests"', 'requires-python = ">=3.9"', '']
    for n, v in pins.items():
        w = f"{n.replace('-', '_')}-{v}-py3-none-any.whl"
        out += ["[[packages]]", f'name = "{n}"', f'version = "{v}"']
        if marker and n in marker:
            out.append(f"marker = '{marker[n]}'")
        out += [f'wheels = [{{ name = "{w}", url = "https://files.example.org/{w}", '
                f'hashes = {{ sha256 = "{"0" * 64}" }} }}]', ""]
    return "\n".join(out)


GOOD = {"alpha": "1.0.0", "beta-pkg": "2.1", "gamma": "0.5.0"}   # what small_venv has
BAD = {"alpha": "0.9.0", "beta-pkg": "2.1", "torch": "2.14.1"}    # another environment's lock


def test_snapshot_records_lockfiles(tmp_path: Path) -> None:
    (tmp_path / "pylock.toml").write_text(PYLOCK)
    (tmp_path / "requirements.txt").write_text("alpha==1.0.0\n")  # no hashes: not a lock
    m = envlock.snapshot(python=sys.executable, lock_dir=str(tmp_path), stack=False)
    assert m.lockfiles.status == "ok"
    (ref,) = m.lockfiles.files
    assert ref.path == str((tmp_path / "pylock.toml").resolve())
    assert ref.kind == "pylock"
    assert ref.sha256 == hashlib.sha256(PYLOCK.encode()).hexdigest()


def test_no_lockfiles_is_absent(tmp_path: Path) -> None:
    m = envlock.snapshot(python=sys.executable, lock_dir=str(tmp_path), stack=False)
    assert m.lockfiles.status == "absent"
    assert m.lockfiles.files == ()


def _snap(small_venv: Path, cwd: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                           str(small_venv / "bin" / "python"), "-o", str(out), *extra],
                          check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("placement", ["beside", "cwd-only", "both", "neither"])
def test_four_placements(tmp_path: Path, small_venv: Path, placement: str,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``cd lockB && envlock snapshot -o ../out/a.toml``: only out/'s lock is a.toml's."""
    here = tmp_path / "lockB"
    out_dir = tmp_path / "out"
    here.mkdir()
    out_dir.mkdir()
    if placement in ("beside", "both"):
        (out_dir / "pylock.toml").write_text(pylock(GOOD))
    if placement in ("cwd-only", "both"):
        (here / "pylock.toml").write_text(pylock(BAD))
    monkeypatch.chdir(here)
    if placement == "both":  # once through the CLI: -o decides where "beside" is
        r = _snap(small_venv, here, out_dir / "a.toml")
        assert r.returncode == 0, r.stderr
        m = envlock.load(str(out_dir / "a.toml"))
    else:
        m = envlock.snapshot(python=str(small_venv / "bin" / "python"), lock_dir=str(out_dir),
                             stack=False, libraries=False)
    if placement in ("beside", "both"):
        (ref,) = m.lockfiles.files
        assert ref.path == str(out_dir / "pylock.toml") and ref.found == "beside"
        assert ref.matches is True and ref.mismatches == ()
        assert ref.sha256 == hashlib.sha256((out_dir / "pylock.toml").read_bytes()).hexdigest()
    else:
        assert m.lockfiles.status == "absent" and m.lockfiles.files == ()
    noted = [w for w in m.envlock.warnings if "in the working directory" in w]
    if placement in ("cwd-only", "both"):
        assert noted and "not recorded" in noted[0] and str(here) in noted[0]
    else:
        assert noted == []


def test_given_lock_and_mismatch_named(tmp_path: Path, small_venv: Path) -> None:
    other = tmp_path / "elsewhere" / "env.lock.toml"
    other.parent.mkdir()
    other.write_text(pylock(BAD))
    r = _snap(small_venv, tmp_path, tmp_path / "a.toml", "--lock", str(other))
    assert r.returncode == 0, r.stderr
    (ref,) = envlock.load(str(tmp_path / "a.toml")).lockfiles.files
    assert (ref.found, ref.kind, ref.matches) == ("given", "pylock", False)
    assert ref.mismatches == ("alpha: locked 0.9.0, installed 1.0.0",
                              "torch: locked 2.14.1, not installed")
    assert "does not match this environment: alpha: locked 0.9.0, installed 1.0.0" in r.stderr
    bad = _snap(small_venv, tmp_path, tmp_path / "b.toml", "--lock", str(tmp_path / "nope.toml"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nope.toml" in bad.stderr


def test_marker_that_does_not_apply_is_not_a_mismatch(tmp_path: Path, small_venv: Path) -> None:
    (tmp_path / "pylock.toml").write_text(
        pylock({**GOOD, "pywin32": "306"}, marker={"pywin32": 'sys_platform == "win32"'}))
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"), lock_dir=str(tmp_path),
                         stack=False, libraries=False)
    assert m.lockfiles.files[0].matches is True


def test_restore_refuses_a_contradicting_recorded_lock(tmp_path: Path, small_venv: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "pylock.toml").write_text(pylock(BAD))
    assert _snap(small_venv, tmp_path, out / "a.toml").returncode == 0
    m = envlock.load(str(out / "a.toml"))
    assert contradictions(m, out / "pylock.toml") == [
        "alpha: locked 0.9.0, installed 1.0.0", "torch: locked 2.14.1, not installed"]
    r = subprocess.run([sys.executable, "-m", "envlock", "restore", str(out / "a.toml"),
                        "--prefix", str(tmp_path / "new")], check=False, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("Error")]
    assert len(err) == 1 and "contradicts the manifest" in err[0]
    assert "alpha: locked 0.9.0, installed 1.0.0" in err[0] and "torch" in err[0]
    assert not (tmp_path / "new").exists()
    # The agreeing lock, recorded by a new snapshot, restores (the plan names it).  A lock edited
    # after the snapshot is not used at all (its sha256 no longer matches the record).
    (out / "pylock.toml").write_text(pylock(GOOD))
    assert _snap(small_venv, tmp_path, out / "a.toml", "--force").returncode == 0
    ok = subprocess.run([sys.executable, "-m", "envlock", "restore", str(out / "a.toml"),
                         "--prefix", str(tmp_path / "new")], check=False, capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "pylock.toml" in ok.stdout


@pytest.mark.realenv
def test_issue_case_cpu_manifest_with_a_cuda_lock(tmp_path: Path, cpu_venv: Path) -> None:
    """The issue's case on the real CPU torch venv: a CUDA torch 2.14.1 pylock recorded with a
    torch 2.13.0+cpu manifest; restore names torch and exits 1."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "pylock.toml").write_text(pylock({"torch": "2.14.1", "numpy": "1.24.4"}))
    r = _snap(cpu_venv, tmp_path, out / "a.toml")
    assert r.returncode == 0, r.stderr
    (ref,) = envlock.load(str(out / "a.toml")).lockfiles.files
    assert ref.matches is False and ref.mismatches == ("torch: locked 2.14.1, installed 2.13.0+cpu",)
    rr = subprocess.run([sys.executable, "-m", "envlock", "restore", str(out / "a.toml"), "--prefix",
                         str(tmp_path / "new")], check=False, capture_output=True, text=True, timeout=120)
    assert rr.returncode == 1 and "torch: locked 2.14.1, installed 2.13.0+cpu" in rr.stderr


def test_conda_lock_and_explicit_compared_with_conda_meta(tmp_path: Path, conda_prefix: Path) -> None:
    import yaml

    from envlock.probes.lockfiles import Installed, compare_lock

    m = envlock.snapshot(prefix=str(conda_prefix), stack=False, libraries=False)
    have = Installed.of_manifest(m)
    base = "https://conda.anaconda.org/conda-forge/linux-64/"
    lock = {"version": 1, "metadata": {"platforms": ["linux-64", "osx-arm64"]}, "package": [
        {"name": "numpy", "version": "1.26.4", "manager": "conda", "platform": "linux-64",
         "url": base + "numpy-1.26.4-py311h64a7726_0.conda", "hash": {"md5": "0" * 32}},
        {"name": "python", "version": "3.11.8", "manager": "conda", "platform": "linux-64",
         "url": base + "python-3.11.8-hab00c5b_0_cpython.conda", "hash": {"md5": "0" * 32}},
        {"name": "python", "version": "3.12.0", "manager": "conda", "platform": "osx-arm64",
         "url": "https://x/osx-arm64/python-3.12.0-h0_0.conda", "hash": {"md5": "0" * 32}},
        {"name": "requests", "version": "2.31.0", "manager": "pip", "platform": "linux-64",
         "url": "https://files/requests-2.31.0-py3-none-any.whl", "hash": {"sha256": "0" * 64}},
    ]}
    (tmp_path / "conda-lock.yml").write_text(yaml.safe_dump(lock))
    assert compare_lock(tmp_path / "conda-lock.yml", "conda-lock", have) == [
        "python: locked 3.11.8 hab00c5b_0_cpython, installed 3.11.7 hab00c5b_1_cpython"]
    (tmp_path / "conda-linux-64.lock").write_text(
        "# platform: linux-64\n@EXPLICIT\n" + base + "numpy-1.26.4-py311h64a7726_0.conda#" + "0" * 32
        + "\n" + base + "zlib-1.3.1-h4ab18f5_1.conda\n")
    assert compare_lock(tmp_path / "conda-linux-64.lock", "conda-explicit", have) == [
        "zlib: locked 1.3.1 h4ab18f5_1, not installed"]


def test_output_directory_not_yet_there_is_absent(tmp_path: Path) -> None:
    m = envlock.snapshot(python=sys.executable, lock_dir=str(tmp_path / "new" / "dir"), stack=False,
                         libraries=False)
    assert m.lockfiles.status == "absent"
