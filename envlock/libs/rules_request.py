"""Findings rules about one request (a DT_NEEDED entry, a preload, a dlopen): why it is not
found or refused, and whether the copy found is the one the requester's own paths point to.

Each rule is a function of the :class:`~envlock.libs.ruleset.Context` and the request that
returns its :class:`~envlock.findings.Finding` or ``None``; :mod:`envlock.libs.diagnose` tries
the rules for a request that failed (:data:`MISSING_RULES`) in order, the first that answers
wins (``not_found`` always does), and :func:`shadowed` for one that succeeded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envlock.findings import Finding
from envlock.libs.objects import Resolution
from envlock.libs.report import RuntimeResult
from envlock.libs.ruleset import (
    Context,
    find_by_soname,
    owner_text,
    pin_for,
    search_dirs_of,
    searched_summary,
    soname_link_fix,
)

__all__ = ["MISSING_RULES", "REFUSALS", "Missing", "invalid_elf", "not_found", "refused",
           "shadowed", "soname_elsewhere", "wrong_class"]

#: glibc 2.36's refusals when mapping an accepted file (``elf/dl-load.c``
#: ``_dl_map_object_from_fd``), with what each means.
REFUSALS: dict[str, str] = {
    "cannot dynamically load position-independent executable":
        "it is a program (DF_1_PIE), and only the main program may be one.",
    "cannot dynamically load executable":
        "it is a fixed-address program (ET_EXEC), which cannot be loaded as a library.",
    "shared object cannot be dlopen()ed":
        "it was linked with -z nodlopen (DF_1_NOOPEN), and this load is a dlopen.",
    "object file has no loadable segments": "it has no PT_LOAD program header.",
    "object file has no dynamic section":
        "it has no PT_DYNAMIC (often a separate debug-info file).",
    "ELF load command address/offset not page-aligned":
        "a PT_LOAD's p_vaddr - p_offset is not a multiple of the page size (a tool that "
        "rewrote the file broke its layout).",
}


@dataclass(frozen=True, kw_only=True)
class Missing:
    """A request the loader could not satisfy, as the rules read it.

    :ivar res: the request; ``rt``: the run-time dlopen that made it, if one did.
    :ivar where: ``"needed by X"`` / ``"dlopen'ed by X (when)"``.
    :ivar places: evidence lines: the files tried that were not simply absent, then one
        line per list searched.
    :ivar error: the loader's error text (``""`` if none).
    """

    res: Resolution
    rt: RuntimeResult | None
    where: str
    places: list[str]
    error: str

    @classmethod
    def of(cls, ctx: Context, res: Resolution) -> Missing:
        """The :class:`Missing` view of failed request ``res``."""
        rt = ctx.runtime_of(res)
        where = f"needed by {res.requester}" if res.kind == "needed" else (
            f"dlopen'ed by {res.requester}" + (f" ({rt.when})" if rt else ""))
        places = [f"tried {a.path} ({a.source}): {a.outcome}" for a in res.tried
                  if a.outcome != "absent" or a.rule == "slash"] + searched_summary(res, ctx.cfg)
        return cls(res=res, rt=rt, where=where, places=places, error=res.error or "")


def refused(ctx: Context, m: Missing) -> Finding | None:
    """``refused``: a file was found but ``_dl_map_object_from_fd`` will not map it."""
    res, err = m.res, m.error
    why = next((r for r in REFUSALS if err.endswith(": " + r)), None)
    if why is None:
        return None
    path = res.tried[-1].path if res.tried else res.name
    return Finding(
        id="refused", severity="error",
        title=f"{res.name}: the loader refuses {path} ({why})",
        cause=(f"{path} is found for {res.name} ({m.where}), but glibc will not map it: "
               f"{REFUSALS[why]} The load fails with `{err}`."),
        evidence=(f"{path}: {why}", *m.places),
        fix=(f"Give {res.name} a shared library built with -shared -fPIC (and "
             "without -z nodlopen when it is dlopen'ed).",),
        library=res.name, requester=res.requester)


def _fatal_attempt(res: Resolution) -> Any:
    """The file whose check stopped the search for ``res`` (glibc ``open_verify`` fails
    with a fatal error: invalid ELF header, file too short, unreadable), or ``None``."""
    for a in reversed(res.tried):
        if a.outcome not in ("found", "absent") and not a.outcome.startswith(
                ("wrong ELF class", "wrong machine")):
            return a
    return None


def invalid_elf(ctx: Context, m: Missing) -> Finding | None:
    """``invalid-elf``: ``open_verify`` met a file that stops the whole load."""
    res = m.res
    bad = _fatal_attempt(res)
    if bad is None:
        return None
    return Finding(
        id="invalid-elf", severity="error",
        title=f"{res.name}: the loader meets a file that is not a usable shared object",
        cause=(f"While searching for {res.name} ({m.where}) the loader opened {bad.path}, "
               f"which fails its checks ({bad.outcome}); this stops the "
               "whole load instead of moving on."),
        evidence=(f"{bad.path}: {bad.outcome}", *m.places),
        fix=((f"Remove or rename {bad.path} (e.g. a linker script or a truncated copy)"
              + (", or make the directory of the real library come earlier in the "
                 "search." if "/" not in res.name else ".")),),
        library=res.name, requester=res.requester)


def wrong_class(ctx: Context, m: Missing) -> Finding | None:
    """``wrong-class`` (error): every candidate is of another ELF class."""
    res = m.res
    if not m.error.startswith("wrong ELF class"):
        return None
    return Finding(
        id="wrong-class", severity="error",
        title=f"{res.name}: only copies of the wrong ELF class were found",
        cause=f"Every candidate for {res.name} ({m.where}) is {m.error.split(': ')[-1]}; "
              "the loader skips them and fails.",
        evidence=tuple(m.places),
        fix=(("Install the library built for this architecture "
              f"({'64' if ctx.cfg.host.elfclass == 64 else '32'}-bit)."),),
        library=res.name, requester=res.requester)


def soname_elsewhere(ctx: Context, m: Missing) -> Finding | None:
    """``missing-soname-symlink`` (error): the library is in a searched directory, but not
    under the name asked for (the SONAME link is missing)."""
    res = m.res
    sym = find_by_soname(ctx.proc, res.name, search_dirs_of(res.tried))
    if not sym:
        return None
    return Finding(
        id="missing-soname-symlink", severity="error",
        title=f"{res.name}: the library is there but not under its SONAME",
        cause=(f"{sym} has SONAME {res.name}, but no file named {res.name} exists "
               f"in {os.path.dirname(sym)}; the loader looks only for the exact name."),
        evidence=(f"{sym}: SONAME {res.name}", f"{res.name} {m.where}", *m.places),
        fix=soname_link_fix(sym, res.name),
        library=res.name, requester=res.requester)


#: the MPI libraries conda-forge's ``external_*`` placeholder builds leave to the system
#: (conda-forge docs, "Using External Message Passing Interface (MPI) Libraries").
_MPI_PACKAGES = ("mpich", "openmpi")


def _external_mpi(prefix: str | None, name: str) -> tuple[str, ...] | None:
    """For an unfound ``libmpi*`` in a conda prefix whose MPI package is conda-forge's
    ``external_*`` placeholder (``conda-meta/mpich-4.2.1-external_0.json``): the evidence and
    the fixes that name it — the placeholder installs no library; the system MPI must be on the
    loader's path, or a real conda build replace it.  ``None`` otherwise."""
    if not prefix or not name.startswith("libmpi"):
        return None
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return None
    for fname in names:
        m = re.fullmatch(r"(" + "|".join(_MPI_PACKAGES) + r")-([^-]+)-(external_[^-]*)\.json", fname)
        if m:
            pkg, version, build = m.groups()
            return (f"conda-meta/{fname}: {pkg} {version} {build} is conda-forge's placeholder "
                    f"for an MPI outside conda: it installs no {name}",
                    f"Put the system {pkg} on the loader's path: `module load {pkg}` (or "
                    f"`export LD_LIBRARY_PATH=<its lib directory>:$LD_LIBRARY_PATH`) in the job "
                    "script; the placeholder needs the MPI it stands for",
                    f"or install conda-forge's own build instead: `conda install "
                    f"'{pkg}={version}=h*'`")
    return None


