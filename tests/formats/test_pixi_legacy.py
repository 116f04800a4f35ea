"""rattler_lock's version-3 lock files (conda-lock's shape: ``metadata`` + ``package`` entries
with ``platform`` and ``manager``) read as rattler_lock's ``parse_v3_or_lower`` reads them,
with py-rattler's ``LockFile.from_path`` as the oracle.

The inputs are conda-lock's own test lockfiles from ``/work/shared/cases/peers/condalock``
turned into that older pixi shape as pixi wrote it: ``version: 3``, no ``optional``, PyPI
entries under ``manager: pypi`` (or rattler's alias ``pip``).  For each, envlock's packages
per platform — conda name, version, build, subdir; PyPI name and version — are rattler's;
``show``, ``diff F F`` and a ``restore`` dry run work; a file rattler refuses is one
``Error:`` naming the fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from envlock._names import canonicalize
from envlock.errors import ManifestError
from envlock.formats import read
from envlock.formats._load import load_yaml
from envlock.formats.pixilock import read_pixi_lock

rattler = pytest.importorskip("rattler")

CONDA_LOCKS = sorted(Path("/work/shared/cases/peers/condalock").glob("*.yml"))
pytestmark = pytest.mark.skipif(not CONDA_LOCKS, reason="the peers cases are not here")


def _as_v3(src: Path, pip_name: str = "pypi", version: int = 3) -> dict[str, Any]:
    """conda-lock file ``src`` in pixi's version-3 (or ``version``) shape."""
    doc = yaml.safe_load(src.read_text())
    meta = doc["metadata"]
    out = {"version": version,
           "metadata": {"content_hash": meta.get("content_hash", {}),
                        "channels": [{"url": c["url"] if isinstance(c, dict) else c,
                                      "used_env_vars": []} for c in meta["channels"]],
                        "platforms": list(meta["platforms"]), "sources": []},
           "package": []}
    for p in doc["package"]:
        q = {k: v for k, v in p.items() if k != "optional"}
        if q["manager"] == "pip":  # pixi wrote PEP 508 ``requires_dist``, not conda-lock's map
            q["manager"] = pip_name
            deps = q.pop("dependencies", {}) or {}
            q["requires_dist"] = [n if v in ("*", "") else f"{n}{v}" for n, v in deps.items()
                                  if v in ("*", "") or "||" not in v]
        out["package"].append(q)
    return out


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "pixi.lock") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _rattler_view(path: Path) -> dict[str, set[tuple[Any, ...]]]:
    out: dict[str, set[tuple[Any, ...]]] = {}
    for env_name, env in rattler.LockFile.from_path(path).environments():
        assert env_name == "default"
        for plat in env.platforms():
            pkgs = out.setdefault(plat.name, set())
            for q in env.packages(plat):
                if type(q).__name__ == "CondaLockedBinaryPackage":
                    r = q.package_record
                    pkgs.add(("conda", r.name.normalized, str(r.version), str(r.build), str(r.subdir)))
                else:
                    pkgs.add(("pip", canonicalize(q.name), str(q.version), None, None))
    return out


def _envlock_view(path: Path) -> dict[str, set[tuple[Any, ...]]]:
    assert read(path).kind == "pixi.lock"
    lock = read_pixi_lock(load_yaml(path.read_text(), str(path), exact=True), str(path))
    out: dict[str, set[tuple[Any, ...]]] = {p: set() for p in lock.platforms}
    for x in lock.packages:
        out[x.platform].add((x.manager, x.name.lower() if x.manager == "conda" else x.name,
                             x.version, x.build, x.subdir))
    return out


@pytest.mark.parametrize("src", CONDA_LOCKS, ids=lambda p: p.name)
def test_version_3_reads_as_rattler_reads_it(tmp_path: Path, src: Path) -> None:
    path = _write(tmp_path, _as_v3(src))
    try:
        theirs = _rattler_view(path)
    except Exception as exc:  # rattler refuses it (a git commit as a sha256)
        with pytest.raises(ManifestError, match="not a valid pixi.lock version 3 "):
            _envlock_view(path)
        assert "digest" in str(exc)
        return
    assert theirs, "rattler reads no platform"
    assert _envlock_view(path) == theirs


