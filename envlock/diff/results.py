"""What a comparison produces: a differing fact (:class:`Change`) and a ranked likely cause
(:class:`Explanation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "Explanation"]


@dataclass(frozen=True)
class Change:
    """One fact whose value differs.

    :ivar values: ``(a, b)``; ``None`` where the input lacks the fact.
    :ivar size: :func:`envlock.diff.impact.change_size` of it.
    :ivar component, cls: what the impact model says it is.
    :ivar majority_count: in a many-input diff, how many inputs have value ``a``.
    :ivar generic: the fact comes from a table without an extractor (flattened generically).
    """

    area: str
    key: str
    values: tuple[Any, Any]
    size: str
    component: str
    cls: str
    majority_count: int | None = None
    generic: bool = False


@dataclass(frozen=True)
class Explanation:
    """A ranked likely cause: a title, why it matters, what to do, and the facts it accounts
    for.

    :ivar changes: every differing fact it accounts for (causes first or in table order).
    :ivar causes: those of ``changes`` that are the cause; the others are its consequences
        (the ``[[edge]]`` entries of the impact model), never explanations of their own.
    """

    id: str
    title: str
    cls: str
    score: int
    why: str
    do: str
    changes: tuple[Change, ...] = ()
    causes: tuple[Change, ...] = ()
