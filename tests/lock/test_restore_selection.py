"""``restore``'s selection options for project locks — ``--extra``, ``--group``,
``--all-extras``, ``--all-groups``, ``--no-dev`` (``verify --lock``'s and ``diff``'s) and
``--environment`` for a pixi.lock — held to each tool's own reading: ``uv export --frozen``
with the same options, pdm's ``GroupSelection`` and ``LockedRepository.evaluate_candidates``,
py-rattler's ``LockFile.environment(NAME)``; with no option, what each tool installs with
none (``uv export --frozen``, ``GroupSelection(project)``; for poetry its documented rule on a
hand-made project).  An end-to-end ``restore --run --extra X`` of a real offline ``uv lock``
then passes ``verify --lock uv.lock --extra X``; with ``[tool.uv] default-groups``,
``verify --lock`` and ``diff`` read the lock's default groups as ``uv export`` does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner
from packaging.markers import Marker
from packaging.utils import canonicalize_name

from envlock._selection import Requested
from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.lock._restore import plan_restore

from _projectlocks import (PEERS, PY, TARGET, pdm_installs, pdm_project, pytorch_project, run_uv,
                           simple_index)

pytestmark = [pytest.mark.usefixtures("offline_pip"),
              pytest.mark.skipif(not PEERS.is_dir(), reason="the peers cases are not here")]


def _written(plan) -> list[tuple[str, str, str]]:
    """``(path, title, text)`` of the plan's write steps."""
    return [(s.argv[1], s.title, s.content) for s in plan.steps if s.kind == "write"]


def _pylock(text: str) -> dict[str, str | None]:
    return {p["name"]: p.get("version") for p in tomllib.loads(text)["packages"]}


def _restore(*args: str):
    return CliRunner().invoke(cli, ["restore", *args])


# -- uv.lock: uv's PyTorch recipe (conflicting extras cpu / cu124) against uv export ----------

@pytest.fixture
def pytorch(tmp_path: Path) -> Path:
    """uv's own lock of its PyTorch recipe beside its pyproject.toml (:func:`pytorch_project`)."""
    return pytorch_project(tmp_path / "p")


def _uv_export(proj: Path, *args: str) -> dict[str, str | None] | None:
    """``{name: version}`` of ``uv export --frozen ARGS`` for :data:`TARGET` (tests/formats'
    oracle helper), ``None`` when uv refuses."""
    from formats.test_uv_export_oracle import _export, _pinned

    export = _export(proj, *args)
    if export is None:
        return None
    return dict(_pinned([r for r in export
                         if r.marker is None or Marker(str(r.marker)).evaluate(TARGET)]))


@pytest.mark.parametrize("extra", ["cpu", "cu124"])
def test_an_extra_of_the_pytorch_recipe_is_what_uv_exports(pytorch: Path, tmp_path: Path,
                                                           extra: str) -> None:
    theirs = _uv_export(pytorch, "--extra", extra)
    assert theirs is not None and theirs["torch"] == f"2.5.1+{extra}"
    plan = plan_restore([pytorch / "uv.lock"], tmp_path / "env", python_version=PY,
                        trust_lockfile_indexes=True, requested=Requested(extras=(extra,)))
    [(dest, title, text)] = _written(plan)
    assert _pylock(text) == theirs
    assert title.endswith(f"uv.lock for CPython {PY} on linux {TARGET['platform_machine']}, "
                          f"--extra {extra} as uv sync takes it: extras {extra}")
    # the torch wheels are the ones the lock has for that extra's index, with their hashes
    raw = tomllib.loads((pytorch / "uv.lock").read_text())
    locked = {w["url"]: w["hash"] for p in raw["package"] for w in p.get("wheels", [])}
    torch = next(p for p in tomllib.loads(text)["packages"] if p["name"] == "torch")
    assert torch["wheels"] and all(f"/whl/{extra}" in w["url"] or extra in w["url"]
                                   for w in torch["wheels"])
    assert all(locked[w["url"]] == "sha256:" + w["hashes"]["sha256"] for w in torch["wheels"])


