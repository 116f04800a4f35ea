"""The manifest's tables with generated-once methods (issue 26) are the dataclasses they replace.

``envlock.manifest._model.table`` takes each table's ``__init__``/``__repr__``/``__eq__``/
``__hash__``/``__setattr__``/``__delattr__`` from ``envlock/manifest/_methods.py`` (written by
``python -m envlock.manifest._codegen``) instead of letting ``dataclasses`` ``exec`` them on every
import.  The oracle is ``dataclasses.dataclass(frozen=True, kw_only=True, slots=True)`` itself:
each table is compared with its twin made by it, and a snapshot written with the generated
methods is byte for byte the one written with ``dataclasses`` (``_model.USE_GENERATED = False``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.manifest import _codegen, _methods, _model


def _tables() -> list[type]:
    for mod in _codegen.TABLE_MODULES:
        importlib.import_module(mod)
    out = []
    for key in sorted(_model.SPECS):
        mod, qual = key.split(":")
        obj = sys.modules[mod]
        for part in qual.split("."):
            obj = getattr(obj, part)
        out.append(obj)
    return out


def test_generated_file_is_current() -> None:
    """``_methods.py`` is what the generator writes for the tables as they are now."""
    assert _codegen.generate() == _codegen.TARGET.read_text(encoding="utf-8")
    assert _codegen.generate_shapes() == _codegen.SHAPES_TARGET.read_text(encoding="utf-8")
    assert _codegen.main(["--check"]) == 0


def test_generated_shapes_are_the_models() -> None:
    """``diff``'s type checks (``envlock.diff.typecheck``) read ``_shapes.TABLES``: the shapes
    the model's type hints give (``envlock.manifest.shape.table_shapes``), equal value for
    value, types and all."""
    from envlock.diff.typecheck import STR_MAP, shapes
    from envlock.manifest import shape

    assert shapes() == shape.table_shapes()
    assert STR_MAP == shape.STR_MAP


def test_every_table_uses_the_generated_methods() -> None:
    tables = _tables()
    assert len(tables) >= 48
    for cls in tables:
        key = f"{cls.__module__}:{cls.__qualname__}"
        assert _methods.SPECS[key] == _model.SPECS[key]
        assert cls.__init__.__code__.co_filename == _methods.__file__, key


def _twin(cls: type) -> type:
    """``cls`` rebuilt from its source-level parts by ``dataclasses`` itself."""
    ns: dict = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
                "__annotations__": {f.name: f.type for f in dataclasses.fields(cls)}}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            ns[f.name] = dataclasses.field(default_factory=f.default_factory)
        elif f.default is not dataclasses.MISSING:
            ns[f.name] = f.default
    for name, value in vars(cls).items():  # the class's own methods and properties
        if name not in ns and name not in _TWIN_SKIP and not isinstance(value, type(cls.__dict__.get("__slots__"))):
            if callable(value) or isinstance(value, (property, classmethod, staticmethod)):
                if getattr(value, "__code__", None) is None or value.__code__.co_filename != _methods.__file__:
                    ns[name] = value
    return dataclasses.dataclass(frozen=True, kw_only=True, slots=True)(type(cls.__name__, (), ns))


_TWIN_SKIP = {"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__getstate__",
              "__setstate__", "__dataclass_fields__", "__dataclass_params__", "__match_args__", "__slots__",
              "__module__", "__qualname__", "__doc__", "__annotations__"} | set()


def _outcome(fn, obj: object) -> object:
    """``fn(obj)``, or the error's message (a mapping field is unhashable and cannot be pickled,
    for the twin as for the table)."""
    try:
        return fn(obj)
    except TypeError as exc:
        return f"TypeError: {exc}"


@pytest.mark.parametrize("cls", _tables(), ids=lambda c: c.__qualname__)
def test_table_behaves_as_its_dataclass_twin(cls: type) -> None:
    twin = _twin(cls)
    assert dataclasses.is_dataclass(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(twin))
    attrs = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "kw_only",
             "metadata")
    assert [[getattr(f, a) for a in attrs] for f in dataclasses.fields(cls)] == \
        [[getattr(f, a) for a in attrs] for f in dataclasses.fields(twin)]
    assert cls.__slots__ == twin.__slots__ and cls.__match_args__ == twin.__match_args__
    assert repr(cls.__dataclass_params__) == repr(twin.__dataclass_params__)
    required = {f.name: f"v-{f.name}" for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    full = {f.name: (f"w-{f.name}",) for f in dataclasses.fields(cls)}
    for kwargs in (required, full):
        a, t = cls(**kwargs), twin(**kwargs)
        assert repr(a) == repr(t)
        assert _outcome(hash, a) == _outcome(hash, t)
        assert a == cls(**kwargs) and not (a != cls(**kwargs))
        assert _outcome(dataclasses.asdict, a) == _outcome(dataclasses.asdict, t)
        assert (a == t) is False  # another class, as two dataclasses are
        blob = _outcome(pickle.dumps, a)
        if not isinstance(blob, bytes):  # the twin is no module attribute: pickle only the table
            assert "mappingproxy" in str(blob)
        else:
            b = pickle.loads(blob)
            assert b == a and type(b) is cls
        for name in list(full)[:2]:
            with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field {name!r}"):
                setattr(a, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field {name!r}"):
                delattr(a, name)
        if full:
            name = next(iter(full))
            r = dataclasses.replace(a, **{name: "other"})
            assert getattr(r, name) == "other" and r != a
            assert repr(r) == repr(dataclasses.replace(t, **{name: "other"}))
    with pytest.raises(TypeError):
        cls("positional")
    if required:
        with pytest.raises(TypeError):
            cls()


def test_table_refuses_field_options_it_does_not_generate() -> None:
    with pytest.raises(TypeError, match="only default/default_factory"):
        class Bad:
            """A table with a field option the generated code does not implement."""

            x: str = dataclasses.field(default="a", repr=False)

        Bad.__annotations__ = {"x": "str"}
        _model.table(Bad)


def test_a_changed_table_falls_back_to_dataclasses() -> None:
    """A class whose spec is not the generated one is made by dataclasses: stale code is never used."""
    ns = {"__module__": "envlock.manifest", "__qualname__": "PipPackage", "__doc__": "A changed table.",
          "__annotations__": {"name": "str", "new_field": "int"}, "new_field": 0}
    key = "envlock.manifest:PipPackage"
    assert key in _methods.MAKERS
    saved = _model.SPECS[key]
    try:
        cls = _model.table(type("PipPackage", (), ns))
        assert cls.__init__.__code__.co_filename != _methods.__file__
        assert repr(cls(name="x")) == "PipPackage(name='x', new_field=0)"
    finally:
        _model.SPECS[key] = saved  # the record of the real class


_REFERENCE = ("import sys; import envlock.manifest._model as m; m.USE_GENERATED = False\n"
              "from envlock.cli import main; sys.argv[0] = 'envlock'; main()\n")
_VARYING = re.compile(rb"^(created|duration) = .*$", re.M)


def _snapshot_both(target: Path, out: Path) -> tuple[bytes, bytes]:
    """The snapshot of ``target`` written with the generated methods and with dataclasses."""
    results = []
    for argv in ([sys.executable, "-m", "envlock"], [sys.executable, "-c", _REFERENCE]):
        subprocess.run([*argv, "snapshot", "--python", str(target / "bin" / "python"), "-o", str(out),
                        "--force"], check=True, capture_output=True, timeout=300)
        results.append(_VARYING.sub(b"", out.read_bytes()))
    return results[0], results[1]


def test_snapshot_output_is_identical_conda_prefix(conda_prefix: Path, tmp_path: Path) -> None:
    new, ref = _snapshot_both(conda_prefix, tmp_path / "m.toml")
    assert b"[[conda.packages]]" in new and b"[[pip.packages]]" in new
    assert new == ref


@pytest.mark.realenv
def test_snapshot_output_is_identical_real_venv(cuda_venv: Path, tmp_path: Path) -> None:
    new, ref = _snapshot_both(cuda_venv, tmp_path / "m.toml")
    assert b'name = "torch"' in new
    assert new == ref


@pytest.mark.parametrize("cls", _tables(), ids=lambda c: c.__qualname__)
def test_generated_hints_are_get_type_hints(cls: type) -> None:
    """The fields' types from the compiled annotation text are ``typing.get_type_hints``'s."""
    import typing

    module = sys.modules[cls.__module__]
    ns = dict(vars(module))
    if callable(ns.get("_type_namespace")):
        ns.update(ns["_type_namespace"]())
    fast = _model._hints.__wrapped__(cls)
    assert fast == typing.get_type_hints(cls, globalns=ns)
    assert list(fast) == [f.name for f in dataclasses.fields(cls)]
