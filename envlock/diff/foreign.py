"""Read inputs of ``envlock diff``: manifests and foreign environment descriptions.

The readers are :mod:`envlock.formats` (one per format, shared with ``verify --lock``,
``restore`` and ``lock -f``); this module keeps diff's view of them: ``(kind, partial manifest,
listing)``, where the partial manifest has the tables the format can tell and ``listing`` says
whether a package it does not list is absent (``"complete"``), unknown (``"partial"``: a spec),
or unknown for pip only (``"conda"``: an explicit list).
"""

from __future__ import annotations

import os
from typing import Any

from envlock.formats import KINDS
from envlock.formats import read as _read
from envlock.formats.conda import parse_url as parse_conda_url
from envlock.manifest._schema import SCHEMA

__all__ = ["read", "parse_conda_url", "parse_toml", "KINDS", "SCHEMA"]


def read(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any], str]:
    """Read one input file.

    :returns: ``(kind, data, listing)``: one of :data:`KINDS`, the (partial) manifest dict, and
        ``"complete"``, ``"partial"`` or ``"conda"``.
    :raises ManifestError: unreadable, empty, malformed or of an unknown format (one line).
    :raises ManifestVersionError: a manifest of a newer schema.
    """
    r = _read(path)
    return r.kind, r.data, r.listing


def parse_toml(text: str, name: str) -> dict[str, Any]:
    """Parse TOML (or JSON, starting with ``{``) text with bounded nesting
    (:func:`envlock.formats._load.load_toml`).

    :raises ManifestError: malformed text.
    """
    from envlock.formats._load import load_toml  # noqa: PLC0415

    return load_toml(text, name)
