"""``envlock bisect GOOD BAD -- CMD``: find the change between two environments that moved
CMD's result."""

from __future__ import annotations

import sys
from typing import Any

import click

from envlock.commands._common import Finite, handle_errors, will_exit

__all__ = ["bisect"]


@click.command("bisect")
@click.argument("good", type=click.Path(dir_okay=False, exists=True))
@click.argument("bad", type=click.Path(dir_okay=False, exists=True))
@click.argument("command", nargs=-1, required=True)
@click.option("--metric", metavar="REGEX",
              help="Judge by a number CMD prints (the regex's first group, which it must have) "
                   "instead of its exit status.")
@click.option("--rtol", type=Finite(0.0, 1e300), default=1e-9, show_default=True,
              help="Relative tolerance of --metric against GOOD's value.")
@click.option("--atol", type=Finite(0.0, 1e300), default=0.0, show_default=True,
              help="Absolute tolerance of --metric.")
@click.option("--repeat", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="Runs per step (majority verdict; median value) for noisy commands.")
@click.option("--timeout", type=Finite(0.1, 7 * 86400.0), default=600.0, show_default=True,
              metavar="SECONDS", help="Per run of CMD; a run that times out is skipped.")
@click.option("--index", "variant_index", multiple=True, metavar="VARIANT=URL",
              help="Index for pip versions with this local label (default for cpu, cuXYZ, "
                   "rocmX.Y, xpu: https://download.pytorch.org/whl/VARIANT).")
@click.option("-i", "--index-url", help="pip index URL for uv (replaces PyPI).")
@click.option("--find-links", multiple=True, help="Directory of wheels (repeatable).")
@click.option("--no-index", is_flag=True, help="Use only --find-links.")
@click.option("--python", "python", type=click.Path(dir_okay=False),
              help="Interpreter for every environment (default: one of GOOD's version).")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Directory for environments and logs (default: a new temporary one).")
@click.option("--keep", is_flag=True, help="Keep the environments built (under WORKDIR/envs).")
@click.option("--good-env", type=click.Path(file_okay=False, exists=True), default=None,
              help="Run GOOD in this environment instead of building it (when it matches GOOD).")
@click.option("--bad-env", type=click.Path(file_okay=False, exists=True), default=None,
              help="Run BAD in this environment instead of building it (when it matches BAD).")
@click.option("--build-ends", is_flag=True,
              help="Build GOOD and BAD too, even when their own environments are here.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
              default="text", show_default=True, help="Output format.")
@handle_errors
def bisect(good: str, bad: str, command: tuple[str, ...], fmt: str, **options: Any) -> None:
    """Find which change between GOOD and BAD moves CMD's result.

    \b
    envlock bisect good.toml bad.toml -- python train.py --steps 10
    envlock bisect good.toml bad.toml --metric 'loss=(\\S+)' --rtol 1e-6 -- python eval.py

    GOOD and BAD are manifests (or any input `envlock diff` reads).  Environments are built
    from GOOD with subsets of the changes applied (uv), CMD runs in each; delta debugging
    narrows them to a minimal set.  Verdict: exit status 0 good, 125 skip, other bad (as
    `git bisect run`), or --metric.  Exit status: 0 culprit found, 1 GOOD and BAD agree or
    nothing decided, 2 trouble.
    """
    from rich.console import Console

    from envlock.lock._api import variant_map as _variant_map
    from envlock.render import bisectreport as report
    from envlock.reproduce import Judge
    from envlock.reproduce import bisect as run_bisect
    from envlock.reproduce import check_metric

    judge = Judge(metric=options["metric"], rtol=options["rtol"], atol=options["atol"],
                  repeat=options["repeat"], timeout=options["timeout"])
    check_metric(options["metric"])  # before anything is read or built
    console = Console(stderr=True)
    status = console.status("Reading GOOD and BAD…") if console.is_terminal else None

    def progress(message: str) -> None:
        if status is not None:
            status.update(message)
        else:  # stderr is a file (a batch job's log): one line a step, so the log shows progress
            click.echo(f"envlock bisect: {message}", err=True)

    if status is not None:
        status.start()
    try:
        result = run_bisect(
            good, bad, command, judge=judge, index_map=_variant_map(options["variant_index"]),
            index_url=options["index_url"], find_links=options["find_links"],
            no_index=options["no_index"], python=options["python"],
            workdir=options["workdir"], keep=options["keep"],
            own_envs=not options["build_ends"], good_env=options["good_env"],
            bad_env=options["bad_env"], progress=progress)
    finally:
        if status is not None:
            status.stop()
    render = {"text": report.render_text, "markdown": report.render_markdown,
              "json": report.render_json}[fmt]
    will_exit(result.exit_code)
    click.echo(render(result), nl=False)
    sys.stdout.flush()
    sys.exit(result.exit_code)
