"""PEP 508 markers of a lock's entries, evaluated for one target.

A universal lock (``uv.lock``, ``pylock.toml``, ``pdm.lock``) holds the packages of every
platform, Python version, dependency group and extra; an installed environment is one of them.
:func:`applicable` says which entries apply to a target given its marker environment
(:func:`target_marker_env`), and which of those only a group or an extra needs.  ``verify
--lock`` and ``diff`` (a lock against a manifest) both use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["LockEntry", "marker_holds", "target_marker_env", "applicable"]


class LockEntry(Protocol):
    """What :func:`applicable` reads of a lock entry (:class:`envlock.formats.locks.Locked`,
    :class:`envlock.verify.expected.LockedPackage`)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def marker(self) -> str | None: ...
    @property
    def groups(self) -> tuple[tuple[str, str | None], ...]: ...


def marker_holds(marker: str, env: Mapping[str, str]) -> bool:
    """Whether PEP 508 ``marker`` holds in marker environment ``env`` (:mod:`packaging.markers`;
    ``extra`` is ``""`` unless ``env`` sets it).  A variable ``env`` lacks makes it not hold.

    :raises ValueError: ``marker`` is not a valid marker.
    """
    from packaging.markers import InvalidMarker, Marker  # noqa: PLC0415

    try:
        m = Marker(marker)
    except InvalidMarker as exc:
        raise ValueError(str(exc)) from None
    try:
        return bool(m.evaluate({"extra": "", **env}))
    except Exception:  # noqa: BLE001 - a marker variable this target lacks
        return False


def target_marker_env(version: str | None, implementation: str | None, *,
                      machine: str | None = None) -> dict[str, str]:
    """The PEP 508 marker environment of a target interpreter: this machine's values
    (``sys_platform``, ``os_name``, …; envlock reads Linux targets) with the target's own
    ``python_version``, ``python_full_version``, implementation and, when given, machine.

    :param version: the target's ``platform.python_version()`` (``"3.12.3"``), or ``None``
        (then envlock's own is used).
    :param implementation: ``sys.implementation.name`` (``"cpython"``), or ``None``.
    :param machine: ``platform.machine()`` of the target's host (``"aarch64"``), or ``None``.
    """
    from packaging.markers import default_environment  # noqa: PLC0415

    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    if version:
        parts = version.split(".")
        env["python_full_version"] = version
        env["python_version"] = ".".join(parts[:2])
        if (implementation or "cpython") == "cpython":
            env["implementation_version"] = version  # CPython's is its own version (PEP 508)
    if implementation:
        env["implementation_name"] = implementation
        env["platform_python_implementation"] = {"cpython": "CPython", "pypy": "PyPy"}.get(
            implementation, implementation)
    if machine:
        env["platform_machine"] = machine
    return env


def applicable(packages: Iterable[LockEntry], env: Mapping[str, str]
               ) -> tuple[dict[str, str | None], dict[str, tuple[str, ...]]]:
    """Which of a lock's pip entries apply to a target with PEP 508 marker environment ``env``.

    An entry applies when its own marker holds and, where the lock says which installs need
    it (:attr:`envlock.formats.locks.Locked.groups`), one of those groups reaches it under a marker that
    holds (uv's dependency edges: ``colorama`` only where ``sys_platform == 'win32'``).

    :returns: ``({name: version}`` of every applicable entry (of two forks that both apply,
        the lock's first), ``{name: groups})`` for those only a dependency group or an extra
        needs (not installing a group is a choice — ``uv sync --no-dev``, ``poetry install
        --only main``, ``pdm install --prod`` — not a broken environment).
    """
    def holds(marker: str | None) -> bool:
        if not marker:
            return True
        try:
            return marker_holds(marker, env)
        except ValueError:
            return True  # read_lock refuses a bad package marker; a bad edge's: count it needed

    needed: dict[str, str | None] = {}
    optional: dict[str, tuple[str, ...]] = {}
    default: set[str] = set()
    for p in packages:
        if not holds(p.marker):
            continue
        if p.groups:
            active = sorted({g for g, m in p.groups if holds(m)})
            if not active:
                continue  # every edge that reaches it is for another platform or Python
            if "" in active:
                default.add(p.name)
            else:
                optional[p.name] = tuple(sorted(set(optional.get(p.name, ())) | set(active)))
        else:
            default.add(p.name)
        needed.setdefault(p.name, p.version)
    return needed, {n: g for n, g in optional.items() if n not in default}
