"""The query syntax of ``envlock find`` (docs/find.md): parse, and name the facts a query means.

Grammar (words are case-sensitive; ``and``/``or``/``not`` are not)::

    query     := or-expr
    or-expr   := and-expr ("or" and-expr)*
    and-expr  := not-expr (["and"] not-expr)*        # juxtaposition is "and"
    not-expr  := "not" not-expr | "(" or-expr ")" | condition
    condition := FACT OP VALUE | FACT "unset" | FACT "set" | FACT
    OP        := "==" | "=" | "===" | "!=" | "~=" | "<" | "<=" | ">" | ">="

``FACT`` is diff's own name (``area:key``: ``package:torch``, ``env:OMP_NUM_THREADS``,
``process:torch.allow-tf32-matmul``) or a short name (:data:`SHORT`: ``torch``, ``torch.build``,
``cuda.cudnn``, ``blas.vendor``, ``gpu.arch``, ``torch.tf32.matmul``, ``CUBLAS_WORKSPACE_CONFIG``,
``host``, ``time``, ``git.commit``).  A word or value with spaces or operator characters is
quoted (``"blas:openmp libgomp (torch)"``).  A bare ``FACT`` means ``FACT set``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envlock._names import canonicalize
from envlock.errors import EnvlockError
from envlock.find.values import OPS

__all__ = ["QueryError", "Target", "Cond", "Not", "And", "Or", "Node", "parse", "resolve", "SHORT",
           "conditions", "vocabulary", "META"]


class QueryError(EnvlockError):
    """A query that cannot be read, or names a fact no indexed result has (exit status 2)."""


@dataclass(frozen=True)
class Target:
    """One fact a condition reads: ``fact`` is ``area:key`` (or a glob over them: ``blas:*``),
    ``part`` the part of a composite value compared (see :func:`envlock.find.values.compare`),
    ``kind`` the order (``"cc"``, ``"version"``, ``"bool"``, ``""``), ``exclude`` fnmatch globs
    of keys the glob leaves out."""

    fact: str
    part: str = ""
    kind: str = ""
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cond:
    """``name op value`` (``op`` ``"set"``/``"unset"`` without a value); ``targets`` are filled
    by :func:`resolve`."""

    name: str
    op: str
    value: str = ""
    targets: tuple[Target, ...] = ()


@dataclass(frozen=True)
class Not:
    """``not child``."""

    child: Node


@dataclass(frozen=True)
class And:
    """Every child."""

    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Any child."""

    children: tuple[Node, ...]


Node = Cond | Not | And | Or

#: facts the index keeps of every result (not environment facts: never in a fingerprint).
META = {"host": "result:host", "node": "result:node", "time": "result:time",
        "kind": "result:kind", "job": "result:job", "path": "result:path"}

