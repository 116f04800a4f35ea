"""``envlock restore``: the exact commands that recreate an environment, and what they cannot.

A plan is built from lockfiles (``conda-lock.yml``, ``pylock.toml``, hash-pinned
``requirements.txt``) or from a manifest, whose ``[lockfiles]`` table names the files the
environment was built from.  The plan is printed as shell commands; ``--run`` runs them
(through :func:`envlock._run.run`, with a generous timeout), installing a conda-lock file with
py-rattler when no conda/mamba/micromamba exists.

No lockfile restores the machine: the NVIDIA driver, a system CUDA, compilers, the C library,
the CPU and GPU, environment variables, uncommitted code.  The plan lists those, taken from
the manifest, so that nobody expects a lockfile to bring them back.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envlock._run import Runner, run
from envlock.errors import LockError, ManifestError
from envlock.probes.lockfiles import _sha256, lockfile_kind

if TYPE_CHECKING:
    from envlock.manifest import Manifest

__all__ = ["Step", "RestorePlan", "plan_restore", "run_plan", "validate_lockfile"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One command of a restore.

    :ivar argv: the command as a user would type it (``conda-lock``/``uv`` by name).
    :ivar kind: ``"conda-lock"``, ``"uv-venv"``, ``"pylock"`` or ``"requirements"``.
    :ivar lockfile: the lockfile it installs, if any.
    """

    title: str
    argv: tuple[str, ...]
    kind: str
    lockfile: str | None = None

    @property
    def shell(self) -> str:
        """The command as one shell-quoted line."""
        return shlex.join(self.argv)


@dataclass(frozen=True, kw_only=True, slots=True)
class RestorePlan:
    """Commands in order, what they cannot restore, and problems met reading the inputs."""

    prefix: str
    steps: tuple[Step, ...] = ()
    not_restored: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


#: Manifest tables that a lockfile restores (``frameworks`` and ``blas`` follow from the
#: packages), that describe the job rather than the environment (``slurm``), or that the plan
#: describes itself.
_COVERED = frozenset({"envlock", "target", "python", "platform", "cpu", "env", "git", "conda",
                      "pip", "lockfiles", "gpu", "cuda", "toolchain", "frameworks", "blas",
                      "slurm"})


def _machine_lines(manifest: Manifest) -> list[str]:
    """The GPU, driver, system CUDA and compilers a manifest records: none is in a lockfile."""
    out = []
    gpu = manifest.gpu
    if gpu is not None and gpu.status == "ok" and (gpu.driver_version or gpu.gpus):
        devices = ", ".join(
            f"{g.name or 'GPU'}" + (f" (compute capability {g.compute_capability})"
                                    if g.compute_capability else "")
            for g in gpu.gpus
        )
        driver = f"driver {gpu.driver_version}" if gpu.driver_version else "driver unknown"
        cuda = (f", supports CUDA up to {gpu.cuda_driver_version}"
                if gpu.cuda_driver_version else "")
        out.append(f"GPU and NVIDIA {driver}{cuda}" + (f": {devices}" if devices else ""))
    cuda_info = manifest.cuda
    if cuda_info is not None and cuda_info.status == "ok":
        for tk in cuda_info.toolkits:
            if tk.path:
                out.append(f"system CUDA toolkit {tk.version or '(version unknown)'} at {tk.path}")
    toolchain = manifest.toolchain
    if toolchain is not None and toolchain.status == "ok" and toolchain.tools:
        tools = ", ".join(f"{t.name} {t.version or '?'}" for t in toolchain.tools)
        out.append(f"compilers and build tools: {tools}")
    return out


def _lockfiles_of(manifest_path: Path, manifest: Manifest) -> tuple[list[Path], list[str]]:
    files, warnings = [], []
    info = manifest.lockfiles
    for ref in info.files if info else ():
        path = Path(ref.path)
        if not path.is_absolute():
            path = manifest_path.parent / path
        if not path.exists():
            warnings.append(f"{path}: recorded in the manifest but missing")
            continue
        if _sha256(path) != ref.sha256:
            warnings.append(f"{path}: changed since the manifest was taken (sha256 differs)")
        files.append(path)
    return files, warnings


