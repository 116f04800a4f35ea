"""``envlock bisect GOOD BAD -- CMD``: find the change that moved the result.

GOOD and BAD are manifests (or any input ``envlock diff`` reads).  Their differences are grouped
into changes that install on their own (:mod:`envlock.reproduce.changes`); environments are
built from GOOD with subsets of them applied (:mod:`envlock.reproduce.envs`), CMD is run in each
and judged (exit status as ``git bisect run`` reads it, or a number it prints), and delta
debugging (:mod:`envlock.reproduce.ddmin`) narrows the subsets down to a minimal set of changes
that moves the result: one culprit in about log2(groups) builds, an interacting pair as a pair.

:func:`bisect` returns a :class:`BisectResult`; :mod:`envlock.render.bisectreport` writes it as
text, markdown or JSON.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from envlock.reproduce.envs import Builder, resolve_check
from envlock.reproduce.model import (
    DEFAULT_TIMEOUT,
    JSON_SCHEMA,
    BisectResult,
    Judge,
    Progress,
    Step,
)
from envlock.reproduce.session import Session
from envlock._names import canonicalize
import os
import platform
import sys
import re
import threading

if TYPE_CHECKING:
    from envlock.lock._plan import PythonChoice

__all__ = ["bisect", "remove_in_background", "BisectResult", "Step", "Judge", "DEFAULT_TIMEOUT", "JSON_SCHEMA",
           "check_metric"]



def _rank(good: str, bad: str) -> dict[str, int]:
    """name → position of the first ``envlock diff`` explanation that names it."""
    from envlock.diff import diff

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
    from envlock.lock._pip import IndexOptions
    from envlock.lock._from_manifest import variant_index
    from envlock.reproduce.changes import _local

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


def _own_env(side: Side, interpreter: str | None, where: Path | None = None) -> Path | None:
    """The side's own environment — the one its manifest records, or ``where``
    (``--good-env``/``--bad-env``) — when it is on this machine, is a venv of ``interpreter``
    (its ``bin/python`` resolves to the same file: the manifest's path is never run as a
    program of its own, docs/trust.md) and still matches its manifest (verify's package and
    Python checks find nothing)."""
    if side.kind != "manifest" or not interpreter or not (where or side.target_python):
        return None
    python = where / "bin" / "python" if where is not None else Path(side.target_python or "")
    if not python.exists() or os.path.realpath(python) != os.path.realpath(interpreter):
        return None
    from envlock.verify import verify
    from envlock.verify.checks.packages import (
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


def _interpreter(good: str, gside: Side, python: str | None, runner: Runner,
                 notes: list[str]) -> PythonChoice:
    """The interpreter every environment uses: ``python``, else one of GOOD's recorded version
    (envlock's own when GOOD records none); the choice is appended to ``notes``.

    :raises EnvlockError: no such interpreter on this machine.
    """
    from envlock.lock._from_manifest import find_python

    if gside.python is None and python is None:

        choice = find_python(platform.python_version(), local_prefix=sys.base_prefix,
                             runner=runner)
        notes.append(f"{good} records no Python version: envlock's own is used")
    else:
        choice = find_python(gside.python, base_prefix=gside.base_prefix, explicit=python,
                             own_last=True, runner=runner)
    if choice.path is None:
        raise EnvlockError(f"cannot build GOOD's environments: {choice.describe()}")
    notes.append(f"every environment uses {choice.describe()}")
    return choice


def _feasible(groups: list[Group], check: Callable[[Sequence[Group]], str | None], notes: list[str]
              ) -> tuple[list[Group], Callable[[Sequence[Group]], str | None]]:
    """``(groups, check)`` after asking uv's resolver: groups that cannot install on their own
    merged (:func:`merge_infeasible`), unless GOOD's or BAD's own pins do not resolve — then
    nothing is merged and ``check`` judges no subset.  What was done is appended to ``notes``."""
    from envlock.reproduce.changes import _first

    broken = None
    known: dict[int, str | None] = {}
    if any(g.needs_build for g in groups):
        from concurrent.futures import ThreadPoolExecutor

        # GOOD's and BAD's own pins and each group alone on GOOD: independent resolver runs,
        # all asked at once (issue 26); the groups' answers count only when both ends resolve
        pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="envlock-bisect-resolve")
        try:
            ends = [pool.submit(check, ()), pool.submit(check, tuple(groups))]
            alone = {i: pool.submit(check, [g]) for i, g in enumerate(groups) if g.needs_build}
            answers = [f.result() for f in ends]
            broken = next(((name, why) for name, why in zip(("GOOD", "BAD"), answers) if why), None)
            if broken is None:
                known = {i: f.result() for i, f in alone.items()}
        finally:
            pool.shutdown(wait=broken is None, cancel_futures=True)
    if broken is None:
        groups, merge_notes = merge_infeasible(groups, check, known=known)
        notes += merge_notes
    else:
        notes.append(f"{broken[0]}'s own pins do not resolve together (uv: {_first(broken[1])}); "
                     "groups are not merged by the resolver and subsets are not checked")
        check = lambda gs: None  # noqa: E731 - the resolver cannot judge subsets then
    return groups, check


def bisect(
    good: str, bad: str, command: Sequence[str], *, judge: Judge | None = None,
    index_map: Mapping[str, str] | None = None, index_url: str | None = None,
    find_links: Sequence[str] = (), no_index: bool = False, python: str | None = None,
    workdir: str | Path | None = None, keep: bool = False, own_envs: bool = True,
    good_env: str | Path | None = None, bad_env: str | Path | None = None,
    progress: Progress | None = None, runner: Runner = run,
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
    :param good_env, bad_env: an environment to run GOOD (BAD) in instead of building it
        (``--good-env``/``--bad-env``: a restored copy, a venv elsewhere), used under the same
        conditions as its own (a venv of the interpreter every subset uses, matching its
        manifest), else noted and built; also with ``own_envs=False``.
    :param progress: called with one line whenever a build or run starts.
    :raises ManifestError: an input cannot be read or is not pinned.
    :raises EnvlockError: no interpreter of GOOD's version; GOOD or BAD cannot be judged
        (their runs were skipped); uv failed.
    :raises KeyboardInterrupt: after removing the environment being built (and, without
        ``keep``, every environment built).

    Nothing GOOD or BAD names is run as a program (docs/trust.md): the interpreter is one of
    this machine's (``python``, uv's, ``PATH``), every pin is checked and given to uv after
    ``--``.  A failed bisect in its own temporary directory removes it (keeping only logs an
    error points at).
    """
    judge = judge or Judge()
    say = progress or (lambda _msg: None)
    command = tuple(command)
    if not command:
        raise EnvlockError("give the command to judge after --: envlock bisect GOOD BAD -- CMD")
    check_metric(judge.metric)  # before anything is built
    gside, bside = read_side(good), read_side(bad)
    changes, not_toggled = changes_between(gside, bside)
    groups = group_changes(changes, _rank(good, bad) if changes else {})
    index_args, notes = _index_args(gside, bside, index_map or {}, index_url, find_links,
                                    no_index)
    choice = _interpreter(good, gside, python, runner, notes)

    def pins_for(applied: Sequence[Group]) -> dict[str, str]:
        return Session.pins_of(gside, applied)

    def resolves(gs: Sequence[Group]) -> str | None:
        return resolve_check(sorted(pins_for(gs).values()), python_version=gside.python,
                             python=choice.path, index_args=index_args, runner=runner)

    say("asking uv's resolver which changes install on their own…")
    groups, check = _feasible(groups, resolves, notes)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="envlock-bisect-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _bisect_in(root, gside, bside, groups, choice, index_args, notes, not_toggled,
                          check, good=good, bad=bad, command=command, judge=judge, keep=keep,
                          own_envs=own_envs, given=(good_env, bad_env), say=say, runner=runner)
    except BaseException:
        if not workdir:
            _clean_failed(root)
        raise


