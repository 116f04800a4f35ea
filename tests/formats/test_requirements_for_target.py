"""A requirements file read for one target — ``envlock diff requirements.txt manifest.toml`` —
is what pip installs there: a line whose environment marker does not hold for the manifest's
interpreter is left out (:func:`envlock.diff.foreign.requirements_for_target`).  Oracle: pip's
own parser (``parse_requirements`` + ``install_req_from_parsed_requirement``) on the real
requirements files of ``shared/cases``, each line's marker evaluated by pip's
``Marker.evaluate`` for the target's marker environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from envlock import formats
from envlock.diff.foreign import requirements_for_target
from envlock.formats import Reading
from envlock.formats.markers import target_marker_env
from envlock.manifest._toml import dumps

CASES = Path(__file__).resolve().parents[2] / ".." / "shared" / "cases"
if not CASES.is_dir():
    CASES = Path("/work/shared/cases")
FILES = (sorted((CASES / "peers" / "reqs").iterdir()) if CASES.is_dir() else []) + sorted(
    p for p in (CASES / "foreign").glob("*requirements.txt"))

pytestmark = pytest.mark.skipif(not FILES, reason="the shared cases are not here")


def _pip_for(path: Path, env: dict[str, str]) -> tuple[set[str], int]:
    """pip's requirements of ``path`` whose marker holds in ``env``: the names pip knows, and
    how many it knows only by a link (a URL, a local path)."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import parse_requirements

    names, links = set(), 0
    for parsed in parse_requirements(str(path), session=PipSession()):
        if parsed.constraint:
            continue
        ireq = install_req_from_parsed_requirement(parsed)
        if ireq.markers is not None and not ireq.markers.evaluate({**env, "extra": ""}):
            continue
        if ireq.req is not None:
            names.add(canonicalize_name(ireq.req.name))
        else:
            links += 1
    return names, links


def _manifest(version: str, machine: str) -> Reading:
    return Reading("manifest", {"python": {"status": "ok", "version": version,
                                           "implementation": "cpython"},
                                "platform": {"status": "ok", "machine": machine}})


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("python", ["3.9.18", "3.11.7", "3.13.1"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_requirements_files_for_one_target_are_what_pip_installs(
        path: Path, python: str, machine: str, monkeypatch) -> None:
    monkeypatch.chdir(path.parent)  # pip reads a local path (`-e .`) from where it runs
    env = target_marker_env(python, "cpython", machine=machine)
    narrowed, note = requirements_for_target(formats.read(path), _manifest(python, machine),
                                             name=path.name, other_name="m.toml")
    pkgs = narrowed.data.get("pip", {}).get("packages", [])
    ours = {p["name"] for p in pkgs if not p.get("named-by") and not p.get("unnamed")}
    assert (ours, len(pkgs) - len(ours)) == _pip_for(path, env)
    assert not any("marker" in p for p in pkgs)  # one target: no marker is left to evaluate
    if note:
        left = note.split("(", 1)[1].rstrip(")").split(", ")
        assert not set(left) & ours


def test_a_marked_file_has_lines_for_other_targets() -> None:
    """The cases exercise the rule: a uv export's Python-version forks and platform lines."""
    uv_export = next(p for p in FILES if "Oyez" in p.name)
    env = target_marker_env("3.12.3", "cpython", machine="x86_64")
    narrowed, note = requirements_for_target(formats.read(uv_export), _manifest("3.12.3", "x86_64"),
                                             name="r.txt", other_name="m.toml")
    assert note is not None and note.startswith(
        "r.txt read for m.toml's Python 3.12.3 on x86_64: left out ")
    names = {p["name"] for p in narrowed.data["pip"]["packages"]}
    assert "colorama" not in names and "exceptiongroup" not in names  # win32; Python < 3.11
    assert "colorama" in note and names == _pip_for(uv_export, env)[0] | {"."}


def test_diff_of_a_requirements_file_with_a_manifest_reads_it_for_the_manifests_target(
        tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy==2.2.6 ; python_version < '3.11'\nnumpy==2.4.2 ; python_version >= '3.11'\n"
                   "whoosh==2.7.4; sys_platform == 'win32'\nrich==13.7.1\n")
    man = tmp_path / "m.toml"
    man.write_text(dumps({"envlock": {"schema": 1, "host": "node"},
                          "python": {"status": "ok", "version": "3.11.8"},
                          "pip": {"status": "ok", "packages": [
                              {"name": "numpy", "version": "2.4.2"},
                              {"name": "rich", "version": "13.7.1"}]}}))
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", str(req), str(man), "--format",
                        "json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc["differences"]
    assert doc["identical"]["areas"]["package"] == 2  # numpy 2.4.2 (Python >= 3.11), rich
    assert any(c.startswith("requirements.txt read for m.toml's Python 3.11.8: left out 1 entry "
                            "for other platforms or Python versions (whoosh)")
               for c in doc["context"]), doc["context"]


@pytest.mark.parametrize("python", ["3.9.18", "3.12.3"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_snapshots_lockfile_check_asks_only_for_what_pip_installs_here(
        path: Path, python: str, monkeypatch) -> None:
    """``snapshot``'s check of a requirements lockfile beside the environment
    (:func:`envlock.probes.lockfiles.compare_lock`) reads it for that one environment: a pin
    whose marker does not hold there (``colorama ; sys_platform == 'win32'``) is not asked for.
    Oracle: pip's parser, each line's marker evaluated for the target (``==`` pins only)."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import parse_requirements

    from envlock.probes.lockfiles import Installed, compare_lock

    monkeypatch.chdir(path.parent)
    env = target_marker_env(python, "cpython", machine="x86_64")
    want = set()
    for parsed in parse_requirements(str(path), session=PipSession()):
        ireq = install_req_from_parsed_requirement(parsed)
        if parsed.constraint or ireq.req is None or ireq.link is not None:
            continue
        if ireq.markers is not None and not ireq.markers.evaluate({**env, "extra": ""}):
            continue
        spec = list(ireq.req.specifier)
        if len(spec) == 1 and spec[0].operator in ("==", "==="):
            want.add(canonicalize_name(ireq.req.name))
    have = Installed(pip={}, conda={}, platform="linux-64", markers=env)
    got = {canonicalize_name(x.split(":", 1)[0]) for x in compare_lock(path, "requirements", have)}
    assert got == want
