"""PEP 508 markers of a lock's entries, evaluated for one target.

A universal lock (``uv.lock``, ``pylock.toml``, ``pdm.lock``) holds the packages of every
platform, Python version, dependency group and extra; an installed environment is one of them.
:func:`applicable` says which entries apply to a target given its marker environment
(:func:`target_marker_env`), and which of those only a group or an extra needs.  ``verify
--lock`` and ``diff`` (a lock against a manifest) both use it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from envlock._names import canonicalize
from envlock._selection import Chosen, Requested, Selection

__all__ = ["LockEntry", "Selection", "Requested", "marker_holds", "target_marker_env", "applicable",
           "infer_selection", "select_install", "conflict_item", "with_selection",
           "least_costly"]


class LockEntry(Protocol):
    """What :func:`applicable` reads of a lock entry (:class:`envlock.formats.locks.Locked`,
    :class:`envlock.verify.expected.LockedPackage`)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def marker(self) -> str | None: ...
    @property
    def groups(self) -> tuple[tuple[str, str | None], ...]: ...


def marker_holds(marker: str, env: Mapping[str, str], *,
                 selection: Selection | None = None) -> bool:
    """Whether PEP 508 ``marker`` holds in marker environment ``env`` for the extras and groups
    ``selection`` installs (:mod:`packaging.markers` for each comparison; ``extra`` is ``""``
    unless ``env`` sets it).  A variable ``env`` lacks makes its comparison false.

    uv's conflict markers (``extra == 'extra-7-project-cpu'``, ``extra != 'group-7-project-dev'``;
    :func:`conflict_item`) and PEP 751's ``'cpu' in extras`` / ``'dev' in dependency_groups``
    hold when ``selection`` has that extra or group (``None``: none selected), as ``uv sync``
    reads them: several may be selected at once.  A plain ``extra == 'foo'`` (poetry's marker
    of an optional package) holds when ``selection`` has ``extra:foo``, as poetry's installer
    reads it with the chosen extras, unless ``env`` itself sets ``extra``.

    :raises ValueError: ``marker`` is not a valid marker.
    """
    active = selection.items() if selection is not None else frozenset()
    return _eval(_tree(marker), env, active)


def target_marker_env(version: str | None, implementation: str | None, *,
                      machine: str | None = None) -> dict[str, str]:
    """The PEP 508 marker environment of a target interpreter: this machine's values
    (``sys_platform``, ``os_name``, …; envlock reads Linux targets) with the target's own
    ``python_version``, ``python_full_version``, implementation and, when given, machine.

    :param version: the target's ``platform.python_version()`` (``"3.12.3"``), or ``None``
        (then envlock's own is used).
    :param implementation: ``sys.implementation.name`` (``"cpython"``), or ``None``.
    :param machine: ``platform.machine()`` of the target's host (``"aarch64"``), or ``None``.
    """
    from packaging.markers import default_environment

    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    if version:
        parts = version.split(".")
        env["python_full_version"] = version
        env["python_version"] = ".".join(parts[:2])
        if (implementation or "cpython") == "cpython":
            env["implementation_version"] = version  # CPython's is its own version (PEP 508)
    if implementation:
        env["implementation_name"] = implementation
        env["platform_python_implementation"] = {"cpython": "CPython", "pypy": "PyPy"}.get(
            implementation, implementation)
    if machine:
        env["platform_machine"] = machine
    return env


