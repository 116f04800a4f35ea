"""``restore`` of a project lock (``uv.lock``, ``pdm.lock``, ``poetry.lock``): converted, for this
target and the install its own tool makes with no option, into a lockfile restore installs (a
pylock.toml, or for poetry a hash-pinned requirements.txt), written by ``--run`` beside the
prefix.

The packages of the converted file are what each tool's own reading says for the target
(``uv export --frozen`` with no option: uv's default groups; pdm's locked repository for an
``EnvSpec``; envlock's poetry reading, which ``tests/formats/test_poetry_oracle.py`` holds equal
to poetry's), with the files'
URLs and hashes as the lock has them; an end-to-end ``restore --run`` of a real ``uv lock``
made offline then passes ``envlock verify --lock uv.lock``."""

from __future__ import annotations

import json
import re
import shutil
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

from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.lock._restore import plan_restore
from envlock.lock._tools import uv_bin

from _projectlocks import PEERS, PY, TARGET, pdm_installs, pdm_project, run_uv, simple_index

pytestmark = [pytest.mark.usefixtures("offline_pip"),
              pytest.mark.skipif(not PEERS.is_dir(), reason="the peers cases are not here")]


def _plan(lock: Path, tmp_path: Path, **options: object):
    return plan_restore([lock], tmp_path / "env", python_version=PY,
                        trust_lockfile_indexes=True, **options)


def _written(plan) -> tuple[str, str]:
    """The converted file's path and text, from the plan's write step."""
    write = next(s for s in plan.steps if s.kind == "write")
    return write.argv[1], write.content


def _pylock_names(text: str) -> dict[str, str]:
    return {p["name"]: p.get("version") for p in tomllib.loads(text)["packages"]}


def _unredacted(lock: Path, tmp: Path) -> Path:
    """The case with its redacted ``[X]`` digits made 0 (as tests/formats does)."""
    out = tmp / lock.name.rsplit("__", 1)[-1]
    out.write_text(re.sub(r"\.\[X\]", ".0", lock.read_text(encoding="utf-8")), encoding="utf-8")
    return out


# -- uv.lock: uv export --frozen (uv sync's default groups), its markers for the target -----

UV_LOCKS = ["ecosystem__flask__uv.lock", "ecosystem__httpx__uv.lock", "benchmark__uv.lock",
            "inline__lock_transitive_git__1__uv.lock", "inline__lock_non_project_group__1__uv.lock",
            "inline__lock_sdist_url_subdirectory__1__uv.lock", "inline__lock_pytorch_cpu__1__uv.lock"]


@pytest.mark.parametrize("name", UV_LOCKS)
def test_a_uv_lock_is_converted_to_what_uv_exports_for_the_target(name: str, tmp_path: Path) -> None:
    from formats.test_uv_export_oracle import _export, _project

    proj = _project(_unredacted(PEERS / "uvlock" / name, tmp_path), tmp_path)
    if proj is None:  # conflicting extras: uv exports no one default set; envlock's reading
        theirs = None
    else:
        export = _export(proj)  # uv sync with no option: the default groups (dev)
        if export is None:
            pytest.skip("uv cannot export this lock offline")
        theirs = {canonicalize_name(r.name) for r in export
                  if r.marker is None or Marker(str(r.marker)).evaluate(TARGET)}
    plan = _plan(proj / "uv.lock" if proj else _unredacted(PEERS / "uvlock" / name, tmp_path),
                 tmp_path)
    dest, text = _written(plan)
    assert Path(dest) == tmp_path / "pylock.env.toml"
    assert not Path(dest).exists()  # nothing written by the plan
    ours = _pylock_names(text)
    if theirs is not None:
        assert set(ours) == theirs
    # every file as locked: URL and sha256 of the lock's own entry
    lock = tomllib.loads((proj / "uv.lock" if proj else tmp_path / "uv.lock").read_text())
    locked = {(canonicalize_name(p["name"]), w["url"]): w.get("hash")
              for p in lock["package"] for w in p.get("wheels", []) if "url" in w}
    for p in tomllib.loads(text)["packages"]:
        for w in p.get("wheels", []):
            assert locked[(p["name"], w["url"])] == "sha256:" + w["hashes"]["sha256"]
    install = plan.steps[plan.steps.index(next(s for s in plan.steps if s.kind == "write")) + 1]
    assert install.argv[-2:] == ("-r", dest) and install.kind == "pylock"


