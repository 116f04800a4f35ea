"""The index of ``envlock find``: diff's facts of every result under some directories, in SQLite.

**What is indexed.** Every regular file under the roots, at any depth, whose name ends in
``.toml`` or ``.json`` and that is an envlock manifest or run record (``manifest.toml``,
``run.toml``, the file of ``envlock.record()``, ``snapshot --format json``): its first 4 KiB
name the ``envlock`` table, or its name is ``manifest.toml``/``run.toml``.  Each is read as
``envlock diff`` reads an input (:func:`read_result`: :func:`envlock.diff.foreign.reading` —
a run record with the environment of the manifest it names —, diff's shape check and
:func:`envlock.diff.facts.extract`), so the facts are diff's, already redacted.  A file that
cannot be read (truncated, corrupted, of a newer schema) is kept as an error, reported in one
line and skipped.

**Incremental.** A file is re-read only when its signature (:func:`envlock.cache.signature`:
device, inode, size, mtime_ns, ctime_ns) changed; files gone from the roots drop out.  A file
whose ctime is within :data:`envlock.cache.RACY_NS` of the scan (possibly still being written
within one clock tick) is read but stored without a signature, so that the next scan reads it
again; a file whose signature changes while it is read is not stored this time.

**Concurrent writers.** The database is in WAL mode with a busy timeout
(:data:`BUSY_TIMEOUT_S`): any number of readers, and writers that wait for each other.  The
files are read outside any transaction; the changes go in one ``BEGIN IMMEDIATE``
transaction, so two ``find`` runs at once each leave a consistent index.

Schema (version :data:`SCHEMA`): ``files`` (path, signature, status, error, meta, areas,
environment fingerprint, fact set), ``names`` (``area:key``), ``vals`` (one per distinct value
of a name, :func:`envlock.find.values.encode`), ``facts`` (file × value: a result's own facts,
``result:*``), ``sets`` and ``set_facts`` (set × value: every other fact, stored once per
distinct set of them — a thousand nodes of one environment hold one set; a set no file names
any more is dropped).  A file's facts are its own and its set's.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from envlock.errors import EnvlockError, ManifestError
from envlock.find.entry import FINGERPRINT_MIN_RANK, Entry, in_fingerprint, read_all, read_result, sig_text
from envlock.find.indexreads import IndexReads, under_root
from envlock.find.walk import walk

__all__ = ["SCHEMA", "BUSY_TIMEOUT_S", "Index", "Entry", "ScanReport", "default_path", "read_result",
           "FINGERPRINT_MIN_RANK", "in_fingerprint"]

#: layout of the database; an index of another layout is rebuilt.
SCHEMA = 2

#: how long a writer waits for another one (seconds).
BUSY_TIMEOUT_S = 60.0

#: files written to the database per transaction (each file's rows change in one transaction).
BATCH = 2000

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, sig TEXT, status TEXT NOT NULL,
    error TEXT, kind TEXT, time TEXT, host TEXT, node TEXT, job TEXT, label TEXT,
    listing TEXT, areas TEXT, fp TEXT, grp INTEGER);
CREATE TABLE IF NOT EXISTS names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vals (
    id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL, enc TEXT NOT NULL, UNIQUE (name_id, enc));
CREATE TABLE IF NOT EXISTS facts (
    file_id INTEGER NOT NULL, val_id INTEGER NOT NULL, PRIMARY KEY (file_id, val_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sets (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS set_facts (
    set_id INTEGER NOT NULL, val_id INTEGER NOT NULL, PRIMARY KEY (set_id, val_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS set_facts_by_val ON set_facts (val_id, set_id);
CREATE INDEX IF NOT EXISTS files_by_grp ON files (grp);
CREATE INDEX IF NOT EXISTS files_by_fp ON files (fp);
CREATE INDEX IF NOT EXISTS files_by_status ON files (status);
CREATE INDEX IF NOT EXISTS files_by_time ON files (time, path);
"""


#: the value→file index: dropped during the load of an empty index and built after it (and
#: made again on open, should a load have been killed before building it).
_FACTS_BY_VAL = "CREATE INDEX IF NOT EXISTS facts_by_val ON facts (val_id, file_id)"