def _not_restored(manifest: Manifest) -> list[str]:
    out = []
    if manifest.platform and manifest.platform.status == "ok":
        p = manifest.platform
        out.append(f"operating system and C library: {p.os_name or p.os_id}, glibc {p.glibc}, "
                   f"kernel {p.kernel}")
    if manifest.cpu and manifest.cpu.status == "ok":
        c = manifest.cpu
        flags = " ".join(c.flags) or "none recorded"
        out.append(f"CPU: {c.model} ({c.usable_cores} usable cores; ISA flags {flags})")
    if manifest.target.kind != "conda" and manifest.python and manifest.python.version:
        py = manifest.python
        where = f" (base {py.base_prefix})" if py.base_prefix else ""
        out.append(f"the Python interpreter: {py.implementation or 'python'} {py.version}{where}; "
                   "a new venv uses whatever interpreter of that version the machine has")
    out += _machine_lines(manifest)
    for key, table in manifest.to_dict().items():
        if key in _COVERED or not isinstance(table, dict):
            continue
        out.append(f"[{key}] as recorded in the manifest")
    if manifest.env and manifest.env.vars:
        out.append("environment variables: " + ", ".join(manifest.env.vars)
                   + " (set them in the job script)")
    if manifest.git and manifest.git.status == "ok" and manifest.git.commit:
        g = manifest.git
        dirty = " plus uncommitted changes" if g.dirty else ""
        out.append(f"the code: git checkout {g.commit[:12]} of {g.path}{dirty}")
    for p in manifest.pip.packages if manifest.pip else ():
        if p.origin == "editable":
            out.append(f"{p.name} {p.version}: editable install of {p.editable_path or p.url}")
    return out


def _pylock_not_locked(path: Path) -> list[str]:
    from envlock.manifest._toml import load_file  # noqa: PLC0415

    data = load_file(path)
    table = data.get("tool", {}).get("envlock", {}) if isinstance(data.get("tool"), dict) else {}
    out = []
    for item in table.get("not-locked", []) if isinstance(table, dict) else []:
        if isinstance(item, dict) and item.get("kind") == "not-reproducible":
            out.append(f"{item.get('name')} {item.get('version')}: {item.get('reason')}")
    return out


def validate_lockfile(path: str | Path, kind: str) -> None:
    """Check that a lockfile is one its installer will accept, before anything runs.

    * ``conda-lock``: conda-lock's own parser (``conda_lock.lockfile.parse_conda_lock_file``);
      without conda-lock installed, a structural check of the same version-1 layout.
    * ``pylock``: packaging's reference PEP 751 parser (``packaging.pylock``, packaging >= 25),
      which also refuses a ``lock-version`` it does not support (PEP 751: a tool must not
      install from a major version it does not know).
    * ``conda-explicit``: UTF-8 text whose lines after ``@EXPLICIT`` are package URLs
      (conda's explicit-spec format).
    * ``requirements``: every requirement parses as a PEP 508 requirement
      (``packaging.requirements``).

    :param kind: as :func:`envlock.probes.lockfiles.lockfile_kind` names it.
    :raises ManifestError: one line naming the file and what is wrong with it.
    """
    from envlock.manifest._toml import read_text  # noqa: PLC0415

    path = Path(path)
    if kind in ("conda-lock", "pylock"):  # the shared readers: conda-lock's model, packaging
        from envlock import formats  # noqa: PLC0415

        formats.read_lock(path)
    elif kind == "conda-explicit":
        _check_explicit(path, read_text(path))
    elif kind == "requirements":
        _check_requirements(path, read_text(path))


def _check_explicit(path: Path, text: str) -> None:
    from urllib.parse import urlparse  # noqa: PLC0415

    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "@EXPLICIT"), None)
    if start is None:
        raise ManifestError(f"{path}: not a conda explicit lock (no @EXPLICIT line)")
    for number, line in enumerate(lines[start + 1:], start + 2):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        url = entry.split("#", 1)[0]
        if not urlparse(url).scheme or not url.endswith((".conda", ".tar.bz2")):
            raise ManifestError(f"{path}: line {number} is not a conda package URL: {entry[:80]}")


