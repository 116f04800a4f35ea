"""``envlock lock -f environment.yml``: solved offline by py-rattler against a local channel."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.lock import _spec

pytestmark = pytest.mark.usefixtures("no_conda")


def write_env(tmp_path: Path, channel: Path, deps: str, extra: str = "") -> Path:
    spec = tmp_path / "environment.yml"
    spec.write_text(textwrap.dedent(f"""\
        name: demo
        channels:
          - {channel.as_uri()}
          - nodefaults
        {extra}
        dependencies:
        """) + textwrap.indent(textwrap.dedent(deps), "  "))
    return spec


def parse(path: Path):
    from conda_lock.lockfile import parse_conda_lock_file

    return parse_conda_lock_file(path)


def lock(*args: str) -> object:
    return CliRunner().invoke(cli, ["lock", *args])


def packages(lockfile: Path, platform: str = "linux-64") -> dict[str, tuple[str, str]]:
    doc = parse(lockfile)
    return {p.name: (p.version, p.build) for p in doc.package
            if p.platform == platform and p.manager == "conda"}


def test_solve_writes_a_lock_conda_lock_accepts(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- tool\n- zlib-ng\n")
    result = lock("-f", str(spec), "-p", "linux-64", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    lockfile = tmp_path / "out" / "conda-lock.yml"
    doc = parse(lockfile)
    assert doc.metadata.platforms == ["linux-64"]
    assert [c.url for c in doc.metadata.channels] == [conda_channel.as_uri()]
    assert doc.metadata.sources == ["../environment.yml"]
    # conda-lock's default virtual packages give __glibc 2.28: liba 2.0 (needs 2.40) is out.
    assert packages(lockfile) == {
        "tool": ("0.5", "pyh_0"), "liba": ("1.0", "h0_0"), "zlib-ng": ("2.2.4", "h7955e40_1"),
    }
    by_name = {p.name: p for p in doc.package}
    tool_file = conda_channel / "noarch" / "tool-0.5-pyh_0.tar.bz2"
    assert by_name["tool"].url == tool_file.as_uri()
    assert by_name["tool"].hash.md5 == hashlib.md5(tool_file.read_bytes()).hexdigest()
    assert by_name["tool"].hash.sha256 == hashlib.sha256(tool_file.read_bytes()).hexdigest()
    assert by_name["tool"].dependencies == {"liba": ">=1"}
    assert by_name["zlib-ng"].url.endswith("/linux-64/zlib-ng-2.2.4-h7955e40_1.conda")


def test_virtual_package_spec_changes_the_solution(tmp_path, conda_channel):
    vspec = tmp_path / "virtual-packages.yml"
    vspec.write_text("subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.41'\n"
                     "      __cuda: '12.4'\n      __unix: '0'\n")
    spec = write_env(tmp_path, conda_channel, "- appcuda\n")
    result = lock("-f", str(spec), "-p", "linux-64", "-o", str(tmp_path),
                  "--virtual-package-spec", str(vspec))
    assert result.exit_code == 0, result.output
    assert packages(tmp_path / "conda-lock.yml") == {
        "appcuda": ("1.0", "cuda12_0"), "liba": ("2.0", "h0_0"),
    }


def test_with_cuda_overrides_the_default(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- appcuda\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "--with-cuda", "12.4")
    assert result.exit_code == 0, result.output
    assert packages(tmp_path / "conda-lock.yml")["appcuda"] == ("1.0", "cuda12_0")


def test_unsatisfiable_shows_the_solver_reason_and_writes_nothing(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- appcuda\n")
    existing = tmp_path / "conda-lock.yml"
    existing.write_text("previous lock\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "--force")
    assert result.exit_code == 2
    # conda-lock's default __cuda is 11.4, appcuda needs >=12: the solver says so.
    assert "cannot be solved for linux-64" in result.output
    assert "__cuda >=12" in result.output
    assert existing.read_text() == "previous lock\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".conda-lock")] == []


def test_platform_selectors_are_honoured(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- tool\n- zlib-ng  # [osx]\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64")
    assert result.exit_code == 0, result.output
    assert "zlib-ng" not in packages(tmp_path / "conda-lock.yml")


def test_platforms_from_the_file(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- tool\n", extra="platforms: [linux-64]")
    result = lock("-f", str(spec), "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert parse(tmp_path / "conda-lock.yml").metadata.platforms == ["linux-64"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name: x\ndependencies: [a\n", "malformed YAML at line"),
        ("- just\n- a list\n", "top level is not a mapping"),
        ("name: x\nchannels: [c]\n", "'dependencies' must be a non-empty list"),
        ("name: x\nchannels: c\ndependencies: [a]\n", "'channels' must be a list"),
        ("name: x\nchannels: [c]\ndependencies: [{conda: a}]\n", "dependencies[0] is neither"),
    ],
    ids=["bad-yaml", "list", "no-deps", "channels-string", "unknown-section"],
)
def test_malformed_environment_file(tmp_path, content, message):
    spec = tmp_path / "environment.yml"
    spec.write_text(content)
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64")
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "conda-lock.yml").exists()


def test_missing_channel_is_one_line(tmp_path):
    spec = write_env(tmp_path, tmp_path / "no-such-channel", "- tool\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64")
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith("Error: cannot read the channels of")
    assert "no-such-channel" in line and "No such file or directory" in line
    assert len(line.splitlines()) == 1
    assert not (tmp_path / "conda-lock.yml").exists()


def test_unknown_platform(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- tool\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-286")
    assert result.exit_code == 2
    assert "unknown platform 'linux-286'" in result.output


def test_pip_section_resolved_by_uv(tmp_path, conda_channel, wheelhouse):
    spec = write_env(tmp_path, conda_channel, "- python\n- pip:\n  - alpha\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "--no-index",
                  "--find-links", str(wheelhouse))
    assert result.exit_code == 0, result.output
    doc = parse(tmp_path / "conda-lock.yml")
    pip = {p.name: p for p in doc.package if p.manager == "pip"}
    assert {n: p.version for n, p in pip.items()} == {"alpha": "1.1", "beta": "2.5"}
    wheel = wheelhouse / "alpha-1.1-py3-none-any.whl"
    assert pip["alpha"].url == wheel.as_uri()
    assert pip["alpha"].hash.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert packages(tmp_path / "conda-lock.yml")["python"] == ("3.11.7", "h_cpython_0")


def test_round_trip_install_matches_the_lock(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- tool\n- zlib-ng\n")
    assert lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64").exit_code == 0
    lockfile = tmp_path / "conda-lock.yml"
    prefix = tmp_path / "env"
    result = CliRunner().invoke(cli, ["restore", str(lockfile), "--prefix", str(prefix), "--run"])
    assert result.exit_code == 0, result.output
    assert "installed 3 conda packages with py-rattler" in result.output
    from envlock import snapshot

    manifest = snapshot(prefix=str(prefix))
    got = {c.name: (c.version, c.build, c.md5, c.sha256) for c in manifest.conda.packages}
    want = {p.name: (p.version, p.build, p.hash.md5, p.hash.sha256)
            for p in parse(lockfile).package}
    assert got == want
    assert (prefix / "share" / "zlib-ng" / "zlib-ng.txt").read_text() == "zlib-ng 2.2.4\n"
    # Lock the installed prefix again, from conda-meta (no solver): the same packages.
    relock = tmp_path / "relock"
    result = lock("--from-env", "--prefix", str(prefix), "-o", str(relock))
    assert result.exit_code == 0, result.output
    again = {p.name: (p.version, p.build, p.url, p.hash.md5, p.hash.sha256)
             for p in parse(relock / "conda-lock.yml").package}
    assert again == {p.name: (p.version, p.build, p.url, p.hash.md5, p.hash.sha256)
                     for p in parse(lockfile).package}


def test_conda_lock_runs_when_a_conda_executable_exists(tmp_path, conda_channel, monkeypatch):
    fake = tmp_path / "bin" / "micromamba"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'micromamba: this stand-in cannot solve' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    spec = write_env(tmp_path, conda_channel, "- tool\n")
    argv = _spec.conda_lock_command(spec, ["linux-64"], tmp_path / "x.yml", str(fake),
                                    cuda="12.4")
    assert argv[1:] == ["-m", "conda_lock", "lock", "--file", str(spec), "--lockfile",
                        str(tmp_path / "x.yml"), "--conda", str(fake), "--platform", "linux-64",
                        "--with-cuda", "12.4"]
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64")
    assert result.exit_code == 2
    assert "conda-lock failed" in result.output
    assert not (tmp_path / "conda-lock.yml").exists()


def test_solver_conda_lock_without_executable(tmp_path, conda_channel, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = write_env(tmp_path, conda_channel, "- tool\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "--solver", "conda-lock")
    assert result.exit_code == 2
    assert "needs conda, mamba or micromamba" in result.output


def test_read_environment_yml_local_channel_dir(tmp_path, conda_channel):
    (tmp_path / "chan").symlink_to(conda_channel)
    spec = tmp_path / "environment.yml"
    spec.write_text("channels: [./chan, conda-forge]\ndependencies: [tool, {pip: [alpha]}]\n")
    got = _spec.read_environment_yml(spec, "linux-64")
    assert got.channels == (conda_channel.resolve().as_uri(), "conda-forge")
    assert got.conda == ("tool",)
    assert got.pip == ("alpha",)


def test_virtual_packages_defaults_are_conda_locks():
    got = {n: v for n, v, _ in _spec.virtual_packages("linux-64")}
    assert got["__glibc"] == "2.28"
    assert got["__cuda"] == "11.4"
    assert "__cuda" not in {n: v for n, v, _ in _spec.virtual_packages("linux-64", cuda="")}
    archspec = [t for t in _spec.virtual_packages("linux-64") if t[0] == "__archspec"]
    assert archspec == [("__archspec", "1", "x86_64")]


def test_virtual_package_spec_rejects_real_packages(tmp_path):
    bad = tmp_path / "vp.yml"
    bad.write_text(json.dumps({"subdirs": {"linux-64": {"packages": {"glibc": "2.28"}}}}))
    with pytest.raises(ManifestError, match="not a virtual package spec"):
        _spec.virtual_packages("linux-64", spec_file=bad)
    with pytest.raises(ManifestError, match="no virtual packages given for platform osx-arm64"):
        _spec.virtual_packages("osx-arm64", spec_file=_write_vp(tmp_path))


def _write_vp(tmp_path: Path) -> Path:
    path = tmp_path / "vp-linux.yml"
    path.write_text("subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.28'\n")
    return path


def test_noarch_python_package_round_trip(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- pyfoo\n")
    assert lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64").exit_code == 0
    assert packages(tmp_path / "conda-lock.yml") == {
        "pyfoo": ("1.0", "pyh_0"), "python": ("3.11.7", "h_cpython_0"),
        "zlib-ng": ("2.2.4", "h7955e40_1")}
    prefix = tmp_path / "env"
    result = CliRunner().invoke(cli, ["restore", str(tmp_path / "conda-lock.yml"), "--prefix",
                                      str(prefix), "--run"])
    assert result.exit_code == 0, result.output
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert (site / "pyfoo" / "__init__.py").read_text() == "answer = 42\n"
    # Locking that prefix again: pyfoo's dist-info belongs to conda, so no pylock.toml.
    result = lock("--from-env", "--prefix", str(prefix), "-o", str(tmp_path / "relock"))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "relock").iterdir()) == ["conda-lock.yml"]
    assert "in conda-lock.yml, not pylock.toml (installed by conda): pyfoo 1.0" in result.output


@pytest.mark.parametrize(
    ("platform", "glibc", "expected"),
    [
        ("linux-64", "2.28", "x86_64-manylinux_2_28"),
        ("linux-64", "2.30", "x86_64-manylinux_2_28"),
        ("linux-64", "2.41", "x86_64-manylinux_2_40"),
        ("linux-64", "2.12", "x86_64-unknown-linux-gnu"),
        ("linux-aarch64", "2.36", "aarch64-manylinux_2_36"),
        ("osx-arm64", None, "aarch64-apple-darwin"),
    ],
)
def test_uv_platform(platform, glibc, expected):
    assert _spec.uv_platform(platform, glibc) == expected


def test_uv_platform_unknown_to_uv():
    from envlock.errors import LockError

    with pytest.raises(LockError, match="uv cannot resolve a pip: section for linux-ppc64le"):
        _spec.uv_platform("linux-ppc64le", "2.28")


def test_cluster_virtual_package_fixture():
    """The example spec shipped for docs/lock.md is one conda-lock accepts."""
    spec = Path(__file__).parents[2] / "fixtures" / "lock" / "cluster-virtual-packages.yml"
    got = {n: (v, b) for n, v, b in _spec.virtual_packages("linux-64", spec_file=spec)}
    assert got == {"__unix": ("0", ""), "__linux": ("4.18", ""), "__glibc": ("2.28", ""),
                   "__cuda": ("12.4", ""), "__archspec": ("1", "x86_64")}


def test_conda_lock_renders_the_lock_for_conda(tmp_path, conda_channel):
    """conda-lock's own ``render`` turns the lock into conda's explicit format (no conda)."""
    import subprocess
    import sys

    spec = write_env(tmp_path, conda_channel, "- tool\n")
    assert lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64").exit_code == 0
    subprocess.run([sys.executable, "-m", "conda_lock", "render", "-k", "explicit", "-p",
                    "linux-64", str(tmp_path / "conda-lock.yml")], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    text = (tmp_path / "conda-linux-64.lock").read_text()
    urls = [ln for ln in text.splitlines() if ln.startswith("file://")]
    liba = conda_channel / "linux-64" / "liba-1.0-h0_0.tar.bz2"
    tool = conda_channel / "noarch" / "tool-0.5-pyh_0.tar.bz2"
    # Dependencies first (conda-lock sorts topologically), each URL with its md5.
    assert urls == [f"{p.as_uri()}#{hashlib.md5(p.read_bytes()).hexdigest()}"
                    for p in (liba, tool)]
    assert "@EXPLICIT" in text


def test_several_platforms(tmp_path, conda_channel):
    spec = write_env(tmp_path, conda_channel, "- docs-theme\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "-p", "osx-arm64")
    assert result.exit_code == 0, result.output
    doc = parse(tmp_path / "conda-lock.yml")
    assert doc.metadata.platforms == ["linux-64", "osx-arm64"]
    assert sorted((p.name, p.platform) for p in doc.package) == [
        ("docs-theme", "linux-64"), ("docs-theme", "osx-arm64")]


def test_one_unsolvable_platform_writes_nothing(tmp_path, conda_channel):
    # liba exists for linux-64 only: tool solves there, not on osx-arm64.
    spec = write_env(tmp_path, conda_channel, "- tool\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "-p", "osx-arm64")
    assert result.exit_code == 2
    assert "cannot be solved for osx-arm64" in result.output
    assert "liba" in result.output
    assert not (tmp_path / "conda-lock.yml").exists()


# -- the py-rattler abort at exit (Fatal Python error: PyGILState_Release, exit 134) ---------

REAL_EXPORT = (Path(__file__).parent.parent / "formats" / "foreign"
               / "GuyTevet__motion-diffusion-model__environment.yml")


def _lock_unreachable(tmp_path: Path, runs: int) -> list[tuple[int, str]]:
    """Run ``envlock lock -f`` on a real ``conda env export`` whose channels cannot be reached
    (every proxy points at a closed port), ``runs`` times, two processes at a time."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy",)}
    env.update({v: "http://127.0.0.1:9" for v in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy",
                                                   "http_proxy", "ALL_PROXY")})
    argv = [sys.executable, "-m", "envlock", "lock", "-f", str(REAL_EXPORT), "-o",
            str(tmp_path), "-p", "linux-64", "--solver", "rattler"]
    out: list[tuple[int, str]] = []
    for start in range(0, runs, 2):
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(min(2, runs - start))]
        for p in procs:
            _, err = p.communicate(timeout=120)
            out.append((p.returncode, err))
    return out


