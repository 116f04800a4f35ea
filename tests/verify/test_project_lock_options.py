"""``verify --lock`` and ``diff`` read ``--extra``/``--group``/``--all-extras``/``--all-groups``/
``--no-dev`` of a ``pdm.lock`` and a ``poetry.lock`` as ``pdm install`` and ``poetry install``
take them (issue 23; the rule ``restore`` shares, :mod:`envlock.formats.lockchoice`), not as
``uv sync`` does: pdm's dev groups and poetry's non-optional groups come with any option.

Each case is a venv holding exactly what the tool installs with some options (dist-info
directories over a real interpreter), checked with other options; the tool itself is the
oracle of both installs: pdm's ``GroupSelection`` and its locked repository's candidates
(tests/_projectlocks.py), poetry's own ``InstallCommand.handle`` (its activated groups and
extras, with an installer that records them) and ``Transaction`` over the lock's locked
packages (what ``poetry install`` installs), run in poetry's own environment (``uv run --with
poetry``, as tests/formats/test_poetry_oracle.py: it cannot be installed beside conda-lock).
The locks are the peers' (pdm's ``demo`` project; poetry's ``outdated_lock`` given lock-version
2.1 groups, and ``installation/extras``)."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock._selection import Requested
from envlock.cli import cli
from envlock.formats.markers import target_marker_env
from envlock.lock._tools import uv_bin
from envlock.verify import verify
from envlock.verify.checks import CHECKS

from _projectlocks import PDM_LINUX, PEERS, pdm_installs, pdm_project

pytestmark = pytest.mark.skipif(not PEERS.is_dir(), reason="the peers cases are not here")

PACKAGE_CHECKS = [c for c in CHECKS if c[0] in ("packages", "locks")]
#: the Python of the venvs (the running one's, under ``python -m venv``)
PY = platform.python_version()
POETRY = "poetry==2.5.1"


def _venv(root: Path, dists: dict[str, str]) -> Path:
    """A venv over the running interpreter holding exactly ``dists`` (``{name: version}``) as
    dist-info directories; its ``bin/python``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True,
                   timeout=300)
    site = next((root / "lib").glob("python3*/site-packages"))
    for name, version in dists.items():
        dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "INSTALLER").write_text("pip\n")
    return root / "bin" / "python"


def _requested(args: list[str]) -> Requested:
    return Requested(extras=tuple(args[i + 1] for i, a in enumerate(args) if a == "--extra"),
                     groups=tuple(args[i + 1] for i, a in enumerate(args) if a == "--group"),
                     all_extras="--all-extras" in args, all_groups="--all-groups" in args,
                     no_dev="--no-dev" in args)


def _verify(python: Path, lock: Path, args: list[str], tmp_path: Path) -> tuple[int, dict]:
    """``verify --lock LOCK ARGS`` of the packages checks: the exit status, findings by id."""
    r = verify(python=str(python), environ={"PATH": "/usr/bin:/bin"}, locks=[str(lock)],
               checks=PACKAGE_CHECKS, root=str(tmp_path), requested=_requested(args))
    found: dict[str, list] = {}
    for f in r.findings:
        found.setdefault(f.id, []).append(f)
    return r.exit_code, found


def _missing(found: dict) -> set[str]:
    return {e.split()[0] for f in found.get("packages.missing", []) for e in f.evidence}


# -- pdm.lock: pdm's GroupSelection and locked repository ------------------------------------

_PDM_PYPROJECT = ('[project]\nname = "x"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
                  'dependencies = ["idna", "chardet"]\n\n[project.optional-dependencies]\n'
                  'security = ["requests"]\n\n[dependency-groups]\ntests = ["pytest"]\n')


def _pdm_groups(project: object, args: list[str]) -> list[str]:
    """The groups ``pdm install`` takes with envlock's ``args`` in pdm's words (``--extra``/
    ``--group NAME``: ``-G NAME``; ``--all-*``: ``-G :all``; ``--no-dev``: ``--prod``)."""
    from pdm.cli.filters import GroupSelection

    req = _requested(args)
    named = [":all"] if req.all_extras or req.all_groups else [*req.extras, *req.groups]
    return list(GroupSelection(project, groups=named, dev=False if req.no_dev else None))


