"""pylock.toml: ``envlock lock -r`` and the pip part of ``--from-env``, resolved by uv."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.lock import IndexOptions, _pip
from envlock.lock._pip import Skipped
from envlock.manifest import GitInfo, PipPackage

pytestmark = pytest.mark.usefixtures("offline_pip")


def invoke(*args: str) -> object:
    return CliRunner().invoke(cli, list(args))


def read_pylock(path: Path):
    from packaging.pylock import Pylock

    data = tomllib.loads(path.read_text())
    return data, Pylock.from_dict(data)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- requirement_for: what each install origin becomes --------------------------------------

def pkg(**kw) -> PipPackage:
    return PipPackage(**{"name": "demo", "version": "1.0", "location": "/env/site", **kw})


def test_index_install_is_pinned():
    assert _pip.requirement_for(pkg()) == "demo==1.0"


def test_vcs_install_is_pinned_to_its_commit():
    got = _pip.requirement_for(pkg(origin="vcs", vcs="git", url="https://example.org/demo.git",
                                   commit="0123456789abcdef0123456789abcdef01234567"))
    assert got == "demo @ git+https://example.org/demo.git@0123456789abcdef0123456789abcdef01234567"


def test_existing_local_archive_is_kept(tmp_path, h):
    wheel = h.make_wheel(tmp_path, "demo", "1.0")
    got = _pip.requirement_for(pkg(origin="archive", url=wheel.as_uri()))
    assert got == f"demo @ {wheel.as_uri()}"


def test_vanished_local_archive_is_not_reproducible(tmp_path):
    got = _pip.requirement_for(pkg(origin="archive", url=(tmp_path / "gone.whl").as_uri()))
    assert isinstance(got, Skipped) and got.kind == "not-reproducible"
    assert "no longer exists" in got.reason


def test_conda_build_work_directory_is_never_a_url():
    url = "file:///home/conda/feedstock_root/build_artifacts/demo_1700000000000/work"
    got = _pip.requirement_for(pkg(origin="directory", url=url))
    assert isinstance(got, Skipped) and got.kind == "not-reproducible"
    assert "conda-build work directory" in got.reason


def test_conda_owned_dist_is_attributed_to_conda():
    got = _pip.requirement_for(pkg(origin="conda", conda_package="demo-py"))
    assert got == Skipped(name="demo", version="1.0", kind="conda",
                          reason="installed by conda package demo-py; locked in conda-lock.yml")


def test_editable_install_reports_its_checkout():
    git = GitInfo(commit="abcdef0123456789" * 2 + "abcdef01", dirty=True)
    got = _pip.requirement_for(pkg(origin="editable", editable_path="/src/demo", git=git))
    assert isinstance(got, Skipped)
    assert got.reason == ("editable install of /src/demo (git abcdef012345, uncommitted changes); "
                          "reinstall it from its source")


def test_several_indexes_get_pips_best_match_rule():
    opts = IndexOptions(extra_index_urls=("file:///a/simple",), find_links=("/w",))
    assert opts.uv_args() == ["--extra-index-url", "file:///a/simple", "--find-links", "/w",
                              "--index-strategy", "unsafe-best-match"]
    assert IndexOptions(no_index=True, find_links=("/w",)).uv_args() == [
        "--find-links", "/w", "--no-index"]


# -- the target's pip configuration ---------------------------------------------------------

def test_pip_config_of_the_target_is_read(tmp_path, monkeypatch):
    import sys

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = file:///mirror/simple file:///more/simple\n"
                    "find-links = /from-file\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from-env")  # a PIP_* variable overrides the file
    got = _pip.pip_config_index(sys.executable)
    assert got == IndexOptions(extra_index_urls=("file:///mirror/simple", "file:///more/simple"),
                               find_links=("/from-env",), source=f"pip config of {sys.executable}")


def test_pip_config_without_options_is_none():
    import sys

    assert _pip.pip_config_index(sys.executable) is None


def test_pip_config_without_pip(tmp_path, h):
    venv = h.make_venv(tmp_path / "bare", tmp_path)  # uv venvs have no pip
    assert _pip.pip_config_index(str(venv / "bin" / "python")) is None


# -- envlock lock -r -----------------------------------------------------------------------

def test_lock_requirements_into_pylock(tmp_path, wheelhouse):
    req = tmp_path / "requirements.in"
    req.write_text("alpha\n")
    result = invoke("lock", "-r", str(req), "-o", str(tmp_path), "--no-index",
                    "--find-links", str(wheelhouse), "--python-version", "3.11")
    assert result.exit_code == 0, result.output
    data, lock = read_pylock(tmp_path / "pylock.toml")
    assert {p.name: str(p.version) for p in lock.packages} == {"alpha": "1.1", "beta": "2.5"}
    alpha = next(p for p in lock.packages if p.name == "alpha")
    wheel = wheelhouse / "alpha-1.1-py3-none-any.whl"
    assert alpha.wheels[0].url == wheel.as_uri()
    assert alpha.wheels[0].hashes == {"sha256": sha256(wheel)}
    assert data["tool"]["envlock"]["find-links"] == [str(wheelhouse)]
    assert data["tool"]["envlock"]["no-index"] is True


def test_lock_force_never_writes_through_a_planted_link(tmp_path, wheelhouse):
    """``lock --force -o D`` where someone planted ``D/pylock.toml -> victim``: one line,
    exit 2, nothing written (neither the victim nor the lockfile)."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (out / "pylock.toml").symlink_to(victim)
    req = tmp_path / "requirements.in"
    req.write_text("alpha\n")
    for force in ((), ("--force",)):
        result = invoke("lock", "-r", str(req), "-o", str(out), "--no-index", "--find-links",
                        str(wheelhouse), "--python-version", "3.11", *force)
        assert result.exit_code == 2, result.output
        [line] = result.output.splitlines()
        assert line.startswith(f"Error: {out / 'pylock.toml'} is a symbolic link"), line
    assert victim.read_text() == "precious\n" and (out / "pylock.toml").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["pylock.toml"]


