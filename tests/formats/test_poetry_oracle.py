"""Every poetry.lock of ``shared/cases/peers`` (and ``tests/formats/foreign``) read as poetry
reads it (issue 23): poetry's own ``Locker.locked_repository()`` — what ``poetry show`` and
``poetry install`` take the locked packages from — is the oracle.  poetry cannot be installed
beside conda-lock (its releases pin ``installer<0.8`` or ``dulwich>=0.25``; conda-lock 4 needs
``installer>=1.0.1`` and ``dulwich<0.25``), so it runs in an environment of its own that ``uv run
--with poetry`` makes from the registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.errors import ManifestError
from envlock.formats import read_lock
from envlock.formats.markers import applicable, target_marker_env
from envlock.lock._tools import uv_bin

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
FOREIGN = Path(__file__).resolve().parent / "foreign"
LOCKS = sorted([*(CASES / "peers" / "poetrylock").glob("*poetry.lock"),
                *FOREIGN.glob("*poetry.lock")])
POETRY = "poetry==2.5.1"

_ORACLE = """
import json, sys
from pathlib import Path
from packaging.utils import canonicalize_name
from poetry.packages.locker import Locker
TARGETS = json.loads(sys.argv.pop(1))
out = {}
for f in sys.argv[1:]:
    try:
        repo = Locker(Path(f), {}).locked_repository()
    except Exception as exc:
        out[f] = {"error": str(exc).splitlines()[0]}
        continue
    out[f] = {"packages": sorted([p.name, str(p.version), p.source_type or ""]
                                 for p in repo.packages)}
    locker = Locker(Path(f), {})
    if not locker.is_locked_groups_and_markers():
        # poetry re-resolves a lock before 2.1 from the project's pyproject.toml (its
        # Installer: "Cannot install without re-resolving because the lock file is not at
        # least version 2.1"): the lock alone does not say what one target gets
        out[f]["targets"] = None
        continue
    extras = {canonicalize_name(e) for e in locker.lock_data.get("extras", {})}
    out[f]["targets"] = [
        # what poetry's Transaction installs there (poetry install --all-groups --all-extras):
        # a package of a group whose locked marker for those groups holds in the env
        sorted(p.name for p, info in locker.locked_packages().items()
               if info.get_marker(info.groups).validate({**env, "extra": extras}))
        for env in TARGETS]
    out[f]["no_extras"] = [  # poetry install --all-groups (no -E): the markers with no extra
        sorted(p.name for p, info in locker.locked_packages().items()
               if info.get_marker(info.groups).validate({**env, "extra": set()}))
        for env in TARGETS]
print(json.dumps(out))
"""

#: the targets each lock is read for (PEP 508 marker environments): Linux x86-64 CPython 3.12.3
#: and Windows x86-64 CPython 3.9.18
_TARGETS = (
    {**target_marker_env("3.12.3", "cpython", machine="x86_64"), "sys_platform": "linux",
     "platform_system": "Linux", "os_name": "posix"},
    {**target_marker_env("3.9.18", "cpython", machine="AMD64"), "sys_platform": "win32",
     "platform_system": "Windows", "os_name": "nt"},
)

pytestmark = pytest.mark.skipif(not LOCKS, reason="the peers cases are not here")


@pytest.fixture(scope="module")
def poetry_reading(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    script = tmp_path_factory.mktemp("poetry") / "oracle.py"
    script.write_text(_ORACLE, encoding="utf-8")
    r = subprocess.run([uv_bin(), "run", "--no-project", "--isolated", "--python", sys.executable,
                        "--with", POETRY, "python", str(script), json.dumps(_TARGETS),
                        *map(str, LOCKS)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"{POETRY} could not be installed from the registry: "
                    f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(r.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_a_poetry_lock_reads_as_poetry_reads_it(lock: Path, poetry_reading: dict) -> None:
    theirs = poetry_reading[str(lock)]
    if "error" in theirs:  # poetry refuses it: envlock too, one line
        with pytest.raises(ManifestError, match="not supported"):
            read_lock(lock)
        assert "not compatible" in theirs["error"]
        return
    from packaging.utils import canonicalize_name

    ours = read_lock(lock)
    # a path (directory) dependency is the project's: envlock names it a project, unpinned
    want = sorted((canonicalize_name(n), v) for n, v, src in theirs["packages"]
                  if src != "directory")
    assert sorted((x.name, x.version) for x in ours.packages) == want
    assert {canonicalize_name(n) for n, _, src in theirs["packages"] if src == "directory"} <= \
        set(ours.projects)
    # one target (a lock-version 2.1 lock: poetry installs from its locked groups and markers;
    # before 2.1 poetry answers only with the project's pyproject.toml, which is not here)
    assert "targets" in theirs
    for env, there in zip(_TARGETS, theirs["targets"] or ()):
        needed, _ = applicable(ours.packages, env)
        assert set(needed) == {canonicalize_name(n) for n in there} - set(ours.projects), \
            (env["sys_platform"], sorted(set(needed) ^ {canonicalize_name(n) for n in there}))


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_a_poetry_lock_without_extras_installs_what_poetry_installs(lock: Path,
                                                                   poetry_reading: dict) -> None:
    """lock-version 2.1: ``poetry install --all-groups`` with no ``-E`` installs the locked
    packages whose marker holds with no extra; ``optional = true`` alone does not leave one
    out (poetry writes ``extra == "x"`` into the marker of a package only an extra needs)."""
    from packaging.utils import canonicalize_name

    from envlock._selection import Selection

    theirs = poetry_reading[str(lock)]
    if "error" in theirs or theirs.get("targets") is None:
        pytest.skip("poetry answers only with the project's pyproject.toml (lock-version < 2.1)")
    ours = read_lock(lock)
    groups = {g for x in ours.packages for g, _ in x.groups if g and not g.startswith("extra:")}
    for env, there in zip(_TARGETS, theirs["no_extras"]):
        needed, optional = applicable(ours.packages, env, Selection(frozenset(groups)))
        got = {n for n in needed if n not in optional}
        assert got == {canonicalize_name(n) for n in there} - set(ours.projects), \
            (env["sys_platform"], sorted(got ^ {canonicalize_name(n) for n in there}))
