"""envlock's command line: a thin, lazily loaded click group.

Each subcommand lives in its own module under :mod:`envlock.commands` and is imported only
when it runs (click's documented ``LazyGroup`` pattern), so ``envlock --help`` and
``envlock verify`` start without importing rich or the probes they do not use.

Exit status, for every command: 0 success, 1 a finding (differences, failed checks),
2 envlock could not do its job (bad arguments, unreadable input) — then one line on stderr.
"""

from __future__ import annotations

import importlib
from typing import Any

import click
import sys

__all__ = ["cli", "main"]

#: subcommand name → (module, attribute, one-line help shown by ``envlock --help``)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "snapshot": ("envlock.commands.snapshot", "snapshot", "Record the environment in a manifest."),
    "show": ("envlock.commands.show", "show", "Summarize a manifest file."),
    "libs": ("envlock.commands.libs", "libs", "Show which shared libraries will really load."),
    "diff": ("envlock.commands.diff", "diff", "Explain how environments differ, ranked."),
    "lock": ("envlock.commands.lock", "lock", "Write lockfiles from an environment or a spec."),
    "restore": ("envlock.commands.lock", "restore", "Recreate an env from a manifest or lockfiles."),
    "verify": ("envlock.commands.verify", "verify", "Check that this job will run as intended."),
    "run": ("envlock.commands.run", "run", "Run a job's command and record the run (run.toml)."),
    "bisect": ("envlock.commands.bisect", "bisect", "Find the change that moved a result."),
    "find": ("envlock.commands.find", "find", "Find the results computed in an environment like that."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (mod, _, _) in COMMANDS.items() if _exists(mod)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None or not _exists(spec[0]):
            return None
        module = importlib.import_module(spec[0])
        return getattr(module, spec[1])

    def get_help(self, ctx: click.Context) -> str:
        """click's help text; ``envlock --help`` has nothing left to do once it is written
        (:func:`envlock._exit.finished`)."""
        from envlock._exit import finished

        finished(0)
        return super().get_help(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _exists(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _version() -> str:
    from envlock._version import __version__

    return __version__


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), prog_name="envlock")
def cli() -> None:
    """Make research computing environments reproducible and debuggable.

    \b
    envlock snapshot        record this environment in manifest.toml
    envlock diff A B        why does the same code give a different result?
    envlock verify          will this job run as intended? (job prologue)
    envlock libs torch      which shared libraries will really load, and why
    envlock lock            lockfiles others can install
    envlock restore M       rebuild an environment from its manifest
    envlock bisect G B -- CMD   which change between two environments moved the result
    envlock find DIR QUERY  which of my results were computed in an environment like that?
    """


def _help_width() -> int:
    """The width click's ``HelpFormatter`` lays help out for (click 8: ``FORCED_WIDTH``, else
    :func:`envlock._termwidth.help_width`), computed without importing :mod:`shutil` (with bz2
    and lzma, ~2 ms of ``envlock --help``)."""
    from click import formatting

    from envlock._termwidth import help_width

    if formatting.FORCED_WIDTH is not None:
        return formatting.FORCED_WIDTH
    return help_width()


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point.

    A closed standard stream is ``/dev/null`` to envlock (:func:`envlock._io.null_closed_streams`).
    Every failure is one line on stderr: click's usage errors (exit 2) become
    ``Error: <message> (see 'envlock <command> --help')`` instead of usage text, and an
    interrupt (Ctrl-C, ``SIGINT`` from a job scheduler) is ``Error: interrupted`` (exit 130).
    """
    from envlock._io import null_closed_streams
    from envlock._exit import FINISHED, end_at_once
    from envlock.commands._common import Interrupted

    # `envlock run … >&-` (a job script that closed stdout or stderr): the job still runs,
    # envlock's own messages to the closed stream are dropped
    null_closed_streams()
    program = argv is None  # the console script or `python -m envlock`, not a caller's call
    FINISHED.clear()
    try:
        rv = cli.main(args=argv, prog_name="envlock", standalone_mode=False,
                      terminal_width=_help_width())
    except SystemExit as exc:
        if program:
            end_at_once(exc.code)
        raise
    except click.UsageError as exc:
        ctx = exc.ctx
        where = ctx.command_path if ctx is not None else "envlock"
        click.echo(f"Error: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, Interrupted):
        # children run in their own process groups (so a hung one can be killed whole): end
        # every one still running, so that no interpreter query outlives envlock
        if "envlock._run" in sys.modules:
            sys.modules["envlock._run"].cancel_all()
        click.echo("Error: interrupted", err=True)
        sys.exit(130)
    if program:
        end_at_once(rv if isinstance(rv, int) else 0)
    sys.exit(rv if isinstance(rv, int) else 0)

