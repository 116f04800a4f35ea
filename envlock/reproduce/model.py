"""What ``envlock bisect`` is given and gives back: :class:`Judge` (how a run is judged),
:class:`Step` (one tested subset) and :class:`BisectResult`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envlock.reproduce.changes import Group

__all__ = ["DEFAULT_TIMEOUT", "JSON_SCHEMA", "NEVER_TOGGLED", "Judge", "Step", "BisectResult",
           "Progress"]

#: What no environment bisect builds can change: it comes from the machine.
NEVER_TOGGLED = ("the NVIDIA driver", "GPU", "CPU", "kernel", "system libraries")

#: Seconds one run of CMD may take before it is stopped and the step skipped.
DEFAULT_TIMEOUT = 600.0
#: Version of the JSON document :meth:`BisectResult.to_json` returns.
JSON_SCHEMA = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Judge:
    """How a run is judged.

    Without ``metric``: the exit status, as ``git bisect run`` reads it: 0 good, 125 skip (it
    cannot be tested), anything else bad; a run that times out is skipped.  With ``metric``:
    the first match of the regular expression in CMD's output (its first group; bisect refuses a
    ``metric`` without one: :func:`envlock.reproduce.check_metric`)
    as a float; the result is *good* when it is close to GOOD's value (``|x - good| <= atol +
    rtol * |good|``, as :func:`math.isclose` with both tolerances), else *bad*; no match: skip.
    ``repeat`` runs are made per step and the majority verdict (the median value) counts.
    """

    metric: str | None = None
    rtol: float = 1e-9
    atol: float = 0.0
    repeat: int = 1
    timeout: float = DEFAULT_TIMEOUT

    def value(self, output: str) -> float | None:
        """The metric CMD printed, or ``None``."""
        if self.metric is None:
            return None
        m = re.search(self.metric, output)
        if m is None:
            return None
        text = m.group(1) if m.groups() else m.group(0)
        try:
            return float(text)
        except (TypeError, ValueError):
            return None

    def close(self, a: float, b: float) -> bool:
        """``a`` and ``b`` agree within the tolerances."""
        return math.isclose(a, b, rel_tol=self.rtol, abs_tol=self.atol)


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One tested subset.

    :ivar number: 1, 2, … in the order run; ``phase``: ``"GOOD"``, ``"BAD"`` or ``"bisect"``.
    :ivar applied: labels of the groups applied to GOOD.
    :ivar env: the environment's directory; ``built``: bisect built it for this step.
    :ivar verdict: ``"good"``, ``"bad"`` or ``"skip"``; ``outcome``: ``"pass"`` (as GOOD),
        ``"fail"`` (as BAD) or ``"unresolved"``.
    :ivar codes: exit status of each run (``None``: timed out); ``values``: the metric of each.
    :ivar value: the judged value (median of ``values``); ``seconds``: build and runs.
    :ivar logs: the output files of the runs; ``note``: why a step was skipped, etc.
    """

    number: int
    phase: str
    applied: tuple[str, ...]
    env: str
    built: bool
    verdict: str
    outcome: str
    codes: tuple[int | None, ...] = ()
    values: tuple[float | None, ...] = ()
    value: float | None = None
    seconds: float = 0.0
    logs: tuple[str, ...] = ()
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON object."""
        return {"step": self.number, "phase": self.phase, "applied": list(self.applied),
                "env": self.env, "built": self.built, "verdict": self.verdict,
                "outcome": self.outcome, "exit": list(self.codes),
                "values": list(self.values), "value": self.value,
                "seconds": round(self.seconds, 3), "logs": list(self.logs), "note": self.note}


@dataclass(frozen=True, kw_only=True, slots=True)
class BisectResult:
    """What bisect found.

    :ivar status: ``"found"`` (a minimal set of changes moves the result), ``"same"`` (GOOD and
        BAD give the same result: the cause is not among the changes bisect can toggle) or
        ``"unresolved"`` (the steps that would tell were skipped).
    :ivar culprit: the minimal set of groups; ``groups``: all of them, in the order tried.
    :ivar notes: merges of groups the resolver asked for, environments reused, and so on.
    :ivar not_toggled: differences no environment built from GOOD can take on.
    :ivar envs_built, runs: environments bisect built, runs of CMD made.
    :ivar rebuild: shell commands that rebuild the culprit's two environments (GOOD, and GOOD
        with the culprit applied) and run CMD in them.
    :ivar workdir: where environments (with ``keep``) and the runs' output are.
    """

    status: str
    good: str
    bad: str
    command: tuple[str, ...]
    judge: Judge
    groups: tuple[Group, ...]
    culprit: tuple[Group, ...]
    steps: tuple[Step, ...]
    envs_built: int
    runs: int
    notes: tuple[str, ...] = ()
    not_toggled: tuple[str, ...] = ()
    rebuild: tuple[str, ...] = ()
    good_value: float | None = None
    bad_value: float | None = None
    workdir: str = ""
    kept: bool = False

    @property
    def exit_code(self) -> int:
        """0 a culprit found, 1 GOOD and BAD agree (or nothing could be decided)."""
        return 0 if self.status == "found" else 1

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``envlock bisect --format json`` (docs/reproduce.md)."""
        return {
            "schema": JSON_SCHEMA, "status": self.status, "good": self.good, "bad": self.bad,
            "command": list(self.command),
            "judge": {"metric": self.judge.metric, "rtol": self.judge.rtol,
                      "atol": self.judge.atol, "repeat": self.judge.repeat},
            "good_value": self.good_value, "bad_value": self.bad_value,
            "culprit": [g.to_json() for g in self.culprit],
            "groups": [g.to_json() for g in self.groups],
            "envs_built": self.envs_built, "runs": self.runs,
            "steps": [s.to_json() for s in self.steps],
            "notes": list(self.notes), "not_toggled": list(self.not_toggled),
            "never_toggled": list(NEVER_TOGGLED),
            "rebuild": list(self.rebuild), "workdir": self.workdir, "kept": self.kept,
        }


#: called with one line whenever a build or run starts
Progress = Callable[[str], None]
