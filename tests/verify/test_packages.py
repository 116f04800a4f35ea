"""Package checks on real venvs and a real conda-prefix layout: manifest, lockfiles, C11,
shadowed distributions, Python version."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envlock.verify.checks import CHECKS
from envlock.verify.checks.packages import describe_build, same_version
from envlock.errors import ManifestError
from envlock.verify import verify
from envlock.formats.markers import target_marker_env
from envlock.verify.expected import read_lock
from tests.verify.conftest import install_dist, remove_dist, site_packages, snapshot_to

PACKAGE_CHECKS = [c for c in CHECKS if c[0] in ("python", "packages", "locks", "overwritten", "shadowed")]


def run(venv, job_env, tmp_path, **kw):
    return verify(python=str(venv / "bin/python"), environ=job_env, checks=PACKAGE_CHECKS,
                  root=str(tmp_path), **kw)


def by_id(report, fid):
    return [f for f in report.findings if f.id == fid]


def test_same_environment_has_no_finding(tmp_path, venv, job_env):
    m = snapshot_to(venv, tmp_path / "m.toml")
    r = run(venv, job_env, tmp_path, manifest=str(m))
    assert r.findings == () and r.exit_code == 0 and r.status == "ok"


def test_missing_extra_and_version_mismatch(tmp_path, venv, job_env):
    m = snapshot_to(venv, tmp_path / "m.toml")
    site = site_packages(venv)
    remove_dist(site, "requests")
    remove_dist(site, "numpy")
    install_dist(site, "numpy", "2.0.1")
    install_dist(site, "tqdm", "4.66.4")
    install_dist(site, "setuptools", "70.0.0")  # tooling is never "extra"
    r = run(venv, job_env, tmp_path, manifest=str(m))
    assert sorted(f.id for f in r.findings) == ["packages.extra", "packages.missing", "packages.version-mismatch"]
    (missing,) = by_id(r, "packages.missing")
    assert missing.severity == "error" and missing.evidence == ("requests 2.31.0 (pip)",)
    (mismatch,) = by_id(r, "packages.version-mismatch")
    assert mismatch.title == "numpy 2.0.1 is installed; the manifest (m.toml) has 1.26.4"
    # the command names the environment verified; this venv has no pip (made --without-pip)
    assert mismatch.fix[0].startswith(f"uv pip install --python {venv}/bin/python 'numpy==1.26.4'")
    install_dist(site, "pip", "24.0")
    (mismatch,) = by_id(run(venv, job_env, tmp_path, manifest=str(m)), "packages.version-mismatch")
    assert mismatch.fix[0].startswith(f"{venv}/bin/python -m pip install 'numpy==1.26.4'")
    (extra,) = by_id(r, "packages.extra")
    assert extra.severity == "warning" and extra.evidence == ("tqdm 4.66.4 (pip)",)
    assert r.exit_code == 1


def test_local_label_difference_is_a_build_mismatch(tmp_path, venv, job_env):
    site = site_packages(venv)
    install_dist(site, "torch", "2.5.1+cu124")
    m = snapshot_to(venv, tmp_path / "m.toml")
    remove_dist(site, "torch")
    install_dist(site, "torch", "2.5.1+cu118")
    r = run(venv, job_env, tmp_path, manifest=str(m))
    (f,) = r.findings
    assert f.id == "packages.build-mismatch" and f.severity == "error"
    assert f.title == "torch 2.5.1+cu118 is a CUDA 11.8 build; the manifest (m.toml) has 2.5.1+cu124 (CUDA 12.4 build)"
    assert "https://download.pytorch.org/whl/cu124" in f.fix[0]


def test_equal_versions_under_pep440_are_not_reported(tmp_path, venv, job_env):
    m = snapshot_to(venv, tmp_path / "m.toml")
    text = m.read_text().replace('version = "1.26.4"', 'version = "1.26.4.0"')
    m.write_text(text)
    assert run(venv, job_env, tmp_path, manifest=str(m)).findings == ()
    assert same_version("1.0", "1.0.0") and not same_version("1.0", "1.0.1")
    assert describe_build("cu121") == "CUDA 12.1 build" and describe_build(None) is None


def test_python_version_mismatch(tmp_path, venv, job_env):
    m = snapshot_to(venv, tmp_path / "m.toml")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    m.write_text(m.read_text().replace(f'version = "{here}"', 'version = "3.9.18"'))
    r = run(venv, job_env, tmp_path, manifest=str(m))
    (f,) = by_id(r, "python.version-mismatch")
    assert f.severity == "error" and f.title == f"Python {here} runs; the manifest has 3.9.18"


def test_shadowed_by_pythonpath(tmp_path, venv, job_env):
    extra = tmp_path / "shared-libs"
    install_dist(extra, "numpy", "1.21.0")
    m = snapshot_to(venv, tmp_path / "m.toml")
    env = {**job_env, "PYTHONPATH": str(extra)}
    r = verify(python=str(venv / "bin/python"), environ=env, manifest=str(m), checks=PACKAGE_CHECKS,
               root=str(tmp_path))
    (f,) = by_id(r, "packages.shadowed")
    assert f.title == f"numpy 1.21.0 from {extra} hides 1.26.4 at {site_packages(venv)}"
    assert "PYTHONPATH comes before the environment" in f.cause
    assert f.fix[0].startswith("unset PYTHONPATH")
    (v,) = by_id(r, "packages.version-mismatch")
    assert v.title.startswith("numpy 1.21.0 is installed")


def test_broken_metadata_is_reported(tmp_path, venv, job_env):
    site = site_packages(venv)
    (site / "broken-1.0.dist-info").mkdir()
    r = run(venv, job_env, tmp_path)
    (f,) = by_id(r, "packages.metadata-error")
    assert "METADATA: missing" in f.evidence[0] and f.severity == "warning"


def test_c11_conda_package_overwritten_by_pip(tmp_path, conda_prefix, job_env):
    r = verify(prefix=str(conda_prefix), environ=job_env, checks=PACKAGE_CHECKS, root=str(tmp_path))
    (f,) = by_id(r, "packages.overwritten-by-pip")
    assert f.severity == "warning"
    assert f.title == "conda package twine 1.10.0 was overwritten by pip: Python imports 4.0.2"
    assert "conda-meta: twine-1.10.0-py311h06a4308_0.json (pkgs/main)" in f.evidence
    assert any(e.startswith("imported: ") and "twine-4.0.2.dist-info (INSTALLER pip)" in e for e in f.evidence)
    assert f.fix[0] == "Let one installer own it: `pip uninstall twine` then `conda install twine=4.0.2`"


def test_conda_build_and_md5_mismatch_against_the_manifest(tmp_path, conda_prefix, job_env):
    import envlock

    m = envlock.snapshot(prefix=str(conda_prefix), environ=job_env)
    path = tmp_path / "m.toml"
    m.write(path)
    rec = conda_prefix / "conda-meta/numpy-1.26.4-py311h64a7726_0.json"
    data = json.loads(rec.read_text())
    data["build"] = "py311h5f6a2c7_1"
    data["md5"] = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
    rec.write_text(json.dumps(data))
    r = verify(prefix=str(conda_prefix), environ=job_env, manifest=str(path), checks=PACKAGE_CHECKS,
               root=str(tmp_path))
    (f,) = by_id(r, "packages.build-mismatch")
    assert f.title == "conda package numpy 1.26.4: build py311h5f6a2c7_1 vs py311h64a7726_0 (the manifest (m.toml))"
    assert f.fix == ("conda install 'numpy=1.26.4=py311h64a7726_0'",)
    assert not by_id(r, "packages.version-mismatch")


PYLOCK = """\
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.10"

