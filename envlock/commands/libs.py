"""``envlock libs``: which shared libraries a module will really load, and why.

The answer comes from envlock's model of glibc's loader (:mod:`envlock.libs.search`), without
importing the module; ``--runtime`` then imports it in the target interpreter and compares
``/proc/self/maps`` with the model.  Exit status: 0 fine, 1 an error-level finding (or an
unexplained ``--runtime`` difference), 2 envlock could not run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from envlock.commands._common import handle_errors, target_options

if TYPE_CHECKING:
    from envlock.libs.analysis import LibEntry, LibsReport

__all__ = ["libs", "render_text", "render_why", "runtime_check", "target_query"]

#: Seconds allowed for the target interpreter to report its sys.path.
QUERY_TIMEOUT = 20.0
#: Seconds allowed for ``--runtime`` to import the module.
IMPORT_TIMEOUT = 180.0

_RULE_TEXT = {
    "rpath": "RPATH",
    "runpath": "RUNPATH",
    "ld_library_path": "LD_LIBRARY_PATH",
    "ld.so.cache": "ld.so.cache",
    "default": "default dirs",
    "slash": "by path",
    "preload": "LD_PRELOAD",
    "already-loaded": "already loaded",
}

def target_query(
    python: str, prefix: str, *, environ: Mapping[str, str], cache: bool = True,
) -> tuple[list[str], str | None, str | None]:
    """The target interpreter's ``sys.path`` and ``sys.executable``, asked once (with a
    timeout) and cached while valid (:func:`envlock.probes.target.query_interpreter_cached`; not
    with ``cache=False``, i.e. ``--no-cache``).  ``sys.executable`` is the program that really
    runs when ``python`` is a wrapper script (a pyenv shim execs the real interpreter).

    :returns: ``(sys_path, executable, error)``; on failure the prefix's ``site-packages``,
        ``None`` and a message.
    """
    from envlock.probes.target import ResolvedTarget, query_interpreter, query_interpreter_cached

    target = ResolvedTarget(kind="venv", prefix=prefix, python=python, chosen_by="--python")
    query = query_interpreter_cached if cache else query_interpreter
    info = query(target, timeout=QUERY_TIMEOUT, environ=dict(environ))
    path = list(info.path)
    if info.status != "ok":
        return path, None, f"could not ask {python} for sys.path ({info.error}); using {path}"
    return path, info.executable or None, None


def _is_elf(path: str) -> bool:
    """Whether ``path`` starts with the ELF magic (a wrapper script does not)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


# -- --runtime -----------------------------------------------------------------------------

RUNTIME_SCRIPT = r"""
import importlib, json, sys
name = sys.argv[1]
err = None
try:
    if name.endswith(".so") or "/" in name:
        import ctypes
        ctypes.CDLL(name)
    else:
        importlib.import_module(name)
except BaseException as exc:
    err = "%s: %s" % (type(exc).__name__, exc)
imported = []
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if isinstance(f, str) and f.endswith(".so") and f not in imported:
        imported.append(f)
files = []
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            p = parts[5].strip()
            if p not in files:
                files.append(p)
print(json.dumps({"error": err, "files": files, "imported": imported}))
"""


