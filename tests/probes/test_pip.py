"""The pip probe on real venvs, wheels built here and broken metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import envlock
from envlock.probes.pip import parse_direct_url, read_metadata_header, scan_distributions

from .conftest import pip_install, pip_list


def test_snapshot_of_real_venv_matches_pip_list(small_venv: Path) -> None:
    py = small_venv / "bin" / "python"
    m = envlock.snapshot(python=str(py))
    got = {p.name: p.version for p in m.pip.packages}
    assert got == pip_list(py)
    assert got["alpha"] == "1.0.0"
    assert got["beta-pkg"] == "2.1"
    assert m.target.kind == "venv"
    assert m.target.chosen_by == "--python"
    assert m.python.status == "ok"
    assert m.python.prefix == str(small_venv)


def test_origin_installer_requested(small_venv: Path) -> None:
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"))
    pkgs = {p.name: p for p in m.pip.packages}
    assert pkgs["alpha"].origin == "index"
    assert pkgs["alpha"].installer == "pip"
    assert pkgs["alpha"].requested is True
    gamma = pkgs["gamma"]
    assert gamma.origin == "archive"
    assert gamma.url is not None and gamma.url.startswith("file://")
    assert gamma.url.endswith("gamma-0.5.0-py3-none-any.whl")
    assert pkgs["alpha"].dist_info == "alpha-1.0.0.dist-info"


def _make_checkout(tmp_path: Path) -> Path:
    src = tmp_path / "mylib"
    (src / "mylib").mkdir(parents=True)
    (src / "mylib" / "__init__.py").write_text("X = 1\n")
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='mylib', version='0.2.0', packages=['mylib'])\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "."], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=src, check=True, env=env, timeout=60)
    return src


def _pip_editable_location(py: Path, name: str) -> str | None:
    """pip's own answer (the oracle): ``pip list -e``'s editable project location of ``name``."""
    out = subprocess.run([str(py), "-m", "pip", "list", "-e", "--format", "json"], capture_output=True,
                         text=True, check=True, timeout=120,
                         env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}).stdout
    return next((d.get("editable_project_location") for d in json.loads(out) if d["name"] == name), None)


@pytest.mark.parametrize("how", ["pep660", "setup.py develop"])
def test_editable_install_records_checkout_state(tmp_path: Path, how: str) -> None:
    """Case C13: an editable install of a git checkout records HEAD, branch, dirty and a diff hash
    — a PEP 660 one (PEP 610 ``dir_info.editable``) and a legacy ``setup.py develop`` one (an
    ``.egg-link``, what pip < 23.1 makes of a project without pyproject.toml, as Debian's
    python3 venvs bring), each where pip itself says it is."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    src = _make_checkout(tmp_path)
    if how == "pep660":
        # A real PEP 660 editable install; the build backend (setuptools) comes from the index.
        pip_install(py, "--use-pep517", "-e", str(src), index=True)
    else:
        # pip >= 23.1 needs both for it; setuptools 80 made `develop` a PEP 660 install (no
        # .egg-link), and venvs of Python >= 3.12 bring no setuptools, so the world is pinned here.
        pip_install(py, "setuptools<80", "wheel", index=True)
        pip_install(py, "--no-use-pep517", "-e", str(src), index=True)
        assert list((venv / "lib").glob("python3*/site-packages/mylib.egg-link"))
    assert _pip_editable_location(py, "mylib") == str(src)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()

    clean = {p.name: p for p in envlock.snapshot(python=str(py)).pip.packages}["mylib"]
    assert clean.origin == "editable"
    assert clean.editable_path == str(src)
    assert clean.git is not None
    assert clean.git.commit == head
    assert clean.git.branch == "main"
    assert clean.git.dirty is False
    assert clean.git.diff_sha256 is None

    (src / "mylib" / "__init__.py").write_text("X = 2\n")
    dirty = {p.name: p for p in envlock.snapshot(python=str(py)).pip.packages}["mylib"]
    assert dirty.version == clean.version
    assert dirty.git.dirty is True
    assert dirty.git.diff_sha256 is not None and len(dirty.git.diff_sha256) == 64

    (src / "mylib" / "__init__.py").write_text("X = 3\n")
    other = {p.name: p for p in envlock.snapshot(python=str(py)).pip.packages}["mylib"]
    assert other.git.diff_sha256 != dirty.git.diff_sha256