def test_the_plan_names_the_target_and_what_it_leaves_out(tmp_path: Path) -> None:
    lock = _unredacted(PEERS / "uvlock" / "ecosystem__httpx__uv.lock", tmp_path)
    r = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(tmp_path / "env"),
                                 "--python-version", PY, "--allow-index",
                                 "https://example-index.invalid/simple"])
    assert r.exit_code == 0, r.output
    assert re.search(r"# write pylock\.env\.toml: \d+ package\(s\) of uv\.lock for CPython "
                     rf"{PY} on linux \S+, default install as uv sync takes it: no extra or group",
                     r.output)  # httpx's lock has no dev group
    assert f"# (--run writes {tmp_path / 'pylock.env.toml'})" in r.output
    assert f"uv pip install --python {tmp_path / 'env'}/bin/python -r " \
           f"{tmp_path / 'pylock.env.toml'}" in r.output
    assert "note: uv.lock: not installed, needed only by extra brotli" in r.output
    assert "# --run contacts:\n#   pip index https://example-index.invalid/simple (index of " \
           "packages in uv.lock)" in r.output
    assert not list(tmp_path.glob("pylock*"))


# -- pdm.lock: pdm's locked repository for the target, default group -------------------------

def test_a_pdm_lock_is_converted_to_what_pdm_locks_for_the_target(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``pdm install`` with no option: pdm's ``GroupSelection`` (the groups the lock was made
    with that the pyproject.toml still declares), then its locked repository's candidates for
    the target; beside a pyproject.toml that declares no group that is the default group, and
    with none beside it every locked group (a note says what was assumed)."""
    pytest.importorskip("pdm")
    from pdm.cli.filters import GroupSelection

    lock = PEERS / "pdmlock" / "demo__pdm.lock"
    project = pdm_project(lock.read_text(), '[project]\nname = "x"\nversion = "0.1"\n'
                          'requires-python = ">=3.8"\n', tmp_path, monkeypatch)
    proj = tmp_path / "p"

    def pdm_names(groups: list[str]) -> set[str]:
        return set(pdm_installs(project, groups))

    assert list(GroupSelection(project)) == ["default"]  # no group of the lock declared
    plan = _plan(proj / "pdm.lock", tmp_path)
    dest, text = _written(plan)
    assert set(_pylock_names(text)) == pdm_names(["default"])
    assert next(s for s in plan.steps if s.kind == "write").title.endswith(
        "default install as pdm install takes it: no extra or group")
    # no pyproject.toml beside the lock: every group it was locked with, said as assumed
    plan = _plan(lock, tmp_path)
    assert set(_pylock_names(_written(plan)[1])) == pdm_names(["default", "security", "tests"])
    assert "pdm.lock: no pyproject.toml beside it to tell which of the groups it was locked " \
           "with the project still declares: security, tests taken as declared" \
           in " ".join(plan.notes)
    files = {f["url"]: f["hash"] for p in tomllib.loads(lock.read_text())["package"]
             for f in p.get("files", [])}
    for p in tomllib.loads(text)["packages"]:
        for f in [*p.get("wheels", []), *([p["sdist"]] if "sdist" in p else [])]:
            assert files[f["url"]] == "sha256:" + f["hashes"]["sha256"]


def test_a_pdm_lock_without_file_urls_is_one_error(tmp_path: Path) -> None:
    lock = PEERS / "pdmlock" / "demo-package__pdm.lock"
    r = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(tmp_path / "env"),
                                 "--python-version", PY])
    assert r.exit_code == 2
    assert r.output.count("Error:") == 1 and "package 'click' cannot be restored" in r.output
    assert "--static-urls" in r.output


# -- poetry.lock: a hash-pinned requirements.txt ---------------------------------------------

POETRY_LOCKS = ["outdated_lock__poetry.lock", "with_path_dependency__poetry.lock",
                "old_lock__poetry.lock"]


@pytest.fixture(scope="module")
def poetry_oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """poetry's own reading of :data:`POETRY_LOCKS` (``Locker.locked_repository()``, and per
    target for a lock-version 2.1), by the oracle script of tests/formats/test_poetry_oracle.py
    in an environment of its own."""
    from formats import test_poetry_oracle as oracle

    script = tmp_path_factory.mktemp("poetry") / "oracle.py"
    script.write_text(oracle._ORACLE, encoding="utf-8")
    r = subprocess.run([uv_bin(), "run", "--no-project", "--isolated", "--python", sys.executable,
                        "--with", oracle.POETRY, "python", str(script), json.dumps(oracle._TARGETS),
                        *(str(PEERS / "poetrylock" / n) for n in POETRY_LOCKS)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"{oracle.POETRY} could not be installed: "
                    f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(r.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", POETRY_LOCKS)
def test_a_poetry_lock_is_converted_to_hash_pinned_requirements(name: str, tmp_path: Path,
                                                                poetry_oracle: dict) -> None:
    from envlock.formats import read_lock
    from envlock.formats.markers import applicable

    lock = PEERS / "poetrylock" / name
    theirs = poetry_oracle[str(lock)]
    locked = {canonicalize_name(n): v for n, v, src in theirs["packages"] if src != "directory"}
    ours = read_lock(lock)
    needed, optional = applicable(ours.packages, TARGET)
    want = {n: v for n, v in needed.items() if n not in optional}
    dest, text = _written(_plan(lock, tmp_path))
    assert dest == str(tmp_path / "env.requirements.txt")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    got = {ln.split("==")[0]: ln.split("==")[1].split()[0] for ln in lines}
    assert got == want
    # each at the version poetry's Locker reads; for a lock-version 2.1, poetry's own target set
    assert all(locked[n] == v for n, v in got.items())
    if theirs["targets"] is not None:
        assert set(got) <= set(theirs["targets"][0])
    raw = tomllib.loads(lock.read_text())
    listed = raw.get("metadata", {}).get("files", {})
    for ln in lines:
        pkg = next(p for p in raw["package"] if canonicalize_name(p["name"]) == ln.split("==")[0])
        files = pkg.get("files") or next(v for k, v in listed.items()
                                         if canonicalize_name(k) == canonicalize_name(pkg["name"]))
        assert set(re.findall(r"--hash=(sha256:\w+)", ln)) == {f["hash"] for f in files}


@pytest.mark.parametrize(("lock", "said"), [
    ("poetrylock/installation__extras__poetry.lock",
     "package 'a' cannot be restored from this lock: the lock records no file hash for it"),
    ("poetrylock/incompatible_lock__poetry.lock", "lock-version '999.0' is not supported"),
    ("uvlock/inline__lock_multiple_sources_index_mixed__1__uv.lock",
     "package 'markupsafe' cannot be restored from this lock: its sdist"),
    # uv's ecosystem snapshot with its versions filtered to "3.11.[X]" (not PEP 440): refused
    ("uvlock/ecosystem__warehouse__uv.lock", "package[160] (orjson).version: '3.11.[X]' is not a version"),
])
def test_a_lock_that_cannot_be_converted_is_one_error(lock: str, said: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["restore", str(PEERS / lock), "--prefix", str(tmp_path / "env"),
                                 "--python-version", PY, "--run"])
    assert r.exit_code == 2, r.output
    assert r.output.count("Error:") == 1 and said in r.output, r.output
    assert not (tmp_path / "env").exists() and list(tmp_path.iterdir()) == []


def test_an_index_of_the_lock_needs_admitting(tmp_path: Path) -> None:
    """The PyTorch recipe (conflicting extras cpu/cu124): the default install takes neither,
    so no PyTorch index is contacted; the lock's own registry needs admitting."""
    from envlock._untrusted import UntrustedValueError

    lock = _unredacted(PEERS / "uvlock" / "inline__lock_pytorch_cpu__1__uv.lock", tmp_path)
    with pytest.raises(UntrustedValueError, match="names the index https://example-index.invalid"):
        plan_restore([lock], tmp_path / "env", python_version=PY)
    plan = plan_restore([lock], tmp_path / "env", python_version=PY,
                        allow_index=["https://example-index.invalid/simple"])
    assert not any("pytorch" in c for c in plan.contacts)
    assert "torch" not in _pylock_names(_written(plan)[1])


