"""Every uv.lock of ``shared/cases/peers`` (and ``tests/formats/foreign``) read as uv reads it,
with ``uv export --frozen`` itself as the oracle (issue 23): the full set (``--all-extras
--all-groups --all-packages``), the default install (``--no-dev``, what ``uv sync --no-dev``
installs) and that install for one target (Linux x86-64, CPython 3.12: the export's markers
evaluated by ``packaging``).  A local directory (``directory``/``editable``/``virtual``
source) is the project, which envlock leaves out as a project and uv exports as a path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envlock._selection import Selection
from envlock.formats import read_lock
from envlock.formats.markers import applicable, target_marker_env
from envlock.lock._tools import uv_bin

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
FOREIGN = Path(__file__).resolve().parent / "foreign"
LOCKS = sorted([*(CASES / "peers" / "uvlock").glob("*uv.lock"), *FOREIGN.glob("*uv.lock")])
TARGET = target_marker_env("3.12.3", "cpython", machine="x86_64")

pytestmark = pytest.mark.skipif(not LOCKS, reason="the peers cases are not here")


def _project(lock: Path, tmp: Path) -> Path | None:
    """A directory holding ``lock`` (its redacted ``[X]`` digits made 0) and the smallest
    pyproject.toml uv takes for it; ``None`` when the lock has conflicts (no one export)."""
    text = re.sub(r"\.\[X\]", ".0", lock.read_text(encoding="utf-8"))
    data = tomllib.loads(text)
    if data.get("conflicts"):
        return None
    root = next((p for p in data.get("package", [])
                 if {"editable", "virtual"} & set(p.get("source", {}))
                 and "." in (p["source"].get("editable"), p["source"].get("virtual"))), None)
    (tmp / "uv.lock").write_text(text, encoding="utf-8")
    manifest = data.get("manifest", {})
    if root is None and manifest.get("dependency-groups") and not manifest.get("members"):
        # a non-project workspace root: no [project], its groups in [dependency-groups]
        (tmp / "pyproject.toml").write_text(
            "[tool.uv.workspace]\nmembers = []\n\n[dependency-groups]\n" + "".join(
                f"{json.dumps(g)} = {json.dumps([_requirement(r) for r in reqs])}\n"
                for g, reqs in manifest["dependency-groups"].items()), encoding="utf-8")
        return tmp
    (tmp / "pyproject.toml").write_text(
        f'[project]\nname = "{root["name"] if root else "x"}"\n'
        f'version = "{(root or {}).get("version", "0.1")}"\n'
        f'requires-python = "{data.get("requires-python", ">=3.8")}"\n', encoding="utf-8")
    return tmp


def _requirement(r: dict) -> str:
    """A PEP 508 requirement of a ``[manifest]`` entry of uv.lock (``name``, ``extras``,
    ``specifier``, ``marker``)."""
    extras = f"[{','.join(r['extras'])}]" if r.get("extras") else ""
    marker = f" ; {r['marker']}" if r.get("marker") else ""
    return f"{r['name']}{extras}{r.get('specifier', '')}{marker}"


def _export(proj: Path, *args: str) -> list[Requirement] | None:
    """``uv export --frozen`` as requirements; ``None`` when uv cannot export it offline."""
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1", "UV_OFFLINE": "1"}
    r = subprocess.run([uv_bin(), "export", "--frozen", "--no-hashes", "--no-header",
                        "--no-annotate", "--no-emit-project", "--no-emit-workspace", *args],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith(("-e ", "./", "/", ".")):
            continue  # a local path: the project's own (envlock: LockFile.projects)
        out.append(Requirement(line))
    return out


def _pinned(reqs: list[Requirement]) -> set[tuple[str, str | None]]:
    """(name, version): the ``==`` pin, or ``None`` for a URL (git/archive) requirement."""
    return {(canonicalize_name(r.name),
             str(next(iter(r.specifier))).removeprefix("==") if r.specifier else None)
            for r in reqs}


def _agree(entries: list, oracle: set[tuple[str, str | None]]) -> None:
    """envlock's entries are the export's: the same names, each with as many versions, every
    ``==`` pin among them (a URL requirement's version is the file's, not written in the
    export)."""
    ours: dict[str, set[str]] = {}
    for x in entries:
        ours.setdefault(x.name, set()).add(x.version)
    theirs: dict[str, list[str | None]] = {}
    for name, version in oracle:
        theirs.setdefault(name, []).append(version)
    assert set(ours) == set(theirs)
    for name, versions in theirs.items():
        assert len(ours[name]) == len(versions), (name, ours[name], versions)
        assert {v for v in versions if v is not None} <= ours[name], (name, ours[name], versions)


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_a_uv_lock_reads_as_uv_exports_it(lock: Path, tmp_path: Path) -> None:
    proj = _project(lock, tmp_path)
    if proj is None:
        pytest.skip("conflicting extras: no one export holds them all (test_uv_conflicts)")
    full = _export(proj, "--all-extras", "--all-groups", "--all-packages")
    if full is None:
        pytest.skip("uv cannot export this lock offline")
    ours = read_lock(proj / "uv.lock")
    _agree(list(ours.packages), _pinned(full))

    default = _export(proj, "--no-dev")
    assert default is not None
    in_default = [x for x in ours.packages if not x.groups or any(g == "" for g, _ in x.groups)]
    _agree(in_default, _pinned(default))

    # one target: the export's markers evaluated there, and envlock's reading for it
    there = {(canonicalize_name(r.name)) for r in default
             if r.marker is None or Marker(str(r.marker)).evaluate(TARGET)}
    needed, optional = applicable(ours.packages, TARGET, Selection(), conflicts=ours.conflicts)
    assert set(needed) - set(optional) == there

    # each dependency group of a non-project workspace root on its own (uv export --only-group)
    groups = tomllib.loads((proj / "uv.lock").read_text(encoding="utf-8")).get(
        "manifest", {}).get("dependency-groups", {}) if not ours.projects else {}
    for g in groups:
        only = _export(proj, "--only-group", g)
        assert only is not None
        _agree([x for x in ours.packages if any(h == g for h, _ in x.groups)], _pinned(only))
        needed, _ = applicable(ours.packages, TARGET, Selection(frozenset({g})))
        assert {n for n in needed if any(h in ("", g) for h, _ in
                                         next(x for x in ours.packages if x.name == n).groups)} \
            == {canonicalize_name(r.name) for r in only
                if r.marker is None or Marker(str(r.marker)).evaluate(TARGET)}


def test_a_lock_uv_refuses_is_one_error_naming_its_fault(tmp_path: Path) -> None:
    """uv refuses a git source whose exact ``rev`` is not its precise commit; so does envlock."""
    lock = CASES / "peers" / "uvlock" / "inline__git_secret_mismatch__uv.lock"
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "uv.lock").write_text(lock.read_text(encoding="utf-8"), encoding="utf-8")
    (proj / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1"\n'
                                         'requires-python = ">=3.12"\n', encoding="utf-8")
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1", "UV_OFFLINE": "1"}
    r = subprocess.run([uv_bin(), "export", "--frozen"], cwd=proj, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "does not match precise commit" in r.stderr
    from envlock.errors import ManifestError

    with pytest.raises(ManifestError, match="does not match precise commit"):
        read_lock(proj / "uv.lock")