def applicable(packages: Iterable[LockEntry], env: Mapping[str, str],
               selection: Selection | None = None, *,
               conflicts: Sequence[frozenset[str]] = ()) -> tuple[dict[str, str | None], dict[str, tuple[str, ...]]]:
    """Which of a lock's pip entries apply to a target with PEP 508 marker environment ``env``.

    An entry applies when its own marker holds and, where the lock says which installs need
    it (:attr:`envlock.formats.locks.Locked.groups`), one of those groups reaches it under a marker that
    holds (uv's dependency edges: ``colorama`` only where ``sys_platform == 'win32'``).

    :param selection: the extras and groups installed (:class:`Selection`): their entries are
        needed, and conflict markers are read for them.  ``None``: every group is looked at
        on its own (its conflict markers read as if it alone were selected) and counted
        optional — right for a lock without conflicts, ambiguous with them
        (:func:`infer_selection` then picks one).
    :param conflicts: the lock's conflict sets (:attr:`envlock.formats.locks.LockFile.conflicts`):
        a group that conflicts with the selection is not one that could be added to it, so
        its entries are not optional either.
    :returns: ``({name: version}`` of every applicable entry (of two forks that both apply,
        the lock's first; a needed one before an optional one), ``{name: groups})`` for those
        only a dependency group or an extra needs (not installing a group is a choice —
        ``uv sync --no-dev``, ``poetry install --only main``, ``pdm install --prod`` — not a
        broken environment).
    """
    chosen = selection.chosen if selection is not None else frozenset()
    excluded = {g for c in conflicts if c & chosen for g in c - chosen}

    def holds(marker: str | None, sel: Selection | None) -> bool:
        if not marker:
            return True
        try:
            return marker_holds(marker, env, selection=sel)
        except ValueError:
            return True  # read_lock refuses a bad package marker; a bad edge's: count it needed

    needed: dict[str, str | None] = {}
    maybe: dict[str, str | None] = {}
    optional: dict[str, tuple[str, ...]] = {}
    default: set[str] = set()
    for p in packages:
        if p.groups:
            if any(g in ("", *chosen) and holds(m, selection) and holds(p.marker, selection)
                   for g, m in p.groups):
                default.add(p.name)
                needed.setdefault(p.name, p.version)
                continue
            active = sorted({g for g, m in p.groups if g not in chosen and g != ""
                             and g not in excluded
                             and holds(m, Selection(chosen | {g}))
                             and holds(p.marker, Selection(chosen | {g}))})
            if not active:
                continue  # every edge that reaches it is for another platform, Python or choice
            optional[p.name] = tuple(sorted(set(optional.get(p.name, ())) | set(active)))
            maybe.setdefault(p.name, p.version)
        elif holds(p.marker, selection):
            default.add(p.name)
            needed.setdefault(p.name, p.version)
    for name, version in maybe.items():
        needed.setdefault(name, version)
    return needed, {n: g for n, g in optional.items() if n not in default}


#: at most this many extras and groups are tried in every combination; past it, one at a time
_MAX_EXHAUSTIVE = 10


def infer_selection(packages: Sequence[LockEntry], env: Mapping[str, str],
                    installed: Mapping[str, str], *,
                    conflicts: Sequence[frozenset[str]] = ()) -> Selection:
    """The extras and groups an installed environment was most likely synced with: of every
    selection ``uv sync`` allows (no two members of one of the lock's ``conflicts`` sets —
    uv refuses those), the one under which the lock's needed entries and what is installed
    differ least.

    A difference is a needed entry not installed, installed in another version (a ``+cpu``
    torch where ``+cu124`` is needed), or a package of the lock installed that the selection
    does not need.  Ties go to the fewest extras and groups, then to the first by name — one
    consistent choice, the same for the same inputs.

    :param installed: ``{normalized name: version}`` of the target.
    :param conflicts: the lock's conflict sets, in :class:`Selection`'s words.
    """
    from packaging.version import InvalidVersion, Version

    choices = sorted({g for p in packages for g, _m in p.groups if g})
    if not choices:
        return Selection(inferred=True)
    names = {p.name for p in packages}

    def same(a: str | None, b: str) -> bool:
        if a is None or a == b:
            return True
        try:
            return Version(a) == Version(b)
        except InvalidVersion:
            return False

    def cost(sel: Selection) -> int:
        needed, optional = applicable(packages, env, sel)
        required = {n: v for n, v in needed.items() if n not in optional}
        bad = sum(1 for n, v in required.items() if n not in installed or not same(v, installed[n]))
        return bad + sum(1 for n in installed if n in names and n not in required)

    return least_costly(choices, cost, conflicts=conflicts)


