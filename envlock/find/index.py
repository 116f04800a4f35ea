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
environment fingerprint), ``names`` (``area:key``), ``vals`` (one per distinct value of a
name, :func:`envlock.find.values.encode`), ``facts`` (file × value).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from envlock.errors import EnvlockError, ManifestError
from envlock.find.values import encode

__all__ = ["SCHEMA", "BUSY_TIMEOUT_S", "Index", "Entry", "ScanReport", "default_path", "read_result",
           "FINGERPRINT_MIN_RANK", "in_fingerprint"]

#: layout of the database; an index of another layout is rebuilt.
SCHEMA = 1

#: how long a writer waits for another one (seconds).
BUSY_TIMEOUT_S = 60.0

#: the lowest class rank (envlock/data/impact.toml) of a fact in the environment fingerprint:
#: the interpreter and C library (50) and everything diff ranks above it.
FINGERPRINT_MIN_RANK = 50

#: files written to the database per transaction (each file's rows change in one transaction).
BATCH = 2000

#: the most bytes of a file read to tell whether it is a result.
_SNIFF = 4096

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, sig TEXT, status TEXT NOT NULL,
    error TEXT, kind TEXT, time TEXT, host TEXT, node TEXT, job TEXT, label TEXT,
    listing TEXT, areas TEXT, fp TEXT);
CREATE TABLE IF NOT EXISTS names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vals (
    id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL, enc TEXT NOT NULL, UNIQUE (name_id, enc));
