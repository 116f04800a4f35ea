"""Bounded parsing of YAML, TOML and JSON text that envlock does not control.

Every reader of :mod:`envlock.formats` reads its file with :func:`envlock._io.read_text`
(regular files only, 64 MiB cap, strict UTF-8) and parses it here, with limits that hold for
any input:

* **nesting** of arrays/tables/mappings is at most :data:`MAX_DEPTH` levels; deeper input is one
  error line.  TOML and JSON are parsed by envlock's one TOML reader,
  :func:`envlock.manifest._toml.load_toml` (re-exported here), which checks the brackets
  *before* the recursive parsers (``tomllib``, ``json``) see them and the parsed tables after,
  so no ``RecursionError`` can happen; YAML is composed here with the same bound;
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
from envlock.manifest._toml import MAX_DEPTH, check_nesting, load_json, load_toml

__all__ = ["MAX_DEPTH", "MAX_YAML_NODES", "load_yaml", "load_toml", "load_json", "check_nesting"]

#: Most YAML nodes a document may stand for, aliases expanded (a 400 KB conda-lock.yml: ~40,000).
MAX_YAML_NODES = 1_000_000

# brackets of YAML flow collections (an upper bound of their nesting; see _plainly_bounded)
_BRACKETS = re.compile(r"[\[\]{}]")


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
    import yaml  # only YAML inputs pay for it
    from yaml import events, nodes

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
            node = _collection(loader, events, nodes, ev)
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


def _collection(loader: Any, events: Any, nodes: Any, ev: Any) -> Any:
    """The empty sequence or mapping node a start event opens, its tag resolved as PyYAML's
    composer resolves it."""
    cls = nodes.SequenceNode if isinstance(ev, events.SequenceStartEvent) else nodes.MappingNode
    tag = ev.tag
    if tag is None or tag == "!":
        tag = loader.resolve(cls, None, ev.implicit)
    return cls(tag, [], ev.start_mark, None, flow_style=ev.flow_style)
