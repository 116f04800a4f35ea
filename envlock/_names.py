"""Project-name normalization (PEP 503), in one place, importable without anything else."""

from __future__ import annotations

import re

__all__ = ["canonicalize"]

_CANON = re.compile(r"[-_.]+")


def canonicalize(name: str) -> str:
    """Normalize a project name as PEP 503 does (like ``packaging.utils.canonicalize_name``):
    lower case, every run of ``-``, ``_`` and ``.`` replaced by one ``-``.

    >>> canonicalize("Foo.Bar_baz")
    'foo-bar-baz'
    """
    if name.islower() and "_" not in name and "." not in name and "--" not in name:
        return name  # already normalized: every name a snapshot writes
    return _CANON.sub("-", name).lower()
