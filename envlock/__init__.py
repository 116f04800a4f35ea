"""envlock: snapshot, diff, lock and verify research computing environments.

The public API is small and cheap to import (nothing heavy is loaded until used):

* :func:`snapshot` — observe a target environment, return a :class:`~envlock.manifest.Manifest`;
* :func:`load` — read a manifest file;
* :class:`Manifest` — the model; ``Manifest.write(path)`` writes it atomically;
* :func:`write_lockfiles`, :func:`restore` (and :func:`lock_environment`, :func:`lock_spec`,
  :func:`lock_requirements`, :func:`lock_from_manifest`, :func:`plan_restore`) — what
  ``envlock lock`` and ``envlock restore`` do (:mod:`envlock.lock`);
* :func:`record` — inside a running program: the snapshot plus a ``[process]`` table of what only
  the live process knows (determinism flags, seeds, thread pools, mapped libraries).
"""

from __future__ import annotations

from envlock._version import __version__

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: ``envlock --help`` need not import typing

#: what ``envlock lock``/``restore`` do, exported lazily from :mod:`envlock.lock`.
_LOCK_API = ("write_lockfiles", "restore", "lock_environment", "lock_spec", "lock_requirements",
             "lock_from_manifest", "plan_restore")

__all__ = ["__version__", "snapshot", "load", "Manifest", "record", *_LOCK_API]

if TYPE_CHECKING:
    from typing import Any

    from envlock.manifest import Manifest
    from envlock.probes.assemble import snapshot


def load(path: str) -> Manifest:
    """Read a manifest file (TOML or JSON); see :func:`envlock.manifest.load`.

    :raises ManifestError: the file is missing, not valid TOML/JSON, or not a manifest.
    :raises ManifestVersionError: its schema major is newer than this envlock reads.
    """
    from envlock.manifest import load as _load

    return _load(path)


def __getattr__(name: str) -> Any:
    if name == "snapshot":
        from envlock.probes.assemble import snapshot

        return snapshot
    if name == "record":
        from envlock.runs import record

        return record
    if name in _LOCK_API:
        import envlock.lock as _lock

        return getattr(_lock, name)
    if name == "Manifest":
        from envlock.manifest import Manifest

        return Manifest
    raise AttributeError(f"module 'envlock' has no attribute {name!r}")