# -- end to end: a real uv lock, made offline, restored and verified -------------------------

def test_restore_run_of_a_uv_lock_installs_it_and_verify_passes(tmp_path: Path, wheelhouse: Path,
                                                              h: object) -> None:
    index = simple_index(tmp_path / "simple", wheelhouse)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "proj"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        'dependencies = ["beta"]\n\n[dependency-groups]\ndev = ["gamma-pkg"]\n')
    run_uv(["lock", "--index-url", index.as_uri(), "-q"], proj)
    lock = proj / "uv.lock"
    env = tmp_path / "env"
    r = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(env), "--run"])
    assert r.exit_code == 2 and f"--allow-index {index.as_uri()}" in r.output
    assert not env.exists()
    r = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(env), "--run",
                                 "--allow-index", index.as_uri()])
    assert r.exit_code == 0, r.output
    assert f"wrote {tmp_path / 'pylock.env.toml'}" in r.output
    # uv sync's install: beta, and the dev group's gamma-pkg → alpha (uv's default group)
    assert "default install as uv sync takes it: groups dev" in r.output
    assert h.installed(env) == {  # type: ignore[attr-defined]
        "beta": "2.5", "gamma-pkg": "0.3", "alpha": "1.0"}
    v = subprocess.run([sys.executable, "-m", "envlock", "verify", "--python",
                        str(env / "bin" / "python"), "--lock", str(lock), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout
    assert not [f for f in json.loads(v.stdout)["findings"] if f["id"] == "packages.missing"]
    # restoring into that prefix again: its converted file is there; refused before anything
    # is created (and the file is left as it was)
    shutil.rmtree(env)
    again = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(env), "--run",
                                     "--allow-index", index.as_uri()])
    assert again.exit_code == 2 and "pylock.env.toml exists" in again.output, again.output
    assert not env.exists() and (tmp_path / "pylock.env.toml").is_file()


