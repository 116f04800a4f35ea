"""Generic mapping between frozen dataclasses and TOML/JSON-ready dicts.

Every table of the manifest is a ``@dataclass(frozen=True, kw_only=True, slots=True)``.
This module turns such a tree into plain dicts and back, the same way for every table,
so that a new area needs only its dataclass:

* attribute ``snake_case`` names become ``kebab-case`` keys (``base_prefix`` → ``base-prefix``);
* ``None`` values are dropped (TOML has no null), and so are empty tuples and dicts;
* key order in the dict follows field order in the class, so output is deterministic;
* reading checks every value's type and reports the key path of a bad value, e.g.
  ``expected str, got int in 'pip.packages[3].version'`` (the style of packaging's ``pylock``).

Supported field types: ``str``, ``int`` (``bool`` is rejected), ``float``, ``bool``,
``X | None``, ``tuple[X, ...]``, ``dict[str, X]`` (kept as an immutable mapping) and nested
dataclasses.  Keys that a class does not know are ignored on reading, so a file written by a
newer envlock of the same schema major can still be read.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar
from envlock.manifest import _methods

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_kwargs: Any) -> Any:
        """Type checkers' marker (PEP 681) of :func:`table`; nothing at run time."""
        return lambda fn: fn

from envlock.errors import ManifestError

__all__ = ["from_dict", "to_dict", "freeze_mapping", "Status", "STATUSES"]

#: The ``status`` of every manifest table: ``ok`` (read), ``absent`` (nothing of the kind on the
#: target), ``error`` (the probe failed; ``error`` says why), ``timeout`` (it did not answer in
#: time).  Reading accepts any string here, so that a newer envlock's status does not make an
#: older one fail (the schema's forward-compatibility rule); writers use only these.
Status = typing.Literal["ok", "absent", "error", "timeout"]
STATUSES: tuple[str, ...] = typing.get_args(Status)

T = TypeVar("T")


def _key(name: str) -> str:
    return name.replace("_", "-")