def least_costly(choices: Sequence[str], cost: Callable[[Selection], int], *,
                 conflicts: Sequence[frozenset[str]] = ()) -> Selection:
    """Of every selection of ``choices`` ``uv sync`` allows (no two members of one of
    ``conflicts``), the one of least ``cost``; ties go to the fewest extras and groups, then
    to the first by name.  Every combination up to :data:`_MAX_EXHAUSTIVE` choices, past it
    greedily (add the choice that lowers the cost most, while one does).  The search of
    :func:`infer_selection`, and of ``diff``'s lock against an export of it.

    :returns: the selection, ``inferred`` set.
    """
    def allowed(chosen: frozenset[str]) -> bool:
        return all(len(chosen & c) < 2 for c in conflicts)

    def key(chosen: frozenset[str]) -> tuple[int, int, list[str]]:
        return cost(Selection(chosen)), len(chosen), sorted(chosen)

    if len(choices) <= _MAX_EXHAUSTIVE:
        candidates = (frozenset(c) for r in range(len(choices) + 1)
                      for c in itertools.combinations(choices, r))
        best = min((c for c in candidates if allowed(c)), key=key)
    else:  # greedy: add the choice that lowers the difference most, while one does
        best = frozenset()
        while True:
            step = [best | {c} for c in choices if c not in best and allowed(best | {c})]
            nxt = min(step, key=key) if step else None
            if nxt is None or key(nxt)[0] >= key(best)[0]:
                break
            best = nxt
    return Selection(best, inferred=True)


def select_install(packages: Sequence[LockEntry], env: Mapping[str, str],
                   installed: Mapping[str, str] | None, requested: Requested | None, *,
                   conflicts: Sequence[frozenset[str]] = (),
                   given: Chosen | None = None) -> tuple[Selection | None, str]:
    """Which install of a lock's pip ``packages`` to compare a target with — one rule for
    ``verify --lock`` and ``diff``: the extras and groups given
    (``--extra``/``--group``/``--all-extras``/``--all-groups``/``--no-dev``) as the lock's own
    tool takes them (``given``: :func:`envlock.formats.lockchoice.given_choice`, ``restore``'s
    rule; for another lock, :meth:`Requested.resolve`), else the one closest to what is
    ``installed`` (:func:`infer_selection`).

    :param given: the install the options choose of a uv.lock, pdm.lock or poetry.lock, as
        ``uv sync``, ``pdm install`` or ``poetry install`` takes them.
    :param installed: ``{normalized name: version}`` of the target; ``None``: nothing to infer
        from (every group then looked at on its own, as :func:`applicable` does with no
        selection).
    :returns: the selection (``None`` when the lock has no extras or groups, or nothing was
        given and nothing is installed to infer from), and how it was chosen (``"as given"``,
        ``"inferred from what is installed"``, ``""``).
    """
    choices = sorted({g for p in packages for g, _m in p.groups if g})
    if not choices:
        return None, ""
    if given is not None:
        return given.selection, "as given"
    if requested is not None and requested.given:
        return requested.resolve(choices), "as given"
    if installed is None:
        return None, ""
    return (infer_selection(packages, env, installed, conflicts=conflicts),
            "inferred from what is installed")


def with_selection(marker: str, selection: Selection | None) -> str | bool:
    """``marker`` with the extras and groups ``selection`` installs decided, every other
    comparison kept: what ``uv export --extra X`` writes of a uv.lock marker (its conflict
    markers, PEP 751's ``'x' in extras`` and a plain ``extra == 'x'`` read as
    :func:`marker_holds` reads them; ``None``: none selected).

    :returns: ``True`` or ``False`` when nothing else is left to decide, else the rest of the
        marker as PEP 508 text.
    :raises ValueError: ``marker`` is not a valid marker.
    """
    active = selection.items() if selection is not None else frozenset()
    return _with_selection(marker, active & _items(marker))


@lru_cache(maxsize=8192)
def _items(marker: str) -> frozenset[tuple[str, str]]:
    """The extras and groups ``marker`` asks about, in :meth:`Selection.items`' words."""
    return frozenset((got[1][0], canonicalize(got[1][2])) for a in _atoms(_tree(marker))
                     if (got := _atom_item(a)) is not None)