def test_lock_requirements_txt_with_hashes(tmp_path, wheelhouse):
    req = tmp_path / "requirements.in"
    req.write_text("gamma-pkg\n")
    result = invoke("lock", "-r", str(req), "-o", str(tmp_path), "--no-index", "--find-links",
                    str(wheelhouse), "--requirements-txt", "--python-version", "3.11")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "requirements.txt").read_text()
    assert "alpha==1.0" in text  # gamma-pkg pins alpha==1.0
    assert f"--hash=sha256:{sha256(wheelhouse / 'alpha-1.0-py3-none-any.whl')}" in text
    assert f"--find-links {wheelhouse}" in text
    from envlock.lock import find_lockfiles

    assert [f.kind for f in find_lockfiles(tmp_path).files] == ["requirements"]


def test_unsatisfiable_requirements(tmp_path, wheelhouse):
    req = tmp_path / "requirements.in"
    req.write_text("alpha==9.0\n")
    result = invoke("lock", "-r", str(req), "-o", str(tmp_path), "--no-index",
                    "--find-links", str(wheelhouse))
    assert result.exit_code == 2
    assert "uv found no solution for requirements.in" in result.output
    assert "alpha==9.0" in result.output
    assert not (tmp_path / "pylock.toml").exists()


def test_lock_requirements_then_restore_into_a_venv(tmp_path, wheelhouse, h):
    req = tmp_path / "requirements.in"
    req.write_text("gamma-pkg\n")
    assert invoke("lock", "-r", str(req), "-o", str(tmp_path), "--no-index",
                  "--find-links", str(wheelhouse)).exit_code == 0
    venv = tmp_path / "venv"
    result = invoke("restore", str(tmp_path / "pylock.toml"), "--prefix", str(venv), "--run")
    assert result.exit_code == 0, result.output
    _, lock = read_pylock(tmp_path / "pylock.toml")
    assert h.installed(venv) == {p.name: str(p.version) for p in lock.packages}


# -- envlock lock --from-env on a venv -----------------------------------------------------

def add_dist(venv: Path, h, name: str, version: str, direct_url: dict) -> None:
    """A dist-info as pip writes it for a direct-URL install (PEP 610 direct_url.json)."""
    info = h.site_packages(venv) / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "direct_url.json").write_text(json.dumps(direct_url))


@pytest.fixture
def venv(tmp_path, wheelhouse, h) -> Path:
    venv = h.make_venv(tmp_path / "env", wheelhouse, "gamma-pkg", "beta==2.5")
    add_dist(venv, h, "mylib", "0.1.dev0",
             {"url": (tmp_path / "src" / "mylib").as_uri(), "dir_info": {"editable": True}})
    add_dist(venv, h, "conda-built", "3.2",
             {"url": "file:///home/conda/feedstock_root/build_artifacts/conda-built_17/work",
              "dir_info": {}})
    return venv


