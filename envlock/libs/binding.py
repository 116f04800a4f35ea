"""Symbol binding: which undefined symbols will not bind, as glibc's ``elf/dl-lookup.c``
binds them (``do_lookup_x`` over the object's scope, ``check_match``'s version rules) when
Python imports an extension module with ``RTLD_NOW``.

The scopes are :meth:`envlock.libs.linkmap.Process.scope`'s; the symbol tables
:mod:`envlock.libs.elfsyms`'s; versions a provider lacks altogether are
``missing-version`` findings of :mod:`envlock.libs.rules_process` instead, and glibc's
``check_match`` assertion is :mod:`envlock.libs.loadorder`'s.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from envlock.findings import Finding
from envlock.libs.config import SearchConfig
from envlock.libs.objects import LoadedObject
from envlock.libs.owners import OwnerIndex
from envlock.libs.linkmap import Process
from envlock.libs.ruleset import owner_text, stray_dirs

__all__ = ["symbol_findings"]


def _demangle(names: Sequence[str]) -> dict[str, str]:
    """C++ names demangled by ``c++filt`` (one call, with a timeout); ``{}`` if unavailable."""
    mangled = [n for n in names if n.startswith("_Z")]
    if not mangled or shutil.which("c++filt") is None:
        return {}
    from envlock._run import run

    res = run(["c++filt"], timeout=10.0, input_text="\n".join(mangled) + "\n")
    if not res.ok:
        return {}
    out = res.stdout.splitlines()
    return {m: d for m, d in zip(mangled, out) if d and d != m}


def symbol_findings(proc: Process, index: OwnerIndex | None, sys_path: Sequence[str],
                     prefix: str | None, cfg: SearchConfig) -> list[Finding]:
    """Undefined symbols that will not bind (``undefined symbol: S[, version V]``).

    CPython dlopens extension modules with ``RTLD_NOW``, so every non-weak undefined symbol of
    every object must bind when it is loaded.  Each is looked up as glibc ``elf/dl-lookup.c``
    does: in the object's scope (:meth:`Process.scope`: the global scope in load order, then
    the local scope of the dlopen that loaded it), among the definitions reachable through
    each object's hash table (global, weak, ``STB_GNU_UNIQUE``; protected too; local and
    hidden never), with ``check_match``'s version rules (:func:`envlock.libs.elfsyms.provides`).
    A weak undefined symbol may stay unbound.  Versions a provider lacks altogether are
    ``missing-version`` findings instead.
    """
    from envlock.libs.elfsyms import SymbolTable

    # Each file's symbol table is read once for both phases; the files are released after.
    tables: dict[str, SymbolTable] = {}
    try:
        return _symbol_findings_in(proc, index, sys_path, prefix, cfg, tables)
    finally:
        for t in tables.values():
            t.close()


def _symbol_findings_in(proc: Process, index: OwnerIndex | None, sys_path: Sequence[str],
                        prefix: str | None, cfg: SearchConfig, tables: dict[str, Any]) -> list[Finding]:
    from envlock.libs.elfsyms import SymbolTable

    def table(path: str, info: Any) -> SymbolTable:
        got = tables.get(path)
        if got is None:
            got = tables[path] = SymbolTable(proc._host(path), info=info)
        return got

    # Phase 1: what every object needs.  Phase 2: those names, looked up through each
    # provider's hash table as they are met in the scope (each name once per object).
    needs = _needs(proc, table)
    missing_versions = {(vp.consumer, vp.version) for vp in proc.version_problems}

    def defs(path: str, names: Any) -> dict[str, Any]:
        known = proc.find(path)
        return table(path, known.info if known is not None and known.path == path else None).lookup(names)

    scopes: dict[tuple[int | None, bool], list[LoadedObject]] = {}
    problems: list[tuple[LoadedObject, list[tuple[str, str | None, str]]]] = []
    memos: dict[tuple[int | None, bool], dict[tuple[str, str | None], bool]] = {}
    for obj in proc.objects:
        syms = needs.get(obj.id)
        if syms is None:
            continue
        key = (obj.group, obj.in_global)
        scope = scopes.get(key)
        if scope is None:
            scope = scopes[key] = proc.scope(obj)
        weak = syms.weak_undefined
        todo: dict[str, list[tuple[str | None, str]]] = {}
        order: dict[tuple[str, str | None, str], int] = {}
        for k, (name, version, file) in enumerate(syms.undefined):
            if name in weak or (version is not None and (obj.path, version) in missing_versions):
                continue
            todo.setdefault(name, []).append((version, file))
            order.setdefault((name, version, file), k)
        todo = _unbound(todo, scope, defs, memos.setdefault(key, {}))
        lost = sorted(((n, v, f) for n, lst in todo.items() for v, f in lst),
                      key=lambda x: order.get(x, 0))
        if lost:
            problems.append((obj, lost))
    if not problems:
        return []
    demangled = _demangle([n for _o, lost in problems for n, _v, _f in lost[:5]])
    out: list[Finding] = []
    for obj, lost in problems:
        by_file: dict[str, list[tuple[str, str | None]]] = {}
        for name, version, file in lost:
            by_file.setdefault(file, []).append((name, version))
        for file, names in by_file.items():
            out.append(_missing_symbol_finding(proc, obj, file, names, demangled, defs, index,
                                               sys_path, prefix, cfg))
    return out


def _unbound(todo: dict[str, list[tuple[str | None, str]]], scope: list[LoadedObject], defs: Any,
             memo: dict[tuple[str, str | None], bool]) -> dict[str, list[tuple[str | None, str]]]:
    """What of ``todo`` (name -> [(version, file), …]) nothing in ``scope`` defines: the scope
    walked in order, each object asked only for what is still unbound (objects late in the
    scope are often never needed).  ``memo`` holds the answers for this scope, shared by the
    objects whose scope it is (``(name, version) -> bound``): a name many of them need (``memcpy``)
    is looked up once."""
    from envlock.libs.elfsyms import provides

    pending: dict[str, list[tuple[str | None, str]]] = {}
    lost: dict[str, list[tuple[str | None, str]]] = {}
    for name, lst in todo.items():
        for v, f in lst:
            got = memo.get((name, v))
            if got is None:
                pending.setdefault(name, []).append((v, f))
            elif not got:
                lost.setdefault(name, []).append((v, f))
    asked = [(n, v) for n, lst in pending.items() for v, _f in lst]
    for o in scope:
        if not pending:
            break
        d = defs(o.path, pending.keys())
        for name in d:
            keep = [(v, f) for v, f in pending[name] if not provides(d, name, v)]
            if keep:
                pending[name] = keep
            else:
                del pending[name]
    for n, v in asked:
        memo[(n, v)] = True
    for n, lst in pending.items():
        for v, f in lst:
            memo[(n, v)] = False
            lost.setdefault(n, []).append((v, f))
    return lost


def _needs(proc: Process, table: Any) -> dict[int, Any]:
    """Phase 1: each object's undefined symbols (by object id).

    A missing version fails the load before any relocation (``_dl_check_map_versions`` runs
    first): such objects' symbols are never bound.
    """
    needs: dict[int, Any] = {}
    unloadable = {vp.consumer for vp in proc.version_problems}
    for obj in proc.objects:
        if obj.kind == "interpreter" or not obj.info.ok or obj.path in unloadable:
            continue
        mine = table(obj.path, obj.info).symbols(defined=False)
        if mine.error or not mine.undefined:
            continue
        needs[obj.id] = mine
    return needs


def _missing_symbol_finding(proc: Process, obj: LoadedObject, file: str,
                            names: list[tuple[str, str | None]], demangled: dict[str, str], defs: Any,
                            index: OwnerIndex | None, sys_path: Sequence[str],
                            prefix: str | None, cfg: SearchConfig) -> Finding:
    """One ``missing-symbol`` finding: ``obj`` needs ``names`` (from ``file``, the Verneed
    ``vn_file``, or ``""`` for unversioned symbols)."""
    from envlock.libs.elfsyms import provides

    name, version = names[0]
    shown = name + (f" ({demangled[name]})" if name in demangled else "")
    loader_text = f"undefined symbol: {name}" + (f", version {version}" if version is not None else "")
    # The library that was picked and lacks it: the Verneed's provider, else the direct
    # dependency whose other copy on disk has it.
    provs = [proc.provider_of(obj, file)] if file else [proc.objects[d] for d in obj.deps]
    provs = [p for p in provs if p is not None]
    # Where another copy may be: the consumer's own RPATH/RUNPATH directories, its
    # directory, and the usual places for stray copies (env lib/, wheels' lib/).
    own = [*proc._dirs_of(obj, "rpath"), *proc._dirs_of(obj, "runpath")]
    dirs = [*own, os.path.dirname(obj.path), *stray_dirs(sys_path, prefix, cfg.root)]
    picked = provs[0] if file and provs else None
    copy = None
    for prov in provs:
        soname = prov.info.soname or os.path.basename(prov.path)
        for d in dict.fromkeys(dirs):
            cand = os.path.join(d, soname)
            if not os.path.exists(proc._host(cand)) or proc.same_file(cand, prov.path):
                continue
            found = defs(cand, [n for n, _v in names])
            if all(provides(found, n, v) for n, v in names):
                picked, copy = prov, cand
                break
        if copy:
            break
    evidence = [f"{loader_text} ({obj.path})"]
    if len(names) > 1:
        evidence.append(f"{len(names)} such symbols: " + ", ".join(
            n + (f"@{v}" if v is not None else "") for n, v in names[:5]))
    fixes: list[str] = []
    if picked is not None:
        soname = picked.info.soname or os.path.basename(picked.path)
        evidence.append(f"{soname} will be {picked.path} ({owner_text(index, picked.path)})")
        res = picked.resolution
        if res is not None:
            evidence.append(f"found through {res.source}")
        if copy is not None:
            evidence.append(f"{copy} defines it ({owner_text(index, copy)})")
            fixes.append(f"Make the loader pick {copy}: e.g. remove {os.path.dirname(picked.path)} "
                         "from LD_LIBRARY_PATH" if res is not None and res.rule == "ld_library_path"
                         else f"Make the loader pick {copy} (put {os.path.dirname(copy)} first).")
        else:
            fixes.append(f"Install the {soname} that {os.path.basename(obj.path)} was built against.")
        title = (f"{os.path.basename(obj.path)} needs {shown}"
                 + (f" (version {version})" if version is not None else "")
                 + f"; the {soname} that will be loaded ({picked.path}) does not define it")
    else:
        title = (f"{os.path.basename(obj.path)} needs {shown}"
                 + (f" (version {version})" if version is not None else "")
                 + "; no object in its scope defines it")
        fixes.append(f"Install the library that {os.path.basename(obj.path)} was built against "
                     "(its DT_NEEDED entries name the candidates).")
    return Finding(
        id="missing-symbol", severity="error", title=title,
        cause=(f"{obj.path} imports {name}; no object in its lookup scope (the global scope, "
               "then its own dlopen group) defines it with a matching version, so loading it "
               f"fails with '{loader_text}' (Python imports extension modules with RTLD_NOW)."),
        evidence=tuple(evidence), fix=tuple(fixes),
        library=(picked.info.soname if picked is not None else file) or name, requester=obj.path)



