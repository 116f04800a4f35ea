"""What the loader model's answers depend on: their key, and the inputs a report records.

The analysis of a module (:func:`envlock.libs.analysis.analyze_module`) reads many files; its
answer stays right while none of them changes.  A report says what was read — every object
loaded, every file tried (found or not) — so :func:`record_report` records those, and the
configuration and owner sources the model consults, through an :class:`envlock.cache.Recorder`;
:func:`answer_key` names the question.  :func:`envlock.cache.memo` keeps the answers:
``envlock verify`` the findings (namespace ``verify-libs``), ``envlock snapshot`` the
``[libraries]`` table (``snapshot-libs``), ``envlock libs`` its whole output (``libs-answers``).
Importing this module loads no part of the loader model.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from envlock.cache import Recorder
from envlock.cache import signature
from envlock.cache import entry_path

__all__ = ["CACHE_VERSION", "LOADER_ENV", "answer_key", "record_report", "record_absent",
           "witness_paths", "report_paths", "context_paths", "cache_key", "libraries_entry", "cpu_key"]

#: Bumped when the layout of cached answers changes.
CACHE_VERSION = 3

#: Variables glibc's loader reads that change a search (``elf/rtld.c``, ``elf/dl-support.c``;
#: ``GLIBC_TUNABLES`` can mask ``glibc-hwcaps`` subdirectories, ``elf/dl-tunables.list``).
LOADER_ENV = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "LD_ASSUME_KERNEL", "LD_HWCAP_MASK",
              "GLIBC_TUNABLES")


def _under(root: str, path: str) -> str:
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def cpu_key(root: str = "/") -> str:
    """A hash of the CPU's vendor and feature flags (``/proc/cpuinfo``): they choose the
    ``glibc-hwcaps`` subdirectories the loader searches."""
    try:
        with open(_under(root, "/proc/cpuinfo"), encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return ""
    keep = [line for line in text.splitlines()[:40] if line.startswith(("flags", "vendor_id"))]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:16]


def witness_paths(report: Any, module: str, sys_path: list[str], prefix: str | None, root: str) -> list[str]:
    """Every file and directory whose change could change the loader's answer for ``report``.

    Loaded objects (path and real path); every file the loader tried, found or not, and the
    directory holding it (a new file there changes the directory's mtime) — :func:`report_paths`;
    the loader's configuration files (``ld.so.cache``, ``ld.so.conf``, ``ld.so.preload``); the
    directories its hints and owner lookups read (``sys.path`` entries, ``nvidia/*/lib``,
    ``*/lib``, ``*.libs``, ``<prefix>/lib``, ``conda-meta``, CUDA toolkit ``lib64`` directories,
    dpkg's database); the owner sources read in place (each ``*.dist-info``'s ``RECORD`` and
    ``METADATA``, each ``conda-meta/*.json``); and the module's ``__init__.py`` (torch's import
    sequence is read from it) — :func:`context_paths`.
    """
    return sorted(report_paths(report) | context_paths(module, sys_path, prefix, root))


def report_paths(report: Any) -> set[str]:
    """The inputs only the loader's ``report`` names: each object loaded (path and real path),
    each file found, each file tried and its directory."""
    paths: set[str] = set()
    for o in getattr(report, "objects", ()):
        paths.update((o.path, o.realpath))
    resolutions = [*getattr(report, "requests", ()), *(r.resolution for r in getattr(report, "runtime", ()))]
    for r in resolutions:
        if r.path:
            paths.add(r.path)
        for attempt in r.tried:
            paths.update((attempt.path, os.path.dirname(attempt.path)))
    return {p for p in paths if p}


def context_paths(module: str, sys_path: Sequence[str], prefix: str | None, root: str) -> set[str]:
    """The inputs that follow from the question alone (see :func:`witness_paths`): the
    loader's configuration, the owner sources and hint directories, the module's files."""
    paths: set[str] = set()
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
              "/var/lib/dpkg/info", "/var/lib/dpkg/status", "/usr/local"):
        paths.add(_under(root, f))
    paths.update(_module_paths(module, sys_path))
    for entry in sys_path:
        e = glob.escape(entry)
        for pattern in ("nvidia/*/lib", "*/lib", "*.libs", "nvidia", "*.dist-info/RECORD",
                        "*.dist-info/METADATA"):
            paths.update(glob.glob(os.path.join(e, pattern)))
    if prefix:
        paths.update((os.path.join(prefix, "lib"), os.path.join(prefix, "conda-meta")))
        paths.update(glob.glob(os.path.join(glob.escape(prefix), "conda-meta", "*.json")))
    r = _under(root, "/usr/local").rstrip("/")
    paths.update(glob.glob(f"{glob.escape(r)}/cuda*/lib64") + glob.glob(f"{glob.escape(r)}/cuda*/lib"))
    return {p for p in paths if p}


def _module_paths(module: str, sys_path: Sequence[str]) -> list[str]:
    top = module.split(".")[0]
    out = []
    for entry in sys_path:
        out += [entry, os.path.join(entry, top), os.path.join(entry, top, "__init__.py")]
    return out


def record_report(rec: Recorder, report: Any, module: str, sys_path: Sequence[str], prefix: str | None,
                  root: str) -> None:
    """Record, through ``rec``, every input of the loader's answer ``report`` (see
    :func:`witness_paths`)."""
    rec.files(witness_paths(report, module, list(sys_path), prefix, root))


def record_absent(rec: Recorder, module: str, sys_path: Sequence[str]) -> None:
    """Record what says ``module`` is not installed: each ``sys.path`` directory and where
    the module would be (installing it adds an entry to the directory)."""
    rec.files(_module_paths(module, sys_path))


def answer_key(
    *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
    environ: Mapping[str, str], purpose: str,
) -> dict[str, Any]:
    """The key of a loader answer: the question (module, interpreter and its signature,
    ``sys.path``, prefix, root, the working directory — relative ``LD_LIBRARY_PATH`` entries
    are searched from it —, the :data:`LOADER_ENV` variables, host and CPU flags).  envlock's
    version and code are added by :func:`envlock.cache.memo`."""
    import socket

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    return {
        "v": CACHE_VERSION, "purpose": purpose,
        "module": module, "exe": exe, "exe_sig": signature(exe), "sys_path": list(sys_path),
        "prefix": prefix, "root": root, "host": socket.gethostname(), "cpu": cpu_key(root), "cwd": cwd,
        "uid": os.geteuid(), "env": {k: environ.get(k) for k in LOADER_ENV},
    }


def cache_key(
    *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
    environ: Mapping[str, str], purpose: str,
) -> dict[str, Any]:
    """:func:`answer_key` (the older name, kept for callers not yet on :func:`envlock.cache.memo`)."""
    return answer_key(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                      environ=environ, purpose=purpose)


def libraries_entry(
    *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
    environ: Mapping[str, str],
) -> str:
    """The cache file of the snapshot's ``[libraries]`` table for this question (namespace
    ``snapshot-libs-v1``, apart from :func:`memo`'s entries); for callers not yet on
    :func:`envlock.cache.memo`."""
    key = answer_key(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                     environ=environ, purpose="snapshot-libraries")
    return entry_path("snapshot-libs-v1", key, environ)