CREATE TABLE IF NOT EXISTS facts (
    file_id INTEGER NOT NULL, val_id INTEGER NOT NULL, PRIMARY KEY (file_id, val_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS facts_by_val ON facts (val_id, file_id);
CREATE INDEX IF NOT EXISTS files_by_fp ON files (fp);
CREATE INDEX IF NOT EXISTS files_by_status ON files (status);
"""


def default_path(environ: dict[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/envlock/find/index.sqlite`` (:func:`envlock.cache.cache_dir`), or
    ``":memory:"`` when ``ENVLOCK_NO_CACHE=1`` (then every run reads every file)."""
    from envlock.cache import cache_dir, is_enabled

    env = dict(os.environ) if environ is None else environ
    if not is_enabled(env):
        return ":memory:"
    return os.path.join(cache_dir("find", env), "index.sqlite")


@dataclass(frozen=True)
class Entry:
    """One file as read: ``status`` ``"ok"``, ``"error"`` (``error`` says why, one line) or
    ``"skip"`` (not a result); ``facts`` are ``(area:key, encoded value)``; ``sig`` is
    ``None`` when the file must be read again next time (racy, or changed while read)."""

    path: str
    sig: str | None
    status: str
    error: str = ""
    kind: str = ""
    time: str = ""
    host: str = ""
    node: str = ""
    job: str = ""
    label: str = ""
    listing: str = ""
    areas: str = "{}"
    fp: str = ""
    facts: tuple[tuple[str, str], ...] = ()


@dataclass
class ScanReport:
    """What one scan did: counts, and the files that could not be read (path, one line)."""

    seen: int = 0
    read: int = 0
    unchanged: int = 0
    removed: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


_KB: Any = None


def _kb() -> Any:
    global _KB
    if _KB is None:
        from envlock.diff.impact import load_kb

        _KB = load_kb()
    return _KB


def in_fingerprint(area: str, key: str, kb: Any = None) -> bool:
    """Whether fact ``area:key`` is part of the environment fingerprint: diff's impact model
    gives it a class of rank :data:`FINGERPRINT_MIN_RANK` or more that may explain a
    difference, and it is no fact of the code (class ``code``), the run's outcome (``run:``),
    a random-number state (``process:seed.*``), the result's own record (``result:``) or noise."""
    if kb is None or kb is _KB:
        return _fingerprint_key(area, key)
    return _in_fingerprint(area, key, kb)


@functools.lru_cache(maxsize=65536)
def _fingerprint_key(area: str, key: str) -> bool:
    return _in_fingerprint(area, key, _kb())


def _in_fingerprint(area: str, key: str, kb: Any) -> bool:
    if area in ("result", "run", "code") or (area == "process" and key.startswith("seed.")):
        return False
    comp = kb.component(area, key)
    if comp.cls == "code" or not kb.explains(comp.cls) or kb.rank(comp.cls) < FINGERPRINT_MIN_RANK:
        return False
    return not _noise(kb).match(f"{area}:{key}")


_NOISE: Any = None


def _noise(kb: Any) -> Any:
    global _NOISE
    if _NOISE is None:
        from envlock.diff.impact import Globs

        _NOISE = Globs(kb.noise)
    return _NOISE


def _sig_text(sig: Sequence[int]) -> str:
    return ",".join(map(str, sig))


def _stat_sig(path: str) -> list[int] | None:
    from envlock.cache import signature

    return signature(path)


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else str(v))


def _meta(data: dict[str, Any]) -> dict[str, str]:
    """kind, time, host, node and job of a result (from its ``[envlock]``, ``[run]``,
    ``[process]`` and ``[slurm]`` tables; these are never environment facts)."""
    def table(name: str) -> dict[str, Any]:
        t = data.get(name)
        return t if isinstance(t, dict) else {}

    head, run, proc, slurm = table("envlock"), table("run"), table("process"), table("slurm")
    granted = run.get("granted") if isinstance(run.get("granted"), dict) else {}
    kind = "run" if run else ("record" if proc else "manifest")
    when = _s(run.get("start")) or _s(proc.get("created")) or _s(head.get("created"))
    return {"kind": kind, "time": when, "host": _s(head.get("host")),
            "node": _s(slurm.get("node")) or _s(head.get("host")),
            "job": _s(slurm.get("job-id")) or _s(granted.get("job-id"))}  # type: ignore[union-attr]


def read_result(path: str, sig: str | None) -> Entry:
    """Read one file as ``envlock diff`` reads an input (the one-input path of
    :func:`envlock.diff.load_inputs`) and flatten it into index rows.

    Never raises for a bad file: an unreadable one is an ``"error"`` entry whose ``error`` is
    the reader's one line.
    """
    from envlock.diff import foreign
    from envlock.diff.facts import extract
    from envlock.diff.typecheck import check as check_shape

    try:
        r = foreign.reading(path)
        if r.kind != "manifest":
            return Entry(path, sig, "skip")
        check_shape(r.data, path)
        meta = _meta(r.data)
        kb = _kb()
        fs = extract(r.data, label=meta["node"] or os.path.basename(path), path=path, kind=r.kind,
                     aliases=kb.aliases, listing=r.listing)
    except (EnvlockError, OSError, ValueError, RecursionError) as exc:
        from envlock._io import one_line

        msg = one_line(str(exc) or type(exc).__name__, 300)
        shown = one_line(path)
        return Entry(path, sig, "error", msg[len(shown) + 2:] if msg.startswith(shown + ": ") else msg)
    facts = [(f"{a}:{k}", encode(v)) for (a, k), v in fs.facts.items()]
    for name in ("kind", "time", "host", "node", "job"):
        if meta[name]:
            facts.append((f"result:{name}", encode(meta[name])))
    fp_facts = sorted((n, e) for (a, k), (n, e) in zip(fs.facts, facts, strict=False)
                      if in_fingerprint(a, k, kb))
    fp = hashlib.sha256("\n".join(f"{n}\0{e}" for n, e in fp_facts).encode()).hexdigest()[:20]
    return Entry(path, sig, "ok", "", meta["kind"], meta["time"], meta["host"], meta["node"],
                 meta["job"], fs.label, fs.listing, json.dumps(fs.areas, sort_keys=True), fp,
                 tuple(facts))


def _read_checked(item: tuple[str, str | None]) -> Entry:
    """:func:`read_result`, with the signature taken again after the read: a file that changed
    meanwhile is stored without one (read again next time)."""
    path, sig = item
    entry = read_result(path, sig)
    after = _stat_sig(path)
    if sig is not None and (after is None or _sig_text(after) != sig):
        return Entry(**{**entry.__dict__, "sig": None})
    return entry


def _candidate(path: str, name: str) -> bool:
    """Whether a ``.toml``/``.json`` file may be a result (see the module docstring)."""
    if name in ("manifest.toml", "run.toml", "manifest.json", "run.json"):
        return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, _SNIFF)
    except OSError:
        return False
    finally:
        os.close(fd)
    return b"[envlock]" in head or b'"envlock"' in head


_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv"})


