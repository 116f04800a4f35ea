"""``envlock diff``: explain how environments differ, most likely causes first.

Pipeline: :func:`load_inputs` reads each file (a manifest or a foreign format, see
:mod:`envlock.diff.foreign`) and flattens it into facts (:mod:`envlock.diff.facts`);
:func:`diff` compares two inputs pairwise or three and more through their majority
(:mod:`envlock.diff.engine`) and ranks explanations with the impact model
(:mod:`envlock.diff.impact`, :mod:`envlock.diff.rules`); :mod:`envlock.render.diffreport` writes
text, markdown or JSON.

Example::

    from envlock.diff import diff
    result = diff(["a.toml", "b.toml"])
    for ex in result.explanations[:3]:
        print(ex.title)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envlock.diff.api import (
        diff,
        load_inputs,
        iter_inputs,
        expand_paths,
        PairDiff,
        ManyDiff,
        FactSet,
        NothingToCompareError,
        compare_many,
    )

__all__ = ["diff", "load_inputs", "iter_inputs", "expand_paths", "PairDiff", "ManyDiff",
           "FactSet", "NothingToCompareError", "compare_many"]


def __getattr__(name: str) -> Any:
    """The names of :mod:`envlock.diff.api`, imported on first use (PEP 562); a submodule name
    raises ``AttributeError`` here, so that ``from envlock.diff import foreign`` imports it."""
    if name.startswith("__") or os.path.exists(os.path.join(os.path.dirname(__file__), f"{name}.py")):
        raise AttributeError(name)  # a submodule: the import system loads it
    from envlock.diff import api

    try:
        return getattr(api, name)
    except AttributeError:
        raise AttributeError(f"module 'envlock.diff' has no attribute {name!r}") from None
