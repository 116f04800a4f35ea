"""A manifest or lockfile from someone else is data (docs/trust.md): ``restore`` (dry run and
``--run``) and ``bisect`` run nothing it names, pass no value of it as an option, write nothing
outside their roots, and contact only what the plan names.  Every payload below would leave a
trace if it were run, passed or written; the tests assert the trace is absent.
"""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from _checks import one_error


def restore(*args: object) -> object:
    return CliRunner().invoke(cli, ["restore", *map(str, args)])


# --- the interpreter a manifest names is a proposal, never run ---------------------------

def test_base_prefix_is_shown_not_run_in_a_dry_run_or_a_build(tmp_path, crafted, wheels):
    mark = tmp_path / "MARK"
    evil = crafted.payload_prefix(tmp_path / "evil", mark)
    m = crafted.base(python=crafted.PythonInfo(version=crafted.VERSION, base_prefix=str(evil)),
                     pip=crafted.pip(crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s")))
    mpath = m.write(tmp_path / "m.toml")
    new = tmp_path / "new"
    dry = restore(mpath, "--into", new, "--no-index", "--find-links", wheels)
    assert dry.exit_code == 0, dry.output
    assert not mark.exists() and not new.exists()
    assert f"--python {evil}" not in dry.stdout and "uv venv --quiet" in dry.stdout
    built = restore(mpath, "--into", new, "--no-index", "--find-links", wheels, "--run")
    assert built.exit_code == 0, built.output
    assert not mark.exists()
    assert f"find-links {wheels}" in built.stdout  # named before it ran
    assert (new / "lib").exists() and str(evil) not in (new / "pyvenv.cfg").read_text()


def test_an_interpreter_only_the_manifest_names_is_proposed(tmp_path, crafted):
    mark = tmp_path / "MARK"
    evil = crafted.payload_prefix(tmp_path / "evil", mark)
    m = crafted.base(python=crafted.PythonInfo(version="3.11.99", base_prefix=str(evil)),
                     pip=crafted.pip(crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s")))
    mpath = m.write(tmp_path / "m.toml")
    dry = restore(mpath, "--into", tmp_path / "new")
    assert dry.exit_code == 0, dry.output
    proposed = f"{evil}/bin/python3.11"
    assert (f"# the manifest names the interpreter {proposed}: not run (a manifest is data); "
            "--python PATH chooses one") in dry.stdout
    run = restore(mpath, "--into", tmp_path / "new", "--run")
    assert run.exit_code == 2 and f"--python {proposed} uses it" in run.output
    assert not mark.exists() and not (tmp_path / "new").exists()


@pytest.mark.parametrize("version", ["--help", "3.11; touch x", "../3"])
def test_a_python_version_that_is_not_one_is_refused(tmp_path, crafted, version):
    m = crafted.base(python=crafted.PythonInfo(version=version),
                     pip=crafted.pip(crafted.PipPackage(name="alpha", version="1.0",
                                                        location="/s")))
    one_error(restore(m.write(tmp_path / "m.toml")), "[python] version", "not a Python version")


# --- no value becomes an option -----------------------------------------------------------

def _vcs(url: str, commit: str = "a" * 40):
    from envlock.manifest import PipPackage

    return PipPackage(name="tool", version="1.0", location="/s", origin="vcs", vcs="git",
                      url=url, commit=commit)


#: (what, pip packages builder(mark, repo, commit), fragments of the one error line)
INJECTIONS = {
    "remote --upload-pack": (lambda c, mark, repo, commit: _remote(
        c, repo, commit, f"--upload-pack=touch {mark}"),
        ["git.remotes 'origin'", "--upload-pack", "is not a git remote"]),
    "remote ext::": (lambda c, mark, repo, commit: _remote(
        c, repo, commit, f"ext::sh -c touch% {mark}"), ["is not a git remote"]),
    "remote relative path": (lambda c, mark, repo, commit: _remote(c, repo, commit, "../repo"),
                             ["is not a git remote"]),
    "commit --orphan": (lambda c, mark, repo, commit: c.editable("proj", repo, "--orphan=x")[0],
                        ["git.commit", "'--orphan=x' is not a full hex commit"]),
    "name --index-url": (lambda c, mark, repo, commit: c.PipPackage(
        name="--index-url=https://evil.invalid/simple", version="1.0", location="/s"),
        ["name: '--index-url=https://evil.invalid/simple' is not a project name"]),
    "vcs url --upload-pack": (lambda c, mark, repo, commit: _vcs(f"--upload-pack=touch {mark}"),
                              ["'tool' url", "is not a git remote"]),
    "vcs commit option": (lambda c, mark, repo, commit: _vcs("https://git.example/t.git",
                                                             "--output=/tmp/x"),
                          ["'tool' commit", "is not a full hex commit"]),
    "archive url scheme": (lambda c, mark, repo, commit: c.PipPackage(
        name="tool", version="1.0", location="/s", origin="archive",
        url="ftp://evil.invalid/tool-1.0.tar.gz"), ["'tool' url", "is not a URL"]),
}


def _remote(c, repo, commit, url):
    return c.PipPackage(name="proj", version="0.1", location="/s", origin="editable",
                        editable_path=repo, git=c.GitInfo(path=repo, commit=commit, remotes=(
                            c.GitRemote(name="origin", url=url),)))


def _fields(pkg):
    import dataclasses

    return {f.name: getattr(pkg, f.name) for f in dataclasses.fields(pkg)}


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
@pytest.mark.parametrize("run", [False, True], ids=["dry-run", "run"])
def test_no_value_becomes_an_option(tmp_path, crafted, kind, run):
    mark = tmp_path / "MARK"
    repo, commit = crafted.local_repo(tmp_path / "repo")
    build, fragments = INJECTIONS[kind]
    m = crafted.base(pip=crafted.pip(build(crafted, mark, str(repo), commit)))
    new = tmp_path / "new"
    one_error(restore(m.write(tmp_path / "m.toml"), "--into", new, *(["--run"] if run else [])),
              *fragments, "nothing was run")
    assert not mark.exists() and not new.exists()


def test_a_conda_spec_that_is_not_one_is_refused(tmp_path, crafted):
    pkg = crafted.CondaPackage(name="liba", version="--override-channels", build="0",
                               url="https://conda.example/c/linux-64/liba-1-0.tar.bz2",
                               md5="0" * 32)
    m = crafted.base(target=crafted.Target(kind="conda", prefix="/old", chosen_by="--prefix"),
                     conda=crafted.CondaInfo(packages=(pkg,)))
    one_error(restore(m.write(tmp_path / "m.toml"), "--into", tmp_path / "new"),
              "[[conda.packages]] 'liba'", "is not an exact conda MatchSpec")


# --- nothing is written outside the target ------------------------------------------------

@pytest.mark.parametrize("name", ["../../escape", "../escape", "/abs/escape", ".."])
def test_an_editable_cannot_leave_the_prefix(tmp_path, crafted, name):
    repo, commit = crafted.local_repo(tmp_path / "repo")
    pkg = crafted.editable("proj", str(repo), commit)[0]
    pkg = pkg.__class__(**{**_fields(pkg), "name": name})
    new = tmp_path / "deep" / "new"
    mpath = crafted.base(pip=crafted.pip(pkg)).write(tmp_path / "m.toml")
    one_error(restore(mpath, "--into", new, "--run"), "nothing was run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml", "repo"]  # nothing cloned


def test_a_symlinked_src_cannot_lead_a_clone_outside(tmp_path, crafted):
    from envlock._untrusted import UntrustedValueError, contained

    (tmp_path / "prefix").mkdir()
    (tmp_path / "prefix" / "src").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UntrustedValueError, match="leads outside"):
        contained(tmp_path / "prefix", "src", "proj", field="f")
    assert contained(tmp_path / "p2", "src", "proj", field="f") == tmp_path / "p2/src/proj"


# --- another index, never unseen ------------------------------------------------------------

@pytest.mark.parametrize("option", [
    "--extra-index-url https://evil.invalid/simple", "--index-url=https://evil.invalid/simple",
    "-i https://evil.invalid/simple", "-f https://evil.invalid/simple",
    "--find-links https://evil.invalid/simple"])
def test_a_lockfile_index_is_refused_unless_admitted(tmp_path, crafted, wheels, option):
    lock = crafted.requirements_lock(tmp_path / "requirements.txt", wheels, option)
    mpath = crafted.with_lockfile(tmp_path / "m.toml", lock)
    one_error(restore(mpath, "--into", tmp_path / "new", "--run"),
              "names the index https://evil.invalid/simple",
              "--allow-index https://evil.invalid/simple", "nothing was run")
    assert not (tmp_path / "new").exists()
    for flag in (["--allow-index", "https://evil.invalid/simple/"], ["--trust-lockfile-indexes"]):
        dry = restore(mpath, "--into", tmp_path / "new", *flag)
        assert dry.exit_code == 0, dry.output
        contacts = dry.stdout.split("# --run contacts:\n")[1].split("\n# install")[0]
        assert "https://evil.invalid/simple (" in contacts and "requirements.txt" in contacts


@pytest.mark.parametrize("option,fragment", [
    ("--trusted-host evil.invalid", "--trusted-host evil.invalid turns off TLS verification"),
    ("--find-links ../../wheels", "is a local path"),
    ("-r ../../../etc/other.txt", "'-r' is not an option restore passes on"),
    ("--index-url ext::sh", "is not a URL"),
    ("--config-settings x=y", "'--config-settings' is not an option"),
])
def test_other_lockfile_options_are_refused(tmp_path, crafted, wheels, option, fragment):
    lock = crafted.requirements_lock(tmp_path / "requirements.txt", wheels, option)
    one_error(restore(crafted.with_lockfile(tmp_path / "m.toml", lock), "--into",
                      tmp_path / "new"), fragment)


def test_run_contacts_only_the_index_the_plan_named(tmp_path, crafted, wheels):
    """An admitted file:// find-links page of the lockfile: named in the plan, then used."""
    lock = crafted.requirements_lock(tmp_path / "requirements.txt", wheels,
                                     f"--no-index\n--find-links {wheels.as_uri()}")
    mpath = crafted.with_lockfile(tmp_path / "m.toml", lock)
    new = tmp_path / "new"
    refused = restore(mpath, "--into", new, "--run")
    one_error(refused, f"--allow-index {wheels.as_uri()}")
    result = restore(mpath, "--into", new, "--run", "--allow-index", wheels.as_uri())
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == ["# --run contacts:",
                         f"#   find-links {wheels.as_uri()} (--find-links in requirements.txt)"]
    assert (new / "lib").exists()


def test_a_pylock_index_and_vcs_source_are_named_and_admitted(tmp_path):
    from envlock.lock._sources import check_admitted, lockfile_sources
    from envlock._untrusted import UntrustedValueError

    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "x"\n\n[[packages]]\nname = "a"\nversion = "1"\n'
        'index = "https://evil.invalid/simple"\nwheels = [{ url = '
        '"https://files.evil.invalid/a-1-py3-none-any.whl", hashes = { sha256 = "00" } }]\n\n'
        '[[packages]]\nname = "b"\nvcs = { type = "git", url = "https://git.example/b.git", '
        f'commit-id = "{"a" * 40}" }}\n')
    src = lockfile_sources(lock, "pylock")
    assert src.indexes == ("https://evil.invalid/simple",)
    assert src.contacts == ("pip index https://evil.invalid/simple (index of packages in "
                            "pylock.toml)", "wheels from https://files.evil.invalid",
                            "git remote https://git.example/b.git (b)")
    assert src.builds == ("b: builds its vcs https://git.example/b.git (runs its build backend)",)
    with pytest.raises(UntrustedValueError, match="--allow-index https://evil.invalid/simple"):
        check_admitted(src, lock, {"https://pypi.org/simple"}, False)
    check_admitted(src, lock, {"https://evil.invalid/simple"}, False)


def test_the_users_own_configuration_admits_its_index(tmp_path, monkeypatch):
    from envlock.lock._sources import user_indexes

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple/\n")
    uv = tmp_path / "uv.toml"
    uv.write_text('[[index]]\nurl = "https://uv.example/simple"\n')
    got = user_indexes(["https://cli.example/simple"],
                       {"PIP_CONFIG_FILE": str(conf), "UV_CONFIG_FILE": str(uv),
                        "UV_EXTRA_INDEX_URL": "https://env.example/simple"})
    assert got == {"https://mirror.example/simple", "https://uv.example/simple",
                   "https://cli.example/simple", "https://env.example/simple",
                   "https://pypi.org/simple"}


# --- only the recorded patch, only with its sha256 --------------------------------------------

def _dirty_manifest(tmp_path, crafted, **patch):
    repo, commit = crafted.local_repo(tmp_path / "repo")
    pkg, g = crafted.editable("proj", str(repo), commit, dirty=True)
    top = crafted.GitInfo(path=str(repo), commit=commit, dirty=True, **patch)
    return crafted.base(git=top, pip=crafted.pip(pkg)).write(tmp_path / "m.toml"), repo


PATCH = (b"diff --git a/PWNED b/PWNED\nnew file mode 100644\n--- /dev/null\n+++ b/PWNED\n"
         b"@@ -0,0 +1 @@\n+pwned\n")


@pytest.mark.parametrize("recorded", ["none", "other sha256", "no sha256", "path name"])
def test_a_patch_is_applied_only_when_recorded_with_its_sha256(tmp_path, crafted, recorded):
    patch = {"none": {}, "other sha256": {"patch": "m.patch", "patch_sha256": "0" * 64},
             "no sha256": {"patch": "m.patch"},
             "path name": {"patch": "../m.patch",
                           "patch_sha256": hashlib.sha256(PATCH).hexdigest()}}[recorded]
    mpath, _repo = _dirty_manifest(tmp_path, crafted, **patch)
    (tmp_path / "m.patch").write_bytes(PATCH)
    result = restore(mpath, "--into", tmp_path / "new")
    if recorded == "path name":
        one_error(result, "[git] patch", "is not a file name")
        return
    assert result.exit_code == 0, result.output
    assert "apply" not in result.stdout
    assert "uncommitted changes of" in result.stderr and "are not restored" in result.stderr


def test_the_recorded_patch_is_applied_and_rechecked(tmp_path, crafted):
    mpath, _repo = _dirty_manifest(tmp_path, crafted, patch="m.patch",
                                   patch_sha256=hashlib.sha256(PATCH).hexdigest())
    (tmp_path / "m.patch").write_bytes(PATCH)
    from envlock.lock._apply import _check_patch
    from envlock.lock._restore import plan_restore
    from envlock.errors import LockError

    plan = plan_restore([mpath], tmp_path / "new")
    step = next(s for s in plan.steps if s.kind == "patch")
    assert step.argv[-2:] == ("--", str(tmp_path / "m.patch"))
    _check_patch(step)
    (tmp_path / "m.patch").write_bytes(PATCH + b"+more\n")  # swapped after the plan
    with pytest.raises(LockError, match="changed since the plan was made"):
        _check_patch(step)


# --- bisect ---------------------------------------------------------------------------------

def _bisect_pair(tmp_path, crafted, good_pkgs, bad_pkgs, **python):
    good = crafted.base(pip=crafted.pip(*good_pkgs), **python).write(tmp_path / "good.toml")
    bad = crafted.base(pip=crafted.pip(*bad_pkgs), **python).write(tmp_path / "bad.toml")
    return good, bad


def test_bisect_runs_neither_base_prefix_nor_target_python(tmp_path, crafted, wheels,
                                                           monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    mark = tmp_path / "MARK"
    evil = crafted.payload_prefix(tmp_path / "evil", mark)
    p = crafted.PipPackage
    good, bad = _bisect_pair(
        tmp_path, crafted, [p(name="alpha", version="1.0", location="/s")],
        [p(name="alpha", version="1.1", location="/s")],
        python=crafted.PythonInfo(version=crafted.VERSION, base_prefix=str(evil)),
        target=crafted.Target(kind="venv", prefix=str(evil), python=str(evil / "bin/python"),
                              chosen_by="--python"))
    cmd = ["python", "-c",
           "import alpha, sys; sys.exit(0 if alpha.__version__ == '1.0' else 1)"]
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--no-index",
                                      "--find-links", str(wheels), "--", *cmd])
    assert result.exit_code == 0, result.output
    assert "alpha" in result.stdout
    assert not mark.exists()


@pytest.mark.parametrize("name", ["--index-url=https://evil.invalid/simple", "../x"])
def test_bisect_refuses_an_option_as_a_package_before_building(tmp_path, crafted, name):
    p = crafted.PipPackage
    good, bad = _bisect_pair(tmp_path, crafted, [p(name="alpha", version="1.0", location="/s")],
                             [p(name=name, version="1.0", location="/s")])
    work = tmp_path / "w"
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--workdir", str(work),
                                      "--", "true"])
    one_error(result, "bad.toml", "is not a", "nothing was run")
    assert not work.exists()


