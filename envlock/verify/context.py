"""What every check receives: live facts, expected facts, the job's environment, the policy."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envlock.probes.slurm import slurm_gpu_count, slurm_gpu_ids
from envlock.verify.expected import Expected
from envlock.verify.live import Live
from envlock.verify.settings import Config

__all__ = ["Context", "slurm_gpu_ids", "slurm_gpu_count"]


@dataclass(frozen=True, kw_only=True)
class Context:
    """The input of every ``check_x(ctx)``.

    :ivar live: the live facts (lazy, shared, thread-safe).
    :ivar expected: manifest and lockfiles.
    :ivar environ: the job's environment variables.
    :ivar config: thresholds and policy.
    :ivar output_dir: ``--output-dir``, or ``None``.
    :ivar cwd: the working directory of the job.
    :ivar statvfs: :func:`os.statvfs` (tests inject values).
    """

    live: Live
    expected: Expected = field(default_factory=Expected)
    environ: Mapping[str, str] = field(default_factory=dict)
    config: Config = field(default_factory=Config)
    output_dir: str | None = None
    cwd: str = field(default_factory=os.getcwd)
    statvfs: Callable[[str], Any] = os.statvfs

    def gpus_allocated(self) -> int | None:
        """GPUs Slurm allocated on this node (``None`` outside a GPU allocation)."""
        n = slurm_gpu_count(self.environ)
        return n if n else None
