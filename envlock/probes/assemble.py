"""Take a snapshot: run the probes (concurrently where they wait on other processes) and
assemble a :class:`~envlock.manifest.Manifest`.

The slow parts — asking the target interpreter for its ``sys.path`` and running ``git`` — run
in threads while the file-reading probes work; nothing here imports the user's packages.
Every problem met (a corrupt METADATA, a hanging interpreter, git missing) is recorded in the
area it concerns and listed in ``[envlock] warnings``; a snapshot always completes.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock import _run
from envlock._run import Runner, run
from envlock.manifest import (
    CondaInfo,
    EnvlockInfo,
    GitInfo,
    Manifest,
    PipInfo,
    PipPackage,
)
from envlock.probes.condameta import CondaMetaRecord, CondaRead, list_conda_meta, probe_conda
from envlock.probes.env import probe_env
from envlock.probes.git import probe_git
from envlock.probes.lockfiles import Installed, collect_lockfiles, match_lockfiles
from envlock.probes.pip import canonicalize, conda_build_url, probe_pip
from envlock.probes.system import probe_cpu, probe_platform
from envlock.probes.world import World, activated_path
from envlock.probes.target import (
    ResolvedTarget,
    query_interpreter,
    query_interpreter_cached,
    refine_target,
    resolve_target,
)
from envlock.redact import redact_argv
from envlock._io import write_file
from envlock._io import one_line
from envlock.errors import TargetError
from envlock.redact import printable
import hashlib
from envlock.errors import ArgumentsError
from envlock.probes.git import make_patch
from envlock.redact import secret_value
from envlock import cache as _cache
from envlock.manifest import _model

if TYPE_CHECKING:
    from envlock.manifest import CpuInfo, EnvVars, LockfilesInfo, PlatformInfo, PythonInfo
    from envlock.manifest.librariestable import LibrariesInfo

__all__ = ["attribute_conda", "not_python", "snapshot", "utc_now", "with_patch"]


def utc_now() -> str:
    """The current UTC time as ISO-8601 with a ``Z`` suffix, to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def attribute_conda(
    pip: PipInfo, conda: CondaRead | None
) -> tuple[PipInfo, CondaInfo | None, list[str]]:
    """Cross-check Python distributions against conda's records (cases C11 and C12).

    * A dist-info listed in a conda package's ``files`` belongs to conda: its origin becomes
      ``"conda"``, ``conda_package`` names the package, and a PEP 610 URL into a conda-build
      directory is dropped (it cannot be installed anywhere else).
    * A conda package whose dist-info is gone while another copy of the same project is
      importable was overwritten by pip (or another installer): ``overwritten_by_pip`` is set and
      the imported version recorded, so the stale conda record is not mistaken for the truth.

    :returns: the updated ``[pip]`` and ``[conda]`` tables and warning lines.
    """
    warnings: list[str] = []
    owner = conda.dist_owner if conda else {}
    by_name = {p.name: p for p in pip.packages}
    packages: list[PipPackage] = []
    for p in pip.packages:
        path = os.path.normpath(os.path.join(p.location, p.dist_info or ""))
        conda_pkg = owner.get(path)
        if conda_pkg is not None:
            dead = conda_build_url(p)
            p = replace(p, origin="conda", conda_package=conda_pkg,
                        url=None if dead else p.url,
                        editable_path=None if dead else p.editable_path)
        elif conda_build_url(p):
            warnings.append(
                f"{p.name} {p.version}: direct_url.json points into a conda build directory "
                f"({p.url}) that exists only on the build machine; no conda package owns it"
            )
        packages.append(p)
    new_pip = replace(pip, packages=tuple(packages))
    if conda is None:
        return new_pip, None, warnings
    conda_pkgs = []
    for c in conda.info.packages:
        if c.python_dist:
            dist_dir = os.path.join(conda.info.source.rsplit("/conda-meta", 1)[0], c.python_dist)
            if not os.path.exists(dist_dir):
                project = canonicalize(os.path.basename(c.python_dist).split("-", 1)[0])
                imported = by_name.get(project) or by_name.get(canonicalize(c.name))
                if imported is not None:
                    c = replace(c, overwritten_by_pip=True, pip_version=imported.version)
                    installer = imported.installer or "another installer"
                    warnings.append(
                        f"conda package {c.name} {c.version} ({c.channel}) was overwritten by "
                        f"{installer}: Python imports {imported.name} {imported.version}; "
                        "the conda record is stale"
                    )
        conda_pkgs.append(c)
    return new_pip, replace(conda.info, packages=tuple(conda_pkgs)), warnings


