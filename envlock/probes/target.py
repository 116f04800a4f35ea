"""Which environment to observe, and what its interpreter says about itself.

envlock observes a *target* environment that need not be the one envlock runs in.  The target
is chosen, in order, by ``--python PATH``, ``--prefix DIR``, the active conda environment
(``CONDA_PREFIX``), the active venv (``VIRTUAL_ENV``), or the first ``python3`` on ``PATH``.

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
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envlock._run import Runner, run
from envlock.errors import TargetError
from envlock.manifest import PythonInfo, Target

__all__ = [
    "QUERY_SCRIPT", "ResolvedTarget", "resolve_target", "query_interpreter", "query_interpreter_cached",
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


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedTarget:
    """The environment to observe.

    :ivar kind: ``"conda"``, ``"venv"`` or ``"system"`` (see :func:`target_kind`).
    :ivar prefix: environment root (absolute path string).
    :ivar python: interpreter path, or ``None`` when the prefix has none.
    :ivar chosen_by: what selected it: ``"--python"``, ``"--prefix"``, ``"CONDA_PREFIX"``,
        ``"VIRTUAL_ENV"`` or ``"PATH"``.
    :ivar skipped: why earlier choices were passed over (``"CONDA_PREFIX=/x is not a
        directory"``): a stale variable is said, not silently ignored.
    """

    kind: str
    prefix: str
    python: str | None
    chosen_by: str
    skipped: tuple[str, ...] = ()

    def to_model(self) -> Target:
        """The ``[target]`` table for this target."""
        return Target(kind=self.kind, prefix=self.prefix, python=self.python, chosen_by=self.chosen_by)


def target_kind(prefix: str | Path) -> str:
    """Classify an environment root: ``"conda"`` if it has ``conda-meta/``, ``"venv"`` if it
    has ``pyvenv.cfg`` (PEP 405), else ``"system"``."""
    p = Path(prefix)
    if (p / "conda-meta").is_dir():
        return "conda"
    if (p / "pyvenv.cfg").is_file():
        return "venv"
    return "system"


def _prefix_python(prefix: Path) -> str | None:
    for name in ("bin/python", "bin/python3"):
        candidate = prefix / name
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    return None


def _prefix_of(python: Path) -> Path:
    """Guess the environment root of an interpreter path: ``<prefix>/bin/python``."""
    parent = python.parent
    return parent.parent if parent.name == "bin" else parent


def resolve_target(
    *,
    python: str | None = None,
    prefix: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedTarget:
    """Choose the target environment.

    :param python: an interpreter path (``--python``).
    :param prefix: a conda prefix or venv directory (``--prefix``).
    :param environ: the environment to read ``CONDA_PREFIX``, ``VIRTUAL_ENV`` and ``PATH`` from
        (``os.environ`` when ``None``).
    :raises TargetError: both options given, the path does not exist, or no interpreter is found.
    :returns: the :class:`ResolvedTarget`, with the reason it was chosen.
    """
    env = os.environ if environ is None else environ
    if python and prefix:
        raise TargetError("give either --python or --prefix, not both")
    if python:
        exe = Path(python)
        if not exe.exists():
            found = shutil.which(python, path=env.get("PATH"))
            if not found:
                raise TargetError(f"--python {python}: no such interpreter")
            exe = Path(found)
        exe = Path(os.path.abspath(exe))
        root = _prefix_of(exe)
        return ResolvedTarget(kind=target_kind(root), prefix=str(root), python=str(exe), chosen_by="--python")
    if prefix:
        root = Path(os.path.abspath(prefix))
        if not root.is_dir():
            raise TargetError(f"--prefix {prefix}: no such directory")
        return ResolvedTarget(
            kind=target_kind(root), prefix=str(root), python=_prefix_python(root), chosen_by="--prefix"
        )
    skipped: list[str] = []
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        value = env.get(var)
        if value and Path(value).is_dir():
            root = Path(os.path.abspath(value))
            return ResolvedTarget(
                kind=target_kind(root), prefix=str(root), python=_prefix_python(root), chosen_by=var,
                skipped=tuple(skipped),
            )
        if value:
            skipped.append(f"{var}={value} is not a directory; ignored")
    found = shutil.which("python3", path=env.get("PATH"))
    if not found:
        raise TargetError("no target: no CONDA_PREFIX or VIRTUAL_ENV, and no python3 on PATH")
    exe = Path(found)
    root = _prefix_of(exe)
    return ResolvedTarget(kind=target_kind(root), prefix=str(root), python=str(exe), chosen_by="PATH",
                          skipped=tuple(skipped))


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
    if target.python is None:
        return _fallback(target, "absent", f"no bin/python in {target.prefix}")
    env = dict(os.environ if environ is None else environ)
    # The query must not write bytecode into the user's environment.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    result = runner([target.python, "-c", QUERY_SCRIPT], timeout=timeout, env=env, cwd="/")
    if not result.ok:
        return _fallback(target, result.status if result.status != "failed" else "error", result.detail)
    try:
        data = json.loads(result.stdout)
        return PythonInfo(
            status="ok",
            source=f"{target.python} -c <query>",
            version=str(data["version"]),
            implementation=str(data["implementation"]),
            executable=str(data["executable"]),
            prefix=str(data["prefix"]),
            base_prefix=str(data["base_prefix"]),
            path=tuple(str(p) for p in data["path"]),
            user_site=data.get("user_site") if data.get("user_site") and os.path.isdir(data["user_site"]) else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        return _fallback(target, "error", f"unexpected answer from {target.python}: {exc}")


#: Variables that change the interpreter's answer (``sys.path``, prefixes, user site).
_QUERY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
              "PYTHONPLATLIBDIR", "HOME", "VIRTUAL_ENV")


def query_interpreter_cached(
    target: ResolvedTarget,
    *,
    runner: Runner = run,
    timeout: float = QUERY_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> PythonInfo:
    """:func:`query_interpreter`, with its answer kept on disk (:mod:`envlock.cache`,
    namespace ``python-query``) while nothing it depends on has changed: the interpreter file,
    ``pyvenv.cfg``, ``sys.executable``, every ``sys.path`` directory (installing a package or a
    ``.pth`` file changes its mtime), the user site directory, and the ``PYTHON*`` variables,
    ``HOME`` and the user id (part of the key).  Only successful answers are kept.
    """
    from envlock.manifest import _model  # noqa: PLC0415
    from envlock import cache as _statcache  # noqa: PLC0415

    env = os.environ if environ is None else environ
    if target.python is None:
        return query_interpreter(target, runner=runner, timeout=timeout, environ=environ)
    real = os.path.realpath(target.python)
    cfg = os.path.join(target.prefix, "pyvenv.cfg")
    key = {"v": 1, "python": target.python, "real": real, "uid": os.geteuid(),
           "env": {k: env.get(k) for k in _QUERY_ENV}}
    entry = _statcache.entry_path("python-query", key, env)
    hit = _statcache.load(entry)
    if hit is not None:
        try:
            return _model.from_dict(PythonInfo, hit)
        except ValueError:
            pass
    info = query_interpreter(target, runner=runner, timeout=timeout, environ=environ)
    if info.status == "ok":
        witnesses = [real, cfg, *info.path]
        if info.executable:
            witnesses.append(info.executable)
        if info.user_site:
            witnesses.append(info.user_site)
        elif info.version and (env.get("PYTHONUSERBASE") or env.get("HOME")):
            # not there yet: its creation would add it to sys.path (PEP 370)
            base = env.get("PYTHONUSERBASE") or os.path.join(env["HOME"], ".local")
            major_minor = ".".join(info.version.split(".")[:2])
            witnesses.append(os.path.join(base, "lib", f"python{major_minor}", "site-packages"))
        _statcache.store(entry, witnesses, _model.to_dict(info))
    return info


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


def _fallback(target: ResolvedTarget, status: str, detail: str) -> PythonInfo:
    dirs = sorted(glob.glob(os.path.join(glob.escape(target.prefix), "lib", "python3*", "site-packages")))
    return PythonInfo(
        status=status,
        source="prefix layout",
        error=detail,
        executable=target.python,
        prefix=target.prefix,
        path=tuple(dirs),
    )
