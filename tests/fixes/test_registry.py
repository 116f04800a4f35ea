"""The registry of fix kinds (tests/fixes/kinds.toml) is complete and true (issue 25): every
kind of explanation and finding in the source is listed with how its fix is checked, every
``run``/``parsed`` entry names a test that exists, and the ``pending`` ones are counted."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from envlock.diff.impact import _shipped

HERE = Path(__file__).resolve().parent
PKG = HERE.parents[1] / "envlock"
REGISTRY = tomllib.loads((HERE / "kinds.toml").read_text(encoding="utf-8"))["kinds"]
HOWS = {"run", "parsed", "choice", "code", "advice", "pending"}

#: kinds whose fix text comes from a generator, not one table entry of the source
GENERATED = {"diff.package-one-side"}


def _source_kinds() -> set[str]:
    data = _shipped()
    out = {f"diff.{rid}" for rid, body in data["rules"].items() if body.get("do")}
    out |= {f"diff.{c['id']}" for c in data["component"] if c.get("do")}
    for path in PKG.rglob("*.py"):
        room = path.relative_to(PKG).parts[0]
        if room not in ("verify", "libs", "runs"):
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r'\bid=("[a-z][a-z0-9_.-]*"(?: if [^,\n]+? else '
                             r'"[a-z][a-z0-9_.-]*")?)', text):
            for name in re.findall(r'"([^"]+)"', m.group(1)):
                out.add(f"libs.{name}" if room == "libs" else name)
    return out


def test_every_kind_is_registered() -> None:
    source = _source_kinds() | GENERATED
    assert source - set(REGISTRY) == set(), "kinds without an entry in kinds.toml"
    assert set(REGISTRY) - source == set(), "entries of kinds.toml no source prints"
    assert {e["how"] for e in REGISTRY.values()} <= HOWS


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_named_test_exists() -> None:
    for kind, entry in REGISTRY.items():
        if entry["how"] not in ("run", "parsed"):
            assert "test" not in entry, kind
            continue
        file, _, name = entry["test"].partition("::")
        func, _, param = name.partition("[")
        path = (HERE / file).resolve()
        assert path.is_file(), (kind, file)
        assert func in _functions(path), (kind, func)
        if param:
            assert f'("{param.rstrip("]")}"' in path.read_text(encoding="utf-8"), (kind, param)


def test_the_run_kinds_cover_every_world() -> None:
    """A fix run in bash (export/unset), with pip against local wheels, and git in a checkout."""
    run = {k for k, e in REGISTRY.items() if e["how"] == "run"}
    assert {"diff.threads", "diff.numpy", "diff.code", "isolation.pythonpath",
            "packages.version-mismatch"} <= run
    pending = sorted(k for k, e in REGISTRY.items() if e["how"] == "pending")
    # every kind that prints a command has its execution test (issue 25): none is pending
    assert pending == [], pending
