"""The external tools behind ``envlock lock``: finding them, and failing clearly without them.

conda-lock (lockfile models), py-rattler (solver and installer) and uv (pip resolver and
installer) are the optional extra ``envlock[lock]``.  Each is imported only here, lazily, and
a missing one becomes a :class:`~envlock.errors.MissingDependencyError` with the one line
that fixes it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from envlock.errors import MissingDependencyError

__all__ = [
    "require",
    "uv_bin",
    "run_async",
    "conda_executable",
    "CONDA_EXECUTABLES",
    "SOLVE_TIMEOUT",
    "INSTALL_TIMEOUT",
]

T = TypeVar("T")

#: Seconds allowed to one resolve (uv, conda-lock) before it is reported as hung.
SOLVE_TIMEOUT = 1800.0
#: Seconds allowed to one install command run by ``envlock restore --run``.
INSTALL_TIMEOUT = 3600.0

#: Executables conda-lock can drive, in the order conda-lock itself prefers them.
CONDA_EXECUTABLES = ("micromamba", "mamba", "conda")

_DISTRIBUTIONS = {"conda_lock": "conda-lock", "rattler": "py-rattler", "uv": "uv"}


def require(module: str) -> Any:
    """Import an optional dependency of ``envlock lock``.

    :param module: ``"conda_lock"``, ``"rattler"``, ``"uv"`` or one of their submodules.
    :raises MissingDependencyError: the distribution is not installed; the message names the
        extra that provides it.
    :returns: the imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise  # a broken install of the dependency itself: show the real import error
        dist = _DISTRIBUTIONS.get(top, top)
        raise MissingDependencyError(
            f"{dist} is not installed; install it with: pip install '.[lock]' (in envlock's checkout)"
        ) from None


def uv_bin() -> str:
    """Return the path of the ``uv`` binary that the ``uv`` PyPI package ships.

    uv is taken from that package, not from ``PATH``, so the version envlock was tested with
    is the one that runs.

    :raises MissingDependencyError: the ``uv`` package is not installed or has no binary.
    """
    uv = require("uv")
    try:
        return str(uv.find_uv_bin())
    except FileNotFoundError:
        raise MissingDependencyError(
            "the uv package has no uv binary; reinstall it with: pip install --force-reinstall uv"
        ) from None


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one py-rattler coroutine to completion from synchronous code."""
    import asyncio

    return asyncio.run(coro)


def conda_executable(env: Mapping[str, str] | None = None) -> str | None:
    """Find a conda-compatible executable that conda-lock can solve with.

    Looks at ``CONDA_EXE`` / ``MAMBA_EXE`` first (set by an activated installation), then for
    :data:`CONDA_EXECUTABLES` on ``PATH``.

    :param env: the environment to search (``os.environ`` when ``None``).
    :returns: the executable's path, or ``None`` when there is none.
    """
    env = os.environ if env is None else env
    for var in ("MAMBA_EXE", "CONDA_EXE"):
        value = env.get(var)
        if value and Path(value).is_file() and os.access(value, os.X_OK):
            return value
    for name in CONDA_EXECUTABLES:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
        if found:
            return found
    return None


def conda_lock_argv() -> list[str]:
    """The command that runs conda-lock's CLI with envlock's interpreter."""
    require("conda_lock")
    return [sys.executable, "-m", "conda_lock"]
