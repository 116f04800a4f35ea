"""Check the types of the manifest values ``envlock diff`` reads, before it compares them.

``envlock show``/``restore`` build the whole manifest model (:meth:`Manifest.from_dict`), which
checks every value but costs ~20 ms per 1,000-package manifest plus ~100 ms of imports; diff
reads raw dicts to stay fast and tolerant of newer tables.  This module checks only the keys
the extractors of :mod:`envlock.diff.facts` and :mod:`envlock.diff.stackfacts` read, with the
types of the model (``envlock/manifest.py``, ``envlock/stack_model.py``,
``envlock/libraries_model.py``), and words errors like the model does:
``expected int, got str in 'cpu.logical-cores'``.  Keys it does not list are not checked
(a newer envlock may add them); tables without an extractor are flattened generically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock.errors import ManifestError

__all__ = ["SHAPES", "check"]

#: a table whose values are all strings (``[env] vars``).
STR_MAP = "str-map"

_GIT = {"status": str, "commit": str, "branch": str, "dirty": bool, "diff-sha256": str,
        "untracked": int}

#: table → key → type; ``[X]`` is an array of X, a dict is a (sub)table.
SHAPES: dict[str, dict[str, Any]] = {
    "python": {"version": str, "implementation": str},
    "platform": {"os-id": str, "os-version": str, "kernel": str, "machine": str, "glibc": str},
    "cpu": {"vendor": str, "model": str, "logical-cores": int, "usable-cores": int,
            "memory": int, "flags": [str]},
    "env": {"vars": STR_MAP},
    "git": _GIT,
    "conda": {"packages": [{"name": str, "version": str, "pip-version": str, "build": str,
                           "channel": str}]},
    "pip": {"packages": [{"name": str, "version": str, "origin": str, "conda-package": str,
                         "vcs": str, "commit": str, "git": _GIT}]},
    "lockfiles": {"files": [{"path": str, "sha256": str}]},
    "libraries": {"resolved": [{"soname": str, "path": str, "realpath": str, "owner": str,
                                "owner-kind": str}]},
    "gpu": {"vendor": str, "driver-version": str, "driver-kind": str,
            "cuda-driver-version": str, "visible-devices": str, "rocm-version": str,
            "gpus": [{"name": str, "compute-capability": str}]},
    "cuda": {"nvcc-version": str, "toolkits": [{"version": str, "origin": str}],
             "libraries": [{"name": str, "version": str, "origin": str}]},
    "frameworks": {
        "packages": [{"name": str, "build": str, "cuda": str, "cudnn": str, "hip": str,
                      "debug": bool, "conda-build": str, "cuda-archs": [str]}],
        "runtime": {"status": str, "cuda-available": bool, "device-count": int,
                    "cudnn-version": int, "allow-tf32-matmul": bool, "allow-tf32-cudnn": bool,
                    "deterministic": bool, "cudnn-benchmark": bool,
                    "threadpools": [{"num-threads": int, "internal-api": str,
                                     "user-api": str}]}},
    "blas": {"libraries": [{"user": str, "implementation": str, "version": str,
                            "int64": bool}],
             "openmp": [{"name": str, "package": str, "version": str}]},
    "toolchain": {"tools": [{"name": str, "version": str, "vendor": str}],
                  "libstdcxx": [{"glibcxx": str, "origin": str}],
                  "built-with": [{"package": str, "compilers": [str]}]},
    "slurm": {"scheduler": str, "partition": str, "cluster": str, "num-nodes": int,
              "ntasks": int, "cpus-on-node": int, "cpus-per-task": int, "mem-per-node": int,
              "mem-per-cpu": int, "gpus-on-node": int},
}

_NAMES = {str: "str", int: "int", bool: "bool"}


class _Bad(Exception):
    pass


def _fail(expected: str, value: Any, where: str) -> None:
    raise _Bad(f"expected {expected}, got {type(value).__name__} in '{where}'")


def _value(spec: Any, value: Any, where: str) -> None:
    if isinstance(spec, dict):
        _table(spec, value, where)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            _fail("an array", value, where)
        item = spec[0]
        for i, v in enumerate(value):
            _value(item, v, f"{where}[{i}]")
    elif spec == STR_MAP:
        if not isinstance(value, Mapping):
            _fail("a table", value, where)
        for k, v in value.items():
            if not isinstance(v, str):
                _fail("str", v, f"{where}.{k}")
    elif spec is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail("int", value, where)
    elif not isinstance(value, spec):
        _fail(_NAMES[spec], value, where)


def _table(spec: dict[str, Any], value: Any, where: str) -> None:
    if not isinstance(value, Mapping):
        _fail("a table", value, where)
    for key, sub in spec.items():
        v = value.get(key)
        if v is not None:
            _value(sub, v, f"{where}.{key}")


def check(data: Mapping[str, Any], path: str) -> None:
    """Check the tables of manifest ``data`` that diff reads (their ``status`` and the keys in
    :data:`SHAPES`).

    :param path: the file, the start of the message.
    :raises ManifestError: ``"<path>: expected int, got str in 'cpu.logical-cores'"``.
    """
    try:
        for table, spec in SHAPES.items():
            body = data.get(table)
            if body is None:
                continue
            _table(spec, body, table)
            status = body.get("status")
            if status is not None and not isinstance(status, str):
                _fail("str", status, f"{table}.status")
    except _Bad as exc:
        raise ManifestError(f"{path}: {exc}") from None
