"""Delta debugging over groups of changes (Zeller and Hildebrandt, "Simplifying and Isolating
Failure-Inducing Input", IEEE TSE 28(2), 2002: the *ddmin* algorithm).

``test(subset)`` applies a subset of the changes to GOOD and answers :data:`FAIL` (the result
moved as in BAD), :data:`PASS` (as in GOOD) or :data:`UNRESOLVED` (could not be built or
judged; ``git bisect skip``).  :func:`ddmin` returns a 1-minimal failing subset: it fails, and
removing any one of its groups makes it pass or unresolved.

Before the general algorithm, an optimistic bisection runs: it halves the candidates, keeps the
first half when it fails and otherwise goes on with the second half *without testing it*
(for one culprit that is the answer: one test per halving, so ``about log2(groups)`` tests); a
lone group reached that way is tested by itself, and if it does not fail (the cause is a
combination) ddmin proper continues from the last subset seen failing, every test already made
reused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["ddmin", "PASS", "FAIL", "UNRESOLVED"]

PASS = "pass"
FAIL = "fail"
UNRESOLVED = "unresolved"

T = TypeVar("T")


def _split(items: Sequence[T], n: int) -> list[list[T]]:
    out, start = [], 0
    for i in range(n):
        end = start + (len(items) - start) // (n - i)
        out.append(list(items[start:end]))
        start = end
    return [s for s in out if s]


def ddmin(items: Sequence[T], test: Callable[[Sequence[T]], str],
          ahead: Callable[[list[list[T]]], None] | None = None) -> list[T]:
    """A 1-minimal subset of ``items`` for which ``test`` fails.

    :param items: the groups, most likely culprits first (the first half is tried first).
    :param test: the oracle; called at most once per distinct subset is the caller's job
        (memoize), this function may ask the same subset again.
    :param ahead: told, before each test of the optimistic bisection, the subset about to be
        tested and the two that may be tested after it (whichever way it goes), so that the
        caller can prepare them meanwhile (bisect asks the resolver); it changes no answer.
    :returns: the subset, in ``items`` order.  ``test(items)`` is assumed to fail and the empty
        subset to pass (the caller has run BAD and GOOD).
    """
    verified = list(items)
    current = list(items)
    while len(current) > 1:
        half = _split(current, 2)
        if ahead is not None:
            ahead([half[0], *(_split(h, 2)[0] if len(h) > 1 else h for h in half)])
        result = test(half[0])
        if result == FAIL:
            current = verified = half[0]
        elif result == PASS:
            current = half[1]
        else:
            break
    if len(current) == 1 and current != verified and test(current) == FAIL:
        verified = current
    if len(verified) <= 1:
        return verified
    return _ddmin(verified, test)


def _ddmin(c: list[T], test: Callable[[Sequence[T]], str]) -> list[T]:
    n = 2
    while len(c) >= 2:
        subsets = _split(c, n)
        reduced = False
        for s in subsets:
            if test(s) == FAIL:
                c, n, reduced = s, 2, True
                break
        if not reduced and n > 2:  # for n = 2 the complements are the subsets
            for s in subsets:
                complement = [x for x in c if x not in s]
                if test(complement) == FAIL:
                    c, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(c):
                break
            n = min(2 * n, len(c))
    return c
