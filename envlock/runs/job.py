"""The steps of ``envlock run`` around the supervisor: the run directory, the snapshot before
the command, and the record of a run that did not start (verify stopped it).

The files of one run directory: ``manifest.toml`` (the snapshot, ``docs/snapshot.md``) and
``run.toml`` (the run record, ``docs/run.md``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from envlock._placeholders import expand_path
from envlock.errors import EnvlockError, OutputExistsError
from envlock.manifest.processtables import RunInfo
import errno
import re
from envlock.manifest import _model
from dataclasses import replace

__all__ = ["RECORD", "MANIFEST", "LOCK", "RunDirBusyError", "VERIFY_POLICIES", "rank_of", "expand_dir", "prepare_dir",
           "take_snapshot", "record_not_started"]

#: file names inside the run directory; :data:`LOCK` is held (``flock``) while a run owns it.
RECORD = "run.toml"
MANIFEST = "manifest.toml"
LOCK = ".envlock-run.lock"
#: the lock descriptors this process holds (released when it exits)
_HELD: list[int] = []


class RunDirBusyError(EnvlockError):
    """Another ``envlock run`` owns the run directory (holds its :data:`LOCK`)."""
#: ``--verify`` values: ``none`` (no verify), ``report`` (print its findings, run anyway),
#: ``error`` (do not run when verify finds an error: exit 1), ``strict`` (warnings too).
VERIFY_POLICIES = ("none", "report", "error", "strict")


def rank_of(environ: Mapping[str, str]) -> int | None:
    """The rank of this process in a parallel job: ``RANK`` (torchrun), ``SLURM_PROCID``,
    ``PMI_RANK``, ``OMPI_COMM_WORLD_RANK``; ``None`` when none is set."""
    for var in ("RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK"):
        value = environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return None


def expand_dir(template: str, environ: Mapping[str, str] | None = None) -> str:
    """Fill ``{host}``, ``{node}``, ``{job}``, ``{time}``, ``{rank}`` and ``{pid}`` in a path template
    (:func:`envlock._placeholders.expand_path`; ``{rank}`` is :func:`rank_of`, ``0`` when unset).

    :raises EnvlockError: an unknown placeholder.
    """
    env = os.environ if environ is None else environ
    return expand_path(template, env, {"rank": rank_of(env) or 0, "pid": os.getpid()})


def prepare_dir(path: str, *, force: bool) -> str:
    """Create the run directory and take it: one ``envlock run`` owns a run directory.

    1. the directory is created (``ENOSPC`` names inodes when none is left, as ``snapshot``
       does: :func:`envlock._io.no_space`);
    2. its lock :data:`LOCK` is taken (:func:`envlock._io.hold_lock`, held until envlock
       exits): a concurrent ``envlock run --dir`` of the same directory fails here, naming the
       owner, before it runs anything;
    3. ``run.toml`` and ``manifest.toml`` are checked as :func:`envlock._io.write_file` will
       write them: a symbolic link at either is refused (even with ``force``), and without
       ``force`` an existing one is (``run.toml``: an earlier run).

    :raises OutputExistsError: ``run.toml`` or ``manifest.toml`` exists there and ``force`` is
        false; either is a symbolic link or not a regular file.
    :raises RunDirBusyError: another ``envlock run`` holds the directory.
    :raises InputError: ``path`` is empty, or exists and is not a directory.
    :raises OSError: it cannot be created (the error names ``path``).
    """
    from envlock._io import BusyError, InputError, check_writable, hold_lock, no_space

    if not path:
        raise InputError("--dir: an empty directory name")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise InputError(f"--dir {path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            parent = os.path.dirname(os.path.abspath(path))
            while parent != "/" and not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            raise no_space(exc, path, parent) from None
        raise OSError(exc.errno, exc.strerror, path) from None
    from envlock.probes.assemble import utc_now

    owner = f"envlock run pid {os.getpid()} on {socket.gethostname()} since {utc_now()}"
    try:
        _HELD.append(hold_lock(os.path.join(path, LOCK), owner))
    except BusyError as exc:
        raise RunDirBusyError(f"--dir {path}: in use by another {exc.owner or 'envlock run'}; "
                              "wait for it to end or use another --dir") from None
    for name in (RECORD, MANIFEST):
        full = os.path.join(path, name)
        check_writable(full, force=True)  # a link, a FIFO: refused even with --force
        if not force and os.path.lexists(full):
            why = " (an earlier run)" if name == RECORD else ""
            raise OutputExistsError(f"{full} exists{why}; use --force to replace it")
    return path


def command_interpreter(command: Sequence[str], environ: Mapping[str, str] | None = None
                        ) -> str | None:
    """The Python interpreter CMD runs, when its program is one (``python``, ``python3.11``,
    ``/env/bin/python``, found on ``PATH`` as the shell would): the run's environment is that
    interpreter's, whatever venv is active in envlock's own shell.

    :returns: its absolute path (symlinks kept: a venv's ``bin/python`` names the venv), or
        ``None`` when CMD is not a Python interpreter by name.
    """
    import shutil

    if not command:
        return None
    prog = command[0]
    if not re.fullmatch(r"python(\d+(\.\d+)?)?", os.path.basename(prog)):
        return None
    env = os.environ if environ is None else environ
    found = prog if "/" in prog else shutil.which(prog, path=env.get("PATH"))
    return os.path.abspath(found) if found and os.path.isfile(found) else None


def take_snapshot(run_dir: str, *, python: str | None = None, prefix: str | None = None,
                  command: Sequence[str] = (), chosen_by: str | None = None,
                  force: bool = False,
                  ) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """Snapshot the target environment into ``run_dir/manifest.toml``.

    :param force: replace an existing ``manifest.toml`` (without it the write is
        create-or-fail); a symbolic link there is refused either way.
    :raises OutputExistsError: ``manifest.toml`` exists (without ``force``) or is a link.
    :raises OSError: it cannot be written.
    :param chosen_by: what chose ``python`` when the user did not (``"CMD"``: the interpreter
        the command runs, :func:`command_interpreter`); recorded as ``[target] chosen-by``.
    :returns: (the path written or ``None``, the ``[target]`` table, warning lines). A
        snapshot that cannot be taken (no target found) is a warning: the job still runs.
    """
    from envlock.probes.assemble import snapshot
    from envlock.probes.target import resolve_target

    try:
        target = None
        if chosen_by is not None:
            target = replace(resolve_target(python=python, prefix=prefix), chosen_by=chosen_by)
        m = snapshot(python=python, prefix=prefix, command=list(command), target=target)
    except EnvlockError as exc:
        return None, None, [f"snapshot: {exc}"]
    path = os.path.join(run_dir, MANIFEST)
    from envlock._io import write_file

    write_file(path, m.dumps("toml"), force=force)  # never through a link planted there

    return path, _model.to_dict(m.target), [f"snapshot: {w}" for w in m.envlock.warnings]


def record_not_started(run_dir: str, command: Sequence[str], *, reason: str, exit_code: int,
                       verify: str | None, verify_exit: int | None,
                       target: Mapping[str, Any] | None, envlock_command: Sequence[str],
                       manifest_path: str | None = None) -> str:
    """Write the record of a run whose command was not started."""
    from envlock.probes.assemble import utc_now
    from envlock.runs.supervise import _sha256, write_record
    from envlock.redact import redact_argv

    now = utc_now()
    info = RunInfo(outcome="not-started", command=redact_argv(command),
                   cwd=os.getcwd(), start=now, end=now, exit_code=exit_code, error=reason,
                   verify=verify, verify_exit=verify_exit)
    if manifest_path:
        info = replace(info, manifest=os.path.basename(manifest_path),
                       manifest_sha256=_sha256(manifest_path))
    return write_record(os.path.join(run_dir, RECORD), info, target=target,
                        command=envlock_command)