#: short name → the diff facts it reads, first found first (area:key, part, kind).
SHORT: dict[str, tuple[Target, ...]] = {
    "python": (Target("python:version", kind="version"),),
    "os": (Target("platform:os"),),
    "glibc": (Target("platform:glibc", kind="version"),),
    "kernel": (Target("platform:kernel"),),
    "machine": (Target("platform:machine"),),
    "cpu.model": (Target("cpu:model"),),
    "cpu.vendor": (Target("cpu:vendor"),),
    "cpu.isa": (Target("cpu:isa"),),
    "cpu.cores": (Target("cpu:usable-cores"),),
    "gpu.arch": (Target("gpu:compute-capability", kind="cc"), Target("process:gpus", kind="cc")),
    "gpu.driver": (Target("gpu:driver", kind="version"),),
    "gpu.cuda": (Target("gpu:driver-cuda", kind="version"),),
    "gpu.model": (Target("gpu:models"),),
    "gpu.visible-devices": (Target("gpu:visible-devices"),),
    "git.commit": (Target("code:repository.commit"),),
    "git.branch": (Target("code:repository.branch"),),
    "git.uncommitted": (Target("code:repository.uncommitted"),),
    "blas.vendor": (Target("blas:*", part="vendor", exclude=("openmp *",)),),
    "blas.version": (Target("blas:*", part="version", exclude=("openmp *",)),),
    "cuda.nvcc": (Target("cuda:nvcc", part="version", kind="version"),),
    "cuda.toolkit": (Target("cuda:toolkits", part="version", kind="version"),),
    "torch.tf32.matmul": (Target("process:torch.allow-tf32-matmul", kind="bool"),
                          Target("frameworks:torch.runtime.allow-tf32-matmul", kind="bool")),
    "torch.tf32.cudnn": (Target("process:torch.allow-tf32-cudnn", kind="bool"),
                         Target("frameworks:torch.runtime.allow-tf32-cudnn", kind="bool")),
    "torch.matmul-precision": (Target("process:torch.float32-matmul-precision"),),
    "torch.deterministic": (Target("process:torch.deterministic-algorithms", kind="bool"),
                            Target("frameworks:torch.runtime.deterministic", kind="bool")),
    "torch.cudnn.deterministic": (Target("process:torch.cudnn.deterministic", kind="bool"),),
    "torch.cudnn.benchmark": (Target("process:torch.cudnn.benchmark", kind="bool"),
                              Target("frameworks:torch.runtime.cudnn-benchmark", kind="bool")),
    "torch.threads": (Target("process:torch.num-threads"),),
    "CUBLAS_WORKSPACE_CONFIG": (Target("process:cublas-workspace-config"),
                                Target("env:CUBLAS_WORKSPACE_CONFIG")),
    **{k: (Target(v, kind="time" if k == "time" else ""),) for k, v in META.items()},
}

#: package fields a ``<package>.<field>`` name reads when the framework table has no such fact.
_PKG_PARTS = ("build", "channel", "manager", "version")