def not_found(ctx: Context, m: Missing) -> Finding | None:
    """``not-found`` / ``runtime-not-found``: no file of that name anywhere searched; the
    fix names a stray copy when ``LD_LIBRARY_PATH`` would make the loader take it."""
    res, rt, cfg = m.res, m.rt, ctx.cfg
    tried_dirs = search_dirs_of(res.tried)
    # A name with a slash is not searched for, so copies elsewhere do not matter;
    # only regular files (or links to them) count as copies.
    copies = [] if "/" in res.name else [
        os.path.join(d, res.name) for d in ctx.strays()
        if os.path.isfile(os.path.join(d, res.name)) and d not in tried_dirs]
    fixes = []
    evidence = [f"{res.name} {m.where}", *m.places]
    requester_obj = ctx.object_at(res.requester)
    for c in copies:
        d = os.path.dirname(c)
        p, _rule, _src = ctx.proc.what_if(res.name, requester_obj, ld_library_path=d + (
            ":" + cfg.ld_library_path if cfg.ld_library_path else ""))
        evidence.append(f"a copy exists at {c} ({owner_text(ctx.index, c)}), on no search path")
        if p and os.path.realpath(p) == os.path.realpath(c):
            fixes.append(f"export LD_LIBRARY_PATH={d}" + (
                ":$LD_LIBRARY_PATH" if cfg.ld_library_path else "")
                + f"  (the loader would then find {c})")
            break
    if not fixes and "/" in res.name:
        fixes.append(f"{res.name} does not exist: reinstall the package that should "
                     "contain it, or correct the path.")
    elif not fixes:
        fixes.append(f"Install the package that provides {res.name}, or add its directory "
                     "to LD_LIBRARY_PATH.")
    placeholder = _external_mpi(ctx.prefix, res.name)
    if placeholder:
        evidence.append(placeholder[0])
        fixes[:] = placeholder[1:]
    if rt and rt.framework == "cuda" and res.name == "libcuda.so.1":
        fixes.insert(0, "Install the NVIDIA driver (libcuda.so.1 comes with it, not with "
                        "CUDA wheels); without it CUDA is unavailable.")
    note = ("PATH does not matter to the loader; only RPATH/RUNPATH, LD_LIBRARY_PATH, "
            "ld.so.cache and the default directories do.")
    return Finding(
        id="runtime-not-found" if rt else "not-found",
        severity=("error" if (rt.required and copies) else "warning") if rt else "error",
        title=f"{res.name} will not be found" + (f" ({rt.when})" if rt else ""),
        cause=(f"{res.name} is {m.where}; the name contains a slash, so the loader opens "
               "exactly that path (no search), and there is no such file."
               if "/" in res.name else
               f"{res.name} is {m.where}; the loader searched every place in order and "
               f"found no file named {res.name}. " + (note if copies else "")).strip(),
        evidence=tuple(evidence), fix=tuple(fixes),
        library=res.name, requester=res.requester)


