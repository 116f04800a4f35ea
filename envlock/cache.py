"""envlock's one on-disk cache: answers kept while every input they were computed from is unchanged.

The rule: **a cache may make envlock faster, never different.**  An answer is stored under a
*key* (the question: every argument and every environment variable that changes the answer,
plus envlock's version and the signature of its own code) together with its *witnesses*: the
inputs the computation read, recorded by the code that reads them through a :class:`Recorder`
(no process-wide patching of ``os.stat`` or ``open``).  :func:`memo` returns a stored answer
only while every witness still reads the same; otherwise it computes the answer again and
replaces the entry.

Witness kinds and what "the same" means:

* ``file``: :func:`signature` of the path, following links — ``(st_dev, st_ino, st_size,
  st_mtime_ns, st_ctime_ns)``, or ``None`` for a path that does not exist.  ``st_ctime_ns``
  changes on every write and every metadata change and cannot be set by ``touch``, so a file
  rewritten in place with its old mtime restored is still seen.
* ``link``: the ``lstat`` signature and the ``readlink`` target (a symlink retargeted).
* ``dir``: the directory's signature (a new, removed or renamed entry changes its mtime and
  ctime) — what a directory listing depends on.
* ``env``: the SHA-256 of a variable's value (never the value itself), or ``None`` when unset;
  ``environ``: the SHA-256 of the whole environment (for answers that ran arbitrary code).

Where a computation cannot name all of its inputs it calls :meth:`Recorder.uncacheable` and
its answer is not stored.  Answers nest: a :func:`memo` computation that uses another cached
answer (found or computed) inherits that answer's witnesses, and its refusal to be cached
(:func:`current` is the recorder of the computation running in this thread; a thread started
inside a computation has none, so a computation must record what its threads read).

A cache never holds a secret: an entry that would hold what a manifest redacts — a URL with
user-info or a conda token (:func:`envlock.redact.secret_value`), the value of a variable
whose name looks secret, the credential part of any variable's value — is not written.  Keys,
and the values of recorded variables, are stored only as hashes.

Entries live under ``$XDG_CACHE_HOME/envlock/<namespace>/`` (``~/.cache`` by default), one
JSON file per key, written atomically (temporary file + ``os.replace``); each namespace is
bounded (:data:`MAX_NAMESPACE_BYTES`, least recently used entries evicted first).
``ENVLOCK_NO_CACHE=1`` turns every cache off (nothing read, nothing written).  Any problem
reading or writing an entry is ignored: the caller computes the answer instead.  Entries are
read only as regular files (:mod:`envlock._io`): a FIFO or device planted where an entry would
be is a miss, not a hang.

:func:`signature`, :func:`entry_path`, :func:`load` and :func:`store` are the older
entry-at-a-time interface, kept as thin wrappers over the same format, writer and bound.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from envlock._io import read_text
from envlock._io import write_file
from envlock.errors import EnvlockError
from envlock.cachesecrets import holds_secret
# the names tests/test_cache.py knows them by
from envlock.cachesecrets import redaction_changes as _redaction_changes  # noqa: F401
from envlock.cachesecrets import trigger_hits as _trigger_hits  # noqa: F401

__all__ = [
    "FORMAT", "MAX_NAMESPACE_BYTES", "RACY_NS", "Recorder", "memo", "current", "in_thread", "is_enabled",
    "code_stamp", "signature", "key_digest", "files_digest", "racy",
    "cache_dir", "entry_path", "load", "store",
]

T = TypeVar("T")

#: Layout of an entry file; part of every key.
FORMAT = 3

#: Bytes one namespace may hold before its least recently used entries are evicted
#: (``ENVLOCK_CACHE_MAX_MB`` overrides it).
MAX_NAMESPACE_BYTES = 64 * 1024 * 1024

#: A witness whose ctime is this recent (ns) when a computation started, or later, may have
#: changed after it was read, within one tick of the clock that stamps files (the kernel's
#: coarse clock: 1-10 ms): such an answer is not stored (git's "racily clean" index entries).
RACY_NS = 20_000_000

#: Paths never recorded as witnesses: their contents are not files of the environment.
_VOLATILE = ("/proc/", "/dev/", "/sys/")


def signature(path: str) -> list[int] | None:
    """``[st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns]`` of ``path`` (following
    links), or ``None`` when it does not exist or cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _lsig(path: str) -> list[Any] | None:
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    target = None
    if os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, target]