def runtime_check(
    report: LibsReport, python: str, module: str, *, environ: Mapping[str, str],
    reanalyze: Any,
) -> dict[str, Any]:
    """Import ``module`` in the target and compare the files it maps with the model.

    :param reanalyze: ``callable(extra_modules) -> LibsReport``: the same analysis with the
        extension modules the import loaded ``dlopen``'ed first, in the order Python loaded
        them (to explain their libraries and which copy each SONAME binds to).
    :returns: ``{"status", "error", "matched", "explained", "unexplained", "not_loaded"}``;
        ``unexplained`` lists files mapped by the process that the model cannot account for
        and model objects missing from the process.
    """
    from envlock._run import run

    res = run([report.launcher or python, "-c", RUNTIME_SCRIPT, module], timeout=IMPORT_TIMEOUT,
              env=dict(environ), cwd="/")
    if not res.ok:
        return {"status": res.status, "error": res.detail, "matched": [], "explained": [],
                "unexplained": [], "not_loaded": []}
    try:
        data = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "error", "error": "unexpected output from the target", "matched": [],
                "explained": [], "unexplained": [], "not_loaded": []}
    mapped = [f for f in data["files"] if ".so" in os.path.basename(f) or f == os.path.realpath(python)]
    static = {o.realpath: o for o in report.objects if o.stage in ("startup", "import")}
    # Model again with every extension module the import really loaded, in the order Python
    # loaded them (sys.modules order): that order decides which copy a SONAME binds to.
    imported = [f for f in data.get("imported", []) if isinstance(f, str)]
    full = reanalyze(imported) if imported else report
    known = {o.realpath: o for o in full.objects}
    reachable: set[str] = {o.realpath for o in full.objects if o.stage == "startup"}
    for o in full.objects:
        if o.via and o.via.startswith("torch"):
            reachable |= {x.realpath for x in full.closure(o.path)}
    for f in imported:
        reachable |= {x.realpath for x in full.closure(f)}
    imported_real = {os.path.realpath(f) for f in imported}
    matched, explained, unexplained, not_loaded = [], [], [], []
    for f in mapped:
        if f in static:
            matched.append(f)
        elif f in known:
            o = known[f]
            why = ("Python extension module imported by the module's Python code"
                   if _is_ext_module(f) else f"needed by {o.requested_by} (an extension module's closure)")
            explained.append({"path": f, "why": why})
        elif f.startswith("/usr/lib/locale/") or f.endswith(".cache"):
            explained.append({"path": f, "why": "data file mapped by the C library"})
        else:
            unexplained.append({"path": f, "why": "mapped by the process, not predicted by the model"})
    mapped_set = set(mapped)
    for real, o in static.items():
        if real in mapped_set or o.kind == "interpreter":
            continue
        if _is_ext_module(real) and real not in imported_real:
            explained.append({"path": o.path, "why": "an extension module of the package that "
                              f"`import {module}` does not import (the model loads them all)"})
        elif real not in reachable:
            explained.append({"path": o.path, "why": "needed only by extension modules that "
                              f"`import {module}` does not import"})
        else:
            not_loaded.append({"path": o.path, "why": "predicted but not mapped"})
    unexplained += not_loaded
    return {"status": "ok", "error": data.get("error"), "matched": matched,
            "explained": explained, "unexplained": unexplained, "not_loaded": not_loaded}


def _is_ext_module(path: str) -> bool:
    import re

    return bool(re.search(r"\.(cpython-\d+[^/]*|abi3)\.so$", path)) or "/lib-dynload/" in path


# -- rendering -----------------------------------------------------------------------------


def _label(o: LibEntry) -> str:
    owner = f"  {o.owner}" if o.owner else "  (no package)"
    return owner


