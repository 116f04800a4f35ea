"""The conda → PyPI name table (:data:`envlock._names.CONDA_TO_PYPI`) against grayskull's
PyPI → conda-forge table, the data its wheel ships (``grayskull/strategy/config.yaml``; the
mapping conda-lock downloads is built from the same feedstock metadata): every entry grayskull
covers agrees with it, and the few it does not cover are the ones the table's comment sources
otherwise."""

from __future__ import annotations

import importlib.resources

import pytest
import yaml
from packaging.utils import canonicalize_name

from envlock._names import CONDA_TO_PYPI

#: entries grayskull's table does not cover, each sourced in envlock/_names.py: conda-forge
#: feedstock outputs that install the PyPI project, and conda's spelling of a PyPI name.
NOT_IN_GRAYSKULL = {"pytorch-cpu", "pytorch-gpu", "py-opencv", "py-xgboost", "tensorflow-base",
                    "ruamel.yaml"}


@pytest.fixture(scope="module")
def grayskull() -> dict[str, set[str]]:
    """conda-forge name → the PyPI names (normalized) grayskull maps to it."""
    pytest.importorskip("grayskull")
    text = importlib.resources.files("grayskull.strategy").joinpath("config.yaml").read_text(
        encoding="utf-8")
    out: dict[str, set[str]] = {}
    for pypi, entry in yaml.safe_load(text).items():
        if isinstance(entry, dict) and entry.get("conda_forge"):
            out.setdefault(entry["conda_forge"], set()).add(canonicalize_name(pypi))
    return out


def test_every_entry_grayskull_covers_agrees_with_it(grayskull: dict[str, set[str]]) -> None:
    covered = {c for c in CONDA_TO_PYPI if c in grayskull}
    assert covered == set(CONDA_TO_PYPI) - NOT_IN_GRAYSKULL
    for conda, pypi in CONDA_TO_PYPI.items():
        if conda in grayskull:
            assert canonicalize_name(pypi) in grayskull[conda], (conda, pypi, grayskull[conda])


def test_the_entries_grayskull_lacks_are_not_contradicted_by_it(
        grayskull: dict[str, set[str]]) -> None:
    """grayskull sends ``torch`` to ``pytorch`` and ``opencv-python`` to ``opencv``; it never
    sends the PyPI project to another conda name that is then read as another project."""
    for conda in NOT_IN_GRAYSKULL:
        assert conda not in grayskull, conda
    assert grayskull["pytorch"] == {"torch"} and "opencv-python" in grayskull["opencv"]


def test_the_table_only_renames() -> None:
    """Every entry is a real rename: no conda name whose PEP 503 form already is the PyPI
    name (but ``ruamel.yaml``, whose conda spelling is not normalized), no PyPI name that is
    not normalized."""
    for conda, pypi in CONDA_TO_PYPI.items():
        assert pypi == canonicalize_name(pypi), pypi
        assert canonicalize_name(conda) != pypi or conda == "ruamel.yaml", conda
