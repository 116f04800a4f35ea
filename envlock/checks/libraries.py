"""Library check: the loader model's findings (cases C01–C04) for the target's frameworks.

An adapter over :func:`envlock.libanalysis.analyze_module` (the ``libs`` area): for torch,
tensorflow, jaxlib and cupy when installed, plus the modules listed in the policy's
``modules``, it models the target interpreter importing the module (its real
``LD_LIBRARY_PATH``/``LD_PRELOAD``, RPATH/RUNPATH, ``ld.so.cache``, symbol versions, the
frameworks' run-time ``dlopen`` targets) and carries each finding over as
``libs.<loader id>`` (``libs.shadowed``, ``libs.missing-version``, ``libs.not-found``,
``libs.runtime-not-found`` …) with the loader's severity, cause, evidence and fix.

When the loader model is not installed the check reports one ``libs.unavailable`` info
finding instead of guessing.  The loader's answer is cached with the signatures of everything
it depends on (:func:`witness_paths`), so that repeated verifies of an unchanged environment
skip the model and its imports.
"""

from __future__ import annotations

import os
from typing import Any

from envlock.findings import Finding

__all__ = ["check_libraries", "FRAMEWORK_MODULES", "to_finding", "witness_paths", "CACHE_VERSION"]

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


def _modules(ctx: Any) -> list[str]:
    names = {p.name for p in ctx.live.pip.packages}
    conda = ctx.live.conda
    if conda is not None and any(c.name == "pytorch" for c in conda.packages):
        names.add("torch")
    mods = [m for dist, m in FRAMEWORK_MODULES.items() if dist in names]
    mods += list(ctx.config.modules)
    return list(dict.fromkeys(mods))


#: Version of the result-cache entries written by :func:`check_libraries`.
CACHE_VERSION = 1