def render_text(report: LibsReport, *, check: dict[str, Any] | None = None) -> str:
    """The human-readable answer: a tree per extension file, run-time loads, findings."""
    lines: list[str] = []
    cfg = report.config
    objs = report.objects
    by_id = {o.id: o for o in objs}
    children: dict[str, list[Any]] = {}
    seen_req: set[tuple[str, str]] = set()
    for r in report.requests:
        # The loader walks the DT_NEEDED of every object in each breadth-first pass, so the
        # same request repeats; the tree shows the first one.
        if r.kind == "needed" and (r.requester, r.name) not in seen_req:
            seen_req.add((r.requester, r.name))
            children.setdefault(r.requester, []).append(r)
    wrapper = f"; started by the wrapper {report.launcher}" if report.launcher else ""
    if report.target == report.python:
        lines.append(f"target: {report.python} (the interpreter itself, as the main program{wrapper})")
    else:
        lines.append(f"target: {report.python} importing {report.target}"
                     + (f" ({wrapper[2:]})" if wrapper else ""))
    env_bits = [f"LD_LIBRARY_PATH={cfg.ld_library_path}" if cfg.ld_library_path else "LD_LIBRARY_PATH unset",
                f"LD_PRELOAD={cfg.ld_preload}" if cfg.ld_preload else "LD_PRELOAD unset"]
    lines.append(f"loader: glibc {'.'.join(map(str, cfg.glibc))}, {', '.join(env_bits)}, "
                 f"default dirs {':'.join(cfg.system_dirs)}")
    startup = [o for o in objs if o.stage == "startup" and o.kind not in ("executable",)]
    if startup:
        lines.append("interpreter start-up: " + ", ".join(os.path.basename(o.path) for o in startup))
    lines.append("")
    expanded: set[int] = set()
    # A node is (text, children); nodes are built depth-first (the first request of an
    # object expands it) and drawn afterwards, so that the connector of the last child
    # *drawn* is └── even when later requests are not drawn.
    Node = tuple[str, list[Any]]

    def node(r: Any) -> Node | None:
        o = by_id.get(r.object_id) if r.object_id is not None else None
        if o is None:
            return (f"{r.name} => NOT FOUND ({r.error})", [])
        first = o.id not in expanded and o.name == r.name and o.requested_by == (r.requester or None) \
            and r.rule != "already-loaded"
        rule = _RULE_TEXT.get(r.rule or "", r.rule or "")
        if o.kind == "preload" and r.kind == "preload":
            rule = "LD_PRELOAD"
        shown = r.name if r.name == o.path else f"{r.name} => {o.path}"
        if not first:
            if o.stage == "startup" or o.kind == "interpreter" or o.rule in ("ld.so.cache", "default"):
                return None  # system libraries seen before: not repeated (see --why or JSON)
            how = "already loaded" if r.rule == "already-loaded" else f"{rule}, same file already loaded"
            return (f"{shown}  [{how}]", [])
        expanded.add(o.id)
        kids = [n for n in (node(k) for k in children.get(o.path, [])) if n is not None]
        return (f"{shown}  [{rule}]{_label(o)}", kids)

    def draw(nodes: list[Node], prefix: str) -> None:
        for i, (text, kids) in enumerate(nodes):
            last = i == len(nodes) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{text}")
            draw(kids, prefix + ("    " if last else "│   "))

    def grow(requests: list[Any]) -> list[Node]:
        return [n for n in (node(r) for r in requests) if n is not None]

    roots = [r for r in report.requests if r.kind == "dlopen" and r.requester and
             not any(r is rt.resolution for rt in report.runtime)]
    stage_of = {o.id: o for o in objs}
    import_roots = [r for r in roots if r.object_id is not None and stage_of[r.object_id].stage == "import"
                    or r.object_id is None]
    if import_roots:
        lines.append(f"import {report.target}")
        draw(grow(import_roots), "")
        notes = list(dict.fromkeys(o.via for o in objs if o.stage == "import" and o.via))
        for n in notes:
            lines.append(f"  note: {n}")
    elif report.files and objs:
        main = objs[0]
        lines.append(f"{main.path}")
        draw(grow(children.get(main.path, [])), "")
    if not report.files and not report.errors:
        lines.append(f"{report.target} has no extension modules: importing it loads no shared "
                     "object beyond the interpreter's (name an extension module to see its own).")
    if report.runtime:
        lines.append("")
        lines.append("loaded later with dlopen (run-time, from the table in envlock.libs.runtime):")
        for rt in report.runtime:
            r = rt.resolution
            caller = os.path.basename(rt.caller)
            if r.path is None:
                lines.append(f"  {rt.name} <- {caller} ({rt.when}): NOT FOUND")
            else:
                o = by_id.get(r.object_id)
                owner = _label(o) if o else ""
                lines.append(f"  {rt.name} <- {caller} ({rt.when}): {r.path}  "
                             f"[{_RULE_TEXT.get(r.rule or '', r.rule)}]{owner}")
    if report.errors:
        lines.append("")
        lines += [f"error: {e}" for e in report.errors]
    lines.append("")
    if report.findings:
        lines.append(f"findings ({len(report.findings)}):")
        for f in report.findings:
            lines.append(f"  {f.severity} [{f.id}] {f.title}")
            lines.append(f"      cause: {f.cause}")
            for e in f.evidence:
                lines.append(f"      evidence: {e}")
            for x in f.fix:
                lines.append(f"      fix: {x}")
    else:
        lines.append("findings: none")
    if check is not None:
        lines.append("")
        lines.append(f"--runtime: {check['status']}" + (f" ({check['error']})" if check.get("error") else ""))
        lines.append(f"  {len(check['matched'])} files as predicted, {len(check['explained'])} explained, "
                     f"{len(check['unexplained'])} unexplained")
        for x in check["explained"]:
            lines.append(f"  explained: {x['path']}: {x['why']}")
        for x in check["unexplained"]:
            lines.append(f"  UNEXPLAINED: {x['path']}: {x['why']}")
    return "\n".join(lines) + "\n"


