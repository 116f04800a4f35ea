"""Which versions a package expects of its libraries, from static metadata: ``Requires-Dist``
pins in a wheel's METADATA (PEP 566/508; e.g. torch's ``nvidia-cudnn-cu13==9.24.0.43``,
followed one level through extras such as ``cuda-toolkit[cublas]==13.0.3``) and a conda
record's ``depends``.  The environment markers of a requirement are decided for this machine
(PEP 508), or left undecided when they cannot be.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from envlock.libs.owners import normalize_name, OwnerIndex
import platform

__all__ = ["Pin", "conda_pins", "read_pins"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """A version a package requires of another: ``requirer`` needs ``name`` ``specifier``.

    :ivar kind: the package world of ``name``: ``"pip"`` (a PEP 440 specifier) or ``"conda"``
        (a conda match-spec version, translated to PEP 440 where possible).
    """

    requirer: str
    name: str
    specifier: str
    kind: str = "pip"


def conda_pins(index: OwnerIndex, package: str) -> list[Pin]:
    """The ``depends`` of conda package ``package`` (e.g. ``pytorch``) as :class:`Pin` objects.

    Version parts are translated to PEP 440 specifiers: ``>=8.3.2,<9.0a0`` unchanged, a bare
    ``8.3.2`` → ``==8.3.2``, ``8.3.*``/``8.3*`` → ``==8.3.*``; alternatives (``|``) are skipped.
    """
    out = []
    for rec in index.conda_records():
        if rec.get("name") != package:
            continue
        requirer = f"{package} {rec.get('version', '')} (conda)"
        for dep in rec.get("depends") or ():
            parts = str(dep).split()
            if len(parts) < 2 or "|" in parts[1]:
                continue
            spec = ",".join(_conda_to_pep440(x) for x in parts[1].split(","))
            out.append(Pin(requirer=requirer, name=parts[0], specifier=spec, kind="conda"))
    return out


def _conda_to_pep440(part: str) -> str:
    if part[:1] in "<>=!~":
        return part
    if part.endswith("*"):
        return "==" + part.rstrip("*").rstrip(".") + ".*"
    return "==" + part



def _metadata_requires(dist_dir: str) -> list[str]:
    try:
        with open(os.path.join(dist_dir, "METADATA"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines()
            if line.lower().startswith("requires-dist:")]


def read_pins(index: OwnerIndex, dist: str) -> list[Pin]:
    """Exact version pins (``==``) that pip distribution ``dist`` declares, for Linux.

    Follows one level of extras (``cuda-toolkit[cublas]==13.0.3`` → the requirements that
    ``cuda-toolkit`` declares for extra ``cublas``).  Markers are evaluated for this
    machine (PEP 508); requirements that are only in other extras of ``dist`` are ignored.

    :param index: where the distributions are.
    :param dist: the requiring distribution (e.g. ``"torch"``).
    :returns: the pins, in METADATA order.
    """
    got = index.dists().get(normalize_name(dist))
    if got is None:
        return []
    try:
        import hashlib

        st = os.stat(os.path.join(got[1], "METADATA"))
        # Pins followed through extras come from other distributions' METADATA: their
        # installed versions are part of the key too.
        versions = hashlib.sha256(json.dumps(sorted(
            (n, v[0]) for n, v in index.dists().items())).encode()).hexdigest()[:12]
        key = (f"pins-{normalize_name(dist)}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
               f"-{st.st_ctime_ns:x}-{versions}")
    except OSError:
        key = ""
    cached = index._load_cache(key) if key else None
    if isinstance(cached, list):
        try:
            return [Pin(requirer=a, name=b, specifier=c) for a, b, c in cached]
        except (TypeError, ValueError):
            pass
    pins = _compute_pins(index, dist, got[1])
    if key:
        index._store_cache(key, [[p.requirer, p.name, p.specifier] for p in pins])
    return pins


@dataclass(frozen=True, slots=True)
class _Req:
    """A parsed Requires-Dist line (the parts :func:`_compute_pins` uses)."""

    name: str
    extras: tuple[str, ...]
    specs: tuple[str, ...]
    marker: str | None

    @property
    def specifier(self) -> str:
        return ",".join(sorted(self.specs))

    def exact(self) -> bool:
        return any(x.startswith("==") for x in self.specs)


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?([^;()]*)\)?\s*(?:;(.*))?$")
_SPEC = re.compile(r"^(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+$")
_CLAUSE = re.compile(r"^\s*(platform_system|sys_platform|platform_machine|os_name|extra)"
                     r"""\s*(==|!=)\s*(['"])([^'"]*)\3\s*$""")


def _parse_requirement(line: str) -> _Req | None:
    """A PEP 508 line in the plain form METADATA files use (``name[extras] specs ;
    marker``), or ``None`` for anything else (the caller then asks ``packaging``)."""
    m = _REQ.match(line)
    if not m:
        return None
    specs = tuple(x.strip() for x in m.group(3).split(",") if x.strip())
    if not all(_SPEC.match(x) for x in specs):
        return None
    extras = tuple(sorted(e.strip() for e in (m.group(2) or "").split(",") if e.strip()))
    marker = m.group(4).strip() if m.group(4) else None
    return _Req(name=m.group(1), extras=extras, specs=tuple(x.replace(" ", "") for x in specs),
                marker=marker)


_MTOKEN = re.compile(r"\s*(?:(\()|(\))|(and|or)\b|"
                     r"(platform_system|sys_platform|platform_machine|os_name|extra|python_version|python_full_version)"
                     r"""\s*(==|!=|<=|>=|<|>)\s*(['"])([^'"]*)\6)""")
_NUMERIC = re.compile(r"^\d+(\.\d+)*$")


@functools.lru_cache(maxsize=1)
def _marker_env() -> dict[str, str]:
    """PEP 508 environment markers of this interpreter (as ``packaging`` computes them)."""
    return {"platform_system": platform.system(), "sys_platform": sys.platform,
            "platform_machine": platform.machine(), "os_name": os.name}


def _marker_value(marker: str, extra: str) -> bool | None:
    """Evaluate a PEP 508 marker made of ``VAR ==|!= "value"`` clauses (and ``python_version``
    compared with a plain dotted release), ``and``, ``or`` and parentheses (``and`` binds
    tighter) for this interpreter, as ``packaging.markers`` does; ``None`` for any other
    form (the caller then asks ``packaging``).  A marker is tokenised once
    (:func:`_marker_tokens`); only its ``extra`` clauses depend on ``extra``."""
    parsed = _marker_tokens(marker)
    if parsed is None:
        return None
    # The value depends only on which of the marker's own extra names (if any) ``extra`` is.
    want = normalize_name(extra)
    named = want if any(isinstance(t, tuple) and t[2] == want for t in parsed) else None
    return _decided(marker, named)


@functools.lru_cache(maxsize=4096)
def _decided(marker: str, extra: str | None) -> bool | None:
    """:func:`_marker_value` of ``marker`` for an extra named ``extra`` (normalized), or for
    one that none of its ``extra`` clauses names (``None``)."""
    parsed = _marker_tokens(marker)
    assert parsed is not None
    tokens = [(t[2] == extra) == (t[1] == "==") if isinstance(t, tuple) else t for t in parsed]
    return _evaluate(tokens)


@functools.lru_cache(maxsize=4096)
def _marker_tokens(marker: str) -> tuple[Any, ...] | None:
    """The tokens of :func:`_marker_value`'s marker form: ``(``, ``)``, ``and``, ``or``, the
    truth of each clause on this interpreter, and ``("extra", op, normalized value)`` for the
    clauses on ``extra``; ``None`` for any other form."""
    env = _marker_env()
    tokens: list[Any] = []
    pos = 0
    text = marker.rstrip()
    while pos < len(text):
        m = _MTOKEN.match(text, pos)
        if not m or m.end() == pos:
            return None
        pos = m.end()
        if m.group(1) or m.group(2) or m.group(3):
            tokens.append(m.group(1) or m.group(2) or m.group(3))
        else:
            var, op, value = m.group(4), m.group(5), m.group(7)
            if var.startswith("python_"):
                # Versions compared as numbers (PEP 440 for plain dotted releases).
                if not _NUMERIC.match(value):
                    return None
                vi = sys.version_info
                mine = (vi[0], vi[1]) if var == "python_version" else (vi[0], vi[1], vi[2])
                want = tuple(int(x) for x in value.split("."))
                n = max(len(mine), len(want))
                a, b = mine + (0,) * (n - len(mine)), want + (0,) * (n - len(want))
                tokens.append({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                               ">=": a >= b}[op])
                continue
            if op not in ("==", "!="):
                return None
            if var == "extra":
                tokens.append(("extra", op, normalize_name(value)))
                continue
            have = env[var]
            tokens.append((have == value) if op == "==" else (have != value))
    return tuple(tokens)


def _evaluate(tokens: list[Any]) -> bool | None:
    """The value of a token list of :func:`_marker_tokens` with its clauses decided
    (``and`` binds tighter than ``or``); ``None`` when it is not well formed."""
    i = 0

    def expr() -> bool | None:
        nonlocal i
        v = term()
        while v is not None and i < len(tokens) and tokens[i] == "or":
            i += 1
            w = term()
            v = None if w is None else (v or w)
        return v

    def term() -> bool | None:
        nonlocal i
        v = factor()
        while v is not None and i < len(tokens) and tokens[i] == "and":
            i += 1
            w = factor()
            v = None if w is None else (v and w)
        return v

    def factor() -> bool | None:
        nonlocal i
        if i >= len(tokens):
            return None
        t = tokens[i]
        i += 1
        if t == "(":
            v = expr()
            if i >= len(tokens) or tokens[i] != ")":
                return None
            i += 1
            return v
        return t if isinstance(t, bool) else None

    value = expr()
    return value if i == len(tokens) else None


def _compute_pins(index: OwnerIndex, dist: str, dist_dir: str) -> list[Pin]:
    got = (None, dist_dir)
    pins: list[Pin] = []

    def parse(line: str) -> tuple[_Req | None, Any]:
        fast = _parse_requirement(line)
        if fast is not None:
            return fast, None
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            req = Requirement(line)
        except InvalidRequirement:
            return None, None
        return _Req(name=req.name, extras=tuple(sorted(req.extras)),
                    specs=tuple(str(x) for x in req.specifier),
                    marker=str(req.marker) if req.marker is not None else None), req

    def collect(requirer: str, dist_dir: str, extras: tuple[str, ...]) -> list[_Req]:
        out = []
        for line in _metadata_requires(dist_dir):
            # Only exact pins, and requirements with extras to follow, can matter here.
            spec = line.split(";", 1)[0]
            if "==" not in spec and "[" not in spec:
                continue
            req, full = parse(line)
            if req is None:
                continue
            if req.marker is not None:
                values = [_marker_value(req.marker, e) for e in (extras or ("",))]
                if any(v is None for v in values):
                    if full is None:
                        from packaging.requirements import Requirement

                        full = Requirement(line)
                    envs = [{"extra": e} for e in extras] or [{"extra": ""}]
                    if not any(full.marker.evaluate(e) for e in envs):
                        continue
                elif not any(values):
                    continue
            out.append(req)
        return out

    for req in collect(dist, got[1], ()):
        name = normalize_name(req.name)
        if req.exact():
            pins.append(Pin(requirer=dist, name=name, specifier=req.specifier))
        if req.extras:
            sub = index.dists().get(name)
            if sub is None:
                continue
            for req2 in collect(name, sub[1], req.extras):
                if req2.marker is None or "extra" not in req2.marker:
                    continue
                if req2.exact():
                    pins.append(Pin(requirer=f"{dist} via {name}[{','.join(req.extras)}]",
                                    name=normalize_name(req2.name), specifier=req2.specifier))
    return pins

