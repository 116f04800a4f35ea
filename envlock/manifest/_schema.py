"""The manifest schema gate, importable without the model (``envlock diff`` reads manifests
tolerantly and needs only this check)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock.errors import ManifestError, ManifestVersionError

__all__ = ["SCHEMA", "check_header"]

#: Major version of the manifest schema this envlock writes and reads.
SCHEMA = 1


def check_header(data: Any) -> None:
    """Check that ``data`` (parsed TOML/JSON) is an envlock manifest this envlock can read.

    :raises ManifestError: not a table, no ``[envlock]`` table with an integer ``schema``.
    :raises ManifestVersionError: ``schema`` is a newer major than :data:`SCHEMA` (a newer
        minor never changes the major, so it is accepted; unknown tables are kept).
    """
    if not isinstance(data, Mapping):
        raise ManifestError("not an envlock manifest (top level is not a table)")
    head = data.get("envlock")
    if not isinstance(head, Mapping) or "schema" not in head:
        raise ManifestError("not an envlock manifest (no [envlock] table with a schema key)")
    schema = head["schema"]
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise ManifestError(f"[envlock] schema must be an integer, got {schema!r}")
    if schema > SCHEMA:
        raise ManifestVersionError(
            f"manifest schema {schema} is newer than this envlock reads ({SCHEMA}); upgrade envlock"
        )
