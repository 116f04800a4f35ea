"""A universal lock read for one target (:mod:`envlock.formats.markers`): ``verify --lock`` and
``diff`` on uv, poetry and pdm locks, with the real ``uv`` as the oracle.

A lock of these tools holds every package of every dependency group, extra and platform;
``uv sync --no-dev`` installs only what the project's own dependencies reach, through edges
whose markers hold here.  A package that only a group or an extra needs, not installed, is a
note (``packages.group-not-installed``), never ``packages.missing``; one that only another
platform needs (``colorama`` where ``sys_platform == 'win32'``) is not asked for at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from packaging.requirements import Requirement

from envlock import formats
from envlock.lock._tools import uv_bin
from envlock.formats.markers import applicable, target_marker_env
from envlock.verify.expected import read_lock

from _wheels import make_wheel

FOREIGN = Path(__file__).resolve().parent / "foreign"

PYPROJECT = """\
[project]
name = "proj"
version = "0.1"
requires-python = ">=3.7"
dependencies = ["alpha"]

[project.optional-dependencies]
docs = ["sphinxish"]

[dependency-groups]
dev = ["devtool"]
"""


def _uv(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1"}
    r = subprocess.run([uv_bin(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture()
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A project locked by the real uv from local wheels: alpha (→ beta; winonly on win32;
    oldpy on Python < 3.8), an extra ``docs`` (sphinxish), a group ``dev`` (devtool → beta)."""
    wh = tmp_path / "wheels"
    make_wheel(wh, "alpha", "1.0", ["beta>=2", 'winonly; sys_platform == "win32"',
                                    'oldpy; python_version < "3.8"'])
    for name in ("beta", "winonly", "oldpy", "sphinxish"):
        make_wheel(wh, name, "1.0" if name != "beta" else "2.0")
    make_wheel(wh, "devtool", "1.0", ["beta"])
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(PYPROJECT)
    _uv(["lock", "--no-index", "--find-links", str(wh), "-q"], proj)
    return proj, wh


def _verify(venv_python: Path, lock: Path) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "envlock", "verify", "--python", str(venv_python),
                        "--lock", str(lock), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def test_uv_sync_no_dev_verifies_and_names_the_groups_left_out(project) -> None:
    proj, wh = project
    _uv(["sync", "--frozen", "--no-dev", "--no-index", "--find-links", str(wh), "-q",
         "--python", sys.executable], proj)
    py = proj / ".venv" / "bin" / "python"
    code, doc = _verify(py, proj / "uv.lock")
    assert code == 0, doc["findings"]
    notes = {f["id"]: f for f in doc["findings"]}
    assert "packages.missing" not in notes
    note = notes["packages.group-not-installed"]
    assert note["severity"] == "info"
    assert note["title"] == ("2 package(s) of lockfile uv.lock not installed, needed only by dev, "
                             "extra docs: devtool, sphinxish")
    assert notes["packages.lock-selection"]["title"] == (
        "lockfile uv.lock read for no extra or group (inferred from what is installed)")
    # winonly (win32) and oldpy (Python < 3.8) are for other targets: never asked for
    assert "winonly" not in json.dumps(doc) and "oldpy" not in json.dumps(doc)

    # everything installed: no note; the default package removed: packages.missing names it
    _uv(["sync", "--frozen", "--all-extras", "--all-groups", "--no-index", "--find-links", str(wh),
         "-q", "--python", sys.executable], proj)
    code, doc = _verify(py, proj / "uv.lock")
    assert code == 0 and [f["title"] for f in doc["findings"] if f["id"].startswith("packages.")] \
        == ["lockfile uv.lock read for --extra docs --group dev (inferred from what is installed)"]
    _uv(["pip", "uninstall", "--python", str(py), "alpha", "-q"], proj)
    code, doc = _verify(py, proj / "uv.lock")
    assert code == 1
    missing = [f for f in doc["findings"] if f["id"] == "packages.missing"]
    assert [f["title"] for f in missing] == ["1 package(s) of lockfile uv.lock not installed: alpha"]


