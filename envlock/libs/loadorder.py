"""Loader findings that depend on *when* glibc meets a problem, as a table of small rules.

* :func:`filter_findings`: filters and their filtees (``DT_FILTER``, ``ld -F``: the load fails
  without the filtee; ``DT_AUXILIARY``, ``ld -f``: ignored when missing), glibc 2.36
  ``elf/dl-deps.c`` ``_dl_map_object_deps``.
* :func:`check_match_findings`: a versioned reference bound to a definer that has no symbol
  versioning although it is the very file the reference names: glibc ``elf/dl-lookup.c``
  ``check_match`` asserts and aborts the process (``Inconsistency detected by ld.so``).
* :func:`order_findings`: the loader stops at its first fatal error.  The error findings are
  put in the order glibc meets them (mapping breadth-first, then ``_dl_check_map_versions``,
  then relocation in reverse load order; one load operation after the other), the first is
  what the real load reports, and those it never reaches are marked
  :attr:`~envlock.findings.Finding.consequence_of` it.

Each rule is a function of the :class:`~envlock.libs.search.Process` (and the findings so far)
that returns findings; :func:`envlock.libs.analysis.analyze_module` calls them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from envlock.findings import Finding
from envlock.libs.objects import LoadedObject, Resolution
from envlock.libs.linkmap import Process

__all__ = ["ASSERTION", "check_match_findings", "filter_findings", "order_findings",
           "assertion_message"]

#: glibc's ``check_match`` assertion text (``elf/dl-lookup.c``).
ASSERTION = "version->filename == NULL || ! _dl_name_match_p (version->filename, map)"
#: The source line of that ``assert`` in ``elf/dl-lookup.c``, per glibc release (checked on
#: Debian 12's glibc 2.36).
_ASSERT_LINE = {(2, 36): 107}

#: Finding ids of a failure while objects are mapped (``_dl_map_object``), for
#: :func:`order_findings`.
_MAPPING_IDS = frozenset({"not-found", "runtime-not-found", "refused", "invalid-elf",
                          "wrong-class", "missing-soname-symlink", "filtee-not-found"})


def assertion_message(glibc: tuple[int, int]) -> str:
    """The line glibc prints when ``check_match``'s assertion fails (then the process aborts
    with exit status 127), e.g. ``Inconsistency detected by ld.so: dl-lookup.c: 107:
    check_match: Assertion `…' failed!`` for glibc 2.36; the line number is left out for a
    release it was not checked on."""
    line = _ASSERT_LINE.get(glibc)
    where = f"dl-lookup.c: {line}: " if line else "dl-lookup.c: "
    return f"Inconsistency detected by ld.so: {where}check_match: Assertion `{ASSERTION}' failed!"


# -- filters -------------------------------------------------------------------------------