def test_a_find_links_uv_lock_without_hashes_is_one_error(tmp_path: Path, wheelhouse: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0.1"\n'
                                         'requires-python = ">=3.8"\ndependencies = ["beta"]\n')
    run_uv(["lock", "--no-index", "--find-links", str(wheelhouse), "-q"], proj)
    with pytest.raises(ManifestError, match="package 'beta' cannot be restored from this lock: "
                                            "its wheel .* has no sha256 in the lock"):
        plan_restore([proj / "uv.lock"], tmp_path / "env")


# -- pixi.lock: py-rattler's LockFile, environment "default", this machine's platform --------

PIXI_LOCKS = sorted((PEERS / "pixilock").glob("*pixi.lock"))


def _rattler_default(path: Path, subdir: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]] | None:
    """``({conda URL: md5}, {pypi name: (version, location)})`` of the default environment on
    ``subdir`` as py-rattler reads it (``None``: not locked for it)."""
    rattler = pytest.importorskip("rattler")
    env = rattler.LockFile.from_path(path).environment("default")
    plat = next((p for p in env.platforms() if str(p.subdir) == subdir), None)
    if plat is None:
        return None
    conda, pypi = {}, {}
    for q in env.packages(plat):
        kind = type(q).__name__
        if kind == "CondaLockedBinaryPackage":
            conda[str(q.location)] = q.package_record.md5.hex()
        elif kind == "PypiLockedPackage":
            loc = str(q.location)
            if "://" in loc or loc.startswith("git+") or loc.endswith((".whl", ".tar.gz", ".zip")):
                pypi[canonicalize_name(q.name)] = (str(q.version), loc)
    return conda, pypi


@pytest.mark.parametrize("path", PIXI_LOCKS, ids=lambda p: p.name)
def test_a_pixi_lock_is_converted_as_rattler_reads_its_default_environment(path: Path,
                                                                           tmp_path: Path) -> None:
    from envlock.formats.conda import current_subdir

    subdir = current_subdir()
    theirs = _rattler_default(path, subdir)
    if theirs is None:
        with pytest.raises(ManifestError, match=f"not locked for this machine's platform {subdir}"):
            plan_restore([path], tmp_path / "env", trust_lockfile_indexes=True)
        return
    conda, pypi = theirs
    try:
        plan = plan_restore([path], tmp_path / "env", trust_lockfile_indexes=True)
    except ManifestError as exc:  # a PyPI file pixi locked without a hash: one line naming it
        assert "has no sha256 in the lock" in str(exc) and "\n" not in str(exc)
        return
    writes = [s for s in plan.steps if s.kind == "write"]
    assert [s.kind for s in plan.steps][:2] == ["write", "conda-lock"]  # conda creates it
    assert not any(s.kind == "uv-venv" for s in plan.steps)
    explicit = writes[0].content
    assert explicit.splitlines()[2] == "@EXPLICIT"
    lines = [ln for ln in explicit.splitlines() if ln and not ln.startswith(("#", "@"))]
    assert dict(ln.rsplit("#", 1) for ln in lines) == conda
    assert plan.steps[1].argv == ("conda", "create", "--prefix", str(tmp_path / "env"), "--file",
                                  str(tmp_path / "env.conda-explicit.txt"))
    if not pypi:
        assert len(writes) == 1
        return
    doc = tomllib.loads(writes[1].content)
    got = {}
    for p in doc["packages"]:
        url = (p["wheels"][0]["url"] if "wheels" in p else p["archive"]["url"] if "archive" in p
               else "git+" + p["vcs"]["url"])
        got[p["name"]] = (p.get("version"), url)
    assert set(got) == set(pypi)
    for name, (version, loc) in pypi.items():
        if got[name][0] is not None:
            assert got[name][0] == version
        local = "://" not in loc.removeprefix("direct+") and not loc.startswith("git+")
        want = (path.parent / loc).resolve().as_uri() if local else loc.removeprefix("direct+")
        assert got[name][1] == want or (loc.startswith("git+") and want.startswith(got[name][1]))
    install = plan.steps[3]
    assert install.argv == ("uv", "pip", "install", "--python", f"{tmp_path / 'env'}/bin/python",
                            "-r", str(tmp_path / "pylock.env.toml"))