def test_bisect_metric_without_a_group_is_refused_before_anything(tmp_path, crafted):
    p = crafted.PipPackage
    good, bad = _bisect_pair(tmp_path, crafted, [p(name="alpha", version="1.0", location="/s")],
                             [p(name="alpha", version="1.1", location="/s")])
    work = tmp_path / "w"
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--workdir", str(work),
                                      "--metric", r"sum=\S+", "--", "true"])
    one_error(result, "--metric", "put the number in a group", "nothing was built")
    assert not work.exists()


def test_a_failed_bisect_removes_its_temporary_workdir(tmp_path, crafted, wheels, monkeypatch):
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    p = crafted.PipPackage
    # GOOD's pin is on no index: its build fails, GOOD cannot be judged
    good, bad = _bisect_pair(tmp_path, crafted, [p(name="alpha", version="9.9", location="/s")],
                             [p(name="alpha", version="1.1", location="/s")])
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--no-index",
                                      "--find-links", str(wheels), "--", "true"])
    assert result.exit_code == 2 and "GOOD could not be judged" in result.output, result.output
    assert list(tmp.iterdir()) == []
    # GOOD builds but is skipped (125): the log the error names is kept, the envs are not
    (tmp_path / "second").mkdir()
    good, bad = _bisect_pair(tmp_path / "second", crafted,
                             [p(name="alpha", version="1.0", location="/s")],
                           [p(name="alpha", version="1.1", location="/s")])
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--no-index",
                                      "--find-links", str(wheels), "--", "sh", "-c", "exit 125"])
    assert result.exit_code == 2 and "see " in result.output, result.output
    (root,) = tmp.iterdir()
    assert [q.name for q in root.iterdir()] == ["logs"]
    assert str(root / "logs") in result.output
