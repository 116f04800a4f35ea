"""``lock`` and ``verify`` treat a manifest, lockfile or spec file as data (docs/trust.md): they
run no interpreter only the file names, pass no value of it as an option, write nothing outside
their roots, and contact only what the user admitted.  Every payload below would leave a trace
(a marker file touched, a file outside the output directory, a connection to a local listener)
if it were run, passed, fetched or written; the tests assert the trace is absent.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from _checks import one_error


def invoke(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


def files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A local TCP port nothing should connect to: ``(http URL, socket)``."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield f"http://127.0.0.1:{s.getsockname()[1]}/simple", s
    s.close()


def contacted(s: socket.socket) -> bool:
    return bool(select.select([s], [], [], 0)[0])


@pytest.fixture
def payload(tmp_path, crafted):
    """``(mark, prefix)``: a prefix whose ``bin/python*`` touch ``mark`` when run."""
    mark = tmp_path / "MARK"
    return mark, crafted.payload_prefix(tmp_path / "evil", mark)


def evil_manifest(crafted, evil: Path, *packages, **tables):
    """A manifest whose every interpreter field names the payload."""
    py = str(evil / "bin" / "python")
    return crafted.base(
        target=crafted.Target(kind="venv", prefix=str(evil), python=py, chosen_by="--python"),
        python=crafted.PythonInfo(version=crafted.VERSION, executable=py, prefix=str(evil),
                                  base_prefix=str(evil), status="ok"),
        pip=crafted.pip(*packages), **tables)


# --- lock --from-manifest: the interpreter it names is never run -------------------------------

def test_lock_from_manifest_never_runs_the_interpreter_it_names(tmp_path, crafted, wheels,
                                                                payload, monkeypatch):
    mark, evil = payload
    monkeypatch.chdir(tmp_path)
    alpha = crafted.PipPackage(name="alpha", version="1.0", location="/s")
    mpath = evil_manifest(crafted, evil, alpha).write(tmp_path / "m.toml")
    before = files(tmp_path)
    out = tmp_path / "out"
    result = invoke("lock", "--from-manifest", mpath, "-o", out, "--no-index", "--find-links",
                    wheels)
    assert result.exit_code == 0, result.output
    assert not mark.exists()
    assert files(tmp_path) - before == {out, out / "pylock.toml"}  # nothing else written
    digest = hashlib.sha256((wheels / "alpha-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    assert digest in (out / "pylock.toml").read_text()  # uv really locked it, for the version


def test_lock_from_manifest_resolves_for_the_python_the_user_gives(tmp_path, crafted, wheels,
                                                                   payload):
    mark, evil = payload
    alpha = crafted.PipPackage(name="alpha", version="1.0", location="/s")
    mpath = evil_manifest(crafted, evil, alpha).write(tmp_path / "m.toml")
    result = invoke("lock", "--from-manifest", mpath, "-o", tmp_path / "out", "--no-index",
                    "--find-links", wheels, "--python", sys.executable)
    assert result.exit_code == 0, result.output
    assert not mark.exists() and (tmp_path / "out" / "pylock.toml").is_file()


def _conda(**kw):
    from envlock.manifest import CondaInfo, CondaPackage

    fields = {"name": "zlib", "version": "1.3.1", "build": "h4ab18f5_1", "subdir": "linux-64",
              "url": "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-h4ab18f5_1.conda",
              "md5": "0" * 32, "sha256": "0" * 64, **kw}
    return CondaInfo(packages=(CondaPackage(**fields),))


#: (pip packages(crafted, mark), conda table(mark) or None, fragments of the one error line)
LOCK_MANIFEST_INJECTIONS = {
    "name --index-url": (
        lambda c, mark: [c.PipPackage(name="--index-url=https://evil.invalid/simple",
                                      version="1.0", location="/s")], None,
        ["name: '--index-url=https://evil.invalid/simple' is not a project name"]),
    "name with a newline option": (
        lambda c, mark: [c.PipPackage(name="alpha\n--extra-index-url=https://evil.invalid",
                                      version="1.0", location="/s")], None,
        ["is not a project name", "nothing was run"]),
    "vcs url --upload-pack": (
        lambda c, mark: [c.PipPackage(name="tool", version="1.0", location="/s", origin="vcs",
                                      vcs="git", url=f"--upload-pack=touch {mark}",
                                      commit="a" * 40)], None,
        ["'tool' url", "is not a git remote"]),
    "vcs url ext::": (
        lambda c, mark: [c.PipPackage(name="tool", version="1.0", location="/s", origin="vcs",
                                      vcs="git", url=f"ext::sh -c touch% {mark}",
                                      commit="a" * 40)], None,
        ["'tool' url", "is not a git remote"]),
    "vcs commit option": (
        lambda c, mark: [c.PipPackage(name="tool", version="1.0", location="/s", origin="vcs",
                                      vcs="git", url="https://git.example/t.git",
                                      commit="--output=/tmp/x")], None,
        ["'tool' commit", "is not a full hex commit"]),
    "archive url scheme": (
        lambda c, mark: [c.PipPackage(name="tool", version="1.0", location="/s",
                                      origin="archive", url="ftp://evil.invalid/t-1.0.tar.gz")],
        None, ["'tool' url", "is not a URL"]),
    "conda name option": (
        lambda c, mark: [], lambda mark: _conda(name="--override-channels"),
        ["[[conda.packages]] '--override-channels'", "is not an exact conda MatchSpec"]),
    "conda url ext::": (
        lambda c, mark: [], lambda mark: _conda(url=f"ext::sh -c touch% {mark}"),
        ["[[conda.packages]] 'zlib' url", "is not a URL"]),
    "conda subdir ../": (
        lambda c, mark: [], lambda mark: _conda(subdir="../../outside"),
        ["[[conda.packages]] 'zlib' subdir: '../../outside' is not a file name"]),
}


@pytest.mark.parametrize("kind", sorted(LOCK_MANIFEST_INJECTIONS))
def test_lock_from_manifest_refuses_a_value_that_is_not_data(tmp_path, crafted, payload, kind,
                                                             monkeypatch):
    mark, evil = payload
    monkeypatch.chdir(tmp_path)
    pips, conda, fragments = LOCK_MANIFEST_INJECTIONS[kind]
    m = evil_manifest(crafted, evil, *pips(crafted, mark),
                      **({"conda": conda(mark)} if conda is not None else {}))
    mpath = m.write(tmp_path / "m.toml")
    before = files(tmp_path)
    one_error(invoke("lock", "--from-manifest", mpath, "-o", tmp_path / "out"), *fragments,
              "nothing was run")
    assert not mark.exists() and files(tmp_path) == before


@pytest.mark.parametrize("version", ["--help", "3.11; touch x", "../3"])
def test_lock_from_manifest_refuses_a_python_version_that_is_not_one(tmp_path, crafted, version):
    m = crafted.base(python=crafted.PythonInfo(version=version, status="ok"),
                     pip=crafted.pip(crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s")))
    one_error(invoke("lock", "--from-manifest", m.write(tmp_path / "m.toml"), "-o",
                     tmp_path / "out"), "[python] version", "is not a Python version")
    assert not (tmp_path / "out").exists()


# --- lock -r: the file is read as uv would read it, before uv runs --------------------------------

def _reqs(tmp_path: Path, text: str, name: str = "requirements.in") -> Path:
    path = tmp_path / "in" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_lock_r_uses_an_index_the_file_names_only_when_admitted(tmp_path, wheels, listener):
    url, sock = listener
    src = _reqs(tmp_path, f"--extra-index-url {url}\nalpha==1.0\n")
    one_error(invoke("lock", "-r", src, "-o", tmp_path / "out"),
              f"requirements.in: names the index {url}, which is not in your configuration; "
              f"lock uses it only with --allow-index {url} (or --trust-lockfile-indexes); "
              "nothing was run")
    assert not contacted(sock) and not (tmp_path / "out").exists()
    links = wheels.as_uri()
    src = _reqs(tmp_path, f"--find-links {links}\nalpha==1.0 ; python_version >= '3'\n")
    one_error(invoke("lock", "-r", src, "-o", tmp_path / "out", "--no-index"),
              f"names the index {links}")
    admitted = invoke("lock", "-r", src, "-o", tmp_path / "out", "--no-index",
                      "--allow-index", links)
    assert admitted.exit_code == 0, admitted.output
    assert 'name = "alpha"' in (tmp_path / "out" / "pylock.toml").read_text()


@pytest.mark.parametrize(("line", "fragment"), [
    ("-r ../../etc/other.txt", "'-r' is not an option lock passes on"),
    ("-e /tmp/somewhere", "'-e' is not an option lock passes on"),
    ("-c constraints.txt", "'-c' is not an option lock passes on"),
    ("--config-settings=x=y", "'--config-settings' is not an option lock passes on"),
    ("--find-links ../wheels", "--find-links '../wheels' is a local path"),
    ("--extra-index-url ext::sh", "is not a URL"),
    ("--trusted-host evil.invalid", "--trusted-host evil.invalid turns off TLS verification"),
    ("alpha==1.0 --install-option=--prefix=/tmp/x", "option '--install-option'"),
])
def test_lock_r_refuses_options_uv_would_follow(tmp_path, line, fragment):
    one_error(invoke("lock", "-r", _reqs(tmp_path, f"{line}\nalpha==1.0\n"), "-o",
                     tmp_path / "out"), fragment, "nothing was run")
    assert not (tmp_path / "out").exists()


def _project(tmp_path: Path, mark: Path, extra: str) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "backend.py").write_text(f"import pathlib\npathlib.Path({str(mark)!r}).touch()\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        f'[project]\nname = "proj"\nversion = "0.1"\n{extra}')
    return root / "pyproject.toml"


@pytest.mark.parametrize(("extra", "fragments"), [
    ('dynamic = ["dependencies"]\n',
     ["[project] dynamic names 'dependencies': uv would run the project's build backend"]),
    ('dependencies = ["alpha"]\n[tool.uv.sources]\nalpha = { git = "https://git.example/a" }\n',
     ["[tool.uv.sources] names where packages come from"]),
    ('dependencies = ["--index-url=https://evil.invalid/simple"]\n',
     ["[project] dependency: '--index-url=https://evil.invalid/simple' is not a requirement"]),
    ('dependencies = ["alpha"]\n[tool.uv]\nextra-index-url = ["https://evil.invalid/simple"]\n',
     ["names the index https://evil.invalid/simple", "--allow-index"]),
])
def test_lock_r_pyproject_runs_no_build_backend_and_follows_no_source(tmp_path, extra,
                                                                      fragments):
    mark = tmp_path / "MARK"
    pyproject = _project(tmp_path, mark, extra)
    one_error(invoke("lock", "-r", pyproject, "-o", tmp_path / "out", "--no-index"), *fragments,
              "nothing was run")
    assert not mark.exists() and not (tmp_path / "out").exists()


def test_lock_r_pyproject_with_static_dependencies_builds_nothing(tmp_path, wheels):
    mark = tmp_path / "MARK"
    pyproject = _project(tmp_path, mark, 'dependencies = ["alpha==1.0"]\n')
    result = invoke("lock", "-r", pyproject, "-o", tmp_path / "out", "--no-index",
                    "--find-links", wheels)
    assert result.exit_code == 0, result.output
    assert not mark.exists() and 'name = "alpha"' in (tmp_path / "out" / "pylock.toml").read_text()


# --- lock -f: an environment.yml's specs, channels and pip: lines are data ---------------------------

@pytest.mark.parametrize(("body", "fragments"), [
    ("channels: [conda-forge]\ndependencies:\n  - --override-channels\n",
     ["environment.yml dependencies[0]: '--override-channels' is not a conda MatchSpec"]),
    ("channels: ['--channel=https://evil.invalid']\ndependencies: [python]\n",
     ["environment.yml channels[0]", "is not a conda channel"]),
    ("channels: ['ext::sh -c touch']\ndependencies: [python]\n",
     ["channels[0]", "is not a conda channel"]),
    ("channels: [conda-forge]\ndependencies:\n  - python\n  - pip:\n"
     "    - --extra-index-url https://evil.invalid/simple\n    - alpha\n",
     ["names the index https://evil.invalid/simple", "lock uses it only with --allow-index"]),
    ("channels: [conda-forge]\ndependencies:\n  - python\n  - pip:\n    - -e ../checkout\n",
     ["'-e' is not an option lock passes on"]),
    ("channels: [conda-forge]\ndependencies:\n  - python\n  - pip:\n"
     "    - '--index-url=https://evil.invalid/simple alpha'\n",
     ["is not an option lock passes on"]),
])
def test_lock_f_refuses_specs_channels_and_pip_lines_that_are_options(tmp_path, body, fragments,
                                                                      listener):
    spec = tmp_path / "environment.yml"
    spec.write_text(body)
    for solver in ("rattler", "auto"):
        one_error(invoke("lock", "-f", spec, "-o", tmp_path / "out", "-p", "linux-64",
                         "--solver", solver), *fragments, "nothing was run")
    assert not (tmp_path / "out").exists()


# --- verify: it checks the live target the user chose, never one the manifest names -------------

def test_verify_never_runs_an_interpreter_only_the_manifest_names(tmp_path, crafted, payload):
    from envlock.verify import verify

    mark, evil = payload
    m = evil_manifest(crafted, evil, crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s"))
    mpath = m.write(tmp_path / "m.toml")
    seen: list[tuple[str, ...]] = []

    from envlock._run import run

    def recording(argv, **kw):
        seen.append(tuple(map(str, argv)))
        return run(argv, **kw)

    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "VIRTUAL_ENV")}
    for kwargs in ({"python": sys.executable}, {"environ": {**env, "VIRTUAL_ENV": sys.prefix}}):
        for build in (False, True):
            report = verify(manifest=str(mpath), timeout=30, runner=recording, cwd=str(tmp_path),
                            build=build, **kwargs)  # type: ignore[arg-type]
            assert report.target["python"] != str(evil / "bin" / "python")
    assert not mark.exists()
    assert seen and not any(str(evil) in a for argv in seen for a in argv)
    cli_run = invoke("verify", "--manifest", mpath, "--python", sys.executable, "--format",
                     "json", "--timeout", "30")
    assert cli_run.exit_code in (0, 1), cli_run.output
    assert not mark.exists()


def test_verify_reads_lockfiles_without_contacting_or_running_what_they_name(
        tmp_path, crafted, payload, listener):
    mark, evil = payload
    url, sock = listener
    pylock = tmp_path / "pylock.toml"
    pylock.write_text(
        'lock-version = "1.0"\ncreated-by = "x"\n'
        '[[packages]]\nname = "alpha"\nversion = "1.0"\n'
        f'index = "{url}"\n'
        f'[[packages.wheels]]\nurl = "{url}/alpha-1.0-py3-none-any.whl"\n'
        'hashes = { sha256 = "' + "0" * 64 + '" }\n'
        '[[packages]]\nname = "tool"\nversion = "1.0"\n'
        f'vcs = {{ type = "git", url = "{url}/tool.git", commit-id = "{"a" * 40}" }}\n')
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"--extra-index-url {url}\nalpha==1.0\n")
    m = evil_manifest(crafted, evil, crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s"))
    mpath = m.write(tmp_path / "m.toml")
    before = files(tmp_path)
    result = invoke("verify", "--manifest", mpath, "--lock", pylock, "--python", sys.executable,
                    "--format", "json", "--timeout", "30")
    assert result.exit_code in (0, 1), result.output  # checked, not refused
    assert '"packages.' in result.output  # the lock was compared with the live target
    assert not contacted(sock) and not mark.exists()
    assert files(tmp_path) == before  # verify writes nothing beside the inputs