def default_path(environ: dict[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/envlock/find/index.sqlite`` (:func:`envlock.cache.cache_dir`), or
    ``":memory:"`` when ``ENVLOCK_NO_CACHE=1`` (then every run reads every file)."""
    from envlock.cache import cache_dir, is_enabled

    env = dict(os.environ) if environ is None else environ
    if not is_enabled(env):
        return ":memory:"
    return os.path.join(cache_dir("find", env), "index.sqlite")


@dataclass
class ScanReport:
    """What one scan did: counts, and the files that could not be read (path, one line)."""

    seen: int = 0
    read: int = 0
    unchanged: int = 0
    removed: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


class Index(IndexReads):
    """An open index database (see the module docstring).

    :param path: the SQLite file (created if missing), or ``":memory:"``.
    :param make_dir: create the file's missing directories (the default index in the user's
        cache); else a missing directory is an error.
    :raises EnvlockError: the file cannot be opened, is no SQLite database, or (without
        ``make_dir``) its directory does not exist (one line).
    """

    def __init__(self, path: str, *, make_dir: bool = False) -> None:
        self.path = path
        if path != ":memory:":
            parent = os.path.dirname(os.path.abspath(path))
            if make_dir:
                os.makedirs(parent, exist_ok=True)
            elif not os.path.isdir(parent):
                raise EnvlockError(f"{path}: cannot create the index: directory {parent} does not exist")
        try:
            self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if path != ":memory:":
                self._wal()
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA temp_store = MEMORY")
            self.db.execute("PRAGMA cache_size = -65536")
            self._schema()
        except sqlite3.DatabaseError as exc:
            raise EnvlockError(f"{path}: cannot use as envlock find's index ({exc})") from None
        self._names: dict[str, int] | None = None
        self._vals: dict[tuple[str, str], int] = {}
        self._sets: dict[str, int] | None = None
        self._member_ids: dict[int, list[int]] | None = None
        self._version = -1

    def _wal(self) -> None:
        """Switch to WAL, waiting up to ``BUSY_TIMEOUT_S`` for another process that is creating
        the same index: SQLite answers ``database is locked`` to a journal-mode change without
        calling the busy handler, so the wait is this loop's."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.01
        while True:
            try:
                self.db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _schema(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) "
                            "WITHOUT ROWID")
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            from envlock.cache import code_stamp

            stamp = f"{SCHEMA}:{code_stamp()}"
            if row is None or row[0] != stamp:  # another layout or another envlock: start anew
                for table in ("facts", "set_facts", "sets", "vals", "names", "files"):
                    self.db.execute(f"DROP TABLE IF EXISTS {table}")
                for stmt in _DDL.strip().split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (stamp,))
            self.db.execute(_FACTS_BY_VAL)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # -- scanning -------------------------------------------------------------------------

    def update(self, roots: Sequence[str], *, jobs: int | None = None) -> ScanReport:
        """Bring the index up to date with the files under ``roots``.

        One ``SELECT`` of the known signatures under ``roots``, one walk (:func:`walk`) compared
        against it; only new and changed files are read (:func:`read_all`), their rows written
        in transactions of :data:`BATCH` files.

        :param jobs: processes reading files (default: the usable CPUs, at most
            :data:`envlock.find.entry.MAX_JOBS`; files are read in this process when few changed).
        :returns: what was read and removed, and the files that could not be read or were
            skipped (a FIFO, a file too large, one that cannot be opened), one line each.
        """
        from envlock.cache import RACY_NS

        t0 = time.perf_counter()
        started = time.time_ns()
        report = ScanReport()
        roots = [os.path.abspath(r) for r in roots]
        known = self._known(roots)
        todo: list[tuple[str, str | None]] = []
        skipped: list[Entry] = []
        seen: set[str] = set()
        for path, sig, why in walk(roots):
            if path in seen:
                continue
            seen.add(path)
            text = None if sig is None else sig_text(sig)
            old = known.get(path)
            if old is not None and text is not None and old[1] == text:
                report.unchanged += 1
                if old[2] == "error":
                    report.errors.append((path, old[3]))
                continue
            racy = sig is None or sig[4] >= started - RACY_NS
            if why is not None:  # told from its stat alone: never opened
                skipped.append(Entry(path, None if racy else text, "error", why))
            else:
                todo.append((path, None if racy else text))
        report.seen = len(seen)
        gone = [known[p][0] for p in known if p not in seen]
        bulk = not known and self._empty()
        batch: list[Entry] = []
        replaced = False
        try:
            if bulk:  # a cold index: the value→file index is built once, after the load
                self.db.execute("DROP INDEX IF EXISTS facts_by_val")
            for e in itertools.chain(skipped, read_all(todo, jobs)):  # batches: memory bounded
                if e.status != "skip":
                    report.read += 1
                if e.status == "error":
                    report.errors.append((e.path, e.error))
                batch.append(e)
                replaced = replaced or e.path in known
                if len(batch) >= BATCH:
                    self._apply(batch, [])
                    batch = []
            if batch or gone:
                self._apply(batch, gone)
            if gone or replaced:
                self._drop_unused_sets()
        finally:
            if bulk:
                self.db.execute(_FACTS_BY_VAL)
        report.errors.sort()
        report.removed = len(gone)
        report.seconds = time.perf_counter() - t0
        return report

    def _known(self, roots: Sequence[str]) -> dict[str, tuple[int, str | None, str, str]]:
        """``{path: (id, signature, status, error)}`` of the indexed files under ``roots``."""
        known: dict[str, tuple[int, str | None, str, str]] = {}
        for root in roots:
            if os.path.isdir(root):
                rows = self.db.execute("SELECT path, id, sig, status, error FROM files "
                                       "WHERE path >= ? AND path < ?", under_root(root))
            else:
                rows = self.db.execute("SELECT path, id, sig, status, error FROM files WHERE path = ?",
                                       (root,))
            for path, fid, sig, status, error in rows:
                known[path] = (fid, sig, status, error or "")
        return known

    def _empty(self) -> bool:
        return self.db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None

    def _apply(self, entries: list[Entry], gone: list[int]) -> None:
        """Write ``entries`` (replacing their files' rows) and drop the files ``gone``, in one
        ``BEGIN IMMEDIATE`` transaction: new names and values are added with set-wise
        ``INSERT … SELECT`` from a temporary table, the rows with ``executemany``.  The ids
        this connection remembers (values, sets) are forgotten when another one committed
        meanwhile (``PRAGMA data_version``): it may have dropped a set."""
        db = self.db
        self._member_ids = None
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._vals, self._sets, self._names = {}, None, None
            db.executemany("DELETE FROM facts WHERE file_id = ?", ((fid,) for fid in gone))
            db.executemany("DELETE FROM files WHERE id = ?", ((fid,) for fid in gone))
            if entries:
                self._write(entries)
            db.execute("COMMIT")
            self._version = version
        except BaseException:
            db.execute("ROLLBACK")
            self._vals, self._sets = {}, None
            raise

    def _drop_unused_sets(self) -> None:
        """Drop the fact sets no file names (their files changed or went)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            unused = "SELECT id FROM sets WHERE id NOT IN (SELECT grp FROM files WHERE grp IS NOT NULL)"
            db.execute(f"DELETE FROM set_facts WHERE set_id IN ({unused})")
            db.execute(f"DELETE FROM sets WHERE id IN ({unused})")
            self._member_ids = None
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._sets = None

    def _ids(self, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The value ids of ``(area:key, encoded value)`` pairs, adding the new ones (set-wise,
        through a temporary table)."""
        db = self.db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS want (name TEXT NOT NULL, enc TEXT NOT NULL)")
        db.execute("DELETE FROM temp.want")
        db.executemany("INSERT INTO temp.want VALUES (?, ?)", wanted)
        db.execute("INSERT OR IGNORE INTO names (name) SELECT DISTINCT name FROM temp.want")
        db.execute("INSERT OR IGNORE INTO vals (name_id, enc) SELECT n.id, w.enc FROM temp.want w "
                   "JOIN names n ON n.name = w.name")
        self._names = None
        return {(name, enc): vid for name, enc, vid in db.execute(
            "SELECT w.name, w.enc, v.id FROM temp.want w JOIN names n ON n.name = w.name "
            "JOIN vals v ON v.name_id = n.id AND v.enc = w.enc")}

    def _set_ids(self) -> dict[str, int]:
        if self._sets is None:
            self._sets = dict(self.db.execute("SELECT key, id FROM sets"))
        return self._sets

    def _write(self, entries: list[Entry]) -> None:
        db = self.db
        vals = self._vals
        sets = self._set_ids()
        new_sets: dict[str, tuple[tuple[str, str], ...]] = {}
        for e in entries:
            if e.set_key and e.set_key not in sets:
                new_sets.setdefault(e.set_key, e.shared)
        missing = {f for facts in new_sets.values() for f in facts if f not in vals}
        own = {f for e in entries for f in e.facts}  # one result's mostly: not remembered
        got = self._ids(missing | own) if missing or own else {}
        vals.update((f, got[f]) for f in missing)
        for key, facts in new_sets.items():
            sid = db.execute("INSERT INTO sets (key) VALUES (?)", (key,)).lastrowid or 0  # never 0
            db.executemany("INSERT OR IGNORE INTO set_facts (set_id, val_id) VALUES (?, ?)",
                           zip(itertools.repeat(sid), map(vals.__getitem__, facts)))
            sets[key] = sid
        paths = [(e.path,) for e in entries]
        db.executemany("DELETE FROM facts WHERE file_id = (SELECT id FROM files WHERE path = ?)", paths)
        db.executemany("DELETE FROM files WHERE path = ?", paths)
        first = db.execute("SELECT coalesce(max(id), 0) + 1 FROM files").fetchone()[0]
        db.executemany(
            "INSERT INTO files (id, path, sig, status, error, kind, time, host, node, job, label, "
            "listing, areas, fp, grp) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            ((first + i, e.path, e.sig, e.status, e.error, e.kind, e.time, e.host, e.node, e.job,
              e.label, e.listing, e.areas, e.fp, sets[e.set_key] if e.set_key else None)
             for i, e in enumerate(entries)))
        db.executemany("INSERT OR IGNORE INTO facts (file_id, val_id) VALUES (?, ?)",
                       ((first + i, got[f]) for i, e in enumerate(entries) for f in e.facts))



def check_db_path(path: str) -> str:
    """``path`` of an ``--index FILE``; a directory, or a file in a directory that does not
    exist (never created: a mistyped path is no new directory), is refused (one line).

    :raises ManifestError: ``path`` is a directory, or its directory does not exist.
    """
    if os.path.isdir(path):
        raise ManifestError(f"--index {path}: is a directory (give the index file's path)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ManifestError(f"--index {path}: directory {parent} does not exist (create it first)")
    return path
