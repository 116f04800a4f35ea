"""Compare two fact sets: every differing fact, ranked explanations, and the counts.

:func:`compare_pair` lists every differing fact (a :class:`Change`), ranks the explanations
(:mod:`envlock.diff.rules` plus the impact model) and counts what is identical, satisfied,
unlisted and what could not be compared (:class:`PairDiff`).  The many-input diff
(:mod:`envlock.diff.majority`) compares each deviating input with the majority through it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Any

from envlock.diff.results import Change, Explanation
from envlock.diff.facts import FactSet, Pkg, areas_of, same
from envlock.diff.impact import KB, Globs, change_size

__all__ = ["PairDiff", "compare_pair"]


@dataclass(frozen=True)
class PairDiff:
    """Result of comparing input ``a`` with ``b`` (``a`` may be a synthetic majority)."""

    a: FactSet
    b: FactSet
    changes: tuple[Change, ...]
    explanations: tuple[Explanation, ...]
    identical: dict[str, int]
    not_compared: tuple[tuple[str, str], ...]
    unlisted: dict[str, int]
    context: tuple[str, ...] = ()
    #: per area, a spec's constraints the other side satisfies (``torch >=2.0`` against a
    #: lock's 2.3.1): equal in what the spec says, so not differences, but not "identical".
    satisfied: dict[str, int] = field(default_factory=dict)
    #: keys of the facts not compared because an input does not record the version (a pip
    #: freeze's ``name @ file:///…/work`` of a conda build): neither equal nor different.
    unknown: tuple[str, ...] = ()

    @property
    def differ(self) -> bool:
        """Whether any compared fact differs."""
        return bool(self.changes)


class _Filter:
    """``--only`` areas and ``--ignore`` globs (over ``area:key`` or ``key``), compiled once.

    A glob ``X:rest`` whose ``X`` has no wildcard can match ``area:key`` only when ``area`` is
    ``X`` (or holds a ``:``), and a bare ``key`` only when it holds a ``:``; so each area is matched
    against its own globs and the unprefixed ones (a 10,000-package diff matches no package
    key against the 36 ``slurm:``/``env:`` noise globs), with fnmatch's answer unchanged."""

    def __init__(self, only: Sequence[str], ignore: Sequence[str]) -> None:
        self.only = frozenset(only)
        self.globs = Globs(ignore) if ignore else None
        self._by_area: dict[str, list[str]] = {}
        self._open: list[str] = []  # globs with a wildcard before their first ':', or none
        for pattern in ignore:
            head, colon, _ = pattern.partition(":")
            if colon and not any(ch in head for ch in "*?["):
                self._by_area.setdefault(head, []).append(pattern)
            else:
                self._open.append(pattern)
        self._bare = Globs(self._open) if self._open else None
        self._area_globs: dict[str, Globs | None] = {}

    def _for(self, area: str) -> Globs | None:
        try:
            return self._area_globs[area]
        except KeyError:
            if ":" in area:  # "env:x:torch" may match a glob of area "env": all of them
                self._area_globs[area] = self.globs
                return self.globs
            mine = [*self._by_area.get(area, ()), *self._open]
            g = self._area_globs[area] = Globs(mine) if mine else None
            return g

    def keep(self, area: str, key: str) -> bool:
        """Whether the fact ``area:key`` is compared (in ``only``, matched by no glob)."""
        if self.only and area not in self.only:
            return False
        if self.globs is None:
            return True
        g = self._for(area)
        if g is not None and g.match(f"{area}:{key}"):
            return False
        if ":" in key:
            return not self.globs.match(key)
        return self._bare is None or not self._bare.match(key)

    def keeps_all(self, area: str) -> bool:
        """Whether :meth:`keep` keeps every key of ``area`` that has no ``:`` (no glob can
        match one)."""
        if self.only and area not in self.only:
            return False
        return self.globs is None or (self._for(area) is None and self._bare is None)


def _reason(fs: FactSet, area: str) -> str:
    why = fs.areas.get(area)
    if why is None:
        return f"{fs.label} lacks it"
    return f"{fs.label}: {why}"


def _manager(value: Any) -> str | None:
    return getattr(value, "manager", None)


def _unlisted(fs: FactSet, other: Any) -> bool:
    """Whether ``fs`` is silent about the package ``other`` holds: a spec lists only some
    packages; an explicit list (listing ``"conda"``) never lists pip packages, a ``pip freeze``
    (listing ``"pip"``) never lists conda packages that are not Python distributions
    (``cuda-cudart``, ``libgcc``)."""
    if fs.listing == "partial":
        return True
    manager = getattr(other, "manager", None)
    if fs.listing == "conda":  # an explicit list never lists pip packages
        return manager == "pip"
    # A pip freeze lists Python distributions, conda's among them, never the other conda
    # packages: those whose build string has no ``py`` (conda-forge's and Anaconda's builds of
    # Python packages are ``py311h…``, ``pyhd8ed1ab_0``, ``py_0``; ``cuda-cudart`` is ``0``).
    build = getattr(other, "build", None)
    return (fs.listing == "pip" and manager == "conda" and isinstance(build, str) and bool(build)
            and "py" not in build.lower())


