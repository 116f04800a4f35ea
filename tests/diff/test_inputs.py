"""Manifests with wrong value types, and inputs with nothing in common, are errors (exit 2).

``show``/``restore`` check every value through the manifest model; diff checks the values it
reads (:mod:`envlock.diff.typecheck`) with the same wording, so garbage is never compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import NothingToCompareError, diff
from envlock.diff.typecheck import shapes
from envlock.manifest import Manifest

from .conftest import build_manifest, editable, gpu_table

BAD = [
    ("pip-ints", lambda d: d["pip"].__setitem__("packages", [1, 2, 3]),
     "expected a table, got int in 'pip.packages[0]'"),
    ("cores-str", lambda d: d["cpu"].__setitem__("logical-cores", "two"),
     "expected int, got str in 'cpu.logical-cores'"),
    ("conda-version-int", lambda d: d["conda"]["packages"][3].__setitem__("version", 12),
     "expected str, got int in 'conda.packages[3].version'"),
    ("env-var-int", lambda d: d["env"]["vars"].__setitem__("OMP_NUM_THREADS", 1),
     "expected str, got int in 'env.vars.OMP_NUM_THREADS'"),
    ("flags-str", lambda d: d["cpu"].__setitem__("flags", "avx2 fma"),
     "expected an array, got str in 'cpu.flags'"),
    ("cpu-array", lambda d: d.__setitem__("cpu", [1]), "expected a table, got list in 'cpu'"),
    ("git-untracked", lambda d: d["git"].__setitem__("untracked", "3"),
     "expected int, got str in 'git.untracked'"),
    ("editable-git", lambda d: d["pip"]["packages"][-1]["git"].__setitem__("dirty", "yes"),
     "expected bool, got str in 'pip.packages[10].git.dirty'"),
    ("gpu-cc", lambda d: d["gpu"]["gpus"][0].__setitem__("compute-capability", 8.6),
     "expected str, got float in 'gpu.gpus[0].compute-capability'"),
]


def _good() -> dict[str, Any]:
    return build_manifest(extra_pip=[editable("zlib-tools", "/home/ana/src/zt",
                                              commit="1" * 40, dirty=False, untracked=0)],
                          stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0"))


@pytest.mark.parametrize(("mutate", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_wrong_type_is_one_line(write, mutate, message: str) -> None:
    data = _good()
    assert data["pip"]["packages"][-1]["name"] == "zlib-tools"
    mutate(data)
    good, bad = write("good.toml", _good()), write("bad.toml", data)
    res = CliRunner().invoke(cli, ["diff", str(good), str(bad)])
    assert res.exit_code == 2
    assert res.output == f"Error: {bad}: {message}\n"
    # the same words as the model that `envlock show` uses
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("]", r"\]")):
        Manifest.from_dict(data)


def test_shapes_are_the_models() -> None:
    """diff checks the types the model declares: every table of the model, its keys in
    kebab-case, arrays of sub-tables (no second description of the schema)."""
    from dataclasses import fields

    tables = {f.name for f in fields(Manifest) if f.name != "extra"}
    got = shapes()
    assert set(got) == tables
    assert got["cpu"]["logical-cores"] is int
    assert got["python"]["status"] is str  # a Literal of strings
    assert got["env"]["vars"] == "str-map"
    assert got["pip"]["packages"][0]["version"] is str
    assert got["libraries"]["resolved"][0]["owner-kind"] is str


def _header_only(write, name: str) -> Path:
    path = write(name, {"envlock": {"schema": 1}})
    return path


def test_header_only_manifests_are_not_identical(write) -> None:
    a, b = _header_only(write, "a.toml"), _header_only(write, "b.toml")
    res = CliRunner().invoke(cli, ["diff", str(a), str(b)])
    assert res.exit_code == 2
    assert res.output == ("Error: nothing to compare: a.toml, b.toml have no fact in common "
                          "(no table envlock diff reads)\n")


def test_header_only_against_a_real_manifest(write) -> None:
    a, b = _header_only(write, "a.toml"), write("b.toml", build_manifest())
    with pytest.raises(NothingToCompareError, match=r"^nothing to compare: a\.toml, b\.toml "
                       r"have no fact in common \(not compared: code: a\.toml lacks it; "):
        diff([a, b])


def test_everything_ignored_is_nothing_to_compare(write) -> None:
    a, b = write("a.toml", build_manifest()), write("b.toml", build_manifest())
    assert diff([a, b]).differ is False
    res = CliRunner().invoke(cli, ["diff", str(a), str(b), "--ignore", "*"])
    assert res.exit_code == 2
    assert "have no fact in common after --only/--ignore" in res.output


def test_three_header_only_manifests(write) -> None:
    paths = [_header_only(write, f"n{i}.toml") for i in range(3)]
    with pytest.raises(NothingToCompareError):
        diff(paths)


@pytest.mark.parametrize("version", ["1" * 5000, "2." + "1" * 5000 + ".0", "1!" + "9" * 4400])
def test_a_version_past_ints_digit_limit_is_compared_not_a_traceback(write, tmp_path, version) -> None:
    """Python refuses int() of more than 4,300 digits (ValueError, not packaging's
    InvalidVersion): such a version is a different version, never a crash."""
    a = build_manifest()
    b = build_manifest()
    pkg = next(p for p in b["pip"]["packages"] if p["name"] == "numpy")
    pkg["version"] = version
    req = tmp_path / "requirements.txt"
    req.write_text(f"numpy=={version}\nnumpy>=1.{'9' * 5000}\n"[: 20000])
    for pair in ([write("a.toml", a), write("b.toml", b)], [write("a.toml", a), req]):
        res = CliRunner().invoke(cli, ["diff", *map(str, pair)])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert res.exit_code in (0, 1), res.output
        assert "Traceback" not in res.output


def _wrong(shape: Any) -> Any:
    """A value of another type than ``shape`` accepts (int for a str, a str for the rest)."""
    return 7 if shape is str else "seven"


def _leaves(data: dict[str, Any]) -> list[tuple[str, list[Any], Any]]:
    """(key path, path through the dict, shape) of every scalar key the shapes list, in the
    tables ``data`` holds and the first element of each array of tables it holds."""
    out: list[tuple[str, list[Any], Any]] = []

    def walk(spec: dict[str, Any], where: str, steps: list[Any], body: Any) -> None:
        for key, sub in spec.items():
            if type(sub) is type:
                out.append((f"{where}.{key}", [*steps, key], sub))
            elif type(sub) is list and type(sub[0]) is dict and body.get(key):
                walk(sub[0], f"{where}.{key}[0]", [*steps, key, 0], body[key][0])

    for table, spec in shapes().items():
        if isinstance(data.get(table), dict):
            walk(spec, table, [table], data[table])
    return out


def test_fast_check_words_every_wrong_type_as_the_model() -> None:
    """The fast predicate of :func:`envlock.diff.typecheck.check` lets no wrong type through: every
    scalar key of every table a real-looking manifest holds, given a value of another type,
    is refused with the model's own words (``Manifest.from_dict``, the oracle)."""
    from envlock.diff.typecheck import check
    from envlock.errors import ManifestError

    leaves = _leaves(_good())
    assert len(leaves) > 90
    for where, steps, shape in leaves:
        data = _good()
        node = data
        for s in steps[:-1]:
            node = node[s]
        node[steps[-1]] = value = _wrong(shape)
        want = f"expected {shape.__name__}, got {type(value).__name__} in '{where}'"
        with pytest.raises(ManifestError) as got:
            check(data, "m.toml")
        assert str(got.value) == f"m.toml: {want}", where
        if where.startswith("envlock."):
            continue  # the model reads the header through its schema check, in other words
        with pytest.raises(ManifestError, match=want.replace("[", r"\[").replace("]", r"\]")):
            Manifest.from_dict(data)
    check(_good(), "m.toml")  # and the good one passes