def freeze_mapping(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """Return a read-only copy of ``data`` (a :class:`types.MappingProxyType`), sorted by key.

    :param data: any mapping, or ``None`` for an empty one.
    :returns: an immutable mapping suitable for a frozen dataclass field.
    """
    return MappingProxyType(dict(sorted((data or {}).items())))


def to_dict(obj: Any) -> dict[str, Any]:
    """Convert a dataclass instance to a plain dict of TOML-compatible values.

    :param obj: an instance of a dataclass made of the supported field types.
    :returns: a new dict; ``None``, empty tuples and empty mappings are omitted.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = _dump(getattr(obj, f.name))
        if value is None or value == () or value == [] or value == {}:
            continue
        out[_key(f.name)] = value
    return out


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved field types of ``cls``.  A module may define ``_type_namespace()``
    returning further names for its (string) annotations, imported only when needed."""
    module = sys.modules.get(cls.__module__)
    namespace = dict(vars(module)) if module else {}
    extra = namespace.get("_type_namespace")
    if callable(extra):
        namespace.update(extra())
    key = f"{cls.__module__}:{cls.__qualname__}"
    if USE_GENERATED and key in SPECS and sys.version_info >= (3, 11):
        if _methods.SPECS.get(key) == SPECS[key] and key in _methods.HINTS:
            # the annotations' text compiled once, run with the module's globals: what
            # get_type_hints evaluates (3.11+: no implicit Optional), without compiling 30 strings
            return types.FunctionType(_methods.HINTS[key].__code__, namespace)()  # type: ignore[no-any-return]
    return typing.get_type_hints(cls, globalns=namespace)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def from_dict(cls: type[T], data: Any, path: str = "") -> T:
    """Build a dataclass ``cls`` from ``data``, checking types.

    :param cls: the dataclass to build.
    :param data: a mapping as produced by :func:`to_dict` or read from TOML/JSON.
    :param path: the key path of ``data`` in the whole document, used in error messages.
    :raises ManifestError: when ``data`` is not a table, a required key is missing, or a value
        has the wrong type; the message ends with the key path, e.g. ``in 'python.version'``.
    :returns: an instance of ``cls``.
    """
    if not isinstance(data, Mapping):
        raise ManifestError(f"expected a table, got {type(data).__name__}" + _where(path))
    hints = _hints(typing.cast(type, cls))
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = _key(f.name)
        sub = f"{path}.{key}" if path else key
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ManifestError(f"missing required key {key!r}" + _where(path))
            continue
        kwargs[f.name] = _load(hints[f.name], data[key], sub)
    return cls(**kwargs)


def _where(path: str) -> str:
    return f" in {path!r}" if path else ""


def _load(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _load(option, value, path)
            except ManifestError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ManifestError(f"expected an array, got {type(value).__name__}" + _where(path))
        item = args[0]
        return tuple(_load(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ManifestError(f"expected a table, got {type(value).__name__}" + _where(path))
        item = args[1] if len(args) == 2 else Any
        return freeze_mapping({str(k): _load(item, v, f"{path}.{k}") for k, v in value.items()})
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        if not isinstance(value, tuple(kinds)) or (isinstance(value, bool) and bool not in kinds):
            want = " or ".join(sorted(k.__name__ for k in kinds))
            raise ManifestError(f"expected {want}, got {type(value).__name__}" + _where(path))
        return value  # an unknown value is kept: newer writers may add one
    if dataclasses.is_dataclass(tp):
        return from_dict(typing.cast(type, tp), value, path)  # a field's type: a class, not an instance
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ManifestError(f"expected bool, got {type(value).__name__}" + _where(path))
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ManifestError(f"expected int, got {type(value).__name__}" + _where(path))
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ManifestError(f"expected float, got {type(value).__name__}" + _where(path))
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ManifestError(f"expected str, got {type(value).__name__}" + _where(path))
        return value
    raise ManifestError(f"unsupported field type {_type_name(tp)}" + _where(path))


# -- the tables' classes: dataclasses whose methods were generated once ----------------------
#: Use the generated methods of :mod:`envlock.manifest._methods` when their recorded spec
#: matches the class; ``False`` makes every table a plain ``dataclasses.dataclass`` (the
#: reference the generated code is tested against, ``tests/test_manifest_codegen.py``).
USE_GENERATED = True

#: Every table class seen by :func:`table`: ``"module:qualname"`` → its spec (see :func:`_spec`).
SPECS: dict[str, tuple[tuple[str, str, str], ...]] = {}

_DATACLASS = {"frozen": True, "kw_only": True, "slots": True}
#: Methods the class may not define itself for the generated ones to be dataclasses' own.
_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__")


@dataclasses.dataclass(**_DATACLASS)  # type: ignore[call-overload]
class _Reference:
    """An empty table made by ``dataclasses`` itself: its ``__dataclass_params__`` and the
    (generic, not generated) pickling methods of frozen slotted classes are shared by every
    table of :func:`table`, whatever this Python's ``dataclasses`` puts in them."""


def _spec(cls: type) -> tuple[tuple[str, str, str], ...]:
    """``((field name, annotation text, "required" | "default" | "factory"), …)`` in field
    order: everything the generated methods depend on."""
    out = []
    for name, ann in cls.__dict__.get("__annotations__", {}).items():
        if not isinstance(ann, str) or ann.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
            raise TypeError(f"{cls.__qualname__}.{name}: annotations must be strings of field types")
        value = cls.__dict__.get(name, dataclasses.MISSING)
        if value is dataclasses.MISSING:
            kind = "required"
        elif isinstance(value, dataclasses.Field):
            if value.default_factory is not dataclasses.MISSING:
                kind = "factory"
            elif value.default is not dataclasses.MISSING:
                kind = "default"
            else:
                kind = "required"
            if not (value.init and value.repr and value.compare and value.hash is None
                    and value.kw_only is dataclasses.MISSING and not value.metadata):
                raise TypeError(f"{cls.__qualname__}.{name}: only default/default_factory fields")
        else:
            kind = "default"
        out.append((name, ann, kind))
    return tuple(out)


@dataclass_transform(frozen_default=True, kw_only_default=True,
                     field_specifiers=(dataclasses.field, dataclasses.Field))
def table(cls: type[T]) -> type[T]:
    """Make ``cls`` a manifest table: exactly ``@dataclass(frozen=True, kw_only=True, slots=True)``
    (``dataclasses.fields``, ``replace``, ``is_dataclass``, equality, hashing, ``repr``, pickling
    and :class:`dataclasses.FrozenInstanceError` behave the same), but with the methods
    ``dataclasses`` would generate by ``exec`` on every import taken from
    :mod:`envlock.manifest._methods`, written once by :mod:`envlock.manifest._codegen` (``python
    -m envlock.manifest._codegen`` rewrites it).  When the class is not the one the methods were
    generated for (its spec differs), or :data:`USE_GENERATED` is false, the class is handed to
    ``dataclasses.dataclass``; so the generated code can be stale but never wrong.

    :param cls: a class with string annotations (``from __future__ import annotations``), plain
        defaults or ``field(default=…)``/``field(default_factory=…)``, no base dataclass.
    :returns: the new (slotted) class.
    :raises TypeError: for field options the generated code does not implement.
    """
    spec = _spec(cls)
    key = f"{cls.__module__}:{cls.__qualname__}"
    SPECS[key] = spec
    make = None
    plain = all(b is object for b in cls.__bases__) and not any(n in cls.__dict__ for n in _OWN)
    if USE_GENERATED and plain and cls.__doc__ is not None and getattr(dataclasses, "_FIELD", None) is not None:
        if _methods.SPECS.get(key) == spec:
            make = _methods.MAKERS[key]
    if make is None:
        return dataclasses.dataclass(**_DATACLASS)(cls)  # type: ignore[call-overload,no-any-return]

    ns = dict(cls.__dict__)
    fields: dict[str, dataclasses.Field[Any]] = {}
    defaults: dict[str, Any] = {}
    factories: dict[str, Any] = {}
    for name, ann, kind in spec:
        value = ns.pop(name, dataclasses.MISSING)
        if isinstance(value, dataclasses.Field):
            f = value
        elif kind == "default":
            f = dataclasses.field(default=value)
        else:
            f = dataclasses.field()
        f.name, f.type, f.kw_only = name, ann, True
        f._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what dataclasses.fields() selects
        fields[name] = f
        if kind == "default":
            defaults[name] = f.default
        elif kind == "factory":
            factories[name] = f.default_factory
    ns.pop("__dict__", None)
    ns.pop("__weakref__", None)
    ns["__slots__"] = tuple(fields)
    ns["__dataclass_fields__"] = fields
    ns["__dataclass_params__"] = _Reference.__dataclass_params__  # type: ignore[attr-defined]
    ns["__match_args__"] = ()  # every field is keyword-only
    for name in ("__getstate__", "__setstate__"):
        if name in _Reference.__dict__:
            ns[name] = _Reference.__dict__[name]
    meta: Any = type(cls)
    new = meta(cls.__name__, cls.__bases__, ns)
    new.__qualname__ = cls.__qualname__
    for meth_name, fn in make(defaults, factories, new).items():
        fn.__qualname__ = f"{cls.__qualname__}.{meth_name}"
        # as dataclasses' _create_fn leaves them: __init__ annotated with the fields' types
        fn.__annotations__ = {**{n: a for n, a, _ in spec}, "return": None} if meth_name == "__init__" else {}
        setattr(new, meth_name, fn)
    return new
