"""``envlock libs`` as a library: which shared objects a module will load, why, and what is wrong.

:func:`analyze_module` models a target interpreter importing a module: the executable and
its dependencies start, the module's extension files are ``dlopen``'ed by path (torch's
``_load_global_deps`` and wheel preloading first, read from ``torch/__init__.py``), and the
well-known run-time ``dlopen`` targets (:mod:`envlock.libs.runtime`) are resolved from their
callers.  Each object gets its owner package (:mod:`envlock.libs.owners`), and the result is
checked for the problems in :class:`Finding` (``FINDING_IDS``).  Nothing of the target is
imported or run.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from envlock import libfamilies
from envlock.findings import Finding
from envlock.libs.argument import file_target
from envlock.libs.binding import symbol_findings
from envlock.libs.diagnose import report_findings
from envlock.libs.loadorder import check_match_findings, filter_findings, order_findings
from envlock.libs.elf import ElfCache, HostAbi
from envlock.libs.elfread import read_elf
from envlock.libs.globalscope import GlobalLoads, read_global_loads
from envlock.libs.owners import OwnerIndex
from envlock.libs.report import FINDING_IDS, SCHEMA, LibEntry, LibsReport, RuntimeResult, Stage
from envlock.libs.runtime import (
    RuntimeDlopen,
    TorchPlan,
    caller_matches,
    read_torch_plan,
    runtime_dlopens_for,
)
from envlock.libs.config import detect_config, SearchConfig
from envlock.libs.objects import LoadedObject
from envlock.libs.linkmap import Process

__all__ = [
    "FINDING_IDS",
    "SCHEMA",
    "Finding",
    "LibEntry",
    "LibsReport",
    "RuntimeResult",
    "analyze_module",
    "file_target",
    "find_module_files",
    "probe_libraries",
]

# -- finding the module's files ------------------------------------------------------------


#: Packages whose main extension module is not directly in the package directory.
_KNOWN_EXTENSIONS = {"tensorflow": ("python/_pywrap_tensorflow_internal.so",)}

_EXT = re.compile(r"\.(cpython-[^.]+|abi3)?\.?so$")


def find_module_files(target: str, sys_path: Sequence[str]) -> tuple[str | None, list[str]]:
    """The package directory and extension files ``import target`` would ``dlopen``.

    :param target: a dotted module name, or a file (:func:`file_target`).
    :param sys_path: the target interpreter's ``sys.path``.
    :returns: ``(where, [extension files])``.  For a package, ``where`` is its directory and
        the files are the extension modules directly inside it
        (``torch/_C.cpython-311-x86_64-linux-gnu.so``), or, when there are none, those of its
        immediate subpackages (``numpy/core/*.so``); for an extension module, its file; for a
        pure-Python module, ``where`` is its ``.py`` file and the list is empty.  Names not
        found give ``(None, [])``.
    """
    path = file_target(target)
    if path is not None:
        return (None, [path])
    parts = target.split(".")
    for entry in sys_path:
        if not entry or not os.path.isdir(entry):
            continue
        base = os.path.join(entry, *parts)
        if os.path.isdir(base) and (os.path.exists(os.path.join(base, "__init__.py"))
                                    or os.path.exists(os.path.join(base, "__init__.pyc"))):
            files = _extensions_in(base)
            for rel in _KNOWN_EXTENSIONS.get(target, ()):
                if os.path.exists(os.path.join(base, rel)):
                    files.append(os.path.join(base, rel))
            if not files:
                for sub in sorted(os.listdir(base)):
                    d = os.path.join(base, sub)
                    if os.path.isfile(os.path.join(d, "__init__.py")):
                        files += _extensions_in(d)
            return (base, files)
        parent = os.path.dirname(base)
        leaf = parts[-1]
        if os.path.isdir(parent):
            hits = sorted(glob.glob(os.path.join(glob.escape(parent), f"{leaf}.*so")))
            hits = [h for h in hits if os.path.basename(h).split(".")[0] == leaf]
            if hits:
                return (None, hits[:1])
            if os.path.exists(base + ".py"):
                return (base + ".py", [])
    return (None, [])


def _extensions_in(directory: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(glob.escape(directory), "*.so")))
    return [f for f in files if _is_extension(f)]


def _is_extension(path: str) -> bool:
    name = os.path.basename(path)
    return bool(re.search(r"\.(cpython-\d+[^.]*|abi3)\.so$", name)) or name.count(".") == 1


# -- the analysis --------------------------------------------------------------------------


def analyze_module(
    python_exe: str,
    module_or_file: str,
    *,
    sys_path: Sequence[str],
    prefix: str | None = None,
    env: Mapping[str, str] | None = None,
    root: str = "/",
    runtime: bool = True,
    mode: str = "import",
    elf_cache: ElfCache | None = None,
    config: SearchConfig | None = None,
    owners: bool = True,
    extra_modules: Sequence[str] = (),
    extra_first: bool = False,
    check_symbols: bool = False,
) -> LibsReport:
    """Model ``python_exe`` importing ``module_or_file`` and report its shared libraries.

    :param python_exe: the target interpreter (its real path is the executable, as the
        kernel resolves ``/proc/self/exe``).
    :param module_or_file: a module name (``"torch"``) or an extension file.
    :param sys_path: the target's ``sys.path`` (from :func:`envlock.commands.libs.query_sys_path`
        or a manifest).
    :param prefix: the environment prefix (conda-meta, and where to look for stray copies).
    :param env: the target's environment (``LD_LIBRARY_PATH``, ``LD_PRELOAD``); ``{}`` for none.
    :param root: system root; ``runtime``: also resolve the well-known run-time dlopens.
    :param mode: ``"import"`` (the module is dlopen'ed into the interpreter) or ``"ldd"`` (the
        file is the main program, as ``ldd FILE`` does; only for a single file).
    :param elf_cache: parsed ELF facts kept for this command (:class:`ElfCache`, in memory);
        giving one also turns on the owner indexes' disk cache (``owners-v1``).
    :param config: a ready :class:`SearchConfig` (else :func:`detect_config`).
    :param owners: look up owner packages (reads RECORD, conda-meta and dpkg lists).
    :param extra_modules: more extension files to ``dlopen`` after the module's (e.g. those
        its Python code imports, seen by ``--runtime``); their objects get stage ``"extra"``.
    :param extra_first: ``dlopen`` the ``extra_modules`` before the module's own files (in the
        order given: the order Python imported them).
    :param check_symbols: also check that every undefined symbol binds in its scope, with its
        version (:mod:`envlock.libs.binding`; reads ``.dynsym``).
    :returns: a :class:`LibsReport`.  Problems of the analysis (module not found) are in
        ``errors``; it raises only for programming errors.
    """
    env = {} if env is None else env
    cfg = _config_for(python_exe, module_or_file, mode, config or detect_config(root=root, env=env), root, env)
    # parsed facts are kept in memory for this analysis even without the caller's ElfCache
    proc = Process(cfg, elf_cache=elf_cache if elf_cache is not None else ElfCache())
    errors: list[str] = []
    package_dir, files = find_module_files(module_or_file, sys_path)
    if not files and package_dir is None:
        errors.append(f"{module_or_file}: no extension module found on the target's sys.path")
    stage: dict[int, Stage] = {}
    via: dict[int, str] = {}

    def mark(name: Stage, note: str | None = None) -> None:
        for o in proc.objects:
            if o.id not in stage:
                stage[o.id] = name
                if note:
                    via[o.id] = note

    torch_plan: TorchPlan | None = None
    runtime_results: list[RuntimeResult] = []
    loads: GlobalLoads | None = None
    if mode == "ldd":
        if files:
            # $ORIGIN: /proc/self/exe (symlinks resolved); ldd FILE (glibc < 2.42): FILE as given.
            real_exe = os.path.realpath(files[0]) if os.path.samefile(files[0], python_exe) else files[0]
            proc.start(real_exe, as_main_path=files[0])
        mark("import")
    else:
        torch_plan, runtime_results, loads = _model_import(
            proc, python_exe, module_or_file, package_dir, files, sys_path=sys_path, root=root,
            runtime=runtime, extra_modules=extra_modules, extra_first=extra_first, mark=mark)
    index = _owner_index(sys_path, prefix, root, elf_cache) if owners else None
    entries = _entries(proc, index, stage, via)
    findings = _findings(proc, entries, runtime_results, index, torch_plan, sys_path, prefix, cfg,
                         check_symbols=check_symbols) + _unknown_global(loads)
    return LibsReport(python=python_exe, target=module_or_file, files=tuple(files), config=cfg,
                      objects=tuple(entries), requests=tuple(proc.resolutions),
                      runtime=tuple(runtime_results), findings=tuple(findings), errors=tuple(errors))


def _config_for(python_exe: str, target: str, mode: str, cfg: SearchConfig, root: str,
                env: Mapping[str, str]) -> SearchConfig:
    """``cfg`` for the process whose main program is ``python_exe`` (``target`` in ``"ldd"``
    mode): a 32-bit program is a 32-bit
    process (its own class and machine, so its own default directories and hwcaps, and
    64-bit candidates are the ones skipped: glibc ``open_verify``'s ``wrong ELF class``)."""
    main = (file_target(target) or python_exe) if mode == "ldd" else python_exe
    info = read_elf(main if root in ("", "/") else os.path.join(root, main.lstrip("/")))
    if not info.ok or info.elfclass not in (32, 64) or (
            info.elfclass, info.machine, info.data) == (cfg.host.elfclass, cfg.host.machine, cfg.host.data):
        return cfg
    host = HostAbi(elfclass=info.elfclass, data=info.data, machine=info.machine)
    return detect_config(root=root, env=env, secure=cfg.secure, host=host, cwd=cfg.cwd)


def _findings(
    proc: Process, entries: list[LibEntry], runtime_results: list[RuntimeResult], index: OwnerIndex | None,
    plan: TorchPlan | None, sys_path: Sequence[str], prefix: str | None, cfg: SearchConfig, *,
    check_symbols: bool,
) -> list[Finding]:
    """Every finding, in the order the loader meets them: the table of rules
    (:func:`envlock.libs.diagnose.report_findings`), filters and ``check_match``
    (:mod:`envlock.libs.loadorder`), unbound symbols (:mod:`envlock.libs.binding`); the loader
    stops at its first fatal error: that one first, the rest marked."""
    findings = report_findings(proc, entries, runtime_results, index, plan, sys_path, prefix, cfg)
    findings += filter_findings(proc) + check_match_findings(proc)
    if check_symbols:
        findings += symbol_findings(proc, index, sys_path, prefix, cfg)
    return order_findings(proc, findings)


def _unknown_global(loads: GlobalLoads | None) -> list[Finding]:
    """``rtld-global-unknown`` (info): a ``RTLD_GLOBAL`` load whose path the source does not
    decide; what it adds to the global scope is not modelled."""
    if loads is None or not loads.unknown:
        return []
    return [Finding(
        id="rtld-global-unknown", severity="info",
        title=f"{loads.source} loads a library with RTLD_GLOBAL that envlock cannot name",
        cause=("The package's own code puts an object into the global scope, so its symbols bind "
               "for every later extension module; its path is computed at run time, so the model "
               "cannot know which object it is. A missing-symbol finding may be satisfied by it."),
        evidence=loads.unknown,
        fix=("Run `envlock libs --runtime` to compare with what the import really maps.",))]


def _model_import(
    proc: Process, python_exe: str, module_or_file: str, package_dir: str | None, files: list[str], *,
    sys_path: Sequence[str], root: str, runtime: bool, extra_modules: Sequence[str], extra_first: bool,
    mark: Any,
) -> tuple[TorchPlan | None, list[RuntimeResult], GlobalLoads | None]:
    """The interpreter starts, then imports the module: torch's prelude, or the ``RTLD_GLOBAL``
    loads the package's ``__init__.py`` makes (:mod:`envlock.libs.globalscope`), the extension
    files (and ``extra_modules``) dlopen'ed by path from libpython, then the run-time dlopens.

    :returns: torch's preload plan (``None`` when not torch), the run-time loads resolved and
        the package's own ``RTLD_GLOBAL`` loads (``None``: none).
    """
    exe = os.path.realpath(python_exe) if root in ("", "/") else python_exe
    proc.start(exe)
    mark("startup")
    caller = _libpython(proc) or proc.main
    top = module_or_file.split(".")[0]
    torch_plan = None
    if package_dir and os.path.basename(package_dir) == "torch" and top == "torch":
        torch_plan = read_torch_plan(package_dir)
        _torch_prelude(proc, torch_plan, list(sys_path), caller, mark)
    loads = read_global_loads(package_dir) if package_dir and os.path.isdir(package_dir) \
        and torch_plan is None else None
    for _line, lib in loads.libraries if loads else ():
        proc.dlopen(lib, caller, global_scope=True)
        mark("import", f"{os.path.basename(package_dir or '')}/__init__.py: ctypes.CDLL(…, RTLD_GLOBAL)")
    if extra_first:
        for f in extra_modules:
            proc.dlopen(f, caller)
            mark("import" if f in files else "extra",
                 None if f in files else "extension module imported by the module's Python code")
    for f in files:
        proc.dlopen(f, caller, global_scope=bool(loads and loads.extensions_global))
    mark("import", f"{os.path.basename(package_dir or '')}/__init__.py: sys.setdlopenflags(RTLD_GLOBAL)"
         if loads and loads.extensions_global else None)
    if not extra_first:
        for f in extra_modules:
            proc.dlopen(f, caller)
        mark("extra", "extension module imported by the module's Python code")
    if not runtime:
        return torch_plan, [], loads
    tf_dir = package_dir if package_dir and os.path.basename(package_dir) == "tensorflow" else None
    dlopens = runtime_dlopens_for(torch_cuda=torch_plan.cuda if torch_plan else None, tf_dir=tf_dir)
    runtime_results = _resolve_runtime(proc, dlopens, mark)
    if package_dir and top == "jax" or any(
        os.path.isdir(os.path.join(p, "jax_plugins")) for p in sys_path if top == "jax"
    ):
        for p in sys_path:
            for plugin in sorted(glob.glob(os.path.join(glob.escape(p), "jax_plugins", "*", "*.so"))):
                res = proc.dlopen(plugin, proc.main)
                runtime_results.append(RuntimeResult(
                    framework="jax", name=plugin, caller=proc.main.path if proc.main else "",
                    when="backend start-up", required=False, resolution=res))
        mark("runtime", "jax backend plugins")
    return torch_plan, runtime_results, loads


def _owner_index(sys_path: Sequence[str], prefix: str | None, root: str,
                 elf_cache: ElfCache | None) -> OwnerIndex:
    """Who owns each file; with caches on (not ``--no-cache``) the indexes are kept on disk."""
    owners_dir: str | None = None
    if elf_cache is not None:
        from envlock.cache import cache_dir as _cache_dir

        owners_dir = _cache_dir("owners-v1")
    return OwnerIndex(sys_path, prefix=prefix, root=root, cache_dir=owners_dir)


def _libpython(proc: Process) -> LoadedObject | None:
    for o in proc.objects:
        if o.info.soname and o.info.soname.startswith("libpython"):
            return o
    return None


def _torch_prelude(proc: Process, plan: TorchPlan, sys_path: list[str],
                   caller: LoadedObject | None, mark: Any) -> None:
    """``torch/__init__.py``: ``_load_global_deps`` and the nvidia wheel preloads."""
    if plan.global_deps is None:
        return
    res = proc.dlopen(plan.global_deps, caller, global_scope=True)
    mark("import", "torch _load_global_deps (ctypes, RTLD_GLOBAL)")
    known = {pat.split(".", 1)[0] for _, pat in plan.preload_map}
    failed_on_cuda = res.path is None and any(
        k in (res.error or "") or any(k in (r.name or "") for r in proc.resolutions if r.path is None)
        for k in known
    )
    cudart_loaded = any("libcudart.so" in o.path for o in proc.objects)
    if failed_on_cuda or (res.path is not None and plan.preload_after_success and cudart_loaded):
        for _folder, path in plan.preload_candidates(sys_path):
            proc.dlopen(path, caller)
        mark("import", "torch preloads nvidia/*/lib wheels (_preload_cuda_deps)")
        if failed_on_cuda:
            proc.dlopen(plan.global_deps, caller, global_scope=True)
            mark("import", "torch _load_global_deps (retry)")


def _resolve_runtime(proc: Process, entries: list[RuntimeDlopen], mark: Any) -> list[RuntimeResult]:
    out = []
    for e in entries:
        callers = [o for o in proc.objects if caller_matches(e.caller, o.info.soname, o.path)]
        if not callers:
            continue
        caller = callers[0]
        res = proc.dlopen(e.name, caller)
        out.append(RuntimeResult(framework=e.framework, name=e.name, caller=caller.path,
                                 when=e.when, required=e.required, resolution=res))
        mark("runtime", f"dlopen by {os.path.basename(caller.path)} ({e.when})")
    return out


def _entries(proc: Process, index: OwnerIndex | None, stage: dict[int, Stage],
             via: dict[int, str]) -> list[LibEntry]:
    out = []
    for o in proc.objects:
        owner = index.owner(proc.absolute(o.path)) if index is not None else None
        res = o.resolution
        out.append(LibEntry(
            id=o.id, path=o.path, realpath=_real(proc, o.path), soname=o.info.soname,
            name=res.name if res else None, kind=o.kind,
            rule=res.rule if res else None, source=res.source if res else "",
            requested_by=(res.requester or None) if res else None, deps=tuple(o.deps),
            owner=owner.label() if owner else None,
            owner_kind=owner.kind if owner else None, owner_name=owner.name if owner else None,
            owner_version=owner.version if owner else None,
            stage=stage.get(o.id, "import"), via=via.get(o.id),
        ))
    return out


def _real(proc: Process, path: str) -> str:
    root = proc.config.root
    host = proc._host(path)
    real = os.path.realpath(host)
    return real if root in ("", "/") else "/" + os.path.relpath(real, root)


# -- the manifest's [libraries] table ------------------------------------------------------

#: SONAMEs recorded in ``[libraries]``: CUDA libraries, the driver, C++/OpenMP runtimes, libc
#: (the ``recorded`` families of envlock.libfamilies).
_KEY_LIBS = libfamilies.key_library_re()


def probe_libraries(
    *,
    python_exe: str,
    sys_path: Sequence[str],
    prefix: str | None,
    env: Mapping[str, str],
    root: str = "/",
    module: str = "torch",
    elf_cache: ElfCache | None = None,
    recorder: Any = None,
) -> Any:
    """The ``[libraries]`` table: how ``module``'s key libraries resolve. Never raises.

    With ``recorder`` (an :class:`envlock.cache.Recorder`), every input of the answer is
    recorded through it (:func:`envlock.libs.cachekey.record_report`) for :func:`envlock.cache.memo`.

    :param python_exe: the target interpreter.
    :param sys_path: its ``sys.path``.
    :param prefix: the environment prefix.
    :param env: the environment the job will run with (``LD_LIBRARY_PATH`` etc.).
    :param root: system root.
    :param module: the framework to analyse.
    :param elf_cache: optional cache of parsed ELF facts.
    :param recorder: where to record the inputs read, or ``None``.
    :returns: :class:`~envlock.manifest.librariestable.LibrariesInfo`; ``status="absent"`` when the
        module is not installed, ``"error"`` (with ``error``) when the analysis failed; with
        ``answer`` (:func:`envlock.libs.libanswer.record_answer`) for ``verify`` to reuse.
    """
    import time

    from envlock.manifest.librariestable import LibrariesInfo, LibraryRecord

    source = f"envlock loader model ({module})"
    from envlock.libs import cachekey as libcache
    from envlock.libs.libanswer import record_answer

    started = time.time_ns()
    try:
        _package_dir, files = find_module_files(module, sys_path)
        if not files:
            if recorder is not None:
                libcache.record_absent(recorder, module, sys_path)
            return LibrariesInfo(status="absent", source=source, module=module)
        report = analyze_module(python_exe, module, sys_path=sys_path, prefix=prefix, env=env,
                                root=root, elf_cache=elf_cache)
        records: dict[str, LibraryRecord] = {}
        for o in report.objects:
            if o.stage not in ("import", "runtime") or not o.soname or not _KEY_LIBS.match(o.soname):
                continue
            records.setdefault(o.soname, LibraryRecord(
                soname=o.soname, path=o.path, realpath=o.realpath, rule=o.rule, owner=o.owner_name,
                owner_kind=o.owner_kind, version=o.owner_version, stage=o.stage))
        for rt in report.runtime:
            r = rt.resolution
            if r.path is None and rt.name not in records and _KEY_LIBS.match(rt.name):
                records[rt.name] = LibraryRecord(soname=rt.name, rule=None, stage="runtime",
                                                 error=r.error)
        cfg = report.config
        info = LibrariesInfo(
            status="ok", source=source, module=module,
            glibc=".".join(map(str, cfg.glibc)), ld_library_path=cfg.ld_library_path,
            ld_preload=cfg.ld_preload,
            resolved=tuple(records[k] for k in sorted(records)),
            findings=tuple(f"{f.severity} [{f.id}] {f.title}" for f in report.findings),
            answer=record_answer(report, module=module, exe=python_exe, sys_path=sys_path, prefix=prefix,
                                 root=root, environ=env, started_ns=started),
        )
        if recorder is not None:
            libcache.record_report(recorder, report, module, sys_path, prefix, root)
        return info
    except Exception as exc:  # noqa: BLE001 - a probe never raises (docs: principles)
        if recorder is not None:
            recorder.uncacheable(f"{type(exc).__name__}: {exc}")
        return LibrariesInfo(status="error", source=source, module=module,
                             error=f"{type(exc).__name__}: {exc}")
