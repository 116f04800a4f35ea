"""The verify policy as a value: :class:`Config` and its defaults.

Its own module so that the checks (through :class:`envlock.verify.context.Context`) and the
policy reader (:mod:`envlock.verify.policy`, which needs the checks' names) import it one way,
without a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Config", "DEFAULT_MIN_FREE", "DEFAULT_MIN_INODES"]

#: Default free space required in ``--output-dir``: 1 GiB.
DEFAULT_MIN_FREE = 1024**3
#: Default free inodes required in ``--output-dir``.
DEFAULT_MIN_INODES = 10_000


@dataclass(frozen=True, kw_only=True)
class Config:
    """The verify policy.

    :ivar severity: id or pattern → ``"error"``/``"warning"``/``"info"``/``"ignore"``.
    :ivar min_free_bytes: free space ``--output-dir`` must have, bytes.
    :ivar min_free_inodes: free inodes it must have.
    :ivar modules: extra extension modules for the library check.
    :ivar skip: names of checks not to run (see :data:`envlock.verify.checks.CHECKS`).
    :ivar source: the file the policy came from (``None``: defaults).
    """

    severity: Mapping[str, str] = field(default_factory=dict)
    min_free_bytes: int = DEFAULT_MIN_FREE
    min_free_inodes: int = DEFAULT_MIN_INODES
    modules: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    source: str | None = None
