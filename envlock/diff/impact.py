"""The impact model: how much a difference is likely to change results, and why.

The model is data, ``envlock/data/impact.toml`` (documented in ``docs/diff.md``): classes
with ranks, components (glob patterns over ``area:key`` facts) with a reason and an action,
change sizes, conda↔PyPI name aliases, and the texts and parameters of the rules that
combine several facts (:mod:`envlock.diff.rules`).  ``--kb FILE`` adds a file of the same
layout whose components are matched first and whose tables override the shipped ones.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

from envlock._names import CONDA_TO_PYPI
from envlock.diff.facts import Impl, Pkg
from envlock.errors import ManifestError
from envlock.manifest._toml import read_text
from envlock.diff.factset import satisfied

__all__ = ["KB", "Component", "Edge", "Globs", "load_kb", "change_size", "parse_version", "plain_release",
           "version_in"]


class Globs:
    """fnmatch-style patterns, matched fast: exact names by set, ``prefix*`` by ``startswith``,
    the rest by one regular expression compiled on first use."""

    __slots__ = ("_rx", "exact", "others", "prefixes")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.exact: set[str] = set()
        prefixes: list[str] = []
        self.others: list[str] = []
        for p in patterns:
            magic = [i for i, ch in enumerate(p) if ch in "*?["]
            if not magic:
                self.exact.add(p)
            elif magic == [len(p) - 1] and p.endswith("*"):
                prefixes.append(p[:-1])
            else:
                self.others.append(p)
        self.prefixes = tuple(prefixes)
        self._rx: re.Pattern[str] | None = None

    def match(self, text: str) -> bool:
        """Whether ``text`` matches one of the patterns (case-sensitive, like fnmatchcase)."""
        if text in self.exact or (self.prefixes and text.startswith(self.prefixes)):
            return True
        if not self.others:
            return False
        if self._rx is None:
            self._rx = re.compile("|".join(translate(p) for p in self.others))
        return self._rx.match(text) is not None


@dataclass(frozen=True)
class Component:
    """One ``[[component]]`` of the model.

    :ivar id: its name; ``cls``: its class id; ``patterns``: fnmatch globs over ``area:key``.
    :ivar why, do: reason and action, with ``{a}``/``{b}``/``{key}`` placeholders.
    :ivar group: all its differing facts form one explanation (else one per fact).
    :ivar build_size: size given to a build-only change (a BLAS/CUDA build variant), if set.
    :ivar size: size given to every change of its facts, if set (0–10; the conda subdir's 10 puts
        another platform above a CPU/CUDA variant's 9 in the same class).
    :ivar needs: the conditions under which its facts can change numbers at all
        (:data:`envlock.diff.conditions.NEEDS`: ``"gpu"``, ``"mkl"``, …); empty: always.
    """

    id: str
    cls: str
    patterns: tuple[str, ...]
    why: str
    do: str
    title: str = ""
    group: bool = False
    build_size: int | None = None
    size: int | None = None
    needs: tuple[str, ...] = ()
    globs: Globs | None = field(default=None, compare=False, repr=False)

    def matches(self, fact: str) -> bool:
        """Whether ``fact`` (``"area:key"``) matches one of the patterns."""
        if self.globs is None:
            object.__setattr__(self, "globs", Globs(self.patterns))
        return self.globs.match(fact)  # type: ignore[union-attr]

    def names(self, fact: str) -> bool:
        """Whether ``fact`` is one of the patterns written without a wildcard."""
        if self.globs is None:
            object.__setattr__(self, "globs", Globs(self.patterns))
        return fact in self.globs.exact  # type: ignore[union-attr]


@dataclass(frozen=True)
class Edge:
    """One ``[[edge]]`` of the model: a known causal link.

    :ivar cause: the rule id (``torch-variant``) or component id (``driver``) that is the cause.
    :ivar accounts: fnmatch globs over ``area:key`` of the facts it accounts for.
    :ivar when: ``""`` (every matching fact), ``"one-side"`` (only a fact one input lacks) or
        ``"moved"`` (only a library whose resolution went through the cause's variable) or
        ``"same-version"`` (only a package whose version is the same on both sides: its build
        string or channel differ).
    """

    cause: str
    accounts: tuple[str, ...]
    when: str = ""
    globs: Globs | None = field(default=None, compare=False, repr=False)

    def matches(self, fact: str) -> bool:
        """Whether ``fact`` (``"area:key"``) is one this edge accounts for."""
        if self.globs is None:
            object.__setattr__(self, "globs", Globs(self.accounts))
        return self.globs.match(fact)  # type: ignore[union-attr]


@dataclass
class KB:
    """The loaded impact model (shipped file plus ``--kb`` files)."""

    classes: dict[str, dict[str, Any]]
    sizes: dict[str, int]
    aliases: dict[str, str]
    rules: dict[str, dict[str, Any]]
    components: list[Component]
    noise: list[str] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    _cache: dict[tuple[str, str], Component] = field(default_factory=dict, repr=False)

    def component(self, area: str, key: str) -> Component:
        """Return the component of ``area:key``: the first one that names it exactly, else the
        first whose glob matches it (the catch-all ``other`` last).  An exact entry beats a
        glob wherever they are (``package:accelerate`` is HuggingFace's library, not a BLAS
        matched by ``package:accelerate*``)."""
        hit = self._cache.get((area, key))
        if hit is None:
            fact = f"{area}:{key}"
            hit = next((c for c in self.components if c.names(fact)), None) or next(
                c for c in self.components if c.matches(fact))
            self._cache[(area, key)] = hit
        return hit

    def of(self, area: str, key: str, component: str) -> Component:
        """The component a change was given (``Change.component``): normally that of
        ``area:key``; another where the comparison chose it (a Python patch move ranks with
        the interpreter, :func:`envlock.diff.engine.compare_pair`)."""
        comp = self.component(area, key)
        if comp.id == component:
            return comp
        return next((c for c in self.components if c.id == component), comp)

    def needs(self, kind: str) -> tuple[str, ...]:
        """The conditions (``needs``) of the rule or component ``kind``; ``()``: none."""
        if kind in self.rules:
            n = self.rules[kind].get("needs", ())
            return (n,) if isinstance(n, str) else tuple(n)
        comp = next((c for c in self.components if c.id == kind), None)
        return comp.needs if comp is not None else ()

    def edges_of(self, cause: str) -> list[Edge]:
        """The causal edges whose cause is the rule or component ``cause``."""
        return [e for e in self.edges if e.cause == cause]

    def rank(self, cls: str) -> int:
        """The rank (0–100) of class ``cls``."""
        return int(self.classes.get(cls, {}).get("rank", 30))

    def explains(self, cls: str) -> bool:
        """Whether differences of class ``cls`` may appear among the explanations."""
        return bool(self.classes.get(cls, {}).get("explain", True))

    def score(self, cls: str, size: str, *, rank: int | None = None) -> int:
        """Ranking score: class rank × 10 + change size."""
        base = self.rank(cls) if rank is None else rank
        return base * 10 + self.sizes.get(size, 1)


def _read_toml(path: str) -> dict[str, Any]:
    from envlock.diff.kbcheck import validate
    from envlock.manifest._toml import load_toml

    data = load_toml(read_text(path), path)
    validate(data, path)
    schema = data.get("schema", 1)
    if schema != 1:
        raise ManifestError(f"{path}: impact model schema {schema!r} is not supported (1)")
    return data


def _components(data: Mapping[str, Any]) -> list[Component]:
    """The ``[[component]]`` entries of a file checked by :func:`envlock.diff.kbcheck.validate`."""
    out = []
    for c in data.get("component") or ():
        patterns = c["match"]
        out.append(Component(
            id=c["id"], cls=c["class"],
            patterns=tuple(patterns if isinstance(patterns, list) else [patterns]),
            why=c.get("why", ""), do=c.get("do", ""), title=c.get("title", ""),
            group=c.get("group", False), build_size=c.get("build-size"), size=c.get("size"),
            needs=tuple([c["needs"]] if isinstance(c.get("needs"), str) else c.get("needs", ()))))
    return out


def _edges(data: Mapping[str, Any]) -> list[Edge]:
    """The ``[[edge]]`` entries of a validated file."""
    out = []
    for e in data.get("edge") or ():
        acc = e["accounts"]
        out.append(Edge(e["cause"], tuple(acc if isinstance(acc, list) else [acc]),
                        e.get("when", "")))
    return out


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    return _read_toml(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "data", "impact.toml"))


def load_kb(extra: Iterable[str | os.PathLike[str]] = ()) -> KB:
    """Load the shipped model and any extra files (later files take precedence).

    :param extra: paths of ``--kb`` files, same layout as ``envlock/data/impact.toml``.
    :raises ManifestError: a file is unreadable, not UTF-8, empty, malformed, of another
        schema, not laid out as an impact model (:func:`envlock.diff.kbcheck.validate`: wrong
        value types, unknown rules or placeholders, bad specifiers), or a component or rule
        names an unknown class; the message names the file and the key path.
    """
    base = _shipped()
    classes = {k: dict(v) for k, v in base["classes"].items()}
    sizes = dict(base["sizes"])
    # conda's names of PyPI projects (one table, envlock._names), then the model's own aliases
    aliases = {_norm(k): _norm(v) for k, v in CONDA_TO_PYPI.items()} | dict(base.get("aliases", {}))
    rules = {k: dict(v) for k, v in base.get("rules", {}).items()}
    components = _components(base)
    components.sort(key=lambda c: c.patterns == ("*",))  # entries appended after it still match
    noise = list(base.get("noise", {}).get("patterns", []))
    edges = _edges(base)
    for path in extra:
        data = _read_toml(os.fspath(path))
        for k, v in data.get("classes", {}).items():
            classes.setdefault(k, {}).update(v)
        sizes.update(data.get("sizes", {}))
        aliases.update({_norm(k): _norm(v) for k, v in data.get("aliases", {}).items()})
        for k, v in data.get("rules", {}).items():
            rules.setdefault(k, {}).update(v)
        components = _components(data) + components
        edges = _edges(data) + edges
        noise += list(data.get("noise", {}).get("patterns", []))
        for i, c in enumerate(data.get("component") or ()):
            if c["class"] not in classes:
                raise ManifestError(f"{path}: 'component[{i}].class' names unknown class "
                                    f"{c['class']!r} (known: {', '.join(sorted(classes))})")
        for rid, body in data.get("rules", {}).items():
            if body.get("class", "numerical-core") not in classes:
                raise ManifestError(f"{path}: 'rules.{rid}.class' names unknown class "
                                    f"{body['class']!r} (known: {', '.join(sorted(classes))})")
    return KB(classes, sizes, aliases, rules, components, noise, edges)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", str(name)).lower()


@functools.lru_cache(maxsize=4096)
def parse_version(text: str | None) -> Any:
    """Parse a version with :mod:`packaging` (imported on first use); ``None`` if invalid."""
    if not text:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except (InvalidVersion, ValueError):  # ValueError: a number past int()'s digit limit
        return None


#: a release-only version with an optional local label: ``2.13.0``, ``2.13.0+cpu``.
_PLAIN = re.compile(r"v?(\d+(?:\.\d+)*)(?:\+([A-Za-z0-9.]+))?\Z")


def plain_release(text: str | None) -> tuple[tuple[int, ...], str] | None:
    """``(release, local)`` of a release-only version (``"2.13.0+cpu"`` → ``((2, 13, 0), "cpu")``).

    PEP 440 orders such versions by their release segments, zero-padded, so no parser is
    needed; anything else (pre-, post-, dev-releases, epochs) returns ``None`` and goes to
    :mod:`packaging`.
    """
    m = _PLAIN.match(text or "")
    if not m or len(m.group(1)) > 1000:  # no real release has a thousand digits
        return None
    return tuple(int(x) for x in m.group(1).split(".")), (m.group(2) or "").lower()


def _pad(t: tuple[int, ...], n: int) -> tuple[int, ...]:
    return t + (0,) * (n - len(t))


def version_in(version: str | None, spec: str) -> bool:
    """Whether ``version`` (its public part) satisfies the specifier set ``spec`` (PEP 440).

    Simple specs (``>=1.7,<1.12``) on release-only versions are compared as zero-padded tuples;
    anything else uses :class:`packaging.specifiers.SpecifierSet` (imported then).
    """
    rel = plain_release(version)
    clauses = [c.strip() for c in spec.split(",") if c.strip()]
    ops = [re.fullmatch(r"(>=|<=|>|<|==)\s*(\d{1,100}(?:\.\d{1,100})*)", c) for c in clauses]
    if rel is not None and all(ops):
        ok = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
              "<": lambda a, b: a < b, "==": lambda a, b: a == b}
        for m in ops:
            bound = tuple(int(x) for x in m.group(2).split("."))  # type: ignore[union-attr]
            n = max(len(bound), len(rel[0]))
            if not ok[m.group(1)](_pad(rel[0], n), _pad(bound, n)):  # type: ignore[union-attr]
                return False
        return True
    v = parse_version(version.split("+")[0] if version else None)
    if v is None:
        return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec).contains(v, prereleases=True)
    except (InvalidSpecifier, ValueError):  # ValueError: a number past int()'s digit limit
        return False


def _version_size(a: str | None, b: str | None) -> str:
    pa, pb = plain_release(a), plain_release(b)
    if pa is not None and pb is not None:
        ra, rb = _pad(pa[0], 3), _pad(pb[0], 3)
        if ra[0] != rb[0]:
            return "major"
        if ra[1] != rb[1]:
            return "minor"
        if _pad(pa[0], len(pb[0])) != _pad(pb[0], len(pa[0])):
            return "patch"
        return "local" if pa[1] != pb[1] else "build"
    va, vb = parse_version(a), parse_version(b)
    if va is None or vb is None:
        return "other" if a != b else "build"
    ra, rb = va.release + (0, 0), vb.release + (0, 0)
    if va.epoch != vb.epoch or ra[0] != rb[0]:
        return "major"
    if ra[1] != rb[1]:
        return "minor"
    if va.public != vb.public:
        return "patch"
    return "local" if va.local != vb.local else "build"


def change_size(a: Any, b: Any) -> str:
    """Classify the change ``a → b`` of one fact.

    :returns: ``"violation"`` (a spec's constraint not satisfied), ``"added"``, ``"removed"``,
        ``"major"``, ``"minor"``, ``"patch"``, ``"local"`` (local version label only, PEP 440),
        ``"build"`` (build string only), ``"channel"``, ``"vendor"`` (another implementation),
        ``"value"`` or ``"other"``.
    """
    if a is None:
        return "added"
    if b is None:
        return "removed"
    if (isinstance(a, Pkg) and a.constraint) or (isinstance(b, Pkg) and b.constraint):
        pa = a if isinstance(a, Pkg) else Pkg(str(a))
        pb = b if isinstance(b, Pkg) else Pkg(str(b))
        # a spec's constraint the other side does not satisfy; "value" where it cannot be told
        return "violation" if satisfied(pa, pb) is False else "value"
    if isinstance(a, Pkg) and isinstance(b, Pkg):
        if a.version == b.version:
            return "build" if a.build != b.build else "channel"
        return _version_size(a.version, b.version)
    if isinstance(a, Impl) and isinstance(b, Impl):
        if a.name != b.name:
            return "vendor"
        return _version_size(a.version, b.version) if a.version != b.version else "build"
    if isinstance(a, str) and isinstance(b, str) and re.fullmatch(r"\d+(\.\d+)+", a) \
            and re.fullmatch(r"\d+(\.\d+)+", b):
        return _version_size(a, b)
    return "value"
