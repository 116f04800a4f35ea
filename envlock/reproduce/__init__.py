"""``envlock bisect GOOD BAD -- CMD``: find the change that moved the result.

GOOD and BAD are manifests (or any input ``envlock diff`` reads).  Their differences are grouped
into changes that install on their own (:mod:`envlock.reproduce.changes`); environments are
built from GOOD with subsets of them applied (:mod:`envlock.reproduce.envs`), CMD is run in each
and judged (exit status as ``git bisect run`` reads it, or a number it prints), and delta
debugging (:mod:`envlock.reproduce.ddmin`) narrows the subsets down to a minimal set of changes
that moves the result: one culprit in about log2(groups) builds, an interacting pair as a pair.

:func:`bisect` returns a :class:`BisectResult`; :mod:`envlock.render.bisect` writes it as
text, markdown or JSON.
"""

from __future__ import annotations

import math
import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock._run import Runner, run
from envlock.errors import EnvlockError
from envlock.reproduce.changes import (
    Group,
    Side,
    changes_between,
    group_changes,
    merge_infeasible,
    read_side,
)
from envlock.reproduce.ddmin import FAIL, PASS, UNRESOLVED, ddmin
from envlock.reproduce.envs import Builder, resolve_check, run_command

__all__ = ["bisect", "BisectResult", "Step", "Judge", "DEFAULT_TIMEOUT", "JSON_SCHEMA"]

