"""Diff's results are values: frozen dataclasses whose sequences are tuples (issue 27).

The engine's accumulators (``ManyTally``, ``InputFacts``, ``_Filter``) and the inputs' facts
while they are read (``FactSet``, filled in place by the readers) are not results and stay
mutable; every type a caller of :func:`envlock.diff.diff` gets back is frozen.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from envlock.diff import diff
from envlock.diff.engine import ManyDiff, PairDiff
from envlock.diff.results import Change, Explanation

from .conftest import build_manifest, gpu_table
from .test_many import write_cluster

RESULTS = (Change, Explanation, PairDiff, ManyDiff)


@pytest.mark.parametrize("cls", RESULTS, ids=lambda c: c.__name__)
def test_result_types_are_frozen_with_tuples(cls: type) -> None:
    params = cls.__dataclass_params__
    assert params.frozen, f"{cls.__name__} is not frozen"
    hints = typing.get_type_hints(cls)
    lists = [f.name for f in dataclasses.fields(cls) if typing.get_origin(hints[f.name]) is list]
    assert not lists, f"{cls.__name__}: list fields {lists} (use tuples)"


def test_a_real_pair_result_cannot_be_changed(write, tmp_path: Path) -> None:
    a = write("a.toml", build_manifest(host="a", stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0",
                                                                 driver="550.54.14")))
    b = write("b.toml", build_manifest(host="b", stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0",
                                                                 driver="535.104.05")))
    result = diff([a, b])
    assert isinstance(result, PairDiff) and result.differ
    ex = result.explanations[0]
    assert isinstance(result.changes, tuple) and isinstance(ex.changes, tuple)
    assert ex.causes and set(ex.causes) <= set(ex.changes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ex.score = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.changes[0].size = "major"  # type: ignore[misc]


def test_a_real_many_result_is_tuples(write, tmp_path: Path) -> None:
    write_cluster(write, tmp_path / "run", n=5, odd=3)
    result = diff([tmp_path / "run"])
    assert isinstance(result, ManyDiff)
    assert isinstance(result.inputs, tuple) and len(result.inputs) == 5
    assert isinstance(result.deviants, tuple) and [d.b.label for d in result.deviants] == ["node03"]
    assert isinstance(result.varying, tuple) and isinstance(result.spread, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.deviants = ()  # type: ignore[misc]
