"""Ranking defects of issue 25, each a test of its kind: a branch name is context, not a cause
(after a correct restore the clone is on a detached HEAD of the same commit); a Python minor move
ranks with the numerical packages, not at #29."""

from __future__ import annotations

from envlock.diff import diff
from envlock.diff.engine import PairDiff

from .conftest import CONDA_PACKAGES, build_manifest, replace


def _pair(write, a, b) -> PairDiff:
    res = diff([str(write("a.toml", a)), str(write("b.toml", b))])
    assert isinstance(res, PairDiff)
    return res


def _with(m: dict, table: str, **values: object) -> dict:
    return {**m, table: {**m[table], **values}}


def test_a_branch_name_alone_is_no_explanation(write) -> None:
    a = build_manifest(host="ws01")
    # the restored clone: the same commit on a detached HEAD (no branch)
    b = _with(a, "git", branch=None)
    del b["git"]["branch"]
    res = _pair(write, a, b)
    assert [c.key for c in res.changes] == ["repository.branch"]
    assert res.explanations == ()
    # with another commit, the commit is the explanation and the branch is not named as a cause
    res = _pair(write, a, _with(a, "git", branch="dev", commit="8" * 40))
    assert [e.id for e in res.explanations] == ["code"]
    assert "branch" not in res.explanations[0].title


def test_a_python_minor_move_ranks_with_the_numerical_packages(write) -> None:
    many = replace(CONDA_PACKAGES, pandas=("2.2.2", "py311h320fe9a_0"),
                   sympy=("1.13", "pypyh9d50eac_103"), filelock=("3.15.1", "pyhd8ed1ab_0"),
                   openssl=("3.3.0", "hd590300_1"))
    a = _with(build_manifest(host="a"), "python", version="3.10.14")
    b = _with(build_manifest(host="b", conda=many), "python", version="3.12.1")
    res = _pair(write, a, b)
    ids = [e.id for e in res.explanations]
    first = ids.index("python-version:python:version")
    assert first < 3, ids
    ex = res.explanations[first]
    assert ex.title.startswith("python version 3.10.14 → 3.12.1") and ex.cls == "numerical-core"
    # a patch move in one minor stays with the interpreter, below the packages
    res = _pair(write, a, _with(b, "python", version="3.10.15"))
    py = next(e for e in res.explanations if "python" in e.id)
    assert py.cls == "interpreter"
    below = res.explanations[res.explanations.index(py) + 1:]
    assert {e.cls for e in below} <= {"other", "plumbing"}, [e.id for e in below]
