"""``envlock find``: which results were computed in an environment like that?

Walks directories of manifests and run records, keeps an incremental SQLite index of the facts
``envlock diff`` compares (:mod:`envlock.find.index`), and answers queries over them in each
fact's own order (:mod:`envlock.find.query`, :mod:`envlock.find.values`,
:mod:`envlock.find.matches`); ``--group-by environment`` clusters results by environment
fingerprint and explains each cluster against the largest as diff's N-way comparison does
(:mod:`envlock.find.group`); the facts export to Parquet (:mod:`envlock.find.export`); the
built-in advisories are :mod:`envlock.find.advisories`.  docs/find.md is the user's guide.

Example::

    from envlock.find import find
    answer = find(["results/"], "torch < 1.12 and gpu.arch >= sm_80")
    for m in answer.matches:
        print(m.path, m.host, m.facts)
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from envlock.find.index import Index, ScanReport, default_path
from envlock.find.query import QueryError, parse
from envlock.find.operands import check_static
from envlock.find.matches import Answer, Match, search
from envlock.errors import ManifestError

__all__ = ["find", "Index", "Answer", "Match", "ScanReport", "QueryError", "default_path"]


def find(paths: Sequence[str | os.PathLike[str]], query: str | None, *, index: str | None = None,
         update: bool = True, strict: bool = True, limit: int | None = None) -> Answer:
    """Index (incrementally) the results under ``paths`` and answer ``query``.

    :param index: the index file (default :func:`default_path`: the user's cache).
    :param update: bring the index up to date first (else query it as it is).
    :param limit: build only the first ``limit`` matches (by time, then path); ``count`` is all.
    :returns: the answer; its ``errors`` are the files that could not be read (skipped).
    :raises QueryError: a syntax error or (``strict``) an unknown fact name, with the nearest.
    :raises ManifestError: a path does not exist.
    :raises EnvlockError: ``index``'s directory does not exist, or it is no usable index.
    """
    roots = [os.fspath(p) for p in paths]
    for r in roots:
        if not os.path.exists(r):
            raise ManifestError(f"{r}: no such file or directory")
    if query and query.strip():  # a bad query fails before any file is read
        check_static(parse(query))
    with Index(index or default_path(), make_dir=index is None) as ix:
        report = ix.update(roots) if update else ScanReport()
        answer = search(ix, roots, query, strict=strict, limit=limit)
    answer.errors = report.errors
    return answer
