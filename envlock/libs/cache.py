"""Caching the loader model's answers: what they depend on, and the key they are kept under.

The analysis of a module (:func:`envlock.libs.analysis.analyze_module`) reads many files; its
answer stays right while none of them changes.  :func:`witness_paths` lists them and
:func:`cache_key` names an answer; :mod:`envlock.cache` stores answers with those
witnesses.  ``envlock verify`` keeps the findings, ``envlock snapshot`` the ``[libraries]``
table, each under its own namespace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CACHE_VERSION", "witness_paths", "cache_key", "libraries_entry"]

#: Bumped when the layout of cached answers changes.
CACHE_VERSION = 2

#: Modules whose code decides the answer: a changed model must not reuse old answers.
_MODEL_MODULES = ("envlock.libs.analysis", "envlock.libs.search", "envlock.libs.elf", "envlock.libs.ldcache",
                  "envlock.libs.runtime", "envlock.libs.owners", "envlock.libs.cache")


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


def cache_key(
    *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
    environ: Mapping[str, str], purpose: str,
) -> dict[str, Any]:
    """The key of an answer: the question (module, interpreter, ``sys.path``, prefix, root,
    the ``LD_*`` variables, host) and the code and version of envlock that answered it."""
    import importlib.util  # noqa: PLC0415
    import socket  # noqa: PLC0415

    from envlock._version import __version__  # noqa: PLC0415
    from envlock.cache import signature  # noqa: PLC0415

    code = []
    for name in _MODEL_MODULES:
        spec = importlib.util.find_spec(name)
        code.append(signature(spec.origin) if spec and spec.origin else None)
    return {
        "v": CACHE_VERSION, "purpose": purpose, "envlock": __version__, "code": code,
        "module": module, "exe": exe, "exe_sig": signature(exe), "sys_path": list(sys_path),
        "prefix": prefix, "root": root, "host": socket.gethostname(),
        "env": {k: environ.get(k) for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "LD_ASSUME_KERNEL")},
    }


def libraries_entry(
    *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
    environ: Mapping[str, str],
) -> str:
    """The cache file of the snapshot's ``[libraries]`` table for this question (namespace
    ``snapshot-libs``); :func:`envlock.cache.load` on it returns the table's dict while
    every witness is unchanged.  Importing this module loads no part of the loader model."""
    from envlock.cache import entry_path  # noqa: PLC0415

    key = cache_key(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                    environ=environ, purpose="snapshot-libraries")
    return entry_path("snapshot-libs", key, environ)
