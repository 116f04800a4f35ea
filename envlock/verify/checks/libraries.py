"""Library check: the loader model's findings (cases C01–C04) for the target's frameworks.

An adapter over :func:`envlock.libs.analysis.analyze_module` (the ``libs`` area): for torch,
tensorflow, jaxlib and cupy when installed, plus the modules listed in the policy's
``modules``, it models the target interpreter importing the module (its real
``LD_LIBRARY_PATH``/``LD_PRELOAD``, RPATH/RUNPATH, ``ld.so.cache``, symbol versions, the
frameworks' run-time ``dlopen`` targets) and carries each finding over as
``libs.<loader id>`` (``libs.shadowed``, ``libs.missing-version``, ``libs.not-found``,
``libs.runtime-not-found`` …) with the loader's severity, cause, evidence and fix.

The loader's answer is cached (:func:`envlock.cache.memo`) with the signatures of everything
it depends on (:func:`envlock.libs.cachekey.record_report`), so that repeated verifies of an
unchanged environment skip the model and its imports; before that, the answer a manifest
recorded (``[libraries.answer]``, :mod:`envlock.libs.libanswer`) is reused under the same rule,
so that the first verify after a snapshot skips it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
from typing import Any

from envlock.findings import Finding

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["check_libraries", "FRAMEWORK_MODULES", "to_finding"]

#: distribution name → module whose shared libraries are modelled.
FRAMEWORK_MODULES: dict[str, str] = {
    "torch": "torch",
    "tensorflow": "tensorflow",
    "tensorflow-cpu": "tensorflow",
    "jaxlib": "jaxlib",
    "cupy-cuda12x": "cupy",
    "cupy-cuda11x": "cupy",
}


def to_finding(f: Any, module: str) -> Finding:
    """Carry a loader finding over (same fields; id prefixed ``libs.``)."""
    evidence = tuple(getattr(f, "evidence", ()) or ())
    if module and not any(module in e for e in evidence[:1]):
        evidence = (f"while importing {module}", *evidence)
    fix = getattr(f, "fix", ())
    return Finding(
        id=f"libs.{f.id}",
        severity=f.severity,
        title=getattr(f, "title", "") or f.cause,
        cause=f.cause,
        evidence=evidence,
        fix=tuple(fix) if not isinstance(fix, str) else (fix,),
        library=getattr(f, "library", None),
        requester=getattr(f, "requester", None),
    )


def _modules(ctx: Context) -> list[str]:
    names = {p.name for p in ctx.live.pip.packages}
    conda = ctx.live.conda
    if conda is not None and any(c.name == "pytorch" for c in conda.packages):
        names.add("torch")
    mods = [m for dist, m in FRAMEWORK_MODULES.items() if dist in names]
    mods += list(ctx.config.modules)
    return list(dict.fromkeys(mods))


def _findings(payload: Any) -> list[Finding]:
    return [Finding(id=f["id"], severity=f["severity"], title=f["title"], cause=f["cause"],
                    evidence=tuple(f["evidence"]), fix=tuple(f["fix"]),
                    library=f.get("library"), requester=f.get("requester"))
            for f in payload]


def _from_manifest(ctx: Context, module: str, exe: str, sys_path: list[str]) -> Any:
    """The loader findings the manifest recorded for ``module`` (``[libraries.answer]``) when
    they answer this question and every input they were computed from is unchanged
    (:func:`envlock.libs.libanswer.reusable_findings`), else ``None``.  A module the policy
    names is not reused (its absence is a finding of verify's own)."""
    libs = getattr(ctx.expected.manifest, "libraries", None)
    if libs is None or libs.module != module or libs.answer is None or module in ctx.config.modules:
        return None
    from envlock.libs.libanswer import reusable_findings

    return reusable_findings(libs.answer, module=module, exe=exe, sys_path=sys_path,
                             prefix=ctx.live.target.prefix, root=ctx.live.root, environ=ctx.environ)


def check_libraries(ctx: Context, *, analyze: Any = None, cache: bool = True) -> list[Finding]:
    """Loader findings for each framework module of the target.

    The loader's findings for a module are kept by :func:`envlock.cache.memo` (namespace
    ``verify-libs``, keyed by :func:`envlock.libs.cachekey.answer_key`) with every file and
    directory the report says they depend on (:func:`envlock.libs.cachekey.record_report`); they
    are reused only while all of them are unchanged, so a later verify of the same
    environment skips the model (and its imports) entirely; the manifest's recorded answer is
    tried first (:func:`_from_manifest`).  ``ENVLOCK_NO_CACHE=1`` turns both off.

    :param analyze: the analysis function (default :func:`envlock.libs.analysis.analyze_module`).
    :param cache: use and update the result cache.
    """
    modules = _modules(ctx)
    if not modules:
        return []
    py = ctx.live.python
    sys_path = [p for p in py.path if p]
    exe = py.executable or ctx.live.target.python
    out: list[Finding] = []
    seen: set[tuple[str, str, str]] = set()
    from envlock import cache as _cache
    from envlock.libs import cachekey as libcache

    use_cache = cache and _cache.is_enabled(ctx.environ)
    elf_cache: Any = False
    for module in modules:

        def compute(rec: _cache.Recorder, module: str = module) -> list[Finding]:
            nonlocal analyze, elf_cache
            if analyze is None:
                from envlock.libs.analysis import analyze_module as analyze
            if elf_cache is False:
                elf_cache = None
                if use_cache:
                    try:
                        from envlock.libs.elf import ElfCache

                        elf_cache = ElfCache()
                    except (ImportError, OSError):
                        elf_cache = None
            kwargs: dict[str, Any] = {"sys_path": sys_path, "prefix": ctx.live.target.prefix,
                                      "env": dict(ctx.environ), "root": ctx.live.root}
            if elf_cache is not None:
                kwargs["elf_cache"] = elf_cache
            report = analyze(exe, module, **kwargs)
            found = [to_finding(f, module) for f in report.findings]
            for err in getattr(report, "errors", ()):
                if module in ctx.config.modules:
                    found.append(Finding(
                        id="libs.module-not-found", severity="warning",
                        title=err, cause="A module named in [tool.envlock.verify] modules was not found.",
                        evidence=(f"sys.path of {exe}", *(p for p in sys_path[:5] if os.path.isdir(p))),
                        fix=("Fix the module name in the policy, or install it.",),
                    ))
            libcache.record_report(rec, report, module, sys_path, ctx.live.target.prefix, ctx.live.root)
            return found

        reused = _from_manifest(ctx, module, exe, sys_path) if use_cache else None
        if reused is not None:
            found = [to_finding(f, module) for f in reused]
        else:
            question = libcache.answer_key(module=module, exe=exe, sys_path=sys_path,
                                           prefix=ctx.live.target.prefix, root=ctx.live.root,
                                           environ=ctx.environ, purpose="verify-findings")
            question["policy_module"] = module in ctx.config.modules  # decides module-not-found
            found = _cache.memo("verify-libs", question, compute, enabled=use_cache, environ=ctx.environ,
                                encode=lambda fs: [f.to_json() for f in fs], decode=_findings)
        for f in found:
            key = (f.id, f.library or "", f.cause)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out
