"""Findings: a problem, explained — shared by ``envlock verify`` and the library checks.

A :class:`Finding` names its *cause*, the *evidence* (paths, versions, variables; one fact per
line) and a *fix* (one option per line).  The fields are those of the loader's findings
(:mod:`envlock.libs.analysis`: ``id``, ``severity``, ``title``, ``cause``, ``evidence``, ``fix``,
``library``, ``requester``) so that one type serves every area; verify's identifiers are
dotted, ``<area>.<what>`` (``packages.version-mismatch``, ``gpu.driver-too-old``), and the
loader's are carried over as ``libs.<id>``.

This module imports only the standard library's :mod:`dataclasses`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

__all__ = ["Severity", "SEVERITIES", "Finding", "severity_rank", "sort_findings", "counts"]

#: Severities, most severe first.  ``error``: the job will fail or compute something other
#: than intended; ``warning``: it runs, maybe not as intended; ``info``: worth knowing.
Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)

_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


def severity_rank(severity: str) -> int:
    """``0`` for ``"error"``, ``1`` for ``"warning"``, ``2`` for ``"info"``, ``3`` otherwise."""
    return _RANK.get(severity, len(SEVERITIES))


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One problem found, with its explanation.

    :ivar id: a stable identifier, ``<area>.<what>`` (e.g. ``"packages.version-mismatch"``);
        policy (``[tool.envlock.verify]``) refers to findings by it.
    :ivar severity: ``"error"``, ``"warning"`` or ``"info"`` (see :data:`SEVERITIES`).
    :ivar title: one line: what is wrong, with the names and versions involved.
    :ivar cause: why it happens / why it matters.
    :ivar evidence: the facts it rests on, one per string (``"torch/version.py cuda=None"``).
    :ivar fix: what to do, one option per string.
    :ivar library: the shared library (SONAME) it is about, for library findings.
    :ivar requester: the object that asked for that library, for library findings.
    :ivar consequence_of: for a loader finding the real loader never reaches because an
        earlier error already stopped it (glibc stops at the first fatal error): the title
        of that error; ``None`` otherwise.
    """

    id: str
    severity: Severity
    title: str
    cause: str = ""
    evidence: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    library: str | None = None
    requester: str | None = None
    consequence_of: str | None = None

    def with_severity(self, severity: Severity) -> Finding:
        """A copy with another severity."""
        return replace(self, severity=severity)

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict (keys as in ``docs/verify.md``)."""
        out: dict[str, Any] = {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "cause": self.cause,
            "evidence": list(self.evidence),
            "fix": list(self.fix),
        }
        if self.library is not None:
            out["library"] = self.library
        if self.requester is not None:
            out["requester"] = self.requester
        if self.consequence_of is not None:
            out["consequence_of"] = self.consequence_of
        return out


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by id (stable for equal keys)."""
    return sorted(findings, key=lambda f: (severity_rank(f.severity), f.id))


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``."""
    out: dict[str, int] = {s: 0 for s in SEVERITIES}
    for f in findings:
        if f.severity in out:
            out[f.severity] += 1
    return out
