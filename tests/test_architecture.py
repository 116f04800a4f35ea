"""The import graph of ``envlock/``, read from the source: no cycles, and no lower layer importing
a higher one (docs/ARCHITECTURE.md draws the layers).

Every ``import`` that can run counts, also those inside functions (lazy imports): a lazy import
still ties the two modules together.  Imports under ``if TYPE_CHECKING:`` never run and only
name types for the type checker; they are left out of :data:`GRAPH`, but may neither climb layers
nor close a circle all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "envlock"

#: top-level part of envlock → layer; a module may import only its own layer or lower ones.
LAYERS: dict[str, int] = {
    "_version": 0, "_names": 0, "_run": 0, "errors": 0, "redact": 0, "findings": 0, "cache": 0,
    "nvidia": 0, "variants": 0, "_io": 0, "libfamilies": 0, "_untrusted": 0, "_kinds": 0,
    "_selection": 0, "_placeholders": 0, "cachesecrets": 0, "_bounded": 0, "_exit": 0,
    "manifest": 1,
    "formats": 2,
    "libs": 2,
    "probes": 3,
    "diff": 4, "verify": 4, "lock": 4, "reproduce": 4, "runs": 4, "find": 4,
    "render": 5,
    "commands": 6,
    "cli": 7, "__main__": 7, "_entry": 7, "_helpgen": 7, "_helptext": 0, "_termwidth": 0, "": 8,  # "" is the package face, envlock/__init__.py
}
HIGHER_THAN_PROBES = ("diff", "verify", "lock", "render", "commands", "cli")


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _walk(tree: ast.AST, *, typing_only: bool):
    """Nodes of ``tree``; with ``typing_only`` those under ``if TYPE_CHECKING:``, else the rest."""
    stack = [(tree, False)]
    while stack:
        node, under = stack.pop()
        if under == typing_only:
            yield node
        for child in ast.iter_child_nodes(node):
            stack.append((child, under or _is_type_checking(node)))


def _imports(path: Path, *, typing_only: bool = False) -> set[str]:
    out: set[str] = set()
    for node in _walk(ast.parse(path.read_text(encoding="utf-8")), typing_only=typing_only):
        if isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names if a.name.split(".")[0] == "envlock")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "envlock":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in MODULES else _resolve(node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; envlock uses absolute imports")
    return out


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}
TYPING_GRAPH = {m: _imports(p, typing_only=True) - {m} for m, p in MODULES.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative) of ``graph``
    (default: the imports that run)."""
    graph = GRAPH if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_graph_is_read() -> None:
    assert "envlock.manifest" in GRAPH and "envlock.libs.search" in GRAPH
    assert "envlock.libs.elf" in GRAPH["envlock.libs.linkmap"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_no_cycles_even_through_type_only_imports() -> None:
    """A type named under ``if TYPE_CHECKING:`` still ties two modules: a circle through it (as
    verify/checks → verify/context → verify/policy → verify/checks once was) means a shared type
    sits on the wrong side.  Such a type lives in a module both sides import one way."""
    both = {m: GRAPH[m] | TYPING_GRAPH[m] for m in GRAPH}
    assert _cycles(both) == []


def test_type_only_cycle_is_found() -> None:
    both = {m: GRAPH[m] | TYPING_GRAPH[m] for m in GRAPH}
    both["envlock.verify.settings"] = both["envlock.verify.settings"] | {"envlock.verify.checks"}
    found = _cycles(both)
    assert any({"envlock.verify.settings", "envlock.verify.checks"} <= set(c) for c in found)


def test_cycle_finder_finds_a_cycle() -> None:
    saved = dict(GRAPH)
    try:
        GRAPH["envlock.errors"] = {"envlock.manifest"}
        found = _cycles()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)
    assert any("envlock.errors" in c and "envlock.manifest" in c for c in found)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_layers(module: str) -> None:
    top = _top(module)
    assert top in LAYERS, f"{module}: new top-level part {top!r}; give it a layer in LAYERS"
    bad = [m for m in GRAPH[module] | TYPING_GRAPH[module] if LAYERS[_top(m)] > LAYERS[top]]
    assert not bad, f"{module} (layer {LAYERS[top]}) imports higher layers: {bad}"


def test_lower_layers_do_not_climb() -> None:
    """The issue's rule in its own words: manifest, probes and libs import none of the higher parts."""
    for module, deps in GRAPH.items():
        if _top(module) in ("manifest", "probes", "libs"):
            assert not [d for d in deps if _top(d) in HIGHER_THAN_PROBES or d == "envlock"], module


