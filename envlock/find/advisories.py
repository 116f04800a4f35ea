"""Built-in advisories (``envlock/data/advisories.toml``): known environment bugs and defaults
that changed numbers, each with its public source and the query finding affected results."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from envlock.errors import ManifestError
from envlock.find.query import QueryError, parse

__all__ = ["Advisory", "load_advisories", "ADVISORIES_FILE"]

#: the shipped advisories.
ADVISORIES_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                               "advisories.toml")


@dataclass(frozen=True)
class Advisory:
    """One advisory: ``id``, ``title``, ``summary``, ``source`` (a public URL), ``also`` (more
    sources) and ``query`` (docs/find.md)."""

    id: str
    title: str
    summary: str
    source: str
    query: str
    also: tuple[str, ...] = ()


@functools.lru_cache(maxsize=4)
def load_advisories(path: str = ADVISORIES_FILE) -> tuple[Advisory, ...]:
    """The advisories of ``path`` (default: the shipped file), each query parsed once.

    :raises ManifestError: unreadable or malformed file, a missing or mistyped key, a source
        that is not an ``https://`` URL, or a query that does not parse (one line).
    """
    from envlock.manifest._toml import load_toml, read_text

    data = load_toml(read_text(path), path)
    out = []
    for i, a in enumerate(data.get("advisory") or ()):
        where = f"{path}: advisory[{i}]"
        if not isinstance(a, dict):
            raise ManifestError(f"{where}: not a table")
        for key in ("id", "title", "summary", "source", "query"):
            if not isinstance(a.get(key), str) or not a[key].strip():
                raise ManifestError(f"{where}: '{key}' must be a non-empty string")
        also = a.get("also", [])
        if not isinstance(also, list) or not all(isinstance(x, str) for x in also):
            raise ManifestError(f"{where}: 'also' must be a list of URLs")
        for url in (a["source"], *also):
            if not url.startswith("https://"):
                raise ManifestError(f"{where}: source {url!r} is not an https:// URL")
        try:
            parse(a["query"])
        except QueryError as exc:
            raise ManifestError(f"{where} ({a['id']}): {exc}") from None
        out.append(Advisory(a["id"], a["title"], " ".join(a["summary"].split()), a["source"],
                            a["query"], tuple(also)))
    return tuple(out)
