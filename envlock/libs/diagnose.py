"""The findings of an ``envlock libs`` analysis: what is wrong with what the loader will do.

Each finding says what glibc would do and why (``elf/dl-load.c``'s refusals with their own
messages, the search order of ``docs/libs.md``), the object that needs it, and a fix:
not-found and refused objects, a SONAME present under another name, shadowing by
``LD_LIBRARY_PATH``, two OpenMP runtimes, nvidia-* wheels that do not match torch's pins,
missing symbol versions (``GLIBCXX_3.4.30``) and missing symbols (bound as ``RTLD_NOW`` does).
:func:`envlock.libs.analysis.analyze_module` calls :func:`report_findings` and
:func:`symbol_findings`.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Sequence
from typing import Any

from envlock.libs.elf import read_elf
from envlock.findings import Finding
from envlock.libs.owners import OwnerIndex, Pin, conda_pins, read_pins
from envlock.libs.runtime import (
    TorchPlan,
)
from envlock.libs.search import (
    LoadedObject,
    Process,
    Resolution,
    SearchConfig,
)

from envlock.libs.report import LibEntry, RuntimeResult

__all__ = ["report_findings", "symbol_findings"]

#: GCC release that introduced each GLIBCXX version (libstdc++ manual, "ABI Policy").
_GLIBCXX_GCC = {"3.4.28": "9.3", "3.4.29": "11.1", "3.4.30": "12.1", "3.4.31": "13.1",
                "3.4.32": "13.2", "3.4.33": "14.1"}


# -- findings ------------------------------------------------------------------------------


def _owner_text(index: OwnerIndex | None, path: str) -> str:
    if index is None:
        return "owner not looked up"
    o = index.owner(path)
    return f"from package {o.label()}" if o else "owned by no package"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _max_version(names: Sequence[str], prefix: str) -> str | None:
    same = [n for n in names if n.startswith(prefix)]
    return max(same, key=_version_key) if same else None


def _searched_summary(res: Resolution, cfg: SearchConfig) -> list[str]:
    """One line per list searched, in order: ``searched RPATH of X: /a, /b``."""
    groups: dict[str, list[str]] = {}
    for a in res.tried:
        d = os.path.dirname(a.path)
        for sub in cfg.subdirs:
            if d.endswith("/" + sub):
                d = d[: -len(sub) - 1]
                break
        dirs = groups.setdefault(a.source, [])
        if d not in dirs:
            dirs.append(d)
    out = []
    no_entry = (cfg.cache is not None and "/" not in res.name
                and not any(a.rule == "ld.so.cache" for a in res.tried))
    for source, dirs in groups.items():
        if res.tried and res.tried[0].rule == "slash":
            break  # a path is opened, not searched: the tried lines say it all
        if source == "system search path" and no_entry:
            out.append(f"searched {cfg.cache.path}: no entry for {res.name}")  # type: ignore[union-attr]
            no_entry = False
        if source.endswith("ld.so.cache"):
            out.append(f"searched {source}: entry {dirs[0]}")
        else:
            out.append(f"searched {source}: {', '.join(dirs)}")
    if no_entry:
        out.append(f"searched {cfg.cache.path}: no entry for {res.name}")  # type: ignore[union-attr]
    return out


#: What each :class:`~envlock.libs.elf.ElfError` kind means, for the finding's cause.
_ELF_ERROR_TEXT = {
    "not-elf": "not an ELF file at all",
    "truncated": "shorter than its own headers say (cut short)",
    "corrupt": "inconsistent (its headers point outside the file)",
    "unreadable": "not readable",
}


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


def _unreadable_finding(o: LoadedObject) -> Finding:
    """``invalid-elf`` for a loaded object whose file could not be fully read as ELF."""
    err = o.info.error
    assert err is not None
    what = _ELF_ERROR_TEXT.get(err.kind, err.kind)
    requester = o.resolution.requester if o.resolution else None
    evidence = [f"{o.path}: {err.message}"]
    if o.kind == "executable":
        head = b""
        try:
            with open(o.path, "rb") as f:
                head = f.read(128)
        except OSError:
            pass
        script = head.startswith(b"#!")
        if script:
            evidence.append(f"{o.path} starts with {head.splitlines()[0].decode('utf-8', 'replace')}")
        return Finding(
            id="invalid-elf", severity="error",
            title=f"{o.path} is not an ELF program ({err.message})",
            cause=(f"{o.path} is {what}"
                   + ("; it is a script, so the kernel runs the interpreter its #! line names and "
                      "the dynamic loader never sees this file." if script else
                      "; the kernel cannot start it with the dynamic loader.")),
            evidence=tuple(evidence),
            fix=("Give --python the real interpreter (the file sys.executable names when the "
                 "wrapper runs), so that its libraries can be modelled.",),
            library=os.path.basename(o.path), requester=None)
    return Finding(
        id="invalid-elf", severity="error",
        title=f"{o.path} is not a loadable shared object ({err.message})",
        cause=(f"Its ELF header passes the loader's first checks, but the file is {what}; "
               "mapping it fails."),
        evidence=tuple(evidence),
        fix=(f"Reinstall the package that owns {o.path} (a download or copy was cut short).",),
        library=o.info.soname or os.path.basename(o.path), requester=requester)


def _fatal_attempt(res: Resolution) -> Any:
    """The file whose check stopped the search for ``res`` (glibc ``open_verify`` fails
    with a fatal error: invalid ELF header, file too short, unreadable), or ``None``."""
    for a in reversed(res.tried):
        if a.outcome not in ("found", "absent") and not a.outcome.startswith(
                ("wrong ELF class", "wrong machine")):
            return a
    return None


def _search_dirs_of(tried: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(os.path.dirname(a.path) for a in tried))


def _stray_dirs(sys_path: Sequence[str], prefix: str | None, root: str) -> list[str]:
    dirs: list[str] = []
    if prefix:
        dirs += [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    for entry in sys_path:
        if entry and os.path.isdir(entry):
            dirs += sorted(glob.glob(os.path.join(glob.escape(entry), "nvidia", "*", "lib")))
            dirs += [os.path.join(entry, p, "lib") for p in ("torch", "tensorflow", "jaxlib")]
            dirs += sorted(glob.glob(os.path.join(glob.escape(entry), "*.libs")))
    r = root.rstrip("/")
    dirs += sorted(glob.glob(f"{r}/usr/local/cuda*/lib64")) + sorted(glob.glob(f"{r}/usr/local/cuda*/lib"))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


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


def report_findings(
    proc: Process, entries: list[LibEntry], runtime: list[RuntimeResult],
    index: OwnerIndex | None, plan: TorchPlan | None, sys_path: Sequence[str],
    prefix: str | None, cfg: SearchConfig,
) -> list[Finding]:
    """The findings of one analysed process (``FINDING_IDS`` of :mod:`envlock.libs.report`
    but the symbol ones): every request that did not resolve or resolved to a refused file,
    shadowing, duplicate SONAMEs and OpenMP runtimes, CUDA wheels against torch's pins.

    :param proc: the loader model after the module's import; ``entries``: its objects as
        reported; ``runtime``: the run-time dlopens resolved.
    :param index: who owns each file (``None``: not looked up); ``plan``: torch's preload plan.
    :param sys_path, prefix, cfg: the target's ``sys.path``, prefix and loader configuration.
    """
    out: list[Finding] = []
    runtime_ids = {id(r.resolution) for r in runtime}
    runtime_by_res = {id(r.resolution): r for r in runtime}
    seen: set[tuple[str, str, str]] = set()
    strays: list[str] | None = None
    objects_by_path = {o.path: o for o in proc.objects}

    for res in proc.resolutions:
        rt = runtime_by_res.get(id(res))
        if res.path is None and res.kind == "preload":
            continue  # the loader prints an error and ignores the entry: preload-failed below
        if res.path is None and res.filtee is not None:
            continue  # a filtee: envlock.libs.loadorder's filter rules
        if res.path is None:
            key = ("missing", res.name, res.requester)
            if key in seen:
                continue
            seen.add(key)
            tried_dirs = _search_dirs_of(res.tried)
            where = f"needed by {res.requester}" if res.kind == "needed" else (
                f"dlopen'ed by {res.requester}" + (f" ({rt.when})" if rt else ""))
            places = [f"tried {a.path} ({a.source}): {a.outcome}" for a in res.tried
                      if a.outcome != "absent" or a.rule == "slash"] + _searched_summary(res, cfg)
            err = res.error or ""
            refused = next((m for m in REFUSALS if err.endswith(": " + m)), None)
            if refused is not None:
                path = res.tried[-1].path if res.tried else res.name
                out.append(Finding(
                    id="refused", severity="error",
                    title=f"{res.name}: the loader refuses {path} ({refused})",
                    cause=(f"{path} is found for {res.name} ({where}), but glibc will not map it: "
                           f"{REFUSALS[refused]} The load fails with `{err}`."),
                    evidence=(f"{path}: {refused}", *places),
                    fix=(f"Give {res.name} a shared library built with -shared -fPIC (and "
                         "without -z nodlopen when it is dlopen'ed).",),
                    library=res.name, requester=res.requester))
                continue
            bad = _fatal_attempt(res)
            if bad is not None:
                out.append(Finding(
                    id="invalid-elf", severity="error",
                    title=f"{res.name}: the loader meets a file that is not a usable shared object",
                    cause=(f"While searching for {res.name} ({where}) the loader opened {bad.path}, "
                           f"which fails its checks ({bad.outcome}); this stops the "
                           "whole load instead of moving on."),
                    evidence=(f"{bad.path}: {bad.outcome}", *places),
                    fix=((f"Remove or rename {bad.path} (e.g. a linker script or a truncated copy)"
                          + (", or make the directory of the real library come earlier in the "
                             "search." if "/" not in res.name else ".")),),
                    library=res.name, requester=res.requester))
                continue
            if err.startswith("wrong ELF class"):
                out.append(Finding(
                    id="wrong-class", severity="error",
                    title=f"{res.name}: only copies of the wrong ELF class were found",
                    cause=f"Every candidate for {res.name} ({where}) is {err.split(': ')[-1]}; "
                          "the loader skips them and fails.",
                    evidence=tuple(places),
                    fix=(("Install the library built for this architecture "
                          f"({'64' if cfg.host.elfclass == 64 else '32'}-bit)."),),
                    library=res.name, requester=res.requester))
                continue
            sym = _find_by_soname(proc, res.name, tried_dirs)
            if sym:
                out.append(Finding(
                    id="missing-soname-symlink", severity="error",
                    title=f"{res.name}: the library is there but not under its SONAME",
                    cause=(f"{sym} has SONAME {res.name}, but no file named {res.name} exists "
                           f"in {os.path.dirname(sym)}; the loader looks only for the exact name."),
                    evidence=(f"{sym}: SONAME {res.name}", f"{res.name} {where}",
                              *places),
                    fix=(f"ln -s {os.path.basename(sym)} {os.path.join(os.path.dirname(sym), res.name)}",
                         f"or run: ldconfig -n {os.path.dirname(sym)}"),
                    library=res.name, requester=res.requester))
                continue
            if strays is None:
                strays = _stray_dirs(sys_path, prefix, cfg.root)
            # A name with a slash is not searched for, so copies elsewhere do not matter;
            # only regular files (or links to them) count as copies.
            copies = [] if "/" in res.name else [
                os.path.join(d, res.name) for d in strays
                if os.path.isfile(os.path.join(d, res.name)) and d not in tried_dirs]
            fixes = []
            evidence = [f"{res.name} {where}", *places]
            requester_obj = objects_by_path.get(res.requester)
            for c in copies:
                d = os.path.dirname(c)
                p, _rule, _src = proc.what_if(res.name, requester_obj, ld_library_path=d + (
                    ":" + cfg.ld_library_path if cfg.ld_library_path else ""))
                evidence.append(f"a copy exists at {c} ({_owner_text(index, c)}), on no search path")
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
            placeholder = _external_mpi(prefix, res.name)
            if placeholder:
                evidence.append(placeholder[0])
                fixes[:] = placeholder[1:]
            if rt and rt.framework == "cuda" and res.name == "libcuda.so.1":
                fixes.insert(0, "Install the NVIDIA driver (libcuda.so.1 comes with it, not with "
                                "CUDA wheels); without it CUDA is unavailable.")
            note = ("PATH does not matter to the loader; only RPATH/RUNPATH, LD_LIBRARY_PATH, "
                    "ld.so.cache and the default directories do.")
            is_runtime = id(res) in runtime_ids
            out.append(Finding(
                id="runtime-not-found" if is_runtime else "not-found",
                severity=("error" if (rt.required and copies) else "warning") if rt else "error",
                title=f"{res.name} will not be found" + (f" ({rt.when})" if rt else ""),
                cause=(f"{res.name} is {where}; the name contains a slash, so the loader opens "
                       "exactly that path (no search), and there is no such file."
                       if "/" in res.name else
                       f"{res.name} is {where}; the loader searched every place in order and "
                       f"found no file named {res.name}. " + (note if copies else "")).strip(),
                evidence=tuple(evidence), fix=tuple(fixes),
                library=res.name, requester=res.requester))
            continue
        # -- found: was it the copy the requester's own paths point to? -------------------
        if res.kind == "preload" or not res.requester:
            continue
        requester_obj = objects_by_path.get(res.requester)
        if res.rule not in ("ld_library_path", "already-loaded", "ld.so.cache", "default"):
            continue
        key = ("shadow", res.name, res.path or "")
        if key in seen:
            continue
        expected, erule, esrc = proc.what_if(res.name, requester_obj, ld_library_path=None)
        if expected is None or proc.same_file(expected, res.path or ""):
            continue
        if res.rule in ("ld.so.cache", "default") and erule in ("ld.so.cache", "default"):
            continue
        seen.add(key)
        actual_obj = proc.objects[res.object_id] if res.object_id is not None else None
        if res.rule == "ld_library_path":
            d = os.path.dirname(res.path or "")
            cause = (f"{res.name} needed by {res.requester} is found through LD_LIBRARY_PATH entry "
                     f"{d}, which the loader searches before {esrc} where the intended copy is.")
            fix = ((f"Remove {d} from LD_LIBRARY_PATH for this job (e.g. `module unload` the "
                    "module that adds it)."),)
        elif res.rule == "already-loaded" and actual_obj is not None:
            requester = actual_obj.resolution.requester if actual_obj.resolution else "?"
            how = {"preload": "by LD_PRELOAD", "dlopen": "by an earlier dlopen",
                   "needed": f"as a dependency of {requester}"}.get(actual_obj.kind, "earlier")
            cause = (f"An object with SONAME {res.name} was already loaded {how} from {res.path}; "
                     f"the loader reuses it for {res.requester} instead of searching, so the copy "
                     f"its {esrc} points to is never used.")
            fix = ("Unset LD_PRELOAD for this job." if actual_obj.kind == "preload" else
                   f"Make sure the object loaded first uses the same copy as {os.path.basename(res.requester)}.",)
        else:
            cause = (f"{res.name} needed by {res.requester} is taken from {res.rule} ({res.path}) "
                     f"although {esrc} would give {expected}.")
            fix = ("Check LD_LIBRARY_PATH, LD_PRELOAD and /etc/ld.so.conf.d.",)
        evidence = [f"will load: {res.path} ({_owner_text(index, res.path or '')})",
                    f"intended: {expected} via {esrc} ({_owner_text(index, expected)})"]
        pin = _pin_for(index, plan, expected)
        if pin:
            evidence.append(f"{pin.requirer} requires {pin.name}{pin.specifier}")
        out.append(Finding(
            id="shadowed", severity="warning",
            title=f"{res.name} is shadowed: {res.path} is loaded instead of {expected}",
            cause=cause, evidence=tuple(evidence), fix=fix,
            library=res.name, requester=res.requester))

    for vp in proc.version_problems:
        out.append(_version_finding(proc, vp, index, sys_path, prefix, cfg))

    # A file providing the SONAME sits, under another name, in a directory searched before
    # the one that answered (libstdc++.so.6.0.33 without its libstdc++.so.6 link).
    seen_renamed: set[tuple[str, str]] = set()
    for res in proc.resolutions:
        if res.path is None or res.rule in (None, "already-loaded", "slash", "preload") or \
                "/" in res.name:
            continue
        found_dir = os.path.dirname(res.path)
        before = [d for d in _search_dirs_of(res.tried) if d != found_dir]
        if not before:
            continue
        other = _find_by_soname(proc, res.name, before)
        if other is None or (res.name, other) in seen_renamed or proc.same_file(other, res.path):
            continue
        seen_renamed.add((res.name, other))
        out.append(Finding(
            id="missing-soname-symlink", severity="warning",
            title=(f"{res.name}: {other} provides it under another name; the loader takes "
                   f"{res.path} instead"),
            cause=(f"{other} has SONAME {res.name} and lies in {os.path.dirname(other)}, which "
                   f"is searched before {found_dir}, but the loader looks only for a file named "
                   f"{res.name} there (the SONAME link is missing)."),
            evidence=(f"{other}: SONAME {res.name}", f"{res.name} => {res.path} ({res.rule})",
                      f"{other}: {_owner_text(index, other)}"),
            fix=(f"ln -s {os.path.basename(other)} {os.path.join(os.path.dirname(other), res.name)}"
                 " (if that copy is the one meant)", f"or run: ldconfig -n {os.path.dirname(other)}"),
            library=res.name, requester=res.requester))

    # Candidates skipped for their class or machine although something else was found.
    skipped: dict[str, tuple[str, Resolution]] = {}
    for res in proc.resolutions:
        if res.path is None:
            continue
        for a in res.tried:
            if a.outcome.startswith(("wrong ELF class", "wrong machine")):
                skipped.setdefault(a.path, (a.outcome, res))
    for cand, (outcome, res) in skipped.items():
        out.append(Finding(
            id="wrong-class", severity="info",
            title=f"{cand} is skipped ({outcome}); {res.name} comes from {res.path}",
            cause=("The loader ignores shared objects built for another ELF class or machine and "
                   "keeps searching; this one sits on a search path of this process."),
            evidence=(f"{res.name} requested by {res.requester or 'LD_PRELOAD'}",),
            fix=((f"Nothing is broken; remove {os.path.dirname(cand)} from the search path if "
                  "it is not meant for this architecture."),),
            library=res.name, requester=res.requester))

    # Objects whose file is not (fully) readable ELF although its header passed.
    for o in proc.objects:
        if o.info.error is not None and o.kind != "interpreter":
            out.append(_unreadable_finding(o))

    for msg in proc.preload_errors:
        out.append(Finding(id="preload-failed", severity="warning", title="an LD_PRELOAD entry is ignored",
                           cause=msg, evidence=(f"LD_PRELOAD={cfg.ld_preload}",),
                           fix=("Fix or unset LD_PRELOAD.",)))

    # Two files for one SONAME; two OpenMP runtimes.
    by_soname: dict[str, list[LibEntry]] = {}
    for e in entries:
        if e.soname:
            by_soname.setdefault(e.soname, []).append(e)
    for soname, group in by_soname.items():
        reals = list(dict.fromkeys(e.realpath for e in group))
        if len(reals) > 1:
            out.append(Finding(
                id="duplicate-soname", severity="warning",
                title=f"two different files with SONAME {soname} are loaded",
                cause=("Objects loaded by path (dlopen of a full path, ctypes) are not matched by "
                       "SONAME, so two copies coexist; symbols bind to whichever comes first."),
                evidence=tuple(f"{e.path} ({e.owner or 'owned by no package'})" for e in group),
                fix=("Load one copy only: remove the extra copy or make both users resolve to it.",),
                library=soname))
    omp = [e for e in entries if e.soname and re.match(r"lib(gomp|iomp5|omp)([-.].*)?\.so", e.soname)]
    kinds = {m.group(1) for e in omp if (m := re.match(r"lib(gomp|iomp5|omp)", e.soname or ""))}
    if len({e.realpath for e in omp}) > 1:
        out.append(Finding(
            id="duplicate-openmp", severity="warning",
            title="more than one OpenMP runtime is loaded",
            cause=("Each OpenMP runtime keeps its own thread pool; together they oversubscribe "
                   "cores and can deadlock or crash (" + ", ".join(sorted(kinds)) + ")."),
            evidence=tuple(f"{e.path} ({e.owner or 'owned by no package'})" for e in omp),
            fix=("Use packages built against one OpenMP runtime (same channel/vendor).",)))

    if plan is not None and index is not None:
        pins = read_pins(index, "torch") + conda_pins(index, "pytorch")
        out += _pin_findings(entries, pins, plan)
    rank = {"error": 0, "warning": 1, "info": 2}
    out.sort(key=lambda f: rank.get(f.severity, 3))
    return out


def _find_by_soname(proc: Process, name: str, dirs: Sequence[str]) -> str | None:
    stem = name.split(".so")[0]
    for d in dirs:
        listing = proc._listdir(d)
        if not listing:
            continue
        for n in sorted(listing):
            if n != name and n.startswith(stem + ".so"):
                info = read_elf(os.path.join(proc._host(d), n), cache=proc.elf_cache)
                if info.ok and info.soname == name:
                    return os.path.join(d, n)
    return None


def _pin_for(index: OwnerIndex | None, plan: TorchPlan | None, path: str) -> Pin | None:
    if index is None or plan is None:
        return None
    o = index.owner(path)
    if o is None or o.kind != "pip":
        return None
    for p in read_pins(index, "torch"):
        if p.name == o.name:
            return p
    return None


def _obviously_satisfied(version: str, specifier: str) -> bool:
    """``==V`` or ``==V.*`` met by string comparison (no need to import packaging)."""
    if "," in specifier or not specifier.startswith("==") or specifier.startswith("==="):
        return False
    want = specifier[2:]
    if want.endswith(".*"):
        return version == want[:-2] or version.startswith(want[:-1])
    return version == want


def _pin_findings(entries: list[LibEntry], pins: list[Pin], plan: TorchPlan) -> list[Finding]:
    out = []
    by_name = {(p.kind, p.name): p for p in pins}
    done = set()
    for e in entries:
        pin = by_name.get((e.owner_kind or "", e.owner_name or ""))
        if pin is None or e.owner_name in done:
            continue
        if _obviously_satisfied(e.owner_version or "", pin.specifier):
            continue
        from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: PLC0415
        from packaging.version import InvalidVersion, Version  # noqa: PLC0415

        try:
            ok = Version(e.owner_version or "") in SpecifierSet(pin.specifier)
        except (InvalidVersion, InvalidSpecifier):
            continue
        if ok:
            continue
        done.add(e.owner_name)
        out.append(Finding(
            id="cuda-pin-mismatch", severity="warning",
            title=f"{e.soname or e.path} comes from {e.owner_name} {e.owner_version}, "
                  f"but torch {plan.version} pins {pin.specifier}",
            cause=(f"torch was built and tested against {e.owner_name}{pin.specifier} ("
                   + ("its METADATA Requires-Dist" if pin.kind == "pip" else "the conda package's depends")
                   + "); another version is installed."),
            evidence=(f"{e.path} ({e.owner})", f"{pin.requirer} requires {e.owner_name}{pin.specifier}"),
            fix=(f"pip install '{e.owner_name}{pin.specifier}'" if pin.kind == "pip"
                 else f"conda install '{e.owner_name}{pin.specifier.replace('==', '=')}'",),
            library=e.soname))
    return out


def _version_finding(proc: Process, vp: Any, index: OwnerIndex | None, sys_path: Sequence[str],
                     prefix: str | None, cfg: SearchConfig) -> Finding:
    prov = proc.find(vp.provider)
    defined = prov.info.defined_versions() if prov else ()
    family = re.match(r"^([A-Za-z_]+?_?)(?=\d)", vp.version)
    fam = family.group(1) if family else vp.version
    top = _max_version(defined, fam)
    owner = _owner_text(index, vp.provider)
    consumer = os.path.basename(vp.consumer)
    provides = f"provides up to {top}" if top else "does not define it"
    title = (f"{consumer} requires {vp.version}; the {vp.file} that will be loaded "
             f"({vp.provider}, {owner}) {provides}")
    evidence = [vp.message]
    prov_res = prov.resolution if prov else None
    if prov_res is not None:
        evidence.append(f"{vp.file} is found through {prov_res.source}")
    alternatives: list[str] = []
    dirs = [os.path.dirname(vp.consumer), *_stray_dirs(sys_path, prefix, cfg.root), *cfg.system_dirs]
    for d in dict.fromkeys(dirs):
        cand = os.path.join(d, vp.file)
        if not os.path.exists(proc._host(cand)) or proc.same_file(cand, vp.provider) or any(
                proc.same_file(cand, a) for a in alternatives):
            continue
        info = read_elf(proc._host(cand), cache=proc.elf_cache)
        if info.ok and vp.version in info.defined_versions():
            alternatives.append(cand)
            evidence.append(f"{cand} defines {vp.version} ({_owner_text(index, cand)})")
    fixes = []
    if fam.startswith(("GLIBCXX", "CXXABI")):
        gcc = _GLIBCXX_GCC.get(vp.version.split("_", 1)[1]) if fam.startswith("GLIBCXX") else None
        need = f" (GCC ≥ {gcc})" if gcc else ""
        if owner.startswith("from package") and "(conda)" in owner:
            fixes.append(f"Update the environment's libstdc++ to one that defines {vp.version}{need}: "
                         "conda install -c conda-forge 'libstdcxx-ng>=" + (gcc or "12") + "'")
        else:
            fixes.append(f"Make the loader use a libstdc++ that defines {vp.version}{need}.")
        fixes.append(f"Or rebuild {consumer} with the environment's own compiler, so it needs no newer "
                     "libstdc++ than the environment has.")
    elif fam.startswith("GLIBC"):
        fixes.append(f"{consumer} needs glibc with {vp.version}: run it on a newer system or "
                     "container, or install a build made for this glibc (older manylinux tag).")
    if prov_res is not None and prov_res.rule == "ld_library_path":
        fixes.insert(0, f"Remove {os.path.dirname(vp.provider)} from LD_LIBRARY_PATH for this job.")
    consumer_obj = proc.find(vp.consumer)
    for alt in alternatives[:1]:
        d = os.path.dirname(alt)
        got, _rule, src = proc.what_if(vp.file, consumer_obj, ld_library_path=d + (
            ":" + cfg.ld_library_path if cfg.ld_library_path else ""))
        if got is not None and proc.same_file(got, alt):
            fixes.append(f"The copy at {alt} defines it; the loader would pick it with "
                         f"LD_LIBRARY_PATH={d}" + (":$LD_LIBRARY_PATH" if cfg.ld_library_path else "") + ".")
        else:
            fixes.append(f"The copy at {alt} defines it, but LD_LIBRARY_PATH cannot make the loader "
                         f"pick it ({src} comes first); LD_PRELOAD={alt} would (a preloaded object "
                         f"satisfies {vp.file} by SONAME).")
    return Finding(
        id="missing-version", severity="error", title=title,
        cause=(f"{vp.consumer} has a Verneed entry for {vp.version} against {vp.file}; the "
               f"picked {vp.file} has no Verdef {vp.version}, so the loader refuses to load "
               f"{consumer} ({vp.message})."),
        evidence=tuple(evidence), fix=tuple(fixes), library=vp.file, requester=vp.consumer)


def _demangle(names: Sequence[str]) -> dict[str, str]:
    """C++ names demangled by ``c++filt`` (one call, with a timeout); ``{}`` if unavailable."""
    mangled = [n for n in names if n.startswith("_Z")]
    if not mangled or shutil.which("c++filt") is None:
        return {}
    from envlock._run import run  # noqa: PLC0415

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
    from envlock.libs.elfsyms import SymbolTable  # noqa: PLC0415

    # Each file's symbol table is read once for both phases; the files are released after.
    tables: dict[str, SymbolTable] = {}
    try:
        return _symbol_findings_in(proc, index, sys_path, prefix, cfg, tables)
    finally:
        for t in tables.values():
            t.close()


def _symbol_findings_in(proc: Process, index: OwnerIndex | None, sys_path: Sequence[str],
                        prefix: str | None, cfg: SearchConfig, tables: dict[str, Any]) -> list[Finding]:
    from envlock.libs.elfsyms import SymbolTable, provides  # noqa: PLC0415

    def table(path: str, info: Any) -> SymbolTable:
        got = tables.get(path)
        if got is None:
            got = tables[path] = SymbolTable(proc._host(path), info=info)
        return got

    # Phase 1: what every object needs.  Phase 2: only those names in the providers.
    needs: dict[int, Any] = {}
    wanted: set[bytes] = set()
    missing_versions = {(vp.consumer, vp.version) for vp in proc.version_problems}
    # A missing version fails the load before any relocation (_dl_check_map_versions runs
    # first): such objects' symbols are never bound.
    unloadable = {vp.consumer for vp in proc.version_problems}
    for obj in proc.objects:
        if obj.kind == "interpreter" or not obj.info.ok or obj.path in unloadable:
            continue
        mine = table(obj.path, obj.info).symbols(defined=False)
        if mine.error or not mine.undefined:
            continue
        needs[obj.id] = mine
        wanted.update(n.encode("utf-8", "surrogateescape") for n, _v, _f in mine.undefined)
    indexes: dict[str, dict[str, list[tuple[str, bool]]]] = {}

    def defs(path: str) -> dict[str, list[tuple[str, bool]]]:
        got = indexes.get(path)
        if got is None:
            known = proc.find(path)
            got = indexes[path] = table(
                path, known.info if known is not None and known.path == path else None,
            ).symbols(undefined=False, wanted=wanted).index()
        return got

    scopes: dict[tuple[int | None, bool], list[LoadedObject]] = {}
    problems: list[tuple[LoadedObject, list[tuple[str, str, str]]]] = []
    for obj in proc.objects:
        syms = needs.get(obj.id)
        if syms is None:
            continue
        key = (obj.group, obj.in_global)
        scope = scopes.get(key)
        if scope is None:
            scope = scopes[key] = proc.scope(obj)
        weak = syms.weak_undefined
        todo: dict[str, list[tuple[str, str]]] = {}
        order: dict[tuple[str, str, str], int] = {}
        for k, (name, version, file) in enumerate(syms.undefined):
            if name in weak or (version and (obj.path, version) in missing_versions):
                continue
            todo.setdefault(name, []).append((version, file))
            order.setdefault((name, version, file), k)
        # Walk the scope in order; an object's definitions are read only while something is
        # still unbound (objects late in the scope are often never needed), and only the
        # names it defines are looked at (a set intersection).
        for o in scope:
            if not todo:
                break
            d = defs(o.path)
            for name in todo.keys() & d.keys():
                defs_of = d[name]
                keep = [(v, f) for v, f in todo[name]
                        if not (v and any(dv == v or dv == "" for dv, _h in defs_of))
                        and not provides(d, name, v)]
                if keep:
                    todo[name] = keep
                else:
                    del todo[name]
        lost = sorted(((n, v, f) for n, lst in todo.items() for v, f in lst),
                      key=lambda x: order.get(x, 0))
        if lost:
            problems.append((obj, lost))
    if not problems:
        return []
    demangled = _demangle([n for _o, lost in problems for n, _v, _f in lost[:5]])
    out: list[Finding] = []
    for obj, lost in problems:
        by_file: dict[str, list[tuple[str, str]]] = {}
        for name, version, file in lost:
            by_file.setdefault(file, []).append((name, version))
        for file, names in by_file.items():
            out.append(_missing_symbol_finding(proc, obj, file, names, demangled, defs, index,
                                               sys_path, prefix, cfg))
    return out


def _missing_symbol_finding(proc: Process, obj: LoadedObject, file: str,
                            names: list[tuple[str, str]], demangled: dict[str, str], defs: Any,
                            index: OwnerIndex | None, sys_path: Sequence[str],
                            prefix: str | None, cfg: SearchConfig) -> Finding:
    """One ``missing-symbol`` finding: ``obj`` needs ``names`` (from ``file``, the Verneed
    ``vn_file``, or ``""`` for unversioned symbols)."""
    from envlock.libs.elfsyms import provides  # noqa: PLC0415

    name, version = names[0]
    shown = name + (f" ({demangled[name]})" if name in demangled else "")
    loader_text = f"undefined symbol: {name}" + (f", version {version}" if version else "")
    # The library that was picked and lacks it: the Verneed's provider, else the direct
    # dependency whose other copy on disk has it.
    provs = [proc.provider_of(obj, file)] if file else [proc.objects[d] for d in obj.deps]
    provs = [p for p in provs if p is not None]
    # Where another copy may be: the consumer's own RPATH/RUNPATH directories, its
    # directory, and the usual places for stray copies (env lib/, wheels' lib/).
    own = [*proc._dirs_of(obj, "rpath"), *proc._dirs_of(obj, "runpath")]
    dirs = [*own, os.path.dirname(obj.path), *_stray_dirs(sys_path, prefix, cfg.root)]
    picked = provs[0] if file and provs else None
    copy = None
    for prov in provs:
        soname = prov.info.soname or os.path.basename(prov.path)
        for d in dict.fromkeys(dirs):
            cand = os.path.join(d, soname)
            if not os.path.exists(proc._host(cand)) or proc.same_file(cand, prov.path):
                continue
            if all(provides(defs(cand), n, v) for n, v in names):
                picked, copy = prov, cand
                break
        if copy:
            break
    evidence = [f"{loader_text} ({obj.path})"]
    if len(names) > 1:
        evidence.append(f"{len(names)} such symbols: " + ", ".join(
            n + (f"@{v}" if v else "") for n, v in names[:5]))
    fixes: list[str] = []
    if picked is not None:
        soname = picked.info.soname or os.path.basename(picked.path)
        evidence.append(f"{soname} will be {picked.path} ({_owner_text(index, picked.path)})")
        res = picked.resolution
        if res is not None:
            evidence.append(f"found through {res.source}")
        if copy is not None:
            evidence.append(f"{copy} defines it ({_owner_text(index, copy)})")
            fixes.append(f"Make the loader pick {copy}: e.g. remove {os.path.dirname(picked.path)} "
                         "from LD_LIBRARY_PATH" if res is not None and res.rule == "ld_library_path"
                         else f"Make the loader pick {copy} (put {os.path.dirname(copy)} first).")
        else:
            fixes.append(f"Install the {soname} that {os.path.basename(obj.path)} was built against.")
        title = (f"{os.path.basename(obj.path)} needs {shown}"
                 + (f" (version {version})" if version else "")
                 + f"; the {soname} that will be loaded ({picked.path}) does not define it")
    else:
        title = (f"{os.path.basename(obj.path)} needs {shown}"
                 + (f" (version {version})" if version else "")
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


