"""Every pdm.lock and pylock.toml of ``shared/cases/peers`` (and ``tests/formats/foreign``)
read as its own tool reads it (issue 23): pdm's own locked repository
(``Project.get_locked_repository``, what ``pdm install``/``pdm export`` take their candidates
from) and ``packaging.pylock.Pylock`` (PEP 751's reference reader) are the oracles."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

from envlock.errors import ManifestError
from envlock.formats import read_lock
from envlock.formats.markers import target_marker_env

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
FOREIGN = Path(__file__).resolve().parent / "foreign"
PDM_LOCKS = sorted([*(CASES / "peers" / "pdmlock").glob("*pdm.lock"), *FOREIGN.glob("*pdm.lock")])
PYLOCKS = sorted([*(CASES / "peers" / "pylock").glob("*.toml"),
                  *(CASES / "peers" / "derived").glob("*pylock.toml")])

pytestmark = pytest.mark.skipif(not PDM_LOCKS or not PYLOCKS, reason="the peers cases are not here")


#: the targets every pdm.lock and pylock.toml is read for: Linux x86-64 CPython 3.12.3 and
#: Windows x86-64 CPython 3.9.18, as PEP 508 marker environments (envlock's side) ...
_TARGETS = (
    {**target_marker_env("3.12.3", "cpython", machine="x86_64"), "sys_platform": "linux",
     "platform_system": "Linux", "os_name": "posix"},
    {**target_marker_env("3.9.18", "cpython", machine="AMD64"), "sys_platform": "win32",
     "platform_system": "Windows", "os_name": "nt"},
)
#: ... and as pdm's ``EnvSpec`` platforms (dep_logic's names for the same two)
_PDM_TARGETS = (("3.12.3", "manylinux_2_17_x86_64"), ("3.9.18", "windows_amd64"))


@pytest.mark.parametrize("lock", PDM_LOCKS, ids=lambda p: p.name)
def test_a_pdm_lock_reads_as_pdm_reads_it(lock: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdm")
    from _projectlocks import pdm_project

    project = pdm_project(lock.read_text(encoding="utf-8"), '[project]\nname = "x"\nversion = "0.1"\n'
                          'requires-python = ">=3.8"\n', tmp_path, monkeypatch)
    repo = project.get_locked_repository()
    theirs = sorted((canonicalize_name(c.name), str(c.version))
                    for cands in repo.all_candidates.values()
                    for c in (cands if isinstance(cands, list) else [cands]) if c.version)
    ours = sorted((x.name, x.version) for x in read_lock(lock).packages)
    assert ours == theirs
    # one target: the candidates pdm's locked repository keeps for that environment (its
    # ``candidates``: each locked marker evaluated by pdm against an ``EnvSpec``, what ``pdm
    # install``/``pdm export`` of a lock with targets select from)
    from pdm.models.markers import EnvSpec

    from envlock.formats.markers import applicable

    for (version, plat), env in zip(_PDM_TARGETS, _TARGETS):
        spec = EnvSpec.from_spec(f"=={version}", plat, "cpython")
        there = {canonicalize_name(c.name) for c in  # an ``a[x]`` key: the one package a
                 project.get_locked_repository(spec).candidates.values() if c.version}
        needed, _ = applicable(read_lock(lock).packages, env)
        assert set(needed) == there, (plat, sorted(set(needed) ^ there))


def _pylock_view(path: Path) -> list[tuple[str, str | None, str | None]]:
    from packaging.pylock import Pylock

    lock = Pylock.from_dict(tomllib.loads(path.read_text(encoding="utf-8")))
    return sorted((canonicalize_name(p.name), str(p.version) if p.version else None,
                   str(p.marker) if p.marker else None)
                  for p in lock.packages if p.directory is None)  # a directory: the project


@pytest.mark.parametrize("path", PYLOCKS, ids=lambda p: p.name)
def test_a_pylock_reads_as_packaging_pylock_reads_it(path: Path) -> None:
    pytest.importorskip("packaging.pylock")
    try:
        theirs = _pylock_view(path)
    except Exception as exc:  # the oracle refuses it: so must envlock
        with pytest.raises(ManifestError):
            read_lock(path)
        assert "lock-version" in str(exc)
        return
    ours = sorted((x.name, x.version, x.marker) for x in read_lock(path).packages)
    assert [n for n, _, _ in ours] == [n for n, _, _ in theirs]
    for (name, version, marker), (_, v, m) in zip(theirs, ours):
        # no version in the lock: envlock takes the archive's file name (simple2-3.0.tar.gz)
        assert version == v or (version is None and v), (name, version, v)
        assert (Marker(marker) if marker else None) == (Marker(m) if m else None), name
    # one target: the packages PEP 751 installs there (their markers evaluated by packaging)
    from envlock.formats.markers import applicable, target_marker_env

    for target in (target_marker_env("3.12.3", "cpython", machine="x86_64"),
                   {**target_marker_env("3.9.18", "cpython"), "sys_platform": "win32",
                    "platform_system": "Windows", "os_name": "nt"}):
        there = {n for n, _, m in theirs if m is None or Marker(m).evaluate(
            {**target, "extras": frozenset(), "dependency_groups": frozenset()}, "lock_file")}
        needed, optional = applicable(read_lock(path).packages, target)
        assert set(needed) - set(optional) == there


@pytest.mark.parametrize("group", ["security", "tests"])
def test_diff_of_a_pdm_lock_and_pdms_export_of_one_group(group: str, tmp_path: Path) -> None:
    """Issue 23: ``diff pdm.lock requirements.txt --group G`` of ``pdm export -G G`` (the
    oracle) reads the lock for that install: identical; without ``--group`` the install is
    inferred from the export, and said."""
    import json
    import os
    import subprocess

    pytest.importorskip("pdm")
    lock = CASES / "peers" / "pdmlock" / "demo__pdm.lock"
    proj = tmp_path / "p"
    proj.mkdir()
    shutil.copy(lock, proj / "pdm.lock")
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
        '[project.optional-dependencies]\nsecurity = []\ntests = []\n', encoding="utf-8")
    env = {**os.environ, "PDM_USE_VENV": "false", "PDM_PYTHON": sys.executable,
           "PDM_CHECK_UPDATE": "false", "PDM_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    r = subprocess.run([sys.executable, "-m", "pdm", "export", "-G", group, "--no-hashes", "-f",
                        "requirements", "-o", f"req.{group}.txt"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for args, how in ((["--group", group], f"-G {group} as pdm install takes it: groups {group} "
                                           "(as given)"),
                      ([], f"--group {group} (inferred from req.{group}.txt)")):
        d = subprocess.run([sys.executable, "-m", "envlock", "diff", str(proj / "pdm.lock"),
                            str(proj / f"req.{group}.txt"), "--format", "json", *args],
                           capture_output=True, text=True, timeout=120)
        doc = json.loads(d.stdout)
        assert d.returncode == 0 and doc["differences"] == [], doc["differences"]
        assert f"pdm.lock read for {how}" in doc["context"], doc["context"]
