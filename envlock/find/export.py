"""``envlock find --export FILE.parquet``: the index's facts as one Parquet table, one row per
result × fact, for an engine that queries millions of records (DuckDB, Spark, Trino).

Columns: ``path``, ``kind``, ``time``, ``host``, ``node``, ``job`` (of the result), ``fact``
(diff's ``area:key``), ``value`` (as ``envlock diff`` shows it), ``encoded`` (the exact value,
:func:`envlock.find.values.encode`), ``manager`` (``pip``/``conda`` for a package),
``version`` (a package's or a version-like value's text), ``release`` (its release segments,
zero-padded to :data:`RELEASE_LEN` numbers, so that ``release < [1, 12, 0, 0, 0, 0]`` orders
release-only versions as PEP 440 does), ``number`` (a numeric value; a compute capability as
``major + minor / 10``), ``flag`` (a boolean).  A set-valued fact gives one row per member.

Written with pyarrow (the ``find`` extra: ``pip install 'envlock[find]'``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from envlock.errors import EnvlockError
from envlock.find.index import Index
from envlock.diff.factset import Impl, Pkg, display
from envlock.find.values import cc_number, version_of
from envlock.find.values import decode

__all__ = ["RELEASE_LEN", "export_parquet", "columns_of"]

#: numbers of the ``release`` column.
RELEASE_LEN = 6

_REL = re.compile(r"v?(\d+(?:\.\d+)*)")


def _release(text: str) -> list[int] | None:
    m = _REL.match(text)
    if not m:
        return None
    parts = [int(x) for x in m.group(1).split(".")[:RELEASE_LEN]]
    if any(p > 2**62 for p in parts):
        return None
    return parts + [0] * (RELEASE_LEN - len(parts))


def columns_of(name: str, value: Any) -> Iterator[dict[str, Any]]:
    """The typed columns of one fact value (one dict per member of a set)."""

    base = {"value": display(value), "manager": None, "version": None, "release": None,
            "number": None, "flag": None}
    if isinstance(value, Pkg):
        yield {**base, "manager": value.manager, "version": value.version,
               "release": _release(value.version)}
    elif isinstance(value, Impl):
        yield {**base, "version": value.version, "release": _release(value.version or "")}
    elif isinstance(value, frozenset):
        for m in sorted(value):
            row = {**base, "value": m}
            if name == "gpu:compute-capability":
                cc = cc_number(m)
                row["number"] = cc[0] + cc[1] / 10 if cc else None
            v = version_of(m)
            if _REL.fullmatch(v):
                row["version"], row["release"] = v, _release(v)
            yield row
    elif isinstance(value, bool):
        yield {**base, "flag": value}
    elif isinstance(value, (int, float)):
        yield {**base, "number": float(value)}
    else:
        text = str(value)
        if _REL.fullmatch(text):
            yield {**base, "version": text, "release": _release(text)}
        else:
            yield base


def export_parquet(index: Index, ids: Sequence[int], path: str, *, force: bool = False,
                   batch: int = 100_000) -> int:
    """Write the facts of results ``ids`` to a Parquet file at ``path`` (through
    :func:`envlock._io.write_file`: atomic, create-or-fail without ``force``, never through a
    symbolic link); returns the row count.

    :raises EnvlockError: pyarrow is not installed (``pip install 'envlock[find]'``).
    :raises OutputExistsError: ``path`` exists (without ``force``) or is a symbolic link.
    """
    from envlock._io import check_writable, write_file

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise EnvlockError("--export needs pyarrow: pip install 'envlock[find]'") from None

    schema = pa.schema([("path", pa.string()), ("kind", pa.string()), ("time", pa.string()),
                        ("host", pa.string()), ("node", pa.string()), ("job", pa.string()),
                        ("fact", pa.string()), ("value", pa.string()), ("encoded", pa.string()),
                        ("manager", pa.string()), ("version", pa.string()),
                        ("release", pa.list_(pa.int64())), ("number", pa.float64()),
                        ("flag", pa.bool_())])
    rows = index.files(ids)
    check_writable(path, force=force)  # before the work: an existing file is refused at once
    sink = pa.BufferOutputStream()
    total = 0
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    with pq.ParquetWriter(sink, schema) as writer:
        def flush() -> None:
            writer.write_table(pa.table(cols, schema=schema))
            for v in cols.values():
                v.clear()

        for fid, name, enc in index.rows(sorted(rows)):
            r = rows[fid]
            for typed in columns_of(name, decode(enc)):
                for k in ("path", "kind", "time", "host", "node", "job"):
                    cols[k].append(r[k] or None)
                cols["fact"].append(name)
                cols["encoded"].append(enc)
                for k, v in typed.items():
                    cols[k].append(v)
                total += 1
            if len(cols["fact"]) >= batch:
                flush()
        if cols["fact"]:
            flush()
    write_file(path, sink.getvalue().to_pybytes(), force=force)
    return total