#: Seconds one run of CMD may take before it is stopped and the step skipped.
DEFAULT_TIMEOUT = 600.0
#: Version of the JSON document :meth:`BisectResult.to_json` returns.
JSON_SCHEMA = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Judge:
    """How a run is judged.

    Without ``metric``: the exit status, as ``git bisect run`` reads it: 0 good, 125 skip (it
    cannot be tested), anything else bad; a run that times out is skipped.  With ``metric``:
    the first match of the regular expression in CMD's output (its first group if it has one)
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
            "rebuild": list(self.rebuild), "workdir": self.workdir, "kept": self.kept,
        }


Progress = Callable[[str], None]


def _rank(good: str, bad: str) -> dict[str, int]:
    """name → position of the first ``envlock diff`` explanation that names it."""
    from envlock._names import canonicalize  # noqa: PLC0415
    from envlock.diff import diff  # noqa: PLC0415

    try:
        result = diff([good, bad])
    except EnvlockError:
        return {}
    rank: dict[str, int] = {}
    for i, expl in enumerate(getattr(result, "explanations", [])):
        for ch in expl.changes:
            for name in (ch.key, canonicalize(ch.key)):
                rank.setdefault(name, i)
    return rank


def _index_args(good: Side, bad: Side, index_map: Mapping[str, str], index_url: str | None,
                find_links: Sequence[str], no_index: bool) -> tuple[list[str], list[str]]:
    from envlock.lock._pip import IndexOptions  # noqa: PLC0415
    from envlock.lock._from_manifest import variant_index  # noqa: PLC0415
    from envlock.reproduce.changes import _local  # noqa: PLC0415

    extra: list[str] = []
    notes: list[str] = []
    labels = sorted({lab for side in (good, bad) for v, _ in side.pins.values()
                     if (lab := _local(v))})
    for label in labels:
        url = None if no_index else variant_index(label, index_map)
        if url and url not in extra:
            extra.append(url)
            notes.append(f"+{label} versions from {url}")
    opts = IndexOptions(index_url=index_url, extra_index_urls=tuple(extra),
                        find_links=tuple(str(Path(f).resolve()) if "://" not in f else f
                                         for f in find_links), no_index=no_index)
    return opts.uv_args(), notes


def _own_env(side: Side) -> Path | None:
    """The side's own environment, when it is on this machine and still matches its manifest
    (verify's package and Python checks find nothing)."""
    if side.kind != "manifest" or not side.target_python:
        return None
    python = Path(side.target_python)
    if not python.exists():
        return None
    from envlock.verify import verify  # noqa: PLC0415
    from envlock.verify.checks.packages import (  # noqa: PLC0415
        check_manifest_packages,
        check_python_version,
    )

    try:
        report = verify(manifest=side.path, python=str(python), timeout=30.0,
                        checks=[("python", check_python_version),
                                ("packages", check_manifest_packages)])
    except EnvlockError:
        return None
    if any(f.severity in ("error", "warning") for f in report.findings):
        return None
    return python.parent.parent


def bisect(
    good: str,
    bad: str,
    command: Sequence[str],
    *,
    judge: Judge | None = None,
    index_map: Mapping[str, str] | None = None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    no_index: bool = False,
    python: str | None = None,
    workdir: str | Path | None = None,
    keep: bool = False,
    own_envs: bool = True,
    progress: Progress | None = None,
    runner: Runner = run,
) -> BisectResult:
    """Find the minimal set of changes between GOOD and BAD that moves CMD's result.

    :param good, bad: manifests or any input ``envlock diff`` reads, with exact versions.
    :param command: CMD and its arguments, run with each environment's ``bin`` first on PATH.
    :param judge: how a run is judged (exit status by default); see :class:`Judge`.
    :param index_map, index_url, find_links, no_index: where uv finds the packages (as
        ``envlock restore``; ``+cpu``/``+cuXYZ`` versions from PyTorch's variant indexes).
    :param python: the interpreter for every environment (default: one of GOOD's recorded
        version, found as :func:`envlock.lock._from_manifest.find_python` does).
    :param workdir: directory for environments and logs (default: a new temporary one).
    :param keep: keep the environments bisect built (under ``workdir/envs``).
    :param own_envs: run GOOD and BAD in their own environments when those are on this machine
        and still match their manifests (no build); else they are built like every subset.
    :param progress: called with one line whenever a build or run starts.
    :raises ManifestError: an input cannot be read or is not pinned.
    :raises EnvlockError: no interpreter of GOOD's version; GOOD or BAD cannot be judged
        (their runs were skipped); uv failed.
    :raises KeyboardInterrupt: after removing the environment being built (and, without
        ``keep``, every environment built).
    """
    from envlock.lock._from_manifest import find_python  # noqa: PLC0415

    judge = judge or Judge()
    say = progress or (lambda _msg: None)
    command = tuple(command)
    if not command:
        raise EnvlockError("give the command to judge after --: envlock bisect GOOD BAD -- CMD")
    gside, bside = read_side(good), read_side(bad)
    changes, not_toggled = changes_between(gside, bside)
    groups = group_changes(changes, _rank(good, bad) if changes else {})
    index_args, notes = _index_args(gside, bside, index_map or {}, index_url, find_links,
                                    no_index)
    if gside.python is None and python is None:
        import platform  # noqa: PLC0415
        import sys  # noqa: PLC0415

        choice = find_python(platform.python_version(), base_prefix=sys.base_prefix,
                             runner=runner)
        notes.append(f"{good} records no Python version: envlock's own is used")
    else:
        choice = find_python(gside.python, base_prefix=gside.base_prefix, explicit=python,
                             runner=runner)
    if choice.path is None:
        raise EnvlockError(f"cannot build GOOD's environments: {choice.describe()}")
    notes.append(f"every environment uses {choice.describe()}")

    def pins_for(applied: Sequence[Group]) -> dict[str, str]:
        pins = {name: req for name, (_v, req) in gside.pins.items()}
        for g in applied:
            for c in g.changes:
                if c.kind != "pip":
                    continue
                if c.bad_req is None:
                    pins.pop(c.name, None)
                else:
                    pins[c.name] = c.bad_req
        return pins

    def check(gs: Sequence[Group]) -> str | None:
        return resolve_check(sorted(pins_for(gs).values()), python_version=gside.python,
                             index_args=index_args, runner=runner)

    say("asking uv's resolver which changes install on their own…")
    from envlock.reproduce.changes import _first  # noqa: PLC0415

    broken = next(((name, why) for name, applied in (("GOOD", ()), ("BAD", tuple(groups)))
                   if any(g.needs_build for g in groups) and (why := check(applied))), None)
    if broken is None:
        groups, merge_notes = merge_infeasible(groups, check)
        notes += merge_notes
    else:
        notes.append(f"{broken[0]}'s own pins do not resolve together (uv: {_first(broken[1])}); "
                     "groups are not merged by the resolver and subsets are not checked")
        check = lambda gs: None  # noqa: E731 - the resolver cannot judge subsets then
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="envlock-bisect-"))
    root.mkdir(parents=True, exist_ok=True)
    envs = root / "envs"
    existing: dict[frozenset[str], Path] = {}
    if own_envs:
        for side, name, applied in ((gside, "GOOD", ()), (bside, "BAD", tuple(groups))):
            if side.python != gside.python:
                continue  # BAD's own interpreter is not the one every subset is built with
            own = _own_env(side)
            if own is not None and not side.lost:
                existing.setdefault(frozenset(pins_for(applied).values()), own)
                notes.append(f"{name} ran in its own environment {own} (it still matches "
                             f"{side.path})")
    if gside.conda:
        notes.append(f"{good} is a conda environment: every environment is a venv over "
                     f"{choice.path} with --system-site-packages, so its conda packages are "
                     "seen (they are not toggled)")
    builder = Builder(envs, choice.path, index_args, existing=existing,
                      system_site=bool(gside.conda), runner=runner)
    toggled_vars = sorted({c.name for c in changes if c.kind == "env"})
    steps: list[Step] = []
    memo: dict[frozenset[int], Step] = {}
    runs = 0
    ref: dict[str, float | None] = {}
    classes: dict[str, str] = {}

    def variables(applied: Sequence[Group]) -> dict[str, str | None]:
        out: dict[str, str | None] = {v: gside.env.get(v) for v in toggled_vars}
        for g in applied:
            for c in g.changes:
                if c.kind == "env":
                    out[c.name] = c.bad
        return out

    def classify(value: float | None, codes: Sequence[int | None]) -> str:
        if judge.metric is None:
            verdicts = [("skip" if c is None or c == 125 else "good" if c == 0 else "bad")
                        for c in codes]
            counted = [v for v in verdicts if v != "skip"]
            if not counted:
                return "skip"
            return max(("good", "bad"), key=lambda v: (counted.count(v), v == "bad"))
        if value is None:
            return "skip"
        g = ref.get("GOOD")
        if g is None:
            return "good"  # GOOD's own run sets the reference
        return "good" if judge.close(value, g) else "bad"

    def attempt(subset: frozenset[int], phase: str, left: int) -> Step:
        nonlocal runs
        if subset in memo:
            return memo[subset]
        applied = [groups[i] for i in sorted(subset)]
        labels = tuple(g.label for g in applied)
        number = len(steps) + 1
        shown = ", ".join(labels) if labels else "nothing"
        if len(shown) > 70:
            shown = shown[:67] + "…"
        note = ""
        builds = [g for g in applied if g.needs_build]
        if phase == "bisect" and len(builds) > 1:
            why = check(applied)
            if why is not None:
                step = Step(number=number, phase=phase, applied=labels, env="", built=False,
                            verdict="skip", outcome=UNRESOLVED,
                            note=f"cannot be installed together (uv: {_first(why)})")
                steps.append(step)
                memo[subset] = step
                return step
        pins = sorted(pins_for(applied).values())
        before = builder.count
        say(f"step {number} ({phase}; about {left} left): building GOOD + {shown}")
        env = builder.get(pins)
        built = builder.count > before
        seconds = env.seconds if built else 0.0
        if env.error is not None:
            step = Step(number=number, phase=phase, applied=labels, env=str(env.path),
                        built=built, verdict="skip", outcome=UNRESOLVED, seconds=seconds,
                        note=f"uv could not build it: {env.error}")
            steps.append(step)
            memo[subset] = step
            return step
        codes: list[int | None] = []
        values: list[float | None] = []
        logs: list[str] = []
        for k in range(judge.repeat):
            say(f"step {number} ({phase}; about {left} left): running in GOOD + {shown}"
                + (f" (run {k + 1} of {judge.repeat})" if judge.repeat > 1 else ""))
            out = run_command(command, env.path, variables(applied),
                              root / "logs" / f"step-{number:02d}-run-{k + 1}.log",
                              timeout=judge.timeout, runner=runner)
            runs += 1
            seconds += out.seconds
            codes.append(out.returncode)
            values.append(judge.value(out.output))
            logs.append(str(out.log))
            if out.returncode is None:
                note = out.detail
        known = [v for v in values if v is not None]
        value = statistics.median(known) if known else None
        if judge.metric is not None and known:
            majority = [classify(v, codes) for v in known]
            verdict = max(("good", "bad"), key=lambda v: (majority.count(v), v == "bad"))
        else:
            verdict = classify(value, codes)
        if judge.metric is not None and value is None and not note:
            note = f"no match for --metric {judge.metric!r} in the output"
        bad_ref = ref.get("BAD")
        if (value is not None and verdict == "bad" and bad_ref is not None
                and not judge.close(value, bad_ref)):
            note = note or "neither GOOD's nor BAD's value"
        outcome = UNRESOLVED
        if classes and verdict != "skip":
            outcome = PASS if verdict == classes["GOOD"] else FAIL
        step = Step(number=number, phase=phase, applied=labels, env=str(env.path), built=built,
                    verdict=verdict, outcome=outcome, codes=tuple(codes),
                    values=tuple(values), value=value, seconds=seconds, logs=tuple(logs),
                    note=note)
        steps.append(step)
        memo[subset] = step
        return step

    everything = frozenset(range(len(groups)))
    status = "found"
    culprit: list[int] = []
    try:
        g_step = attempt(frozenset(), "GOOD", 1 + math.ceil(math.log2(max(len(groups), 1))) + 1)
        if g_step.verdict == "skip":
            raise EnvlockError(f"GOOD could not be judged ({g_step.note or 'skipped'}); see "
                               f"{g_step.logs[0] if g_step.logs else root}")
        ref["GOOD"] = g_step.value
        classes["GOOD"] = g_step.verdict
        memo[frozenset()] = _with_outcome(g_step, PASS, steps)
        b_step = attempt(everything, "BAD", math.ceil(math.log2(max(len(groups), 1))) + 1)
        if b_step.verdict == "skip":
            raise EnvlockError(f"BAD could not be judged ({b_step.note or 'skipped'}); see "
                               f"{b_step.logs[0] if b_step.logs else root}")
        ref["BAD"] = b_step.value
        same = (b_step.verdict == g_step.verdict if judge.metric is None
                else judge.close(b_step.value or 0.0, g_step.value or 0.0))
        if judge.metric is not None and not same:
            classes["BAD"] = "bad"
        memo[everything] = _with_outcome(b_step, PASS if same else FAIL, steps)
        if same or not groups:
            status = "same"
        else:
            def oracle(subset: Sequence[int]) -> str:
                key = frozenset(subset)
                if not key:
                    return PASS
                done = sum(1 for s in steps if s.phase == "bisect")
                left = max(1, math.ceil(math.log2(max(len(groups), 2))) + 1 - done)
                return attempt(key, "bisect", left).outcome

            culprit = ddmin(list(range(len(groups))), oracle)
            final = memo.get(frozenset(culprit))
            if final is None or final.outcome != FAIL:
                status = "unresolved"
    except BaseException:
        if not keep:
            shutil.rmtree(envs, ignore_errors=True)
        raise
    culprit_groups = tuple(groups[i] for i in culprit) if status != "same" else ()
    rebuild = _rebuild(builder, pins_for, variables, culprit_groups, command) \
        if culprit_groups else ()
    if not keep:
        shutil.rmtree(envs, ignore_errors=True)
    return BisectResult(
        status=status, good=good, bad=bad, command=command, judge=judge, groups=tuple(groups),
        culprit=culprit_groups, steps=tuple(steps), envs_built=builder.count, runs=runs,
        notes=tuple(notes), not_toggled=tuple(not_toggled), rebuild=rebuild,
        good_value=ref.get("GOOD"), bad_value=ref.get("BAD"), workdir=str(root), kept=keep)