def check_metric(metric: str | None) -> None:
    """``--metric`` must be a regular expression with a group around the number (the
    :class:`Judge` reads its first group), checked before anything is built.

    :raises EnvlockError: not a regular expression, or one without a group.
    """
    if metric is None:
        return
    try:
        groups = re.compile(metric).groups
    except re.error as exc:
        raise EnvlockError(f"--metric {metric!r}: not a regular expression ({exc})") from None
    if groups == 0:
        raise EnvlockError(f"--metric {metric!r}: put the number in a group, e.g. "
                           "'loss=(\\S+)'; nothing was built")


def remove_in_background(path: Path) -> None:
    """Remove the directory ``path`` (the environments, GBs of files) without making the answer
    wait: it is renamed at once to a hidden sibling (``.<name>.deleting-<pid>``: ``path`` is gone
    when this returns) and that is deleted by a non-daemon thread, so the result is printed while
    the files go and the process still exits only when they are gone (issue 26: deleting took
    ~8 s after a 0.3 s test).  When the rename fails the removal happens here and now.
    """

    trash = path.with_name(f".{path.name}.deleting-{os.getpid()}")
    try:
        path.rename(trash)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    threading.Thread(target=shutil.rmtree, args=(trash,), kwargs={"ignore_errors": True},
                     name="envlock-remove-envs", daemon=False).start()


