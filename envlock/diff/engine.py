"""Compare fact sets: the names of :mod:`envlock.diff.pairwise` (two inputs) and
:mod:`envlock.diff.majority` (three and more, through their majority) in one place.

:func:`compare_pair` lists every differing fact (a :class:`Change`) and ranks the explanations;
:func:`compare_many` builds the majority value of each fact and compares each deviating input
with it.
"""

from __future__ import annotations

from envlock.diff.results import Change, Explanation
from envlock.diff.majority import InputFacts, ManyDiff, ManyTally, Varying, compare_many, unique_labels
from envlock.diff.pairwise import PairDiff, compare_pair

__all__ = ["Change", "Explanation", "PairDiff", "ManyDiff", "Varying", "compare_pair",
           "compare_many", "ManyTally", "InputFacts", "unique_labels"]
