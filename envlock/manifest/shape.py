"""The shape of every manifest table, derived from the model's type hints.

``envlock diff`` reads raw dicts (fast, tolerant of tables a newer envlock adds) and checks
their values against these shapes before comparing; ``show``/``restore`` build the model itself
(:meth:`envlock.manifest.Manifest.from_dict`).  Both therefore check the same types, from one
source: the dataclasses.

A shape is ``str``/``int``/``bool``/``float`` for a scalar (a ``Literal`` of strings is ``str``),
``[shape]`` for an array (``tuple[X, ...]``), :data:`STR_MAP` for a table of strings
(``Mapping[str, str]``), ``None`` for a value of any type, and a dict ``key → shape`` for a
(sub)table (a dataclass; keys are the kebab-case names the files use).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any
from envlock.manifest._model import _hints
from envlock.manifest import Manifest

__all__ = ["STR_MAP", "shape_of", "table_shapes"]

#: a table whose values are all strings (``[env] vars``).
STR_MAP = "str-map"


def shape_of(tp: Any) -> Any:
    """The shape of type ``tp`` (see the module docstring); ``None`` for a type that any value fits."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return shape_of(options[0]) if len(options) == 1 else None
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        return kinds.pop() if len(kinds) == 1 else None
    if origin is tuple:
        return [shape_of(args[0])]
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        return STR_MAP if len(args) == 2 and args[1] is str else None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_shape(tp)
    if tp in (str, int, bool, float):
        return tp
    return None


@functools.cache
def _dataclass_shape(cls: type) -> dict[str, Any]:
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        shape = shape_of(hints[f.name])
        if shape is not None:
            out[f.name.replace("_", "-")] = shape
    return out


@functools.cache
def table_shapes() -> dict[str, dict[str, Any]]:
    """Every table of :class:`envlock.manifest.Manifest` → its shape (``"python"`` → ``{...}``)."""
    shape = _dataclass_shape(Manifest)
    return {k: v for k, v in shape.items() if isinstance(v, dict)}
