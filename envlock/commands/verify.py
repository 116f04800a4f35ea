"""``envlock verify``: check that this job will run as intended (a job prologue)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from envlock._kinds import names_for_help
from envlock.commands._common import (Finite, handle_errors, selection_options, target_options,
                                      will_exit)

__all__ = ["verify"]



@click.command()
@click.option("--manifest", "-m", type=click.Path(dir_okay=False, path_type=str),
              help="The manifest this environment must match (envlock snapshot).")
@click.option("--lock", "locks", multiple=True, type=click.Path(dir_okay=False, path_type=str),
              help=f"A lockfile it must match ({names_for_help('verify --lock')}). Repeatable.")
@selection_options
@click.option("--environment", "-e", "environment", metavar="NAME",
              help="The pixi.lock environment the install took (pixi install -e NAME; "
                   "default: default).")
@click.option("--platform", "lock_platform", metavar="NAME",
              help="The pixi.lock platform entry to compare with (a name of its platforms "
                   "list, such as p2; default: the one named as this machine's subdir, else "
                   "the first of this subdir).")
@target_options
@click.option("--output-dir", type=click.Path(path_type=str),
              help="Directory the job writes to: must exist, be writable, have free space and inodes.")
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
@click.option("--build", "build", is_flag=True,
              help="Run only the build-toolchain checks: would a CUDA/C++ extension built here match torch?")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format (json: see docs/verify.md).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when all is well (text format).")
@click.option("--timeout", type=Finite(0.1, 86400.0), default=30.0, show_default=True,
              metavar="SECONDS", help="Deadline for all checks; unfinished ones are reported as errors.")
@handle_errors
def verify(
    manifest: str | None,
    locks: tuple[str, ...],
    python: str | None,
    prefix: str | None,
    output_dir: str | None,
    strict: bool,
    build: bool,
    fmt: str,
    quiet: bool,
    timeout: float,
    requested: Any,
    environment: str | None = None,
    lock_platform: str | None = None,
) -> None:
    """Check that this job will run as intended.

    Compares the target environment with a manifest and/or lockfiles (packages, builds, Python)
    and checks this node: NVIDIA driver vs the CUDA builds, GPU architectures, the Slurm GPU
    allocation, the output directory, isolation. Exit status: 0 ok (warnings allowed), 1 at
    least one error, 2 verify could not run, 3 no verdict (every error is a
    check that timed out or crashed). Use it in a job script:

    \b
        envlock verify --manifest manifest.toml || exit 1
    """
    from envlock.verify import verify as run_verify

    extra: dict[str, Any] = {"requested": requested} if requested.given else {}
    extra |= {k: v for k, v in (("environment", environment), ("lock_platform", lock_platform))
              if v is not None}
    report = run_verify(manifest=manifest, locks=locks, python=python, prefix=prefix,
                        output_dir=output_dir, strict=strict, timeout=timeout, build=build,
                        **extra)
    will_exit(report.exit_code)
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2))
    elif report.status == "ok" and not any(f.severity != "info" for f in report.findings):
        if not quiet:
            from envlock.render.verifyreport import summary_line

            click.echo(summary_line(report))
    else:
        from envlock.render.verifyreport import print_report

        print_report(report)
    sys.stdout.flush()
    sys.exit(report.exit_code)
