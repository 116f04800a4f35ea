"""The format registry (:data:`envlock._kinds.FORMATS`, issue 27) drives dispatch, the
``--help`` texts and the format table of ``docs/diff.md``; the stack-area registry the lists
that name the stack's tables."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock import _kinds
from envlock._kinds import FORMATS, STACK_AREAS, accepted_by
from envlock.cli import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "diff.md"
_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")


def test_docs_format_table_is_the_registrys() -> None:
    text = DOCS.read_text(encoding="utf-8")
    m = re.search(r"<!-- formats -->\n(.*?)<!-- /formats -->", text, re.S)
    assert m, "docs/diff.md has no <!-- formats --> table"
    if os.environ.get("ENVLOCK_UPDATE_DOCS") == "1":
        DOCS.write_text(text.replace(m.group(1), _kinds.format_table()), encoding="utf-8")
        return
    assert m.group(1) == _kinds.format_table()


@pytest.mark.parametrize(("command", "registry"), [
    (["diff", "--help"], "diff"), (["show", "--help"], "show"),
    (["verify", "--help"], "verify --lock"), (["restore", "--help"], "restore"),
    (["lock", "--help"], "lock -f")])
def test_help_names_exactly_the_formats_the_command_accepts(command: list[str], registry: str) -> None:
    out = " ".join(CliRunner().invoke(cli, command, terminal_width=1000).output.split())
    for f in FORMATS:
        if f.name == "manifest":
            continue
        # the name a user knows the file by, once per format the command takes
        said = re.escape(f.said)
        if f in accepted_by(registry):
            assert re.search(rf"(^|[\s(]){said}([\s,)]|$)", out), (f.said, out)
        elif registry != "lock -f":
            assert not re.search(rf"(^|[\s(]){said}([\s,)]|$)", out), (f.said, out)


def test_every_reader_and_detector_the_registry_names_exists() -> None:
    for f in FORMATS:
        for ref in (f.detect, f.read):
            module, _, name = ref.partition(":")
            fn = getattr(importlib.import_module(f"envlock.formats.{module}"), name)
            assert callable(fn) and fn.__doc__, ref
        assert set(f.commands) <= set(_kinds.COMMANDS)


def test_dispatch_reads_a_case_file_of_every_format_as_its_kind() -> None:
    """One real file of each format read by :func:`envlock.formats.read` is of that kind: the
    registry's detectors and readers are what dispatch uses."""
    from envlock import formats

    examples = {
        "manifest": Path(__file__).resolve().parents[1] / "data" / "manifest.example.toml",
        "environment.yml": CASES / "peers/envyml/test-git__environment.yml",
        "conda-explicit": CASES / "peers/explicit/zlib__conda-linux-64.lock",
        "conda-export": CASES / "foreign/PBarde__moma-ppo__conda_list.txt",
        "requirements": CASES / "foreign/BELIV-ASU__GLANCE__pip_freeze.txt",
        "conda-lock": CASES / "peers/condalock/test-lockfile__conda-lock.yml",
        "pixi.lock": CASES / "peers/pixilock/local-wheel__pixi.lock",
        "pylock": CASES / "peers/pylock/pip__pylock.toml",
        "uv.lock": CASES / "foreign/Comfy-Org__comfy-cli__uv.lock",
        "poetry.lock": CASES / "foreign/EthanMarx__ztf-lfi-demo__poetry.lock",
        "pdm.lock": CASES / "foreign/pdm-project__pdm__pdm.lock",
        "Pipfile.lock": CASES / "peers/other/pipenv-root__Pipfile.lock",
        "Pipfile": CASES / "peers/other/pdm__Pipfile",
    }
    assert set(examples) == {f.name for f in FORMATS}
    for kind, path in examples.items():
        assert formats.read(path).kind == kind, path


def test_stack_areas_are_the_registrys() -> None:
    from envlock.diff.facts import EXTRACTORS
    from envlock.lock import _plan
    from envlock.probes.stack import STACK_AREAS as PROBED
    from envlock.render import showreport as show

    names = [a.name for a in STACK_AREAS]
    assert list(PROBED) == names
    assert all(PROBED[a.name].__name__ == a.record.split(":")[1] for a in STACK_AREAS)
    assert {a.name for a in STACK_AREAS if a.facts} <= set(EXTRACTORS)
    assert {a.name for a in STACK_AREAS if a.shown} <= show._SHOWN
    assert {a.name for a in STACK_AREAS if a.restored != "build"} <= _plan._COVERED
    assert "build" not in show._SHOWN and "build" not in _plan._COVERED
