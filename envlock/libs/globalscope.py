"""What a package's own Python code does to the loader's global scope, read from its source
(never imported).

A package may put objects into the global scope before its extension modules are loaded:
``ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)`` (or ``ctypes.cdll.LoadLibrary`` / ``PyDLL``
with that mode) adds ``path`` and its dependencies to the global scope (glibc ``elf/dl-open.c``
``add_to_global``), and ``sys.setdlopenflags(os.RTLD_GLOBAL | …)`` makes every later extension
import a ``RTLD_GLOBAL`` dlopen (CPython ``Python/dynload_shlib.c`` passes the interpreter's
dlopen flags).  Symbols such objects define then bind for every object loaded afterwards.

:func:`read_global_loads` reads the package's ``__init__.py`` with :mod:`ast` and decides each
such call's path where the source decides it (string constants, ``__file__``,
``os.path.join``/``dirname``/``abspath``/``realpath``, ``+`` and f-strings of those); a path
computed any other way (a helper function, a loop over ``glob``) is reported as unknown.
torch's ``_load_global_deps`` is :class:`envlock.libs.runtime.TorchPlan`'s.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from envlock._io import read_text
from envlock.errors import EnvlockError

__all__ = ["GlobalLoads", "read_global_loads"]

#: ``os.RTLD_GLOBAL`` on Linux (glibc ``bits/dlfcn.h``).
RTLD_GLOBAL = 0x100
_LOADERS = {"CDLL", "PyDLL", "LoadLibrary"}
_PATH_FUNCS = {"dirname", "abspath", "realpath", "normpath", "join", "fspath"}


@dataclass(frozen=True, kw_only=True, slots=True)
class GlobalLoads:
    """The ``RTLD_GLOBAL`` loads of one package's ``__init__.py``, in source order.

    :ivar source: the file read.
    :ivar libraries: ``(line, path or name)`` of each ``ctypes`` load with ``RTLD_GLOBAL``
        whose argument the source decides.
    :ivar extensions_global: ``sys.setdlopenflags`` with ``RTLD_GLOBAL`` is called: the
        package's extension modules are loaded with ``RTLD_GLOBAL``.
    :ivar unknown: ``"<file>:<line>: <code>"`` for each ``RTLD_GLOBAL`` load whose path
        cannot be decided without running the code.
    """

    source: str
    libraries: tuple[tuple[int, str], ...] = ()
    extensions_global: bool = False
    unknown: tuple[str, ...] = ()


def read_global_loads(package_dir: str) -> GlobalLoads | None:
    """The ``RTLD_GLOBAL`` loads ``package_dir/__init__.py`` makes, or ``None`` when it makes
    none (or cannot be read or parsed: a package whose ``__init__`` does not parse fails to
    import anyway).

    :param package_dir: the package directory (``<site>/pkg``).
    """
    init = os.path.join(package_dir, "__init__.py")
    try:
        text = read_text(init)
        tree = ast.parse(text, filename=init)
    except (OSError, EnvlockError, SyntaxError, ValueError, RecursionError):
        return None
    if not any(word in text for word in ("RTLD_GLOBAL", "setdlopenflags", *_LOADERS)):
        return None
    libraries: list[tuple[int, str]] = []
    unknown: list[str] = []
    extensions_global = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node.func)
        if name == "setdlopenflags" and node.args and _is_global(node.args[0]):
            extensions_global = True
        elif name in _LOADERS and node.args and _global_mode(node):
            path = _value(node.args[0], init)
            if path is None:
                unknown.append(f"{init}:{node.lineno}: {ast.unparse(node)}")
            else:
                libraries.append((node.lineno, path))
    if not (libraries or unknown or extensions_global):
        return None
    return GlobalLoads(source=init, libraries=tuple(sorted(libraries)), extensions_global=extensions_global,
                       unknown=tuple(unknown))


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _is_global(expr: ast.expr) -> bool:
    """Whether a mode expression includes ``RTLD_GLOBAL`` (by name, or as the number)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and n.id == "RTLD_GLOBAL":
            return True
        if isinstance(n, ast.Attribute) and n.attr == "RTLD_GLOBAL":
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and n.value & RTLD_GLOBAL:
            return True
    return False


def _global_mode(call: ast.Call) -> bool:
    """``mode=`` (keyword, or ``CDLL``'s second argument) includes ``RTLD_GLOBAL``."""
    modes = [k.value for k in call.keywords if k.arg == "mode"]
    if len(call.args) > 1:
        modes.append(call.args[1])
    return any(_is_global(m) for m in modes)


def _value(expr: ast.expr, init: str) -> str | None:
    """The string ``expr`` evaluates to in ``init``, where the source alone decides it."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name) and expr.id == "__file__":
        return init
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        a, b = _value(expr.left, init), _value(expr.right, init)
        return a + b if a is not None and b is not None else None
    if isinstance(expr, ast.JoinedStr):
        parts = [_value(v.value if isinstance(v, ast.FormattedValue) else v, init) for v in expr.values]
        return "".join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
    if isinstance(expr, ast.Call) and _callee(expr.func) in _PATH_FUNCS and not expr.keywords:
        args = [_value(a, init) for a in expr.args]
        if not args or any(a is None for a in args):
            return None
        fn = _callee(expr.func)
        if fn == "join":
            return os.path.join(*args)  # type: ignore[arg-type]
        if len(args) != 1:
            return None
        arg = str(args[0])
        if fn == "dirname":
            return os.path.dirname(arg)
        if fn == "abspath":
            return os.path.abspath(arg)
        if fn == "realpath":
            return os.path.realpath(arg)
        return os.path.normpath(arg) if fn == "normpath" else arg
    return None
