"""Bounded parsing of YAML, TOML and JSON text that envlock does not control.

Every reader of :mod:`envlock.formats` reads its file with :func:`envlock._io.read_text`
(regular files only, 64 MiB cap, strict UTF-8) and parses it here, with limits that hold for
any input:

* **nesting** of arrays/tables/mappings is at most :data:`MAX_DEPTH` levels; deeper input is one
  error line, checked *before* the recursive parsers (``tomllib``, ``json``) see it, so no
  ``RecursionError`` can happen (``rtoml``, tried first for TOML, has its own depth limit and
  fails cleanly);
* **YAML aliases** are bounded: the document is composed event by event (no recursion) and the
  number of nodes it stands for, counting every alias expansion, is at most
  :data:`MAX_YAML_NODES`, so a "billion laughs" document is refused in milliseconds instead of
  growing to gigabytes when it is walked.

Errors are :class:`envlock.errors.ManifestError` with one line: the file name, what is wrong, and
at most ~200 characters of the input (:func:`envlock._io.one_line`).
"""

from __future__ import annotations

import re
from typing import Any

from envlock._io import one_line
from envlock.errors import ManifestError

__all__ = ["MAX_DEPTH", "MAX_YAML_NODES", "load_yaml", "load_toml", "load_json", "check_nesting"]

#: Deepest nesting of arrays, tables or mappings accepted (real lockfiles nest < 10 levels).
MAX_DEPTH = 100
#: Most YAML nodes a document may stand for, aliases expanded (a 400 KB conda-lock.yml: ~40,000).
MAX_YAML_NODES = 1_000_000

# TOML/JSON strings and TOML comments: brackets inside them do not nest.
_STRINGS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*')
_BRACKETS = re.compile(r"[\[\]{}]")


