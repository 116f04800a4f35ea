"""Which environment to observe, and what its interpreter says about itself.

envlock observes a *target* environment that need not be the one envlock runs in.  The target
is chosen, in order, by ``--python PATH``, ``--prefix DIR``, the active conda environment
(``CONDA_PREFIX``), the active venv (``VIRTUAL_ENV``), or the first ``python3`` on ``PATH``
(:mod:`envlock.probes.resolution`, whose names this module also exports).

The target interpreter is asked once, with a timeout, for its version, ``sys.path`` and
prefixes.  The script it runs (:data:`QUERY_SCRIPT`) works on Python 3.6+ and imports only the
standard library (``sys``, ``json``, ``site``), so none of the user's packages is imported.
When the interpreter hangs, crashes or is missing, :func:`query_interpreter` falls back to the
prefix's ``lib/python3.*/site-packages`` directories and says so.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envlock._io import has_elf_magic
from envlock._run import Runner, run
from envlock.cache import Recorder
from envlock.probes.resolution import ResolvedTarget, record_resolution, resolve_target, target_kind
from envlock import cache as _cache

if TYPE_CHECKING:  # the model is imported only where a table is built (envlock libs needs none)
    from envlock.manifest import PythonInfo, Status

__all__ = [
    "QUERY_SCRIPT", "ResolvedTarget", "resolve_target", "record_resolution", "query_interpreter",
    "query_interpreter_cached", "query_sys_path",
    "refine_target", "target_kind",
]

#: Run by the target interpreter with ``-c``; prints one JSON object on stdout.
QUERY_SCRIPT = r"""
import json, os, site, sys
v = sys.version_info
d = {
    "version": "%d.%d.%d" % (v[0], v[1], v[2]) + ("" if v[3] == "final" else v[3][0] + str(v[4])),
    "implementation": sys.implementation.name,
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    "path": [p for p in sys.path if p],
    "user_site": None,
}
try:
    if site.ENABLE_USER_SITE:
        d["user_site"] = site.getusersitepackages()
except Exception:
    pass