# -- names (issue 27) -------------------------------------------------------------------------------

#: file names every package may have: the package itself and ``python -m``'s entry point.
PACKAGE_FILES = frozenset({"__init__.py", "__main__.py"})

#: module basenames allowed to repeat across packages, each with its reason (none today).
REPEAT_ALLOWED: dict[str, str] = {}


def _repeated_names(paths: list[Path]) -> dict[str, list[str]]:
    """Module basenames (``changes.py``) held by more than one package, with their paths."""
    seen: dict[str, list[str]] = {}
    for p in paths:
        if p.name not in PACKAGE_FILES:
            seen.setdefault(p.name, []).append(p.relative_to(PKG.parent).as_posix())
    return {name: sorted(where) for name, where in seen.items() if len(where) > 1}


def test_module_names_do_not_repeat() -> None:
    """A module's name says what it holds, so that no two rooms have a ``changes.py`` (issue 27)."""
    repeated = _repeated_names(sorted(PKG.rglob("*.py")))
    new = {name: where for name, where in repeated.items() if name not in REPEAT_ALLOWED}
    assert not new, f"module names repeat across packages (rename so each says what it holds): {new}"
    stale = sorted(set(REPEAT_ALLOWED) - set(repeated))
    assert not stale, f"no longer repeated; remove from REPEAT_ALLOWED: {stale}"


def test_repeated_names_are_found() -> None:
    paths = [PKG / "diff" / "changes.py", PKG / "reproduce" / "changes.py", PKG / "diff" / "__init__.py",
             PKG / "lock" / "__init__.py", PKG / "diff" / "facts.py"]
    assert _repeated_names(paths) == {
        "changes.py": ["envlock/diff/changes.py", "envlock/reproduce/changes.py"]}


# -- size and shape (issue 27) ---------------------------------------------------------------------

#: the most lines a module of envlock/ may have, and a function (a method counts as a function).
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

#: the offenders not yet split (issue 27 stays open while this set is not empty; envlock/libs/,
#: formats/ and lock/ are done).  A module is named by its path under the repository root, a
#: function by ``path:qualified.name``.  An entry that is no longer an offender fails the test:
#: the set only shrinks.
ALLOWED: frozenset[str] = frozenset()


def _has_size_reason(tree: ast.Module) -> bool:
    """Whether the module's docstring has a line ``Size: <one-line reason>``."""
    doc = ast.get_docstring(tree) or ""
    return any(line.strip().startswith("Size:") and line.strip()[5:].strip()
               for line in doc.splitlines())


def _size_offenders(path: Path, source: str) -> list[str]:
    """``path`` (module) and ``path:qualname`` (function) entries over the limits, with line counts."""
    rel = path.relative_to(PKG.parent).as_posix()
    tree = ast.parse(source)
    if _has_size_reason(tree):
        return []
    out = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        out.append(f"{rel} ({lines} lines)")
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        out.append(f"{rel}:{name} ({length} lines)")
                stack.append((child, name + "."))
    return out


def test_size_and_shape() -> None:
    """No module over 500 lines, no function over 80, unless the docstring says why (issue 27)."""
    offenders = [o for p in sorted(PKG.rglob("*.py"))
                 for o in _size_offenders(p, p.read_text(encoding="utf-8"))]
    new = [o for o in offenders if o.rpartition(" (")[0] not in ALLOWED]
    assert not new, "over the size limits (split it, or give a `Size: <reason>` docstring line):\n" \
        + "\n".join(new)
    stale = sorted(ALLOWED - {o.rpartition(" (")[0] for o in offenders})
    assert not stale, f"no longer over the limits; remove from ALLOWED: {stale}"


def test_size_rule_finds_offenders() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    src = f'"""A module."""\n\n\nclass K:\n    def m(self):\n{body.replace("    ", "        ")}\n' \
        + "\n" * 500
    found = _size_offenders(PKG / "fake.py", src)
    assert found == ["envlock/fake.py (586 lines)", "envlock/fake.py:K.m (82 lines)"]
    assert _size_offenders(PKG / "fake.py", '"""A module.\n\nSize: one table.\n"""\n' + src) == []
    assert _size_offenders(PKG / "fake.py", '"""A module.\n\nSize:\n"""\n' + src) != []