def test_conflicting_extras_are_one_error_as_uv_refuses_them(pytorch: Path, tmp_path: Path) -> None:
    assert _uv_export(pytorch, "--extra", "cpu", "--extra", "cu124") is None  # uv refuses
    for args in (["--extra", "cpu", "--extra", "cu124"], ["--all-extras"]):
        r = _restore(str(pytorch / "uv.lock"), "--prefix", str(tmp_path / "env"),
                     "--python-version", PY, "--trust-lockfile-indexes", "--run", *args)
        assert r.exit_code == 2, r.output
        assert r.output.count("Error:") == 1 and "extra cpu and extra cu124 are declared " \
            "conflicting" in r.output and "uv sync refuses them together" in r.output
        assert list(tmp_path.iterdir()) == [pytorch]


def test_an_unknown_extra_or_group_is_one_error_naming_the_locks(pytorch: Path,
                                                                 tmp_path: Path) -> None:
    assert _uv_export(pytorch, "--extra", "cu999") is None  # uv refuses it too
    r = _restore(str(pytorch / "uv.lock"), "--prefix", str(tmp_path / "env"),
                 "--python-version", PY, "--extra", "cu999", "--group", "docs")
    assert r.exit_code == 2
    assert r.output.count("Error:") == 1
    assert "no extra 'cu999', group 'docs' in this lock (its extras: cpu, cu124; its groups: " \
           "none)" in r.output


def test_a_bad_option_is_said_before_the_python_the_lock_refuses(pytorch: Path,
                                                                 tmp_path: Path) -> None:
    """Both wrong — an extra the lock lacks, and a Python its requires-python (>=3.12.0) does
    not admit: the option (the user's to fix first) is the one ``Error:``; with the extra
    right, the Python is."""
    assert _uv_export(pytorch, "--extra", "cu999") is None  # uv refuses the extra
    said = {}
    for extra in ("cu999", "cpu"):
        r = _restore(str(pytorch / "uv.lock"), "--prefix", str(tmp_path / "env"),
                     "--python-version", "3.11.7", "--extra", extra)
        assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
        said[extra] = r.output
    assert "no extra 'cu999' in this lock" in said["cu999"] and "3.11.7" not in said["cu999"]
    assert "locked for Python >=3.12.0, not 3.11.7" in said["cpu"]


def test_options_that_no_input_takes_are_one_error(tmp_path: Path) -> None:
    pylock = PEERS / "pixilock" / "pypi-custom-registry__pixi.lock"
    uvlock = PEERS / "uvlock" / "ecosystem__flask__uv.lock"
    conda_lock = next((PEERS / "condalock").glob("*.yml"), None) \
        if (PEERS / "condalock").is_dir() else None
    cases = [([str(pylock), "--extra", "x"], "choose the install of a uv.lock, pdm.lock or "
              "poetry.lock; the inputs are pixi.lock"),
             ([str(uvlock), "--environment", "cuda"], "--environment chooses the environment of "
              "a pixi.lock; the inputs are uv.lock")]
    if conda_lock is not None:
        cases.append(([str(conda_lock), "--extra", "x"], "the inputs are conda-lock"))
    for args, said in cases:
        r = _restore(*args, "--prefix", str(tmp_path / "env"), "--python-version", PY)
        assert r.exit_code == 2 and r.output.count("Error:") == 1 and said in r.output, r.output


# -- uv's default groups: [tool.uv] default-groups, unless --no-dev --------------------------

def _uv_project(root: Path, wheelhouse: Path, pyproject: str) -> tuple[Path, Path]:
    """``(project, index)``: a real ``uv lock`` of ``pyproject`` (its text), made offline
    against a simple index of ``wheelhouse`` under ``root``."""
    index = simple_index(root / "simple", wheelhouse)
    proj = root / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    run_uv(["lock", "--index-url", index.as_uri(), "-q"], proj)
    return proj, index


def test_uvs_default_groups_come_with_a_selection_as_uv_export_takes_them(
        tmp_path: Path, wheelhouse: Path) -> None:
    proj, index = _uv_project(
        tmp_path, wheelhouse,
        '[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = ["beta"]\n\n[project.optional-dependencies]\nmore = ["alpha"]\n\n'
        '[dependency-groups]\ndev = ["gamma-pkg"]\nlint = ["alpha"]\n\n'
        '[tool.uv]\ndefault-groups = ["lint"]\n')
    for args in ([], ["--group", "dev"], ["--extra", "more", "--no-dev"], ["--all-groups"],
                 ["--group", "dev", "--no-dev"], ["--no-dev"], ["--all-groups", "--no-dev"]):
        theirs = _uv_export(proj, *args)
        assert theirs is not None, args
        req = Requested(extras=tuple(args[i + 1] for i, a in enumerate(args) if a == "--extra"),
                        groups=tuple(args[i + 1] for i, a in enumerate(args) if a == "--group"),
                        all_groups="--all-groups" in args, no_dev="--no-dev" in args)
        plan = plan_restore([proj / "uv.lock"], tmp_path / "env", python_version=PY,
                            allow_index=[index.as_uri()], requested=req)
        [(_dest, title, text)] = _written(plan)
        assert _pylock(text) == theirs, args
        if not args:  # uv sync with no option: [tool.uv] default-groups, not dev
            assert theirs["alpha"] and "gamma-pkg" not in theirs
            assert title.endswith("default install as uv sync takes it: groups lint")