def _editable_git(world: World, pip: PipInfo, pool: ThreadPoolExecutor) -> PipInfo:
    """Record the git state of every editable install that lives in a checkout (C13).

    Only editable ones: their checkout *is* the code Python imports.  A plain directory install
    (``pip install .``, ``dir_info`` without ``editable``) imports the copy made at install
    time; the checkout's state now says nothing about that copy, so it is not recorded."""
    jobs = {}
    for p in pip.packages:
        if p.origin == "editable" and p.editable_path and os.path.isdir(p.editable_path):
            jobs[p.name] = pool.submit(probe_git, world, path=p.editable_path)
    if not jobs:
        return pip
    out = []
    for p in pip.packages:
        if p.name in jobs:
            info: GitInfo = jobs[p.name].result()
            if info.status != "absent":
                p = replace(p, git=info)
        out.append(p)
    return replace(pip, packages=tuple(out))


@dataclass(frozen=True)
class _Observed:
    """What the probes of one snapshot returned (the target as its interpreter reported it)."""

    target: ResolvedTarget
    python: PythonInfo
    platform: PlatformInfo | None
    cpu: CpuInfo | None
    env: EnvVars | None
    git: GitInfo
    conda: CondaInfo | None
    pip: PipInfo
    libraries: LibrariesInfo | None
    stack: dict[str, Any]


def _observe(pool: ThreadPoolExecutor, target: ResolvedTarget, env: dict[str, str],
             warnings: list[str], *, python: str | None, require_python: bool, repo: str,
             root: str, runner: Runner, env_allow: Iterable[str], env_deny: Iterable[str],
             libraries: bool, stack: bool, do_import: bool, stack_timeout: float) -> _Observed:
    """Run every probe of :func:`snapshot` on ``pool`` (its parameters); the probes' own
    warnings are appended to ``warnings``.

    :raises TargetError: ``require_python`` and ``python`` is not a Python interpreter.
    """
    query = query_interpreter_cached if runner is run else query_interpreter
    python_info = pool.submit(query, target, runner=runner, environ=env).result()
    if require_python and python and python_info.status == "error" and not_python(python_info.error or "", python):
        # The interpreter asked for by name ran but did not answer as Python does
        # (/bin/true, a shell script, a binary of another machine).  (A hung one is
        # recorded: its [python] says "timeout".)

        raise TargetError(f"--python {printable(python)}: not a working Python interpreter "
                          f"({one_line(printable(python_info.error or 'no answer'), 160)})")
    target = refine_target(target, python_info)
    # The one world every probe of this snapshot observes (the target as its interpreter
    # reported it); results of one probe that another needs are passed on explicitly.
    world = World.of(target, environ=env, sys_path=python_info.path, root=root, runner=runner)
    f_git = pool.submit(probe_git, world, path=repo)
    f_conda = pool.submit(probe_conda, world) if target.kind == "conda" else None
    platform_info = probe_platform(world)
    cpu_info = probe_cpu(world)
    env_info = probe_env(world, allow=env_allow, deny=env_deny)
    f_libs = pool.submit(_libraries, world, python_info.path) if (libraries and world.python) else None
    if python_info.status != "ok":
        warnings.append(
            f"python: {python_info.error}; package list read from the prefix's site-packages"
        )
    # The stack probes reuse the [pip] scan and one conda-meta listing instead of reading
    # the same files again; they start now and wait for the scan only where they need it.
    scanned: Future[Sequence[PipPackage]] = Future()
    f_stack = pool.submit(
        _stack, world, do_import, stack_timeout, scanned.result, list_conda_meta(world.prefix),
    ) if stack else None
    try:
        pip_info = probe_pip(world)
    except BaseException as exc:
        scanned.set_exception(exc)
        raise
    scanned.set_result(pip_info.packages)
    conda_read = f_conda.result() if f_conda else None
    if conda_read:
        warnings.extend(conda_read.warnings)
    pip_info, conda_info, attrib_warnings = attribute_conda(pip_info, conda_read)
    warnings.extend(attrib_warnings)
    pip_info = _editable_git(world, pip_info, pool)
    return _Observed(target, python_info, platform_info, cpu_info, env_info, f_git.result(),
                     conda_info, pip_info, f_libs.result() if f_libs else None,
                     f_stack.result() if f_stack else {})


