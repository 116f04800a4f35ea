"""The reading side of :class:`envlock.find.index.Index`: the queries :mod:`envlock.find.matches`
and :mod:`envlock.find.group` ask (the layout is the index module's docstring).

Everything here reads; a write (:meth:`~envlock.find.index.Index.update`) forgets what was
remembered (``_names``, ``_member_ids``).  Lists of ids travel to and from SQLite as JSON arrays
(:func:`json.dumps` in, ``json_group_array`` out): SQLite builds and parses them, no Python
object per row.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["IndexReads", "under_root"]

#: from how many matching ids :meth:`IndexReads.brief` of the first rows walks the time index
#: (measured on 100,000 results: sorting 40,000 ids costs 37 ms, the walk 15 ms; one id 0.1 ms
#: against 9 ms)
_BY_TIME_FROM = 4000


def under_root(root: str) -> tuple[str, str]:
    """The half-open range of paths below directory ``root`` (``/`` sorts just before ``0``)."""
    r = root.rstrip("/")
    return r + "/", r + "0"



def _facts_of(where: str) -> str:
    """The ``(file_id, val_id)`` rows of the files ``where`` selects: their own and their set's."""
    return (f"SELECT file_id, val_id FROM facts WHERE file_id IN (SELECT id FROM files {where}) "
            f"UNION ALL SELECT f.id, s.val_id FROM files f JOIN set_facts s ON s.set_id = f.grp {where}")


