"""Policy: which findings count, at which severity, and the thresholds of the checks.

Read from ``envlock.toml`` (table ``[verify]``) or ``pyproject.toml`` (table
``[tool.envlock.verify]``) in the manifest's directory (the working directory without a
manifest); ``envlock.toml`` wins when both exist.  Keys::

    [tool.envlock.verify]
    ignore = ["isolation.user-site"]                  # drop these findings
    severity = { "packages.extra" = "info",           # raise/lower by id;
                 "allocation.*" = "error" }           # shell-style patterns allowed
    min-free-space = "5GiB"                           # --output-dir thresholds
    min-free-inodes = 100000
    modules = ["mylab._fastpath"]                     # extension modules for the library check
    skip = ["libraries"]                              # checks not to run at all

An exact id wins over a pattern, a longer pattern over a shorter one.  ``--strict`` then turns
every remaining warning into an error.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from envlock.findings import Finding, Severity
from envlock.verify.settings import DEFAULT_MIN_FREE, DEFAULT_MIN_INODES, Config

__all__ = ["load_config", "parse_size", "apply_policy", "level_for"]

_LEVELS = ("error", "warning", "info", "ignore")
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


def parse_size(value: Any, where: str = "min-free-space") -> int:
    """``"5GiB"`` → 5368709120, ``"500M"`` → 500000000, ``1024`` → 1024 (bytes).

    :raises ConfigError: not a size.
    """
    from envlock.errors import ConfigError

    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{where}: must not be negative")
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ConfigError(f"{where}: not a size: {value!r} (use bytes or e.g. \"5GiB\", \"500MB\")")


def _from_table(table: Mapping[str, Any], source: str) -> Config:
    from envlock.errors import ConfigError

    known = {"ignore", "severity", "min-free-space", "min-free-inodes", "modules", "skip"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown verify setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
    sev: dict[str, str] = {}
    ignore = table.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(i, str) for i in ignore):
        raise ConfigError(f"{source}: 'ignore' must be a list of finding ids")
    for i in ignore:
        sev[i] = "ignore"
    levels = table.get("severity", {})
    if not isinstance(levels, Mapping):
        raise ConfigError(f"{source}: 'severity' must be a table of id = level")
    for k, v in levels.items():
        if v not in _LEVELS:
            raise ConfigError(f"{source}: severity of {k!r} must be one of {', '.join(_LEVELS)}, got {v!r}")
        sev[str(k)] = v
    inodes = table.get("min-free-inodes", DEFAULT_MIN_INODES)
    if isinstance(inodes, bool) or not isinstance(inodes, int) or inodes < 0:
        raise ConfigError(f"{source}: 'min-free-inodes' must be a non-negative integer")
    modules = table.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ConfigError(f"{source}: 'modules' must be a list of module names")
    skip = table.get("skip", [])
    from envlock.verify.checks import CHECKS

    from envlock.verify.checks.build import BUILD_CHECKS

    names = [name for name, _ in CHECKS]
    names += [name for name, _ in BUILD_CHECKS if name not in names]  # verify --build
    if not isinstance(skip, list) or not all(isinstance(c, str) for c in skip):
        raise ConfigError(f"{source}: 'skip' must be a list of check names")
    for c in skip:
        if c not in names:
            raise ConfigError(f"{source}: unknown check {c!r} in 'skip' (checks: {', '.join(names)})")
    return Config(
        severity=sev,
        skip=tuple(skip),
        min_free_bytes=parse_size(table.get("min-free-space", DEFAULT_MIN_FREE), f"{source}: min-free-space"),
        min_free_inodes=inodes,
        modules=tuple(modules),
        source=source,
    )


def load_config(directory: str | Path) -> Config:
    """Read the policy next to the manifest.

    :param directory: where to look for ``envlock.toml`` and ``pyproject.toml``.
    :raises ConfigError: a file is malformed or a setting has the wrong type.
    :returns: the :class:`Config` (defaults when neither file has a verify table).
    """
    from envlock.manifest._toml import load_file
    from envlock.errors import ConfigError, ManifestError

    d = Path(directory)
    for name, keys in (("envlock.toml", ("verify",)), ("pyproject.toml", ("tool", "envlock", "verify"))):
        path = d / name
        if not path.is_file():
            continue
        try:
            data: Any = load_file(path)
        except ManifestError as exc:
            raise ConfigError(str(exc)) from None
        for k in keys:
            data = data.get(k) if isinstance(data, Mapping) else None
        if data is None:
            continue
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: [{'.'.join(keys)}] must be a table")
        return _from_table(data, str(path))
    return Config()


def level_for(finding_id: str, severity: Mapping[str, str]) -> str | None:
    """The configured level of ``finding_id``: exact id, else the longest matching pattern."""
    if finding_id in severity:
        return severity[finding_id]
    best = None
    for pattern, level in severity.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(finding_id, pattern):
            if best is None or len(pattern) > len(best[0]):
                best = (pattern, level)
    return best[1] if best else None


def apply_policy(findings: Iterable[Finding], config: Config, *, strict: bool = False) -> list[Finding]:
    """Apply configured levels (dropping ``"ignore"``d findings), then ``--strict``."""
    out = []
    for f in findings:
        level = level_for(f.id, config.severity)
        if level == "ignore":
            continue
        if level is not None and level != f.severity:
            f = f.with_severity(cast("Severity", level))  # one of _LEVELS, checked when read
        if strict and f.severity == "warning":
            f = f.with_severity("error")
        out.append(f)
    return out