_TOKEN = re.compile(r"""\s*(?:(?P<op>===|==|!=|~=|<=|>=|<|>|=)|(?P<paren>[()])|"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'
                        |(?P<word>[^\s()<>=!~"']+|[!~]))""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise QueryError(f"query: cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("op"):
            out.append(("op", "==" if m.group("op") == "=" else m.group("op")))
        elif m.group("paren"):
            out.append(("paren", m.group("paren")))
        elif m.group("dq") is not None or m.group("sq") is not None:
            out.append(("quoted", m.group("dq") if m.group("dq") is not None else m.group("sq")))
        else:
            out.append(("word", m.group("word")))
    return out


_KEYWORDS = ("and", "or", "not")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def keyword(self, word: str) -> bool:
        tok = self.peek()
        if tok and tok[0] == "word" and tok[1].lower() == word:
            self.i += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.or_expr()
        if self.peek() is not None:
            raise QueryError(f"query: unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]
        return node

    def or_expr(self) -> Node:
        parts = [self.and_expr()]
        while self.keyword("or"):
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_expr(self) -> Node:
        parts = [self.not_expr()]
        while True:
            tok = self.peek()
            if tok is None or tok == ("paren", ")") or (tok[0] == "word" and tok[1].lower() == "or"):
                break
            self.keyword("and")
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_expr(self) -> Node:
        if self.keyword("not"):
            return Not(self.not_expr())
        tok = self.peek()
        if tok == ("paren", "("):
            self.take()
            node = self.or_expr()
            if self.peek() != ("paren", ")"):
                raise QueryError(f"query: missing ')' in {self.text!r}")
            self.take()
            return node
        return self.condition()

    def condition(self) -> Cond:
        if self.peek() is None:
            raise QueryError(f"query: a fact name is missing at the end of {self.text!r}")
        kind, name = self.take()
        if kind not in ("word", "quoted") or (kind == "word" and name.lower() in _KEYWORDS):
            raise QueryError(f"query: expected a fact name, got {name!r} in {self.text!r}")
        tok = self.peek()
        if tok and tok[0] == "op":
            op = self.take()[1]
            if self.peek() is None or self.peek()[0] not in ("word", "quoted"):  # type: ignore[index]
                raise QueryError(f"query: {name} {op} needs a value")
            return Cond(name, op, self.take()[1])
        if tok and tok[0] == "word" and tok[1].lower() in ("unset", "set"):
            self.take()
            return Cond(name, tok[1].lower())
        return Cond(name, "set")


def parse(text: str) -> Node:
    """Parse a query (see the module docstring).

    :raises QueryError: a syntax error (one line naming what could not be read).
    """
    if not text.strip():
        raise QueryError("query: empty")
    node = _Parser(text).parse()
    for c in conditions(node):
        if c.op not in (*OPS, "set", "unset"):
            raise QueryError(f"query: unknown operator {c.op!r}")
    return node


def conditions(node: Node) -> list[Cond]:
    """The conditions of a query, left to right."""
    if isinstance(node, Cond):
        return [node]
    if isinstance(node, Not):
        return conditions(node.child)
    return [c for child in node.children for c in conditions(child)]


def vocabulary(names: Iterable[str]) -> list[str]:
    """The names a user may write for the indexed fact names ``names`` (``area:key``): the
    short names, every ``area:key``, each package's bare name, each variable's name."""
    out = set(SHORT)
    for n in names:
        out.add(n)
        area, _, key = n.partition(":")
        if area == "package" and " ; " not in key:
            out.add(key)
        elif area in ("env", "slurm") and key.isupper():
            out.add(key)
        elif area == "cuda":
            out.add(f"cuda.{key}")
    return sorted(out)


def _resolve_name(name: str, known: frozenset[str]) -> tuple[Target, ...] | None:
    if name in SHORT:
        return SHORT[name]
    if ":" in name:
        return (Target(name),) if name in known or "*" in name else None
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name):  # a variable: set or unset is meaningful anyway
        area = "slurm" if name.startswith(("SLURM_", "PBS_", "LSB_", "SGE_")) else "env"
        return (Target(f"{area}:{name}"),)
    if name.startswith("cuda.") and f"cuda:{name[5:]}" in known:
        return (Target(f"cuda:{name[5:]}", part="version", kind="version"),)
    for pkg in (name, canonicalize(name)):  # conda's `_openmp_mutex` keeps its own spelling
        if f"package:{pkg}" in known:
            return (Target(f"package:{pkg}"),)
    head, _, tail = name.rpartition(".")
    if head:
        pkg = canonicalize(head)
        if f"frameworks:{pkg}.{tail}" in known:
            return (Target(f"frameworks:{pkg}.{tail}"),)
        if tail in _PKG_PARTS and f"package:{pkg}" in known:
            return (Target(f"package:{pkg}", part=tail),)
    area, _, key = name.partition(".")
    if key and f"{area}:{key}" in known:  # run.outcome → run:outcome, platform.glibc → …
        return (Target(f"{area}:{key}"),)
    return None


def resolve(node: Node, known: Iterable[str]) -> Node:
    """Fill each condition's targets from the fact names the index holds.

    :param known: the ``area:key`` names of the indexed facts.
    :raises QueryError: a name that is no short name, no indexed ``area:key``, no package and no
        variable: one line with the nearest names (:func:`difflib.get_close_matches`).
    """
    names = frozenset(known)

    def walk(n: Node) -> Node:
        if isinstance(n, Cond):
            targets = _resolve_name(n.name, names)
            if targets is None:
                near = difflib.get_close_matches(n.name, vocabulary(names), n=3, cutoff=0.6)
                hint = f"; nearest: {', '.join(near)}" if near else ""
                raise QueryError(f"unknown fact {n.name!r} (no indexed result records it){hint}")
            return Cond(n.name, n.op, n.value, targets)
        if isinstance(n, Not):
            return Not(walk(n.child))
        kids = tuple(walk(c) for c in n.children)
        return And(kids) if isinstance(n, And) else Or(kids)

    return walk(node)


def join_query(words: Sequence[str]) -> str:
    """The query of several command-line words (``find DIR torch '<' 1.12`` is
    ``find DIR 'torch < 1.12'``): the words joined by spaces."""
    return " ".join(words)
