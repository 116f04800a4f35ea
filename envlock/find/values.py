"""Fact values as the index stores them, and comparisons in each fact's own order.

A fact value of :mod:`envlock.diff.facts` (a :class:`~envlock.diff.factset.Pkg`, an
:class:`~envlock.diff.factset.Impl`, a :class:`~envlock.diff.factset.Lib`, a ``frozenset`` of
strings, a ``bool``, an ``int``/``float`` or a ``str``) is stored as one compact JSON text
(:func:`encode`) and read back unchanged (:func:`decode`): the index holds diff's facts, not a
second reading of them.

Comparisons (:func:`compare`) use the order of the fact's own ecosystem:

* a PyPI package's version (``Pkg.manager == "pip"``): PEP 440, by :mod:`packaging`'s
  ``SpecifierSet`` (``torch < 1.12``, ``numpy ~= 1.26``, ``torch == 2.13.*``; ``== 2.13.0``
  matches ``2.13.0+cpu``, PEP 440's rule for local labels); pre-releases included;
  ``===`` is PEP 440's arbitrary equality (the version text itself, as ``packaging`` compares
  it: case-insensitively, no normalization), for PyPI packages only;
* a conda package's version (``manager == "conda"``): conda's version order, by py-rattler's
  ``VersionSpec`` (:func:`envlock.formats.conda.satisfies`);
* a compute capability (``gpu.arch``): a number pair — ``sm_80``, ``8.0`` and ``80`` are one
  value, ``sm_90a`` is ``9.0`` with the architecture-specific suffix;
* booleans (``true``/``false``/``yes``/``no``/``1``/``0``), numbers, and other version-like
  strings (driver ``550.54.14``, cuDNN ``8.9.7``, glibc ``2.36``: PEP 440 where they parse);
* anything else: text, ``==``/``!=`` exact, or a glob when the value holds ``*``/``?``.

A multi-valued fact (a set: the GPUs' compute capabilities, the CPU's ISA flags, the copies of
a CUDA library) matches when any member does.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from typing import Any

from envlock.diff.factset import Impl, Lib, Pkg

__all__ = ["encode", "decode", "compare", "OPS", "BOOLS", "cc_number", "text_of", "version_of"]

#: the comparison operators of the query syntax.
OPS = ("===", "==", "!=", "~=", "<=", ">=", "<", ">")


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def encode(value: Any) -> str:
    """One JSON text for a fact value (see the module docstring); :func:`decode` inverts it."""
    try:
        return _encode(value)
    except TypeError:  # an unhashable value (a foreign manifest's odd table): not cached
        return _encode.__wrapped__(value)


@functools.lru_cache(maxsize=65536, typed=True)  # typed: True and 1 are two values
def _encode(value: Any) -> str:
    if isinstance(value, Pkg):
        return _dumps(["P", value.version, value.build, value.channel, value.manager, value.name,
                       list(value.constraint) if value.constraint else None])
    if isinstance(value, Impl):
        return _dumps(["I", value.name, value.version, value.detail])
    if isinstance(value, Lib):
        return _dumps(["L", value.where, value.via])
    if isinstance(value, (frozenset, set)):
        return _dumps(["S", sorted(map(str, value))])
    if isinstance(value, (bool, int, float, str)) or value is None:
        return _dumps(value)
    return _dumps(str(value))


@functools.lru_cache(maxsize=65536)
def decode(text: str) -> Any:
    """The fact value :func:`encode` wrote (``ValueError`` on text it did not write)."""
    v = json.loads(text)
    if isinstance(v, list) and v:
        tag = v[0]
        if tag == "P":
            return Pkg(v[1], v[2], v[3], v[4], v[5], tuple(v[6]) if v[6] else None)
        if tag == "I":
            return Impl(v[1], v[2], v[3])
        if tag == "L":
            return Lib(v[1], v[2])
        if tag == "S":
            return frozenset(v[1])
    if isinstance(v, list):
        raise ValueError(f"not an encoded fact value: {text[:80]}")
    return v


def text_of(value: Any) -> str:
    """The text a value is compared as when it has no order of its own."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_VERSION_IN_SET = re.compile(r"^(\S+) \(")


def version_of(member: str) -> str:
    """``"13.0.96 (toolkit)"`` (a ``cuda:`` library copy) → ``"13.0.96"``; other text unchanged."""
    m = _VERSION_IN_SET.match(member)
    return m.group(1) if m else member


_CC_IN = re.compile(r"\(cc (\S+?)\)")
_CC = re.compile(r"(?:sm_|compute_)?(\d+)(?:\.(\d+))?([af]?)\Z", re.IGNORECASE)


def cc_number(text: str) -> tuple[int, int] | None:
    """A compute capability as ``(major, minor)``: ``"sm_80"``, ``"8.0"``, ``"80"`` → ``(8, 0)``;
    ``"sm_90a"``/``"9.0a"`` → ``(9, 0)`` (NVIDIA's ``a``/``f`` suffixes name feature sets of
    the same capability, CUDA C++ Programming Guide, "Compute Capabilities"); ``None`` if not one."""
    inner = _CC_IN.search(str(text))  # "NVIDIA A100-SXM4-80GB (cc 8.0)": a [process] GPU
    m = _CC.match(inner.group(1) if inner else str(text).strip())
    if not m:
        return None
    major, minor = m.group(1), m.group(2)
    if minor is None:  # "80" / "sm_80": the last digit is the minor version
        if len(major) < 2:
            return int(major), 0
        return int(major[:-1]), int(major[-1])
    return int(major), int(minor)


#: the words of a boolean operand.
BOOLS = {"true": True, "yes": True, "on": True, "1": True,
         "false": False, "no": False, "off": False, "0": False}


def _order(op: str, a: Any, b: Any) -> bool:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
            "~=": a == b}[op]


