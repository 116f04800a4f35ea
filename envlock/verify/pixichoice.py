"""Which environment and platform of a ``pixi.lock`` ``verify --lock`` compares with.

pixi's own words: ``pixi install -e NAME`` installs environment ``NAME`` (default:
``default``); a version 7 lock may hold several platforms of one conda subdir (``p2`` is
``linux-64`` solved with the virtual package ``__cuda=12``), each an entry of its top-level
``platforms`` list (rattler_lock's ``PlatformData``: ``name``, ``subdir``,
``virtual-packages``).  ``--environment NAME`` and ``--platform NAME`` name them; without
``--platform`` the platform named as this machine's subdir is taken, else the first of this
subdir, and when the lock holds several of this subdir (or several environments) the one read
is said (:attr:`PixiChoice.note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.errors import ManifestError

__all__ = ["PixiChoice", "choose_pixi", "DEFAULT_RULE"]

#: how the platform is taken without ``--platform``, in the words said of it
DEFAULT_RULE = "the one named as this subdir, else the first"


@dataclass(frozen=True, slots=True)
class PixiChoice:
    """The environment and platform read.

    :ivar lock: the environment's :class:`envlock.formats.locks.LockFile`.
    :ivar environment: its name; ``platform``: the platform entry's name (``p2``), ``subdir``
        its conda subdir.
    :ivar note: evidence lines saying what was chosen among several (``()``: nothing to choose).
    :ivar others: the platform entries of the same subdir not read, each described
        (``"platform p2 (linux-64; __cuda=12, …)"``).
    """

    lock: Any
    environment: str
    platform: str
    subdir: str
    note: tuple[str, ...] = ()
    others: tuple[str, ...] = ()


def _describe(q: Any) -> str:
    vps = ", ".join(q.virtual_packages) or "no virtual packages"
    return f"platform {q.name} ({q.subdir}; {vps})"


def choose_pixi(path: Path, lock: Any, subdir: str, environment: str | None,
                platform: str | None, *, data: Any = None,
                lock_environment: str = "default") -> PixiChoice:
    """Read environment ``environment`` (``None``: ``default``, as ``pixi install``) of the
    pixi.lock ``path`` and take its platform ``platform`` (``None``: the one named ``subdir``,
    else the first whose subdir is ``subdir``, else ``subdir`` itself).  ``verify --lock``'s
    and ``restore``'s one rule.

    :param lock: the lock as :func:`envlock.formats.read` read it, of environment
        ``lock_environment`` (``default``); ``data``: the file as parsed (``None``: read here).
    :raises ManifestError: no such environment or platform (one line listing the lock's).
    """
    from envlock.formats._load import load_yaml
    from envlock.formats.pixilock import read_pixi_lock
    from envlock.manifest._toml import read_text

    from envlock.formats.pixilegacy import upgraded

    if data is None:
        data = load_yaml(read_text(path), str(path), exact=True)
    data = upgraded(data, str(path))
    envs = [str(e) for e in data.get("environments") or {}]
    name = environment or "default"
    if name not in envs:
        raise ManifestError(f"{path}: no environment {name!r} in this pixi.lock (its "
                            f"environments: {', '.join(envs) or 'none'})")
    if name != lock_environment:
        lock = read_pixi_lock(data, str(path), name)
    plats = {q.name: q for q in lock.pixi_platforms}
    if platform is not None:
        if platform not in plats:
            raise ManifestError(f"{path}: no platform {platform!r} in environment {name!r} of "
                                f"this pixi.lock (its platforms: {', '.join(plats) or 'none'})")
        taken = platform
    else:
        taken = subdir if subdir in plats else next(
            (q.name for q in lock.pixi_platforms if q.subdir == subdir), subdir)
    chosen_subdir = plats[taken].subdir if taken in plats else subdir
    same = [q for q in lock.pixi_platforms if q.subdir == chosen_subdir]
    note: tuple[str, ...] = ()
    others = tuple(_describe(q) for q in same if q.name != taken)
    if len(same) > 1 or len(envs) > 1:
        how = "--platform" if platform is not None else DEFAULT_RULE
        note = (f"environment read: {name} ({'--environment' if environment is not None else 'the default'}"
                f"; the lock's environments: {', '.join(envs)})",
                *(f"{'read: ' if q.name == taken else 'not read: '}{_describe(q)}" for q in same),
                f"platform taken: {taken} ({how})")
    return PixiChoice(lock, name, taken, chosen_subdir, note, others)