def test_from_env_pins_what_is_installed(tmp_path, venv, wheelhouse):
    out = tmp_path / "lock"
    result = invoke("lock", "--from-env", "--python", str(venv / "bin" / "python"), "-o", str(out),
                    "--no-index", "--find-links", str(wheelhouse))
    assert result.exit_code == 0, result.output
    data, lock = read_pylock(out / "pylock.toml")
    assert {p.name: str(p.version) for p in lock.packages} == {
        "alpha": "1.0", "beta": "2.5", "gamma-pkg": "0.3"}
    not_locked = {t["name"]: t for t in data["tool"]["envlock"]["not-locked"]}
    assert set(not_locked) == {"mylib", "conda-built"}
    assert "editable install of" in not_locked["mylib"]["reason"]
    assert "conda-build work directory" in not_locked["conda-built"]["reason"]
    text = (out / "pylock.toml").read_text()
    assert "feedstock_root" not in text.split("[tool.envlock]")[0]  # C12: never a package URL
    assert data["tool"]["envlock"]["index-source"] == "command line"
    assert "not reproducible from any lockfile:" in result.output
    assert "mylib 0.1.dev0: editable install of" in result.output


def test_from_env_takes_index_options_from_pip_config(tmp_path, venv, wheelhouse, monkeypatch):
    import sys

    # pip of envlock's own interpreter answers for the target here: uv venvs have no pip.
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    from envlock import snapshot
    from envlock.lock._fromenv import lock_manifest
    from envlock.manifest import Manifest, PythonInfo, Target

    m = snapshot(python=str(venv / "bin" / "python"))
    m = Manifest(envlock=m.envlock, target=Target(kind="venv", prefix=str(venv),
                 python=sys.executable, chosen_by="--python"),
                 python=PythonInfo(version=m.python.version), pip=m.pip)
    result = lock_manifest(m, tmp_path / "lock")
    data, lock = read_pylock(tmp_path / "lock" / "pylock.toml")
    assert data["tool"]["envlock"]["index-source"] == f"pip config of {sys.executable}"
    assert data["tool"]["envlock"]["find-links"] == [str(wheelhouse)]
    assert {p.name for p in lock.packages} == {"alpha", "beta", "gamma-pkg"}
    assert any("--no-index" in n for n in result.notes)


def test_from_env_round_trip(tmp_path, venv, wheelhouse, h):
    out = tmp_path / "lock"
    assert invoke("lock", "--from-env", "--prefix", str(venv), "-o", str(out), "--no-index",
                  "--find-links", str(wheelhouse)).exit_code == 0
    fresh = tmp_path / "fresh"
    result = invoke("restore", str(out / "pylock.toml"), "--prefix", str(fresh), "--run")
    assert result.exit_code == 0, result.output
    before = h.installed(venv)
    del before["mylib"], before["conda-built"]
    assert h.installed(fresh) == before


def test_from_env_when_the_index_lacks_the_version(tmp_path, venv, h):
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    result = invoke("lock", "--from-env", "--prefix", str(venv), "-o", str(tmp_path / "lock"),
                    "--no-index", "--find-links", str(empty))
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"Error: uv found no solution for the 3 installed pip package(s) of {venv}: Because ")
    assert "requirements.in" not in result.output
    assert not (tmp_path / "lock" / "pylock.toml").exists()


def test_existing_lock_needs_force(tmp_path, venv, wheelhouse):
    out = tmp_path / "lock"
    out.mkdir()
    (out / "pylock.toml").write_text("old\n")
    args = ["lock", "--from-env", "--prefix", str(venv), "-o", str(out), "--no-index",
            "--find-links", str(wheelhouse)]
    result = invoke(*args)
    assert result.exit_code == 2
    expected = f"Error: {out / 'pylock.toml'} exists; use --force to replace it"
    assert result.output.strip() == expected
    assert (out / "pylock.toml").read_text() == "old\n"
    assert invoke(*args, "--force").exit_code == 0
    assert (out / "pylock.toml").read_text() != "old\n"


