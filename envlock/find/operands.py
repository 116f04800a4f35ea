"""Whether a query's operands are values of the order they are compared in (docs/find.md).

A condition whose operand its fact's order cannot read is an error, not a silent "no match":

* a PyPI package's version: ``op operand`` must be a PEP 440 version specifier, as
  ``packaging.specifiers.Specifier`` reads it (``torch < banana``: not a version; ``torch ~= 2``:
  PEP 440, "Compatible release": "This operator MUST NOT be used with a single segment version
  number such as ``~=1``"); ``===`` (arbitrary equality) takes any text;
* a conda package's version: a conda version spec, as py-rattler's ``VersionSpec`` reads it
  (conda's own order: ``banana`` and ``~=2`` are conda versions and specs); conda has no ``===``;
* a compute capability (``gpu.arch``), a boolean, other version facts (``gpu.driver``):
  :func:`envlock.find.values.cc_number`, ``true``/``false``…, PEP 440.

:func:`check_static` judges what the query's text alone tells (run before any file is read);
:func:`check_values` judges a condition against the values a fact holds (a package's manager is
known only then).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from envlock.diff.factset import Pkg
from envlock.find.query import SHORT, Cond, Node, QueryError, Target, conditions
from envlock.find.values import BOOLS, cc_number

__all__ = ["operand_error", "check_static", "check_values"]

#: operators comparing in an order (``==``/``!=`` also compare text or a glob where the order
#: cannot read the operand).
_ORDERING = ("~=", "<", "<=", ">", ">=")

_GLOB = re.compile(r"[*?\[]")


@functools.lru_cache(maxsize=1024)
def operand_error(op: str, ref: str, order: str) -> str | None:
    """Why ``op ref`` is no comparison in ``order`` (``"pep440"``, ``"conda"``), or ``None``.

    ``==``/``!=`` with a glob (``*``, ``?``, ``[``) that is no specifier compare the text (see
    :func:`envlock.find.values.compare`): no error.  For ``"conda"`` without py-rattler
    nothing is judged (``None``)."""
    if order == "conda":
        return _conda_error(op, ref)
    if op == "===":  # PEP 440, "Arbitrary equality": any text
        return None
    from packaging.specifiers import InvalidSpecifier, Specifier

    try:
        Specifier(f"{op}{ref}")
        return None
    except InvalidSpecifier:
        pass
    if op in ("==", "!=") and _GLOB.search(ref):
        return None
    return _pep440_why(op, ref)


def _pep440_why(op: str, ref: str) -> str:
    """Why ``packaging`` refuses the specifier ``op ref`` (PEP 440, "Version specifiers")."""
    from packaging.version import InvalidVersion, Version

    base = ref[:-2] if ref.endswith(".*") else ref
    try:
        v = Version(base)
    except InvalidVersion:
        return f"{ref!r} is not a PEP 440 version"
    if base != ref:
        return f"a prefix match ({ref!r}) is allowed only with == and != (PEP 440)"
    if op == "~=" and len(v.release) == 1:
        return (f"'~={ref}' is not allowed: a compatible release (~=) needs at least two release "
                f"segments (PEP 440: ~=2.0 means >=2.0 and ==2.*)")
    if v.local is not None:
        return f"a local version label ({ref!r}) is allowed only with ==, != and === (PEP 440)"
    return f"'{op}{ref}' is not a PEP 440 version specifier"


def _conda_error(op: str, ref: str) -> str | None:
    if op == "===":
        return "=== is PEP 440's arbitrary equality, for PyPI packages; conda's version specs have none"
    try:
        from rattler import VersionSpec
    except ImportError:  # cannot be told without py-rattler: compared as before
        return None
    try:
        VersionSpec(f"{op}{ref}", strict=False)
        return None
    except Exception as exc:  # noqa: BLE001 - py-rattler's parse errors have no common base
        if op in ("==", "!=") and _GLOB.search(ref):
            return None
        return f"{ref!r} is not a conda version spec operand (py-rattler: {exc})"


def _static_kind(c: Cond) -> str | None:
    """The order a condition compares in, known from its name alone: a target's kind
    (``"version"``, ``"cc"``, ``"bool"``), ``"package"`` (a name that can only be a package), or
    ``None`` (known only from the index)."""
    targets = SHORT.get(c.name)
    if targets is not None:
        kinds = {t.kind for t in targets}
        return kinds.pop() if len(kinds) == 1 else None
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", c.name):
        return "variable"
    if (c.name.startswith("package:") and not _GLOB.search(c.name)) or (
            "." not in c.name and ":" not in c.name):
        return "package"
    return None


def _fail(c: Cond, why: str) -> QueryError:
    return QueryError(f"query: {c.name} {c.op} {c.value}: {why}")


def check_static(node: Node) -> None:
    """Refuse the operands a condition's name already tells to be unreadable (before any file
    is read: a bad query fails at once whatever the size of WHERE).

    :raises QueryError: one line naming the condition, its operand and why.
    """
    for c in conditions(node):
        if c.op in ("set", "unset"):
            continue
        kind = _static_kind(c)
        if c.op == "===" and kind not in ("package", None):
            raise _fail(c, f"=== is PEP 440's arbitrary equality, for PyPI package versions; "
                           f"{c.name} is not a package")
        why = None
        if kind == "package":  # PyPI or conda: refused when neither order reads it
            why = operand_error(c.op, c.value, "pep440")
            if why is not None:
                why = None if operand_error(c.op, c.value, "conda") is None else \
                    f"{why}, nor a conda version"
        elif kind == "version" and c.op in _ORDERING:
            why = operand_error(c.op, c.value, "pep440")
        elif kind == "cc" and cc_number(c.value) is None:
            why = f"{c.value!r} is not a compute capability (sm_80, 8.0 or 80)"
        elif kind == "bool":
            if c.value.lower() not in BOOLS:
                why = f"{c.value!r} is not a boolean (true/false, yes/no, on/off, 1/0)"
            elif c.op not in ("==", "!="):
                why = "a boolean compares with == and != only"
        if why is not None:
            raise _fail(c, why)


def _orders(values: Iterable[Any], t: Target) -> set[str]:
    """The orders the values of one fact are compared in: ``"pep440"`` (a PyPI package's
    version), ``"conda"``, ``"version"`` (another version: PEP 440 where it parses, e.g. a BLAS
    implementation's or a CUDA library copy's), ``"other"``."""
    out = set()
    for v in values:
        if isinstance(v, Pkg) and t.part in ("", "version"):
            if v.version and v.version != "unknown":
                out.add("conda" if v.manager == "conda" else "pep440")
        else:
            out.add("version" if "version" in (t.kind, t.part) else "other")
    return out


def check_values(c: Cond, t: Target, name: str, values: Iterable[Any]) -> None:
    """Refuse ``c``'s operand when the order of a value fact ``name`` holds cannot read it
    (:func:`operand_error`; ``===`` on anything but a PyPI package's version).

    :raises QueryError: one line naming the condition, the fact, its operand and why.
    """
    if c.op in ("set", "unset"):
        return
    for order in sorted(_orders(values, t)):
        if order in ("other", "version"):
            if c.op == "===":
                raise _fail(c, f"=== is PEP 440's arbitrary equality, for PyPI package "
                               f"versions; {name} is not one")
            if order == "version" and c.op in _ORDERING:
                why = operand_error(c.op, c.value, "pep440")
                if why is not None:
                    raise _fail(c, f"{why} ({name} is compared in PEP 440 order)")
            continue
        why = operand_error(c.op, c.value, order)
        if why is not None:
            what = "a conda package: conda's order" if order == "conda" else "a PyPI package: PEP 440"
            raise _fail(c, f"{why} ({name} is {what})")