[[packages]]
name = "numpy"
version = "1.26.4"
wheels = [{ url = "https://files.pythonhosted.org/packages/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl", hashes = { sha256 = "b3ce300f3644fb06443ee2222c2201dd3a89ea6040541412b8fa189341847218" } }]

[[packages]]
name = "requests"
version = "2.32.3"
wheels = [{ url = "https://files.pythonhosted.org/packages/requests-2.32.3-py3-none-any.whl", hashes = { sha256 = "70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6" } }]

[[packages]]
name = "pywin32"
version = "306"
marker = "sys_platform == 'win32'"
wheels = [{ url = "https://files.pythonhosted.org/packages/pywin32-306-cp311-cp311-win_amd64.whl", hashes = { sha256 = "a7639f51c184c0272e93f244eb24dafca9b1855707d94c192d4a0b4c01e1100e" } }]

[[packages]]
name = "idna"
version = "3.7"
wheels = [{ url = "https://files.pythonhosted.org/packages/idna-3.7-py3-none-any.whl", hashes = { sha256 = "82fee1fc78add43492d3a1898bfa6d8a904cc97d8427f683ed8e798d07761aa0" } }]
"""


def test_pylock_name_not_normalized_is_refused_as_packaging_refuses_it(tmp_path):
    lock = tmp_path / "pylock.toml"
    lock.write_text(PYLOCK.replace('name = "requests"', 'name = "Requests"'))
    with pytest.raises(ManifestError, match=r"not a valid PEP 751 lock file \(Name 'Requests' is not"):
        read_lock(lock)


def test_pylock(tmp_path, venv, job_env):
    lock = tmp_path / "pylock.toml"
    lock.write_text(PYLOCK)
    # read for a marker environment: the win32-only entry is dropped
    parsed = read_lock(lock, marker_env=target_marker_env("3.11.7", "cpython"))
    assert [(p.name, p.version) for p in parsed.packages] == [("numpy", "1.26.4"), ("requests", "2.32.3"), ("idna", "3.7")]
    # read for verify: kept with its marker, which verify evaluates for the target
    kept = {p.name: p.marker for p in read_lock(lock).packages}
    assert kept["pywin32"] == 'sys_platform == "win32"' and kept["idna"] is None  # as packaging prints it
    r = run(venv, job_env, tmp_path, locks=[str(lock)])
    assert sorted(f.id for f in r.findings) == ["packages.missing", "packages.version-mismatch"]
    assert by_id(r, "packages.version-mismatch")[0].title == \
        "requests 2.31.0 is installed; lockfile pylock.toml has 2.32.3"
    assert by_id(r, "packages.missing")[0].evidence == ("idna 3.7 (pip)",)


def test_conda_lock_against_a_conda_prefix(tmp_path, conda_prefix, job_env):
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("""\
version: 1
metadata:
  content_hash: {linux-64: 0e5e2f}
  channels: [{url: conda-forge, used_env_vars: []}]
  platforms: [linux-64]
  sources: [environment.yml]