def test_a_plain_directory_install_records_no_checkout_state(tmp_path: Path) -> None:
    """`pip install ./mylib` (not -e) imports the copy made at install time: the checkout's
    git state now is not the imported code, so none is recorded (show called it "editable")."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    src = _make_checkout(tmp_path)
    # As a wheel built from the directory (PEP 517, pip's default from 23.1): pip records PEP 610
    # dir_info.  A legacy 'setup.py install' (pip < 23.1 without the wheel package) records no
    # origin at all, and pip freeze says only 'mylib==0.2.0'.
    pip_install(py, "--use-pep517", str(src), index=True)
    (src / "mylib" / "__init__.py").write_text("X = 2\n")  # the checkout moves on
    pkg = {p.name: p for p in envlock.snapshot(python=str(py)).pip.packages}["mylib"]
    assert pkg.origin == "directory" and pkg.url == f"file://{src}"
    assert pkg.git is None


def test_shadowed_copy_on_pythonpath(small_venv: Path, wheelhouse: Path, tmp_path: Path) -> None:
    """A second alpha earlier on sys.path (PYTHONPATH) wins; the venv's copy is listed as shadowed."""
    extra = tmp_path / "extra"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", str(extra), str(wheelhouse / "alpha-0.9.0-py3-none-any.whl")],
                   check=True, timeout=300, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(extra)}
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"), environ=env)
    alpha = {p.name: p for p in m.pip.packages}["alpha"]
    assert alpha.version == "0.9.0"
    assert alpha.location == str(extra)
    assert alpha.shadowed == (f"1.0.0 at {small_venv}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages",)
    assert any("alpha 0.9.0" in w and "shadows" in w for w in m.envlock.warnings)
    assert m.env.vars["PYTHONPATH"] == str(extra)


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir()
    return site


def test_corrupt_and_missing_metadata_are_recorded_not_fatal(tmp_path: Path) -> None:
    site = _site(tmp_path)
    good = site / "good-1.0.dist-info"
    good.mkdir()
    (good / "METADATA").write_text("Metadata-Version: 2.1\nName: Good\nVersion: 1.0\n\nbody\n")
    (site / "nometa-2.0.dist-info").mkdir()
    bad = site / "badbytes-3.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: bad\xff\xfe\nVersion: 3.0\n")
    trunc = site / "trunc-4.0.dist-info"
    trunc.mkdir()
    (trunc / "METADATA").write_text("Metadata-Version: 2.1\nNa")
    os.symlink(tmp_path / "gone", site / "broken-5.0.dist-info")
    du = site / "weirdurl-6.0.dist-info"
    du.mkdir()
    (du / "METADATA").write_text("Name: weirdurl\nVersion: 6.0\n")
    (du / "direct_url.json").write_text("{not json")

    info = scan_distributions([str(site)])
    pkgs = {p.name: p for p in info.packages}
    assert pkgs["good"].version == "1.0" and pkgs["good"].error is None
    assert pkgs["nometa"].version == "2.0"
    assert "METADATA: missing" in pkgs["nometa"].error
    assert pkgs["badbytes"].version == "3.0"
    assert "not UTF-8" in pkgs["badbytes"].error
    assert pkgs["trunc"].version == "4.0"
    assert "no Name field" in pkgs["trunc"].error
    assert "broken symlink" in pkgs["broken"].error
    assert pkgs["weirdurl"].version == "6.0"
    assert "direct_url.json: unreadable" in pkgs["weirdurl"].error


def test_snapshot_completes_and_warns_on_broken_dist(small_venv: Path, tmp_path: Path) -> None:
    site = _site(tmp_path)
    (site / "nometa-2.0.dist-info").mkdir()
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"),
                         environ={**os.environ, "PYTHONPATH": str(site)})
    assert any(w.startswith("pip: nometa:") and "METADATA: missing" in w for w in m.envlock.warnings)
    assert "alpha" in {p.name for p in m.pip.packages}