def _check_requirements(path: Path, text: str) -> None:
    import re  # noqa: PLC0415

    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    for number, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        entry = line.strip()
        if not entry or entry.startswith(("#", "-")):
            continue
        req = re.sub(r"\s--hash[= ]\S+", "", entry).split(" #", 1)[0].strip()
        try:
            Requirement(req)
        except InvalidRequirement as exc:
            raise ManifestError(f"{path}: requirement {req[:80]!r} is not valid PEP 508 "
                                f"({str(exc).splitlines()[0]})") from None


def _kind_of(path: Path) -> str | None:
    """What ``path`` is, by its content, with the shared reader (:mod:`envlock.formats`: regular
    files only, bounded): ``None`` for an envlock manifest, else the lockfile kind restore
    installs (``conda-lock``, ``conda-explicit``, ``pylock``, ``requirements`` when every line is
    hash-pinned).

    :raises ManifestError: unreadable or malformed (one line), or a kind restore cannot install.
    """
    from envlock import formats  # noqa: PLC0415

    try:
        kind = formats.read(path, exact=True).kind
    except ManifestError as exc:
        if "unknown format" in str(exc):
            raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile"
                                ) from None
        raise
    if kind == "manifest":
        return None
    if kind in ("conda-lock", "conda-explicit", "pylock"):
        return kind
    if kind == "requirements" and lockfile_kind(path) == "requirements":
        return kind
    if kind == "requirements":  # not hash-pinned: a wish list, not a lock
        raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile")
    raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile (a {kind} is "
                        "not installed by restore: it installs conda-lock.yml, conda explicit "
                        "lists, pylock.toml and hash-pinned requirements.txt)")


def plan_restore(
    inputs: Sequence[str | Path], prefix: str | Path, *, python_version: str | None = None
) -> RestorePlan:
    """Build the restore plan for manifests and/or lockfiles.

    :param inputs: manifest files (``.toml``/``.json`` with an ``[envlock]`` table) and
        lockfiles, in any order; conda lockfiles are installed before pip ones.
    :param prefix: the environment directory to create.
    :param python_version: Python for a new venv when there is no conda-lock file.
    :raises ManifestError: an input is neither a manifest nor a known lockfile, or a lockfile
        is malformed (see :func:`validate_lockfile`); nothing is run then.
    """
    from envlock.manifest import load  # noqa: PLC0415

    prefix = str(prefix)
    lockfiles: list[Path] = []
    warnings: list[str] = []
    missing: list[str] = []
    bare: list[Path] = []  # manifests that name no lockfile
    for item in inputs:
        path = Path(item)
        if not path.exists():
            raise ManifestError(f"{path}: no such file")
        kind = _kind_of(path)
        if kind is None:
            manifest = load(str(path))
            found, warns = _lockfiles_of(path, manifest)
            lockfiles += found
            warnings += warns
            missing += _not_restored(manifest)
            if python_version is None and manifest.python and manifest.python.version:
                python_version = manifest.python.version
            if not found:
                bare.append(path)
        else:
            lockfiles.append(path)
    if not lockfiles:
        warnings += [f"{p}: the manifest records no lockfile; lock the environment with "
                     "`envlock lock --from-env` first" for p in bare]
    kinds = {p: _kind_of(p) for p in lockfiles}
    for p in dict.fromkeys(lockfiles):  # before any command is printed or run
        validate_lockfile(p, kinds[p] or "")
    order = {"conda-lock": 0, "conda-explicit": 0, "pylock": 1, "requirements": 2}
    lockfiles = sorted(dict.fromkeys(lockfiles), key=lambda p: order.get(kinds[p] or "", 3))
    python = f"{prefix}/bin/python"
    steps: list[Step] = []
    has_conda = any(kinds[p] in ("conda-lock", "conda-explicit") for p in lockfiles)
    if not has_conda and lockfiles:
        argv = ["uv", "venv", prefix] + (["--python", python_version] if python_version else [])
        steps.append(Step(title="create a virtual environment", argv=tuple(argv), kind="uv-venv"))
    for p in lockfiles:
        kind = kinds[p]
        if kind == "conda-lock":
            steps.append(Step(title=f"install the conda packages of {p.name}", kind="conda-lock",
                              argv=("conda-lock", "install", "--prefix", prefix, str(p)),
                              lockfile=str(p)))
        elif kind == "conda-explicit":
            steps.append(Step(title=f"install the explicit conda lock {p.name}", kind="conda-lock",
                              argv=("conda", "create", "--prefix", prefix, "--file", str(p)),
                              lockfile=str(p)))
        elif kind == "pylock":
            steps.append(Step(title=f"install the pip packages of {p.name}", kind="pylock",
                              argv=("uv", "pip", "install", "--python", python, "-r", str(p)),
                              lockfile=str(p)))
            missing += _pylock_not_locked(p)
        else:
            steps.append(Step(title=f"install the hash-pinned requirements {p.name}",
                              kind="requirements", lockfile=str(p),
                              argv=("uv", "pip", "install", "--python", python,
                                    "--require-hashes", "-r", str(p))))
    return RestorePlan(prefix=prefix, steps=tuple(steps),
                       not_restored=tuple(dict.fromkeys(missing)), warnings=tuple(warnings))


