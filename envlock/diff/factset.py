"""The fact model: a fact set and its value types (:class:`Pkg`, :class:`Impl`), and the helpers
extractors use to put facts (:func:`put_fact`).  See :mod:`envlock.diff.facts` for the extractors."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from envlock._names import canonicalize

__all__ = ["Pkg", "Impl", "Lib", "satisfied", "FactSet", "Sink", "normalize_name", "display", "same",
           "put_fact", "str_or_none"]



normalize_name = canonicalize


class Pkg(NamedTuple):
    """An installed (or listed) package: the value of a ``("package", name)`` fact.

    :ivar version: the version as recorded (``"2.13.0+cpu"``), or a spec (``">=1.2"``) from a
        file that lists requirements rather than installs.
    :ivar build: the conda build string, when known.
    :ivar channel: the conda channel, when known.
    :ivar manager: ``"pip"`` or ``"conda"``.
    :ivar name: the name as that manager spells it (``"pytorch"`` for conda's torch).
    :ivar constraint: for an entry of a spec (``environment.yml`` without builds, a
        requirements line that is not ``==``): ``(kind, version spec, build glob)`` with kind
        ``"conda"`` (conda ``MatchSpec``) or ``"pep440"``; ``None`` for an installed/locked one.
    """

    version: str
    build: str | None = None
    channel: str | None = None
    manager: str = "pip"
    name: str = ""
    constraint: tuple[str, str, str] | None = None

    def same(self, other: Pkg) -> bool:
        """Equal where both sides know: version always, build and channel when both have one.

        A constraint and a concrete package are "the same" when the package *satisfies* the
        constraint (:func:`satisfied`).  A version ``"unknown"`` (a direct reference whose URL
        names none) is never equal to anything: it was not shown to be the same.
        """
        if (self.constraint is None) != (other.constraint is None):
            return satisfied(self, other) is True
        if "unknown" in (self.version, other.version):
            return False
        if self.version != other.version:
            return False
        if self.build and other.build and self.build != other.build:
            return False
        return not (self.channel and other.channel and self.channel != other.channel)


def satisfied(a: Pkg, b: Pkg) -> bool | None:
    """Whether the concrete one of ``a``/``b`` satisfies the other's constraint: conda specs with
    py-rattler's ``VersionSpec`` and the build glob (:func:`envlock.formats.conda.satisfies`),
    PEP 440 specifiers with :mod:`packaging`.  ``None``: cannot be told."""
    spec, pkg = (a, b) if a.constraint is not None else (b, a)
    if spec.constraint is None or pkg.constraint is not None:
        return None
    kind, version, build = spec.constraint
    if pkg.version in ("", "unknown"):
        return None
    if kind == "conda":
        from envlock.formats.conda import satisfies

        return satisfies(version, build, pkg.version, pkg.build)
    if not version:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(version).contains(Version(pkg.version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion, ValueError):  # ValueError: int()'s digit limit
        return None


class Impl(NamedTuple):
    """A library implementation: the value of a ``("blas", user)`` fact (``openblas 0.3.27``)."""

    name: str
    version: str | None = None
    detail: str | None = None


#: how the loader model says a library was found, as a person reads it (``[libraries]`` rule).
VIA = {"ld_library_path": "LD_LIBRARY_PATH", "preload": "LD_PRELOAD"}


class Lib(NamedTuple):
    """Where the loader finds one SONAME: the value of a ``("libraries", soname)`` fact.

    :ivar where: the package owning the copy it picks (``"pip package torch"``), ``"unowned
        file <path>"``, or ``"not found"``; this is what is compared.
    :ivar via: the loader model's rule (``"ld_library_path"``, ``"preload"``, ``"runpath"``, …)
        or ``"shadowed"``: it tells which variable moved the library, and is not compared
        (the same copy found another way is the same library).
    """

    where: str
    via: str | None = None


def _natural(text: str) -> list[Any]:
    """Sort key putting ``sm_75`` before ``sm_100`` (digit runs compare as numbers)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def display(value: Any) -> str:
    """Return the one-line text form of a fact value (``"(absent)"`` for ``None``)."""
    if value is None:
        return "(absent)"
    if isinstance(value, Pkg):
        extra = [x for x in (value.build, value.channel) if x]
        shown = value.version or "(any version)"
        return f"{shown} ({', '.join(extra)})" if extra else shown
    if isinstance(value, Impl):
        return " ".join(x for x in (value.name, value.version) if x) + (
            f" ({value.detail})" if value.detail else ""
        )
    if isinstance(value, Lib):
        via = VIA.get(value.via or "")
        return f"{value.where} (via {via})" if via else value.where
    if isinstance(value, frozenset):
        return " ".join(sorted(value, key=_natural)) or "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def same(a: Any, b: Any) -> bool:
    """Whether two values of one fact are equal (packages compare as :meth:`Pkg.same`)."""
    if isinstance(a, Pkg) and isinstance(b, Pkg):
        return a.same(b)
    if isinstance(a, Lib) and isinstance(b, Lib):
        return a.where == b.where
    if isinstance(a, Pkg) and a.constraint and isinstance(b, str):  # python version vs a spec
        return a.same(Pkg(b))
    if isinstance(b, Pkg) and b.constraint and isinstance(a, str):
        return b.same(Pkg(a))
    return a == b


@dataclass
class FactSet:
    """The facts of one input.

    :ivar label: short name used in reports (host name, else file stem).
    :ivar path: the file read; ``kind``: ``"manifest"``, ``"environment.yml"``, ….
    :ivar facts: ``(area, key) → value``.
    :ivar areas: area → ``""`` when compared, or why it cannot be (``"input lacks it"``,
        ``"error: …"``).
    :ivar listing: for ``"package"``: ``"complete"`` when a package absent from the input is
        really not installed, ``"partial"`` when the input only lists some (requirements).
    :ivar generic: areas of tables without an extractor, flattened generically (raw keys such
        as ``resolved[libgomp.so.1].realpath``); their facts rank below classified ones.
    :ivar notes: sentences on how the input was read (a universal lock read for the other
        input's Python and platform), shown with the context.
    """

    label: str
    path: str
    kind: str
    facts: dict[tuple[str, str], Any] = field(default_factory=dict)
    areas: dict[str, str] = field(default_factory=dict)
    listing: str = "complete"
    generic: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


# -- extractors ---------------------------------------------------------------------------

Sink = dict[tuple[str, str], Any]


def str_or_none(v: Any) -> str | None:
    """``str(v)``, or ``None`` for ``None`` and ``""``."""
    return None if v is None or v == "" else str(v)


def put_fact(out: Sink, area: str, key: str, value: Any) -> None:
    """Record ``(area, key) → value`` unless the value is empty (``None``, ``""``, no set)."""
    if value is not None and value != "" and value != frozenset():
        out[(area, key)] = value
