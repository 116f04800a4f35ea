"""TOML parsed once per distinct section: how ``envlock find`` reads thousands of manifests
that share most of their text.

A fleet's results come from a few environments: the ``[pip]`` table of a thousand nodes' manifests
is one text, byte for byte; only ``[envlock]`` (host, time) and a few tables differ.
:class:`SectionCache` parses a file as :func:`envlock.manifest._toml.load_toml` does, but one
*section* at a time, each distinct section text once per process:

* the text is cut before each line that starts with ``[`` or ``[[`` and a bare key other than
  the one of the section before (``[pip]``, ``[[pip.packages]]`` … are one section);
* each section is parsed alone (``rtoml``, with :func:`~envlock.manifest._toml.check_depth`), or
  taken from the cache when that exact text was parsed before;
* the file's table is the union of its sections' tables, which must name disjoint top-level keys.

Why the union is the file's parse (TOML 1.0): the cuts are at line starts; a section that parses
alone ends with no string, array or inline table left open, so the next cut is at the start of
an expression in the whole file too, and that expression (starting with ``[``) is a table
header, which resets the current table.  Each section's expressions therefore define keys under
its own top-level keys only, and when no two sections share a top-level key no definition of one
section can meet another's.  A cut inside a multi-line string or array leaves the section before
it unterminated: it does not parse, and the file is parsed whole.  Whenever anything is unusual —
a section that does not parse alone, two sections with one top-level key, JSON text, ``rtoml``
missing — the whole text goes to ``load_toml``, so errors are worded exactly as today.

The parsed tables are shared by every file that has their text: callers must not change them
(no reader of a manifest does: :func:`envlock.manifest._toml.with_run_environment` and
:func:`envlock.runs.unfinished.settle` build new tables).  :meth:`SectionCache.mark` /
:meth:`SectionCache.marked` let a caller remember a per-table answer (the shape check passed, the
facts extracted) for a shared table, by the table object's identity.
"""

from __future__ import annotations

import re
from typing import Any

from envlock.manifest._toml import check_depth, fast_parser, load_toml

__all__ = ["SectionCache", "MAX_CACHED_CHARS"]

#: the most characters of section text kept (per process): beyond it the cache starts anew.
MAX_CACHED_CHARS = 4 * 2**20

#: a line that may open a table: ``[key`` or ``[[key`` followed by ``.``, ``]`` or space (after
#: a newline: a literal prefix, which ``re`` finds fast; the first line is matched apart).
_HEAD = re.compile(r"\n\[\[?([A-Za-z0-9_-]+)[ \t]*[\].]")
_FIRST = re.compile(r"\[\[?([A-Za-z0-9_-]+)[ \t]*[\].]")


class SectionCache:
    """Parsed sections by text (see the module docstring); one per reading process.

    :param max_chars: how much section text is kept before the cache is emptied.
    """

    def __init__(self, max_chars: int = MAX_CACHED_CHARS) -> None:
        self.max_chars = max_chars
        self._parsed: dict[str, dict[str, Any]] = {}
        self._chars = 0
        self._shared: dict[int, object] = {}
        self._marks: dict[tuple[str, int], tuple[object, Any]] = {}
        self._files: dict[tuple[object, ...], tuple[tuple[object, ...], Any]] = {}
        self._rtoml: Any = fast_parser()

    def load(self, text: str, name: str, *, exact: bool = False) -> dict[str, Any]:
        """The top-level table of TOML (or JSON) ``text``: what ``load_toml(text, name,
        exact=exact)`` returns, with shared section tables.

        :raises ManifestError: as :func:`envlock.manifest._toml.load_toml` (it words every error).
        """
        if exact or self._rtoml is None or text[:1] == "{" or text.lstrip()[:1] == "{":
            return load_toml(text, name, exact=exact)
        data = self._sections(text, name)
        return load_toml(text, name) if data is None else data

    def _sections(self, text: str, name: str) -> dict[str, Any] | None:
        cuts = [0]
        first = _FIRST.match(text)
        key = first.group(1) if first else None
        for m in _HEAD.finditer(text):
            if m.group(1) != key:
                key = m.group(1)
                cuts.append(m.start() + 1)  # the line, after its newline
        cuts.append(len(text))
        data: dict[str, Any] = {}
        parsed = self._parsed
        for a, b in zip(cuts, cuts[1:]):
            piece = text[a:b]
            got = parsed.get(piece)
            if got is None:
                got = self._parse(piece, name)
                if got is None:
                    return None
            for k in got:
                if k in data:  # one top-level key in two sections: the whole text decides
                    return None
            data.update(got)
        return data

    def _parse(self, piece: str, name: str) -> dict[str, Any] | None:
        try:
            got = self._rtoml(piece)
        except Exception:  # noqa: BLE001 - any failure: the whole text is parsed and judged
            return None
        if not isinstance(got, dict):
            return None
        try:
            check_depth(got, name)
        except ValueError:
            return None
        if self._chars + len(piece) > self.max_chars:
            self._parsed.clear()
            self._shared.clear()
            self._marks.clear()
            self._files.clear()
            self._chars = 0
        self._parsed[piece] = got
        for v in got.values():
            if type(v) is dict:
                self._shared[id(v)] = v
        self._chars += len(piece)
        return got

    def shared(self, table: object) -> bool:
        """Whether ``table`` is a cached section's top-level table (shared by the files that
        have its text)."""
        return self._shared.get(id(table)) is table

    def mark(self, what: str, table: object, answer: Any) -> None:
        """Remember ``answer`` about ``table`` when it is shared (:meth:`shared`; kept until
        the cache empties); a table of one file only is not remembered."""
        if self.shared(table):
            self._marks[(what, id(table))] = (table, answer)

    def remembered(self, what: str, table: Any, compute: Any) -> Any:
        """``compute()``, or what it returned before for this very shared ``table`` (a
        :data:`envlock.diff.facts.TableMemo` with ``what`` the table's name)."""
        hit, got = self.marked(what, table)
        if not hit:
            got = compute()
            self.mark(what, table, got)
        return got

    def marked(self, what: str, table: object) -> tuple[bool, Any]:
        """``(True, answer)`` when :meth:`mark` recorded one for this very object, else
        ``(False, None)`` (identity, not equality: the object is kept alive beside it)."""
        got = self._marks.get((what, id(table)))
        if got is not None and got[0] is table:
            return True, got[1]
        return False, None

    def whole_key(self, data: dict[str, Any], skip: frozenset[str]) -> tuple[object, ...] | None:
        """A key for the file table ``data`` without its ``skip`` tables, when every other table
        is a shared one (:meth:`shared`) and every other top-level value a plain scalar; else
        ``None``.  Two files with one key have the same tables, object for object."""
        parts: list[object] = []
        for k, v in data.items():
            if k in skip:
                continue
            if type(v) is dict:
                if not self.shared(v):
                    return None
                parts.append((k, id(v)))
            elif type(v) in (str, int, float, bool):
                parts.append((k, type(v).__name__, v))
            else:
                return None
        return tuple(parts)

    def remembered_whole(self, key: tuple[object, ...], data: dict[str, Any], skip: frozenset[str],
                         compute: Any) -> Any:
        """``compute()``, or what it returned for a file of the same :meth:`whole_key` (its
        tables kept alive beside the answer, and compared by identity, until the cache empties)."""
        tables = tuple(v for k, v in data.items() if k not in skip and type(v) is dict)
        got = self._files.get(key)
        if got is not None and len(got[0]) == len(tables) and all(
                a is b for a, b in zip(got[0], tables)):
            return got[1]
        answer = compute()
        self._files[key] = (tables, answer)
        return answer