def _check_no_abort(results: list[tuple[int, str]]) -> None:
    aborted = [err for rc, err in results if rc == 134 or "Fatal Python error" in err]
    assert not aborted, f"{len(aborted)} of {len(results)} runs aborted: {aborted[0][-400:]}"
    for rc, err in results:
        assert rc == 2, err
        errors = [ln for ln in err.splitlines() if ln.startswith("Error:")]
        assert len(errors) == 1 and "cannot read the channels" in errors[0], err


def test_failed_solve_exits_2_without_abort(tmp_path: Path) -> None:
    """Before the solve moved into its own process, 6 in 40 such runs aborted with exit 134."""
    _check_no_abort(_lock_unreachable(tmp_path, 2))


@pytest.mark.realenv
def test_failed_solve_never_aborts_in_50_runs(tmp_path: Path) -> None:
    _check_no_abort(_lock_unreachable(tmp_path, 50))


def test_the_library_does_what_lock_and_restore_do(tmp_path) -> None:
    """``envlock.write_lockfiles``/``envlock.restore`` are the CLI's calls (issue 27): the
    same refusal, and restore's dry-run plan of a real pylock is the one ``restore`` prints."""
    import envlock
    from envlock.errors import EnvlockError

    with pytest.raises(EnvlockError, match="give exactly one of"):
        envlock.write_lockfiles(tmp_path, spec="a.yml", requirements="b.in")
    lock = Path(__file__).resolve().parents[1] / "formats" / "foreign"
    pylock = next(lock.glob("*pylock.toml"))
    done = envlock.restore([pylock], tmp_path / "env", trust_lockfile_indexes=True)
    assert not done.ran and done.exit_code == 0
    out = CliRunner().invoke(cli, ["restore", str(pylock), "--into", str(tmp_path / "env"),
                                      "--trust-lockfile-indexes"]).output
    assert [s.shell for s in done.plan.steps] and all(s.shell in out for s in done.plan.steps)


