"""Running a restore plan, and checking what it built against the manifest.

:func:`run_plan` runs the steps in order (conda-lock files through ``conda-lock install`` or
py-rattler's installer, pip lines through uv), removing a half-built prefix it created when a
step fails; :func:`verify_restored` runs ``verify`` of the result against each manifest.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from envlock._io import write_file
from envlock._run import Runner, run
from envlock.errors import EnvlockError, LockError, ManifestError
from envlock.lock._plan import RestorePlan, Step
import hashlib
from envlock._io import read_bytes
from envlock.manifest import load

__all__ = ["run_plan", "RestoreCheck", "verify_restored"]

def run_plan(plan: RestorePlan, *, runner: Runner = run) -> list[str]:
    """Run a plan's steps in order.

    conda-lock files go through ``conda-lock install`` when a conda executable exists, else
    through py-rattler's installer (and their pip entries through uv); ``uv`` is the binary of
    the ``uv`` package.

    :raises LockError: the prefix exists and is not empty (a restore never overwrites an
        environment), or a step fails (its command's last lines are in the message).  What
        the failed restore created is removed first (the prefix, or the contents of the empty
        prefix it was given), and the message's first line says so, or says what is left.
    :raises KeyboardInterrupt: after removing what the restore created, likewise.
    :returns: one line per step done.
    """


    prefix = Path(plan.prefix)
    if prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir())):
        raise LockError(f"{prefix} exists and is not empty; restore into a new --prefix")
    if plan.python is not None and plan.python.path is None:
        raise LockError(f"cannot create the venv: {plan.python.describe()}")
    for step in plan.steps:
        if step.kind == "write" and os.path.lexists(step.argv[1]):
            raise LockError(f"{step.argv[1]} exists; restore writes the converted lockfile there: "
                            "remove it or restore into another --prefix")
    created = not prefix.exists()
    try:
        return _run_steps(plan, runner)
    except KeyboardInterrupt:
        _remove_partial(prefix, created)  # Ctrl-C leaves nothing half-built
        _remove_written(plan)
        raise
    except (EnvlockError, OSError) as exc:
        note = _remove_partial(prefix, created) + _remove_written(plan)
        first, _, rest = (str(exc) if isinstance(exc, EnvlockError)
                          else f"{exc.filename or prefix}: {exc.strerror or exc}").partition("\n")
        raise LockError(f"{first.rstrip(':')}; {note}" + (f"\n{rest}" if rest else "")) from None


def _remove_written(plan: RestorePlan) -> str:
    """Remove the converted lockfiles this restore wrote (``"write"`` steps; :func:`run_plan`
    refuses to start when one exists, so each is this restore's)."""
    said = []
    for step in plan.steps:
        path = Path(step.argv[1]) if step.kind == "write" else None
        if path is None or not path.is_file():
            continue
        try:
            if path.read_text(encoding="utf-8") == step.content:
                path.unlink()
                said.append(f"; removed {path}")
        except OSError:
            said.append(f"; {path} is left")
    return "".join(said)


def _remove_partial(prefix: Path, created: bool) -> str:
    """Undo a failed restore: remove the prefix it created, or empty the one it was given."""
    import shutil

    if not prefix.exists():
        return "nothing was created"
    try:
        if created:
            shutil.rmtree(prefix)
            return f"removed the partial environment {prefix}"
        for child in prefix.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return f"emptied {prefix} again"
    except OSError as exc:
        return (f"a partial environment is left at {prefix} (removing it failed: "
                f"{exc.strerror or exc}); delete it before restoring again")


def _run_steps(plan: RestorePlan, runner: Runner) -> list[str]:
    from envlock.lock import _condalock
    from envlock.lock._pip import _uv_env
    from envlock.formats.conda import current_subdir
    from envlock.lock._tools import (
        INSTALL_TIMEOUT,
        conda_executable,
        conda_lock_argv,
        uv_bin,
    )

    done = []
    for step in plan.steps:
        if step.kind == "write":
            write_file(step.argv[1], step.content or "")  # create-or-fail: never replaces one
            done.append(f"wrote {step.argv[1]}: {step.title.split(': ', 1)[-1]}")
            continue
        if step.kind == "conda-manifest":
            names = _install_conda_manifest(step.manifest or "", plan.prefix)
            done.append(f"installed {len(names)} conda packages with py-rattler from the "
                        "manifest's records (exact files, md5/sha256 checked)")
            continue
        if step.kind == "pip-pins":
            done += _install_pins(list(step.argv), runner, INSTALL_TIMEOUT, _uv_env())
            continue
        if step.kind == "conda-lock" and step.argv[0] == "conda" and conda_executable() is None:
            names = _condalock.install_explicit(step.lockfile or "", plan.prefix)
            done.append(f"installed {len(names)} conda packages of {Path(step.lockfile or '').name} "
                        "with py-rattler (no conda executable found)")
            continue
        if step.kind == "conda-lock" and step.argv[0] == "conda-lock":
            exe = conda_executable()
            if exe is None:
                names = _condalock.install(step.lockfile or "", plan.prefix)
                platform = current_subdir()
                pip_lines = _condalock.pip_requirements(step.lockfile or "", platform)
                if pip_lines:
                    _install_pip_lines(uv_bin(), plan.prefix, pip_lines, runner, INSTALL_TIMEOUT,
                                       _uv_env())
                done.append(f"installed {len(names)} conda packages with py-rattler "
                            "(no conda executable found)"
                            + (" and pip entries with uv" if pip_lines else ""))
                continue
            argv = [*conda_lock_argv(), *step.argv[1:], "--conda", exe]
            _run_checked(argv, runner, INSTALL_TIMEOUT, None)
        else:
            if step.kind == "patch":
                _check_patch(step)
            argv = list(step.argv)
            if argv[0] == "uv":
                argv[0] = uv_bin()
            _run_checked(argv, runner, INSTALL_TIMEOUT, _uv_env())
        done.append(f"done: {step.shell}")
    return done


def _check_patch(step: Step) -> None:
    """The patch file is still the one the plan checked (its recorded sha256), right before
    ``git apply`` reads it."""
    patch = step.argv[-1]
    if hashlib.sha256(read_bytes(patch)).hexdigest() != step.sha256:
        raise LockError(f"{patch}: changed since the plan was made (sha256 is not the "
                        "manifest's patch-sha256); not applied")


#: How uv says that a pinned version is not on the indexes given (``uv pip install``).
_NOT_ON_INDEX = re.compile(r"no version of ([A-Za-z0-9][A-Za-z0-9._-]*)==|"
                           r"([A-Za-z0-9][A-Za-z0-9._-]*) was not found in")


def _install_pins(argv: list[str], runner: Runner, timeout: float,
                  env: dict[str, str]) -> list[str]:
    """Install a manifest's pins; a version no index has any more is left out and reported
    (the verification after the restore lists it as missing), the rest is installed."""
    from envlock.lock._tools import uv_bin
    from envlock.probes.pip import canonicalize

    argv = [uv_bin(), *argv[1:]]
    left_out: list[str] = []
    while True:
        result = runner(argv, timeout=timeout, env=env)
        if result.ok:
            break
        text = (result.stderr or result.stdout)
        gone = {canonicalize(m.group(1) or m.group(2)) for m in _NOT_ON_INDEX.finditer(text)}
        drop = [a for a in argv if "==" in a and canonicalize(a.split("==")[0]) in gone]
        if not drop or result.status != "failed":
            tail = "\n".join(text.strip().splitlines()[-10:])
            raise LockError(f"{shlex.join(argv)} failed ({result.detail})"
                            + (f":\n{tail}" if tail else ""))
        left_out += drop
        argv = [a for a in argv if a not in drop]
    shown = shlex.join(["uv", *argv[1:]])
    lines = [f"done: {shown}"]
    if left_out:
        lines.append("not on the indexes given, left out: " + ", ".join(left_out))
    return lines


def _install_pip_lines(
    uv: str, prefix: str, lines: list[str], runner: Runner, timeout: float, env: dict[str, str]
) -> None:
    """Install ``name @ url --hash=…`` lines with uv, hashes checked, nothing else resolved."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as tmp:
        req = Path(tmp) / "requirements.txt"
        write_file(req, "".join(line + "\n" for line in lines))
        _run_checked([uv, "pip", "install", "--python", f"{prefix}/bin/python", "--no-deps",
                      "--require-hashes", "-r", str(req)], runner, timeout, env)


def _run_checked(
    argv: list[str], runner: Runner, timeout: float, env: dict[str, str] | None
) -> None:
    result = runner(argv, timeout=timeout, env=env)
    if not result.ok:
        text = (result.stderr or result.stdout).strip()
        tail = "\n".join(text.splitlines()[-10:])
        message = f"{shlex.join(argv)} failed ({result.detail})"
        raise LockError(message + (f":\n{tail}" if tail else ""))


def _install_conda_manifest(manifest_path: str, prefix: str) -> list[str]:
    """Install a manifest's conda packages with py-rattler: each record's own URL, md5 and
    sha256 (``conda-meta``), through a conda-lock file written with conda-lock's models."""
    import tempfile

    from envlock.lock import _condalock
    from envlock.lock._fromenv import _conda_part, environment_platform

    manifest = load(manifest_path)
    text, _skipped, _notes = _conda_part(manifest, manifest.target.prefix)
    if text is None:
        raise LockError(f"{manifest_path}: no conda package can be restored")
    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as tmp:
        lock = Path(tmp) / "conda-lock.yml"
        write_file(lock, text)
        return _condalock.install(lock, prefix, platform=environment_platform(manifest))


@dataclass(frozen=True, kw_only=True, slots=True)
class RestoreCheck:
    """How a restored environment compares with its manifest (``envlock verify``'s checks).

    :ivar exact: packages that came back at their recorded version (and conda build).
    :ivar differs: what differs in the environment (package and Python findings' titles).
    :ivar machine: what a rebuild never restores: the machine and job findings of verify, then
        the plan's "not restored" list (driver, GPU, CPU, system libraries, kernel, …).
    :ivar exit_code: verify's: 0 when no error, 1 otherwise.
    """

    exact: tuple[str, ...]
    differs: tuple[str, ...]
    machine: tuple[str, ...]
    exit_code: int


#: verify's checks that judge the environment itself (the rest judge the machine and the job).
_ENV_CHECKS = ("python.", "packages.")


def verify_restored(plan: RestorePlan, *, runner: Runner = run) -> RestoreCheck:
    """Check a restored environment against the manifest it was restored from.

    Runs :func:`envlock.verify.verify` (all its checks) with the new environment as target (against
    the manifest, or, for a restore from lockfiles only, against those lockfiles) and sorts its
    findings: ``python.*``/``packages.*`` are differences of the environment, the
    others (driver, GPU architecture, libraries, isolation, …) belong to the machine or job.

    :raises ManifestError: the plan restores no manifest and installs no pylock into a venv.
    """
    from envlock.verify import verify

    if not plan.manifests:
        return _verify_against_locks(plan, runner)
    path = plan.manifests[0]
    manifest = load(path)
    conda = bool(manifest.conda and manifest.conda.packages)
    report = verify(manifest=path, prefix=plan.prefix if conda else None,
                    python=None if conda else f"{plan.prefix}/bin/python", runner=runner)
    named: set[str] = set()
    differs, machine = [], []
    for f in report.findings:
        if f.id.startswith(_ENV_CHECKS):
            differs.append(f"{f.severity}: {f.title}")
            for ev in f.evidence:
                parts = ev.removeprefix("installed: ").split()
                if parts:
                    named.add(parts[0])
        elif f.severity != "info" or f.id.startswith("gpu."):
            machine.append(f"{f.severity}: {f.title}")
    exact = [f"{p.name} {p.version}" for p in (manifest.pip.packages if manifest.pip else ())
             if p.origin != "conda" and p.name not in named]
    exact += [f"{c.name} {c.version} {c.build}" for c in
              (manifest.conda.packages if manifest.conda else ()) if c.name not in named]
    return RestoreCheck(exact=tuple(exact), differs=tuple(differs),
                        machine=tuple(machine) + plan.not_restored, exit_code=report.exit_code)



def _verify_against_locks(plan: RestorePlan, runner: Runner) -> RestoreCheck:
    """:func:`verify_restored` for a restore from lockfiles only: verify with ``locks``."""
    from envlock.verify import verify
    from envlock.verify.expected import read_lock

    locks = [s.lockfile for s in plan.steps if s.lockfile and s.kind == "pylock"]
    if not locks or any(s.kind == "conda-lock" for s in plan.steps):
        raise ManifestError("the restore installed no pylock into a venv; nothing to verify against")
    report = verify(locks=locks, python=f"{plan.prefix}/bin/python", runner=runner)
    differs = [f"{f.severity}: {f.title}" for f in report.findings if f.id.startswith(_ENV_CHECKS)]
    machine = [f"{f.severity}: {f.title}" for f in report.findings
               if not f.id.startswith(_ENV_CHECKS) and (f.severity != "info" or f.id.startswith("gpu."))]
    said = " ".join(differs)
    exact = [f"{p.name} {p.version}" for lock in locks for p in read_lock(lock).packages
             if p.name not in said]
    return RestoreCheck(exact=tuple(dict.fromkeys(exact)), differs=tuple(differs),
                        machine=tuple(machine) + plan.not_restored, exit_code=report.exit_code)
