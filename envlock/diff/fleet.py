"""Read many node manifests fast: each top-level table parsed, checked and flattened once.

The manifests of one job's nodes (``srun envlock snapshot -o 'runs/{job}/{node}.toml'``) are
the same text but for a few tables (``[envlock]``'s host and time, ``[slurm]``, the node's
``SLURM_*`` variables).  :class:`FleetReader` splits a manifest's text at its top-level table
headers, and keeps, by the exact text of each table (every ``[name]``/``[[name.…]]`` section
of one top-level name), the parsed table, its :func:`envlock.diff.typecheck.check` and the facts
:func:`envlock.diff.facts.extract` makes of it.  A cache keyed by the exact text cannot make
the answer different: the same text parses to the same table.

Tables whose facts depend on each other are one unit, flattened together (``[conda]``,
``[pip]``, ``[python]`` and ``[git]``: conda's records and pip's editable checkouts;
``[env]`` and ``[slurm]``: the scheduler variables; ``[frameworks]`` and its ``threads``
facts): the facts of a file are the union of its units' facts, as :func:`extract` of the
whole file gives them (``tests/diff/test_fleet.py`` checks this on real manifests).

A file this cannot split safely — not ``.toml``, a key/value before the first table, a quoted
top-level table name, one top-level name in two places, a run record (``[run]``), a table
that does not parse alone — is read as :func:`envlock.diff.foreign.reading` reads it (which
also words its errors).
"""

from __future__ import annotations

import os
import re
from typing import Any

from envlock.diff.facts import EXTRACTORS, FactSet, extract
from envlock.errors import EnvlockError
from envlock._bounded import MAX_PACKAGES
from envlock._io import InputError
from envlock._io import read_text as _read
from envlock.manifest._schema import check_header
from envlock.manifest._toml import load_toml

__all__ = ["FleetReader", "Parts"]

#: a node manifest's facts as :meth:`FleetReader.facts` returns them: the shared dicts of
#: the units read before, and a dict of the others.
Parts = tuple[list[dict[tuple[str, str], Any]], dict[tuple[str, str], Any]]

#: a line that opens a top-level table (``[name]``, a bare key); group 1: the name.  It
#: starts with a literal, so that the regex engine finds candidates at C speed.
_TOP = re.compile(r"\n\[([A-Za-z0-9_-]+)\][ \t]*(?:#[^\n]*)?(?=\n|\Z)")
_CONTENT = re.compile(r"^[ \t]*[^#\s]", re.MULTILINE)

#: areas whose facts one table may write for another (see the module docstring)
#: how a package listed once per environment marker is keyed (``name ; marker``)
_MARKED = " ; "

_UNIT = {"python": "package", "code": "package", "slurm": "env", "threads": "frameworks"}

#: at most this many distinct table texts are kept (then the cache starts again): a fleet's
#: per-node tables are each seen once.
_MAX_CACHED = 20_000


def _unit(table: str) -> str:
    area = EXTRACTORS[table][0] if table in EXTRACTORS else table
    return _UNIT.get(area, area)