def compare_pair(a: FactSet, b: FactSet, kb: KB, *, only: Sequence[str] = (),
                 ignore: Sequence[str] = (), counts: dict[tuple[str, str], int] | None = None,
                 skip: frozenset[tuple[str, str]] = frozenset()) -> PairDiff:
    """Compare two fact sets.

    :param only: compare these areas only (empty: all).
    :param ignore: fnmatch patterns over ``area:key`` or ``key`` to leave out.
    :param counts: for a majority comparison, how many inputs hold ``a``'s value of each fact.
    :param skip: facts not to compare (in a majority comparison: those without a majority).
    :returns: the changes (ordered by area, then key), ranked explanations and counts.
    """
    from envlock.diff import rules

    areas = areas_of([a, b])
    compared = {x for x in areas if a.areas.get(x) == "" and b.areas.get(x) == ""}
    not_compared = [(x, _reason(a, x) if a.areas.get(x) != "" and not (
        a.areas.get(x) is None and b.areas.get(x)) else _reason(b, x))
                    for x in areas if x not in compared and (not only or x in only)]
    identical: Counter[str] = Counter()
    satisfied: Counter[str] = Counter()
    unlisted: Counter[str] = Counter()
    unknown: list[str] = []
    changes: list[Change] = []
    fa, fb = a.facts, b.facts
    filt = _Filter(only, ignore)
    keep = filt.keep
    explicit = a.listing == "conda" or b.listing == "conda"
    keys: Any = fa.keys() | fb.keys()
    if not explicit and not skip:
        plain = _plainly_identical(fa, fb, {x for x in compared if filt.keeps_all(x)})
        identical.update(map(itemgetter(0), plain))
        keys -= set(plain)
    for key in keys:
        area = key[0]
        if area not in compared or key in skip or not keep(area, key[1]):
            continue
        va, vb = fa.get(key), fb.get(key)
        if explicit and area == "package" and (
                (a.listing == "conda" and _manager(vb) == "pip")
                or (b.listing == "conda" and _manager(va) == "pip")):
            unlisted[area] += 1  # an explicit list says nothing about pip packages
            continue
        if va is not None and va == vb and not (isinstance(va, Pkg) and va.version == "unknown"):
            identical[area] += 1  # equal values are same(); "unknown" never is (Pkg.same)
            continue
        if va is not None and vb is not None and same(va, vb):
            if (getattr(va, "constraint", None) is None) != (getattr(vb, "constraint", None) is None):
                satisfied[area] += 1
            else:
                identical[area] += 1
            continue
        if area == "package" and ((va is None and _unlisted(a, vb))
                                  or (vb is None and _unlisted(b, va))):
            unlisted[area] += 1
            continue
        if va is not None and vb is not None and "unknown" in (
                getattr(va, "version", None), getattr(vb, "version", None)):
            unknown.append(key[1])  # cannot be told: not shown equal, not a difference
            continue
        comp = kb.component(*key)
        size = change_size(va, vb)
        if comp.id == "python-version" and size not in ("major", "minor") and _same_minor(va, vb):
            comp = kb.component("package", "python")  # 3.11.8 → 3.11.9: the interpreter's rank
        changes.append(Change(area, key[1], (va, vb), size, comp.id, comp.cls,
                              counts.get(key) if counts else None,
                              area in a.generic or area in b.generic))
    order = {x: i for i, x in enumerate(areas)}
    changes.sort(key=lambda c: (order.get(c.area, 99), c.key))
    explanations, notes = rules.explain_noted(a, b, changes, kb)
    return PairDiff(a, b, tuple(changes), tuple(explanations), dict(identical),
                    tuple(not_compared), dict(unlisted),
                    tuple((rules.context([a, b]) if counts is None else []) + notes),
                    dict(satisfied), tuple(sorted(unknown)))



def _plainly_identical(fa: dict[tuple[str, str], Any], fb: dict[tuple[str, str], Any],
                       areas: set[str]) -> list[tuple[str, str]]:
    """The facts :func:`compare_pair`'s loop would count identical at its first test, found in
    one pass: equal values (not ``None``, not a package of version ``"unknown"``) in an area
    compared whose keys no glob can filter (the key has no ``:``).  A 10,000-package diff
    then walks only the facts that differ."""
    get = fa.get
    return [k for k, v in fb.items() if k[0] in areas and get(k) == v and v is not None
            and ":" not in k[1] and not (isinstance(v, Pkg) and v.version == "unknown")]


def _same_minor(va: Any, vb: Any) -> bool:
    """Whether two Python versions (or a version and a spec's ``3.11.9.*``) share major.minor:
    a patch move ranks as the interpreter, a minor move as a numerical package (impact.toml,
    ``python-version``)."""

    def mm(v: Any) -> str | None:
        m = re.search(r"(\d+)\.(\d+)", str(getattr(v, "version", v) or ""))
        return f"{m.group(1)}.{m.group(2)}" if m else None

    return mm(va) is not None and mm(va) == mm(vb)
