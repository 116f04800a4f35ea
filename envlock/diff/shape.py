"""Check the types of the manifest values ``envlock diff`` reads, before it compares them.

``envlock show``/``restore`` build the whole manifest model (:meth:`Manifest.from_dict`), which
checks every value but costs ~20 ms per 1,000-package manifest plus ~100 ms of imports; diff
reads raw dicts to stay fast and tolerant of newer tables.  This module checks their values
against the shapes derived from the model's type hints (:mod:`envlock.manifest.shape`), and
words errors like the model does:
``expected int, got str in 'cpu.logical-cores'``.  Keys it does not list are not checked
(a newer envlock may add them); tables without an extractor are flattened generically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock.errors import ManifestError
from envlock.manifest import shape as _shape

__all__ = ["shapes", "check"]

STR_MAP = _shape.STR_MAP


def shapes() -> dict[str, dict[str, Any]]:
    """table → key → type, derived from the model (:func:`envlock.manifest.shape.table_shapes`);
    ``[X]`` is an array of X, a dict is a (sub)table."""
    return _shape.table_shapes()


_NAMES = {str: "str", int: "int", bool: "bool", float: "float"}


class _Bad(Exception):
    pass


def _fail(expected: str, value: Any, where: str) -> None:
    raise _Bad(f"expected {expected}, got {type(value).__name__} in '{where}'")


def _value(spec: Any, value: Any, where: str) -> None:
    if isinstance(spec, dict):
        _table(spec, value, where)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            _fail("an array", value, where)
        item = spec[0]
        for i, v in enumerate(value):
            _value(item, v, f"{where}[{i}]")
    elif spec == STR_MAP:
        if not isinstance(value, Mapping):
            _fail("a table", value, where)
        for k, v in value.items():
            if not isinstance(v, str):
                _fail("str", v, f"{where}.{k}")
    elif spec is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail("int", value, where)
    elif spec is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail("float", value, where)
    elif not isinstance(value, spec):
        _fail(_NAMES[spec], value, where)


def _table(spec: dict[str, Any], value: Any, where: str) -> None:
    if not isinstance(value, Mapping):
        _fail("a table", value, where)
    for key, sub in spec.items():
        v = value.get(key)
        if v is not None:
            _value(sub, v, f"{where}.{key}")


def check(data: Mapping[str, Any], path: str) -> None:
    """Check the tables of manifest ``data`` that diff reads (their ``status`` and the keys in
    :func:`shapes`).

    :param path: the file, the start of the message.
    :raises ManifestError: ``"<path>: expected int, got str in 'cpu.logical-cores'"``.
    """
    try:
        for table, spec in shapes().items():
            body = data.get(table)
            if body is None:
                continue
            _table(spec, body, table)
            status = body.get("status")
            if status is not None and not isinstance(status, str):
                _fail("str", status, f"{table}.status")
    except _Bad as exc:
        raise ManifestError(f"{path}: {exc}") from None