def check_nesting(text: str, name: str, limit: int = MAX_DEPTH) -> None:
    """Refuse TOML/JSON text whose brackets nest deeper than ``limit``.

    Strings and comments are skipped, so brackets inside them do not count; the count is an upper
    bound of the nesting a TOML or JSON parser would build.

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


def load_json(text: str, name: str) -> Any:
    """Parse JSON with bounded nesting.

    :raises ManifestError: malformed or too deeply nested (one line).
    """
    import json  # noqa: PLC0415

    check_nesting(text, name)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"{name}: malformed JSON ({one_line(str(exc))})") from None


def load_toml(text: str, name: str, *, exact: bool = False) -> dict[str, Any]:
    """Parse TOML (or JSON when the text starts with ``{``) with bounded nesting.

    ``rtoml`` (Rust, ~15x faster) parses first when installed; on any failure :mod:`tomllib`
    parses again, so errors are worded by ``tomllib``.  With ``exact``, only :mod:`tomllib`
    (what ``packaging.pylock`` users and uv's Python tooling parse with) judges the text.

    :raises ManifestError: malformed or too deeply nested (one line).
    """
    if text.lstrip().startswith("{"):
        data = load_json(text, name)
        if not isinstance(data, dict):
            raise ManifestError(f"{name}: top level is not an object")
        return data
    try:  # rtoml refuses nesting deeper than its own limit (~80 levels) with an error
        if exact:
            raise ImportError
        import rtoml  # noqa: PLC0415

        data = rtoml.loads(text)
        if isinstance(data, dict):
            return data
    except ImportError:
        pass
    except Exception:  # noqa: BLE001, S110 - any rtoml failure: tomllib judges and words it
        pass
    check_nesting(text, name)  # before the recursive tomllib sees the text
    import sys  # noqa: PLC0415

    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # pragma: no cover
        import tomli as tomllib  # noqa: PLC0415
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ManifestError(f"{name}: malformed TOML ({one_line(str(exc))})") from None


def load_yaml(text: str, name: str, *, max_nodes: int = MAX_YAML_NODES,
              max_depth: int = MAX_DEPTH, exact: bool = False) -> Any:
    """Parse one YAML document with PyYAML's safe constructor, bounded.

    The node graph is composed from parser events with an explicit stack; an alias counts as the
    whole subtree it refers to.  Construction is PyYAML's own (``SafeConstructor``, iterative for
    mappings and sequences), so values are typed exactly as ``yaml.safe_load`` types them.

    :param exact: scan with PyYAML's pure-Python scanner (``yaml.SafeLoader``, what
        ``yaml.safe_load`` — and so conda-lock's ``parse_conda_lock_file`` — uses; ~7x slower)
        instead of libyaml's, which accepts a few inputs the pure scanner refuses (a tab after
        ``key:``, some plain scalars).
    :raises ManifestError: malformed, more than one document, nested deeper than ``max_depth``, or
        standing for more than ``max_nodes`` nodes (one line).
    """
    import yaml  # noqa: PLC0415 - only YAML inputs pay for it
    from yaml import events, nodes  # noqa: PLC0415

    loader_cls = yaml.SafeLoader if exact else getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = None
    try:
        loader = loader_cls(text)  # the pure-Python reader checks for unprintable characters here
        if _plainly_bounded(text, max_depth):  # no anchor/alias, shallow: libyaml composes
            root = loader.get_single_node()
        else:
            root = _compose(loader, events, nodes, name, max_nodes, max_depth)
        if root is None:
            return None
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(f"{name}: malformed YAML{where} ({one_line(str(problem))})") from None
    except RecursionError:  # pragma: no cover - the depth bound keeps construction shallow
        raise ManifestError(f"{name}: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


_ANCHOR_OR_ALIAS = re.compile(r"(?:^|[\s\[{,:-])[&*][^\s,\]}]")
_BLOCK_INDENT = re.compile(r"^([ \t]*)((?:[-?:][ \t]+)*)", re.MULTILINE)


def _plainly_bounded(text: str, max_depth: int) -> bool:
    """Whether ``text`` can hold no anchor or alias and cannot nest deeper than ``max_depth``:
    then libyaml's own composer (C, recursive) is safe and ~5x faster than the event loop.

    Upper bounds: every flow bracket may open a level (quoted brackets count too), and a block
    level needs one more column of indentation or one more ``- ``/``? ``/``: `` indicator."""
    if _ANCHOR_OR_ALIAS.search(text):
        return False
    if max((len(m.group(1)) + len(m.group(2)) for m in _BLOCK_INDENT.finditer(text)),
           default=0) > max_depth:
        return False
    depth = 0
    for m in _BRACKETS.finditer(text):
        if m.group() in "[{":
            depth += 1
            if depth > max_depth:
                return False
        else:
            depth = max(depth - 1, 0)
    return True


def _compose(loader: Any, events: Any, nodes: Any, name: str, max_nodes: int,
             max_depth: int) -> Any:
    """Compose the single document of ``loader``'s stream without recursion."""
    anchors: dict[str, Any] = {}
    weight: dict[int, int] = {}  # id(node) -> nodes it stands for
    total = 0
    stack: list[list[Any]] = []  # [node, pending mapping key marker]
    root = None
    docs = 0

    def add(node: Any, size: int) -> None:
        nonlocal total, root
        total += size
        if total > max_nodes:
            raise ManifestError(f"{name}: YAML document too large once its aliases are expanded "
                                f"(more than {max_nodes} nodes; aliases are bounded)")
        if stack:
            parent = stack[-1][0]
            if isinstance(parent, nodes.MappingNode):
                if stack[-1][1] is None:
                    stack[-1][1] = node
                else:
                    parent.value.append((stack[-1][1], node))
                    stack[-1][1] = None
            else:
                parent.value.append(node)
            stack[-1][2] += size
        else:
            root = node

    while True:
        ev = loader.get_event()
        if isinstance(ev, events.StreamEndEvent):
            break
        if isinstance(ev, (events.StreamStartEvent, events.DocumentEndEvent)):
            continue
        if isinstance(ev, events.DocumentStartEvent):
            docs += 1
            if docs > 1:
                raise ManifestError(f"{name}: more than one YAML document")
            continue
        if isinstance(ev, events.AliasEvent):
            if ev.anchor not in anchors:
                raise ManifestError(f"{name}: malformed YAML (undefined alias {one_line(ev.anchor)!r})")
            target = anchors[ev.anchor]
            if id(target) not in weight:
                raise ManifestError(f"{name}: malformed YAML (alias {one_line(ev.anchor)!r} "
                                    "refers to a collection that contains it)")
            add(target, weight[id(target)])
            continue
        if isinstance(ev, events.ScalarEvent):
            tag = ev.tag
            if tag is None or tag == "!":
                tag = loader.resolve(nodes.ScalarNode, ev.value, ev.implicit)
            node = nodes.ScalarNode(tag, ev.value, ev.start_mark, ev.end_mark, style=ev.style)
            if ev.anchor is not None:
                anchors[ev.anchor] = node
            weight[id(node)] = 1
            add(node, 1)
            continue
        if isinstance(ev, (events.SequenceStartEvent, events.MappingStartEvent)):
            if len(stack) >= max_depth:
                raise ManifestError(f"{name}: nested more than {max_depth} levels deep "
                                    f"(line {ev.start_mark.line + 1})")
            seq = isinstance(ev, events.SequenceStartEvent)
            tag = ev.tag
            if tag is None or tag == "!":
                tag = loader.resolve(nodes.SequenceNode if seq else nodes.MappingNode, None,
                                     ev.implicit)
            cls = nodes.SequenceNode if seq else nodes.MappingNode
            node = cls(tag, [], ev.start_mark, None, flow_style=ev.flow_style)
            if ev.anchor is not None:
                anchors[ev.anchor] = node
            stack.append([node, None, 1])
            continue
        if isinstance(ev, (events.SequenceEndEvent, events.MappingEndEvent)):
            node, _, size = stack.pop()
            node.end_mark = ev.end_mark
            weight[id(node)] = size
            total -= size - 1  # its children were counted already; add() counts the whole
            add(node, size)
            continue
    return root