def render_why(report: LibsReport, name: str) -> str:
    """Every request of ``name``, with every place tried in order and the outcome."""
    reqs = report.requests_for(name)
    if not reqs:
        return f"{name}: never requested by {report.target} (not in any DT_NEEDED or known dlopen)\n"
    lines = []
    by_id = {o.id: o for o in report.objects}
    runtime = {id(rt.resolution): rt for rt in report.runtime}
    for r in reqs:
        who = r.requester or "LD_PRELOAD"
        o = by_id.get(r.object_id) if r.object_id is not None else None
        why = ""
        if id(r) in runtime:
            why = f" ({runtime[id(r)].when})"
        elif r.kind == "dlopen" and o is not None and o.resolution_is(r) and o.via:
            why = f" ({o.via})"
        lines.append(f"{r.name} ({r.kind}) requested by {who}{why}:")
        if r.rule == "already-loaded":
            lines.append(f"  already loaded: {r.source}; nothing is searched")
        for i, a in enumerate(r.tried, 1):
            lines.append(f"  {i:3d}. {a.path}  [{a.source}]  {a.outcome}")
        if r.path:
            lines.append(f"  => {r.path}  (rule: {_RULE_TEXT.get(r.rule or '', r.rule)})")
        else:
            lines.append(f"  => not loaded: {r.error}")
        lines.append("")
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------


@click.command()
@click.argument("targets", nargs=-1, metavar="[MODULE|FILE]...")
@target_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format (json: schema 1, see docs/libs.md).")
@click.option("--why", "why", metavar="SONAME", help="List every place tried for SONAME, in order.")
@click.option("--runtime", is_flag=True,
              help="Also import the module in the target and compare /proc/self/maps with the model.")
@click.option("--symbols/--no-symbols", default=True, show_default=True,
              help="Check that every undefined symbol binds, as Python's RTLD_NOW import "
                   "does (--no-symbols: search paths and versions only).")
@click.option("--no-cache", is_flag=True,
              help="Recompute everything: use and fill no cache (ELF facts, owners, answers).")
@handle_errors
def libs(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, symbols: bool, no_cache: bool,
) -> None:
    """Show which shared libraries MODULE (or FILE) will really load, and why.

    Models glibc's dynamic loader for the target interpreter: RPATH/RUNPATH, LD_LIBRARY_PATH,
    LD_PRELOAD, ld.so.cache, default directories, torch's preloading of nvidia wheels, and
    well-known run-time dlopens (libcuda.so.1, cuDNN sub-libraries). Nothing is imported
    unless --runtime is given.
    """
    _check_arguments(targets, why)
    environ = dict(os.environ)
    if no_cache or runtime:
        out, err, code = _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ, symbols)
    else:
        from envlock import cache as _statcache
        from envlock.libs import answer as libanswer

        entry = libanswer.answer_entry(["libs", *targets, f"--python={python}", f"--prefix={prefix}",
                                        f"--format={fmt}", f"--why={why}", f"--symbols={symbols}"],
                                       environ)
        hit = _statcache.load(entry)
        if isinstance(hit, dict) and isinstance(hit.get("stdout"), str) and isinstance(hit.get("exit"), int):
            out, err, code = hit["stdout"], "", hit["exit"]
        else:
            tracer = libanswer.InputTracer(ignore=[os.path.dirname(_statcache.cache_dir("", environ))])
            with tracer.active():
                out, err, code = _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ,
                                          symbols)
            if not err:  # an answer with warnings (e.g. a failed sys.path query) is not kept
                _statcache.store(entry, tracer.inputs, {"stdout": out, "exit": code})
    if err:
        click.echo(err, err=True, nl=False)
    sys.stdout.write(out)
    if code:
        sys.exit(code)


