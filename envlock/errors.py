"""Exceptions raised by envlock's library.

Every error that a user can cause (a bad file, a bad argument) is an :class:`EnvlockError`;
the CLI turns it into one line on stderr and exit status 2.  Problems of the *observed*
environment (a missing tool, an unreadable METADATA) are not exceptions: probes record them
as data (``status``/``error`` fields) and the snapshot carries on.
"""

from __future__ import annotations

__all__ = [
    "EnvlockError",
    "ManifestError",
    "ManifestVersionError",
    "TargetError",
    "OutputExistsError",
    "ConfigError",
    "MissingDependencyError",
    "LockError",
    "SolveError",
]


class EnvlockError(Exception):
    """Base class of envlock's errors; ``str(exc)`` is a complete one-line message."""


class ManifestError(EnvlockError, ValueError):
    """A manifest (or another input file) is malformed: bad TOML, wrong types, missing keys."""


class ManifestVersionError(ManifestError):
    """A manifest's ``[envlock] schema`` major version is newer than this envlock reads."""


class TargetError(EnvlockError):
    """The target environment (``--python`` / ``--prefix``) does not exist or is not usable."""


class ArgumentsError(EnvlockError):
    """Arguments that cannot work together (``snapshot(save_patch=True)`` without an output
    file, or outside a git checkout); the command line shows it as a usage error."""


class OutputExistsError(EnvlockError):
    """The output file exists and ``--force`` was not given."""


class ConfigError(EnvlockError):
    """A configuration file (``envlock.toml``, ``[tool.envlock]`` in ``pyproject.toml``) is
    malformed or has a setting of the wrong type."""


class MissingDependencyError(EnvlockError):
    """An optional dependency that this command needs is not installed (e.g. ``envlock[lock]``)."""


class LockError(EnvlockError):
    """A lockfile could not be produced or used: a tool failed, a channel or index is unreachable."""


class SolveError(LockError):
    """The requested packages cannot be installed together; the message holds the solver's reason."""


class LockContradictionError(LockError):
    """A lockfile recorded in a manifest pins other packages than the manifest records:
    restoring it would build another environment.  Exit status 1 (a finding, not a misuse)."""

    exit_code = 1