def _result_warnings(seen: _Observed) -> list[str]:
    """One warning per probe result that failed or timed out, per package with an error, and
    per package that shadows another copy."""
    warnings: list[str] = []
    if seen.libraries is not None and seen.libraries.status in ("error", "timeout"):
        warnings.append(f"libraries: {seen.libraries.status}: {seen.libraries.error}")
    for area, record in seen.stack.items():
        if getattr(record, "status", "ok") in ("error", "timeout"):
            warnings.append(f"{area}: {record.status}: {getattr(record, 'error', None) or ''}".rstrip(": "))
    for p in seen.pip.packages:
        if p.error:
            warnings.append(f"pip: {p.name}: {p.error}")
        if p.shadowed:
            warnings.append(
                f"pip: {p.name} {p.version} at {p.location} shadows " + ", ".join(p.shadowed)
            )
    if seen.git.status in ("error", "timeout"):
        warnings.append(f"git: {seen.git.error}")
    return warnings


def _installed(seen: _Observed) -> Installed:
    """What the environment has, for checking the lockfiles against it."""
    return Installed.of(seen.pip.packages, seen.conda.packages if seen.conda else (),
                        seen.python.version, seen.platform.machine if seen.platform else None)


def _abandon(pool: ThreadPoolExecutor) -> None:
    """Ctrl-C (or a bug) during the probes: drop what has not started, end every child now;
    the threads still running then return within moments instead of waiting out their timeouts."""
    pool.shutdown(wait=False, cancel_futures=True)
    # The caller's own later commands run at once (a library caller carries on after
    # catching KeyboardInterrupt); the abandoned probes' threads start none until they
    # have all returned.
    _run.cancel_all(spare_caller=True)
    threading.Thread(target=_resume_after, args=(pool,), daemon=True).start()


def _manifest(seen: _Observed, lockfiles_info: LockfilesInfo, warnings: list[str],
              started: float, command: Sequence[str] | None) -> Manifest:
    """The manifest of what was observed; ``started`` is the :func:`time.perf_counter` of the
    snapshot's start, ``command`` the command line (``sys.argv`` when ``None``)."""
    head = EnvlockInfo(
        version=_version(),
        created=utc_now(),
        host=socket.gethostname(),
        command=redact_argv(sys.argv if command is None else command),
        duration=round(time.perf_counter() - started, 3),
        warnings=tuple(warnings),
    )
    return Manifest(
        envlock=head,
        target=seen.target.to_model(),
        python=seen.python,
        platform=seen.platform,
        cpu=seen.cpu,
        env=seen.env,
        git=seen.git,
        conda=seen.conda,
        pip=seen.pip,
        lockfiles=lockfiles_info,
        libraries=seen.libraries,
        **seen.stack,
    )