class IndexReads:
    """The queries over an open index (the base of :class:`envlock.find.index.Index`, which
    opens ``db`` and writes)."""

    db: sqlite3.Connection
    _names: dict[str, int] | None
    _member_ids: dict[int, list[int]] | None

    def _name_ids(self) -> dict[str, int]:
        if self._names is None:
            self._names = dict(self.db.execute("SELECT name, id FROM names"))
        return self._names

    def scope(self, roots: Sequence[str]) -> dict[int, str]:
        """``{file id: path}`` of the readable results under ``roots``."""
        out: dict[int, str] = {}
        for root in (os.path.abspath(r) for r in roots):
            if os.path.isfile(root):
                q = self.db.execute("SELECT id, path FROM files WHERE status = 'ok' AND path = ?", (root,))
            else:
                q = self.db.execute("SELECT id, path FROM files WHERE status = 'ok' AND path >= ? "
                                    "AND path < ?", under_root(root))
            out.update(q)
        return out

    def _unreadable(self) -> list[int]:
        """The ids of the files that are no result (errors, skipped): few, from their index."""
        return json.loads(self.db.execute(
            "SELECT json_group_array(id) FROM files WHERE status != 'ok'").fetchone()[0])

    def scope_ids(self, roots: Sequence[str]) -> set[int]:
        """The file ids of the readable results under ``roots`` (a scan of the path index a root)."""
        out: set[int] = set()
        for root in (os.path.abspath(r) for r in roots):
            if os.path.isfile(root):
                q = self.db.execute("SELECT json_group_array(id) FROM files WHERE path = ?", (root,))
            else:
                q = self.db.execute("SELECT json_group_array(id) FROM files WHERE path >= ? AND path < ?",
                                    under_root(root))
            out.update(json.loads(q.fetchone()[0]))
        return out.difference(self._unreadable())

    def covers_all(self, roots: Sequence[str]) -> bool:
        """Whether ``roots`` hold every indexed file (two look-ups in the path index): then every
        readable result, every file with a fact set or an own fact, is in scope."""
        inside = [under_root(r) for r in map(os.path.abspath, roots) if not os.path.isfile(r)]
        if len(inside) != 1:
            return False
        lo, hi = inside[0]
        return not self.db.execute("SELECT EXISTS (SELECT 1 FROM files WHERE path < ?) OR EXISTS "
                                   "(SELECT 1 FROM files WHERE path >= ?)", (lo, hi)).fetchone()[0]

    def count_in(self, roots: Sequence[str]) -> int:
        """How many readable results there are under ``roots``."""
        if self.covers_all(roots):
            total = self.db.execute("SELECT count(*) FROM files").fetchone()[0]
            return int(total) - len(self._unreadable())
        return len(self.scope_ids(roots))

    def all_sets(self) -> set[int]:
        """The id of every fact set (every readable result has one, maybe empty)."""
        return set(json.loads(self.db.execute("SELECT json_group_array(id) FROM sets").fetchone()[0]))

    def sets_holding(self, val_ids: Iterable[int]) -> dict[int, set[int]]:
        """``{value id: the fact sets holding it}`` for ``val_ids`` (a value no set holds is
        left out; a result's own ``result:*`` facts are in no set)."""
        ids = json.dumps(list(val_ids))
        if ids == "[]":
            return {}
        return {vid: set(json.loads(sids)) for vid, sids in self.db.execute(
            "SELECT val_id, json_group_array(set_id) FROM set_facts WHERE val_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY val_id", (ids,))}

    def files_in_sets(self, set_ids: Iterable[int], roots: Sequence[str]) -> set[int]:
        """The readable results under ``roots`` whose fact set is one of ``set_ids`` (a scan of
        the set index; only a readable result has a set)."""
        ids = json.dumps(list(set_ids))
        if ids == "[]":
            return set()
        got = set(json.loads(self.db.execute(
            "SELECT json_group_array(id) FROM files WHERE grp IN (SELECT value FROM json_each(?))",
            (ids,)).fetchone()[0]))
        return got if self.covers_all(roots) else got & self.scope_ids(roots)

    def names(self) -> list[str]:
        """Every indexed fact name (``area:key``)."""
        return list(self._name_ids())

    def values(self, name: str) -> list[tuple[int, str]]:
        """``(value id, encoded value)`` of every distinct value of fact ``name``."""
        nid = self._name_ids().get(name)
        if nid is None:
            return []
        return list(self.db.execute("SELECT id, enc FROM vals WHERE name_id = ?", (nid,)))

    def holders(self, val_ids: Sequence[int]) -> list[tuple[int, int]]:
        """``(file id, value id)`` of the files holding any of ``val_ids`` (see :meth:`held_by`)."""
        return [(f, vid) for vid, files in self.held_by(val_ids).items() for f in files]

    def held_by(self, val_ids: Iterable[int]) -> dict[int, set[int]]:
        """``{value id: file ids holding it}`` for ``val_ids`` (a value no file holds is left
        out): the results' own facts, fetched as one JSON array per value (SQLite builds them,
        :mod:`json` parses them, no Python object per row), and the sets holding each value,
        each expanded to its files (:meth:`_members`, read once per connection)."""
        ids = json.dumps(list(val_ids))
        if ids == "[]":
            return {}
        out = {vid: set(json.loads(files)) for vid, files in self.db.execute(
            "SELECT val_id, json_group_array(file_id) FROM facts WHERE val_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY val_id", (ids,))}
        in_sets = self.db.execute("SELECT val_id, json_group_array(set_id) FROM set_facts WHERE val_id IN "
                                  "(SELECT value FROM json_each(?)) GROUP BY val_id", (ids,)).fetchall()
        if in_sets:
            held = [(vid, json.loads(sids)) for vid, sids in in_sets]
            members = self._members(itertools.chain.from_iterable(sids for _, sids in held))
            for vid, sids in held:
                files = out.setdefault(vid, set())
                for sid in sids:
                    files.update(members.get(sid, ()))
        return out

    def _members(self, set_ids: Iterable[int]) -> dict[int, list[int]]:
        """``{set id: file ids}`` of ``set_ids`` (each read once per connection, from the
        ``files_by_grp`` index; forgotten on a write)."""
        known = self._member_ids if self._member_ids is not None else {}
        self._member_ids = known
        todo = json.dumps([s for s in set_ids if s not in known])
        if todo != "[]":
            known.update((sid, json.loads(ids)) for sid, ids in self.db.execute(
                "SELECT grp, json_group_array(id) FROM files WHERE grp IN (SELECT value FROM json_each(?)) "
                "GROUP BY grp", (todo,)))
        return known

    def files(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The ``files`` rows of ``ids``, as dicts."""
        out: dict[int, dict[str, Any]] = {}
        ids = list(ids)
        cols = ("id", "path", "kind", "time", "host", "node", "job", "label", "listing", "areas", "fp")
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for row in self.db.execute(f"SELECT {', '.join(cols)} FROM files WHERE id IN "
                                       f"({','.join('?' * len(chunk))})", chunk):
                out[row[0]] = dict(zip(cols, row, strict=True))
        return out

    def brief(self, ids: set[int], limit: int | None = None) -> list[tuple[int, str, str, str, str, str, int]]:
        """``(id, path, kind, time, host, node, fact set)`` of the results ``ids``, ordered by
        time, then path; the first ``limit`` only (``None``: all).  SQLite sorts: a few ids are
        looked up and sorted, the first rows of many are read in the order of the ``(time,
        path)`` index (:data:`_BY_TIME_FROM` ids or more, where sorting them all costs more
        than the walk)."""
        order = "INDEXED BY files_by_time " if limit is not None and len(ids) >= _BY_TIME_FROM else ""
        return list(self.db.execute(
            f"SELECT id, path, kind, time, host, node, grp FROM files {order}WHERE id IN "
            "(SELECT value FROM json_each(?)) ORDER BY time, path LIMIT ?",
            (json.dumps(sorted(ids)), -1 if limit is None else limit)))

    def lookup(self, name: str, enc: str) -> int | None:
        """The value id of fact ``name`` = ``enc`` (an encoded value), if any result holds it."""
        nid = self._name_ids().get(name)
        if nid is None:
            return None
        row = self.db.execute("SELECT id FROM vals WHERE name_id = ? AND enc = ?", (nid, enc)).fetchone()
        return row[0] if row else None

    def facts_of(self, file_id: int) -> list[tuple[str, str]]:
        """``(area:key, encoded value)`` of one file (its own facts and its set's)."""
        return list(self.db.execute(
            f"SELECT n.name, v.enc FROM ({_facts_of('WHERE id = ?1')}) f JOIN vals v ON v.id = f.val_id "
            "JOIN names n ON n.id = v.name_id", (file_id,)))

    def rows(self, ids: Iterable[int]) -> Iterator[tuple[int, str, str]]:
        """``(file id, area:key, encoded value)`` of every fact of ``ids`` (for the export)."""
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            yield from self.db.execute(
                f"SELECT f.file_id, n.name, v.enc FROM ({_facts_of('WHERE id IN (SELECT value FROM json_each(?1))')}) "
                "f JOIN vals v ON v.id = f.val_id "
                "JOIN names n ON n.id = v.name_id ORDER BY f.file_id", (json.dumps(chunk),))


