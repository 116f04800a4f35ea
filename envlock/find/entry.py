"""One result file as ``envlock find`` indexes it: read as ``envlock diff`` reads an input,
flattened into index rows (:class:`Entry`), with its environment fingerprint.

A file is read by :func:`read_result` (:func:`envlock.diff.foreign.reading` — a run record with
the environment of the manifest it names —, diff's shape check and
:func:`envlock.diff.facts.extract`), so the facts are diff's, already redacted.  A file that
cannot be read (truncated, corrupted, of a newer schema) is an ``"error"`` entry: reported in one
line and skipped.  :func:`read_all` reads many, in a bounded pool of processes when many changed.
A reader parses, shape-checks and flattens each distinct section text once
(:mod:`envlock.find.sections`): the rows are those of the plain reading, at a fraction of its cost
when results share their environment tables.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from typing import TYPE_CHECKING

from envlock.errors import EnvlockError
from envlock.find.values import encode

if TYPE_CHECKING:  # the reader's modules load with the first file read: a query needs none
    from envlock.find.sections import SectionCache

__all__ = ["Entry", "FINGERPRINT_MIN_RANK", "in_fingerprint", "read_result", "read_all", "sig_text",
           "MAX_JOBS"]

#: the lowest class rank (envlock/data/impact.toml) of a fact in the environment fingerprint:
#: the interpreter and C library (50) and everything diff ranks above it.
FINGERPRINT_MIN_RANK = 50

#: the most bytes of a file read to tell whether it is a result.
_SNIFF = 4096

#: the most processes reading files at once (the pool is bounded: memory stays bounded).
MAX_JOBS = 16

#: below this many files to read, they are read in this process (a pool costs more to start).
_POOL_MIN = 200


@dataclass(frozen=True)
class Entry:
    """One file as read: ``status`` ``"ok"``, ``"error"`` (``error`` says why, one line) or
    ``"skip"`` (not a result); ``sig`` is ``None`` when the file must be read again next time
    (racy, or changed while read).  Its facts (``(area:key, encoded value)``) are in two parts:
    ``facts``, the result's own (``result:*``: kind, time, host, node, job), and ``shared``,
    every other, which many results hold alike: the index stores them once per distinct set,
    named ``set_key`` (a hash of them); one reader hands out one tuple per set."""

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
    set_key: str = ""
    shared: tuple[tuple[str, str], ...] = ()


_KB: Any = None
_SECTIONS: SectionCache | None = None


def _sections() -> SectionCache:
    """This process's :class:`~envlock.find.sections.SectionCache`."""
    from envlock.find.sections import SectionCache

    global _SECTIONS
    if _SECTIONS is None:
        _SECTIONS = SectionCache()
    return _SECTIONS


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


def sig_text(sig: Sequence[int]) -> str:
    """A stat signature (:func:`envlock.cache.signature`) as the index stores it."""
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


def read_result(path: str, sig: str | None, *, plain: bool = False) -> Entry:
    """Read one file as ``envlock diff`` reads an input (the one-input path of
    :func:`envlock.diff.load_inputs`) and flatten it into index rows.

    The sections many files share are parsed, shape-checked and flattened once per process
    (:mod:`envlock.find.sections`); the answer is the one diff's own reading gives.

    Never raises for a bad file: an unreadable one is an ``"error"`` entry whose ``error`` is
    the reader's one line.

    :param plain: read exactly as diff does, sharing nothing (the tests' reference).
    """
    try:
        r, meta, flat = _read(path, None if plain else _sections())
    except (EnvlockError, OSError, ValueError, RecursionError) as exc:
        from envlock._io import one_line

        msg = one_line(str(exc) or type(exc).__name__, 300)
        shown = one_line(path)
        return Entry(path, sig, "error", msg[len(shown) + 2:] if msg.startswith(shown + ": ") else msg)
    if r is None or flat is None:
        return Entry(path, sig, "skip")
    fp, key, one, listing, areas = flat
    own = tuple((f"result:{name}", encode(meta[name])) for name in ("kind", "time", "host", "node", "job")
                if meta[name])
    return Entry(path, sig, "ok", "", meta["kind"], meta["time"], meta["host"], meta["node"],
                 meta["job"], meta["node"] or os.path.basename(path), listing, areas, fp, own, key, one)


#: ``(area, key)`` → (``"area:key"``, whether it is in the fingerprint): one look-up a fact.
_NAMES: dict[tuple[str, str], tuple[str, bool]] = {}

#: the fact sets a reader has handed out, by key (bounded: emptied when full).
_SETS: dict[str, tuple[tuple[str, str], ...]] = {}

#: ``(fingerprint, set key, set, listing, areas as JSON)`` of a result's environment facts.
_Flat = tuple[str, str, tuple[tuple[str, str], ...], str, str]


def _flatten(fs: Any) -> _Flat:
    """The index rows of a :class:`~envlock.diff.facts.FactSet`'s facts: each ``(area:key,
    encoded value)``, the fingerprint of those in it, the set they make."""
    shared = []
    fp_facts = []
    names = _NAMES
    for ak, v in fs.facts.items():
        got = names.get(ak)
        if got is None:
            got = names[ak] = (f"{ak[0]}:{ak[1]}", _fingerprint_key(*ak))
        f = (got[0], encode(v))
        shared.append(f)
        if got[1]:
            fp_facts.append(f)
    if len(names) > 65536:
        names.clear()
    fp_facts.sort()
    fp = hashlib.sha256("\n".join(map("\0".join, fp_facts)).encode()).hexdigest()[:20]
    key, one = _one_set(shared)
    return fp, key, one, fs.listing, json.dumps(fs.areas, sort_keys=True)