@lru_cache(maxsize=8192)
def _with_selection(marker: str, active: frozenset[tuple[str, str]]) -> str | bool:
    rest = _decided(_tree(marker), active)
    return rest if isinstance(rest, bool) else _text(rest)


def _decided(node: _Node, active: frozenset[tuple[str, str]]) -> _Node | bool:
    if node[0] in ("and", "or"):
        stop = node[0] == "or"  # or: True decides it; and: False does
        parts: list[_Node] = []
        said: set[str] = set()
        for n in node[1]:
            got = _decided(n, active)
            if got is stop:
                return stop
            if not isinstance(got, bool) and _text(got) not in said:  # ``A or A``: ``A``
                said.add(_text(got))
                parts.append(got)
        return (not stop) if not parts else parts[0] if len(parts) == 1 else (node[0], parts)
    item = _atom_item(node)
    if item is None:
        return node
    positive, (kind, _package, name) = item
    return ((kind, canonicalize(name)) in active) == positive


def _text(node: _Node) -> str:
    if node[0] == "or":
        return " or ".join(_text(n) for n in node[1])
    if node[0] == "and":
        return " and ".join(f"({_text(n)})" if n[0] == "or" else _text(n) for n in node[1])
    return _atom_text(node)


# --- uv's conflict markers, and markers as markers -------------------------------------------

#: One token of a PEP 508 marker: a quoted string, a comparison operator, ``and``/``or``, a
#: parenthesis, or a variable name (PEP 508's grammar; PEP 751 adds ``extras`` and
#: ``dependency_groups``).
_TOKEN = re.compile(r"""\s*(?:(?P<str>'[^']*'|"[^"]*")|(?P<op>===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)"""
                    r"""|(?P<kw>and\b|or\b)|(?P<lp>\()|(?P<rp>\))|(?P<var>[A-Za-z_][A-Za-z0-9_.]*))""")
#: uv's encoding of a conflicting extra or group as an ``extra`` value:
#: ``extra-{len(package)}-{package}-{extra}`` / ``group-{len(package)}-{package}-{group}``
#: (uv-resolver ``universal_marker.rs``, ``encode_package_extra``): the length makes the split
#: unambiguous although ``-`` may occur in both names.
_UV_CONFLICT = re.compile(r"(extra|group)-(\d+)-(.+)")

#: A parsed marker: an atom ``(lhs, op, rhs)`` (each side ``("var", name)`` or ``("str", value)``),
#: or ``("and"|"or", [children])``.
_Node = tuple[Any, ...]


def conflict_item(value: str) -> tuple[str, str, str] | None:
    """Decode one of uv's conflict ``extra`` values: ``"extra-7-project-cpu"`` →
    ``("extra", "project", "cpu")``, ``"group-7-project-dev"`` → ``("group", "project", "dev")``;
    ``None`` for an ordinary extra name.  The rule is uv's (uv-resolver ``universal_marker.rs``:
    the decimal is the package name's length in bytes)."""
    m = _UV_CONFLICT.fullmatch(value)
    if not m:
        return None
    n = int(m.group(2)) if len(m.group(2)) < 6 else -1
    tail = m.group(3)
    if n <= 0 or len(tail.encode()) < n + 2:
        return None
    raw = tail.encode()
    if raw[n:n + 1] != b"-":
        return None
    return m.group(1), raw[:n].decode(errors="replace"), raw[n + 1:].decode(errors="replace")


