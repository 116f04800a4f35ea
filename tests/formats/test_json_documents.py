"""A lockfile or spec written as JSON is read as its own tool reads it (issue 23): conda-lock,
rattler and conda parse YAML, and a JSON text is YAML, so a ``conda-lock.yml`` re-serialised as
JSON is still a conda-lock file (``conda_lock.lockfile.parse_conda_lock_file`` is the oracle),
never the ``uv.lock`` its ``version`` + ``package`` keys would otherwise suggest; uv, poetry,
pdm and ``packaging.pylock`` parse TOML, which no JSON text is (``tomllib`` is the oracle)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from packaging.utils import canonicalize_name

from envlock import formats
from envlock.cli import cli
from envlock.errors import ManifestError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases" / "peers"
PEERS = _HERE if _HERE.is_dir() else Path("/work/shared/cases/peers")
FOREIGN = Path(__file__).resolve().parent / "foreign"
CONDA_LOCKS = sorted([*(PEERS / "condalock").glob("*.yml"),
                      *(PEERS / "rattlerlock").glob("v0__*conda-lock.yml"),
                      *FOREIGN.glob("*conda-lock.yml")])
PIXI_LOCKS = sorted([*(PEERS / "pixilock").glob("*pixi.lock"), *FOREIGN.glob("*pixi.lock")])
ENV_FILES = sorted([*(PEERS / "envyml").glob("*environment.y*ml"),
                    *FOREIGN.glob("*environment.y*ml")])

pytestmark = pytest.mark.skipif(not CONDA_LOCKS, reason="the peers cases are not here")


def _as_json(src: Path, dst: Path) -> Path:
    """``src`` (YAML) written as the JSON of the document PyYAML reads from it."""
    doc = yaml.safe_load(src.read_text(encoding="utf-8"))
    dst.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    return dst


def _conda_lock_view(path: Path) -> set[tuple[Any, ...]]:
    """conda-lock's own reading: (manager, name, version, platform, md5, sha256, categories)."""
    from conda_lock.lockfile import parse_conda_lock_file

    return {(d.manager, d.name if d.manager == "conda" else canonicalize_name(d.name), d.version,
             d.platform, d.hash.md5, d.hash.sha256, frozenset(d.categories))
            for d in parse_conda_lock_file(path).package}


def _envlock_view(path: Path) -> set[tuple[Any, ...]]:
    lock = formats.read_lock(path)
    return {(x.manager, x.name, x.version, x.platform, x.md5, x.sha256,
             frozenset("main" if g == "" else g.removeprefix("extra:") for g, _ in x.groups))
            for x in lock.packages}


@pytest.mark.parametrize("src", CONDA_LOCKS, ids=lambda p: p.name)
def test_a_conda_lock_file_as_json_reads_as_conda_lock_reads_it(src: Path, tmp_path: Path) -> None:
    for name in ("conda-lock.yml", "lock.json", "anything"):
        path = _as_json(src, tmp_path / name)
        assert formats.read(path).kind == "conda-lock", name
        oracle = _conda_lock_view(path)
        assert oracle == _conda_lock_view(src)  # the JSON text is the same lock for conda-lock
        assert _envlock_view(path) == oracle
    assert _envlock_view(src) == _conda_lock_view(src)  # and the YAML original


@pytest.mark.parametrize("src", PIXI_LOCKS, ids=lambda p: p.name)
def test_a_pixi_lock_as_json_reads_as_rattler_reads_it(src: Path, tmp_path: Path) -> None:
    import rattler

    path = _as_json(src, tmp_path / "pixi.lock")
    ours, orig = formats.read(path), formats.read(src)
    assert ours.kind == "pixi.lock"
    assert ours.lock.packages == orig.lock.packages
    got = {(n, p.name): sorted(str(q.location) for q in env.packages(p))
           for n, env in rattler.LockFile.from_path(path).environments() for p in env.platforms()}
    want = {(n, p.name): sorted(str(q.location) for q in env.packages(p))
            for n, env in rattler.LockFile.from_path(src).environments() for p in env.platforms()}
    assert got == want  # rattler, too, reads the JSON text as the same lock


