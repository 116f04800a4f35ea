"""Validate an impact-model file (``envlock/data/impact.toml`` or a ``--kb`` file) before use.

A user's ``--kb`` file is checked table by table against the layout documented in
``docs/diff.md``: value types (``rank`` an integer 0–100, ``match`` a string or a list of
strings, …), the names of the rules envlock implements, version specifiers (PEP 440) and the
``{placeholders}`` of the ``title``/``why``/``do`` texts, which are filled with
:meth:`str.format_map` and may only name the values that rule or component provides.  Each
problem is one :class:`~envlock.errors.ManifestError` naming the file and the key path
(``rules.tf32.min-cc``, ``component[3].match``), never a traceback later on.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from envlock.errors import ManifestError

__all__ = ["validate", "RULE_FIELDS", "COMPONENT_FIELDS"]

#: placeholders each rule fills in its ``title``, ``why`` and ``do`` (see envlock.diff.rules).
RULE_FIELDS: dict[str, frozenset[str]] = {
    "code": frozenset({"what", "fix"}),
    "untracked": frozenset({"where", "a", "b"}),
    "torch-variant": frozenset({"a", "b", "la", "lb", "fix"}),
    "tf32": frozenset({"on", "off", "cc_on", "torch_on", "spec"}),
    "tf32-cudnn": frozenset({"on", "off", "cc_on", "torch_on", "spec"}),
    "blas-vendor": frozenset({"a", "b", "la", "lb", "fix"}),
    "simd": frozenset({"a", "b", "la", "lb", "numpy"}),
    "threads": frozenset({"what", "fix"}),
    "loader-path": frozenset({"var", "a", "b", "la", "lb", "libs", "moved", "lb_or_la", "fix"}),
    "scheduler": frozenset({"what"}),
}

#: rule texts beyond title/why/do: ``why-cuda`` is torch-variant's reason for two CUDA builds.
_RULE_TEXTS: dict[str, tuple[str, ...]] = {"torch-variant": ("why-cuda",)}

#: the ``when`` conditions of an ``[[edge]]`` (implemented in envlock.diff.rules).
EDGE_WHEN = frozenset({"", "one-side", "moved", "same-version"})

#: placeholders of a component's ``why`` and ``do`` (its ``title`` is shown as written);
#: ``{fix}``: the generated shell lines of its ``env`` changes (envlock.diff.fixes.env_fix).
COMPONENT_FIELDS = frozenset({"a", "b", "key", "fix"})

#: parameters of rules beyond class/rank/title/why/do: key → kind of value.
_RULE_PARAMS: dict[str, dict[str, str]] = {
    "tf32": {"torch": "specifier", "min-cc": "number"},
    "tf32-cudnn": {"torch": "specifier", "min-cc": "number"},
    "simd": {"numpy": "specifier"},
    "threads": {"vars": "strings"},
}

_TOP = ("schema", "classes", "sizes", "aliases", "noise", "rules", "component", "edge")
_CLASS_KEYS = frozenset({"rank", "title", "explain"})
_COMPONENT_KEYS = frozenset({"id", "class", "match", "title", "why", "do", "group", "build-size",
                             "size", "needs"})
_SIMPLE_CLAUSE = re.compile(r"(>=|<=|>|<|==)\s*\d+(?:\.\d+)*")


class _Bad(Exception):
    pass


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def _expect(ok: bool, what: str, path: str, value: Any) -> None:
    if not ok:
        raise _Bad(f"expected {what} in '{path}', got {_kind(value)} ({value!r:.40})")


def _table(value: Any, path: str) -> Mapping[str, Any]:
    _expect(isinstance(value, Mapping), "a table", path, value)
    return value


def _str(value: Any, path: str) -> str:
    _expect(isinstance(value, str), "a string", path, value)
    return value


def _int(value: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
    _expect(isinstance(value, int) and not isinstance(value, bool), "an integer", path, value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise _Bad(f"expected an integer from {lo} to {hi} in '{path}', got {value}")
    return value


def _strings(value: Any, path: str) -> None:
    _expect(isinstance(value, list), "an array of strings", path, value)
    for i, v in enumerate(value):
        _str(v, f"{path}[{i}]")


def _unknown(table: Mapping[str, Any], allowed: frozenset[str] | tuple[str, ...], path: str
             ) -> None:
    for key in table:
        if key not in allowed:
            where = f"'{path}.{key}'" if path else f"'{key}'"
            raise _Bad(f"unknown key {where} (expected one of: {', '.join(sorted(allowed))})")


def _template(value: Any, path: str, fields: frozenset[str]) -> None:
    """A text filled with ``str.format_map``: only named placeholders from ``fields``."""
    text = _str(value, path)
    known = ", ".join("{" + f + "}" for f in sorted(fields)) or "none"
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise _Bad(f"bad placeholder in '{path}': {exc} (write {{{{ and }}}} for literal "
                   "braces)") from None
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if name == "" or name.isdigit():
            raise _Bad(f"positional placeholder {{{name}}} in '{path}'; use a named one "
                       f"({known})")
        if name not in fields:
            raise _Bad(f"unknown placeholder {{{name}}} in '{path}' (known: {known})")
        if spec and "{" in spec:
            raise _Bad(f"nested placeholder in '{path}'")
    try:
        text.format_map({f: "x" for f in fields})
    except (ValueError, TypeError) as exc:
        raise _Bad(f"bad placeholder in '{path}': {exc}") from None


def _specifier(value: Any, path: str) -> None:
    text = _str(value, path)
    clauses = [c.strip() for c in text.split(",")]
    if all(_SIMPLE_CLAUSE.fullmatch(c) for c in clauses):
        return
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise _Bad(f"'{path}' is not a version specifier (PEP 440, e.g. \">=1.7,<1.12\"): "
                   f"{text!r}") from None


def _number(value: Any, path: str) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int | float | str)
    if ok:
        try:
            float(value)
        except ValueError:
            ok = False
    _expect(ok, "a number (e.g. \"8.0\")", path, value)


def _classes(t: Mapping[str, Any]) -> None:
    for cid, body in t.items():
        path = f"classes.{cid}"
        body = _table(body, path)
        _unknown(body, _CLASS_KEYS, path)
        if "rank" in body:
            _int(body["rank"], f"{path}.rank", 0, 100)
        if "title" in body:
            _str(body["title"], f"{path}.title")
        if "explain" in body:
            _expect(isinstance(body["explain"], bool), "true or false", f"{path}.explain",
                    body["explain"])


def _rules(t: Mapping[str, Any]) -> None:
    for rid, body in t.items():
        path = f"rules.{rid}"
        if rid not in RULE_FIELDS:
            raise _Bad(f"unknown rule '{path}' (envlock implements: "
                       f"{', '.join(sorted(RULE_FIELDS))})")
        body = _table(body, path)
        params = _RULE_PARAMS.get(rid, {})
        texts = _RULE_TEXTS.get(rid, ())
        _unknown(body, frozenset({"class", "rank", "title", "why", "do", "needs", *texts, *params}),
                 path)
        if "needs" in body:
            _needs(body["needs"], f"{path}.needs")
        if "class" in body:
            _str(body["class"], f"{path}.class")
        if "rank" in body:
            _int(body["rank"], f"{path}.rank", 0, 100)
        for key in ("title", "why", "do", *texts):
            if key in body:
                _template(body[key], f"{path}.{key}", RULE_FIELDS[rid])
        for key, kind in params.items():
            if key not in body:
                continue
            check = {"specifier": _specifier, "number": _number, "strings": _strings}[kind]
            check(body[key], f"{path}.{key}")


def _components(value: Any) -> None:
    _expect(isinstance(value, list), "an array of tables ([[component]])", "component", value)
    for i, body in enumerate(value):
        path = f"component[{i}]"
        body = _table(body, path)
        _unknown(body, _COMPONENT_KEYS, path)
        for key in ("id", "class", "match"):
            if key not in body:
                raise _Bad(f"'{path}' needs id, class and match (lacks {key})")
        _str(body["id"], f"{path}.id")
        _str(body["class"], f"{path}.class")
        match = body["match"]
        if isinstance(match, list):
            _strings(match, f"{path}.match")
            if not match:
                raise _Bad(f"'{path}.match' is empty")
        else:
            _expect(isinstance(match, str), "a string or an array of strings",
                    f"{path}.match", match)
        if "title" in body:
            _str(body["title"], f"{path}.title")
        for key in ("why", "do"):
            if key in body:
                _template(body[key], f"{path}.{key}", COMPONENT_FIELDS)
        if "group" in body:
            _expect(isinstance(body["group"], bool), "true or false", f"{path}.group",
                    body["group"])
        if "build-size" in body:
            _int(body["build-size"], f"{path}.build-size", 0, 9)
        if "size" in body:
            _int(body["size"], f"{path}.size", 0, 10)
        if "needs" in body:
            _needs(body["needs"], f"{path}.needs")


def _needs(value: Any, path: str) -> None:
    """A condition name of :data:`envlock.diff.conditions.NEEDS`, or an array of them."""
    from envlock.diff.conditions import NEEDS

    names = value if isinstance(value, list) else [value]
    _strings(names, path)
    for n in names:
        if n not in NEEDS:
            raise _Bad(f"unknown condition '{path}' = {n!r} (known: {', '.join(sorted(NEEDS))})")


def _edges(value: Any) -> None:
    _expect(isinstance(value, list), "an array of tables ([[edge]])", "edge", value)
    for i, body in enumerate(value):
        path = f"edge[{i}]"
        body = _table(body, path)
        _unknown(body, frozenset({"cause", "accounts", "when"}), path)
        for key in ("cause", "accounts"):
            if key not in body:
                raise _Bad(f"'{path}' needs cause and accounts (lacks {key})")
        _str(body["cause"], f"{path}.cause")
        acc = body["accounts"]
        if isinstance(acc, list):
            _strings(acc, f"{path}.accounts")
        else:
            _expect(isinstance(acc, str), "a string or an array of strings",
                    f"{path}.accounts", acc)
        when = body.get("when", "")
        _str(when, f"{path}.when") if when else None
        if when not in EDGE_WHEN:
            raise _Bad(f"unknown condition '{path}.when' = {when!r} (known: one-side, moved, same-version)")


def validate(data: Any, where: str) -> None:
    """Check the layout and value types of one impact-model file.

    :param data: the parsed TOML.
    :param where: the file name, the start of every message.
    :raises ManifestError: ``"<where>: <problem> in '<key path>'"`` for the first problem:
        an envlock manifest given instead, an unknown table or key, a value of the wrong
        type, an unknown rule, a bad version specifier, or a positional, unknown or malformed
        ``{placeholder}``.
    """
    try:
        if not isinstance(data, Mapping):
            raise _Bad("not an impact model (top level is not a table)")
        if "envlock" in data:
            raise _Bad("this is an envlock manifest, not an impact model (--kb takes a file "
                       "laid out like envlock/data/impact.toml; see docs/diff.md)")
        _unknown(data, _TOP, "")
        if not any(k in data for k in _TOP[1:]):
            raise _Bad("no impact-model table (classes, sizes, aliases, noise, rules or "
                       "[[component]])")
        if "schema" in data:
            _int(data["schema"], "schema")
        if "classes" in data:
            _classes(_table(data["classes"], "classes"))
        for key, value in _table(data.get("sizes", {}), "sizes").items():
            _int(value, f"sizes.{key}", 0, 9)
        for key, value in _table(data.get("aliases", {}), "aliases").items():
            _str(value, f"aliases.{key}")
        if "noise" in data:
            noise = _table(data["noise"], "noise")
            _unknown(noise, frozenset({"patterns"}), "noise")
            _strings(noise.get("patterns", []), "noise.patterns")
        if "rules" in data:
            _rules(_table(data["rules"], "rules"))
        if "component" in data:
            _components(data["component"])
        if "edge" in data:
            _edges(data["edge"])
    except _Bad as exc:
        raise ManifestError(f"{where}: {exc}") from None