def snapshot(
    *, python: str | None = None, prefix: str | None = None, repo: str | None = None,
    environ: Mapping[str, str] | None = None, root: str = "/", runner: Runner = run,
    env_allow: Iterable[str] = (), env_deny: Iterable[str] = (), command: Sequence[str] | None = None,
    target: ResolvedTarget | None = None, do_import: bool = False, stack: bool = True,
    stack_timeout: float = 10.0, lock_dir: str | None = None, locks: Sequence[str] = (),
    libraries: bool = True, output: str | os.PathLike[str] | None = None, save_patch: bool = False,
    force: bool = False, require_python: bool = False,
) -> Manifest:
    """Observe a target environment and return its manifest.

    :param python: the target interpreter (``--python``).
    :param prefix: the target conda prefix or venv (``--prefix``).
    :param repo: directory whose git checkout is recorded in ``[git]`` (default: the current
        working directory).
    :param environ: the environment of the job (``os.environ`` when ``None``): used to choose the
        target, for ``[env]``, and passed to the target interpreter and git.
    :param root: the file-system root for ``/proc`` and ``/etc`` files (tests use a fake root).
    :param runner: the command runner (:func:`envlock._run.run`).
    :param env_allow: extra variable names/prefixes (``NAME*``) to record in ``[env]``.
    :param env_deny: variable names/prefixes never to record.
    :param command: the command line to record (``sys.argv`` when ``None``).
    :param target: an already resolved target (skips :func:`~envlock.probes.target.resolve_target`).
    :param do_import: also run the target interpreter to import torch and ask it what only an
        import can tell (``--import``; seconds, opt-in).
    :param stack: probe the numerical stack (``[gpu]`` … ``[slurm]``).
    :param lock_dir: the directory the manifest is written to: the lockfiles beside it
        (``conda-lock.yml``, ``pylock.toml``, hashed requirements) are recorded in
        ``[lockfiles]``, each checked against the snapshot (default: the working directory).
    :param locks: more lockfiles to record (``--lock``), any file name.
    :param libraries: record how torch's key shared libraries resolve (``[libraries]``, from
        envlock's model of the dynamic loader).
    :param stack_timeout: overall budget of the stack probes, seconds; a probe still running
        then is recorded as ``timeout``.
    :param output: the manifest file this snapshot is for (the caller writes it with
        ``Manifest.write``); ``save_patch`` writes beside it.
    :param save_patch: write the uncommitted diff of the ``[git]`` checkout (``git diff HEAD
        --binary``, a header naming the commit and the untracked files;
        :func:`envlock.probes.git.make_patch`) to ``output`` with the suffix ``.patch``, and
        record its name and sha256 in ``[git]`` (``--save-patch``).
    :param force: with ``save_patch``, replace an existing patch file.
    :param require_python: refuse (``TargetError``) a ``python`` that runs but is not a Python
        interpreter (:func:`not_python`), as ``envlock snapshot --python`` does: a manifest of it
        would describe some other environment.  Off by default: the manifest then records the
        failure (``[python] status = "error"``) and the prefix's ``site-packages``.
    :raises TargetError: the target cannot be found (bad ``--python``/``--prefix``), or, with
        ``require_python``, ``python`` is not a Python interpreter.
    :raises ArgumentsError: ``save_patch`` without ``output``, or the checkout is no git one.
    :raises OutputExistsError: ``save_patch``: the patch file exists and ``force`` is false.
    :raises InputError: a ``locks`` file is missing or not a lockfile.
    :raises KeyboardInterrupt: on Ctrl-C, after pending probes are cancelled and every child
        process group is killed (:func:`envlock._run.cancel_all`), so it returns at once.
    :returns: the :class:`Manifest`; problems are in ``manifest.envlock.warnings``.
    """
    started = time.perf_counter()
    env = dict(os.environ if environ is None else environ)
    if target is None:
        target = resolve_target(python=python, prefix=prefix, environ=env)
    warnings: list[str] = [f"target: {note}" for note in target.skipped]
    cwd = os.getcwd()
    lockfiles_info, lock_warnings = collect_lockfiles(lock_dir or cwd, locks, cwd=cwd)
    _run.resume()
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="envlock-probe")
    try:
        seen = _observe(pool, target, env, warnings, python=python, require_python=require_python,
                        repo=repo or cwd, root=root, runner=runner, env_allow=env_allow,
                        env_deny=env_deny, libraries=libraries, stack=stack, do_import=do_import,
                        stack_timeout=stack_timeout)
    except BaseException:
        _abandon(pool)
        raise
    pool.shutdown(wait=True)
    lockfiles_info, matched = match_lockfiles(lockfiles_info, _installed(seen))
    warnings += lock_warnings + matched + _result_warnings(seen)
    manifest = _manifest(seen, lockfiles_info, warnings, started, command)
    if save_patch:
        manifest, patch_path, data = with_patch(manifest, output, runner=runner, environ=env)
        write_file(patch_path, data, force=force)
    return manifest


def not_python(detail: str, python: str) -> bool:
    """Whether the interpreter query's failure ``detail`` says the program ``python`` is not
    Python at all: it answered something else (``/bin/true``, a script), or failed without a
    word of Python's own (an ELF of another machine, ``/bin/ls``).  A Python that fails in this
    environment ("Fatal Python error", "Python path configuration") is recorded as it is."""
    if detail.startswith("unexpected answer"):
        return True
    own = detail.replace(python, "").replace(os.path.abspath(python), "")
    return "python" not in own.lower()