def test_egg_info_file_and_dir(tmp_path: Path) -> None:
    site = _site(tmp_path)
    (site / "old_style-0.1-py3.11.egg-info").write_text("Metadata-Version: 1.0\nName: old-style\nVersion: 0.1\n")
    d = site / "dev_pkg.egg-info"
    d.mkdir()
    (d / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: dev_pkg\nVersion: 0.0.1.dev3\n")
    pkgs = {p.name: p.version for p in scan_distributions([str(site)]).packages}
    assert pkgs == {"old-style": "0.1", "dev-pkg": "0.0.1.dev3"}


def test_metadata_header_stops_at_body(tmp_path: Path) -> None:
    p = tmp_path / "METADATA"
    p.write_text("Name: x\nVersion: 1\nRequires-Dist: a==1\nRequires-Dist: b; extra == 'z'\n"
                 "Description: line one\n        line two\n\nName: not-a-header\n")
    h = read_metadata_header(str(p))
    assert h["name"] == ["x"]
    assert h["requires-dist"] == ["a==1", "b; extra == 'z'"]
    assert h["description"] == ["line one\nline two"]


def test_metadata_header_undecodable_bytes(tmp_path: Path) -> None:
    p = tmp_path / "METADATA"
    p.write_bytes(b"Name: x\nVersion: 2.0\nAuthor: Fran\xe7ois\n"
                  b"Requires-Dist: nvidia-nccl-cu12==2.21.5\n\nBody.\n")
    with pytest.raises(UnicodeDecodeError):
        read_metadata_header(p)
    h = read_metadata_header(p, errors="replace")
    assert (h["version"], h["author"]) == (["2.0"], ["Fran\ufffdois"])
    assert h["requires-dist"] == ["nvidia-nccl-cu12==2.21.5"]


@pytest.mark.parametrize(
    ("data", "origin", "url", "extra"),
    [
        ({"url": "https://u:pw@example.org/p-1.0.tar.gz", "archive_info": {"hashes": {"sha256": "ab"}}},
         "archive", "https://example.org/p-1.0.tar.gz", {}),
        ({"url": "git+https://tok@github.com/org/p.git", "vcs_info": {"vcs": "git", "commit_id": "abc123",
          "requested_revision": "v1"}}, "vcs", "git+https://github.com/org/p.git",
         {"vcs": "git", "commit": "abc123", "requested_revision": "v1"}),
        ({"url": "file:///home/me/src/p", "dir_info": {"editable": True}}, "editable", "file:///home/me/src/p",
         {"local_path": "/home/me/src/p"}),
        ({"url": "file:///home/conda/feedstock_root/build_artifacts/p_1/work", "dir_info": {}}, "directory",
         "file:///home/conda/feedstock_root/build_artifacts/p_1/work", {"conda_build": True}),
    ],
    ids=["archive-credentials", "vcs-token", "editable", "conda-build-dir"],
)
def test_parse_direct_url(data: dict, origin: str, url: str, extra: dict) -> None:
    d = parse_direct_url(data)
    assert d.origin == origin
    assert d.url == url
    for k, v in extra.items():
        assert getattr(d, k) == v


@pytest.mark.parametrize("data", [[], {"dir_info": {}}, {"url": 3}], ids=["list", "no-url", "url-int"])
def test_parse_direct_url_rejects_junk(data: object) -> None:
    with pytest.raises(ValueError, match="no 'url' string"):
        parse_direct_url(data)


@pytest.mark.realenv
def test_cpu_torch_venv_matches_pip_list(cpu_venv: Path, tmp_path: Path) -> None:
    """Issue 2 acceptance: the snapshot records exactly what `pip list --format=json` prints."""
    py = cpu_venv / "bin" / "python"
    out = tmp_path / "m.toml"
    from click.testing import CliRunner

    from envlock.cli import cli

    res = CliRunner().invoke(cli, ["snapshot", "--python", str(py), "-o", str(out)])
    assert res.exit_code == 0, res.output
    m = envlock.load(str(out))
    assert {p.name: p.version for p in m.pip.packages} == pip_list(py)
    assert {p.name: p.version for p in m.pip.packages}["torch"] == "2.13.0+cpu"
    shown = CliRunner().invoke(cli, ["show", str(out)])
    assert shown.exit_code == 0
    assert "torch" in shown.output and "2.13.0+cpu" in shown.output
    assert "numpy" in shown.output and "1.24.4" in shown.output
    assert json.loads(m.dumps("json"))["pip"]["packages"][0]["name"]


@pytest.mark.realenv
def test_cuda_venv_snapshot_records_torch_libraries(cuda_venv: Path) -> None:
    """Issue 4: the snapshot's [libraries] has torch's resolved CUDA libraries, with owners."""
    m = envlock.snapshot(python=str(cuda_venv / "bin" / "python"))
    assert m.libraries is not None and m.libraries.status == "ok"
    libs = {r.soname: r for r in m.libraries.resolved}
    cudnn = libs["libcudnn.so.9"]
    assert cudnn.owner == "nvidia-cudnn-cu13" and cudnn.version == "9.24.0.43"
    assert cudnn.realpath == str(cuda_venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                 / "site-packages" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    assert "libcuda.so.1" in libs and libs["libcuda.so.1"].path is None  # no driver on this machine


def test_same_install_described_twice_is_not_shadowing(tmp_path: Path) -> None:
    """Debian's python3-* packages ship an .egg-info beside pip's .dist-info of the same release."""
    site = _site(tmp_path)
    d = site / "cryptography-38.0.4.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Name: cryptography\nVersion: 38.0.4\n")
    e = site / "cryptography-38.0.4.egg-info"
    e.mkdir()
    (e / "PKG-INFO").write_text("Name: cryptography\nVersion: 38.0.4\n")
    (pkg,) = scan_distributions([str(site)]).packages
    assert pkg.shadowed == ()


@pytest.mark.realenv
def test_libraries_answer_cache_matches_fresh_answer(cpu_venv: Path, tmp_path: Path) -> None:
    """[libraries] from the answer cache equals a fresh analysis; a changed LD_LIBRARY_PATH is
    another question (another entry)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    py = str(cpu_venv / "bin" / "python")
    first = envlock.snapshot(python=py, environ=env, stack=False).libraries
    assert list((tmp_path / "cache" / "envlock" / "snapshot-libs").glob("*.json"))
    again = envlock.snapshot(python=py, environ=env, stack=False).libraries
    assert again == first and first.status == "ok"
    other = envlock.snapshot(python=py, environ={**env, "LD_LIBRARY_PATH": str(tmp_path)}, stack=False).libraries
    assert other.ld_library_path == str(tmp_path)
    assert len(list((tmp_path / "cache" / "envlock" / "snapshot-libs").glob("*.json"))) == 2
