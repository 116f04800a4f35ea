"""Builders of crafted manifests and lockfiles (docs/trust.md): each names a payload that would
leave a trace — a marker file touched, a file written outside the target — if envlock ran,
passed as an option, fetched or wrote what it names.

Real files throughout: manifests written by envlock's own model, payload scripts that really
run if executed, real git repositories, wheels built here (uv runs offline).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import types
from pathlib import Path

import pytest
from _wheels import make_wheel

from envlock.manifest import (
    CondaInfo,
    CondaPackage,
    EnvlockInfo,
    GitInfo,
    GitRemote,
    LockfileRef,
    LockfilesInfo,
    Manifest,
    PipInfo,
    PipPackage,
    PythonInfo,
    Target,
)

CORPUS = Path(__file__).parent / "corpus"
VERSION = platform.python_version()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pip/uv configuration of this machine, no conda executable."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX",
                "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX",
                "UV_FIND_LINKS", "CONDA_EXE", "MAMBA_EXE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha 1.0 and 1.1 (pure Python wheels)."""
    root = tmp_path_factory.mktemp("sec-wheels")
    make_wheel(root, "alpha", "1.0")
    make_wheel(root, "alpha", "1.1", code="import sys\n")
    return root


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True, timeout=60).stdout


def base(**tables: object) -> Manifest:
    """A venv manifest of this machine's Python version with the given tables."""
    kw: dict = {
        "envlock": EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        "target": Target(kind="venv", prefix="/old/env", chosen_by="--python"),
        "python": PythonInfo(version=VERSION, implementation="cpython"),
    }
    kw.update(tables)
    return Manifest(**kw)


def pip(*packages: PipPackage) -> PipInfo:
    return PipInfo(packages=packages)


def payload_prefix(root: Path, mark: Path) -> Path:
    """A directory whose ``bin/pythonX.Y``, ``bin/python3`` and ``bin/python`` touch ``mark``."""
    text = ((CORPUS / "python-payload.sh").read_text().replace("@MARK@", str(mark))
            .replace("@VERSION@", VERSION))
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    mm = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for name in (mm, "python3", "python"):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    return root


def local_repo(root: Path) -> tuple[Path, str]:
    """A real git repository with one commit of a project that builds without downloads."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
    (root / "backend.py").write_text("")
    (root / "VALUE").write_text("1\n")
    git("init", "-q", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "-qm", "one", cwd=root)
    return root, git("rev-parse", "HEAD", cwd=root).strip()


def editable(name: str, repo: str, commit: str, *, dirty: bool = False,
             **more: object) -> tuple[PipPackage, GitInfo]:
    g = GitInfo(path=repo, commit=commit, dirty=dirty,
                remotes=(GitRemote(name="origin", url=repo),), **more)  # type: ignore[arg-type]
    return PipPackage(name=name, version="0.1", location="/s", origin="editable",
                      editable_path=repo, git=g), g


def requirements_lock(dest: Path, wheels: Path, option: str) -> Path:
    """A hash-pinned requirements.txt of alpha 1.0 carrying ``option``."""
    digest = hashlib.sha256((wheels / "alpha-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    text = ((CORPUS / "requirements-index.txt").read_text().replace("@OPTION@", option)
            .replace("@SHA256@", digest))
    dest.write_text(text)
    return dest


def with_lockfile(mpath: Path, lock: Path) -> Path:
    """A manifest of alpha 1.0 whose ``[lockfiles]`` records ``lock`` (its real sha256)."""
    ref = LockfileRef(path=str(lock), kind="requirements",
                      sha256=hashlib.sha256(lock.read_bytes()).hexdigest(), found="beside")
    base(pip=pip(PipPackage(name="alpha", version="1.0", location="/s")),
         lockfiles=LockfilesInfo(files=(ref,))).write(mpath)
    return mpath


@pytest.fixture(scope="session")
def crafted() -> types.SimpleNamespace:
    """The builders above, for the tests."""
    return types.SimpleNamespace(
        base=base, pip=pip, payload_prefix=payload_prefix, local_repo=local_repo,
        editable=editable, requirements_lock=requirements_lock, with_lockfile=with_lockfile,
        git=git, PipPackage=PipPackage, GitInfo=GitInfo, GitRemote=GitRemote,
        CondaInfo=CondaInfo, CondaPackage=CondaPackage, Target=Target, PythonInfo=PythonInfo,
        VERSION=VERSION)