def filter_findings(proc: Process) -> list[Finding]:
    """Findings about filters (glibc 2.36 ``elf/dl-deps.c``):

    * ``filtee-not-found`` (error): a ``DT_FILTER`` filtee cannot be loaded; glibc stops the
      load with the filtee's error (``error while loading shared libraries: libx.so: cannot
      open shared object file: No such file or directory``), even under ``ld.so --list``.
    * ``auxiliary-not-loaded`` (info): a ``DT_AUXILIARY`` filtee cannot be loaded; glibc
      ignores it and the filter's own definitions are used.
    * ``filter`` (info): an object is a filter; its filtee comes before it in every search
      list, so the filtee's definitions win.
    """
    out: list[Finding] = []
    by_path = {o.path: o for o in proc.objects}
    seen: set[tuple[str, str, str | None]] = set()
    for res in proc.resolutions:
        if res.filtee is None:
            continue
        key = (res.name, res.requester, res.path)
        if key in seen:
            continue
        seen.add(key)
        tag = "DT_FILTER" if res.filtee == "filter" else "DT_AUXILIARY"
        filt = os.path.basename(res.requester)
        searched = [f"tried {a.path} ({a.source}): {a.outcome}" for a in res.tried
                    if a.outcome != "absent"] or [f"no file named {res.name} on {filt}'s search path"]
        if res.path is None:
            message = f"{res.name}: {res.error}" if res.error and not res.error.startswith(
                res.name + ":") else (res.error or f"{res.name}: cannot open shared object file")
            if res.filtee == "filter":
                out.append(Finding(
                    id="filtee-not-found", severity="error",
                    title=f"{res.name}, the filtee of filter {filt} ({tag}), will not be found",
                    cause=(f"{res.requester} is a filter ({tag} {res.name}); glibc must load the "
                           "filtee of a DT_FILTER, so the whole load fails with "
                           f"`error while loading shared libraries: {message}`."),
                    evidence=(f"{res.requester}: {tag} {res.name}", *searched),
                    fix=(f"Install {res.name} where {filt}'s RPATH/RUNPATH or the default "
                         "directories find it, or add its directory to LD_LIBRARY_PATH.",),
                    library=res.name, requester=res.requester))
            else:
                out.append(Finding(
                    id="auxiliary-not-loaded", severity="info",
                    title=f"{res.name}, the auxiliary filtee of {filt} ({tag}), is not loaded",
                    cause=(f"{res.requester} names {res.name} as an auxiliary filtee; glibc "
                           f"ignores that it cannot be loaded ({message}), so {filt}'s own "
                           "definitions are used."),
                    evidence=(f"{res.requester}: {tag} {res.name}", *searched),
                    fix=(f"Nothing is broken; install {res.name} if its definitions are meant "
                         f"to replace {filt}'s.",),
                    library=res.name, requester=res.requester))
            continue
        obj = by_path.get(res.requester)
        out.append(Finding(
            id="filter", severity="info",
            title=f"{filt} is a filter: symbols are looked up in {res.path} ({tag}) first",
            cause=(f"{res.requester} has {tag} {res.name}; glibc puts the filtee just before the "
                   "filter in every search list, so a symbol both define binds to the filtee, "
                   "and one only the filtee defines is found too."),
            evidence=(f"{res.requester}: {tag} {res.name}", f"{res.name} => {res.path} ({res.source})"),
            fix=("Nothing to do; this says where the filter's symbols really come from.",),
            library=(obj.info.soname if obj is not None else None) or filt,
            requester=res.requester))
    return out


# -- check_match ---------------------------------------------------------------------------


def _name_match(name: str, obj: LoadedObject) -> bool:
    """glibc ``_dl_name_match_p``: ``name`` is the object's ``l_name`` or one of the names it
    was requested under (``l_libname``)."""
    return name == obj.path or name in obj.names


def check_match_findings(proc: Process) -> list[Finding]:
    """``check-match-assertion`` (error) and ``no-version-information`` (warning) findings.

    glibc ``elf/dl-version.c`` keeps a version table (``l_versyms``) only for an object with
    some Verneed/Verdef entry; a library rebuilt without symbol versioning has none.  An
    object with a Verneed against such a provider gets, at start-up, ``<provider>: no version
    information available (required by <consumer>)`` (a warning).  Then, when one of its
    versioned references is looked up (``elf/dl-lookup.c`` ``do_lookup_x`` walking its scope)
    and the first object that defines the name has no version table *and* is the file the
    Verneed names (``_dl_name_match_p(version->filename, map)``), ``check_match``'s
    ``assert`` fails and ld.so aborts the whole process (exit status 127), dlopen included.
    A definer without versions that is another object is accepted; one with versions is
    matched by version as usual.  Weak references are looked up too.  Binding is modelled as
    ``RTLD_NOW`` / ``LD_BIND_NOW`` (every reference at load time).
    """
    out: list[Finding] = []
    tables: dict[str, Any] = {}

    def table(o: LoadedObject) -> Any:
        # The symbol reader is imported only when some pair needs it (rare).
        from envlock.libs.elfsyms import SymbolTable

        got = tables.get(o.path)
        if got is None:
            got = tables[o.path] = SymbolTable(proc._host(o.path), info=o.info)
        return got

    try:
        for obj in proc.objects:
            if obj.kind == "interpreter" or not obj.info.ok:
                continue
            bare: dict[str, LoadedObject] = {}
            for need in obj.info.verneed:
                prov = proc.provider_of(obj, need.file)
                if prov is not None and prov.info.ok and not prov.info.has_versioning:
                    bare[need.file] = prov
            if not bare:
                continue
            warnings = [f"{prov.path}: no version information available (required by {obj.path})"
                        for prov in bare.values()]
            hit = _unversioned_hit(proc, obj, bare, table)
            if hit is None:
                out += [_no_version_information(obj, prov, w) for w, prov in zip(warnings, bare.values())]
            else:
                out.append(_assertion(proc, obj, hit, warnings))
    finally:
        for t in tables.values():
            t.close()
    return out


