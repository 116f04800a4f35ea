"""``envlock verify``: will this job run as intended?  Checks for a job prologue.

:func:`verify` compares the live target environment with a manifest and/or lockfiles and checks
the node (driver, GPUs, allocation, output directory, isolation).  Each check is a plain
function ``check_x(ctx) -> list[Finding]`` (:mod:`envlock.verify.checks`); all run in threads under
one deadline, and a check still running at the deadline is reported as a ``verify.timeout``
finding — :func:`verify` always returns within ``timeout`` seconds (plus the time to load the
inputs).  Only cheap probes run: file reads, one interpreter query, ``nvidia-smi`` when a
driver is present, each command with a timeout that ends before the deadline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from envlock._run import Runner, run
from envlock.findings import Finding, counts, sort_findings

if TYPE_CHECKING:
    from envlock.verify.context import Context
    from envlock.verify.expected import Expected

__all__ = ["verify", "VerifyReport", "CheckResult", "JSON_SCHEMA", "DEFAULT_TIMEOUT"]

#: Version of the ``--format json`` document.
JSON_SCHEMA = 1
#: Default global deadline, seconds.
DEFAULT_TIMEOUT = 30.0


class CheckResult(NamedTuple):
    """How one check ran: ``status`` ``"ok"`` (no finding), ``"findings"``, ``"timeout"`` or
    ``"error"`` (it raised; a bug, reported as a ``verify.internal-error`` finding);
    ``duration`` in seconds (``None`` when it timed out)."""

    name: str
    status: str
    duration: float | None
    findings: int = 0


#: error ids that are envlock's own failure, not a verdict: alone they make exit status 3.
NO_VERDICT = frozenset({"verify.timeout", "verify.internal-error"})

@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyReport:
    """The result of :func:`verify` (policy applied).

    :ivar findings: most severe first.
    :ivar checks: every check, in :data:`envlock.verify.checks.CHECKS` order.
    :ivar target: the target environment (``kind``, ``prefix``, ``python``, ``chosen_by``).
    :ivar manifest: the manifest path, if any; ``locks``: the lockfile paths.
    :ivar config: the policy file used, if any.
    :ivar strict: ``--strict`` was given.
    :ivar timeout: the deadline, seconds; ``duration``: seconds verify took.
    """

    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...]
    target: Mapping[str, Any]
    manifest: str | None
    locks: tuple[str, ...]
    config: str | None
    strict: bool
    timeout: float
    duration: float

    @property
    def counts(self) -> dict[str, int]:
        """``{"error": n, "warning": n, "info": n}``."""
        return counts(self.findings)

    @property
    def status(self) -> str:
        """``"error"``, ``"warning"`` or ``"ok"`` (info findings do not count)."""
        c = self.counts
        return "error" if c["error"] else ("warning" if c["warning"] else "ok")

    @property
    def exit_code(self) -> int:
        """0 when no error (warnings allowed); 1 when an error is a verdict on the environment
        or node; 3 when every error is envlock's own — a check that did not finish by
        ``--timeout`` (``verify.timeout``) or that crashed (``verify.internal-error``): no
        verdict.  A Slurm Prolog drains a node on a non-zero exit (slurm.conf(5), "Prolog"), so
        a site's Prolog can enforce 1 and let 3 pass (``docs/slurm.md``)."""
        errors = [f for f in self.findings if f.severity == "error"]
        if not errors:
            return 0
        return 3 if all(f.id in NO_VERDICT for f in errors) else 1

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``envlock verify --format json`` (``docs/verify.md``)."""
        return {
            "schema": JSON_SCHEMA,
            "status": self.status,
            "exit": self.exit_code,
            "counts": self.counts,
            "target": dict(self.target),
            "manifest": self.manifest,
            "locks": list(self.locks),
            "config": self.config,
            "strict": self.strict,
            "timeout": self.timeout,
            "duration": round(self.duration, 3),
            "checks": [{"name": c.name, "status": c.status,
                        "duration": None if c.duration is None else round(c.duration, 4),
                        "findings": c.findings} for c in self.checks],
            "findings": [f.to_json() for f in self.findings],
        }


def _interpreter_findings(live: Any) -> list[Finding]:
    """``verify.interpreter``: the target interpreter did not answer its query (it hangs, it is
    not Python, it cannot start).  Checks that need it then have nothing to check, so their
    silence must not read as "ok"."""
    info = live._values.get("python")  # only when a check asked for it: no query of our own
    status = getattr(info, "status", "ok")
    if info is None or status == "ok":
        return []
    # the target may be a prefix whose interpreter was never named: never "interpreter None"
    who = live.target.python or getattr(info, "executable", None) or (
        f"of {live.target.prefix}" if getattr(live.target, "prefix", None) else "(none found)")
    return [Finding(
        id="verify.interpreter", severity="error",
        title=f"the target interpreter {who} did not answer ({status})",
        cause="The checks that read the interpreter (its packages, its frameworks, the libraries an "
              "import loads) had nothing to read; the job would start the same interpreter.",
        evidence=(f"{who}: {getattr(info, 'error', None) or status}",),
        fix=("Run the interpreter by hand (`<python> -c 'import sys; print(sys.version)'`); give "
             "the right one with --python.",),
    )]


def _run_checks(
    ctx: Context, checks: Sequence[tuple[str, Callable[[Context], list[Finding]]]], deadline: float, timeout: float
) -> tuple[list[Finding], list[CheckResult]]:
    results: dict[str, tuple[str, float, list[Finding]]] = {}
    lock = threading.Lock()

    def work(name: str, fn: Callable[[Any], list[Finding]]) -> None:
        t0 = time.monotonic()
        try:
            found = list(fn(ctx))
            status = "findings" if found else "ok"
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            found = [Finding(
                id="verify.internal-error", severity="error",
                title=f"check {name} failed: {type(exc).__name__}: {exc}",
                cause="A bug in envlock: this check could not run, so its problems are unknown.",
                evidence=(f"{type(exc).__name__}: {exc}",),
                fix=("Report it to envlock's developers with `envlock verify --format json` output.",),
            )]
            status = "error"
        with lock:
            results[name] = (status, time.monotonic() - t0, found)

    threads = []
    for name, fn in checks:
        t = threading.Thread(target=work, args=(name, fn), name=f"envlock-verify-{name}", daemon=True)
        t.start()
        threads.append((name, t))
    for _name, t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    findings: list[Finding] = []
    done: list[CheckResult] = []
    with lock:
        snapshot = dict(results)
    for name, _fn in checks:
        if name in snapshot:
            status, dt, found = snapshot[name]
            findings += found
            done.append(CheckResult(name=name, status=status, duration=dt, findings=len(found)))
        else:
            findings.append(Finding(
                id="verify.timeout", severity="error",
                title=f"check {name} did not finish within {timeout:g} s",
                cause="Something it needs did not answer in time (a hung driver or nvidia-smi, a "
                      "stalled network file system): what it checks is unknown, and the job may hang "
                      "on the same thing.",
                evidence=(f"--timeout {timeout:g}",),
                fix=("Look at the node (nvidia-smi, df on the output directory); raise --timeout if the "
                     "node is merely slow.",),
            ))
            done.append(CheckResult(name=name, status="timeout", duration=None, findings=1))
    return findings, done


def _expected(manifest: str | None, locks: Sequence[str], requested: Any,
              pixi: tuple[str | None, str | None] = (None, None)) -> Expected:
    """What the environment should be: the manifest and the lockfiles, each lock read for the
    extras and groups ``requested`` and a pixi.lock for ``pixi`` (environment, platform
    entry): :func:`verify`'s parameters.

    :raises ManifestError: the manifest or a lockfile is missing or malformed; a pixi
        environment or platform named that a pixi.lock lacks, or named with no pixi.lock.
    """
    from envlock.verify.expected import Expected, read_lock

    m = None
    if manifest is not None:
        from envlock.manifest import load

        m = load(manifest)
    extras = tuple(requested.extras) if requested is not None else ()
    dev = False if requested is not None and requested.no_dev else None
    lock_list = tuple(read_lock(p, extras=extras, dev=dev, environment=pixi[0],
                                lock_platform=pixi[1]) for p in locks)
    if requested is not None and requested.given:  # as each project lock's own tool takes it
        from envlock.formats.lockchoice import given_choice

        # each project lock's reading, which refuses a name it lacks or conflicting ones
        lock_list = tuple(x._replace(chosen=given_choice(x.path, x, requested))
                          for x in lock_list)
    if pixi != (None, None) and not any(x.kind == "pixi.lock" for x in lock_list):
        said = " and ".join(o for o, v in zip(("--environment", "--platform"), pixi) if v is not None)
        from envlock.errors import ManifestError

        raise ManifestError(f"{said} choose{'' if ' and ' in said else 's'} the environment "
                            "and platform of a pixi.lock given with --lock; "
                            + ("no --lock is a pixi.lock" if lock_list else "no --lock was given"))
    return Expected(manifest=m, manifest_path=manifest, locks=lock_list, requested=requested)


def _chosen_checks(checks: Sequence[tuple[str, Callable[[Any], list[Finding]]]] | None, build: bool,
                   skip: Container[str]) -> Sequence[tuple[str, Callable[[Any], list[Finding]]]]:
    """``checks`` as given, else the build checks (``build``) or every check, less those the
    policy skips."""
    if checks is None and build:
        from envlock.verify.checks.build import BUILD_CHECKS

        checks = [c for c in BUILD_CHECKS if c[0] not in skip]
    if checks is None:
        from envlock.verify.checks import CHECKS

        checks = [c for c in CHECKS if c[0] not in skip]
    return checks


def verify(
    *, manifest: str | None = None, locks: Iterable[str] = (), python: str | None = None,
    prefix: str | None = None, output_dir: str | None = None, strict: bool = False,
    timeout: float = DEFAULT_TIMEOUT, environ: Mapping[str, str] | None = None, root: str = "/",
    runner: Runner = run, cwd: str | None = None, config_dir: str | None = None,
    statvfs: Callable[[str], Any] = os.statvfs,
    checks: Sequence[tuple[str, Callable[[Any], list[Finding]]]] | None = None,
    build: bool = False, requested: Any = None, environment: str | None = None,
    lock_platform: str | None = None,
) -> VerifyReport:
    """Check the target environment and this node against a manifest and/or lockfiles.

    :param manifest: a manifest file (``envlock snapshot``).
    :param locks: ``pylock.toml`` / ``conda-lock.yml`` files.
    :param python: the target interpreter (``--python``); ``prefix``: its prefix (``--prefix``);
        neither: the active environment (see :func:`envlock.probes.target.resolve_target`).
    :param output_dir: the directory the job writes to (checked for space, inodes, writability).
    :param strict: turn warnings into errors.
    :param timeout: global deadline in seconds for all checks.
    :param environ: the job's environment (``os.environ`` when ``None``).
    :param root: file-system root for ``/proc`` (tests use a fake root).
    :param runner: the command runner.
    :param cwd: the job's working directory (default: the current one).
    :param config_dir: where to look for ``envlock.toml``/``pyproject.toml`` (default: the
        manifest's directory, else ``cwd``).
    :param statvfs: :func:`os.statvfs` or a replacement (tests).
    :param checks: the checks to run (default :data:`envlock.verify.checks.CHECKS`).
    :param build: run only the build-toolchain checks
        (:data:`envlock.verify.checks.build.BUILD_CHECKS`, ``verify --build``).
    :param requested: the extras and groups the target was installed with
        (:class:`envlock.formats.markers.Requested`, read as each project lock's own tool
        takes them: :mod:`envlock.formats.lockchoice`; ``-E NAME`` as ``conda-lock install
        -E NAME``); ``None``:
        inferred for each lock from what is installed (uv's extras and groups), or each
        tool's default install (conda-lock: main and dev; :func:`envlock.formats.locks.for_install`).
    :param environment, lock_platform: the environment (``pixi install -e NAME``) and the
        platform entry (``p2``) of each ``pixi.lock`` to compare with
        (:mod:`envlock.verify.pixichoice`); ``None``: ``default``, and the platform of this subdir.
    :raises ManifestError: the manifest or a lockfile is missing or malformed; a pixi
        environment or platform the lock lacks (one line listing the lock's).
    :raises ConfigError: the policy file is malformed.
    :raises TargetError: the target environment cannot be found.
    :returns: a :class:`VerifyReport`.
    """
    from envlock.verify.context import Context
    from envlock.verify.live import Live
    from envlock.verify.policy import apply_policy, load_config

    started = time.monotonic()
    deadline = started + timeout
    locks = tuple(str(p) for p in locks)
    env = dict(os.environ if environ is None else environ)
    cwd = cwd or os.getcwd()
    from envlock.probes.target import resolve_target

    target = resolve_target(python=python, prefix=prefix, environ=env)
    live = Live(target, environ=env, root=root, runner=runner, deadline=deadline)
    # Start the interpreter query now: nearly every check needs it, and loading the inputs
    # below overlaps with it.
    threading.Thread(target=lambda: live.python, name="envlock-verify-python", daemon=True).start()
    expected = _expected(manifest, locks, requested, (environment, lock_platform))
    config = load_config(config_dir or (os.path.dirname(os.path.abspath(manifest)) if manifest else cwd))
    ctx = Context(live=live, expected=expected, environ=env, config=config, output_dir=output_dir,
                  cwd=cwd, statvfs=statvfs)
    checks = _chosen_checks(checks, build, config.skip)
    raw, results = _run_checks(ctx, checks, deadline, timeout)
    raw += _interpreter_findings(live)
    findings = sort_findings(apply_policy(raw, config, strict=strict))
    return VerifyReport(
        findings=tuple(findings),
        checks=tuple(results),
        target={"kind": target.kind, "prefix": target.prefix, "python": target.python,
                "chosen_by": target.chosen_by},
        manifest=manifest,
        locks=locks,
        config=config.source,
        strict=strict,
        timeout=timeout,
        duration=time.monotonic() - started,
    )
