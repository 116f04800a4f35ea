"""``verify --lock conda-lock.yml`` reads categories as ``conda-lock install`` does: ``main``
and ``dev`` by default, ``-E NAME`` adds a category, ``--no-dev`` drops ``dev``.

The prefix is what conda-lock's own renderer (``render_lockfile_for_platform``, the list
``conda-lock install`` hands to conda) says an install with those options holds: one
conda-meta record per rendered URL, over a real interpreter.  The lock is conda-lock's own
test file ``test-multiple-categories`` (categories main, dev and test); the default install
is also checked on every conda-lock.yml of peers and ``tests/formats/foreign`` locked for this
platform (its ``# pip`` lines as dist-info directories).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.formats.markers import Requested
from envlock.formats import conda as _conda
from envlock.verify import verify
from envlock.verify.checks import CHECKS

LOCK = Path("/work/shared/cases/peers/condalock/test-multiple-categories__conda-lock.yml")
PACKAGE_CHECKS = [c for c in CHECKS if c[0] in ("packages", "locks")]

pytestmark = [
    pytest.mark.skipif(not LOCK.is_file(), reason="conda-lock's test lockfile is not here"),
    pytest.mark.skipif(_conda.current_subdir() != "linux-64", reason="the lock is for linux-64"),
]


def _rendered(*, dev: bool, extras: set[str]) -> list[str]:
    """The URLs ``conda-lock install [--no-dev] [-E …]`` installs, by conda-lock itself."""
    lockfile = pytest.importorskip("conda_lock.lockfile")
    from conda_lock.conda_lock import render_lockfile_for_platform

    lines = render_lockfile_for_platform(lockfile=lockfile.parse_conda_lock_file(LOCK),
                                         include_dev_dependencies=dev, extras=extras,
                                         kind="explicit", platform="linux-64")
    return [ln.split("#", 1)[0] for ln in lines if ln.startswith("http")]


def _prefix(tmp_path: Path, urls: list[str]) -> Path:
    """A conda prefix holding exactly ``urls`` (conda-meta records as conda writes them)."""
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True,
                   timeout=300)
    meta = prefix / "conda-meta"
    meta.mkdir()
    lock = {p["url"]: p for p in __import__("yaml").safe_load(LOCK.read_text())["package"]}
    for url in urls:
        p = _conda.parse_url(url)
        rec = {"name": p["name"], "version": p["version"], "build": p["build"],
               "build_number": 0, "channel": url.rsplit("/", 2)[0], "subdir": "linux-64",
               "fn": url.rsplit("/", 1)[1], "url": url, "md5": lock[url]["hash"]["md5"],
               "depends": [], "files": [], "requested_spec": ""}
        (meta / f"{p['name']}-{p['version']}-{p['build']}.json").write_text(json.dumps(rec))
    (meta / "history").write_text("")
    return prefix


def _findings(prefix: Path, tmp_path: Path, **kw: object) -> dict[str, list[object]]:
    r = verify(prefix=str(prefix), environ={"PATH": "/usr/bin:/bin"}, locks=[str(LOCK)],
               checks=PACKAGE_CHECKS, root=str(tmp_path), **kw)  # type: ignore[arg-type]
    out: dict[str, list[object]] = {}
    for f in r.findings:
        out.setdefault(f.id, []).append(f)
    return out | {"exit": [r.exit_code]}


def test_a_default_conda_lock_install_verifies_and_test_is_a_choice(tmp_path: Path) -> None:
    urls = _rendered(dev=True, extras=set())
    test_only = {u for u in _rendered(dev=True, extras={"test"})} - set(urls)
    assert len(urls) == 41 and len(test_only) == 60  # main 20 + dev 21; test alone 60
    found = _findings(_prefix(tmp_path, urls), tmp_path)
    assert found["exit"] == [0]
    assert "packages.missing" not in found and "packages.extra" not in found
    (note,) = found["packages.group-not-installed"]
    assert note.severity == "info"
    assert note.title.startswith("60 package(s) of lockfile test-multiple-categories__conda-lock.yml "
                                 "not installed, needed only by extra test: ")
    assert {e.split()[0] for e in note.evidence} == {_conda.parse_url(u)["name"] for u in test_only}
    assert "conda-lock install -E NAME" in note.fix[0]


def test_extras_named_must_be_installed(tmp_path: Path) -> None:
    found = _findings(_prefix(tmp_path, _rendered(dev=True, extras=set())), tmp_path,
                      requested=Requested(extras=("test",)))
    assert found["exit"] == [1]
    (missing,) = found["packages.missing"]
    assert missing.title.startswith("60 package(s) of lockfile")
    assert "packages.group-not-installed" not in found


def test_with_extras_installed_it_verifies(tmp_path: Path) -> None:
    found = _findings(_prefix(tmp_path, _rendered(dev=True, extras={"test"})), tmp_path,
                      requested=Requested(extras=("test",)))
    assert found["exit"] == [0] and "packages.group-not-installed" not in found


def test_no_dev_install(tmp_path: Path) -> None:
    urls = _rendered(dev=False, extras=set())
    assert len(urls) == 20
    prefix = _prefix(tmp_path, urls)
    default = _findings(prefix, tmp_path)  # conda-lock installs dev by default: missing
    assert default["exit"] == [1]
    assert default["packages.missing"][0].title.startswith("21 package(s)")  # dev 7 + dev-and-test 14
    no_dev = _findings(prefix, tmp_path, requested=Requested(no_dev=True))
    assert no_dev["exit"] == [0]
    (note,) = no_dev["packages.group-not-installed"]
    assert note.title.startswith("81 package(s)") and "dev, extra test" in note.title


def test_the_cli_takes_extras_and_no_dev(tmp_path: Path) -> None:
    from envlock.cli import cli as main

    prefix = _prefix(tmp_path, _rendered(dev=False, extras=set()))
    runner = CliRunner()
    ok = runner.invoke(main, ["verify", "--prefix", str(prefix), "--lock", str(LOCK), "--no-dev",
                              "--format", "json"])
    bad = runner.invoke(main, ["verify", "--prefix", str(prefix), "--lock", str(LOCK), "-E", "test",
                               "--no-dev", "--format", "json"])
    ids = lambda res: {f["id"] for f in json.loads(res.output)["findings"]}  # noqa: E731
    assert "packages.missing" not in ids(ok) and "packages.group-not-installed" in ids(ok)
    assert bad.exit_code == 1 and "packages.missing" in ids(bad)


_PEERS = Path("/work/shared/cases/peers")
_FOREIGN = Path(__file__).resolve().parents[1] / "formats" / "foreign"
EVERY_LOCK = sorted([*_PEERS.glob("condalock/*.yml"), *_PEERS.glob("rattlerlock/v0__*conda-lock.yml"),
                     *_FOREIGN.glob("*conda-lock.yml")], key=lambda p: p.name)


def _default_install(lock: Path, tmp_path: Path) -> Path | None:
    """A prefix holding what ``conda-lock install LOCK`` (main + dev, no extras) installs here,
    by conda-lock's own renderer: a conda-meta record per URL, a dist-info per ``# pip`` line.
    ``None`` when the lock is not for this platform."""
    lockfile = pytest.importorskip("conda_lock.lockfile")
    from conda_lock.conda_lock import render_lockfile_for_platform

    subdir = _conda.current_subdir()
    parsed = lockfile.parse_conda_lock_file(lock)
    if subdir not in parsed.metadata.platforms:
        return None
    lines = render_lockfile_for_platform(lockfile=parsed, include_dev_dependencies=True,
                                         extras=set(), kind="explicit", platform=subdir)
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True,
                   timeout=300)
    meta = prefix / "conda-meta"
    meta.mkdir()
    md5 = {d.url: d.hash.md5 for d in parsed.package if d.platform == subdir}
    pip = {(canon(d.name), d.url.split("#")[0]): d.version for d in parsed.package
           if d.platform == subdir and d.manager == "pip"}
    site = next((prefix / "lib").glob("python3*/site-packages"))
    for line in lines:
        if line.startswith("http"):
            url = line.split("#", 1)[0]
            p = _conda.parse_url(url)
            rec = {"name": p["name"], "version": p["version"], "build": p["build"],
                   "build_number": 0, "channel": url.rsplit("/", 2)[0], "subdir": p["subdir"],
                   "fn": url.rsplit("/", 1)[1], "url": url, "md5": md5.get(url),
                   "depends": [], "files": [], "requested_spec": ""}
            (meta / f"{p['name']}-{p['version']}-{p['build']}.json").write_text(json.dumps(rec))
        elif line.startswith("# pip "):
            name, _, url = line[len("# pip "):].partition(" @ ")
            version = pip[(canon(name), url.strip().split("#")[0])]
            dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
            dist.mkdir()
            (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
            (dist / "INSTALLER").write_text("pip\n")
    (meta / "history").write_text("")
    return prefix


def canon(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


@pytest.mark.parametrize("lock", EVERY_LOCK, ids=lambda p: p.name)
def test_every_conda_lock_default_install_verifies(lock: Path, tmp_path: Path) -> None:
    """``verify --lock`` of each conda-lock.yml of peers and ``tests/formats/foreign`` against
    what ``conda-lock install`` (main and dev; optional categories only with ``-E``) puts here:
    nothing missing, nothing extra, exit 0."""
    prefix = _default_install(lock, tmp_path)
    if prefix is None:
        pytest.skip(f"{lock.name} is not locked for {_conda.current_subdir()}")
    r = verify(prefix=str(prefix), environ={"PATH": "/usr/bin:/bin"}, locks=[str(lock)],
               checks=PACKAGE_CHECKS, root=str(tmp_path))
    bad = [(f.id, f.title) for f in r.findings if f.severity != "info"]
    assert r.exit_code == 0, bad
    assert not {"packages.missing", "packages.extra"} & {f.id for f in r.findings}
    gone = [*sorted((prefix / "conda-meta").glob("*.json"))[:1],
            *sorted(prefix.glob("lib/python3*/site-packages/*.dist-info"))[:1]]
    for record in gone:  # and each kind of record is read: one of each taken away is missed
        shutil.rmtree(record) if record.is_dir() else record.unlink()
    r = verify(prefix=str(prefix), environ={"PATH": "/usr/bin:/bin"}, locks=[str(lock)],
               checks=PACKAGE_CHECKS, root=str(tmp_path))
    missing = [f.title for f in r.findings if f.id == "packages.missing"]
    assert r.exit_code == 1 and sum(int(t.split()[0]) for t in missing) == len(gone), missing
