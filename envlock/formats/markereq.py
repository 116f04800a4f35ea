"""PEP 508 markers compared as markers, not as text (issue 23: ``diff uv.lock pylock.toml`` of
uv's own export): :func:`markers_equivalent` evaluates both on every marker environment that
tells their comparisons apart, with :mod:`envlock.formats.markers`' parser (uv's conflict
markers and PEP 751's ``extras``/``dependency_groups`` read as one selection)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from envlock._names import canonicalize
from envlock.formats.markers import (_atom_item, _atom_text, _atoms, _eval_atom, _literal, _Node,
                                     _tree, _var_of, target_marker_env)

__all__ = ["markers_equivalent"]


def _version_points(literals: Iterable[str]) -> list[str]:
    """Versions on both sides of every literal: the regions where a comparison with any of
    them is constant (PEP 440 ordering; ``.*`` wildcards mark a boundary at the next release)."""
    from packaging.version import InvalidVersion, Version

    points: set[tuple[int, ...]] = set()
    for lit in literals:
        try:
            r = Version(lit.removesuffix(".*")).release
        except InvalidVersion:
            continue
        points.update({r, (*r[:-1], r[-1] + 1), (*r, 1), (*r[:-1], r[-1] + 1, 1)})
        if r[-1] > 0:
            points.add((*r[:-1], r[-1] - 1))
            points.add((*r[:-1], r[-1] - 1, 99))
    return [".".join(map(str, p)) for p in sorted(points)]


#: at most this many marker environments are tried when two markers are compared
_MAX_POINTS = 20_000
_PYTHON = ("python_version", "python_full_version")


def markers_equivalent(a: str, b: str, *, requires_python: str | None = None) -> bool:
    """Whether two PEP 508 markers hold in exactly the same marker environments, with uv's
    conflict markers (:func:`conflict_item`) and PEP 751's ``extras`` /
    ``dependency_groups`` read as the same selection of the locked project's extras and groups
    (uv's own ``pylock.toml`` export writes ``extra == 'extra-7-project-cpu'`` as ``'cpu' in
    extras``).

    ``'`` or ``"``, ``python_version`` or ``python_full_version``, parentheses, order and
    unions written differently (``(>= '3.12') or (== '3.11.*')`` and ``>= '3.11'``) are the
    same marker.  Decided by evaluating both (:mod:`packaging.markers`) on every marker
    environment that tells their comparisons apart: each variable's literals and the versions
    around them, one value no literal names, every combination of the extras and groups named.

    :param requires_python: only Python versions this PEP 440 specifier allows count (the
        lock's ``requires-python``: the only ones the lock is for).
    :returns: ``False`` when either is not a valid marker, or when they are too large to
        compare this way (over :data:`_MAX_POINTS` environments) and differ as text.
    """
    if a == b:
        return True
    try:
        ta, tb = _tree(a), _tree(b)
    except ValueError:
        return False
    items, dims = _dimensions(_atoms(ta) + _atoms(tb), requires_python)
    size = 2 ** len(items)
    for _v, pts in dims:
        size *= len(pts)
    if size > _MAX_POINTS:
        return False
    return _same_everywhere(ta, tb, sorted(items), dims)


def _dimensions(atoms: list[_Node], requires_python: str | None
                ) -> tuple[set[tuple[str, str]], list[tuple[str, list[str]]]]:
    """The extras/groups the atoms name, and per marker variable the values that tell their
    comparisons apart (``python``: the versions around each literal, within
    ``requires_python``)."""
    items: set[tuple[str, str]] = set()
    by_var: dict[str, set[str]] = {}
    for at in atoms:
        item = _atom_item(at)
        if item is not None:
            items.add((item[1][0], canonicalize(item[1][2])))
            continue
        var = _var_of(at)
        lit = _literal(at)
        if var is not None:
            by_var.setdefault("python" if var in _PYTHON else var, set()).update(
                [lit] if lit is not None else [])
    dims: list[tuple[str, list[str]]] = []
    for var, lits in sorted(by_var.items()):
        if var == "python":
            pts = _version_points(lits)
            if requires_python:
                pts = _allowed(pts, requires_python)
            dims.append((var, pts or ["3.12.0"]))
        else:
            dims.append((var, sorted(lits) + _version_points(lits) + ["\0other"]))
    return items, dims


def _same_everywhere(ta: _Node, tb: _Node, item_list: list[tuple[str, str]],
                     dims: list[tuple[str, list[str]]]) -> bool:
    """Whether two parsed markers agree on every combination of ``dims``' values and of the
    extras/groups in ``item_list``."""
    base = target_marker_env(None, None)
    memo: dict[tuple[str, str], bool] = {}

    def value(at: _Node, env: Mapping[str, str], active: frozenset[tuple[str, str]]) -> bool:
        if _atom_item(at) is not None:
            return _eval_atom(at, env, active)
        var = _var_of(at) or ""
        k = (_atom_text(at), env.get("python_full_version", "") if var in _PYTHON
             else env.get(var, ""))
        if k not in memo:
            memo[k] = _eval_atom(at, env, active)
        return memo[k]

    def ev(node: _Node, env: Mapping[str, str], active: frozenset[tuple[str, str]]) -> bool:
        if node[0] == "and":
            return all(ev(n, env, active) for n in node[1])
        if node[0] == "or":
            return any(ev(n, env, active) for n in node[1])
        return value(node, env, active)

    for combo in itertools.product(*(pts for _v, pts in dims)):
        env = dict(base)
        for (var, _pts), val in zip(dims, combo, strict=True):
            if var == "python":
                env["python_full_version"] = val
                env["python_version"] = ".".join((val.split(".") + ["0"])[:2])
            else:
                env[var] = val
        for bits in itertools.product((False, True), repeat=len(item_list)):
            active = frozenset(i for i, on in zip(item_list, bits, strict=True) if on)
            if ev(ta, env, active) != ev(tb, env, active):
                return False
    return True


def _allowed(points: list[str], requires_python: str) -> list[str]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return points
    return [p for p in points if spec.contains(Version(p), prereleases=True)]
