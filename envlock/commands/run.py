"""``envlock run``: run a job's command and record the run (``run.toml``, ``docs/run.md``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from envlock.commands._common import fail, handle_errors, target_options

__all__ = ["run"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--dir", "run_dir", default="envlock-runs/{time}-{job}-{host}-{pid}", show_default=True,
              help="Run directory for manifest.toml and run.toml. Placeholders: {host}, {node}, {job}, "
                   "{time}, {rank}, {pid}.")
@click.option("--verify", "verify_policy", type=click.Choice(["none", "report", "error", "strict"]),
              default="none", show_default=True,
              help="Run envlock verify first: report (print, run anyway), error (exit 1 on an "
                   "error, without running), strict (on warnings too).")
@click.option("--manifest", "-m", type=click.Path(dir_okay=False, path_type=str),
              help="The manifest verify compares with (with --verify).")
@target_options
@click.option("--keep-children", is_flag=True,
              help="Leave processes that outlive CMD running (default: kill them).")
@click.option("--force", is_flag=True, help="Replace an earlier run.toml in the run directory.")
@click.option("-q", "--quiet", is_flag=True, help="Print only warnings and errors of the run.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@handle_errors
def run(run_dir: str, verify_policy: str, manifest: str | None, python: str | None,
        prefix: str | None, keep_children: bool, force: bool, quiet: bool,
        command: tuple[str, ...]) -> None:
    """Run CMD, recording the run: envlock run [OPTIONS] -- CMD [ARGS...]

    Takes a snapshot into the run directory, runs CMD in its own process group with stdin,
    stdout, stderr and environment untouched, forwards SIGTERM/SIGINT/SIGUSR1, samples its
    memory (and GPU memory), and writes run.toml: resources used against what Slurm granted,
    the exit status or signal, leftover child processes (killed unless --keep-children).
    Exit status: CMD's (128+n for signal n; 127/126 when CMD cannot be started); 1 when
    --verify stopped the run; 2 when envlock could not run.
    """
    from envlock.runs import job

    # envlock's own messages must never stop the job: a job script's `2>&1 | tee log` whose
    # reader dies leaves stderr a broken pipe, and CMD runs and is recorded all the same.
    sys.stderr = _Tolerant(sys.stderr)  # type: ignore[assignment]
    if manifest and verify_policy == "none":
        fail("--manifest is what --verify compares with; add --verify error (or report, strict)")
    argv = ["envlock", *sys.argv[1:]]
    path = job.prepare_dir(job.expand_dir(run_dir), force=force)
    say = (lambda _m: None) if quiet else (lambda m: click.echo(f"envlock run: {m}", err=True))
    chosen_by = None
    if python is None and prefix is None:
        # `envlock run -- /envs/good/bin/python train.py`: the run's environment is the one
        # of the interpreter CMD runs, not the venv active in this shell
        python = job.command_interpreter(command)
        if python is not None:
            chosen_by = "CMD"
            say(f"environment of CMD's interpreter {python}")
    verify_exit = None
    if verify_policy != "none":
        from envlock.render.verifyreport import print_report, summary_line
        from envlock.verify import verify

        report = verify(manifest=manifest, python=python, prefix=prefix, output_dir=path,
                        strict=verify_policy == "strict")
        verify_exit = report.exit_code
        if report.status == "ok" and not any(f.severity != "info" for f in report.findings):
            say(summary_line(report))
        else:
            print_report(report, file=sys.stderr)  # type: ignore[arg-type]
        if verify_exit and verify_policy in ("error", "strict"):
            rec = job.record_not_started(path, command, reason="envlock verify found errors",
                                         exit_code=verify_exit, verify=verify_policy,
                                         verify_exit=verify_exit, target=_target(report),
                                         envlock_command=argv)
            fail(f"verify failed; {command[0]} not started (record: {rec})", verify_exit)
    manifest_path, target, warnings = job.take_snapshot(path, python=python, prefix=prefix,
                                                        command=argv, chosen_by=chosen_by,
                                                        force=force)
    for w in warnings:
        click.echo(f"envlock run: warning: {w}", err=True)
    if manifest_path:
        say(f"snapshot {manifest_path}")
    sys.stdout.flush()
    sys.stderr.flush()
    from envlock.runs.supervise import supervise

    def show(findings: object) -> None:
        for f in findings:  # type: ignore[attr-defined]
            if quiet and f.severity == "info":
                continue
            click.echo(f"envlock run: {f.severity}: {f.title}", err=True)

    result = supervise(command, record_path=os.path.join(path, job.RECORD), target=target,
                       manifest_path=manifest_path, verify=None if verify_policy == "none"
                       else verify_policy, verify_exit=verify_exit, keep_children=keep_children,
                       envlock_command=argv, on_findings=show)
    if result.write_error:
        click.echo(f"Error: could not write the run record: {result.write_error}", err=True)
    if result.record.outcome == "not-started":
        click.echo(f"Error: {result.record.error}", err=True)
    say(f"{result.record.outcome}; record {result.path}")
    sys.exit(result.exit_code)


def _target(report: object) -> dict[str, object]:
    t = dict(getattr(report, "target", {}) or {})
    out = {"kind": t.get("kind") or "system", "prefix": t.get("prefix") or sys.prefix,
           "python": t.get("python"), "chosen-by": t.get("chosen_by") or "none"}
    return {k: v for k, v in out.items() if v is not None}


class _Tolerant:
    """A text stream that drops what it cannot write (``EPIPE``, a full disk, a closed file)
    instead of raising: envlock's progress and findings lines, never CMD's output."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._broken = False

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                return int(self._stream.write(text))
            except (OSError, ValueError):
                self._broken = True
        return len(text)

    def flush(self) -> None:
        if not self._broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._broken = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