def test_uvs_default_groups_all_is_every_group_as_uv_export_takes_it(
        tmp_path: Path, wheelhouse: Path) -> None:
    proj, index = _uv_project(
        tmp_path, wheelhouse,
        '[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = []\n\n[dependency-groups]\ndev = ["gamma-pkg"]\nlint = ["beta"]\n\n'
        '[tool.uv]\ndefault-groups = "all"\n')
    for args in ([], ["--no-dev"]):
        theirs = _uv_export(proj, *args)
        assert theirs is not None, args
        plan = plan_restore([proj / "uv.lock"], tmp_path / "env", python_version=PY,
                            allow_index=[index.as_uri()],
                            requested=Requested(no_dev="--no-dev" in args))
        [(_dest, title, text)] = _written(plan)
        assert _pylock(text) == theirs, args
    assert title.endswith("--no-dev as uv sync takes it: groups lint")


def test_verify_and_diff_read_uvs_default_groups_as_uv_export_takes_them(
        tmp_path: Path, wheelhouse: Path, h: object) -> None:
    """``[tool.uv] default-groups = ["lint"]``: ``--no-dev`` keeps lint (uv's ``--no-group
    dev``), so ``uv export --frozen --no-dev`` is lint's beta; restored with ``--no-dev``,
    ``verify --lock uv.lock --no-dev`` and ``diff uv.lock MANIFEST --no-dev`` read the lock for
    ``--group lint`` (not for no group, as when dev was taken for the default) and pass."""
    proj, index = _uv_project(
        tmp_path, wheelhouse,
        '[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = []\n\n[dependency-groups]\ndev = ["gamma-pkg"]\nlint = ["beta"]\n\n'
        '[tool.uv]\ndefault-groups = ["lint"]\n')
    lock, env = proj / "uv.lock", tmp_path / "env"
    theirs = _uv_export(proj, "--no-dev")
    assert theirs == {"beta": "2.5"}
    assert _uv_export(proj) == theirs and set(_uv_export(proj, "--group", "dev") or ()) == {
        "alpha", "beta", "gamma-pkg"}
    r = _restore(str(lock), "--prefix", str(env), "--run", "--allow-index", index.as_uri(),
                 "--no-dev")
    assert r.exit_code == 0, r.output
    assert h.installed(env) == theirs  # type: ignore[attr-defined]
    v = subprocess.run([sys.executable, "-m", "envlock", "verify", "--python",
                        str(env / "bin" / "python"), "--lock", str(lock), "--no-dev",
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
    found = json.loads(v.stdout)["findings"]
    assert not {f["id"] for f in found} & {"packages.missing", "packages.extra",
                                            "packages.version-mismatch"}
    assert [f["title"] for f in found if f["id"] == "packages.lock-selection"] == [
        "lockfile uv.lock read for --group lint (as given)"]
    manifest = tmp_path / "manifest.toml"
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                    str(env / "bin" / "python"), "-o", str(manifest)], check=True,
                   capture_output=True, timeout=300)
    d = subprocess.run([sys.executable, "-m", "envlock", "diff", str(lock), str(manifest),
                        "--no-dev", "--format", "json"], capture_output=True, text=True,
                       timeout=120)
    doc = json.loads(d.stdout)
    assert d.returncode == 0, doc["differences"]
    assert any("uv.lock read for --group lint (as given)" in str(c) for c in doc["context"]), \
        doc["context"]