def walk(roots: Iterable[str]) -> Iterator[tuple[str, list[int]]]:
    """``(path, signature)`` of every ``.toml``/``.json`` regular file under ``roots`` (symbolic
    links to files followed, to directories not: no loops), sorted within each directory."""
    stack = [os.path.abspath(r) for r in roots][::-1]
    while stack:
        top = stack.pop()
        if os.path.isfile(top):
            sig = _stat_sig(top)
            if sig is not None:
                yield top, sig
            continue
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in _SKIP_DIRS:
                        subdirs.append(e.path)
                    continue
                if not e.name.endswith((".toml", ".json")):
                    continue
                st = e.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield e.path, [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        stack.extend(reversed(subdirs))


def _under(root: str) -> tuple[str, str]:
    """The half-open range of paths below directory ``root`` (``/`` sorts just before ``0``)."""
    r = root.rstrip("/")
    return r + "/", r + "0"


class Index:
    """An open index database (see the module docstring).

    :param path: the SQLite file (created with its directory), or ``":memory:"``.
    :raises EnvlockError: the file cannot be opened or is no SQLite database (one line).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
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
        self._vals: dict[tuple[int, str], int] = {}

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
                for table in ("facts", "vals", "names", "files"):
                    self.db.execute(f"DROP TABLE IF EXISTS {table}")
                for stmt in _DDL.strip().split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (stamp,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # -- scanning -------------------------------------------------------------------------

    def update(self, roots: Sequence[str], *, jobs: int | None = None) -> ScanReport:
        """Bring the index up to date with the files under ``roots``.

        :param jobs: processes reading files (default: the usable CPUs, at most 8; files are
            read in this process when few changed).
        :returns: what was read and removed, and the files that could not be read.
        """
        from envlock.cache import RACY_NS

        t0 = time.perf_counter()
        started = time.time_ns()
        report = ScanReport()
        roots = [os.path.abspath(r) for r in roots]
        known: dict[str, tuple[int, str | None, str, str]] = {}
        for root in roots:
            if os.path.isfile(root):
                rows = self.db.execute("SELECT path, id, sig, status, error FROM files WHERE path = ?",
                                       (root,))
            else:
                lo, hi = _under(root)
                rows = self.db.execute("SELECT path, id, sig, status, error FROM files "
                                       "WHERE path >= ? AND path < ?", (lo, hi))
            for path, fid, sig, status, error in rows:
                known[path] = (fid, sig, status, error or "")
        todo: list[tuple[str, str | None]] = []
        seen: set[str] = set()
        for path, sig in walk(roots):
            if path in seen:
                continue
            seen.add(path)
            text = _sig_text(sig)
            old = known.get(path)
            if old is not None and old[1] == text:
                report.unchanged += 1
                if old[2] == "error":
                    report.errors.append((path, old[3]))
                continue
            todo.append((path, None if sig[4] >= started - RACY_NS else text))
        report.seen = len(seen)
        gone = [known[p][0] for p in known if p not in seen]
        batch: list[Entry] = []
        self._vals = {}
        for e in self._read(todo, jobs):  # applied in batches: memory stays bounded
            if e.status != "skip":
                report.read += 1
            if e.status == "error":
                report.errors.append((e.path, e.error))
            batch.append(e)
            if len(batch) >= BATCH:
                self._apply(batch, [])
                batch = []
        if batch or gone:
            self._apply(batch, gone)
        report.errors.sort()
        report.removed = len(gone)
        report.seconds = time.perf_counter() - t0
        return report

    @staticmethod
    def _read(todo: list[tuple[str, str | None]], jobs: int | None) -> Iterator[Entry]:
        sniffed = []
        for p, s in todo:
            if _candidate(p, os.path.basename(p)):
                sniffed.append((p, s))
            else:
                yield Entry(p, s, "skip")
        n = jobs if jobs is not None else min(8, len(os.sched_getaffinity(0)) if hasattr(
            os, "sched_getaffinity") else (os.cpu_count() or 1))
        if n <= 1 or len(sniffed) < 200:
            for item in sniffed:
                yield _read_checked(item)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            yield from pool.map(_read_checked, sniffed, chunksize=64)

    def _name_ids(self) -> dict[str, int]:
        if self._names is None:
            self._names = dict(self.db.execute("SELECT name, id FROM names"))
        return self._names

    def _apply(self, entries: list[Entry], gone: list[int]) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._names = None
            names = self._name_ids()
            vals = self._vals
            for fid in gone:
                db.execute("DELETE FROM facts WHERE file_id = ?", (fid,))
                db.execute("DELETE FROM files WHERE id = ?", (fid,))
            rows: list[tuple[int, int]] = []
            for e in entries:
                db.execute("DELETE FROM facts WHERE file_id IN (SELECT id FROM files WHERE path = ?)",
                           (e.path,))
                cur = db.execute(
                    "INSERT INTO files (path, sig, status, error, kind, time, host, node, job, label, "
                    "listing, areas, fp) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(path) DO UPDATE "
                    "SET sig=excluded.sig, status=excluded.status, error=excluded.error, "
                    "kind=excluded.kind, time=excluded.time, host=excluded.host, node=excluded.node, "
                    "job=excluded.job, label=excluded.label, listing=excluded.listing, "
                    "areas=excluded.areas, fp=excluded.fp RETURNING id",
                    (e.path, e.sig, e.status, e.error, e.kind, e.time, e.host, e.node, e.job, e.label,
                     e.listing, e.areas, e.fp))
                fid = cur.fetchone()[0]
                for name, enc in e.facts:
                    nid = names.get(name)
                    if nid is None:
                        nid = db.execute("INSERT INTO names (name) VALUES (?) RETURNING id",
                                         (name,)).fetchone()[0]
                        names[name] = nid
                    vid = vals.get((nid, enc))
                    if vid is None:
                        row = db.execute("SELECT id FROM vals WHERE name_id = ? AND enc = ?",
                                         (nid, enc)).fetchone()
                        vid = row[0] if row else db.execute(
                            "INSERT INTO vals (name_id, enc) VALUES (?, ?) RETURNING id",
                            (nid, enc)).fetchone()[0]
                        vals[(nid, enc)] = vid
                    rows.append((fid, vid))
                if len(rows) > 200_000:
                    db.executemany("INSERT OR IGNORE INTO facts (file_id, val_id) VALUES (?, ?)", rows)
                    rows.clear()
            db.executemany("INSERT OR IGNORE INTO facts (file_id, val_id) VALUES (?, ?)", rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._names = None
            self._vals = {}
            raise

    # -- reading --------------------------------------------------------------------------

    def scope(self, roots: Sequence[str]) -> dict[int, str]:
        """``{file id: path}`` of the readable results under ``roots``."""
        out: dict[int, str] = {}
        for root in (os.path.abspath(r) for r in roots):
            if os.path.isfile(root):
                q = self.db.execute("SELECT id, path FROM files WHERE status = 'ok' AND path = ?", (root,))
            else:
                lo, hi = _under(root)
                q = self.db.execute("SELECT id, path FROM files WHERE status = 'ok' AND path >= ? "
                                    "AND path < ?", (lo, hi))
            out.update(q)
        return out

    def scope_ids(self, roots: Sequence[str]) -> set[int]:
        """The file ids of the readable results under ``roots`` (one index range scan each)."""
        out: set[int] = set()
        for root in (os.path.abspath(r) for r in roots):
            if os.path.isfile(root):
                q = self.db.execute("SELECT json_group_array(id) FROM files WHERE path = ?", (root,))
            else:
                q = self.db.execute("SELECT json_group_array(id) FROM files WHERE path >= ? AND path < ?",
                                    _under(root))
            out.update(json.loads(q.fetchone()[0]))
        bad = json.loads(self.db.execute(
            "SELECT json_group_array(id) FROM files WHERE status != 'ok'").fetchone()[0])
        return out.difference(bad)

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
        """``(file id, value id)`` of the files holding any of ``val_ids`` (fetched as two JSON
        arrays: SQLite builds them, :mod:`json` parses them, no Python object per row)."""
        ids = list(val_ids)
        if not ids:
            return []
        row = self.db.execute(
            "SELECT json_group_array(file_id), json_group_array(val_id) FROM facts WHERE val_id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(ids),)).fetchone()
        return list(zip(json.loads(row[0]), json.loads(row[1]), strict=True))

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

    def brief(self, ids: set[int], limit: int | None = None) -> list[tuple[int, str, str, str, str, str]]:
        """``(id, path, kind, time, host, node)`` of the results ``ids``, ordered by time, then
        path; the first ``limit`` only (SQLite sorts; ``None``: all)."""
        return list(self.db.execute(
            "SELECT id, path, kind, time, host, node FROM files WHERE id IN "
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
        """``(area:key, encoded value)`` of one file."""
        return list(self.db.execute(
            "SELECT n.name, v.enc FROM facts f JOIN vals v ON v.id = f.val_id JOIN names n ON "
            "n.id = v.name_id WHERE f.file_id = ?", (file_id,)))

    def rows(self, ids: Iterable[int]) -> Iterator[tuple[int, str, str]]:
        """``(file id, area:key, encoded value)`` of every fact of ``ids`` (for the export)."""
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            yield from self.db.execute(
                "SELECT f.file_id, n.name, v.enc FROM facts f JOIN vals v ON v.id = f.val_id JOIN "
                f"names n ON n.id = v.name_id WHERE f.file_id IN ({','.join('?' * len(chunk))}) "
                "ORDER BY f.file_id", chunk)


def check_db_path(path: str) -> str:
    """``path`` of an ``--index FILE``; a directory is refused (one line).

    :raises ManifestError: ``path`` is a directory.
    """
    if os.path.isdir(path):
        raise ManifestError(f"--index {path}: is a directory (give the index file's path)")
    return path