def _parse(text: str) -> _Node:
    """The and/or tree of a marker text packaging already accepted (so the grammar holds)."""
    toks: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read marker at {text[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        val = m.group(kind)
        toks.append((kind, " ".join(val.split()) if kind == "op" else val))
        pos = m.end()
    i = 0

    def side() -> tuple[str, str]:
        nonlocal i
        kind, val = toks[i]
        i += 1
        if kind == "str":
            return "str", val[1:-1]
        if kind == "var":
            return "var", val.replace(".", "_")  # PEP 508's legacy os.name etc.
        raise ValueError(f"unexpected {val!r} in marker")

    def atom() -> _Node:
        nonlocal i
        if toks[i][0] == "lp":
            i += 1
            node = expr()
            if i >= len(toks) or toks[i][0] != "rp":
                raise ValueError("unbalanced parenthesis in marker")
            i += 1
            return node
        lhs = side()
        kind, op = toks[i]
        if kind != "op":
            raise ValueError(f"expected an operator, found {op!r}")
        i += 1
        return (lhs, op, side())

    def chain(word: str, sub: Any) -> _Node:
        nonlocal i
        parts = [sub()]
        while i < len(toks) and toks[i] == ("kw", word):
            i += 1
            parts.append(sub())
        return parts[0] if len(parts) == 1 else (word, parts)

    def expr() -> _Node:
        return chain("or", lambda: chain("and", atom))

    node = expr()
    if i != len(toks):
        raise ValueError("trailing text in marker")
    return node


def _atom_item(node: _Node) -> tuple[bool, tuple[str, str | None, str]] | None:
    """``(positive, (kind, package, name))`` when an atom asks whether an extra or group is
    selected: uv's ``extra == 'extra-7-project-cpu'`` (package known) or PEP 751's ``'cpu' in
    extras`` / ``'dev' in dependency_groups`` (package ``None``: the locked project), or a
    plain PEP 508 ``extra == 'cpu'`` (package ``""``: poetry's markers of an optional package)."""
    lhs, op, rhs = node
    if op in ("==", "!=") and {lhs[0], rhs[0]} == {"var", "str"}:
        var, val = (lhs, rhs) if lhs[0] == "var" else (rhs, lhs)
        if var[1] == "extra":
            item = conflict_item(val[1])
            if item is not None:
                return op == "==", item
            return op == "==", ("extra", "", canonicalize(val[1]))  # PEP 508's own: ``""``
    if op in ("in", "not in") and lhs[0] == "str" and rhs[0] == "var" \
            and rhs[1] in ("extras", "dependency_groups"):
        kind = "extra" if rhs[1] == "extras" else "group"
        return op == "in", (kind, None, canonicalize(lhs[1]))
    return None


def _atom_text(node: _Node) -> str:
    lhs, op, rhs = node

    def s(x: tuple[str, str]) -> str:
        return x[1] if x[0] == "var" else (f'"{x[1]}"' if '"' not in x[1] else f"'{x[1]}'")
    return f"{s(lhs)} {op} {s(rhs)}"


@lru_cache(maxsize=4096)
def _compiled(text: str) -> Any:
    from packaging.markers import Marker

    return Marker(text)


def _eval_atom(node: _Node, env: Mapping[str, str], active: frozenset[tuple[str, str]]) -> bool:
    item = _atom_item(node)
    if item is not None and not (item[1][1] == "" and "extra" in env):  # env's extra decides
        positive, (kind, _package, name) = item
        return ((kind, canonicalize(name)) in active) == positive
    try:
        return bool(_compiled(_atom_text(node)).evaluate({"extra": "", **env}))
    except Exception:  # noqa: BLE001 - a variable this target lacks (``extras`` outside a lock)
        return False


def _eval(node: _Node, env: Mapping[str, str], active: frozenset[tuple[str, str]]) -> bool:
    if node[0] == "and":
        return all(_eval(n, env, active) for n in node[1])
    if node[0] == "or":
        return any(_eval(n, env, active) for n in node[1])
    return _eval_atom(node, env, active)


@lru_cache(maxsize=4096)
def _tree(marker: str) -> _Node:
    from packaging.markers import InvalidMarker

    try:
        _compiled(marker)
    except InvalidMarker as exc:
        raise ValueError(str(exc)) from None
    return _parse(marker)


def _atoms(node: _Node) -> list[_Node]:
    if node[0] in ("and", "or"):
        return [a for n in node[1] for a in _atoms(n)]
    return [node]


def _var_of(node: _Node) -> str | None:
    lhs, _op, rhs = node
    if lhs[0] == "var":
        return str(lhs[1])
    return str(rhs[1]) if rhs[0] == "var" else None


def _literal(node: _Node) -> str | None:
    lhs, _op, rhs = node
    return str(rhs[1]) if rhs[0] == "str" else (str(lhs[1]) if lhs[0] == "str" else None)
