"""``envlock diff A B [C …]``: explain how environments differ, most likely causes first."""

from __future__ import annotations

import sys
from typing import Any

import click

from envlock._kinds import names_for_help
from envlock._exit import finished
from envlock.commands._common import handle_errors, pipe_safe, selection_options, will_exit

__all__ = ["diff"]


def _text(result: Any, width: int | None, show_all: bool) -> None:
    """The text diff on stdout: piped, written without rich when that writes the same bytes
    (:mod:`envlock.render.plainconsole`), else on a rich console."""
    from envlock.render.difftext import render_text
    from envlock.render.plainconsole import plain_console

    plain = plain_console(width)
    if plain is not None:
        render_text(result, plain, show_all=show_all, cut=False)
        if plain.exact():
            sys.stdout.write(plain.text())
            return
    from rich.console import Console

    console = pipe_safe(Console(file=sys.stdout, width=width, soft_wrap=False, highlight=False))
    render_text(result, console, show_all=show_all, cut=console.is_terminal and sys.stdout.isatty())


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


_HELP = f"""Explain how environments differ, most likely causes first.

    INPUTS are envlock manifests, or {names_for_help("diff")} files; a
    directory stands for the *.toml manifests in it.  With three or more inputs each is compared
    with the majority, and the inputs that deviate are named.

    --extra/--group/--all-extras/--all-groups/--no-dev say which install of a lock
    is compared, as the lock's own tool takes them: uv.lock as uv sync/uv export
    (its default groups, dev unless [tool.uv] default-groups, come too); pdm.lock as
    pdm install (--extra/--group NAME: -G NAME; --all-*: -G :all; --no-dev: --prod;
    every dev group comes too); poetry.lock as poetry install (--group: --with,
    --extra: -E, --no-dev: --without dev; main and every non-optional group come
    too).  Against a manifest, what it was installed with; between two inputs, the
    install of each project-lock side (its markers for that install compared as
    markers).  Without
    them a lock with extras or groups is read for the install closest to what a
    manifest has installed, or to what an export of it (pylock.toml,
    requirements.txt) lists; the context says which was read.

    Exit status (as diff(1)): 0 identical, 1 different, 2 trouble: an unreadable or invalid
    input, or inputs with no fact in common to compare.
    """


@click.command("diff", help=_HELP)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
              default="text", show_default=True, help="Output format.")
@click.option("--only", "only", multiple=True, metavar="AREA",
              help="Compare only these areas (package, env, cpu, gpu, code, …); repeatable "
                   "or comma-separated.")
@click.option("--ignore", "ignore", multiple=True, metavar="PATTERN",
              help="Leave out facts matching this glob over 'area:key' or 'key' "
                   "(e.g. 'env:SLURM_*', 'package:pip'); repeatable.")
@click.option("--all", "show_all", is_flag=True,
              help="Show every explanation, not only the ten most likely.")
@click.option("--kb", "kb", multiple=True, type=click.Path(dir_okay=False, path_type=str),
              help="An extra impact-model TOML file (see docs/diff.md); repeatable.")
@click.option("--width", type=click.IntRange(min=40), default=None, metavar="COLUMNS",
              help="Lay the text out for this many columns (default: the terminal's, else 80). "
                   "Piped output is never cut; it wraps.")
@click.option("--dev", "dev", is_flag=True, default=None,
              help="A lock compared with a manifest: its dev category/group was installed "
                   "(default: as its tool does; conda-lock installs dev).")
@selection_options
@handle_errors
def diff(inputs: tuple[str, ...], fmt: str, only: tuple[str, ...], ignore: tuple[str, ...],
         show_all: bool, kb: tuple[str, ...], width: int | None, dev: bool | None,
         requested: Any) -> None:
    """Explain how environments differ, most likely causes first (help: ``_HELP``).

    A lock compared with a manifest is read for one install, as ``verify --lock`` reads it
    (:func:`envlock.commands._common.selection_options`: ``--extra``/``--group``/
    ``--all-extras``/``--all-groups``/``--no-dev`` as each project lock's own tool takes them —
    ``uv sync``, ``pdm install``, ``poetry install``: :mod:`envlock.formats.lockchoice` —
    ``conda-lock install -E``); a project lock compared with another lock or an export, the
    same (:func:`envlock.diff.lockpair.for_other_side`)."""
    import gc

    from envlock.diff import diff as run_diff
    from envlock.render import diffreport as render

    # A diff reads, compares and prints, and builds no reference cycles worth collecting:
    # without the cyclic collector re-walking the first input's 10,000 package tables while
    # the second is read, a 10k-package diff takes ~20 % less CPU time.  Restored after, for
    # a caller in the same process (click's CliRunner, a test).
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = run_diff(list(inputs), kb_files=kb, only=_split(only), ignore=_split(ignore),
                          extras=requested.extras, dev=False if requested.no_dev else dev,
                          requested=requested if requested.given else None)
        code = will_exit(1 if result.differ else 0)
        if fmt == "json":
            click.echo(render.render_json(result, show_all=show_all), nl=False)
        elif fmt == "markdown":
            click.echo(render.render_markdown(result, show_all=show_all), nl=False)
        else:
            _text(result, width, show_all)
        sys.stdout.flush()
        sys.exit(finished(code))
    finally:
        if collecting:
            gc.enable()
