"""Findings rules about the process as a whole: symbol versions, SONAME links, files skipped
for their class, unreadable objects, ``LD_PRELOAD`` entries ignored, two copies of one
library, two OpenMP runtimes, CUDA wheels against torch's pins.

Each rule is a function of the :class:`~envlock.libs.ruleset.Context` that returns its
findings; :data:`PROCESS_RULES` is their table, run in order by :mod:`envlock.libs.diagnose`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from envlock.findings import Finding
from envlock.libs.elfread import read_elf
from envlock.libs.objects import LoadedObject, Resolution
from envlock.libs.pins import conda_pins, Pin, read_pins
from envlock.libs.report import LibEntry
from envlock.libs.ruleset import (Context, find_by_soname, max_version, owner_text, search_dirs_of,
                                  soname_link_fix)
from envlock.libs.runtime import TorchPlan

__all__ = ["PROCESS_RULES", "cuda_pins", "duplicate_openmp", "duplicate_soname", "missing_versions",
           "preload_failed", "renamed_soname", "skipped_other_class", "unreadable_objects"]

#: GCC release that introduced each GLIBCXX version (libstdc++ manual, "ABI Policy").
_GLIBCXX_GCC = {"3.4.28": "9.3", "3.4.29": "11.1", "3.4.30": "12.1", "3.4.31": "13.1",
                "3.4.32": "13.2", "3.4.33": "14.1"}


def missing_versions(ctx: Context) -> list[Finding]:
    """``missing-version``: a Verneed the picked provider has no Verdef for (glibc
    ``elf/dl-version.c``: the load fails)."""
    return [_version_finding(ctx, vp) for vp in ctx.proc.version_problems]


def _version_finding(ctx: Context, vp: Any) -> Finding:
    proc, cfg, index = ctx.proc, ctx.cfg, ctx.index
    prov = proc.find(vp.provider)
    defined = prov.info.defined_versions() if prov else ()
    family = re.match(r"^([A-Za-z_]+?_?)(?=\d)", vp.version)
    fam = family.group(1) if family else vp.version
    top = max_version(defined, fam)
    owner = owner_text(index, vp.provider)
    consumer = os.path.basename(vp.consumer)
    provides = f"provides up to {top}" if top else "does not define it"
    title = (f"{consumer} requires {vp.version}; the {vp.file} that will be loaded "
             f"({vp.provider}, {owner}) {provides}")
    evidence = [vp.message]
    prov_res = prov.resolution if prov else None
    if prov_res is not None:
        evidence.append(f"{vp.file} is found through {prov_res.source}")
    alternatives: list[str] = []
    dirs = [os.path.dirname(vp.consumer), *ctx.strays(), *cfg.system_dirs]
    for d in dict.fromkeys(dirs):
        cand = os.path.join(d, vp.file)
        if not os.path.exists(proc._host(cand)) or proc.same_file(cand, vp.provider) or any(
                proc.same_file(cand, a) for a in alternatives):
            continue
        info = read_elf(proc._host(cand), cache=proc.elf_cache)
        if info.ok and vp.version in info.defined_versions():
            alternatives.append(cand)
            evidence.append(f"{cand} defines {vp.version} ({owner_text(index, cand)})")
    fixes = _version_fixes(ctx, vp, fam, owner, consumer, prov_res, alternatives)
    return Finding(
        id="missing-version", severity="error", title=title,
        cause=(f"{vp.consumer} has a Verneed entry for {vp.version} against {vp.file}; the "
               f"picked {vp.file} has no Verdef {vp.version}, so the loader refuses to load "
               f"{consumer} ({vp.message})."),
        evidence=tuple(evidence), fix=tuple(fixes), library=vp.file, requester=vp.consumer)


def _version_fixes(ctx: Context, vp: Any, fam: str, owner: str, consumer: str,
                   prov_res: Resolution | None, alternatives: list[str]) -> list[str]:
    proc, cfg = ctx.proc, ctx.cfg
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
    return fixes


def renamed_soname(ctx: Context) -> list[Finding]:
    """``missing-soname-symlink`` (warning): a file providing the SONAME sits, under another
    name, in a directory searched before the one that answered (``libstdc++.so.6.0.33``
    without its ``libstdc++.so.6`` link)."""
    proc, index = ctx.proc, ctx.index
    out = []
    seen_renamed: set[tuple[str, str]] = set()
    for res in proc.resolutions:
        if res.path is None or res.rule in (None, "already-loaded", "slash", "preload") or \
                "/" in res.name:
            continue
        found_dir = os.path.dirname(res.path)
        before = [d for d in search_dirs_of(res.tried) if d != found_dir]
        if not before:
            continue
        other = find_by_soname(proc, res.name, before)
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
                      f"{other}: {owner_text(index, other)}"),
            fix=soname_link_fix(other, res.name, " (if that copy is the one meant)"),
            library=res.name, requester=res.requester))
    return out


def skipped_other_class(ctx: Context) -> list[Finding]:
    """``wrong-class`` (info): candidates skipped for their class or machine although
    something else was found."""
    out = []
    skipped: dict[str, tuple[str, Resolution]] = {}
    for res in ctx.proc.resolutions:
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
    return out


def unreadable_objects(ctx: Context) -> list[Finding]:
    """``invalid-elf``: objects whose file is not (fully) readable ELF although its header
    passed."""
    return [_unreadable_finding(o) for o in ctx.proc.objects
            if o.info.error is not None and o.kind != "interpreter"]


def preload_failed(ctx: Context) -> list[Finding]:
    """``preload-failed``: an ``LD_PRELOAD`` entry the loader ignores (with its message)."""
    return [Finding(id="preload-failed", severity="warning", title="an LD_PRELOAD entry is ignored",
                    cause=msg, evidence=(f"LD_PRELOAD={ctx.cfg.ld_preload}",),
                    fix=("Fix or unset LD_PRELOAD.",))
            for msg in ctx.proc.preload_errors]


def duplicate_soname(ctx: Context) -> list[Finding]:
    """``duplicate-soname``: two different files with one SONAME are loaded."""
    out = []
    by_soname: dict[str, list[LibEntry]] = {}
    for e in ctx.entries:
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
    return out


def duplicate_openmp(ctx: Context) -> list[Finding]:
    """``duplicate-openmp``: more than one OpenMP runtime is loaded."""
    entries = ctx.entries
    omp = [e for e in entries if e.soname and re.match(r"lib(gomp|iomp5|omp)([-.].*)?\.so", e.soname)]
    kinds = {m.group(1) for e in omp if (m := re.match(r"lib(gomp|iomp5|omp)", e.soname or ""))}
    if len({e.realpath for e in omp}) <= 1:
        return []
    return [Finding(
        id="duplicate-openmp", severity="warning",
        title="more than one OpenMP runtime is loaded",
        cause=("Each OpenMP runtime keeps its own thread pool; together they oversubscribe "
               "cores and can deadlock or crash (" + ", ".join(sorted(kinds)) + ")."),
        evidence=tuple(f"{e.path} ({e.owner or 'owned by no package'})" for e in omp),
        fix=("Use packages built against one OpenMP runtime (same channel/vendor).",))]


def cuda_pins(ctx: Context) -> list[Finding]:
    """``cuda-pin-mismatch``: a library torch pins comes from another version."""
    if ctx.plan is None or ctx.index is None:
        return []
    pins = read_pins(ctx.index, "torch") + conda_pins(ctx.index, "pytorch")
    return _pin_findings(ctx.entries, pins, ctx.plan, _installers(ctx))


def _installers(ctx: Context) -> tuple[str, str]:
    """The pip and the conda install commands of the target environment, named by its prefix
    (``PREFIX/bin/python -m pip install``; ``uv pip install --python PREFIX/bin/python``
    where the environment has no pip, as uv makes venvs; ``conda install -p PREFIX``), so a fix
    installs there and not into the shell's environment; plain ``pip``/``conda`` without one."""
    import shlex

    prefix = ctx.prefix
    python = os.path.join(prefix, "bin", "python") if prefix else ""
    if not python or not os.path.exists(python):
        return "pip install", "conda install"
    has_pip = ctx.index is not None and "pip" in ctx.index.dists()
    py = shlex.quote(python)
    return ((f"{py} -m pip install" if has_pip else f"uv pip install --python {py}"),
            f"conda install -p {shlex.quote(prefix or '')}")