def _one_set(facts: list[tuple[str, str]]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The key of a fact set and the one tuple of it this reader hands out: the results that
    share it share the object, so that a batch of them pickles it once."""
    key = hashlib.sha256("\n".join(map("\0".join, facts)).encode()).hexdigest()[:32]
    got = _SETS.get(key)
    if got is None:
        if len(_SETS) >= 4096:
            _SETS.clear()
        got = _SETS[key] = tuple(facts)
    return key, got


def _read(path: str, cache: SectionCache | None) -> tuple[Any, dict[str, str], _Flat | None]:
    """``(reading, meta, rows)`` of one file (``reading`` ``None``: no manifest), as diff reads
    it: :func:`envlock.diff.foreign.reading`, the shape check, :func:`envlock.diff.facts.extract`
    (:func:`_flatten`); with ``cache``, the shared tables' answers are the cache's (checked once,
    flattened once, and a file of shared tables only flattened once).

    :raises ManifestError: the file cannot be read (diff's one line).
    """
    from envlock.diff import foreign
    from envlock.diff.facts import extract
    from envlock.diff.typecheck import check as check_shape

    r = foreign.reading(path, parse=None if cache is None else cache.load)
    if r.kind != "manifest":
        return None, {}, None
    if cache is None:
        check_shape(r.data, path)
    else:  # the check is table by table: a shared table that passed once passes
        unchecked = {t: v for t, v in r.data.items() if not cache.marked(f"shape:{t}", v)[0]}
        check_shape(unchecked, path)
        for t, v in unchecked.items():
            cache.mark(f"shape:{t}", v, True)
    meta = _meta(r.data)

    def flat() -> _Flat:
        return _flatten(extract(r.data, label=meta["node"] or os.path.basename(path), path=path,
                                kind=r.kind, aliases=_kb().aliases, listing=r.listing,
                                memo=None if cache is None else cache.remembered))

    # the facts read nothing but the tables besides [envlock] (extract skips it; host and
    # time are the result's own): a file whose other tables are all shared ones has the
    # rows of the last file with those very tables
    key = None if cache is None else cache.whole_key(r.data, _OWN_TABLES)
    if cache is None or key is None:
        return r, meta, flat()
    return r, meta, cache.remembered_whole((r.kind, r.listing, key), r.data, _OWN_TABLES, flat)


#: the tables of a manifest that hold no environment fact (:data:`envlock.diff.facts._SKIP`
#: but ``[target]``, whose kind is a fact).
_OWN_TABLES = frozenset({"envlock"})


def _read_checked(item: tuple[str, str | None]) -> Entry:
    """:func:`read_result`, with the signature taken again after the read: a file that changed
    meanwhile is stored without one (read again next time)."""
    path, sig = item
    entry = read_result(path, sig)
    after = _stat_sig(path)
    if sig is not None and (after is None or sig_text(after) != sig):
        return Entry(**{**entry.__dict__, "sig": None})
    return entry


def _candidate(path: str, name: str) -> str | None:
    """Whether a ``.toml``/``.json`` file may be a result: ``"yes"``, ``"no"``, or why it cannot
    be told (it cannot be opened).  A result is named ``manifest.toml``/``run.toml`` (or
    ``.json``), or its first :data:`_SNIFF` bytes name the ``envlock`` table.  Opened
    non-blocking and checked to be a regular file first: a FIFO never waits."""
    if name in ("manifest.toml", "run.toml", "manifest.json", "run.json"):
        return "yes"
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return "no"
    except OSError as exc:
        return f"cannot open ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "no"
        head = os.read(fd, _SNIFF)
    except OSError as exc:
        return f"cannot read ({exc.strerror})"
    finally:
        os.close(fd)
    return "yes" if b"[envlock]" in head or b'"envlock"' in head else "no"


def jobs_default() -> int:
    """The usable CPUs (``sched_getaffinity``), at most :data:`MAX_JOBS`."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_JOBS, n))


def read_all(todo: Sequence[tuple[str, str | None]], jobs: int | None) -> Iterator[Entry]:
    """The entries of ``todo`` (``(path, signature text or None)``), in order.

    :param jobs: processes reading (default :func:`jobs_default`); the files are read in this
        process when ``jobs`` is 1 or fewer than 200 must be read.
    """
    sniffed = []
    for p, s in todo:
        what = _candidate(p, os.path.basename(p))
        if what == "yes":
            sniffed.append((p, s))
        elif what == "no":
            yield Entry(p, s, "skip")
        else:
            yield Entry(p, s, "error", str(what))
    n = jobs if jobs is not None else jobs_default()
    if n <= 1 or len(sniffed) < _POOL_MIN:
        for item in sniffed:
            yield _read_checked(item)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _kb()  # loaded once before the fork, shared by the readers
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        yield from pool.map(_read_checked, sniffed, chunksize=64)  # a chunk pickles a shared set once