@pytest.mark.parametrize(("installed", "args", "code"), [
    (["--group", "security"], ["--group", "security"], 0),
    (["--group", "security"], ["--extra", "security"], 0),  # a pdm extra is a group: -G
    # pdm install -G security takes the dev group tests too: --prod left it out
    (["--group", "security", "--no-dev"], ["--group", "security"], 1),
    (["--group", "security", "--no-dev"], ["--group", "security", "--no-dev"], 0),
    (["--no-dev"], ["--extra", "security", "--no-dev"], 1),
    (["--all-groups"], ["--all-groups"], 0),
    (["--all-groups"], ["--all-extras", "--no-dev"], 0),  # tests installed: a choice, not wrong
])
def test_verify_reads_pdm_options_as_pdm_install_takes_them(
        installed: list[str], args: list[str], code: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdm")
    project = pdm_project((PEERS / "pdmlock" / "demo__pdm.lock").read_text(), _PDM_PYPROJECT,
                          tmp_path, monkeypatch)
    have = pdm_installs(project, _pdm_groups(project, installed), py=PY, platform=PDM_LINUX)
    want = pdm_installs(project, _pdm_groups(project, args), py=PY, platform=PDM_LINUX)
    python = _venv(tmp_path / "env", have)
    exit_code, found = _verify(python, tmp_path / "p" / "pdm.lock", args, tmp_path)
    assert exit_code == code, {k: [f.title for f in v] for k, v in found.items()}
    assert _missing(found) == set(want) - set(have)
    assert (code == 1) == bool(set(want) - set(have))
    groups = sorted(g for g in _pdm_groups(project, args) if g != "default")
    [said] = [f.title for f in found["packages.lock-selection"]]
    assert said.endswith(f"as pdm install takes it: groups {', '.join(groups)} (as given)")


def test_diff_reads_pdm_options_as_pdm_install_takes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``diff pdm.lock MANIFEST --group security`` of a ``pdm install -G security --prod``
    venv: the dev group tests is part of that install, so its packages differ (exit 1, named);
    with ``--no-dev`` nothing does (exit 0)."""
    pytest.importorskip("pdm")
    project = pdm_project((PEERS / "pdmlock" / "demo__pdm.lock").read_text(), _PDM_PYPROJECT,
                          tmp_path, monkeypatch)
    have = pdm_installs(project, _pdm_groups(project, ["--group", "security", "--no-dev"]),
                        py=PY, platform=PDM_LINUX)
    want = pdm_installs(project, _pdm_groups(project, ["--group", "security"]), py=PY,
                        platform=PDM_LINUX)
    tests_only = set(want) - set(have)
    assert tests_only and "pytest" in tests_only
    python = _venv(tmp_path / "env", have)
    manifest = tmp_path / "m.toml"
    snap = CliRunner().invoke(cli, ["snapshot", "--python", str(python), "-o", str(manifest)])
    assert snap.exit_code == 0, snap.output
    lock = str(tmp_path / "p" / "pdm.lock")
    runner = CliRunner()
    bad = runner.invoke(cli, ["diff", lock, str(manifest), "--group", "security", "--format",
                              "json"])
    assert bad.exit_code == 1, bad.output
    doc = json.loads(bad.output)
    assert {(d["key"], d["change"]) for d in doc["differences"]} == {
        (n, "removed") for n in tests_only}, doc["differences"]
    assert any("pdm.lock read for -G security as pdm install takes it: groups security, "
               "tests (as given)" in str(c) for c in doc["context"]), doc["context"]
    ok = runner.invoke(cli, ["diff", lock, str(manifest), "--group", "security", "--no-dev"])
    assert ok.exit_code == 0, ok.output


# -- poetry.lock: poetry's InstallCommand and Transaction ------------------------------------

_POETRY_ORACLE = """
import json, os, sys, types
from pathlib import Path
from cleo.io.buffered_io import BufferedIO
from cleo.io.inputs.string_input import StringInput
from packaging.utils import canonicalize_name
from poetry.console.application import Application
from poetry.puzzle.transaction import Transaction

env, cases = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = []
for proj, args in cases:
    os.chdir(proj)
    app = Application()
    cmd = app.find("install")
    # poetry's own handle() with an installer that records what it is told (no venv, no index)
    said = types.SimpleNamespace()
    cmd.set_installer(types.SimpleNamespace(
        executor=types.SimpleNamespace(enable_bytecode_compilation=lambda x: None),
        skip_directory=lambda x: None, dry_run=lambda x: None, verbose=lambda x: None,
        requires_synchronization=lambda x: None, run=lambda: 0,
        extras=lambda e: setattr(said, "extras", e),
        only_groups=lambda g: setattr(said, "groups", g)))
    io = BufferedIO(input=StringInput(" ".join([*args, "--no-root", "--no-plugins"])))
    assert cmd.run(io) == 0, io.fetch_error()
    poetry = app.poetry
    # what poetry install installs of a lock-version 2.1 lock (Installer._do_install)
    ops = Transaction([], poetry.locker.locked_packages(), [], poetry.package, marker_env=env,
                      groups=set(said.groups)).calculate_operations(
        with_uninstalls=False, extras={canonicalize_name(e) for e in said.extras})
    out.append({"groups": sorted(said.groups), "extras": sorted(said.extras),
                "installs": {str(o.package.name): str(o.package.version) for o in ops
                             if not o.skipped}})
print(json.dumps(out))
"""

#: the groups given to the peers ``outdated_lock``'s packages (made lock-version 2.1): main
#: needs requests; the non-optional group test six; the dev group websocket-client; the
#: optional group docs docker and everything it pulls (pywin32 only on win32)
_GROUPS = {"certifi": ["main", "docs"], "chardet": ["main", "docs"], "idna": ["main", "docs"],
           "requests": ["main", "docs"], "urllib3": ["main", "docs"], "six": ["test", "docs"],
           "websocket-client": ["dev", "docs"], "docker": ["docs"], "pywin32": ["docs"]}


def _groups_project(root: Path) -> Path:
    root.mkdir()
    text = (PEERS / "poetrylock" / "outdated_lock__poetry.lock").read_text(encoding="utf-8")
    text = text.replace('lock-version = "2.0"', 'lock-version = "2.1"')
    for name, groups in _GROUPS.items():
        marker = "\nmarkers = \"sys_platform == \\\"win32\\\"\"" if name == "pywin32" else ""
        text, n = re.subn(rf'(name = "{name}"\nversion = "[^"]+"\ndescription = .*\n'
                          r'optional = false\npython-versions = .*\n)',
                          rf'\g<1>groups = {json.dumps(groups)}{marker}\n', text)
        assert n == 1, name
    (root / "poetry.lock").write_text(text, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "x"\nversion = "0.1"\npackage-mode = false\n\n'
        '[tool.poetry.dependencies]\npython = "^3.8"\nrequests = "*"\n\n'
        '[tool.poetry.group.test.dependencies]\nsix = "*"\n\n'
        '[tool.poetry.group.dev.dependencies]\nwebsocket-client = "*"\n\n'
        '[tool.poetry.group.docs]\noptional = true\n\n[tool.poetry.group.docs.dependencies]\n'
        'docker = "*"\n', encoding="utf-8")
    return root


def _extras_project(root: Path) -> Path:
    """The peers ``installation/extras`` lock (A, B, C; D only for the extra foo), D given the
    marker poetry 2.1 writes for an extra's package (``extra == "foo"``)."""
    root.mkdir()
    text = (PEERS / "poetrylock" / "installation__extras__poetry.lock").read_text(encoding="utf-8")
    text, n = re.subn(r'(name = "D"\n(?:.*\n)*?groups = \["main"\]\n)',
                      r'\g<1>markers = "extra == \\"foo\\""\n', text)
    assert n == 1
    (root / "poetry.lock").write_text(text, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "x"\nversion = "0.1"\npackage-mode = false\n\n'
        '[tool.poetry.dependencies]\npython = "*"\nA = "*"\nB = "*"\nC = "*"\n'
        'D = { version = "*", optional = true }\n\n[tool.poetry.extras]\nfoo = ["D"]\n',
        encoding="utf-8")
    return root


def _poetry_words(args: list[str]) -> list[str]:
    """envlock's options in ``poetry install``'s words (the mapping under test)."""
    said = {"--group": "--with", "--extra": "-E"}
    out = []
    for i, a in enumerate(args):
        if a in said:
            out += [said[a], args[i + 1]]
        elif a == "--no-dev":
            out += ["--without", "dev"]
        elif a in ("--all-groups", "--all-extras"):
            out.append(a)
    return out


_POETRY_CASES = [  # (project, the venv's poetry install options, verify's options, exit)
    # --without dev keeps the non-optional group test: six must be there
    ("groups", ["--only", "main"], ["--no-dev"], 1),
    ("groups", ["--without", "dev"], ["--no-dev"], 0),
    ("groups", [], ["--group", "docs"], 1),  # --with docs: docker
    ("groups", ["--with", "docs", "--without", "dev"], ["--group", "docs", "--no-dev"], 0),
    ("groups", ["--all-groups"], ["--all-groups"], 0),
    ("extras", [], ["--extra", "foo"], 1),
    ("extras", ["-E", "foo"], ["--extra", "foo"], 0),
    ("extras", ["--all-extras"], ["--all-extras"], 0),
]


@pytest.fixture(scope="module")
def poetry_installs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``{(project, poetry options): {"groups", "extras", "installs"}}`` by poetry itself, for
    the venv's Python on this machine, and the projects' directories."""
    root = tmp_path_factory.mktemp("poetry")
    projects = {"groups": _groups_project(root / "groups"),
                "extras": _extras_project(root / "extras")}
    asked = list(dict.fromkeys((p, tuple(a)) for p, venv, args, _ in _POETRY_CASES
                               for a in (venv, _poetry_words(args))))
    script = root / "oracle.py"
    script.write_text(_POETRY_ORACLE, encoding="utf-8")
    r = subprocess.run([uv_bin(), "run", "--no-project", "--isolated", "--python", sys.executable,
                        "--with", POETRY, "python", str(script), json.dumps(target_marker_env(
                            PY, "cpython")), json.dumps([[str(projects[p]), list(a)]
                                                         for p, a in asked])],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"{POETRY} could not be run: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return {"dirs": projects, **dict(zip(asked, json.loads(r.stdout)))}


@pytest.mark.parametrize(("project", "installed", "args", "code"), _POETRY_CASES)
def test_verify_reads_poetry_options_as_poetry_install_takes_them(
        project: str, installed: list[str], args: list[str], code: int, tmp_path: Path,
        poetry_installs: dict) -> None:
    have = poetry_installs[(project, tuple(installed))]["installs"]
    theirs = poetry_installs[(project, tuple(_poetry_words(args)))]
    python = _venv(tmp_path / "env", have)
    exit_code, found = _verify(python, poetry_installs["dirs"][project] / "poetry.lock", args,
                               tmp_path)
    assert exit_code == code, {k: [f.title for f in v] for k, v in found.items()}
    assert _missing(found) == set(theirs["installs"]) - set(have)
    assert (code == 1) == bool(set(theirs["installs"]) - set(have))
    groups = [g for g in theirs["groups"] if g != "main"]
    took = "; ".join([*([f"extras {', '.join(theirs['extras'])}"] if theirs["extras"] else []),
                      *([f"groups {', '.join(groups)}"] if groups else [])])
    [said] = [f.title for f in found["packages.lock-selection"]]
    assert said.endswith(f"as poetry install takes it: {took} (as given)"), said


def test_diff_reads_poetry_no_dev_as_without_dev(tmp_path: Path, poetry_installs: dict) -> None:
    """``diff poetry.lock MANIFEST --no-dev`` of a ``poetry install --only main`` venv:
    ``poetry install --without dev`` also installs the non-optional group test, so six is the
    one difference (exit 1); a ``--without dev`` venv has none (exit 0)."""
    lock = str(poetry_installs["dirs"]["groups"] / "poetry.lock")
    runner = CliRunner()
    for venv, code in ((["--only", "main"], 1), (["--without", "dev"], 0)):
        python = _venv(tmp_path / f"env{code}",
                       poetry_installs[("groups", tuple(venv))]["installs"])
        manifest = tmp_path / f"m{code}.toml"
        snap = runner.invoke(cli, ["snapshot", "--python", str(python), "-o", str(manifest)])
        assert snap.exit_code == 0, snap.output
        r = runner.invoke(cli, ["diff", lock, str(manifest), "--no-dev", "--format", "json"])
        assert r.exit_code == code, r.output
        doc = json.loads(r.output)
        assert {(d["key"], d["change"]) for d in doc["differences"]} == (
            {("six", "removed")} if code else set())
        assert any("poetry.lock read for --without dev as poetry install takes it: groups test "
                   "(as given)" in str(c) for c in doc["context"]), doc["context"]


def test_a_name_the_lock_lacks_is_one_error_for_verify_and_diff(tmp_path: Path) -> None:
    """``--group docs`` of pdm's ``demo`` lock (groups security, tests; pdm refuses an unknown
    group too): one ``Error:`` line naming the lock's groups, exit 2, for ``verify`` and
    ``diff`` alike (``restore``'s message)."""
    lock = PEERS / "pdmlock" / "demo__pdm.lock"
    python = _venv(tmp_path / "env", {})
    manifest = tmp_path / "m.toml"
    runner = CliRunner()
    assert runner.invoke(cli, ["snapshot", "--python", str(python), "-o", str(manifest)]
                         ).exit_code == 0
    for argv in (["verify", "--python", str(python), "--lock", str(lock)],
                 ["diff", str(lock), str(manifest)]):
        r = runner.invoke(cli, [*argv, "--group", "docs"])
        assert r.exit_code == 2, r.output
        assert r.output.count("Error:") == 1 and "no group 'docs' in this lock (its extras: " \
            "none; its groups: security, tests)" in r.output, r.output


def test_help_names_each_tools_reading_of_the_options() -> None:
    for command in ("verify", "diff"):
        out = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
        for said in ("pdm install --prod", "poetry install --without dev", "uv sync --no-dev",
                     "pdm install -G", "poetry install --with", "poetry install -E"):
            assert said in out, (command, said)


def _pdm_export(project_dir: Path, out: Path, *options: str) -> set[str]:
    """``pdm export OPTIONS --no-hashes`` of the project (offline: from its lock), written to
    ``out``; the names it lists."""
    r = subprocess.run([sys.executable, "-m", "pdm", "export", *options, "--no-hashes", "-o",
                        str(out)], cwd=project_dir, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return {ln.split("==")[0].strip().lower() for ln in out.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}


@pytest.mark.parametrize(("exported", "args", "code"), [
    (["-G", "security"], ["--group", "security"], 0),
    (["-G", "security", "--prod"], ["--group", "security", "--no-dev"], 0),
    (["-G", "security", "--prod"], ["--group", "security"], 1),  # tests' packages absent
    (["-G", "security"], ["--extra", "security", "--no-dev"], 1),  # tests' packages added
])
def test_diff_of_a_pdm_lock_and_its_export_reads_the_options_as_pdm_export_does(
        exported: list[str], args: list[str], code: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``diff pdm.lock requirements.txt ARGS`` against pdm's own ``pdm export`` of the lock:
    0 differences with the options that export was made with (in pdm's words), and the dev
    group's packages, named, with the other reading."""
    pytest.importorskip("pdm")
    pdm_project((PEERS / "pdmlock" / "demo__pdm.lock").read_text(), _PDM_PYPROJECT, tmp_path,
                monkeypatch)
    proj = tmp_path / "p"
    full = _pdm_export(proj, tmp_path / "full.txt", "-G", "security")
    prod = _pdm_export(proj, tmp_path / "prod.txt", "-G", "security", "--prod")
    assert full - prod >= {"pytest"}
    export = tmp_path / ("prod.txt" if "--prod" in exported else "full.txt")
    r = CliRunner().invoke(cli, ["diff", str(proj / "pdm.lock"), str(export), *args, "--format",
                                 "json"])
    assert r.exit_code == code, r.output
    doc = json.loads(r.output)
    assert {d["key"] for d in doc["differences"]} == (full - prod if code else set())
