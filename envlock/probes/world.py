"""The world a probe observes: one frozen value, built once per snapshot.

Every probe of ``envlock/probes/`` is a plain function of a :class:`World` (the file-system
root, the job's environment, the target environment, the command runner and the per-command
timeout) plus only its own options; results of other probes (the ``[pip]`` distributions, the
``conda-meta`` records) are passed to it explicitly, never folded into the world.  The
snapshot orchestrator (:func:`envlock.probes.assemble.snapshot`) builds the world once, from
the resolved target and what its interpreter reported, and hands the same value to every
probe.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from envlock._run import DEFAULT_TIMEOUT, Runner, run

if TYPE_CHECKING:  # only its attributes are read: importing a world stays cheap
    from envlock.probes.target import ResolvedTarget

__all__ = ["World", "activated_path"]


def activated_path(prefix: str | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The ``PATH`` directories a job in the target searches: ``environ``'s ``PATH`` (empty
    entries dropped), with ``<prefix>/bin`` moved to the front as activation puts it (conda's
    ``activate`` and venv's ``bin/activate`` both prepend it).  Without a prefix: ``PATH`` as is.

    :param prefix: the target's prefix, or ``None``.
    :param environ: the job's environment (only ``PATH`` is read).
    :returns: the directories in search order.
    """
    dirs = [d for d in environ.get("PATH", "").split(os.pathsep) if d]
    if prefix:
        own = os.path.join(prefix, "bin")
        dirs = [own, *[d for d in dirs if d != own]]
    return tuple(dirs)


@dataclass(frozen=True, kw_only=True, slots=True, init=False)
class World:
    """What a probe observes, frozen: assigning a field raises
    :class:`dataclasses.FrozenInstanceError` and :attr:`environ` is a read-only mapping
    (:class:`types.MappingProxyType` of a private copy), so no probe can change what the next
    one sees.

    :ivar root: file-system root for system paths (``/proc``, ``/etc``, ``/usr/local/cuda``):
        ``Path("/")`` live, a directory in tests.
    :ivar environ: the job's environment, read-only (a copy of ``os.environ`` when not given).
    :ivar prefix: the target's prefix (``sys.prefix``: ``conda-meta/``, ``lib/``, ``bin/``), or
        ``None`` when there is no target environment.
    :ivar python: the target interpreter's path, or ``None`` (no interpreter in the prefix).
    :ivar site_dirs: the target's ``sys.path`` entries that are directories, in ``sys.path``
        order (where its distributions are installed).
    :ivar path_dirs: the target's ``PATH`` directories in search order; by default
        :func:`activated_path` of ``prefix`` and ``environ`` (``<prefix>/bin`` first).
    :ivar runner: runs every external command (:func:`envlock._run.run`: a deadline, the
        process group killed on timeout).
    :ivar timeout: seconds each external command may run (float, > 0).
    """

    root: Path
    environ: Mapping[str, str] = field(repr=False)  # values may be secret: never in a repr
    prefix: str | None
    python: str | None
    site_dirs: tuple[str, ...]
    path_dirs: tuple[str, ...]
    runner: Runner
    timeout: float

    def __init__(
        self,
        *,
        root: str | os.PathLike[str] = "/",
        environ: Mapping[str, str] | None = None,
        prefix: str | None = None,
        python: str | None = None,
        site_dirs: Iterable[str | os.PathLike[str]] = (),
        path_dirs: Iterable[str] | None = None,
        runner: Runner = run,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Build a world; every argument is copied into an immutable form.

        :param root: file-system root (``"/"`` live).
        :param environ: the job's environment (``os.environ`` when ``None``), copied.
        :param prefix: the target prefix.
        :param python: the target interpreter.
        :param site_dirs: the target's site directories, in order.
        :param path_dirs: the ``PATH`` to search; ``None`` gives :func:`activated_path`.
        :param runner: the command runner.
        :param timeout: seconds per external command.
        :raises ValueError: ``timeout`` is not a positive number of seconds.
        """
        if not timeout > 0:
            raise ValueError(f"World: timeout must be > 0 seconds, not {timeout!r}")
        env = MappingProxyType(dict(os.environ if environ is None else environ))
        init = object.__setattr__  # the frozen dataclass's own way of setting its fields
        init(self, "root", Path(root))
        init(self, "environ", env)
        init(self, "prefix", prefix)
        init(self, "python", python)
        init(self, "site_dirs", tuple(os.fspath(d) for d in site_dirs))
        init(self, "path_dirs", tuple(path_dirs) if path_dirs is not None else activated_path(prefix, env))
        init(self, "runner", runner)
        init(self, "timeout", float(timeout))

    @classmethod
    def of(
        cls,
        target: ResolvedTarget,
        *,
        environ: Mapping[str, str],
        sys_path: Sequence[str] = (),
        root: str | os.PathLike[str] = "/",
        runner: Runner = run,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> World:
        """The world of a resolved target (:func:`~envlock.probes.target.resolve_target`, refined
        by :func:`~envlock.probes.target.refine_target` with the interpreter's answer).

        :param target: the target; its ``prefix`` and ``python`` are taken as they are.
        :param environ: the job's environment.
        :param sys_path: the target interpreter's ``sys.path``
            (:attr:`envlock.manifest.PythonInfo.path`); its entries that are directories become
            :attr:`site_dirs`, in order.
        :param root: file-system root.
        :param runner: the command runner.
        :param timeout: seconds per external command.
        :returns: the :class:`World`; ``path_dirs`` is :func:`activated_path` of the target.
        """
        return cls(root=root, environ=environ, prefix=target.prefix, python=target.python,
                   site_dirs=tuple(d for d in sys_path if os.path.isdir(d)),
                   runner=runner, timeout=timeout)
