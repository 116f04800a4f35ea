"""Which install of a project lock ``envlock restore`` converts: the extras and dependency
groups of a uv.lock, pdm.lock or poetry.lock as each tool's own installer takes them
(:func:`envlock.formats.lockchoice.choose`, the rule ``verify --lock`` and ``diff`` share), and
the environment of a pixi.lock (``--environment NAME``, as ``pixi install -e NAME``; with none,
``default``) and platform entry (``--platform NAME``: :func:`envlock.lock._pixirestore.convert_pixi`).
An option that applies to no input is one line naming the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from envlock._selection import Requested
from envlock.errors import ManifestError
from envlock.formats.lockchoice import TOOLS

__all__ = ["check_applies", "pixi_environment"]


def check_applies(kinds: Iterable[str | None], requested: Requested | None,
                  environment: str | None, platform: str | None = None) -> None:
    """Refuse selection options that no input takes.

    :param kinds: the inputs' kinds (:func:`envlock.lock._restore._kind_of`; ``None``: a manifest).
    :raises ManifestError: ``--extra``/``--group``/… without a uv.lock, pdm.lock or poetry.lock
        among the inputs, or ``--environment``/``--platform`` without a pixi.lock (one line).
    """
    have = [k or "manifest" for k in kinds]
    if requested is not None and requested.given and not set(have) & set(TOOLS):
        raise ManifestError("--extra, --group, --all-extras, --all-groups and --no-dev choose "
                            "the install of a uv.lock, pdm.lock or poetry.lock; the inputs are "
                            f"{', '.join(dict.fromkeys(have))}; nothing was run")
    for option, value, what in (("--environment", environment, "environment"),
                                ("--platform", platform, "platform entry")):
        if value is not None and "pixi.lock" not in have:
            raise ManifestError(f"{option} chooses the {what} of a pixi.lock; the inputs "
                                f"are {', '.join(dict.fromkeys(have))}; nothing was run")


def pixi_environment(path: Path, data: Mapping[str, Any], environment: str | None) -> str:
    """The pixi.lock environment to convert: ``environment`` (``pixi install -e NAME``), else
    ``default``.

    :raises ManifestError: the lock has no such environment (one line listing those it has).
    """
    name = environment or "default"
    envs = data.get("environments")
    if isinstance(envs, Mapping) and name not in envs:
        raise ManifestError(f"{path}: no environment {name!r} in this lock (its environments: "
                            f"{', '.join(sorted(str(e) for e in envs)) or 'none'}); nothing was "
                            "run")
    return name
