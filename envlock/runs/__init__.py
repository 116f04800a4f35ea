"""Record the *run*, not only the environment.

* ``envlock run -- CMD`` (:mod:`envlock.runs.supervise`, :mod:`envlock.runs.job`): the
  command as a supervised child; resources used against what the scheduler granted
  (:mod:`envlock.runs.granted`), signals, leftover processes (:mod:`envlock.runs.proctree`)
  and findings in plain words (:mod:`envlock.runs.outcome`), written to ``run.toml``;
* :func:`record` inside the program (:mod:`envlock.runs.processprobe`): the snapshot plus a
  ``[process]`` table of what only the live process knows.

The public face is the plain function ``envlock.record`` (this package is ``envlock.runs``,
so that no submodule import can replace the function by a module of the same name).

Layer: above the probes (it takes snapshots), beside verify; nothing here imports a framework.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
import os

if TYPE_CHECKING:
    from envlock.manifest import Manifest

__all__ = ["record", "DEFAULT_PATH"]

#: where :func:`record` writes when no path is given (placeholders as for ``envlock run --dir``).
DEFAULT_PATH = "envlock-record-{rank}.toml"


def record(path: str | None = None, *, extra: Mapping[str, Any] | None = None,
           snapshot: bool = True) -> Manifest:
    """Record this running program: a snapshot of its interpreter's environment plus
    ``[process]`` (determinism and TF32 flags, seed fingerprints, thread pools, mapped
    libraries; see :mod:`envlock.runs.processprobe`), written to ``path``.

    Call it after the model is set up; it does not perturb the program (no framework import,
    no CUDA initialisation, no random draw, no thread-pool change).  Safe on every rank of a
    DDP job: ``{rank}`` in ``path`` is ``RANK`` or ``SLURM_PROCID`` (``0`` when unset).

    :param path: the manifest file (``.json`` for JSON); placeholders ``{rank}``, ``{host}``,
        ``{job}``, ``{time}``, ``{pid}``; default :data:`DEFAULT_PATH`. Replaced if it exists;
        a symbolic link there is refused (never written through, :func:`envlock._io.write_file`).
    :param extra: the program's own values for ``[process.extra]`` (str, int, float, bool, or
        lists of them), e.g. ``{"seed": 0, "config": "base.yaml"}``.
    :param snapshot: include the environment snapshot (``False``: ``[process]`` only, ~ms).
    :raises EnvlockError: a bad placeholder in ``path``; ``OutputExistsError`` when ``path`` is
        a symbolic link.
    :raises OSError: the file cannot be written.
    :returns: the :class:`~envlock.manifest.Manifest` written (``[process]`` among its
        ``extra`` tables; :func:`envlock.manifest.processtables.process_from_dict` types it).
    """
    from dataclasses import replace

    from envlock.manifest import _model
    from envlock.runs.job import expand_dir
    from envlock.runs.processprobe import observe

    target = expand_dir(path or DEFAULT_PATH)
    proc = observe(extra=extra)
    if snapshot:
        from envlock.probes.assemble import snapshot as take

        m = take(python=sys.executable, command=list(sys.argv))
    else:
        from envlock.manifest import EnvlockInfo, Manifest, Target
        from envlock.probes.assemble import _version, utc_now
        import socket

        m = Manifest(envlock=EnvlockInfo(version=_version(), created=utc_now(),
                                         host=socket.gethostname(), command=tuple(sys.argv)),
                     target=Target(kind="system", prefix=sys.prefix, python=sys.executable,
                                   chosen_by="--python"))
    m = replace(m, extra=_model.freeze_mapping({**m.extra, "process": _model.to_dict(proc)}))
    parent = os.path.dirname(target)
    if parent:
        os.makedirs(parent, exist_ok=True)
    m.write(target, force=True)
    return m

