"""``pixi.lock`` v4–v7 read as rattler_lock (pixi's lock crate) reads it, with py-rattler's
``LockFile.from_path`` as the oracle: for every pixi.lock of ``/work/shared/cases/peers``
(pixi's and rattler's own test and example lockfiles; and any of ``tests/formats/foreign``), envlock's packages per environment and
platform — conda name, version, build, subdir; pypi name and version — are rattler's, and the
project entries (conda source builds, editable / local-directory pypi entries) are envlock's
``projects``.  Invalid files rattler refuses get their real fault, and ``show``/``diff F F``
work on each file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from envlock._names import canonicalize
from envlock.errors import ManifestError
from envlock.formats import pixilock, read
from envlock.formats._load import load_yaml

rattler = pytest.importorskip("rattler")

PEERS = Path("/work/shared/cases/peers")
FOREIGN = Path(__file__).resolve().parent / "foreign"
FILES = sorted([*PEERS.glob("pixilock/*.lock"), *PEERS.glob("rattlerlock/v[4-7]__*.yml"),
                *FOREIGN.glob("*pixi.lock")], key=lambda p: p.name)
GOOD = [p for p in FILES if p.name != "v7__missing_platform.yml"]
_ARCHIVE = (".whl", ".tar.gz", ".zip")

pytestmark = pytest.mark.skipif(not GOOD, reason="the peers cases are not here")


def _rattler_view(path: Path) -> dict[tuple[str, str], tuple[set[tuple[Any, ...]], set[str], str]]:
    """``{(environment, platform): (packages, projects, subdir)}`` as py-rattler reads them."""
    out = {}
    for env_name, env in rattler.LockFile.from_path(path).environments():
        for plat in env.platforms():
            pkgs, projects = set(), set()
            for q in env.packages(plat):
                kind = type(q).__name__
                if kind == "CondaLockedBinaryPackage":
                    r = q.package_record
                    pkgs.add(("conda", r.name.normalized, str(r.version), str(r.build), str(r.subdir)))
                elif kind == "CondaLockedSourcePackage":
                    projects.add(q.package_record.name.normalized)
                else:  # PypiLockedPackage
                    loc = str(q.location)
                    if "://" not in loc and not loc.startswith("git+") and not loc.endswith(_ARCHIVE):
                        projects.add(canonicalize(q.name))  # a local directory: the project
                    else:
                        pkgs.add(("pip", canonicalize(q.name), str(q.version), None, None))
            out[(env_name, plat.name)] = (pkgs, projects, str(plat.subdir))
    return out


def _envlock_view(path: Path) -> dict[tuple[str, str], tuple[set[tuple[Any, ...]], set[str], str]]:
    data = load_yaml(path.read_text(), str(path), exact=True)
    out = {}
    for env_name in data["environments"]:
        lock = pixilock.read_pixi_lock(data, str(path), env_name)
        for plat in lock.pixi_platforms:
            pkgs = {(x.manager, x.name.lower() if x.manager == "conda" else x.name, x.version,
                     x.build, x.subdir) for x in lock.packages if x.platform == plat.name}
            out[(env_name, plat.name)] = (pkgs, set(lock.projects), plat.subdir)
    return out


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_every_peers_pixi_lock_reads_as_rattler_reads_it(path: Path) -> None:
    theirs, ours = _rattler_view(path), _envlock_view(path)
    assert set(ours) == set(theirs)
    for key, (pkgs, projects, subdir) in theirs.items():
        assert ours[key][0] == pkgs, key
        assert projects <= ours[key][1], key  # projects are per file, rattler's per platform
        assert ours[key][2] == subdir, key


def test_the_versions_covered() -> None:
    versions = {yaml.safe_load(p.read_text())["version"] for p in GOOD}
    assert versions == {4, 5, 6, 7}


def _rattler_sources(path: Path) -> dict[str, list[str]]:
    """``{platform: ["name version", …]}``: the default environment's conda source packages
    (``CondaLockedSourcePackage``), as py-rattler reads them."""
    out: dict[str, list[str]] = {}
    for env_name, env in rattler.LockFile.from_path(path).environments():
        for plat in env.platforms() if env_name == "default" else ():
            for q in env.packages(plat):
                if type(q).__name__ == "CondaLockedSourcePackage":
                    r = q.package_record
                    out.setdefault(plat.name, []).append(f"{r.name.normalized} {r.version}")
    return out


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_show_and_diff_of_the_file_with_itself(path: Path) -> None:
    from envlock.cli import cli

    runner = CliRunner()
    same = runner.invoke(cli, ["diff", str(path), str(path)])
    shown = runner.invoke(cli, ["show", "--width", "400", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "kind: pixi.lock" in shown.output
    theirs = _rattler_view(path)
    default = {k[1]: v for k, v in theirs.items() if k[0] == "default"}
    built = _rattler_sources(path)
    text = " ".join(shown.output.split())
    for plat, (pkgs, _, _) in default.items():
        conda = sum(1 for p in pkgs if p[0] == "conda")
        assert f"platform {plat}: " in text
        # rattler's count: binary and source conda packages (``conda_source``: child-package)
        src = built.get(plat, [])
        said = f" ({len(src)} built from source: {', '.join(src)})" if src else ""
        assert f"platform {plat}: {conda + len(src)} conda{said}, {len(pkgs) - conda} pip" in text \
            or not conda + len(src)
    assert same.exit_code == 0, same.output
    if not theirs:  # a lock of no platform and no package: one empty environment, said
        assert "neither lists a package" in " ".join(same.output.split())


def _mutate(tmp_path: Path, source: str, change: Any) -> Path:
    data = yaml.safe_load((PEERS / source).read_text())
    change(data)
    out = tmp_path / "pixi.lock"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _drop_record(d: dict[str, Any]) -> None:
    ref = d["environments"]["default"]["packages"]["win-64"][1]["conda"]
    d["packages"] = [r for r in d["packages"] if r.get("conda") != ref]


def _bad_kind(d: dict[str, Any]) -> None:
    d["packages"][0]["kind"] = "wheel"


def _no_url(d: dict[str, Any]) -> None:
    d["packages"][1].pop("url")


def _no_platforms(d: dict[str, Any]) -> None:
    d.pop("platforms")


def _pypi_without_name(d: dict[str, Any]) -> None:
    next(r for r in d["packages"] if "pypi" in r).pop("name")


def _no_location(d: dict[str, Any]) -> None:
    d["packages"][0].pop("conda")


@pytest.mark.parametrize(("source", "change", "fault"), [
    ("pixilock/cpp-with-git-source__pixi.lock", _drop_record, "is not in packages"),
    ("pixilock/editable-non-editable__pixi.lock", _bad_kind, "packages[0].kind must be conda or pypi"),
    ("pixilock/editable-non-editable__pixi.lock", _no_url, "packages[1] (conda bzip2) has no url or path"),
    ("pixilock/multi-machine__pixi.lock", _no_platforms, "needs a 'platforms' list"),
    ("pixilock/pypi-source-deps__pixi.lock", _pypi_without_name, ") has no name"),
    ("pixilock/multi-machine__pixi.lock", _no_location, "packages[0] needs a conda, conda_source or pypi location"),
    ("rattlerlock/v7__missing_platform.yml", None, "uses platform 'UNKNOWN', which is not in 'platforms'"),
])
def test_invalid_files_get_their_real_fault(tmp_path: Path, source: str, change: Any, fault: str) -> None:
    path = _mutate(tmp_path, source, change) if change else PEERS / source
    with pytest.raises(Exception):  # noqa: B017 - the oracle refuses it too
        rattler.LockFile.from_path(path)
    with pytest.raises(ManifestError) as exc:
        read(path, exact=True)
    assert fault in str(exc.value) and "has no conda or pypi URL" not in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.skipif(not (PEERS / "rattlerlock/v7__sources-lock.yml").is_file(), reason="no peers")
def test_a_conda_source_package_is_counted_as_rattler_counts_it() -> None:
    """rattler's v7 ``sources-lock.yml``: one ``conda_source`` record (child-package 0.1.0),
    a package to rattler (and the project, built here, to envlock): counted, and named."""
    from envlock.cli import cli

    path = PEERS / "rattlerlock/v7__sources-lock.yml"
    assert _rattler_sources(path) == {"win-64": ["child-package 0.1.0"]}
    text = " ".join(CliRunner().invoke(cli, ["show", str(path)]).output.split())
    assert "packages: 1 conda (1 built from source: child-package 0.1.0), 0 pip" in text
    assert "project: child-package" in text
