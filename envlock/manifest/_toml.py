"""Reading and writing manifest files: the only module that touches TOML/JSON text.

TOML is read by :func:`load_toml`, envlock's one TOML reader (bounded nesting; ``rtoml``, else
:mod:`tomllib`) and written with ``tomli_w``;
JSON with :mod:`json` (sorted as the model orders it, two-space indent).  Writing is atomic
and, without ``force``, create-or-fail (:func:`atomic_write`): a killed job never leaves a
half-written manifest nor a temporary file.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

from envlock._io import one_line
from envlock.errors import ManifestError
from envlock.redact import redact_tree
from envlock._io import InputError
from envlock._io import read_text as read_bounded
from envlock._io import write_file

__all__ = ["MAX_DEPTH", "atomic_write", "check_depth", "check_key_parts", "check_nesting", "dumps", "load_file",
           "load_json", "load_toml", "loads", "read_text"]


#: Deepest nesting of arrays, tables or mappings accepted.  Real manifests and lockfiles nest
#: at most 7 levels (uv.lock, poetry.lock, pylock.toml, conda-lock.yml of tests/formats/foreign and
#: /work/shared/cases); 100 keeps every recursive parser or walker far from Python's recursion
#: limit (1000).
MAX_DEPTH = 100

# TOML/JSON strings and TOML comments: brackets inside them do not nest.
_STRINGS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*')
_BRACKETS = re.compile(r"[\[\]{}]")
# A key of at least MIN + 1 parts (each bare, or a quoted one emptied to Q by _strings_out; blanks
# around the dots, TOML 1.0): at a line's start, in a [table] or [[array]] header, or after the {
# or , of an inline table; then = or the header's ].  No two quantifiers can take the same blank,
# so a failed match costs time linear in the text.
_LONG_KEY = (r"(?m)(?:^(?:[ \t]*\[\[?)?|[{,])(?:[ \t]*[A-Za-z0-9_-]+[ \t]*\.){MIN,}"
             r"[ \t]*[A-Za-z0-9_-]+[ \t]*[=\]]")


def check_nesting(text: str, name: str, limit: int = MAX_DEPTH) -> None:
    """Refuse TOML/JSON text whose brackets nest deeper than ``limit``, before a parser sees it.

    Strings and comments are skipped, so brackets inside them do not count; the count is an upper
    bound of the nesting of arrays and inline tables, the constructs :mod:`tomllib` and
    :mod:`json` parse recursively.  (Dotted keys and ``[a.b.c]`` headers nest without brackets:
    :func:`check_key_parts` refuses a key of too many parts, :func:`check_depth` bounds the
    rest after parsing.)

    :raises ManifestError: deeper than ``limit``.
    """
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for m in _BRACKETS.finditer(_STRINGS.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start()) + 1 if len(text) < 1 << 20 else 0
                where = f" (line {line})" if line else ""
                raise ManifestError(f"{name}: nested more than {limit} levels deep{where}")
        else:
            depth = max(depth - 1, 0)


def _strings_out(m: re.Match[str]) -> str:
    """A comment, emptied; a string, replaced by ``Q`` and the newlines it spans (one key part,
    and line numbers stay true)."""
    return "" if m.group().startswith("#") else "Q" + "\n" * m.group().count("\n")


def check_key_parts(text: str, name: str, limit: int = MAX_DEPTH) -> None:
    """Refuse TOML text with a dotted key or table header of more than ``limit + 1`` parts
    (``a.b.c = 1``, ``[a.b.c]``, ``[[a.b.c]]``, ``{a.b.c = 1}``), before a parser sees it.

    A key of *k* parts nests its value *k - 1* tables deep at least (TOML 1.0, "Keys" and
    "Table"), so such text nests more than ``limit`` levels wherever the key stands; saying so
    here keeps the answer the same whichever parser would judge it: Python 3.11's
    :mod:`tomllib` parses a 5000-part key (:func:`check_depth` then refuses it), ``tomli`` 2.5
    (Python 3.10's parser) refuses keys of more than ``sys.getrecursionlimit()`` parts with its
    own wording.  Quoted key parts are counted as parts, whatever dots they hold; dots inside
    strings and comments are not counted.

    :raises ManifestError: a key of more than ``limit + 1`` parts (one line, with its line).
    """
    if text.count(".") <= limit:
        return
    bare = _STRINGS.sub(_strings_out, text)
    m = re.search(_LONG_KEY.replace("MIN", str(limit + 1)), bare)
    if m:
        line = bare.count("\n", 0, m.start()) + 1
        raise ManifestError(f"{name}: nested more than {limit} levels deep (line {line})")


def check_depth(data: Any, name: str, limit: int = MAX_DEPTH) -> None:
    """Refuse parsed data whose tables/arrays nest more than ``limit`` levels below the top-level
    table (walked with an explicit stack, never recursively), so that no later walker of it (the
    manifest model, redaction, rendering) can hit Python's recursion limit.

    :raises ManifestError: deeper than ``limit``.
    """
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        # the types of a node's children, and of an array of tables' values, are gathered in C:
        # a 10,000-package manifest is checked without a Python step per value
        kinds = set(map(type, children))
        if not _nesting(kinds):
            continue
        if kinds == _TABLE and type(node) is list and depth + 1 <= limit and not _nesting(
                set(map(type, chain.from_iterable(map(dict.values, children))))):
            continue  # an array of flat tables, one level below: nothing nests deeper
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    raise ManifestError(f"{name}: nested more than {limit} levels deep")
                stack.append((child, depth + 1))


_TABLE = {dict}


def _nesting(kinds: set[type]) -> bool:
    """Whether one of ``kinds`` is a table or an array (a dict or list, or a subclass)."""
    return not kinds <= _LEAVES and any(issubclass(k, (dict, list)) for k in kinds)


#: the scalar types the TOML and JSON parsers return, which never nest.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def load_json(text: str, name: str) -> Any:
    """Parse JSON with bounded nesting (:func:`check_nesting`; JSON nests only with brackets).

    :raises ManifestError: malformed or too deeply nested (one line).
    """
    check_nesting(text, name)
    import json  # a TOML input never needs it

    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"{name}: malformed JSON ({one_line(str(exc))})") from None


def load_toml(text: str, name: str, *, exact: bool = False, json: bool = True) -> dict[str, Any]:
    """Parse TOML (or JSON when the text starts with ``{``): envlock's one TOML reader.

    Every TOML input — manifests, run records, lockfiles, impact models, ``uv.toml`` — is parsed
    here, with one rule: at most :data:`MAX_DEPTH` levels of nesting (brackets counted before
    parsing, :func:`check_nesting`; the parsed tables after, :func:`check_depth`), else one
    error line.  ``rtoml`` (Rust, ~15x faster) parses first when installed; on any failure
    :mod:`tomllib` (TOML 1.0; ``tomli`` before Python 3.11) parses again, so errors are worded
    by ``tomllib``.  With ``exact``, only :mod:`tomllib` (what ``packaging.pylock`` users and
    uv's Python tooling parse with) judges the text.

    :param name: the file name shown in error messages.
    :param json: read a text that starts with ``{`` as JSON; ``False`` for a file whose own
        tool reads TOML only (a ``uv.lock`` written as JSON is then malformed TOML, worded by
        :mod:`tomllib`).
    :returns: the top-level table.
    :raises ManifestError: malformed, top level not a table/object, or nested too deeply (one
        line naming ``name``).
    """
    if json and text.lstrip().startswith("{"):
        data = load_json(text, name)
        if not isinstance(data, dict):
            raise ManifestError(f"{name}: top level is not an object")
        check_depth(data, name)
        return data
    parsed: dict[str, Any] | None = None
    try:  # rtoml refuses nesting deeper than its own limit (~80 levels) with an error
        if exact:
            raise ImportError
        import rtoml

        got = rtoml.loads(text)
        if isinstance(got, dict):
            parsed = got
    except ImportError:
        pass
    except Exception:  # noqa: BLE001, S110 - any rtoml failure: tomllib judges and words it
        pass
    if parsed is None:
        check_nesting(text, name)  # before the recursive tomllib sees the text
        check_key_parts(text, name)  # the same answer whichever tomllib/tomli judges it
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        try:
            parsed = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            raise ManifestError(f"{name}: malformed TOML ({one_line(str(exc))})") from None
    check_depth(parsed, name)
    return parsed


def fast_parser() -> Callable[[str], Any] | None:
    """``rtoml``'s ``loads`` when it is installed, else ``None``: for a caller that parses many
    small pieces and sends any piece it fails on back to :func:`load_toml`, which judges and
    words it (``envlock find``'s sections, :mod:`envlock.find.sections`).  The caller applies
    :func:`check_depth` to what it keeps; the parser raises on any text it refuses."""
    try:
        import rtoml
    except ImportError:  # pragma: no cover - rtoml is a dependency
        return None
    loads_: Callable[[str], Any] = rtoml.loads
    return loads_


def loads(text: str, *, name: str = "<string>") -> dict[str, Any]:
    """Parse TOML or JSON text (JSON when it starts with ``{``) with :func:`load_toml`.

    :param name: file name used in error messages.
    :raises ManifestError: malformed text, with the parser's reason, or nested too deeply.
    """
    return load_toml(text, name)


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file that must not be empty.

    :raises ManifestError: missing, not a regular file (a FIFO, a device, a directory), larger
        than 64 MiB, unreadable, not UTF-8, or empty (one line naming the file).
    """

    p = Path(path)
    try:  # regular files only, at most 64 MiB, strict UTF-8 (envlock._io)
        text = read_bounded(p)
    except InputError as exc:
        if "invalid UTF-8" in str(exc):  # the wording manifests and --kb files always had
            raise ManifestError(f"{p}: not a text file (invalid UTF-8)") from None
        raise ManifestError(str(exc)) from None
    if not text.strip():
        raise ManifestError(f"{p}: empty file")
    return text


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse a TOML/JSON file.

    :raises ManifestError: the file cannot be read, is not UTF-8, is empty or is malformed.
    """
    return loads(read_text(path), name=str(Path(path)))


#: the tables that describe an environment (a run record alone has none of them)
_ENVIRONMENT_TABLES = ("python", "pip", "conda", "platform", "cpu")


def with_run_environment(data: dict[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run record (``run.toml`` of ``envlock run``: ``[envlock]``, ``[target]``, ``[run]``)
    with the environment tables of the manifest it names (``[run] manifest``, beside it) added,
    when that file still has the ``manifest-sha256`` the record holds; ``data`` unchanged
    otherwise.  The record's own tables win.  ``show`` and ``diff`` of a run record then see
    the environment the run ran in.
    """
    run = data.get("run")
    if not isinstance(run, dict) or any(k in data for k in _ENVIRONMENT_TABLES):
        return data
    ref = run.get("manifest")
    if not isinstance(ref, str) or not ref or os.path.isabs(ref) or ".." in Path(ref).parts:
        return data
    sibling = Path(path).parent / ref
    try:
        raw = read_text(sibling)
    except (OSError, ValueError):
        return data
    import hashlib

    want = run.get("manifest-sha256")
    if isinstance(want, str) and hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest() != want:
        return data  # changed since the run: not the environment the run ran in
    try:
        env = loads(raw, name=str(sibling))
    except ValueError:
        return data
    merged = {k: v for k, v in env.items() if k not in data}
    return {**data, **merged}


def dumps(data: dict[str, Any], fmt: str = "toml") -> str:
    """Serialize ``data`` as ``"toml"`` or ``"json"``; key order is kept as given.

    Every string passes :func:`envlock.redact.redact_tree` first (secrets out, undecodable
    bytes as ``\\xNN``): whatever a probe missed, no secret reaches a manifest file.
    """
    data = redact_tree(data)
    if fmt == "json":
        import json

        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt != "toml":
        raise ValueError(f"unknown format {fmt!r} (expected 'toml' or 'json')")
    import tomli_w  # only needed when writing TOML

    return tomli_w.dumps(data, multiline_strings=False)


def atomic_write(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; without ``force``, create-or-fail.

    :func:`envlock._io.write_file` with ``special=True``, the one safe-write path (see there):
    a symbolic link at ``path`` is refused even with ``force`` (never written through); with
    ``force`` an existing FIFO or character device (``-o /dev/full``) is written into.

    :raises OutputExistsError: ``path`` exists and ``force`` is false, or it is a symbolic link.
    :raises OSError: the directory is not writable; the disk is full — naming inodes when the
        file system has none left (``statvfs`` ``f_favail``) — with ``filename`` the output path.
    """
    write_file(path, text, force=force, special=True)