def _unversioned_hit(proc: Process, obj: LoadedObject, bare: dict[str, LoadedObject],
                     table: Any) -> tuple[str, str, str, LoadedObject] | None:
    """The first versioned reference of ``obj`` whose lookup stops at the unversioned file its
    Verneed names (``check_match``'s assertion): ``(name, version, file, definer)``, or ``None``."""
    from envlock.libs.elfsyms import provides

    syms = table(obj).symbols(defined=False)
    refs = [(n, v, f) for n, v, f in syms.undefined if v is not None and f in bare]
    scope = proc.scope(obj) if refs else []
    for name, version, file in refs:
        for o in scope:
            d = table(o).lookup((name,))
            if name not in d or (not o.info.has_versioning and not provides(d, name, version)):
                continue
            if not o.info.has_versioning:
                if _name_match(file, o):
                    return (name, version, file, o)
                break  # accepted: the lookup ends here
            if provides(d, name, version):
                break
    return None


def _no_version_information(obj: LoadedObject, prov: LoadedObject, warning: str) -> Finding:
    """``no-version-information`` (warning): glibc's start-up message, and nothing worse."""
    return Finding(
        id="no-version-information", severity="warning",
        title=(f"{os.path.basename(prov.path)} has no symbol versions, but "
               f"{os.path.basename(obj.path)} was linked against a versioned one"),
        cause=("glibc prints this at start-up and goes on: none of the versioned "
               f"references of {obj.path} is bound to {prov.path} itself (or "
               "it has a version table after all)."),
        evidence=(warning,),
        fix=(f"Use the {os.path.basename(prov.path)} that "
             f"{os.path.basename(obj.path)} was built against.",),
        library=prov.info.soname or os.path.basename(prov.path),
        requester=obj.path)


def _assertion(proc: Process, obj: LoadedObject, hit: tuple[str, str, str, LoadedObject],
               warnings: list[str]) -> Finding:
    """``check-match-assertion`` (error): ld.so aborts the whole process."""
    name, version, file, definer = hit
    msg = assertion_message(proc.config.glibc)
    return Finding(
        id="check-match-assertion", severity="error",
        title=(f"ld.so aborts: {os.path.basename(obj.path)} needs {name}@{version} from "
               f"{file}, and the {file} that will be loaded ({definer.path}) has no "
               "symbol versioning"),
        cause=(f"{obj.path} was linked against a {file} that defines version {version}; "
               f"the {file} the loader picks was built without symbol versioning. When "
               f"{name} is bound, glibc's check_match (elf/dl-lookup.c) finds it in "
               "that very file without a version table and its assertion fails: the "
               f"whole process aborts with `{msg}` (exit status 127), not an error "
               "a caller could catch."),
        evidence=(*warnings, f"{obj.path}: {name}@{version} (Verneed {file})",
                  f"{definer.path}: defines {name}, no Verneed/Verdef (no version table)",
                  *([f"found through {definer.resolution.source}"]
                    if definer.resolution is not None else [])),
        fix=(f"Make the loader pick the versioned {file} that "
             f"{os.path.basename(obj.path)} was built against (check LD_LIBRARY_PATH).",
             f"Or rebuild {os.path.basename(obj.path)} against the {file} at {definer.path}."),
        library=file, requester=obj.path)