def test_unreachable_index_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    req = tmp_path / "requirements.in"
    req.write_text("alpha\n")
    # Port 9 (discard) on the loopback address: nothing listens, the connection is refused.
    result = invoke("lock", "-r", str(req), "-o", str(tmp_path), "--index-url",
                    "http://127.0.0.1:9/simple")
    assert result.exit_code == 2
    line = result.output.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("Error: cannot reach the package index while resolving requirements.in:"
                           " Failed to fetch: http://127.0.0.1:9/simple/alpha/")
    assert "Connection refused" in line
    assert not (tmp_path / "pylock.toml").exists()


def test_lock_pyproject(tmp_path, wheelhouse):
    project = tmp_path / "pyproject.toml"
    project.write_text('[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
                       'dependencies = ["gamma-pkg", "beta<2.5"]\n')
    result = invoke("lock", "-r", str(project), "-o", str(tmp_path / "out"), "--no-index",
                    "--find-links", str(wheelhouse), "--python-version", "3.11")
    assert result.exit_code == 0, result.output
    data, lock = read_pylock(tmp_path / "out" / "pylock.toml")
    assert {p.name: str(p.version) for p in lock.packages} == {
        "alpha": "1.0", "beta": "2.0", "gamma-pkg": "0.3"}
    assert data["tool"]["envlock"]["source"] == "envlock lock -r pyproject.toml"


def test_unreadable_metadata_is_not_pinned():
    error = "/env/site/demo.dist-info/METADATA: missing"
    got = _pip.requirement_for(pkg(version="unknown", error=error))
    assert isinstance(got, Skipped)
    assert got.reason == ("version 'unknown' is not a PEP 440 version; no index can pin it "
                          "(/env/site/demo.dist-info/METADATA: missing)")


def test_pip_config_multiline_values(tmp_path, monkeypatch):
    import sys

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url =\n    file:///one/simple\n    file:///two/simple\n"
                    "[install]\nno-index = true\nfind-links = /wheels\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    got = _pip.pip_config_index(sys.executable)
    assert got.extra_index_urls == ("file:///one/simple", "file:///two/simple")
    assert got.find_links == ("/wheels",)
    assert got.no_index is True


def test_index_credentials_never_reach_the_lockfile():
    opts = IndexOptions(index_url="https://me:s3cret@pypi.example.org/simple",
                        extra_index_urls=("https://__token__:abc@mirror.example.org/simple",))
    table = opts.to_table()
    assert table["index-url"] == "https://pypi.example.org/simple"
    assert table["extra-index-urls"] == ["https://mirror.example.org/simple"]
    assert "s3cret" in " ".join(opts.uv_args())  # uv itself still needs them to log in


@pytest.mark.parametrize(("content", "name", "message"), [
    (None, "reqs.in", "is a FIFO"),
    ("# only a comment\n", "requirements.in", "no requirement in it"),
    (b"\xff\xfe\x00binary", "bin.in", "invalid UTF-8"),
    ("x = 1\n", "deps.toml", "-r takes a requirements file or a pyproject.toml"),
])
def test_requirements_input_is_checked_before_uv(tmp_path, content, name, message) -> None:
    """-r gets envlock's own input checks (one line, exit 2), not uv's multi-line answer."""
    import os

    from envlock.errors import ManifestError
    from envlock.lock import lock_requirements

    src = tmp_path / name
    if content is None:
        os.mkfifo(src)
    elif isinstance(content, bytes):
        src.write_bytes(content)
    else:
        src.write_text(content)
    with pytest.raises(ManifestError, match=message):
        lock_requirements(src, tmp_path / "out")


@pytest.mark.parametrize("one_line", [True, False], ids=["one-line", "lines"])
def test_uv_error_keeps_its_whole_explanation(wheelhouse, one_line):
    """uv's causes come before its conclusion: its last line alone ("And because you require
    alpha==1.1 …") loses gamma-pkg's pin; and the file envlock wrote for uv is not named."""
    from envlock.errors import SolveError
    from envlock.lock._pip import IndexOptions, compile_requirements

    index = IndexOptions(no_index=True, find_links=(str(wheelhouse),))
    with pytest.raises(SolveError) as caught:
        compile_requirements(["gamma-pkg", "alpha==1.1"], index=index, python_version="3.11",
                             what="the pins", one_line=one_line)
    text = str(caught.value)
    assert text.startswith("uv found no solution for the pins:")
    assert "gamma-pkg" in text and "alpha==1.0" in text and "alpha==1.1" in text
    assert "requirements.in" not in text
    assert (len(text.splitlines()) == 1) is one_line
