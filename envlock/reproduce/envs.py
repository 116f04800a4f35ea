"""Environments for bisect: built with uv from GOOD's pins with a subset applied, and CMD run
in them.

Each environment is ``uv venv`` with GOOD's interpreter, then ``uv pip install --no-deps`` of
the exact pins (uv links files from its cache, so a build of already-seen wheels takes about
a second).  Environments are keyed by their package set: subsets that differ only in
variables share one.  A build that fails or is interrupted (Ctrl-C) is removed before the
error goes on, so nothing half-built is left.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envlock._io import write_file
from envlock._run import Runner, run
from envlock.errors import EnvlockError

__all__ = ["Builder", "Built", "RunOutcome", "run_command", "resolve_check", "BUILD_TIMEOUT"]

#: Seconds allowed to one ``uv venv`` or ``uv pip install``.
BUILD_TIMEOUT = 1800.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    """An environment: its directory, whether bisect built it, and how long that took (s)."""

    path: Path
    built: bool
    seconds: float = 0.0
    error: str | None = None

    @property
    def python(self) -> Path:
        """Its interpreter."""
        return self.path / "bin" / "python"


def _uv_env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


class Builder:
    """Builds and caches environments under ``root``.

    :param root: directory for the environments (``env-01``, ``env-02``, …).
    :param python: the interpreter every environment is made with (GOOD's).
    :param index_args: uv's index options (``--no-index --find-links DIR``, …).
    :param existing: package set → an existing environment to use instead of building
        (GOOD's or BAD's own, verified against its manifest).
    :param system_site: make venvs that see the interpreter's own site-packages
        (``--system-site-packages``): GOOD is a conda environment whose conda packages the
        pip changes go on top of.
    """

    def __init__(self, root: Path, python: str, index_args: Sequence[str], *,
                 existing: Mapping[frozenset[str], Path] | None = None,
                 system_site: bool = False, runner: Runner = run) -> None:
        from envlock.lock._tools import uv_bin

        self.root = root
        self.python = python
        self.index_args = list(index_args)
        self.runner = runner
        self.system_site = system_site
        self.uv = uv_bin()
        self.cache: dict[frozenset[str], Built] = {
            k: Built(path=v, built=False) for k, v in (existing or {}).items()}
        self.count = 0

    def argv(self, dest: Path, pins: Sequence[str]) -> list[list[str]]:
        """The two commands that build ``dest`` (``uv`` by name, as a user types them)."""
        site = ["--system-site-packages"] if self.system_site else []
        return [["uv", "venv", "--quiet", *site, str(dest), "--python", self.python],
                ["uv", "pip", "install", "--quiet", "--python", str(dest / "bin" / "python"),
                 "--no-deps", *self.index_args, "--", *pins]]

    def get(self, pins: Sequence[str]) -> Built:
        """The environment with exactly ``pins`` installed, built on first use.

        :returns: the environment; ``error`` set (and nothing left on disk) when uv failed.
        :raises KeyboardInterrupt: after removing the environment being built.
        """
        key = frozenset(pins)
        if key in self.cache:
            return self.cache[key]
        self.count += 1
        dest = self.root / f"env-{self.count:02d}"
        started = time.monotonic()
        error = None
        try:
            for argv in self.argv(dest, sorted(pins)):
                result = self.runner([self.uv, *argv[1:]], timeout=BUILD_TIMEOUT, env=_uv_env())
                if not result.ok:
                    text = (result.stderr or result.stdout).strip().splitlines()
                    error = (text[-1] if text else result.detail)[:300]
                    break
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        if error is not None:
            shutil.rmtree(dest, ignore_errors=True)
        built = Built(path=dest, built=True, seconds=time.monotonic() - started, error=error)
        self.cache[key] = built
        return built


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    """One run of CMD: exit status (``None``: timed out or did not start), seconds, the log."""

    returncode: int | None
    seconds: float
    log: Path
    output: str
    detail: str = ""


def run_command(
    command: Sequence[str],
    env_dir: Path,
    variables: Mapping[str, str | None],
    log: Path,
    *,
    timeout: float,
    runner: Runner = run,
) -> RunOutcome:
    """Run CMD with ``env_dir/bin`` first on ``PATH`` (``VIRTUAL_ENV`` set, as activation
    does) and the variables set (``None``: unset); stdout and stderr go to ``log``."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["VIRTUAL_ENV"] = str(env_dir)
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    started = time.monotonic()
    argv = list(command)
    if os.sep not in argv[0]:
        found = shutil.which(argv[0], path=env["PATH"])
        argv[0] = found or argv[0]
    result = runner(argv, timeout=timeout, env=env)
    seconds = time.monotonic() - started
    output = result.stdout + (("\n" if result.stdout and result.stderr else "") + result.stderr)
    shown = " ".join(f"{k}={v}" if v is not None else f"-u {k}" for k, v in variables.items())
    write_file(log, f"# {' '.join(command)}\n# environment: {env_dir}\n# variables: "
               f"{shown or '(as GOOD)'}\n# exit: {result.returncode} ({result.status})\n"
               + output, force=True)
    code = result.returncode if result.status in ("ok", "failed") else None
    return RunOutcome(returncode=code, seconds=seconds, log=log, output=output,
                      detail=result.detail)


def resolve_check(
    pins: Sequence[str], *, python_version: str | None, index_args: Sequence[str],
    python: str | None = None, runner: Runner = run,
) -> str | None:
    """Ask uv's resolver whether ``pins`` can be installed together (``uv pip compile``,
    dependencies included, nothing written).

    :param python_version: the Python version resolved for (``--python-version``).
    :param python: the interpreter the environments are built with (``--python``): its
        platform and implementation markers are those resolved for, and uv need not look for
        an interpreter (issue 26: that search was ~80 % of each resolver call here, 0.15 of
        0.18 s); ``None``: the one uv finds.

    :returns: ``None`` when satisfiable, else uv's explanation.
    :raises EnvlockError: uv could not run or failed for another reason (an index down).
    """
    from envlock.lock._tools import uv_bin

    argv = [uv_bin(), "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate",
            *index_args]
    if python_version:
        argv += ["--python-version", python_version]
    if python:
        argv += ["--python", python]
    result = runner(argv, timeout=BUILD_TIMEOUT, env=_uv_env(),
                    input_text="".join(p + "\n" for p in pins))
    if result.ok:
        return None
    text = (result.stderr or result.stdout).strip()
    if "No solution found" in text or "unsatisfiable" in text:
        return text
    if result.status in ("timeout", "absent"):
        raise EnvlockError(f"uv could not check the pins: {result.detail}")
    return text or result.detail