package:
- name: numpy
  version: 1.26.4
  manager: conda
  optional: false
  platform: linux-64
  dependencies: {python: '>=3.11,<3.12.0a0'}
  url: https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda
  hash: {md5: a3e5b7d6e7c3b1a2f0e4d5c6b7a8f9e0, sha256: 3f4365e11b28e244c95ba8579942b0802761ba7bb31c026f50d1a9ea9c728149}
- name: python
  version: 3.11.7
  manager: conda
  optional: false
  platform: linux-64
  url: https://conda.anaconda.org/conda-forge/linux-64/python-3.11.7-hab00c5b_1_cpython.conda
  hash: {md5: 27cf681282c11dba7b0b1fd266e8f289}
- name: python
  version: 3.11.7
  manager: conda
  optional: false
  platform: osx-arm64
  url: https://conda.anaconda.org/conda-forge/osx-arm64/python-3.11.7-hdf0ec26_1_cpython.conda
  hash: {md5: 0b3a8eeb7a2b6a4c3d2e1f0a9b8c7d6e}
- name: scipy
  version: 1.12.0
  manager: conda
  optional: false
  platform: linux-64
  url: https://conda.anaconda.org/conda-forge/linux-64/scipy-1.12.0-py311h64a7726_2.conda
  hash: {md5: 24ca5107ab75c5521067b8ba505dfae5}
""")
    r = verify(prefix=str(conda_prefix), environ=job_env, locks=[str(lock)], checks=PACKAGE_CHECKS,
               root=str(tmp_path))
    missing = by_id(r, "packages.missing")
    assert [f.evidence for f in missing] == [("scipy 1.12.0 (conda)",)]
    md5 = [f for f in by_id(r, "packages.build-mismatch") if "numpy" in f.title]
    assert md5 and "md5" in md5[0].title  # same build string, another archive
    extra = by_id(r, "packages.extra")
    assert extra and "requests" in extra[0].title and "twine" in extra[0].title


@pytest.mark.parametrize(("name", "text", "message"), [
    ("pylock.toml", "lock-version = \n", "malformed TOML"),
    ("pylock.toml", "[tool]\nx = 1\n", "not a PEP 751 lock file"),
    ("conda-lock.yml", "package: [\n", "malformed YAML"),
    ("conda-lock.yml", "version: 1\n", "not a conda-lock file"),
    ("requirements.txt", "numpy==1.0\n", "unknown lockfile kind"),
])
def test_bad_lockfiles_raise_one_line_errors(tmp_path, name, text, message):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ManifestError, match=message):
        read_lock(p)
    with pytest.raises(ManifestError, match="no such lockfile"):
        read_lock(tmp_path / "nope.toml")


def test_pylock_in_a_conda_env_does_not_call_conda_packages_extra(tmp_path, conda_prefix, job_env):
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "twine"\nversion = "4.0.2"\nwheels = [{ url = \"https://files.example.invalid/twine-4.0.2-py3-none-any.whl\", hashes = { sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\" } }]\n\n'
                    '[[packages]]\nname = "oddpkg"\nversion = "0.1"\nwheels = [{ url = \"https://files.example.invalid/oddpkg-0.1-py3-none-any.whl\", hashes = { sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\" } }]\n')
    r = verify(prefix=str(conda_prefix), environ=job_env, locks=[str(lock)], checks=PACKAGE_CHECKS[2:3],
               root=str(tmp_path))
    # numpy and requests belong to conda packages; mylab-tools too: none is a pip-lock extra.
    assert [f.id for f in r.findings] == [], [(f.id, f.title) for f in r.findings]


def test_a_crashing_interpreter_is_an_error(tmp_path, venv, job_env):
    """bin/python replaced by a program that crashes (as a broken shared library would make it)."""
    py = venv / "bin/python"
    py.unlink()
    py.write_text("#!/bin/sh\necho 'python: error while loading shared libraries: libpython3.11.so.1.0' >&2\nexit 127\n")
    py.chmod(0o755)
    r = run(venv, job_env, tmp_path)
    (f,) = by_id(r, "python.unusable")
    assert f.severity == "error" and "exited with status 127" in f.title
    assert f"sys.path fallback: {site_packages(venv)}" in f.evidence
    assert r.exit_code == 1


def test_a_local_label_install_fix_names_the_pytorch_index() -> None:
    """pip cannot install torch==2.13.0+cpu from PyPI: the fix names the variant's index."""
    from envlock.verify.checks.packages import _install_fix

    assert _install_fix("torch", "2.13.0+cpu", "pip") == (
        "pip install 'torch==2.13.0+cpu' --index-url https://download.pytorch.org/whl/cpu")
    assert _install_fix("numpy", "1.26.4", "pip") == "pip install 'numpy==1.26.4'"
    assert _install_fix("numpy", "1.26.4", "conda") == "conda install 'numpy=1.26.4'"