def _with_outcome(step: Step, outcome: str, steps: list[Step]) -> Step:
    import dataclasses  # noqa: PLC0415

    fixed = dataclasses.replace(step, outcome=outcome)
    steps[steps.index(step)] = fixed
    return fixed


def _rebuild(builder: Builder, pins_for: Callable[[Sequence[Group]], dict[str, str]],
             variables: Callable[[Sequence[Group]], dict[str, str | None]],
             culprit: Sequence[Group], command: Sequence[str]) -> tuple[str, ...]:
    import shlex  # noqa: PLC0415

    out: list[str] = []
    for name, applied in (("good-env", ()), ("culprit-env", tuple(culprit))):
        out.append(f"# {'GOOD' if not applied else 'GOOD + ' + ', '.join(g.label for g in applied)}")
        for argv in builder.argv(Path(name), sorted(pins_for(applied).values())):
            out.append(shlex.join(argv))
        env = [f"{k}={shlex.quote(v)}" for k, v in variables(applied).items() if v is not None]
        unset = [f"-u {k}" for k, v in variables(applied).items() if v is None]
        out.append(shlex.join(["env"]) + "".join(f" {u}" for u in unset)
                   + "".join(f" {e}" for e in env)
                   + f" PATH=\"$PWD/{name}/bin:$PATH\" " + shlex.join(list(command)))
    return tuple(out)