@pytest.mark.parametrize("src", ENV_FILES[:4], ids=lambda p: p.name)
def test_an_environment_file_as_json_is_an_environment_file(src: Path, tmp_path: Path) -> None:
    path = _as_json(src, tmp_path / "environment.json")
    ours = formats.read(path)
    assert ours.kind == "environment.yml"
    assert ours.data == formats.read(src).data


def test_a_pipfile_lock_and_a_json_manifest_keep_their_kinds(tmp_path: Path) -> None:
    lock = PEERS / "other" / "pipenv-root__Pipfile.lock"
    assert formats.read(lock).kind == "Pipfile.lock"
    copy = tmp_path / "lock.json"
    copy.write_text(lock.read_text(encoding="utf-8"), encoding="utf-8")
    assert formats.read(copy).kind == "Pipfile.lock"


@pytest.mark.parametrize("name", ["uv.lock", "pylock.toml", "poetry.lock", "pdm.lock"])
def test_a_toml_lock_written_as_json_is_malformed_toml_as_its_tool_says(name: str,
                                                                        tmp_path: Path) -> None:
    src = {"uv.lock": PEERS / "uvlock", "pylock.toml": PEERS / "pylock",
           "poetry.lock": PEERS / "poetrylock", "pdm.lock": PEERS / "pdmlock"}[name]
    original = next(p for p in sorted(src.glob("*")) if "invalid" not in p.name
                    and "incompatible" not in p.name)
    path = tmp_path / name
    path.write_text(json.dumps(tomllib.loads(original.read_text(encoding="utf-8")), default=str),
                    encoding="utf-8")
    with pytest.raises(tomllib.TOMLDecodeError):  # the oracle: the parser those tools use
        tomllib.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(ManifestError, match="malformed TOML"):
        formats.read(path)
    res = CliRunner().invoke(cli, ["show", str(path)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "malformed TOML" in lines[0]


@pytest.mark.parametrize("kind", ["uv.lock", "pylock", "poetry.lock", "pdm.lock"])
def test_a_toml_lock_as_json_under_another_name_is_said_so(kind: str, tmp_path: Path) -> None:
    """No tool reads it (each parses TOML); the error says what it is, not "a pixi.lock of
    no version" (a pylock has ``environments`` and ``packages`` too)."""
    src = {"uv.lock": PEERS / "uvlock" / "ecosystem__flask__uv.lock",
           "pylock": PEERS / "pylock" / "pdm-demo__pylock.toml",
           "poetry.lock": PEERS / "poetrylock" / "old_lock__poetry.lock",
           "pdm.lock": PEERS / "pdmlock" / "demo__pdm.lock"}[kind]
    path = tmp_path / "lock.json"
    doc = tomllib.loads(src.read_text(encoding="utf-8"))
    path.write_text(json.dumps(doc, default=str), encoding="utf-8")
    with pytest.raises(ManifestError, match=f"a {re.escape(kind)} written as JSON"):
        formats.read(path)


def test_malformed_json_gets_the_fault_of_the_parser_its_name_calls_for(tmp_path: Path) -> None:
    bad = '{"version": 1, "package": [}'
    for name, fault in (("lock.json", "malformed JSON"), ("conda-lock.yml", "malformed YAML"),
                        ("x", "malformed JSON")):
        path = tmp_path / name
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(ManifestError, match=fault):
            formats.read(path)
    # a YAML flow mapping that is not JSON is still YAML, as conda reads it
    flow = tmp_path / "environment.yml"
    flow.write_text("{dependencies: [numpy=1.26, python=3.11]}\n", encoding="utf-8")
    assert formats.read(flow).kind == "environment.yml"


def test_a_conda_lock_file_conda_lock_refuses_is_refused(tmp_path: Path) -> None:
    """rattler's forward-compatible fixture (``version: 1000``): conda-lock's parser refuses
    it, as YAML and as JSON; so does envlock, naming the version."""
    from conda_lock.lockfile import parse_conda_lock_file

    src = PEERS / "rattlerlock" / "conda-lock__forward-compatible-lock.yml"
    for path in (src, _as_json(src, tmp_path / "conda-lock.yml")):
        with pytest.raises(Exception):  # noqa: B017 - any refusal of the oracle
            parse_conda_lock_file(path)
        with pytest.raises(ManifestError, match="unknown version 1000"):
            formats.read(path)