# PYLOCK as the fixture venv has it installed: requests at 2.31.0, no idna (the win32-only
# pywin32 entry stays: its marker does not hold here)
PYLOCK_OK = PYLOCK.replace("2.32.3", "2.31.0").split(  # the version and its wheel's name
    '[[packages]]\nname = "idna"')[0]


@pytest.mark.parametrize(("change", "why"), [
    (('requires-python = ">=3.10"', f'requires-python = ">={sys.version_info[0]}.{sys.version_info[1] + 1}"'),
     f"it requires Python >={sys.version_info[0]}.{sys.version_info[1] + 1}; the target's is "),
    (('created-by = "uv"', 'created-by = "uv"\nenvironments = ["sys_platform == \'win32\'"]'),
     "none of its environments holds here (Python "),
])
def test_a_pylock_for_another_python_or_platform_is_an_error(tmp_path, venv, job_env, change, why):
    """Every pin matches, but the lock is not for this target (PEP 751 requires-python and
    environments): before, verify said "ok"."""
    lock = tmp_path / "pylock.toml"
    lock.write_text(PYLOCK_OK)
    assert run(venv, job_env, tmp_path, locks=[str(lock)]).findings == ()
    lock.write_text(PYLOCK_OK.replace(*change))
    r = run(venv, job_env, tmp_path, locks=[str(lock)])
    assert [f.id for f in r.findings] == ["packages.lock-target"] and r.exit_code == 1
    assert r.findings[0].title.startswith(f"lockfile pylock.toml is not for this target: {why}")


def test_a_conda_lock_of_another_platform_is_an_error(tmp_path, venv, job_env):
    real = Path(__file__).resolve().parents[1] / "formats" / "foreign" / \
        "konstantinjdobler__nlp-research-template__ppc64le.conda-lock.yml"
    r = run(venv, job_env, tmp_path, locks=[str(real)])
    found = by_id(r, "packages.lock-target")
    assert len(found) == 1 and r.exit_code == 1
    assert "it locks linux-ppc64le; this machine is linux-64" in found[0].title
    # the fix is conda-lock's own command line, the spec a visible choice: conda-lock's CLI
    # (click) reads it as `lock` of that file for this platform
    import re
    import shlex
    import warnings

    from conda_lock.conda_lock import main as conda_lock_cli

    cmd = re.findall(r"`([^`]+)`", found[0].fix[0])[0]
    assert cmd == "conda-lock -f <environment.yml> -p linux-64"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = conda_lock_cli.make_context("conda-lock", shlex.split(cmd)[1:])
        name, sub, rest = conda_lock_cli.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
        params = sub.make_context(name, rest, parent=ctx).params
    assert (name, params["files"], params["platform"]) == ("lock", ("<environment.yml>",),
                                                           ("linux-64",))


def test_the_project_itself_is_not_an_extra_package(tmp_path, venv, job_env):
    """An editable install of the project (uv sync, pip install -e .) is what the lock is for;
    pylock leaves it out or lists it as a directory entry: never packages.extra."""
    import json as _json

    site = site_packages(venv)
    info = install_dist(site, "myproj", "0.1", installer="uv")
    (info / "direct_url.json").write_text(_json.dumps(
        {"url": f"file://{tmp_path}/src", "dir_info": {"editable": True}}))
    lock = tmp_path / "pylock.toml"
    lock.write_text(PYLOCK_OK)
    assert run(venv, job_env, tmp_path, locks=[str(lock)]).findings == ()
    remove_dist(site, "myproj")
    install_dist(site, "stranger", "1.0")  # a real extra is still one
    assert [f.id for f in run(venv, job_env, tmp_path, locks=[str(lock)]).findings] == ["packages.extra"]