def with_patch(manifest: Manifest, output: str | os.PathLike[str] | None, *,
               runner: Runner = run, environ: Mapping[str, str] | None = None,
               ) -> tuple[Manifest, Path, bytes]:
    """``manifest`` with ``[git] patch``/``patch-sha256``/``patch-note`` set for the patch file
    beside ``output`` (its suffix replaced by ``.patch``), that file's path and its bytes
    (:func:`envlock.probes.git.make_patch`).  A patch whose added lines look like credentials
    (:func:`envlock.redact.secret_value`) adds a warning: it is the diff verbatim.

    :raises ArgumentsError: no ``output``, or ``manifest`` has no readable git checkout.
    """

    if output is None or os.fspath(output) == "-":
        raise ArgumentsError("--save-patch needs -o FILE (the patch is written beside it)")
    git = manifest.git
    if git is None or git.status != "ok" or not git.path:
        raise ArgumentsError("--save-patch: the working directory (or --repo) is not a git "
                             "checkout")
    patch_path = Path(output).with_suffix(".patch")
    data, note = make_patch(git.path, git.commit, runner=runner, environ=environ)
    new_git = replace(git, patch=patch_path.name, patch_sha256=hashlib.sha256(data).hexdigest(),
                      patch_note=note)
    warnings = list(manifest.envlock.warnings)
    if note:
        warnings.append(f"git: --save-patch: {note}")
    text = data.decode("utf-8", "replace")
    risky = sum(1 for line in text.splitlines() if line.startswith("+") and secret_value(line))
    if risky:
        warnings.append(f"git: --save-patch: {patch_path.name} is your diff verbatim and "
                        f"{risky} added line(s) look like credentials; check it before sharing")
    head = replace(manifest.envlock, warnings=tuple(warnings))
    return replace(manifest, git=new_git, envlock=head), patch_path, data


def _resume_after(pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=True)
    _run.resume()


def target_path_dirs(target: ResolvedTarget, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The ``PATH`` directories the target's jobs search, its own ``bin`` first
    (:func:`envlock.probes.world.activated_path`: the snapshot world's ``path_dirs``).

    An activated environment already has ``<prefix>/bin`` first; for ``--prefix``/``--python``
    on an inactive one it is put in front, as activation would.
    """
    return activated_path(target.prefix, environ)


def _libraries(world: World, sys_path: Sequence[str]) -> LibrariesInfo:
    """``[libraries]`` for torch, through the loader model (never raises); the answer is kept by
    :func:`envlock.cache.memo` (namespace ``snapshot-libs``, key
    :func:`envlock.libs.cachekey.answer_key`) while every input the report records is unchanged,
    and looked up once: a miss computes it directly.  Parsed ELF facts are kept in memory for
    the one command, never on disk (reading a file again is as fast as reading its JSON)."""
    from envlock.libs import cachekey as libcache
    from envlock.manifest.librariestable import LibrariesInfo

    exe, prefix, environ, root = str(world.python), world.prefix, dict(world.environ), str(world.root)
    use_cache = _cache.is_enabled(environ)

    def compute(rec: _cache.Recorder) -> LibrariesInfo:
        from envlock.libs.analysis import probe_libraries  # the loader model only on a miss
        from envlock.libs.elf import ElfCache

        info = probe_libraries(python_exe=exe, sys_path=sys_path, prefix=prefix,
                               env=environ, root=root, module="torch",
                               elf_cache=ElfCache() if use_cache else None, recorder=rec)
        if info.status not in ("ok", "absent"):
            rec.uncacheable(f"[libraries] {info.status}")
        return info  # type: ignore[no-any-return]

    key = libcache.answer_key(module="torch", exe=exe, sys_path=sys_path,
                              prefix=prefix, root=root, environ=environ, purpose="snapshot-libraries")
    return _cache.memo("snapshot-libs", key, compute, enabled=use_cache, environ=environ,
                       encode=_model.to_dict, decode=lambda d: _model.from_dict(LibrariesInfo, d))


def _stack(
    world: World,
    do_import: bool,
    budget: float,
    dists: Callable[[], Sequence[PipPackage]],
    conda: Sequence[CondaMetaRecord],
) -> dict[str, Any]:
    from envlock.probes.stack import probe_stack

    return probe_stack(world, budget=budget, dists=dists, conda=conda, do_import=do_import)


def _version() -> str:
    from envlock._version import __version__

    return __version__