def _env_hash(value: str | None) -> str | None:
    return None if value is None else hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def _environ_hash(environ: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(environ):
        h.update(f"{k}\0{environ[k]}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def is_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """``False`` when ``ENVLOCK_NO_CACHE`` is set to a non-empty value other than ``0``."""
    env = os.environ if environ is None else environ
    return env.get("ENVLOCK_NO_CACHE", "") in ("", "0")


class Recorder:
    """The inputs one computation read; passed to the ``compute`` function of :func:`memo`.

    Each method records one input and returns what the computation needs from it, so that
    the reading and the recording are one call.

    :param environ: the environment :meth:`env` reads (``os.environ`` when ``None``).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.witnesses: dict[tuple[str, str], Any] = {}
        self.reason: str | None = None

    def _add(self, kind: str, name: str, value: Any) -> None:
        self.witnesses.setdefault((kind, name), value)

    def file(self, path: str | os.PathLike[str]) -> list[int] | None:
        """Record a file (or any path) read or tested for existence; returns its signature."""
        p = os.path.abspath(os.fspath(path))
        if p.startswith(_VOLATILE):
            return signature(p)
        key = ("file", p)
        if key not in self.witnesses:
            self.witnesses[key] = signature(p)
        return self.witnesses[key]  # type: ignore[no-any-return]

    def files(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """:meth:`file` for each path."""
        for p in paths:
            if p:
                self.file(p)

    def link(self, path: str | os.PathLike[str]) -> str | None:
        """Record a path whose being a symlink, and where it points, matters; returns the
        link's target (``None`` for a non-link)."""
        p = os.path.abspath(os.fspath(path))
        sig = _lsig(p)
        self._add("link", p, sig)
        return sig[-1] if sig else None

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        """Record a directory whose listing the computation depends on; returns the listing
        (``[]`` when it cannot be listed)."""
        p = os.path.abspath(os.fspath(path))
        self._add("dir", p, signature(p))
        try:
            return sorted(os.listdir(p))
        except OSError:
            return []

    def directory(self, path: str | os.PathLike[str]) -> None:
        """Record a directory whose entries (a new file in it) could change the answer."""
        p = os.path.abspath(os.fspath(path))
        self._add("dir", p, signature(p))

    def env(self, name: str) -> str | None:
        """Record an environment variable read; returns its value (``None`` when unset)."""
        value = self.environ.get(name)
        self._add("env", name, _env_hash(value))
        return value

    def environment(self) -> None:
        """Record the whole environment (every name and value, hashed): for an answer that
        ran code which may read any variable (a ``.pth`` line, ``sitecustomize``)."""
        self._add("environ", "*", _environ_hash(self.environ))

    def uncacheable(self, reason: str) -> None:
        """Say that the answer depends on inputs that cannot be recorded: it is not stored."""
        if self.reason is None:
            self.reason = reason

    def merge(self, witnesses: Iterable[Any], reason: str | None = None) -> None:
        """Take over another computation's inputs (stored ``[kind, name, signature]`` lists):
        an answer built on a cached answer depends on everything that one depends on."""
        for kind, name, sig in witnesses:
            self._add(kind, name, sig)
        if reason is not None:
            self.uncacheable(reason)

    def entries(self) -> list[list[Any]]:
        """The witnesses as stored: ``[kind, name, signature]``, sorted."""
        return [[k, n, v] for (k, n), v in sorted(self.witnesses.items(), key=lambda kv: kv[0])]


class _Current(threading.local):
    recorder: Recorder | None = None


_CURRENT = _Current()


def current() -> Recorder | None:
    """The :class:`Recorder` of the :func:`memo` computation running in this thread, or
    ``None``.  Code that cannot record its inputs calls ``current().uncacheable(...)`` when
    there is one, so that no answer built on it is stored."""
    return _CURRENT.recorder


def in_thread(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` wrapped to run in another thread as part of the computation running in this one:
    there, :func:`current` is this thread's recorder, so what ``fn`` reads (and the answers it
    takes from the cache) is recorded for the computation as if it ran here."""
    rec = _CURRENT.recorder

    def bound() -> T:
        previous, _CURRENT.recorder = _CURRENT.recorder, rec
        try:
            return fn()
        finally:
            _CURRENT.recorder = previous

    return bound


def _current(kind: str, name: str, environ: Mapping[str, str]) -> Any:
    if kind in ("file", "dir"):
        return signature(name)
    if kind == "link":
        return _lsig(name)
    if kind == "env":
        return _env_hash(environ.get(name))
    if kind == "environ":
        return _environ_hash(environ)
    raise ValueError(kind)


def _valid(witnesses: Any, environ: Mapping[str, str]) -> bool:
    for kind, name, sig in witnesses:
        if _current(kind, name, environ) != sig:
            return False
    return True


@functools.lru_cache(maxsize=1)
def code_stamp() -> str:
    """envlock's version and a hash of the signature of every module file of the package it
    runs from: a changed envlock never reuses its predecessor's answers."""
    from envlock._version import __version__

    h = hashlib.sha256(__version__.encode())
    pkg = os.path.dirname(os.path.abspath(__file__))
    for base, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                p = os.path.join(base, name)
                h.update(f"{p}\0{signature(p)}\0".encode())
    return f"{__version__}+{h.hexdigest()[:16]}"


def cache_dir(namespace: str, environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/envlock/<namespace>`` (``~/.cache/envlock/<namespace>`` by default)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envlock", namespace)


def key_digest(namespace: str, key: Any) -> str:
    """The hex SHA-256 naming ``key`` (any JSON-serializable value) in ``namespace``: it also
    holds :data:`FORMAT`, the namespace and :func:`code_stamp` (another envlock, or the same
    one edited, names the same question differently).  An entry's file name is its first 40
    digits (:func:`entry_path`)."""
    ident = {"format": FORMAT, "ns": namespace, "envlock": code_stamp(), "key": key}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def entry_path(namespace: str, key: Any, environ: Mapping[str, str] | None = None) -> str:
    """The file of the entry for ``key`` (any JSON-serializable value) in ``namespace``; the
    hashed key also holds :data:`FORMAT`, the namespace and :func:`code_stamp`."""
    return os.path.join(cache_dir(namespace, environ), f"{key_digest(namespace, key)[:40]}.json")


def files_digest(paths: Iterable[str]) -> tuple[str, list[list[Any]]]:
    """``(digest, witnesses)``: the hex SHA-256 of every path (as given, sorted, once) with its
    :func:`signature` now, and those ``file`` witnesses (as :meth:`Recorder.entries`).  Equal
    digests: the same paths, unchanged as :func:`memo` means it (the manifest's
    ``[libraries.answer]`` is checked so)."""
    names = sorted({os.fspath(p) for p in paths if p})
    witnesses: list[list[Any]] = [["file", p, signature(p)] for p in names]
    text = json.dumps(witnesses, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(), witnesses


def _read(path: str, environ: Mapping[str, str]) -> tuple[bool, Any]:
    """``(True, {"value", "witness"})`` for a valid entry at ``path``, else ``(False, None)``.
    The entry is read through :func:`envlock._io.read_text` (a regular file only, opened
    non-blocking: a FIFO, a device or a directory where an entry would be is a miss, never a
    wait; at most :data:`envlock._io.MAX_INPUT_BYTES`)."""
    try:
        data = json.loads(read_text(path))
        if data.get("format") != FORMAT or not _valid(data["witness"], environ):
            return False, None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return True, {"value": data["value"], "witness": data["witness"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False, None


def _max_bytes(environ: Mapping[str, str]) -> int:
    try:
        return int(float(environ["ENVLOCK_CACHE_MAX_MB"]) * 1024 * 1024)
    except (KeyError, ValueError):
        return MAX_NAMESPACE_BYTES


def _evict(directory: str, limit: int) -> None:
    """Remove the least recently used entries of ``directory`` until it holds ≤ ¾ of ``limit``."""
    try:
        entries = []
        total = 0
        with os.scandir(directory) as it:
            for e in it:
                if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    entries.append((st.st_mtime_ns, st.st_size, e.path))
                    total += st.st_size
        if total <= limit:
            return
        for _mtime, size, path in sorted(entries):
            if total <= limit * 3 // 4:
                break
            try:
                os.unlink(path)
                total -= size
            except OSError:
                pass
    except OSError:
        pass


def _drop_special(path: str) -> None:
    """Remove a FIFO, socket or device file sitting where an entry goes (the cache directory is
    envlock's own; such a file is never an entry), so that the new entry replaces it; a link
    or a directory stays, and the write then refuses it."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
        os.unlink(path)


def _write(path: str, witnesses: list[list[Any]], value: Any, environ: Mapping[str, str]) -> bool:
    """The one writer: atomically store an entry; ``False`` (nothing written) when it would
    hold a secret or cannot be written."""

    data = {"format": FORMAT, "witness": witnesses, "value": value}
    directory = os.path.dirname(path)
    try:
        text = json.dumps(data, separators=(",", ":"))
        if holds_secret(text, data, environ):
            return False
        _drop_special(path)
        write_file(path, text, force=True)  # temporary file + rename; never through a link
    except (OSError, TypeError, ValueError, EnvlockError):
        return False
    _evict(directory, _max_bytes(environ))
    return True


def memo(
    namespace: str,
    key: Any,
    compute: Callable[[Recorder], T],
    *,
    enabled: bool = True,
    environ: Mapping[str, str] | None = None,
    encode: Callable[[T], Any] | None = None,
    decode: Callable[[Any], T] | None = None,
) -> T:
    """The answer to ``key`` in ``namespace``: stored, while every input it was computed from
    is unchanged, else ``compute(recorder)`` (then stored, unless the computation called
    :meth:`Recorder.uncacheable` or the entry would hold a secret).

    :param namespace: the cache's directory name (``python-query``, ``snapshot-libs``, …).
    :param key: JSON-serializable question: every argument and environment value that changes
        the answer and is known before computing it (inputs found while computing are recorded
        through the :class:`Recorder`).  envlock's version and code are added.
    :param compute: computes the answer, recording what it reads.
    :param enabled: ``False`` computes without reading or writing the cache (``--no-cache``);
        ``ENVLOCK_NO_CACHE=1`` in ``environ`` does the same.
    :param environ: where ``XDG_CACHE_HOME``/``HOME``, ``ENVLOCK_NO_CACHE`` and recorded
        variables are read (``os.environ`` when ``None``).
    :param encode: the answer to its JSON form (identity when ``None``).
    :param decode: the JSON form back to the answer (identity when ``None``); an entry it
        rejects with ``ValueError``, ``KeyError`` or ``TypeError`` is recomputed.
    :returns: the answer; never raises for a cache problem (exceptions of ``compute`` pass).
    """
    env = os.environ if environ is None else environ
    rec = Recorder(env)
    outer = _CURRENT.recorder
    if not (enabled and is_enabled(env)):
        value = _run(compute, rec)
        if outer is not None:
            outer.uncacheable(f"{namespace}: computed without the cache")
        return value
    path = entry_path(namespace, key, env)
    hit, stored = _read(path, env)
    if hit:
        try:
            value = decode(stored["value"]) if decode is not None else stored["value"]
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        else:
            if outer is not None:
                outer.merge(stored["witness"])
            return value  # type: ignore[no-any-return]
    started = time.time_ns()
    value = _run(compute, rec)
    if rec.reason is None and not racy(rec.entries(), started):
        _write(path, rec.entries(), encode(value) if encode is not None else value, env)
    if outer is not None:
        outer.merge(rec.entries(), rec.reason)
    return value


def racy(witnesses: Iterable[list[Any]], started_ns: int) -> bool:
    """``True`` when a file, directory or link witness (``[kind, name, signature]``, as
    :meth:`Recorder.entries`) changed (ctime) at most :data:`RACY_NS` before ``started_ns``
    (:func:`time.time_ns` when the computation started) or later: it may have changed during
    the computation after it was read, so its signature cannot vouch for the answer."""
    limit = started_ns - RACY_NS
    for kind, _name, sig in witnesses:
        if kind in ("file", "dir", "link") and sig is not None and sig[4] >= limit:
            return True
    return False


def _run(compute: Callable[[Recorder], T], rec: Recorder) -> T:
    previous, _CURRENT.recorder = _CURRENT.recorder, rec
    try:
        return compute(rec)
    finally:
        _CURRENT.recorder = previous


# -- the entry-at-a-time interface (kept for callers not yet on memo) -------------------------


def load(path: str) -> Any | None:
    """The value stored at ``path`` (from :func:`entry_path`) if every witness is unchanged,
    else ``None`` (also when ``ENVLOCK_NO_CACHE`` is set)."""
    if not is_enabled():
        return None
    ok, data = _read(path, os.environ)
    if not ok:
        return None
    outer = _CURRENT.recorder
    if outer is not None:
        outer.merge(data["witness"])
    return data["value"]


def store(path: str, witnesses: Iterable[str], payload: Any) -> None:
    """Store ``payload`` at ``path`` with the current signatures of the files ``witnesses``
    (a directory's signature covers its listing); errors are ignored, and nothing is stored
    when ``ENVLOCK_NO_CACHE`` is set or the entry would hold a secret."""
    if not is_enabled():
        return
    rec = Recorder()
    rec.files(witnesses)
    if not racy(rec.entries(), time.time_ns()):
        _write(path, rec.entries(), payload, os.environ)
    outer = _CURRENT.recorder
    if outer is not None:
        outer.merge(rec.entries())