def test_channel_override_drops_the_files_channel_pins(tmp_path, conda_channel):
    """``-c LOCAL`` replaces the file's channels: its ``pytorch::``/``conda-forge::`` pins would
    make py-rattler refuse every candidate ("candidate not in requested channel")."""
    spec = tmp_path / "environment.yml"
    spec.write_text("channels: [pytorch, nvidia, conda-forge]\n"
                    "dependencies: ['pytorch::tool', 'nvidia::appcuda', conda-forge::zlib-ng]\n")
    vspec = tmp_path / "vp.yml"
    vspec.write_text("subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.28'\n"
                     "      __cuda: '12.4'\n")
    result = lock("-f", str(spec), "-o", str(tmp_path), "-p", "linux-64", "-c",
                  conda_channel.as_uri(), "--virtual-package-spec", str(vspec))
    assert result.exit_code == 0, result.output
    assert ("channel pins dropped (-c replaces the file's channels): pytorch::tool, "
            "nvidia::appcuda, conda-forge::zlib-ng") in result.output
    lockfile = tmp_path / "conda-lock.yml"
    doc = parse(lockfile)
    assert [c.url for c in doc.metadata.channels] == [conda_channel.as_uri()]
    assert all(p.url.startswith(conda_channel.as_uri()) for p in doc.package)
    assert set(packages(lockfile)) == {"tool", "liba", "appcuda", "zlib-ng"}
    prefix = tmp_path / "env"
    result = CliRunner().invoke(cli, ["restore", str(lockfile), "--prefix", str(prefix), "--run"])
    assert result.exit_code == 0, result.output


def test_unpin_channels_keeps_pins_to_the_given_channels():
    specs, dropped = _spec.unpin_channels(
        ["pytorch::pytorch>=2", "conda-forge/linux-64::numpy", "local::tool", "python=3.11"],
        ["file:///srv/mirror/local", "conda-forge"])
    assert specs == ("pytorch>=2", "conda-forge/linux-64::numpy", "local::tool", "python=3.11")
    assert dropped == ["pytorch::pytorch>=2"]