sys.stdout.write(json.dumps(d))
"""

#: Seconds to wait for the target interpreter.
QUERY_TIMEOUT = 10.0


def query_interpreter(
    target: ResolvedTarget,
    *,
    runner: Runner = run,
    timeout: float = QUERY_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> PythonInfo:
    """Ask the target interpreter for its version, prefixes and ``sys.path``.

    Never raises: a missing, hanging or crashing interpreter gives a :class:`PythonInfo` with
    ``status`` ``"absent"``, ``"timeout"`` or ``"error"`` and a ``path`` guessed from the
    prefix's ``lib/python3.*/site-packages`` (``source = "prefix layout"``).

    :param timeout: seconds to wait for the interpreter.
    :param environ: the child's environment (``os.environ`` when ``None``): the job's own, so
        that ``PYTHONPATH`` and user site-packages are seen as the job will see them.
    """
    fields, status, detail = _ask(target, runner=runner, timeout=timeout, environ=environ)
    return _info(target, fields, status, detail)


def _ask(
    target: ResolvedTarget, *, runner: Runner, timeout: float, environ: Mapping[str, str] | None,
    extra: str = "", raw: dict | None = None,
) -> tuple[dict[str, Any] | None, Status, str]:
    """Run :data:`QUERY_SCRIPT` (with ``extra`` code before it prints) in the target: the
    ``[python]`` fields of its answer (:func:`_fields`), ``"ok"`` and ``""``; or ``None``, the
    status (``absent``, ``timeout``, ``error``) and what went wrong.  ``raw`` receives the
    whole answer."""
    if target.python is None:
        return None, "absent", f"no bin/python in {target.prefix}"
    env = dict(os.environ if environ is None else environ)
    # The query must not write bytecode into the user's environment.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    script = QUERY_SCRIPT.replace("sys.stdout.write", extra + "sys.stdout.write") if extra else QUERY_SCRIPT
    result = runner([target.python, "-c", script], timeout=timeout, env=env, cwd="/")
    if not result.ok:
        return None, result.status if result.status != "failed" else "error", result.detail
    try:
        data = json.loads(result.stdout)
        fields = _fields(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, "error", f"unexpected answer from {target.python}: {exc}"
    if raw is not None:
        raw.update(data)
    return fields, "ok", ""


def _fields(data: Any) -> dict[str, Any]:
    """The ``[python]`` fields of the interpreter's answer (JSON-ready: ``path`` a list).

    :raises KeyError, TypeError, AttributeError: the answer is not what the script prints.
    """
    return {
        "version": str(data["version"]),
        "implementation": str(data["implementation"]),
        "executable": str(data["executable"]),
        "prefix": str(data["prefix"]),
        "base_prefix": str(data["base_prefix"]),
        "path": [str(p) for p in data["path"]],
        "user_site": data["user_site"] if data.get("user_site") and os.path.isdir(data["user_site"]) else None,
    }


def _info(target: ResolvedTarget, fields: dict[str, Any] | None, status: Status, detail: str) -> PythonInfo:
    """The ``[python]`` table of an answer of :func:`_ask` (the fallback when there is none)."""
    if fields is None:
        return _fallback(target, status, detail)
    from envlock.manifest import PythonInfo

    return PythonInfo(status="ok", source=f"{target.python} -c <query>",
                      **{**fields, "path": tuple(fields["path"])})


#: Variables that change the interpreter's answer besides every ``PYTHON*`` and ``LD_*`` one
#: (``HOME`` places the user site directory, PEP 370; ``VIRTUAL_ENV`` is kept for the record).
_QUERY_ENV = ("HOME", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")
_QUERY_ENV_PREFIXES = ("PYTHON", "LD_")

#: Directories glibc's loader searches after ``ld.so.cache`` (``elf/dl-load.c``, the system
#: search path; which of them exist depends on the distribution).
_LOADER_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64",
                        "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                        "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")

#: Added to :data:`QUERY_SCRIPT` for the cached query: the files mapped into the interpreter
#: (``/proc/self/maps``: the executable, libpython, libc, extension modules) and whether a
#: ``sitecustomize``/``usercustomize`` module ran.
_MAPS_SCRIPT = r"""
try:
    with open("/proc/self/maps") as f:
        fields = [line.rstrip("\n").split(None, 5) for line in f]
    d["maps"] = sorted({x[5] for x in fields if len(x) == 6 and x[5].startswith("/")})
except Exception:
    d["maps"] = None
d["customized"] = [m for m in ("sitecustomize", "usercustomize") if m in sys.modules]
d["user_site_any"] = None
try:
    d["user_site_any"] = site.getusersitepackages() if site.ENABLE_USER_SITE else None
except Exception:
    pass