# -- the order of fatal errors ----------------------------------------------------------------


def _unit_of_request(proc: Process, index: int) -> int:
    unit = 0
    for k, (first, _obj) in enumerate(proc.loads):
        if first <= index:
            unit = k
    return unit


def _unit_of_object(proc: Process, obj: LoadedObject) -> int:
    for k, (_first, root) in enumerate(proc.loads):
        if root is not None and root == obj.group:
            return k
    for i, r in enumerate(proc.resolutions):
        if r.object_id == obj.id:
            return _unit_of_request(proc, i)
    return 0


def _event(proc: Process, f: Finding, requests: Sequence[Resolution]) -> tuple[int, int, int] | None:
    """Where the loader meets ``f``: ``(load operation, phase, order within it)``; phase 0
    mapping (request order), 1 version checks (load order), 2 relocation (reverse load
    order).  ``None`` for a finding that is no loader error."""
    if f.id in _MAPPING_IDS:
        match = None
        for i, r in enumerate(requests):
            if r.name == f.library and r.requester == (f.requester or ""):
                match = i
                if r.path is None:
                    break
        if match is None:
            return None
        return (_unit_of_request(proc, match), 0, match)
    if f.id in ("missing-version", "missing-symbol", "check-match-assertion") and f.requester:
        obj = proc.find(f.requester)
        if obj is None:
            return None
        if f.id == "missing-version":
            return (_unit_of_object(proc, obj), 1, obj.id)
        return (_unit_of_object(proc, obj), 2, -obj.id)
    return None


def order_findings(proc: Process, findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with the loader's errors in the order glibc meets them, the ones it
    reports first, and the rest marked ``consequence_of`` the first fatal one.

    glibc stops at the first fatal error: a failed ``_dl_map_object`` (not found, refused,
    invalid ELF, a missing ``DT_FILTER`` filtee) ends the load before any version check; at
    program start ``_dl_check_all_versions`` reports every missing version and then exits,
    under ``dlopen`` the first one fails it; relocation (``RTLD_NOW``) fails at the first
    unbound symbol or ``check_match`` assertion, objects relocated in reverse load order.
    One load operation (start, each dlopen) follows the other, and a failed one ends the
    import.  Order of the result: the errors reached (loader order), other errors, those
    not reached, then warnings and infos (each group keeps its order).
    """
    requests = proc.resolutions
    events = []
    others = []
    for k, f in enumerate(findings):
        ev = _event(proc, f, requests) if f.severity == "error" else None
        if ev is None:
            others.append(f)
        else:
            events.append((ev, k, f))
    events.sort(key=lambda e: (e[0], e[1]))
    reached: list[Finding] = []
    later: list[Finding] = []
    fatal: Finding | None = None
    stop: tuple[int, int] | None = None
    start_unit = 0 if proc.loads and proc.main is not None and proc.loads[0][1] == proc.main.id else -1
    for ev, _k, f in events:
        unit, phase, _sub = ev
        if fatal is None or (stop == (unit, phase) and unit == start_unit and phase == 1):
            reached.append(f)
            if fatal is None:
                fatal, stop = f, (unit, phase)
            continue
        later.append(dataclasses.replace(f, consequence_of=fatal.title))
    errors = [f for f in others if f.severity == "error"]
    rest = [f for f in others if f.severity != "error"]
    rank = {"warning": 0, "info": 1}
    rest.sort(key=lambda f: rank.get(f.severity, 2))
    return reached + errors + later + rest