@functools.lru_cache(maxsize=4096)
def _pep440(op: str, ref: str, version: str) -> bool | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        if op == "===":  # arbitrary equality compares the text as written (PEP 440)
            return SpecifierSet(f"==={ref}").contains(version, prereleases=True)
        return SpecifierSet(f"{op}{ref}").contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion, ValueError):
        return None


@functools.lru_cache(maxsize=4096)
def _conda(op: str, ref: str, version: str) -> bool | None:
    from envlock.formats.conda import satisfies

    return satisfies(f"{op}{ref}", "", version, None)


def _is_version(text: str) -> bool:
    return bool(re.fullmatch(r"v?\d+(\.\d+)*([a-z0-9.+_-]*)", text, re.IGNORECASE))


def _scalar(op: str, ref: str, value: Any, kind: str) -> bool | None:
    """One value against ``op ref``; ``None``: not comparable (counts as no match)."""
    if op == "===":  # PEP 440's arbitrary equality: PyPI versions only (refused by the query)
        return None
    if kind == "time":  # UTC ISO-8601 texts order as the times they name
        if any(c in ref for c in "*?[") and op in ("==", "!="):
            return fnmatch.fnmatchcase(text_of(value), ref) == (op == "==")
        return _order(op if op != "~=" else "==", text_of(value), ref)
    if kind == "cc":
        a, b = cc_number(text_of(value)), cc_number(ref)
        return None if a is None or b is None else _order(op, a, b)
    if isinstance(value, bool) or (kind == "bool"):
        want = BOOLS.get(ref.lower())
        got = value if isinstance(value, bool) else BOOLS.get(text_of(value).lower())
        if want is None or got is None:
            return None
        return _order(op, got, want) if op in ("==", "!=") else None
    if isinstance(value, (int, float)):
        try:
            return _order(op, value, float(ref))
        except ValueError:
            return None
    text = text_of(value)
    if kind == "version" or (_is_version(text) and _is_version(ref) and op != "=="):
        got = _pep440(op, ref, text)
        if got is not None:
            return got
    if op in ("==", "!="):
        hit = fnmatch.fnmatchcase(text, ref) if any(c in ref for c in "*?[") else text == ref
        if not hit and kind == "version":
            hit = _pep440("==", ref, text) is True
        return hit if op == "==" else not hit
    return None


def compare(value: Any, op: str, ref: str, *, part: str = "", kind: str = "") -> bool:
    """Whether a fact value satisfies ``op ref`` (see the module docstring).

    :param part: which part of a composite value is compared: for a :class:`Pkg` ``""``/
        ``"version"``, ``"build"``, ``"channel"``, ``"manager"``; for an :class:`Impl`
        ``"vendor"`` (its implementation name) or ``"version"``; for a set of ``cuda:``
        library copies ``"version"`` (each member's version).
    :param kind: ``"cc"`` (compute capabilities), ``"version"``, ``"bool"`` or ``""`` (decided
        by the value).
    """
    if isinstance(value, Pkg):
        if part in ("", "version"):
            if not value.version or value.version == "unknown":
                return False
            if value.manager == "conda":
                got = _conda(op if op != "==" or "*" in ref else "==", ref, value.version)
                if got is None:
                    got = _pep440(op, ref, value.version)
            else:
                got = _pep440(op, ref, value.version)
            if got is None:  # not a PEP 440 version (a conda build's odd version): text
                return bool(_scalar(op, ref, value.version, ""))
            return got
        return bool(_scalar(op, ref, getattr(value, part) or "", ""))
    if isinstance(value, Impl):
        if part == "version":
            return bool(value.version) and bool(_scalar(op, ref, value.version, "version"))
        return bool(_scalar(op, ref, value.name, ""))
    if isinstance(value, Lib):
        return bool(_scalar(op, ref, value.where, ""))
    if isinstance(value, frozenset):
        members = [version_of(m) for m in value] if part == "version" else list(value)
        if op == "!=":  # no member equals ref
            return not any(_scalar("==", ref, m, kind) for m in members)
        return any(_scalar(op, ref, m, kind) for m in members)
    return bool(_scalar(op, ref, value, kind))
