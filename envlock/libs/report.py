"""What ``envlock libs`` reports: :class:`LibsReport` (every object loaded, every request and
how it resolved, the findings) and its JSON form (``--format json``, :data:`SCHEMA`).
:mod:`envlock.libs.analysis` builds it; :mod:`envlock.render.libsreport` shows it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from envlock.findings import Finding
from envlock.libs.config import SearchConfig
from envlock.libs.objects import breadth_first, ObjectKind, Resolution, Rule

__all__ = ["SCHEMA", "FINDING_IDS", "Stage", "LibEntry", "RuntimeResult", "LibsReport"]

#: Version of the JSON document written by ``envlock libs --format json``.
SCHEMA = 1

#: Finding identifiers, each with its default severity.
FINDING_IDS: dict[str, str] = {
    "not-found": "error",
    "runtime-not-found": "warning",
    "invalid-elf": "error",
    "wrong-class": "error (info when another copy was found)",
    "missing-soname-symlink": "error",
    "missing-version": "error",
    "missing-symbol": "error",
    "shadowed": "warning",
    "duplicate-soname": "warning",
    "duplicate-openmp": "warning",
    "cuda-pin-mismatch": "warning",
    "preload-failed": "warning",
    "rtld-global-unknown": "info",
}

#: When an object is loaded: with the interpreter, by the module's import, by a run-time
#: ``dlopen`` (first CUDA call, …), or by another extension the module's Python code imports.
Stage = Literal["startup", "import", "runtime", "extra"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LibEntry:
    """One object in the modelled process.

    :ivar id: load order.
    :ivar path: the path string the loader uses for it (``l_name``).
    :ivar realpath: the same file with symlinks and ``..`` resolved (what ``/proc/self/maps`` shows).
    :ivar soname: its DT_SONAME.
    :ivar name: the first name it was requested under.
    :ivar kind: ``executable``, ``interpreter``, ``preload``, ``needed`` or ``dlopen``.
    :ivar rule: the rule that found it (``rpath``, ``ld_library_path``, ``runpath``,
        ``ld.so.cache``, ``default``, ``slash``, ``preload``).
    :ivar source: the list that held it (``RPATH of …``).
    :ivar requested_by: the object that first asked for it (``None`` for the executable).
    :ivar deps: ids of its DT_NEEDED objects.
    :ivar owner: ``"name version (kind)"`` of the package owning the file, or ``None``.
    :ivar owner_kind, owner_name, owner_version: the same, split.
    :ivar stage: ``"startup"`` (the executable's closure), ``"import"`` (the module's) or
        ``"runtime"`` (loaded by a run-time dlopen, e.g. on first CUDA use).
    :ivar via: for run-time loads, what does it (``torch preloads nvidia wheels``, …).
    """

    id: int
    path: str
    realpath: str
    soname: str | None = None
    name: str | None = None
    kind: ObjectKind = "needed"
    rule: Rule | None = None
    source: str = ""
    requested_by: str | None = None
    deps: tuple[int, ...] = ()
    owner: str | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    owner_version: str | None = None
    stage: Stage = "import"
    via: str | None = None

    def resolution_is(self, r: Resolution) -> bool:
        """Whether request ``r`` is the one that loaded this object."""
        return r.name == self.name and (r.requester or None) == self.requested_by and r.rule == self.rule


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeResult:
    """A run-time ``dlopen`` from the table, resolved.

    :ivar framework, name, caller, when, required: the table entry
        (:class:`~envlock.libs.runtime.RuntimeDlopen`); ``caller`` is the caller's path here.
    :ivar resolution: the loader's answer.
    """

    framework: str
    name: str
    caller: str
    when: str
    required: bool
    resolution: Resolution


@dataclass(frozen=True, kw_only=True, slots=True)
class LibsReport:
    """Everything ``envlock libs`` knows about one target (JSON schema :data:`SCHEMA`).

    :ivar python: the target interpreter (as given).
    :ivar target: the module name or file asked about.
    :ivar files: the extension files ``dlopen``'ed for it.
    :ivar config: the loader configuration used (see :meth:`to_json`).
    :ivar objects: every object in load order.
    :ivar requests: every request (DT_NEEDED, preload, dlopen) with the places tried.
    :ivar runtime: the run-time dlopens resolved.
    :ivar findings: problems: the loader's errors in the order it meets them (the first is
        what the real load reports; those it never reaches carry ``consequence_of``), then
        the other errors, warnings and infos (:func:`envlock.libs.loadorder.order_findings`).
    :ivar errors: problems of the analysis itself (unreadable module, …).
    :ivar launcher: the wrapper script given as the interpreter (a pyenv shim), when
        ``python`` is the real interpreter it runs (its ``sys.executable``); else ``None``.
    """

    python: str
    target: str
    files: tuple[str, ...] = ()
    config: SearchConfig = field(default_factory=SearchConfig)
    objects: tuple[LibEntry, ...] = ()
    requests: tuple[Resolution, ...] = ()
    runtime: tuple[RuntimeResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    errors: tuple[str, ...] = ()
    launcher: str | None = None

    def closure(self, path: str) -> list[LibEntry]:
        """The objects reachable through DT_NEEDED from the object at ``path`` (itself first)."""
        by_path = {o.path: o for o in self.objects}
        start = by_path.get(path)
        if start is None:
            return []
        return breadth_first(start, self.objects)

    def requests_for(self, name: str) -> list[Resolution]:
        """Every request of ``name`` (a SONAME or path), in order."""
        return [r for r in self.requests if r.name == name or os.path.basename(r.name) == name]

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (documented in ``docs/libs.md``)."""
        cfg = self.config
        return {
            "schema": SCHEMA,
            "python": self.python,
            "launcher": self.launcher,
            "target": self.target,
            "files": list(self.files),
            "config": {
                "root": cfg.root,
                "ld_library_path": cfg.ld_library_path,
                "ld_preload": cfg.ld_preload,
                "glibc": ".".join(map(str, cfg.glibc)),
                "system_dirs": list(cfg.system_dirs),
                "hwcaps": list(cfg.hwcaps_active),
                "subdirs": list(cfg.subdirs),
                "platform": cfg.platform,
                "glibc_tunables": cfg.tunables.raw,
                "cpu_masked": list(cfg.cpu_masked),
                "lib": cfg.lib,
                "cache": cfg.cache.path if cfg.cache else None,
                "cwd": cfg.cwd,
            },
            "objects": [{**_entry_json(o), "abspath": _abspath(o.path, cfg.cwd)} for o in self.objects],
            "requests": [{**_request_json(r), "abspath": _abspath(r.path, cfg.cwd)}
                         for r in self.requests],
            "runtime": [
                {"framework": r.framework, "name": r.name, "caller": r.caller, "when": r.when,
                 "required": r.required, **_request_json(r.resolution, tried=True)}
                for r in self.runtime
            ],
            "findings": [
                {"id": f.id, "severity": f.severity, "title": f.title, "cause": f.cause,
                 "evidence": list(f.evidence), "fix": list(f.fix), "library": f.library,
                 "requester": f.requester,
                 **({"consequence_of": f.consequence_of} if f.consequence_of else {})}
                for f in self.findings
            ],
            "errors": list(self.errors),
        }


def _abspath(path: str | None, cwd: str) -> str | None:
    """``path`` as printed (``ldd`` keeps relative search results relative) made absolute."""
    if path is None or path.startswith("/"):
        return path
    return os.path.normpath(os.path.join(cwd, path))


def _entry_json(o: LibEntry) -> dict[str, Any]:
    return {
        "id": o.id, "path": o.path, "realpath": o.realpath, "soname": o.soname, "name": o.name,
        "kind": o.kind, "rule": o.rule, "source": o.source, "requested_by": o.requested_by,
        "deps": list(o.deps), "stage": o.stage, "via": o.via,
        "owner": None if o.owner_kind is None else
        {"kind": o.owner_kind, "name": o.owner_name, "version": o.owner_version},
    }


def _request_json(r: Resolution, *, tried: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": r.name, "requester": r.requester, "kind": r.kind, "path": r.path,
        "rule": r.rule, "source": r.source, "error": r.error, "object": r.object_id,
    }
    if r.filtee is not None:
        out["filtee"] = r.filtee
    if tried:
        out["tried"] = [{"path": a.path, "rule": a.rule, "source": a.source, "outcome": a.outcome}
                        for a in r.tried]
    return out