#: The rules for a request that failed, in order; the first that answers wins.
MISSING_RULES: tuple[Callable[[Context, Missing], Finding | None], ...] = (
    refused, invalid_elf, wrong_class, soname_elsewhere, not_found)


def shadowed(ctx: Context, res: Resolution) -> Finding | None:
    """``shadowed``: the copy found (through ``LD_LIBRARY_PATH``, an object already loaded,
    ``ld.so.cache`` or the default directories) is not the one the requester's own RPATH or
    RUNPATH would give."""
    proc = ctx.proc
    if res.kind == "preload" or not res.requester:
        return None
    if res.rule not in ("ld_library_path", "already-loaded", "ld.so.cache", "default"):
        return None
    key = ("shadow", res.name, res.path or "")
    if key in ctx.seen:
        return None
    expected, erule, esrc = proc.what_if(res.name, ctx.object_at(res.requester), ld_library_path=None)
    if expected is None or proc.same_file(expected, res.path or ""):
        return None
    if res.rule in ("ld.so.cache", "default") and erule in ("ld.so.cache", "default"):
        return None
    ctx.seen.add(key)
    cause, fix = _shadow_cause(ctx, res, esrc)
    evidence = [f"will load: {res.path} ({owner_text(ctx.index, res.path or '')})",
                f"intended: {expected} via {esrc} ({owner_text(ctx.index, expected)})"]
    pin = pin_for(ctx.index, ctx.plan, expected)
    if pin:
        evidence.append(f"{pin.requirer} requires {pin.name}{pin.specifier}")
    return Finding(
        id="shadowed", severity="warning",
        title=f"{res.name} is shadowed: {res.path} is loaded instead of {expected}",
        cause=cause, evidence=tuple(evidence), fix=fix,
        library=res.name, requester=res.requester)


def _shadow_cause(ctx: Context, res: Resolution, esrc: str) -> tuple[str, tuple[str, ...]]:
    """The cause and fix of a ``shadowed`` finding, by the rule that took the other copy."""
    proc = ctx.proc
    actual_obj = proc.objects[res.object_id] if res.object_id is not None else None
    if res.rule == "ld_library_path":
        d = os.path.dirname(res.path or "")
        cause = (f"{res.name} needed by {res.requester} is found through LD_LIBRARY_PATH entry "
                 f"{d}, which the loader searches before {esrc} where the intended copy is.")
        return cause, ((f"Remove {d} from LD_LIBRARY_PATH for this job (e.g. `module unload` the "
                        "module that adds it)."),)
    if res.rule == "already-loaded" and actual_obj is not None:
        requester = actual_obj.resolution.requester if actual_obj.resolution else "?"
        how = {"preload": "by LD_PRELOAD", "dlopen": "by an earlier dlopen",
               "needed": f"as a dependency of {requester}"}.get(actual_obj.kind, "earlier")
        cause = (f"An object with SONAME {res.name} was already loaded {how} from {res.path}; "
                 f"the loader reuses it for {res.requester} instead of searching, so the copy "
                 f"its {esrc} points to is never used.")
        return cause, ("Unset LD_PRELOAD for this job." if actual_obj.kind == "preload" else
                       f"Make sure the object loaded first uses the same copy as "
                       f"{os.path.basename(res.requester)}.",)
    expected = proc.what_if(res.name, ctx.object_at(res.requester), ld_library_path=None)[0]
    cause = (f"{res.name} needed by {res.requester} is taken from {res.rule} ({res.path}) "
             f"although {esrc} would give {expected}.")
    return cause, ("Check LD_LIBRARY_PATH, LD_PRELOAD and /etc/ld.so.conf.d.",)
