"""One bisect run: build GOOD with subsets of the changes applied, run CMD, judge it, and let
delta debugging (:func:`envlock.reproduce.ddmin.ddmin`) choose the next subset.

:func:`envlock.reproduce.bisect` reads the inputs, groups the changes and finds the
interpreter; a :class:`Session` holds what every step shares (GOOD's pins and variables, the
groups, the judge, the builder) and runs the steps.
"""

from __future__ import annotations

import math
import shlex
from concurrent.futures import Future, ThreadPoolExecutor
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from envlock._run import Runner
from envlock.errors import EnvlockError
from envlock.reproduce.changes import Group, Side
from envlock.reproduce.ddmin import FAIL, PASS, UNRESOLVED, ddmin
from envlock.reproduce.envs import Builder, run_command
from envlock.reproduce.model import Judge, Progress, Step
from envlock.reproduce.changes import _first

__all__ = ["Session", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a session found: ``status`` (``"found"``, ``"same"``, ``"unresolved"``), the
    culprit's group indexes, GOOD's and BAD's judged values."""

    status: str
    culprit: tuple[int, ...]
    good_value: float | None
    bad_value: float | None


@dataclass(kw_only=True)
class Session:
    """The state every step of one bisect shares.

    :ivar good: GOOD's side (its pins and variables are the base of every environment).
    :ivar groups: the changes, grouped so that each installs on its own.
    :ivar command: CMD and its arguments; ``judge``: how a run is judged.
    :ivar builder: builds (or reuses) the environment of a set of pins.
    :ivar check: the resolver's verdict on applying some groups together (``None``: they
        install; else uv's reason).
    :ivar root: the work directory (``logs/`` holds every run's output).
    :ivar say: progress lines; ``runner``: runs every command.
    :ivar steps: the steps run so far, in order; ``runs``: runs of CMD made.
    """

    good: Side
    groups: list[Group]
    command: tuple[str, ...]
    judge: Judge
    builder: Builder
    check: Callable[[Sequence[Group]], str | None]
    root: Path
    say: Progress
    runner: Runner
    steps: list[Step] = field(default_factory=list)
    runs: int = 0
    _memo: dict[frozenset[int], Step] = field(default_factory=dict)
    _checks: dict[frozenset[int], Future[str | None]] = field(default_factory=dict)
    _pool: ThreadPoolExecutor | None = None
    _ref: dict[str, float | None] = field(default_factory=dict)
    _classes: dict[str, str] = field(default_factory=dict)

    @property
    def toggled_vars(self) -> list[str]:
        """The environment variables some group changes, sorted."""
        return sorted({c.name for g in self.groups for c in g.changes if c.kind == "env"})

    def pins_for(self, applied: Sequence[Group]) -> dict[str, str]:
        """name → requirement of GOOD's pip pins with ``applied`` groups' changes made."""
        return self.pins_of(self.good, applied)

    @staticmethod
    def pins_of(good: Side, applied: Sequence[Group]) -> dict[str, str]:
        """:meth:`pins_for` of a side, before a session exists (the resolver checks)."""
        pins = {name: req for name, (_v, req) in good.pins.items()}
        for g in applied:
            for c in g.changes:
                if c.kind != "pip":
                    continue
                if c.bad_req is None:
                    pins.pop(c.name, None)
                else:
                    pins[c.name] = c.bad_req
        return pins

    def variables(self, applied: Sequence[Group]) -> dict[str, str | None]:
        """The toggled variables' values (``None``: unset) with ``applied`` groups' made."""
        out: dict[str, str | None] = {v: self.good.env.get(v) for v in self.toggled_vars}
        for g in applied:
            for c in g.changes:
                if c.kind == "env":
                    out[c.name] = c.bad
        return out

    def _classify(self, value: float | None, codes: Sequence[int | None]) -> str:
        if self.judge.metric is None:
            verdicts = [("skip" if c is None or c == 125 else "good" if c == 0 else "bad")
                        for c in codes]
            counted = [v for v in verdicts if v != "skip"]
            if not counted:
                return "skip"
            return max(("good", "bad"), key=lambda v: (counted.count(v), v == "bad"))
        if value is None:
            return "skip"
        g = self._ref.get("GOOD")
        if g is None:
            return "good"  # GOOD's own run sets the reference
        return "good" if self.judge.close(value, g) else "bad"

    def _record(self, subset: frozenset[int], step: Step) -> Step:
        self.steps.append(step)
        self._memo[subset] = step
        return step

    def attempt(self, subset: frozenset[int], phase: str, left: int) -> Step:
        """Build GOOD with the groups of ``subset`` applied, run CMD ``judge.repeat`` times and
        judge it (each subset once: a second call returns the first step).

        :param phase: ``"GOOD"``, ``"BAD"`` or ``"bisect"``; ``left``: steps still expected.
        """
        if subset in self._memo:
            return self._memo[subset]

        judge = self.judge
        applied = [self.groups[i] for i in sorted(subset)]
        labels = tuple(g.label for g in applied)
        number = len(self.steps) + 1
        shown = ", ".join(labels) if labels else "nothing"
        if len(shown) > 70:
            shown = shown[:67] + "…"
        note = ""
        if phase == "bisect" and self._needs_check(subset):
            why = self._checked(subset)
            if why is not None:
                return self._record(subset, Step(
                    number=number, phase=phase, applied=labels, env="", built=False,
                    verdict="skip", outcome=UNRESOLVED,
                    note=f"cannot be installed together (uv: {_first(why)})"))
        pins = sorted(self.pins_for(applied).values())
        before = self.builder.count
        self.say(f"step {number} ({phase}; about {left} left): building GOOD + {shown}")
        env = self.builder.get(pins)
        built = self.builder.count > before
        seconds = env.seconds if built else 0.0
        if env.error is not None:
            return self._record(subset, Step(
                number=number, phase=phase, applied=labels, env=str(env.path), built=built,
                verdict="skip", outcome=UNRESOLVED, seconds=seconds,
                note=f"uv could not build it: {env.error}"))
        codes: list[int | None] = []
        values: list[float | None] = []
        logs: list[str] = []
        for k in range(judge.repeat):
            self.say(f"step {number} ({phase}; about {left} left): running in GOOD + {shown}"
                     + (f" (run {k + 1} of {judge.repeat})" if judge.repeat > 1 else ""))
            out = run_command(self.command, env.path, self.variables(applied),
                              self.root / "logs" / f"step-{number:02d}-run-{k + 1}.log",
                              timeout=judge.timeout, runner=self.runner)
            self.runs += 1
            seconds += out.seconds
            codes.append(out.returncode)
            values.append(judge.value(out.output))
            logs.append(str(out.log))
            if out.returncode is None:
                note = out.detail
        known = [v for v in values if v is not None]
        value = statistics.median(known) if known else None
        if judge.metric is not None and known:
            majority = [self._classify(v, codes) for v in known]
            verdict = max(("good", "bad"), key=lambda v: (majority.count(v), v == "bad"))
        else:
            verdict = self._classify(value, codes)
        if judge.metric is not None and value is None and not note:
            note = f"no match for --metric {judge.metric!r} in the output"
        bad_ref = self._ref.get("BAD")
        if (value is not None and verdict == "bad" and bad_ref is not None
                and not judge.close(value, bad_ref)):
            note = note or "neither GOOD's nor BAD's value"
        outcome = UNRESOLVED
        if self._classes and verdict != "skip":
            outcome = PASS if verdict == self._classes["GOOD"] else FAIL
        return self._record(subset, Step(
            number=number, phase=phase, applied=labels, env=str(env.path), built=built,
            verdict=verdict, outcome=outcome, codes=tuple(codes), values=tuple(values),
            value=value, seconds=seconds, logs=tuple(logs), note=note))

    def _needs_check(self, subset: frozenset[int]) -> bool:
        """More than one group of ``subset`` needs a build: whether they install together is
        the resolver's question (one group alone was asked before the search)."""
        return sum(1 for i in subset if self.groups[i].needs_build) > 1

    def prefetch(self, subsets: Sequence[Sequence[int]]) -> None:
        """Ask the resolver about ``subsets`` (group indexes) in the background, the ones a
        later :meth:`attempt` may need (issue 26: asked one before each build, in sequence,
        they were most of bisect's overhead); an answer never used is dropped."""
        for subset in subsets:
            key = frozenset(subset)
            if key in self._memo or key in self._checks or not self._needs_check(key):
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="envlock-bisect-check")
            applied = [self.groups[i] for i in sorted(key)]
            self._checks[key] = self._pool.submit(self.check, applied)

    def _checked(self, subset: frozenset[int]) -> str | None:
        """The resolver's answer for ``subset``: the prefetched one, else asked now."""
        got = self._checks.pop(subset, None)
        if got is not None:
            return got.result()
        return self.check([self.groups[i] for i in sorted(subset)])

    def _with_outcome(self, step: Step, outcome: str) -> Step:
        fixed = replace(step, outcome=outcome)
        self.steps[self.steps.index(step)] = fixed
        return fixed

    def run(self, *, keep: bool, envs: Path) -> Outcome:
        """GOOD, then BAD, then delta debugging over the groups.

        :param keep: keep the environments built; else ``envs`` is removed if this raises.
        :raises EnvlockError: GOOD or BAD could not be judged (their runs were skipped).
        :raises KeyboardInterrupt: after removing ``envs`` (without ``keep``).
        """
        groups = self.groups
        everything = frozenset(range(len(groups)))
        status = "found"
        culprit: list[int] = []
        log2 = math.ceil(math.log2(max(len(groups), 1)))
        items = list(range(len(groups)))
        try:
            if len(items) > 1:  # the first subset the search tries, asked while GOOD and BAD run
                self.prefetch([items[: len(items) // 2]])
            g_step = self.attempt(frozenset(), "GOOD", 1 + log2 + 1)
            if g_step.verdict == "skip":
                raise EnvlockError(f"GOOD could not be judged ({g_step.note or 'skipped'}); see "
                                   f"{g_step.logs[0] if g_step.logs else self.root}")
            self._ref["GOOD"] = g_step.value
            self._classes["GOOD"] = g_step.verdict
            self._memo[frozenset()] = self._with_outcome(g_step, PASS)
            b_step = self.attempt(everything, "BAD", log2 + 1)
            if b_step.verdict == "skip":
                raise EnvlockError(f"BAD could not be judged ({b_step.note or 'skipped'}); see "
                                   f"{b_step.logs[0] if b_step.logs else self.root}")
            self._ref["BAD"] = b_step.value
            same = (b_step.verdict == g_step.verdict if self.judge.metric is None
                    else self.judge.close(b_step.value or 0.0, g_step.value or 0.0))
            if self.judge.metric is not None and not same:
                self._classes["BAD"] = "bad"
            self._memo[everything] = self._with_outcome(b_step, PASS if same else FAIL)
            if same or not groups:
                status = "same"
            else:
                def oracle(subset: Sequence[int]) -> str:
                    key = frozenset(subset)
                    if not key:
                        return PASS
                    done = sum(1 for s in self.steps if s.phase == "bisect")
                    left = max(1, math.ceil(math.log2(max(len(groups), 2))) + 1 - done)
                    return self.attempt(key, "bisect", left).outcome

                culprit = ddmin(items, oracle, ahead=self.prefetch)
                final = self._memo.get(frozenset(culprit))
                if final is None or final.outcome != FAIL:
                    status = "unresolved"
        except BaseException:
            if not keep:
                shutil.rmtree(envs, ignore_errors=True)
            raise
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
        return Outcome(status=status, culprit=tuple(culprit) if status != "same" else (),
                       good_value=self._ref.get("GOOD"), bad_value=self._ref.get("BAD"))

    def rebuild(self, culprit: Sequence[Group]) -> tuple[str, ...]:
        """Shell commands that rebuild GOOD's and GOOD + culprit's environments and run CMD in
        each (uv's own commands, then ``env … CMD``)."""
        out: list[str] = []
        for name, applied in (("good-env", ()), ("culprit-env", tuple(culprit))):
            out.append(f"# {'GOOD' if not applied else 'GOOD + ' + ', '.join(g.label for g in applied)}")
            for argv in self.builder.argv(Path(name), sorted(self.pins_for(applied).values())):
                out.append(shlex.join(argv))
            values = self.variables(applied)
            env = [f"{k}={shlex.quote(v)}" for k, v in values.items() if v is not None]
            unset = [f"-u {k}" for k, v in values.items() if v is None]
            out.append(shlex.join(["env"]) + "".join(f" {u}" for u in unset)
                       + "".join(f" {e}" for e in env)
                       + f" PATH=\"$PWD/{name}/bin:$PATH\" " + shlex.join(list(self.command)))
        return tuple(out)