"""


def _query_env_key(env: Mapping[str, str]) -> dict[str, str | None]:
    keys = {k for k in env if k.startswith(_QUERY_ENV_PREFIXES)} | set(_QUERY_ENV)
    return {k: env.get(k) for k in sorted(keys)}


def _record_loader_inputs(rec: Recorder, maps: list[str], env: Mapping[str, str]) -> None:
    """Record what decided which shared objects the interpreter loaded (libpython: an
    ``LD_LIBRARY_PATH`` can select another one): the mapped files themselves, and every
    directory of every search path glibc's loader may have looked in before finding them —
    ``LD_LIBRARY_PATH``, each object's ``DT_RPATH``/``DT_RUNPATH`` (``$ORIGIN`` expanded), the
    objects' own directories, the default directories (each with its ``glibc-hwcaps``
    subdirectories) — and ``ld.so.cache``, ``ld.so.preload``.  The variables are in the key."""
    from envlock.libs.elf import ElfCache  # only when storing an answer
    from envlock.libs.elfread import read_elf  # only when storing an answer

    dirs: list[str] = []
    llp = env.get("LD_LIBRARY_PATH") or ""  # glibc ignores an empty value
    for entry in llp.replace(";", ":").split(":") if llp else ():
        dirs.append(os.path.join("/", entry))  # the query runs in "/": an empty entry is "/"
    elf_cache = ElfCache()
    for path in maps:
        if path.endswith(" (deleted)"):
            rec.uncacheable(f"{path}: a mapped file was deleted")
            return
        rec.file(path)
        dirs.append(os.path.dirname(path))
        info = read_elf(path, cache=elf_cache)
        for spec in (info.rpath, info.runpath):
            for d in (spec or "").split(":"):
                if not d:
                    continue
                d = d.replace("${ORIGIN}", "$ORIGIN").replace("$ORIGIN", os.path.dirname(path))
                if "$" in d:
                    rec.uncacheable(f"{path}: search path {spec!r} uses a dynamic string token")
                    return
                dirs.append(os.path.join("/", d))
    dirs.extend(_LOADER_DEFAULT_DIRS)
    for d in dict.fromkeys(os.path.normpath(x) for x in dirs):
        rec.directory(d)
        for sub in glob.glob(os.path.join(glob.escape(d), "glibc-hwcaps", "*")):
            rec.directory(sub)
    for f in ("/etc/ld.so.cache", "/etc/ld.so.preload"):
        rec.file(f)


def _record_path_inputs(rec: Recorder, target: ResolvedTarget, real: str, data: dict) -> None:
    """Record what decided ``sys.path`` and the prefixes: the interpreter's directories and
    their parents (``pyvenv.cfg``, ``._pth`` and the landmarks of ``Modules/getpath.py`` are
    found there), each ``pyvenv.cfg``, every ``sys.path`` entry, every ``.pth`` file in them
    (``site``), ``sitecustomize``/``usercustomize``, the user site directory whether or not it
    exists (its creation adds it to ``sys.path``, PEP 370).  A ``.pth`` line that runs code, or
    a customize module, may read anything: then the whole environment is recorded."""
    runs_code = bool(data.get("customized"))
    for exe in (str(target.python), real, str(data.get("executable") or "")):
        if not exe:
            continue
        rec.file(exe)
        rec.link(exe)
        for d in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
            rec.directory(d)
            rec.file(os.path.join(d, "pyvenv.cfg"))
    for entry in data.get("path") or ():
        rec.file(entry)
        if not os.path.isdir(entry):
            continue
        for name in rec.listdir(entry):
            if name.endswith(".pth"):
                pth = os.path.join(entry, name)
                rec.file(pth)
                try:
                    with open(pth, encoding="utf-8", errors="replace") as fh:
                        runs_code = runs_code or any(line.startswith(("import ", "import\t")) for line in fh)
                except OSError:
                    runs_code = True
            elif name.split(".")[0] in ("sitecustomize", "usercustomize", "os"):
                rec.file(os.path.join(entry, name))
    if data.get("user_site_any"):
        rec.file(str(data["user_site_any"]))
    if runs_code:
        rec.environment()


def query_interpreter_cached(
    target: ResolvedTarget,
    *,
    runner: Runner = run,
    timeout: float = QUERY_TIMEOUT,
    environ: Mapping[str, str] | None = None,
    enabled: bool = True,
) -> PythonInfo:
    """:func:`query_interpreter`, with its answer kept on disk (:func:`envlock.cache.memo`,
    namespace ``python-query``) while nothing it depends on has changed.

    The key: the interpreter's path and real path, the user and effective user ids, every
    ``PYTHON*`` and ``LD_*`` variable (``LD_LIBRARY_PATH`` and ``LD_PRELOAD`` choose the
    libpython that answers), ``HOME``, ``VIRTUAL_ENV``; envlock's version and code.  The
    witnesses: see :func:`_record_path_inputs` and :func:`_record_loader_inputs`.  The query runs
    in ``/``, so the caller's working directory is not an input.  Not cached: a wrapper script
    (a pyenv shim: what it runs depends on files and variables envlock cannot list), an answer
    that is not ``ok``, an interpreter whose mapped files cannot be read.

    :param enabled: ``False`` for ``--no-cache``: ask the interpreter, store nothing.
    """
    fields, status, detail = _ask_cached(target, runner=runner, timeout=timeout, environ=environ,
                                         enabled=enabled)
    return _info(target, fields, status, detail)


def query_sys_path(
    target: ResolvedTarget,
    *,
    runner: Runner = run,
    timeout: float = QUERY_TIMEOUT,
    environ: Mapping[str, str] | None = None,
    cache: bool = True,
) -> tuple[tuple[str, ...], str | None, str | None]:
    """The target interpreter's ``sys.path`` and ``sys.executable``, asked as
    :func:`query_interpreter_cached` asks (``cache=False``: as :func:`query_interpreter`), and
    sharing its cached answers, without building the ``[python]`` table (the manifest model
    is not imported: ``envlock libs`` starts sooner).

    :returns: ``(sys_path, executable, error)``: on failure the path
        :func:`query_interpreter` falls back to, ``None`` and what went wrong.
    """
    if cache:
        fields, status, detail = _ask_cached(target, runner=runner, timeout=timeout, environ=environ)
    else:
        fields, status, detail = _ask(target, runner=runner, timeout=timeout, environ=environ)
    if fields is None:
        return _fallback_path(target), None, detail
    return tuple(fields["path"]), fields["executable"] or None, None


def _ask_cached(
    target: ResolvedTarget, *, runner: Runner, timeout: float, environ: Mapping[str, str] | None,
    enabled: bool = True,
) -> tuple[dict[str, Any] | None, Status, str]:
    """:func:`_ask`, kept by :func:`envlock.cache.memo` (see :func:`query_interpreter_cached`)."""
    env = os.environ if environ is None else environ
    real = os.path.realpath(target.python) if target.python else None
    if real is None or not enabled or not _cache.is_enabled(env) or not has_elf_magic(real):
        outer = _cache.current()
        if outer is not None:  # an answer built on this one cannot be kept either
            outer.uncacheable(f"{target.python}: interpreter query not cacheable")
        return _ask(target, runner=runner, timeout=timeout, environ=environ)

    failed: list[tuple[Status, str]] = []

    def compute(rec: Recorder) -> dict[str, Any] | None:
        data: dict = {}
        fields, status, detail = _ask(target, runner=runner, timeout=timeout, environ=environ,
                                      extra=_MAPS_SCRIPT, raw=data)
        if fields is None:
            rec.uncacheable(f"query {status}")
            failed.append((status, detail))
            return None
        if not data.get("maps"):
            rec.uncacheable("no /proc/self/maps")
            return fields
        _record_path_inputs(rec, target, real, data)
        _record_loader_inputs(rec, list(data["maps"]), env)
        return fields

    def decode(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict) or not isinstance(v.get("path"), list):
            raise ValueError("bad entry")
        return v

    key = {"python": target.python, "real": real, "uid": os.getuid(), "euid": os.geteuid(),
           "env": _query_env_key(env), "timeout": timeout}
    fields = _cache.memo("python-query", key, compute, environ=env, decode=decode)
    if fields is None:
        status, detail = failed[0] if failed else ("error", "no answer")
        return None, status, detail
    return fields, "ok", ""


def refine_target(target: ResolvedTarget, info: PythonInfo) -> ResolvedTarget:
    """Correct the target's prefix with what its interpreter reported (``sys.prefix``).

    The prefix guessed from an interpreter path (``<prefix>/bin/python``) is wrong for a
    wrapper: a pyenv shim (``~/.pyenv/shims/python3``, a shell script) or a module system's
    wrapper runs an interpreter elsewhere.  When the query succeeded and ``sys.prefix``
    differs, that is the environment; its kind is classified again.  ``--prefix`` targets are
    kept as given.
    """
    if info.status != "ok" or not info.prefix or target.chosen_by == "--prefix":
        return target
    if os.path.realpath(info.prefix) == os.path.realpath(target.prefix):
        return target
    return ResolvedTarget(kind=target_kind(info.prefix), prefix=info.prefix, python=target.python,
                          chosen_by=target.chosen_by, skipped=target.skipped)


def _fallback_path(target: ResolvedTarget) -> tuple[str, ...]:
    """The prefix's ``lib/python3*/site-packages`` directories: the ``sys.path`` assumed when
    the interpreter cannot be asked."""
    return tuple(sorted(glob.glob(os.path.join(glob.escape(target.prefix), "lib", "python3*", "site-packages"))))


def _fallback(target: ResolvedTarget, status: Status, detail: str) -> PythonInfo:
    from envlock.manifest import PythonInfo

    return PythonInfo(
        status=status,
        source="prefix layout",
        error=detail,
        executable=target.python,
        prefix=target.prefix,
        path=_fallback_path(target),
    )
