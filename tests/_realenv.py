"""Where the real torch test venvs live, keyed by the interpreter that builds them.

A venv made by one interpreter is no venv of another: its ``bin/python`` is a link to the
interpreter that made it, its ``pip`` is the one that interpreter's ``ensurepip`` bundles
(Debian's python3 3.11.2 brings pip 23.0.1, pyenv's 3.11.7 pip 23.2.1), and its stdlib and
``sysconfig`` are that interpreter's.  So each interpreter gets its own pair of venvs under
``$ENVLOCK_TEST_VENVS`` (default ``~/.cache/envlock-test-venvs``)::

    <root>/<impl><major><minor>-<hash>/{cpu,cuda}

where ``<hash>`` is taken over the base interpreter's real path, ``sys.version`` (version,
build date and compiler) and ``platform.python_build()``.  A venv whose ready-marker holds
another key or another package list is rebuilt.  Used by ``tests/conftest.py`` and
``benchmarks/_timing.py``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

#: The packages of each real venv: torch 2.13.0 (CPU build) and torch 2.14.1 (CUDA 13.0 build).
REAL_VENVS = {
    "cpu": ["torch==2.13.0", "numpy==1.24.4", "scipy==1.10.1"],
    "cuda": ["torch==2.14.1", "numpy==2.4.1", "scipy==1.17.0"],
}


def venv_root() -> Path:
    """The directory holding every interpreter's real test venvs."""
    return Path(os.environ.get("ENVLOCK_TEST_VENVS", Path.home() / ".cache" / "envlock-test-venvs"))


def base_interpreter() -> str:
    """The real path of the interpreter ``python -m venv`` builds from (a venv's base one)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def interpreter_key() -> str:
    """``cpython311-<10 hex digits>``: the building interpreter's identity (path, version, build)."""
    facts = "\0".join([base_interpreter(), sys.version, *platform.python_build()])
    digest = hashlib.sha256(facts.encode()).hexdigest()[:10]
    impl = sys.implementation.name
    return f"{impl}{sys.version_info[0]}{sys.version_info[1]}-{digest}"


def venv_dir(name: str) -> Path:
    """Where this interpreter's venv ``name`` (``"cpu"`` or ``"cuda"``) is, built or not."""
    return venv_root() / interpreter_key() / name


def ready_text(name: str) -> str:
    """What the ready-marker of a finished venv ``name`` holds: its key, interpreter and specs."""
    return f"{interpreter_key()} {base_interpreter()}\n" + " ".join(REAL_VENVS[name]) + "\n"


def manifest_pins(manifest: Path, *names: str) -> list[str]:
    """``name==version`` for each of ``names`` the manifest's ``[pip]`` records (the venv's own
    pip and setuptools: whichever the building interpreter's ``ensurepip`` bundled)."""
    import envlock

    have = {p.name: p.version for p in envlock.load(manifest).pip.packages}
    return [f"{n}=={have[n]}" for n in names if n in have]