def run_plan(plan: RestorePlan, *, runner: Runner = run) -> list[str]:
    """Run a plan's steps in order.

    conda-lock files go through ``conda-lock install`` when a conda executable exists, else
    through py-rattler's installer (and their pip entries through uv); ``uv`` is the binary of
    the ``uv`` package.

    :raises LockError: the prefix exists and is not empty (a restore never overwrites an
        environment), or a step fails (its command's last lines are in the message).  What
        the failed restore created is removed first (the prefix, or the contents of the empty
        prefix it was given), and the message's first line says so, or says what is left.
    :returns: one line per step done.
    """

    from envlock.errors import EnvlockError  # noqa: PLC0415

    prefix = Path(plan.prefix)
    if prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir())):
        raise LockError(f"{prefix} exists and is not empty; restore into a new --prefix")
    created = not prefix.exists()
    try:
        return _run_steps(plan, runner)
    except (EnvlockError, OSError) as exc:
        note = _remove_partial(prefix, created)
        first, _, rest = (str(exc) if isinstance(exc, EnvlockError)
                          else f"{exc.filename or prefix}: {exc.strerror or exc}").partition("\n")
        raise LockError(f"{first.rstrip(':')}; {note}" + (f"\n{rest}" if rest else "")) from None


def _remove_partial(prefix: Path, created: bool) -> str:
    """Undo a failed restore: remove the prefix it created, or empty the one it was given."""
    import shutil  # noqa: PLC0415

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
    from envlock.lock import _condalock  # noqa: PLC0415
    from envlock.lock._pip import _uv_env  # noqa: PLC0415
    from envlock.lock._tools import (  # noqa: PLC0415
        INSTALL_TIMEOUT,
        conda_executable,
        conda_lock_argv,
        current_platform,
        uv_bin,
    )

    done = []
    for step in plan.steps:
        if step.kind == "conda-lock" and step.argv[0] == "conda-lock":
            exe = conda_executable()
            if exe is None:
                names = _condalock.install(step.lockfile or "", plan.prefix)
                platform = current_platform()
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
            argv = list(step.argv)
            if argv[0] == "uv":
                argv[0] = uv_bin()
            _run_checked(argv, runner, INSTALL_TIMEOUT, _uv_env())
        done.append(f"done: {step.shell}")
    return done


def _install_pip_lines(
    uv: str, prefix: str, lines: list[str], runner: Runner, timeout: float, env: dict[str, str]
) -> None:
    """Install ``name @ url --hash=…`` lines with uv, hashes checked, nothing else resolved."""
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
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