#: The process-wide rules, in the order their findings are reported.
PROCESS_RULES: tuple[Callable[[Context], list[Finding]], ...] = (
    missing_versions, renamed_soname, skipped_other_class, unreadable_objects, preload_failed,
    duplicate_soname, duplicate_openmp, cuda_pins)


#: What each :class:`~envlock.libs.elf.ElfError` kind means, for the finding's cause.
_ELF_ERROR_TEXT = {
    "not-elf": "not an ELF file at all",
    "truncated": "shorter than its own headers say (cut short)",
    "corrupt": "inconsistent (its headers point outside the file)",
    "unreadable": "not readable",
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



def _obviously_satisfied(version: str, specifier: str) -> bool:
    """``==V`` or ``==V.*`` met by string comparison (no need to import packaging)."""
    if "," in specifier or not specifier.startswith("==") or specifier.startswith("==="):
        return False
    want = specifier[2:]
    if want.endswith(".*"):
        return version == want[:-2] or version.startswith(want[:-1])
    return version == want


def _pin_findings(entries: list[LibEntry], pins: list[Pin], plan: TorchPlan,
                  installers: tuple[str, str] = ("pip install", "conda install")) -> list[Finding]:
    out = []
    by_name = {(p.kind, p.name): p for p in pins}
    done = set()
    for e in entries:
        pin = by_name.get((e.owner_kind or "", e.owner_name or ""))
        if pin is None or e.owner_name in done:
            continue
        if _obviously_satisfied(e.owner_version or "", pin.specifier):
            continue
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

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
            fix=(f"{installers[0]} '{e.owner_name}{pin.specifier}'" if pin.kind == "pip"
                 else f"{installers[1]} '{e.owner_name}{pin.specifier.replace('==', '=')}'",),
            library=e.soname))
    return out

