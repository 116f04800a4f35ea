"""Whether a cache entry would hold a secret (:mod:`envlock.cache`: "a cache never holds a
secret"): a string that redaction (:mod:`envlock.redact`) would change anywhere in the answer,
or a piece of the environment that a manifest would not show (URL user-info, a conda token,
the value of a variable whose name looks secret) anywhere in the entry's text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["holds_secret", "redaction_changes", "trigger_hits"]


def _redacted_variable(name: str, value: str) -> str:
    """``value`` of variable ``name`` as a manifest may record it (:mod:`envlock.redact`)."""
    from envlock import redact

    by_variable = getattr(redact, "redact_variable", None)
    if by_variable is not None:
        return str(by_variable(name, value)[0])
    if redact.secret_name(name):
        return redact.REDACTED
    return redact.redact_text_urls(value) if redact.secret_value(value) else value


_PIECES = r"[\s/:@?&=;,'\"]+"


def _secret_fragments(environ: Mapping[str, str]) -> set[str]:
    """The pieces of the environment a manifest would not show: for each variable, the parts
    of its value that redaction removes (all of it for a name that looks secret; URL
    user-info, a conda token, a signed-URL parameter for others — :mod:`envlock.redact`)."""
    split = re.compile(_PIECES)
    out: set[str] = set()
    for name, value in environ.items():
        if len(value) < 4:  # too short to be a credential or to be found reliably
            continue
        shown = _redacted_variable(name, value)
        if shown == value:
            continue
        kept = set(split.split(shown))
        out.update(p for p in split.split(value) if len(p) >= 4 and p not in kept)
    return out


def redaction_changes(value: Any) -> bool:
    """``True`` exactly when :func:`envlock.redact.redact_tree` would give back something other
    than ``value`` (a JSON-like tree), found without copying the tree: a value under an
    upper-case secret variable name (other than ``<redacted>``), a tuple (``redact_tree`` turns
    it into a list), a string with undecodable bytes (:func:`envlock.redact.printable`
    changes it), or a string :func:`envlock.redact.redact_text` changes.

    ``redact_text`` leaves a string alone unless its trigger pattern (``redact._TRIGGER``)
    matches; no part of that pattern can match across a newline, so one search over the
    strings joined by newlines finds exactly the strings it would look at, and only those are
    passed to it.
    """
    from envlock import redact

    strings: list[str] = []
    if isinstance(value, str):
        strings.append(value)
    elif isinstance(value, tuple):
        return True
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, str):
                    if isinstance(k, str) and k.isupper() and redact.secret_name(k):
                        if x != redact.REDACTED:
                            return True
                    else:
                        strings.append(x)
                elif isinstance(x, dict | list):
                    stack.append(x)
                elif isinstance(x, tuple):
                    return True
        else:
            for x in v:
                if isinstance(x, str):
                    strings.append(x)
                elif isinstance(x, dict | list):
                    stack.append(x)
                elif isinstance(x, tuple):
                    return True
    if not strings:
        return False
    joined = "\n".join(strings)
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        return True
    trigger = redact._TRIGGER
    if redact._plain_case(joined):
        hits = trigger_hits(joined)
        if not hits:
            return False
    else:
        m = trigger.search(joined)
        if m is None:
            return False
        hits = None
    import bisect

    starts = []
    pos = 0
    for x in strings:
        starts.append(pos)
        pos += len(x) + 1
    if hits is not None:
        for i in sorted({bisect.bisect_right(starts, h) - 1 for h in hits}):
            if redact.redact_text(strings[i]) != strings[i]:
                return True
        return False
    while m is not None:
        i = bisect.bisect_right(starts, m.start()) - 1
        x = strings[i]
        if redact.redact_text(x) != x:
            return True
        m = trigger.search(joined, starts[i] + len(x) + 1)
    return False


def trigger_hits(text: str) -> list[int]:
    """Positions in ``text`` (without ``redact._CASE_SPECIAL``) where ``redact._TRIGGER``
    matches — at least one in
    every newline-separated line it matches in, none elsewhere — found with ``str.find``
    (a regex search with that many alternatives costs ~0.1 µs a character)."""
    from envlock import redact

    out: list[int] = []
    low = text.lower()
    for hay, needles in ((text, redact._TRIGGER_LITERALS), (low, redact._TRIGGER_WORDS)):
        for needle in needles:
            i = hay.find(needle)
            while i >= 0:
                out.append(i)
                i = hay.find(needle, i + 1)
    out.extend(m.start() for m in redact._TRIGGER_REST.finditer(text))
    return out


_FRAGMENTS: dict[int, tuple[frozenset[tuple[str, str]], set[str]]] = {}


def _secret_fragments_of(environ: Mapping[str, str]) -> set[str]:
    """:func:`_secret_fragments`, computed once per distinct environment in this process."""
    items = frozenset(environ.items())
    got = _FRAGMENTS.get(hash(items))
    if got is not None and got[0] == items:
        return got[1]
    out = _secret_fragments(environ)
    if len(_FRAGMENTS) > 16:
        _FRAGMENTS.clear()
    _FRAGMENTS[hash(items)] = (items, out)
    return out


def holds_secret(text: str, value: Any, environ: Mapping[str, str]) -> bool:
    """``True`` when the entry would hold something a manifest redacts: a string that
    redaction changes anywhere in ``value`` (:func:`redaction_changes`, the same verdict as
    comparing ``value`` with :func:`envlock.redact.redact_tree` of it), or a secret piece of
    the environment in ``text``."""
    if redaction_changes(value):
        return True
    return any(piece in text for piece in _secret_fragments_of(environ))