class FleetReader:
    """Read and flatten node manifests, one at a time, sharing the work of equal tables.

    :param aliases: the impact model's package aliases (:attr:`KB.aliases`).
    """

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self._tables: dict[str, dict[str, Any] | None] = {}
        self._units: dict[tuple[str, ...], tuple[FactSet, bool]] = {}
        self._seen: set[int] = set()
        self._layouts: dict[tuple[str, ...], dict[str, list[str]]] = {}
        #: whether the last file read has a package listed per environment marker
        #: (``name ; marker``): then its keys may need matching to another input's
        self.marked = False

    def facts(self, path: str, text: str, *, union: bool = True
              ) -> tuple[dict[str, Any], FactSet, Parts] | None:
        """``(the manifest's tables, their facts, (shared, own))`` of a node manifest ``text``
        read from ``path`` (facts labelled by nothing yet), or ``None`` when the file must be
        read whole (see the module docstring).  ``shared``: the facts of the units read
        before, one dict a unit (the same objects for every file with the same text of those
        tables; not to be changed); ``own``: the facts of the others; the facts are their
        union.  Without ``union``, ``FactSet.facts`` stays empty unless the file has a package
        listed per environment marker (:attr:`marked`): the caller reads ``(shared, own)``."""
        if not path.endswith(".toml"):
            return None
        # the top-level tables ([name] lines) split the text; every other table line of a
        # part must be one of that name's ([name.sub], [[name.sub]]), counted, not parsed
        heads = [(m.start(), m.group(1)) for m in _TOP.finditer("\n" + text)]
        if not heads or _CONTENT.search(text, 0, heads[0][0]):
            return None
        texts: dict[str, str] = {}
        for i, (at, name) in enumerate(heads):
            end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
            chunk = text[at:end]
            if name in texts or (chunk not in self._tables and chunk.count("\n[") != (
                    chunk.count(f"\n[{name}.") + chunk.count(f"\n[[{name}."))):
                return None
            texts[name] = chunk
        data: dict[str, Any] = {}
        for name, chunk in texts.items():
            body = self._table(name, chunk, path)
            if body is None:
                return None
            data[name] = body
        listed = sum(len(t.get("packages") or ()) for t in (data.get("pip"), data.get("conda"))
                     if isinstance(t, dict) and isinstance(t.get("packages") or (), list))
        if listed > MAX_PACKAGES:
            return None

        try:
            check_header(data)
        except EnvlockError:
            return None
        layout = tuple(texts)
        units = self._layouts.get(layout)
        if units is None:  # the units of these tables, once per order of table names
            units = {}
            for name in sorted(texts, key=lambda k: (k != "conda", k)):
                units.setdefault(_unit(name), []).append(name)
            self._layouts[layout] = units
        fs = FactSet(label="", path=path, kind="manifest")
        facts: list[dict[tuple[str, str], Any]] = []
        parts: list[dict[tuple[str, str], Any]] = []
        own: dict[tuple[str, str], Any] = {}
        self.marked = False
        for names in units.values():
            key = tuple(texts[n] for n in names)
            hit = self._units.get(key)
            if hit is not None:  # shared with the files read before
                part, marked = hit
                parts.append(part.facts)
            else:
                part = extract({n: data[n] for n in names}, label="", path="", kind="manifest",
                               aliases=self.aliases)
                marked = any(_MARKED in k for _, k in part.facts)
                self._keep(self._units, key, (part, marked))
                own.update(part.facts)
            self.marked = self.marked or marked
            facts.append(part.facts)
            fs.areas.update(part.areas)
            fs.generic |= part.generic
            if part.listing != "complete":
                fs.listing = part.listing
        if union or self.marked:
            for f in facts:
                fs.facts.update(f)
        return data, fs, (parts, own)

    def _table(self, name: str, text: str, path: str) -> Any:
        """The parsed and shape-checked body of top-level table ``name`` (``None``: it does
        not parse or check alone; the whole file then says why)."""
        if text in self._tables:
            return self._tables[text]
        from envlock.diff.typecheck import check as check_shape

        try:
            parsed = load_toml(text, path)
            body = parsed.get(name) if len(parsed) == 1 else None
            if body is not None:
                check_shape({name: body}, path)
        except (EnvlockError, ValueError, RecursionError):
            body = None
        self._keep(self._tables, text, body)
        return body

    def _keep(self, cache: dict[Any, Any], key: Any, value: Any) -> None:
        """Keep ``value`` for ``key`` from the second time ``key`` is seen: a node's own
        tables (its ``[envlock]`` and ``[slurm]``) are seen once and never kept."""
        h = hash(key)
        if h not in self._seen:
            if len(self._seen) >= _MAX_CACHED * 8:
                self._seen.clear()
            self._seen.add(h)
            return
        if len(cache) >= _MAX_CACHED:
            cache.clear()
        cache[key] = value


def read_text(path: str) -> str | None:
    """The text of ``path`` as envlock reads an input (regular file, bounded, UTF-8), or
    ``None`` when it cannot be read that way (the whole reader then words the error)."""

    try:
        return _read(os.fspath(path))
    except (InputError, OSError, ValueError):
        return None