def _sig(path: str) -> list[int] | None:
    """``[mtime_ns, size, inode]`` of ``path``, or ``None`` when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _under(root: str, path: str) -> str:
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def witness_paths(report: Any, module: str, sys_path: list[str], prefix: str | None, root: str) -> list[str]:
    """Every file and directory whose change could change the loader's answer for ``report``.

    Loaded objects (path and real path); every file the loader tried, found or not, and the
    directory holding it (a new file there changes the directory's mtime); the loader's
    configuration files (``ld.so.cache``, ``ld.so.conf``, ``ld.so.preload``); the directories its
    hints and owner lookups read (``sys.path`` entries, ``nvidia/*/lib``, ``*/lib``, ``*.libs``,
    ``<prefix>/lib``, ``conda-meta``, CUDA toolkit ``lib64`` directories, dpkg's database); and the
    module's ``__init__.py`` (torch's import sequence is read from it).
    """
    import glob  # noqa: PLC0415

    paths: set[str] = set()
    for o in getattr(report, "objects", ()):
        paths.update((o.path, o.realpath))
    resolutions = list(getattr(report, "requests", ())) + [r.resolution for r in getattr(report, "runtime", ())]
    for r in resolutions:
        if r.path:
            paths.add(r.path)
        for attempt in r.tried:
            paths.update((attempt.path, os.path.dirname(attempt.path)))
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
              "/var/lib/dpkg/info", "/var/lib/dpkg/status", "/usr/local"):
        paths.add(_under(root, f))
    top = module.split(".")[0]
    for entry in sys_path:
        paths.update((entry, os.path.join(entry, top), os.path.join(entry, top, "__init__.py")))
        e = glob.escape(entry)
        for pattern in ("nvidia/*/lib", "*/lib", "*.libs", "nvidia"):
            paths.update(glob.glob(os.path.join(e, pattern)))
    if prefix:
        paths.update((os.path.join(prefix, "lib"), os.path.join(prefix, "conda-meta")))
    r = _under(root, "/usr/local").rstrip("/")
    paths.update(glob.glob(f"{glob.escape(r)}/cuda*/lib64") + glob.glob(f"{glob.escape(r)}/cuda*/lib"))
    return sorted(p for p in paths if p)


def _cache_file(ctx: Any, module: str, exe: str, sys_path: list[str]) -> str:
    import hashlib  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415
    import json  # noqa: PLC0415
    import socket  # noqa: PLC0415

    from envlock import __version__  # noqa: PLC0415

    code = []  # the loader's code: a changed model must not reuse old answers
    for name in ("envlock.libanalysis", "envlock.loader", "envlock.elf", "envlock.ldcache",
                 "envlock.libruntime", "envlock.libowners"):
        spec = importlib.util.find_spec(name)
        code.append(_sig(spec.origin) if spec and spec.origin else None)
    code.append(_sig(__file__))
    key = {
        "v": CACHE_VERSION, "envlock": __version__, "code": code,
        "module": module, "exe": exe, "exe_sig": _sig(exe), "sys_path": sys_path,
        "prefix": ctx.live.target.prefix, "root": ctx.live.root, "host": socket.gethostname(),
        "env": {k: ctx.environ.get(k) for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "LD_ASSUME_KERNEL")},
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    base = ctx.environ.get("XDG_CACHE_HOME") or os.path.join(ctx.environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envlock", "verify-libs-v1", f"{digest}.json")


def _cached(path: str) -> list[Finding] | None:
    """The findings stored at ``path`` when every witness is unchanged, else ``None``."""
    import json  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        witness = data["witness"]
        if any(_sig(p) != sig for p, sig in witness):
            return None
        return [Finding(id=f["id"], severity=f["severity"], title=f["title"], cause=f["cause"],
                        evidence=tuple(f["evidence"]), fix=tuple(f["fix"]),
                        library=f.get("library"), requester=f.get("requester"))
                for f in data["findings"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(path: str, witness: list[str], findings: list[Finding]) -> None:
    """Write a cache entry atomically; failures are ignored (the cache only saves time)."""
    import json  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    data = {"witness": [[p, _sig(p)] for p in witness], "findings": [f.to_json() for f in findings]}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def check_libraries(ctx: Any, *, analyze: Any = None, cache: bool = True) -> list[Finding]:
    """Loader findings for each framework module of the target.

    The loader's answer for a module is kept on disk (``~/.cache/envlock/verify-libs-v1``,
    keyed by host, interpreter, ``sys.path``, prefix and the ``LD_*`` variables) together with
    the signature (mtime, size, inode) of every file and directory it depends on
    (:func:`witness_paths`); it is reused only while all of them are unchanged, so a later
    verify of the same environment skips the model (and its imports) entirely.

    :param analyze: the analysis function (default :func:`envlock.libanalysis.analyze_module`).
    :param cache: use and update the result cache.
    """
    modules = _modules(ctx)
    if not modules:
        return []
    py = ctx.live.python
    sys_path = [p for p in py.path if p]
    exe = py.executable or ctx.live.target.python
    if analyze is None:
        import importlib.util  # noqa: PLC0415

        if importlib.util.find_spec("envlock.libanalysis") is None:
            return [Finding(
                id="libs.unavailable", severity="info",
                title="shared libraries not checked: the loader model (envlock.libanalysis) is not installed",
                cause="verify cannot tell whether the libraries of " + ", ".join(modules) + " will resolve.",
                evidence=(f"modules: {', '.join(modules)}",),
                fix=("Install an envlock with the libs area (envlock libs).",),
            )]
    out: list[Finding] = []
    seen: set[tuple[str, str, str]] = set()
    elf_cache: Any = False
    for module in modules:
        cache_file = _cache_file(ctx, module, exe, sys_path) if cache else None
        found = _cached(cache_file) if cache_file else None
        if found is None:
            if analyze is None:
                from envlock.libanalysis import analyze_module as analyze  # noqa: PLC0415
            if elf_cache is False:
                try:
                    from envlock.elf import ElfCache  # noqa: PLC0415

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
            if cache_file:
                _store(cache_file, witness_paths(report, module, sys_path, ctx.live.target.prefix, ctx.live.root),
                       found)
        for f in found:
            key = (f.id, f.library or "", f.cause)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out