def test_rattlers_pip_alias_and_conda_lock_categories(tmp_path: Path) -> None:
    src = next(p for p in CONDA_LOCKS if "pip-deps" in p.name)
    doc = _as_v3(src, pip_name="pip")
    assert any(p["manager"] == "pip" for p in doc["package"])
    path = _write(tmp_path, doc)
    ours = _envlock_view(path)
    assert ours == _rattler_view(path)
    assert any(m == "pip" for pkgs in ours.values() for m, *_ in pkgs)
    # conda-lock's categories do not select anything in this shape: every entry is installed
    cats = _write(tmp_path, _as_v3(next(p for p in CONDA_LOCKS if "multiple-categories" in p.name)),
                  "cats.lock")
    assert _envlock_view(cats) == _rattler_view(cats)


@pytest.mark.parametrize(("change", "fault"), [
    (lambda p: p.pop("hash"), "needs an md5 or sha256 hash"),
    (lambda p: p.update(platform="linux-65"), "is not a conda platform"),
    (lambda p: p.update(manager="npm"), "manager must be conda, pypi or pip"),
    (lambda p: p.pop("url"), "url missing"),
    (lambda p: p.update(manager="pypi", version="not a version"), "is not a PEP 440 version"),
    (lambda p: p.update(hash={"md5": "d7c8"}), "hash.md5 is not a 32-digit hex digest"),
    (lambda p: p.update(manager="pypi", requires_dist=["six ~~ 1"]), "is not PEP 508"),
    (lambda p: p.update(manager="pypi", requires_dist={"six": "*"}), "is not PEP 508"),
])
def test_a_file_rattler_refuses_is_one_error_with_its_fault(tmp_path: Path, change: Any,
                                                            fault: str) -> None:
    from envlock.cli import cli

    doc = _as_v3(CONDA_LOCKS[0])
    change(doc["package"][0])
    path = _write(tmp_path, doc)
    with pytest.raises(Exception):  # noqa: B017 - rattler's own error type is internal
        rattler.LockFile.from_path(path)
    with pytest.raises(ManifestError, match=fault):
        read(path)
    res = CliRunner().invoke(cli, ["show", str(path)])
    assert res.exit_code == 2
    assert res.output.startswith("Error: ") and fault in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_show_diff_and_restore_plan(tmp_path: Path) -> None:
    from envlock.cli import cli

    src = next(p for p in CONDA_LOCKS if p.name.startswith("test-lockfile"))
    path = _write(tmp_path, _as_v3(src))
    runner = CliRunner()
    shown = runner.invoke(cli, ["show", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "kind: pixi.lock" in shown.output
    linux = _rattler_view(path)["linux-64"]
    conda = sum(1 for x in linux if x[0] == "conda")
    assert f"platform linux-64: {conda} conda, {len(linux) - conda} pip" in shown.output
    same = runner.invoke(cli, ["diff", str(path), str(path)])
    assert same.exit_code == 0, same.output
    assert "Differences (0)" in same.output
    plan = runner.invoke(cli, ["restore", str(path)])
    assert plan.exit_code == 0, plan.output
    assert f"{conda} package(s) of pixi.lock environment 'default' for linux-64" in plan.output
    assert not list(tmp_path.glob("*restored*"))  # a dry run writes nothing


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_are_conda_locks_unless_rattlers_pypi_manager(tmp_path: Path,
                                                                     version: int) -> None:
    src = next(p for p in CONDA_LOCKS if "pip-deps" in p.name)
    path = _write(tmp_path, _as_v3(src, version=version))  # ``manager: pypi``: rattler's only
    assert _envlock_view(path) == _rattler_view(path)
    plain = _write(tmp_path, yaml.safe_load(src.read_text()), "conda-lock.yml")
    assert read(plain).kind == "conda-lock"  # conda-lock's own version 1: conda-lock's reading