def _clean_failed(root: Path) -> None:
    """After a failed bisect in its own temporary directory: remove the environments; remove
    the directory too unless it holds the logs the error points at."""
    shutil.rmtree(root / "envs", ignore_errors=True)
    logs = root / "logs"
    if not (logs.is_dir() and any(logs.iterdir())):
        shutil.rmtree(root, ignore_errors=True)


def _bisect_in(root: Path, gside: Side, bside: Side, groups: list[Group], choice: Any,
               index_args: list[str], notes: list[str], not_toggled: Sequence[str],
               check: Any, *, good: str, bad: str, command: tuple[str, ...], judge: Judge,
               keep: bool, own_envs: bool, given: tuple[Any, Any], say: Progress,
               runner: Runner) -> BisectResult:
    """The part of :func:`bisect` that builds and runs, in the work directory ``root``."""
    def pins_for(applied: Sequence[Group]) -> dict[str, str]:
        return Session.pins_of(gside, applied)

    envs = root / "envs"
    existing: dict[frozenset[str], Path] = {}
    for side, name, applied, where in ((gside, "GOOD", (), given[0]), (bside, "BAD", tuple(groups), given[1])):
        if where is None and not own_envs:
            continue
        own = None
        if side.python == gside.python and not side.lost:  # else not the interpreter of every subset
            own = _own_env(side, choice.path, Path(where).absolute() if where is not None else None)
        if own is not None:
            existing.setdefault(frozenset(pins_for(applied).values()), own)
            notes.append(f"{name} ran in the environment given, {own} (it matches {side.path})"
                         if where is not None else
                         f"{name} ran in its own environment {own} (it still matches {side.path})")
        elif where is not None:
            notes.append(f"--{name.lower()}-env {where}: not a venv of {choice.path} matching "
                         f"{side.path} (verify's package and Python checks); {name} was built")
    if gside.conda:
        notes.append(f"{good} is a conda environment: every environment is a venv over "
                     f"{choice.path} with --system-site-packages, so its conda packages are "
                     "seen (they are not toggled)")
    builder = Builder(envs, choice.path, index_args, existing=existing,
                      system_site=bool(gside.conda), runner=runner)
    session = Session(good=gside, groups=groups, command=command, judge=judge, builder=builder,
                      check=check, root=root, say=say, runner=runner)
    found = session.run(keep=keep, envs=envs)
    culprit = tuple(groups[i] for i in found.culprit)
    rebuild = session.rebuild(culprit) if culprit else ()
    if not keep:
        remove_in_background(envs)
    return BisectResult(
        status=found.status, good=good, bad=bad, command=command, judge=judge,
        groups=tuple(groups), culprit=culprit, steps=tuple(session.steps),
        envs_built=builder.count, runs=session.runs, notes=tuple(notes),
        not_toggled=tuple(not_toggled), rebuild=rebuild, good_value=found.good_value,
        bad_value=found.bad_value, workdir=str(root), kept=keep)
