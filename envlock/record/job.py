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

from envlock.errors import EnvlockError, OutputExistsError
from envlock.manifest.process import RunInfo

__all__ = ["RECORD", "MANIFEST", "VERIFY_POLICIES", "rank_of", "expand_dir", "prepare_dir",
           "take_snapshot", "record_not_started"]

#: file names inside the run directory.
RECORD = "run.toml"
MANIFEST = "manifest.toml"
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
    """Fill ``{host}``, ``{job}``, ``{time}``, ``{rank}`` and ``{pid}`` in a path template
    (``{job}``/``{host}``/``{time}`` as for ``envlock snapshot -o``; ``{rank}`` is
    :func:`rank_of`, ``0`` when unset).

    :raises EnvlockError: an unknown placeholder.
    """
    import datetime as _dt  # noqa: PLC0415

    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("PBS_JOBID") or env.get("LSB_JOBID") or "nojob"
    if env.get("SLURM_ARRAY_TASK_ID"):
        job = f"{env.get('SLURM_ARRAY_JOB_ID', job)}_{env['SLURM_ARRAY_TASK_ID']}"
    values = {
        "host": socket.gethostname().split(".")[0], "job": job,
        "time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
        "rank": rank_of(env) or 0, "pid": os.getpid(),
    }
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise EnvlockError(f"unknown placeholder {exc} in {template!r} "
                           "(use {host}, {job}, {time}, {rank}, {pid})") from None


def prepare_dir(path: str, *, force: bool) -> str:
    """Create the run directory; refuse one that already holds a run record.

    :raises OutputExistsError: ``run.toml`` exists there and ``force`` is false.
    :raises InputError: ``path`` is empty, or exists and is not a directory.
    :raises OSError: it cannot be created (the error names ``path``).
    """
    from envlock._io import InputError  # noqa: PLC0415

    if not path:
        raise InputError("--dir: an empty directory name")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise InputError(f"--dir {path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    rec = os.path.join(path, RECORD)
    if os.path.exists(rec) and not force:
        raise OutputExistsError(f"{rec} exists (an earlier run); use --force to replace it")
    return path


def command_interpreter(command: Sequence[str], environ: Mapping[str, str] | None = None
                        ) -> str | None:
    """The Python interpreter CMD runs, when its program is one (``python``, ``python3.11``,
    ``/env/bin/python``, found on ``PATH`` as the shell would): the run's environment is that
    interpreter's, whatever venv is active in envlock's own shell.

    :returns: its absolute path (symlinks kept: a venv's ``bin/python`` names the venv), or
        ``None`` when CMD is not a Python interpreter by name.
    """
    import re  # noqa: PLC0415
    import shutil  # noqa: PLC0415

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
                  ) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """Snapshot the target environment into ``run_dir/manifest.toml``.

    :param chosen_by: what chose ``python`` when the user did not (``"CMD"``: the interpreter
        the command runs, :func:`command_interpreter`); recorded as ``[target] chosen-by``.
    :returns: (the path written or ``None``, the ``[target]`` table, warning lines). A
        snapshot that cannot be taken (no target found) is a warning: the job still runs.
    """
    from envlock.probes.snapshot import snapshot  # noqa: PLC0415
    from envlock.probes.target import resolve_target  # noqa: PLC0415

    try:
        target = None
        if chosen_by is not None:
            from dataclasses import replace  # noqa: PLC0415

            target = replace(resolve_target(python=python, prefix=prefix), chosen_by=chosen_by)
        m = snapshot(python=python, prefix=prefix, command=list(command), target=target)
    except EnvlockError as exc:
        return None, None, [f"snapshot: {exc}"]
    path = os.path.join(run_dir, MANIFEST)
    m.write(path, force=True)
    from envlock.manifest import _model  # noqa: PLC0415

    return path, _model.to_dict(m.target), [f"snapshot: {w}" for w in m.envlock.warnings]


def record_not_started(run_dir: str, command: Sequence[str], *, reason: str, exit_code: int,
                       verify: str | None, verify_exit: int | None,
                       target: Mapping[str, Any] | None, envlock_command: Sequence[str],
                       manifest_path: str | None = None) -> str:
    """Write the record of a run whose command was not started."""
    from dataclasses import replace  # noqa: PLC0415

    from envlock.probes.snapshot import utc_now  # noqa: PLC0415
    from envlock.record.supervise import _sha256, write_record  # noqa: PLC0415
    from envlock.redact import redact_argv  # noqa: PLC0415

    now = utc_now()
    info = RunInfo(outcome="not-started", command=redact_argv(command),
                   cwd=os.getcwd(), start=now, end=now, exit_code=exit_code, error=reason,
                   verify=verify, verify_exit=verify_exit)
    if manifest_path:
        info = replace(info, manifest=os.path.basename(manifest_path),
                       manifest_sha256=_sha256(manifest_path))
    return write_record(os.path.join(run_dir, RECORD), info, target=target,
                        command=envlock_command)