def test_a_pixi_plan_names_its_channels_and_writes_nothing(tmp_path: Path) -> None:
    path = PEERS / "pixilock" / "pypi-custom-registry__pixi.lock"
    r = CliRunner().invoke(cli, ["restore", str(path), "--prefix", str(tmp_path / "env")])
    assert r.exit_code == 0, r.output
    assert "# --run contacts:\n#   conda channel " in r.output
    assert re.search(r"# write env\.conda-explicit\.txt: \d+ package\(s\) of "
                     r"pypi-custom-registry__pixi\.lock environment 'default' for linux-64", r.output)
    assert not list(tmp_path.iterdir())


def _pixi_lock(tmp_path: Path, channel: Path, files: list[tuple[str, str]]) -> Path:
    """A pixi.lock (version 6) whose default environment on linux-64 is ``files`` of the local
    channel (``(subdir, file name)``), each record as the channel's repodata has it."""
    refs, records = [], []
    for subdir, fn in files:
        repodata = json.loads((channel / subdir / "repodata.json").read_text())
        rec = {**repodata["packages"], **repodata["packages.conda"]}[fn]
        url = (channel / subdir / fn).as_uri()
        refs.append(f"      - conda: {url}\n")
        records.append(f"- conda: {url}\n  name: {rec['name']}\n  version: '{rec['version']}'\n"
                       f"  build: {rec['build']}\n  subdir: {subdir}\n  md5: {rec['md5']}\n"
                       f"  sha256: {rec['sha256']}\n  depends: {json.dumps(rec['depends'])}\n")
    lock = tmp_path / "pixi.lock"
    lock.write_text(f"version: 6\nenvironments:\n  default:\n    channels:\n    - url: "
                    f"{channel.as_uri()}/\n    packages:\n      linux-64:\n" + "".join(refs)
                    + "packages:\n" + "".join(records))
    return lock


@pytest.mark.usefixtures("no_conda")
def test_restore_run_of_a_pixi_lock_installs_its_conda_packages_with_rattler(
        tmp_path: Path, conda_channel: Path) -> None:
    from envlock.formats.conda import current_subdir
    from envlock.lock._tools import conda_executable

    if current_subdir() != "linux-64" or conda_executable() is not None:
        pytest.skip("the local channel is linux-64; this checks the run without conda")
    lock = _pixi_lock(tmp_path, conda_channel, [("linux-64", "liba-1.0-h0_0.tar.bz2"),
                                                ("noarch", "tool-0.5-pyh_0.tar.bz2"),
                                                ("linux-64", "zlib-ng-2.2.4-h7955e40_1.conda")])
    env = tmp_path / "env"
    r = CliRunner().invoke(cli, ["restore", str(lock), "--prefix", str(env), "--run"])
    assert r.exit_code == 0, r.output
    assert "installed 3 conda packages of env.conda-explicit.txt with py-rattler" in r.output
    meta = sorted(p.name for p in (env / "conda-meta").glob("*.json"))
    assert meta == ["liba-1.0-h0_0.json", "tool-0.5-pyh_0.json", "zlib-ng-2.2.4-h7955e40_1.json"]
    assert (env / "share" / "liba" / "liba.txt").read_text() == "liba 1.0\n"
    v = subprocess.run([sys.executable, "-m", "envlock", "verify", "--prefix", str(env),
                        "--lock", str(lock), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    findings = json.loads(v.stdout)["findings"]
    # the packages are the lock's; the environment has no interpreter (none is in this lock),
    # which is what verify's errors say
    assert [f["id"] for f in findings if f["id"].startswith("packages.")] == [], findings
    assert {f["id"] for f in findings if f["severity"] == "error"} <= {"python.unusable",
                                                                        "verify.interpreter"}
    (env / "conda-meta" / "tool-0.5-pyh_0.json").unlink()  # and verify does compare them
    v = subprocess.run([sys.executable, "-m", "envlock", "verify", "--prefix", str(env),
                        "--lock", str(lock), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert "packages.missing" in {f["id"] for f in json.loads(v.stdout)["findings"]}