def test_restore_run_with_an_extra_then_verify_with_it_passes(tmp_path: Path, wheelhouse: Path,
                                                              h: object) -> None:
    index = simple_index(tmp_path / "simple", wheelhouse)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = ["beta"]\n\n[project.optional-dependencies]\nmore = ["gamma-pkg"]\n')
    run_uv(["lock", "--index-url", index.as_uri(), "-q"], proj)
    lock = proj / "uv.lock"
    env = tmp_path / "env"
    r = _restore(str(lock), "--prefix", str(env), "--run", "--allow-index", index.as_uri(),
                 "--extra", "more")
    assert r.exit_code == 0, r.output
    assert "--extra more as uv sync takes it: extras more" in r.output
    assert h.installed(env) == {"beta": "2.5", "gamma-pkg": "0.3", "alpha": "1.0"}  # type: ignore[attr-defined]
    v = subprocess.run([sys.executable, "-m", "envlock", "verify", "--python",
                        str(env / "bin" / "python"), "--lock", str(lock), "--extra", "more",
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout
    ids = {f["id"] for f in json.loads(v.stdout)["findings"]}
    assert not ids & {"packages.missing", "packages.extra", "packages.version-mismatch"}


# -- pdm.lock: pdm's GroupSelection, then its locked repository's candidates -----------------

@pytest.mark.parametrize("args", [[], ["--group", "security"], ["--extra", "security"],
                                  ["--group", "tests"], ["--extra", "security", "--no-dev"],
                                  ["--all-groups"], ["--all-groups", "--no-dev"]])
def test_pdm_groups_are_what_pdm_installs(args: list[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdm")
    from pdm.cli.filters import GroupSelection

    project = pdm_project(  # security: an optional group; tests: a dev group
        (PEERS / "pdmlock" / "demo__pdm.lock").read_text(),
        '[project]\nname = "x"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = ["idna", "chardet"]\n\n[project.optional-dependencies]\n'
        'security = ["requests"]\n\n[dependency-groups]\ntests = ["pytest"]\n', tmp_path, monkeypatch)
    proj = tmp_path / "p"
    named = [args[i + 1] for i, a in enumerate(args) if a in ("--group", "--extra")]
    selection = GroupSelection(project, groups=[":all"] if "--all-groups" in args else named,
                               dev=False if "--no-dev" in args else None)
    groups = list(selection)
    theirs = pdm_installs(project, groups)
    req = Requested(extras=tuple(args[i + 1] for i, a in enumerate(args) if a == "--extra"),
                    groups=tuple(args[i + 1] for i, a in enumerate(args) if a == "--group"),
                    all_groups="--all-groups" in args, no_dev="--no-dev" in args)
    plan = plan_restore([proj / "pdm.lock"], tmp_path / "env", python_version=PY,
                        trust_lockfile_indexes=True, requested=req)
    [(_dest, title, text)] = _written(plan)
    assert _pylock(text) == theirs
    took = sorted(g for g in groups if g != "default")
    assert title.endswith(f"as pdm install takes it: groups {', '.join(took)}")
    # pdm install with no option: the groups the lock was made with (both still declared)
    assert args or "default install as pdm install takes it: groups security, tests" in title


def test_pdm_install_with_no_option_takes_the_locked_groups_still_declared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pdm install`` with no option: the lock's ``[metadata] groups`` that the pyproject.toml
    still declares (pdm's ``GroupSelection``): ``security`` locked but no longer declared is
    left out, the dev group ``tests`` comes."""
    pytest.importorskip("pdm")
    from pdm.cli.filters import GroupSelection

    project = pdm_project(
        (PEERS / "pdmlock" / "demo__pdm.lock").read_text(),
        '[project]\nname = "x"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = ["idna", "chardet"]\n\n[dependency-groups]\ntests = ["pytest"]\n', tmp_path, monkeypatch)
    proj = tmp_path / "p"
    groups = list(GroupSelection(project))
    assert sorted(groups) == ["default", "tests"]
    theirs = pdm_installs(project, groups)
    plan = plan_restore([proj / "pdm.lock"], tmp_path / "env", python_version=PY,
                        trust_lockfile_indexes=True)
    [(_dest, title, text)] = _written(plan)
    assert _pylock(text) == theirs
    assert title.endswith("default install as pdm install takes it: groups tests")


def test_a_pdm_dev_group_with_no_dev_is_one_error_as_pdm_refuses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdm")
    from pdm.cli.filters import GroupSelection
    from pdm.exceptions import PdmUsageError

    project = pdm_project((PEERS / "pdmlock" / "demo__pdm.lock").read_text(),
                          '[project]\nname = "x"\nversion = "0.1"\n\n[dependency-groups]\ntests = ["pytest"]\n',
                          tmp_path, monkeypatch)
    proj = tmp_path / "p"
    with pytest.raises(PdmUsageError):
        list(GroupSelection(project, groups=["tests"], dev=False))
    r = _restore(str(proj / "pdm.lock"), "--prefix", str(tmp_path / "env"), "--python-version",
                 PY, "--group", "tests", "--no-dev")
    assert r.exit_code == 2 and r.output.count("Error:") == 1
    assert "--no-dev (pdm's --prod) with the dev group(s) tests" in r.output


def test_restore_help_names_the_selection_options() -> None:
    out = " ".join(CliRunner().invoke(cli, ["restore", "--help"]).output.split())
    for option in ("--extra", "--group", "--all-extras", "--all-groups", "--no-dev",
                   "--environment"):
        assert option in out
    assert "pdm install -G" in out and "pixi install -e" in out


def test_an_unknown_pdm_group_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"no group 'docs' in this lock \(its extras: none; "
                                            r"its groups: security, tests\)"):
        plan_restore([PEERS / "pdmlock" / "demo__pdm.lock"], tmp_path / "env",
                     python_version=PY, requested=Requested(groups=("docs",)))


# -- pixi.lock: --environment NAME, as py-rattler reads that environment ---------------------

def _rattler(path: Path, environment: str, subdir: str,
             platform: str | None = None) -> tuple[dict[str, str], set[str]]:
    """``({url: md5}, {pypi name})`` of ``environment`` as py-rattler reads it, for the first
    platform entry of ``subdir`` (or the one named ``platform``)."""
    rattler = pytest.importorskip("rattler")
    env = rattler.LockFile.from_path(path).environment(environment)
    plat = next(p for p in env.platforms() if (p.name == platform if platform else
                                               str(p.subdir) == subdir))
    conda, pypi = {}, set()
    for q in env.packages(plat):
        if type(q).__name__ == "CondaLockedBinaryPackage":
            conda[str(q.location)] = q.package_record.md5.hex()
        elif type(q).__name__ == "PypiLockedPackage":  # the project's own (a directory) left out
            loc = str(q.location)
            if "://" in loc or loc.startswith("git+") or loc.endswith((".whl", ".tar.gz", ".zip")):
                pypi.add(canonicalize_name(q.name))
    return conda, pypi


@pytest.mark.parametrize(("name", "environment"), [
    ("pypi-custom-registry__pixi.lock", "alternative"),
    ("solve-groups__pixi.lock", "max-py310"), ("solve-groups__pixi.lock", "min-py38")])
def test_a_pixi_environment_is_the_one_rattler_reads(name: str, environment: str,
                                                     tmp_path: Path) -> None:
    from envlock.formats.conda import current_subdir

    path = PEERS / "pixilock" / name
    conda, pypi = _rattler(path, environment, current_subdir())
    default, _ = _rattler(path, "default", current_subdir())
    plan = plan_restore([path], tmp_path / "env", trust_lockfile_indexes=True,
                        environment=environment)
    writes = _written(plan)
    assert f"environment {environment!r} for {current_subdir()}" in writes[0][1]
    lines = [ln for ln in writes[0][2].splitlines() if ln and not ln.startswith(("#", "@"))]
    assert dict(ln.rsplit("#", 1) for ln in lines) == conda
    assert (set(_pylock(writes[1][2])) if len(writes) > 1 else set()) == pypi
    if name.startswith("solve-groups"):
        assert conda != default  # another environment, not the default's packages


def test_an_unknown_pixi_environment_is_one_error_naming_the_locks(tmp_path: Path) -> None:
    r = _restore(str(PEERS / "pixilock" / "solve-groups__pixi.lock"), "--prefix",
                 str(tmp_path / "env"), "-e", "cuda")
    assert r.exit_code == 2 and r.output.count("Error:") == 1
    assert "no environment 'cuda' in this lock (its environments: default, max-py310, " \
           "min-py38)" in r.output


MULTI = PEERS / "pixilock" / "multi-machine__pixi.lock"


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_a_pixi_platform_is_chosen_as_verify_chooses_it(tmp_path: Path) -> None:
    """The real v7 lock with two linux-64 entries (``linux-64``, and ``p2`` solved with
    ``__cuda=12``) and ``p1`` = win-64: ``--platform p2`` installs p2's packages as py-rattler
    reads them; without it the entry named linux-64 is taken and the note names p2; p1 (another
    subdir) and a name the lock lacks are one ``Error:`` each; ``--platform`` with no pixi.lock
    too."""
    from envlock.formats.conda import current_subdir

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")
    import yaml

    rattler = pytest.importorskip("rattler")
    data = yaml.safe_load(MULTI.read_text(encoding="utf-8"))
    del data["environments"]["default"]["packages"]["p2"][0]  # p2's packages not linux-64's
    lock = tmp_path / "pixi.lock"
    lock.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    subdirs = {p.name: str(p.subdir) for p in rattler.LockFile.from_path(lock).platforms()}
    assert [n for n, s in subdirs.items() if s == "linux-64"] == ["linux-64", "p2"]
    read = {}
    for platform in ("p2", "linux-64", None):
        conda, pypi = _rattler(lock, "default", "linux-64", platform or "linux-64")
        plan = plan_restore([lock], tmp_path / "env", trust_lockfile_indexes=True,
                            lock_platform=platform)
        [(_dest, title, text)] = _written(plan)  # no PyPI package in this lock
        assert not pypi
        lines = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "@"))]
        read[platform] = dict(ln.rsplit("#", 1) for ln in lines)
        assert read[platform] == conda
        assert title.endswith("for linux-64 (platform p2), conda packages" if platform == "p2"
                              else "for linux-64, conda packages")
        said = [n for n in plan.notes if "platform linux-64 taken for linux-64" in n]
        if platform is None:  # several fit, none chosen: which was taken, and the others
            assert said == ["pixi.lock: platform linux-64 taken for linux-64 "
                            "(the one named as this subdir, else the first); also for "
                            "linux-64: platform p2 (linux-64; __cuda=12, __unix=0=0, "
                            "__linux=4.18, __glibc=2.28, __archspec=0=x86_64) (--platform "
                            "NAME chooses one)"]
        else:
            assert said == []
    assert len(read["p2"]) == len(read["linux-64"]) - 1 and read[None] == read["linux-64"]
    cases = [(["--platform", "p1"], "platform p1 of environment 'default' is win-64; this "
              "machine is linux-64 (--platform NAME: one of linux-64, p2); nothing was run"),
             (["--platform", "cuda"], "no platform 'cuda' in environment 'default' of this "
              "pixi.lock (its platforms: linux-64, p1, p2, p3, win-64); nothing was run")]
    for args, said_ in cases:
        r = _restore(str(lock), "--prefix", str(tmp_path / "env"), *args)
        assert r.exit_code == 2 and r.output.count("Error:") == 1 and said_ in r.output, r.output
    r = _restore(str(PEERS / "uvlock" / "ecosystem__flask__uv.lock"), "--prefix",
                 str(tmp_path / "env"), "--python-version", PY, "--platform", "p2")
    assert r.exit_code == 2 and "--platform chooses the platform entry of a pixi.lock; the " \
        "inputs are uv.lock" in r.output, r.output


# -- poetry.lock: poetry install's documented rule on a hand-made project ---------------------

#: the groups of each package of the peers ``outdated_lock`` in the hand-made project below:
#: main needs requests; the dev group six; the optional docs group docker (and what it pulls)
_POETRY_GROUPS = {"certifi": ["main", "docs"], "chardet": ["main", "docs"], "idna": ["main", "docs"],
                  "requests": ["main", "docs"], "urllib3": ["main", "docs"], "six": ["dev", "docs"],
                  "docker": ["docs"], "websocket-client": ["docs"], "pywin32": ["docs"]}


def _poetry_project(root: Path, pyproject: bool = True) -> Path:
    """The peers ``outdated_lock__poetry.lock`` made a lock-version 2.1 lock with the groups of
    :data:`_POETRY_GROUPS` (pywin32 only where ``sys_platform == "win32"``, as docker requires
    it), beside a pyproject.toml declaring them (``docs``: ``optional = true``)."""
    root.mkdir()
    text = (PEERS / "poetrylock" / "outdated_lock__poetry.lock").read_text(encoding="utf-8")
    text = text.replace('lock-version = "2.0"', 'lock-version = "2.1"')
    for name, groups in _POETRY_GROUPS.items():
        marker = "\nmarkers = \"sys_platform == \\\"win32\\\"\"" if name == "pywin32" else ""
        text, n = re.subn(rf'(name = "{name}"\nversion = "[^"]+"\ndescription = .*\n'
                          r'optional = false\npython-versions = .*\n)',
                          rf'\g<1>groups = {json.dumps(groups)}{marker}\n', text)
        assert n == 1, name
    (root / "poetry.lock").write_text(text, encoding="utf-8")
    if pyproject:
        (root / "pyproject.toml").write_text(
            '[tool.poetry]\nname = "x"\nversion = "0.1"\n\n[tool.poetry.dependencies]\n'
            'python = "^3.8"\nrequests = "*"\n\n[tool.poetry.group.dev.dependencies]\nsix = "*"\n'
            '\n[tool.poetry.group.docs]\noptional = true\n\n[tool.poetry.group.docs.dependencies]'
            '\ndocker = "*"\n', encoding="utf-8")
    return root / "poetry.lock"


@pytest.mark.parametrize(("args", "activated"), [
    ([], {"main", "dev"}), (["--group", "docs"], {"main", "dev", "docs"}),
    (["--no-dev"], {"main"}), (["--group", "docs", "--no-dev"], {"main", "docs"}),
    (["--all-groups"], {"main", "dev", "docs"}), (["--all-groups", "--no-dev"], {"main", "docs"})])
def test_poetry_groups_are_what_poetry_installs_by_its_documented_rule(
        args: list[str], activated: set[str], tmp_path: Path) -> None:
    """Against poetry's documented rule (python-poetry.org, "Managing dependencies": ``poetry
    install`` installs main and every group not ``optional = true``; ``--with`` adds an
    optional group, ``--all-groups`` every group, ``--without`` wins), not poetry itself:
    poetry's installer needs a virtual environment and its repository to run even ``--dry-run``,
    which this offline test cannot give it.  pywin32 (win32 only) is never for this target."""
    lock = _poetry_project(tmp_path / "p")
    req = Requested(groups=tuple(args[i + 1] for i, a in enumerate(args) if a == "--group"),
                    all_groups="--all-groups" in args, no_dev="--no-dev" in args)
    plan = plan_restore([lock], tmp_path / "env", python_version=PY, requested=req)
    [(_dest, title, text)] = _written(plan)
    got = {ln.split("==")[0] for ln in text.splitlines() if ln and not ln.startswith("#")}
    assert got == {n for n, gs in _POETRY_GROUPS.items() if set(gs) & activated} - {"pywin32"}
    if not args:
        assert title.endswith("default install as poetry install takes it: groups dev")
    assert not [n for n in plan.notes if "no pyproject.toml" in n]


def test_a_poetry_lock_without_its_pyproject_takes_every_group_as_not_optional(
        tmp_path: Path) -> None:
    """Without the pyproject.toml poetry reads optional groups from, every group is taken as
    poetry's default for a group (not optional), and a note says so."""
    lock = _poetry_project(tmp_path / "p", pyproject=False)
    plan = plan_restore([lock], tmp_path / "env", python_version=PY)
    [(_dest, title, text)] = _written(plan)
    got = {ln.split("==")[0] for ln in text.splitlines() if ln and not ln.startswith("#")}
    assert got == set(_POETRY_GROUPS) - {"pywin32"}
    assert title.endswith("default install as poetry install takes it: groups dev, docs")
    assert "poetry.lock: no pyproject.toml beside it to tell poetry's optional groups: dev, docs " \
           "taken as not optional" in " ".join(plan.notes)


def test_a_bad_default_groups_is_one_error_for_restore_verify_and_diff(tmp_path: Path) -> None:
    """``[tool.uv] default-groups = 3`` (uv refuses it): one line for each command that reads
    the lock's default groups, naming the pyproject.toml; nothing is run."""
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "uv.lock").write_text((PEERS / "uvlock" / "ecosystem__flask__uv.lock").read_text())
    (proj / "pyproject.toml").write_text('[tool.uv]\ndefault-groups = 3\n')
    said = f'{proj / "pyproject.toml"}: [tool.uv] default-groups must be "all" or a list'
    r = _restore(str(proj / "uv.lock"), "--prefix", str(tmp_path / "env"), "--python-version",
                 PY, "--run")
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and said in r.output, r.output
    assert not (tmp_path / "env").exists()
    manifest = tmp_path / "manifest.toml"
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python", sys.executable,
                    "-o", str(manifest)], check=True, capture_output=True, timeout=300)
    for args in (["verify", "--lock", str(proj / "uv.lock"), "--no-dev"],
                 ["diff", str(proj / "uv.lock"), str(manifest), "--group", "dev"]):
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 2 and said in out.output, out.output