def _check_arguments(targets: Sequence[str], why: str | None) -> None:
    """Reject arguments that cannot name anything: an empty ``--why``, a FILE (an argument
    with a slash or ending in ``.so``) that does not exist or is a directory.

    :raises TargetError: (shown as one ``Error:`` line, exit status 2).
    """
    from envlock.errors import TargetError

    if why is not None and not why.strip():
        raise TargetError("--why needs a SONAME or file name (got an empty string)")
    for name in targets:
        if not name.strip():
            raise TargetError("an empty MODULE|FILE argument")
        if "/" not in name and not name.endswith(".so"):
            continue
        if os.path.isdir(name):
            raise TargetError(f"{name}: is a directory, not a shared object")
        if not os.path.exists(name):
            raise TargetError(f"{name}: no such file")


def _compute(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, no_cache: bool, environ: dict[str, str], symbols: bool = False,
) -> tuple[str, str, int]:
    """Run the analysis: returns ``(stdout, stderr, exit status)``."""
    from envlock.libs.elf import ElfCache
    from envlock.probes.target import resolve_target
    from envlock.libs.analysis import analyze_module

    elf_cache = None if no_cache else ElfCache()
    target = resolve_target(python=python, prefix=prefix, environ=environ)
    target_prefix, target_python = target.prefix, target.python
    if target_python is None:
        from envlock.errors import TargetError

        raise TargetError(f"{target_prefix}: no interpreter (bin/python) in this environment")
    sys_path, executable, warn = target_query(target_python, target_prefix, environ=environ,
                                              cache=not no_cache)
    err = f"warning: {warn}\n" if warn else ""
    launcher = None
    if executable and not _is_elf(target_python) and _is_elf(executable):
        # A wrapper script (pyenv shim): the kernel runs its #! interpreter, which execs the
        # real Python; that program, as sys.executable names it, is what the loader sees.
        launcher, target_python = target_python, executable
    names = list(targets) or [target_python]
    documents = []
    chunks: list[str] = []
    worst = 0
    for name in names:
        mode = "ldd" if name == target_python else "import"

        def analyze(extra: Sequence[str] = (), _name: str = name, _mode: str = mode) -> LibsReport:
            return analyze_module(target_python, _name, sys_path=sys_path, prefix=target_prefix,
                                  env=environ, elf_cache=elf_cache, mode=_mode, extra_modules=extra,
                                  extra_first=bool(extra), check_symbols=symbols)

        report = analyze()
        if launcher:
            import dataclasses

            report = dataclasses.replace(report, launcher=launcher)
        check = None
        if runtime and mode == "import":
            check = runtime_check(report, target_python, name, environ=environ, reanalyze=analyze)
            if check["unexplained"] or check["status"] != "ok":
                worst = max(worst, 1)
        if any(f.severity == "error" for f in report.findings) or report.errors:
            worst = max(worst, 1)
        if fmt == "json":
            doc = report.to_json()
            if check is not None:
                doc["runtime_check"] = check
            documents.append(doc)
        elif why:
            chunks.append(render_why(report, why))
        else:
            chunks.append(render_text(report, check=check))
    if fmt == "json":
        doc_out = documents[0] if len(documents) == 1 else {"schema": 1, "reports": documents}
        chunks.append(json.dumps(doc_out, indent=2) + "\n")
    return "".join(chunks), err, worst
