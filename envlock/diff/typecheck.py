"""Check the types of the manifest values ``envlock diff`` reads, before it compares them.

``envlock show``/``restore`` build the whole manifest model (:meth:`Manifest.from_dict`), which
checks every value but costs ~20 ms per 1,000-package manifest plus ~100 ms of imports; diff
reads raw dicts to stay fast and tolerant of newer tables.  This module checks their values
against the shapes derived from the model's type hints (:mod:`envlock.manifest.shape`, as the
literal :mod:`envlock.manifest._shapes`), and
words errors like the model does:
``expected int, got str in 'cpu.logical-cores'``.  Keys it does not list are not checked
(a newer envlock may add them); tables without an extractor are flattened generically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envlock.errors import ManifestError
from envlock.manifest import _shapes

__all__ = ["shapes", "check"]

STR_MAP = _shapes.STR_MAP


def shapes() -> dict[str, dict[str, Any]]:
    """table → key → type, derived from the model (:func:`envlock.manifest.shape.table_shapes`,
    written once into :mod:`envlock.manifest._shapes` by ``python -m envlock.manifest._codegen``,
    so that diff imports no table module); ``[X]`` is an array of X, a dict is a (sub)table."""
    return _shapes.TABLES


_NAMES = {str: "str", int: "int", bool: "bool", float: "float"}


class _Bad(Exception):
    """A value of the wrong type; ``where`` is its path, built only once a value fails (a
    300,000-package manifest is checked without a path string per value)."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = type(value).__name__
        self.where: list[str] = []

    def message(self, root: str) -> str:
        return f"expected {self.expected}, got {self.got} in '{root}{''.join(reversed(self.where))}'"


def _mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def _value(spec: Any, value: Any) -> None:
    if type(spec) is dict:
        _table(spec, value)
    elif type(spec) is list:
        if not isinstance(value, list):
            raise _Bad("an array", value)
        item = spec[0]
        for i, v in enumerate(value):
            try:
                _value(item, v)
            except _Bad as exc:
                exc.where.append(f"[{i}]")
                raise
    elif spec == STR_MAP:
        if not _mapping(value):
            raise _Bad("a table", value)
        for k, v in value.items():
            if type(v) is not str:
                bad = _Bad("str", v)
                bad.where.append(f".{k}")
                raise bad
    elif spec is int:
        if type(value) is not int:  # bool is not an int here
            raise _Bad("int", value)
    elif spec is float:
        if type(value) is not float and type(value) is not int:
            raise _Bad("float", value)
    elif type(value) is not spec and not isinstance(value, spec):
        raise _Bad(_NAMES[spec], value)


def _table(spec: dict[str, Any], value: Any) -> None:
    if not _mapping(value):
        raise _Bad("a table", value)
    get = value.get
    for key, sub in spec.items():
        v = get(key)
        if v is not None:
            try:
                _value(sub, v)
            except _Bad as exc:
                exc.where.append(f".{key}")
                raise


#: the exact types a scalar shape accepts at once; anything else (a subclass) goes the long way.
_EXACT: dict[Any, frozenset[type]] = {str: frozenset({str}), int: frozenset({int}),
                                      bool: frozenset({bool}), float: frozenset({float, int})}

Fits = Callable[[Any], bool]


def _fits(spec: Any) -> Fits:
    """A predicate that answers, without building any message, whether ``value`` fits
    ``spec`` as :func:`_value` checks it.  It may answer ``False`` for a value that fits (a
    ``str`` subclass); :func:`check` then walks :func:`_table`, which decides and words the
    error, so the verdict and the message are always :func:`_table`'s.  A table is checked by
    its own keys (a package has 7, its shape 20), each looked up once."""
    if type(spec) is dict:
        plain: dict[str, frozenset[type]] = {}
        nested: dict[str, Fits] = {}
        for key, sub in spec.items():
            if type(sub) is type and sub in _EXACT:
                plain[key] = _EXACT[sub]
            else:
                nested[key] = _fits(sub)
        plain_get, nested_get = plain.get, nested.get

        def table(value: Any) -> bool:
            if type(value) is not dict and not isinstance(value, Mapping):
                return False
            for key, v in value.items():
                ok = plain_get(key)
                if ok is not None:
                    if type(v) not in ok and v is not None:
                        return False
                elif v is not None:
                    fit = nested_get(key)
                    if fit is not None and not fit(v):
                        return False
            return True

        return table
    if type(spec) is list:
        item = _fits(spec[0])
        return lambda value: type(value) is list and all(map(item, value))
    if spec == STR_MAP:
        return lambda value: (type(value) is dict or isinstance(value, Mapping)) and all(
            type(v) is str for v in value.values())
    exact = _EXACT.get(spec, frozenset())
    return lambda value: type(value) in exact


_FITS: list[tuple[dict[str, Any], Fits]] = []


def _fast(spec: dict[str, Any]) -> Fits:
    for known, fit in _FITS:
        if known is spec:
            return fit
    fit = _fits(spec)
    _FITS.append((spec, fit))  # the spec is kept alive beside its predicate
    return fit


def check(data: Mapping[str, Any], path: str) -> None:
    """Check the tables of manifest ``data`` that diff reads (their ``status`` and the keys in
    :func:`shapes`).

    :param path: the file, the start of the message.
    :raises ManifestError: ``"<path>: expected int, got str in 'cpu.logical-cores'"``.
    """
    for table, spec in shapes().items():
        body = data.get(table)
        if body is None:
            continue
        if not _fast(spec)(body):  # the common case fits: no per-value path bookkeeping
            try:
                _table(spec, body)
            except _Bad as exc:
                raise ManifestError(f"{path}: {exc.message(table)}") from None
        status = body.get("status")
        if status is not None and not isinstance(status, str):
            raise ManifestError(f"{path}: expected str, got {type(status).__name__} in '{table}.status'")