def _uv_export(lock: Path, tmp_path: Path, args: list[str], env: dict[str, str]) -> dict[str, str]:
    """What ``uv export --frozen`` says an install of ``lock`` holds on marker environment
    ``env``: ``{name: version}`` of its lines whose markers hold."""
    proj = tmp_path / "export"
    proj.mkdir(exist_ok=True)
    (proj / "uv.lock").write_bytes(lock.read_bytes())
    root = next(p for p in tomllib.loads(lock.read_text())["package"]  # the workspace member
                if "editable" in p.get("source", {}) or "virtual" in p.get("source", {}))
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "{root["name"]}"\nversion = "{root["version"]}"\n'
        'requires-python = ">=3.8"\n')
    out = _uv(["export", "--frozen", "--no-hashes", "--no-emit-project", "--no-header",
               "--no-annotate", *args], proj)
    got = {}
    for line in out.splitlines():
        if not line.strip() or line.startswith(("#", "-")):
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": "", **env}):
            got[req.name] = str(req.specifier).removeprefix("==")
    return got


@pytest.mark.parametrize("python", ["3.9.18", "3.11.7", "3.13.1"])
def test_default_install_of_a_real_uv_lock_is_what_uv_export_says(python, tmp_path) -> None:
    lock = FOREIGN / "Comfy-Org__comfy-cli__uv.lock"
    env = target_marker_env(python, "cpython")
    needed, optional = applicable(read_lock(lock).packages, env)
    default = {n: v for n, v in needed.items() if n not in optional}
    assert default == _uv_export(lock, tmp_path, ["--no-dev"], env)
    # every extra and group: all that applies here
    assert needed == _uv_export(lock, tmp_path, ["--all-extras", "--all-groups"], env)
    assert "colorama" not in needed  # sys_platform == 'win32' only
    assert ("exceptiongroup" in default) == (tuple(map(int, python.split("."))) < (3, 11))


def test_pdm_and_poetry_groups_are_read_from_the_lock() -> None:
    pdm = formats.read(FOREIGN / "pdm-project__pdm__pdm.lock").lock
    groups = {p.name: p.groups for p in pdm.packages}
    # the file's own `groups = [...]` per package; "default" is the default install
    assert ("", None) in groups["anyio"]
    assert all(g != "" for g, _m in groups["pytest"])
    needed, optional = applicable(read_lock(FOREIGN / "pdm-project__pdm__pdm.lock").packages,
                                  target_marker_env("3.11.7", "cpython"))
    assert "pytest" in optional and "anyio" not in optional and "anyio" in needed
    # a poetry 1.x lock without categories does not say: every entry is needed
    poetry = formats.read(FOREIGN / "EthanMarx__ztf-lfi-demo__poetry.lock").lock
    assert all(p.groups == () for p in poetry.packages)


def test_diff_of_the_synced_venv_against_its_uv_lock_is_identical(project, tmp_path) -> None:
    """The lock also holds win32-only, Python<3.8-only and dev/docs-only packages: not
    differences from a `uv sync --no-dev` venv, and said once in the context."""
    proj, wh = project
    _uv(["sync", "--frozen", "--no-dev", "--no-index", "--find-links", str(wh), "-q",
         "--python", sys.executable], proj)
    manifest = tmp_path / "m.toml"
    snap = subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                           str(proj / ".venv" / "bin" / "python"), "-o", str(manifest)],
                          capture_output=True, text=True, timeout=120)
    assert snap.returncode == 0, snap.stderr
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", str(manifest),
                        str(proj / "uv.lock"), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc["differences"]
    assert doc["identical"]["areas"]["package"] == 2  # alpha, beta
    note = next(c for c in doc["context"] if c.startswith("uv.lock read for m.toml's Python"))
    assert "2 entries for other platforms or Python versions (oldpy, winonly)" in note
    assert "2 entries needed only by dependency groups or extras m.toml does not have " \
           "installed (devtool, sphinxish)" in note
    # a real difference is still one: the venv's beta another version than the lock's
    site = next((proj / ".venv" / "lib").glob("python3*/site-packages"))
    meta = next(site.glob("beta-2.0.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 2.0", "Version: 1.9"))
    manifest.unlink()
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                    str(proj / ".venv" / "bin" / "python"), "-o", str(manifest)],
                   capture_output=True, text=True, timeout=120, check=True)
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", str(manifest),
                        str(proj / "uv.lock"), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert [(d["key"], d["values"]) for d in doc["differences"]] == [("beta", ["1.9", "2.0"])]
