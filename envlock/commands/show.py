"""``envlock show``: summarize a manifest (or any file envlock reads), list its packages, or
print it as JSON."""

from __future__ import annotations

import json
from typing import Any

import click

from envlock._kinds import names_for_help
from envlock.commands._common import handle_errors, pipe_safe, will_exit

__all__ = ["show"]


_HELP = f"""Summarize MANIFEST: an envlock manifest, or any file envlock reads.

    For a manifest, the summary: platform and CPU, Python, the numerical stack, GPU and CUDA,
    BLAS and threads, the code, numerics variables, then key packages.  For another file
    ({names_for_help("show", conj="and")}): its kind, platforms,
    conda and pip package counts and Python.  `--format json` prints the manifest as JSON (what
    `envlock snapshot --format json` writes; it reads back the same), or the reading of another
    file.
    """


@click.command(help=_HELP)
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--all", "show_all", is_flag=True,
              help="After the summary, list every package (name, version, where from).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text: the summary; json: the manifest itself as JSON.")
@click.option("--width", type=click.IntRange(min=40), default=None, metavar="COLUMNS",
              help="Wrap the text to this many columns (default: the terminal's, else 80).")
@handle_errors
def show(manifest: str, show_all: bool, fmt: str, width: int | None) -> None:
    """Summarize MANIFEST (help: ``_HELP``)."""
    from envlock.errors import ManifestError, ManifestVersionError
    from envlock.manifest import load

    try:
        m = load(manifest, reader=_settled)
    except ManifestVersionError:
        raise
    except ManifestError as not_manifest:
        _show_foreign(manifest, _reading(manifest, not_manifest), show_all, fmt, width)
        return
    will_exit(0)
    if fmt == "json":
        click.echo(m.dumps("json"), nl=False)
        return
    from rich.console import Console

    from envlock.render.showreport import render_packages, render_show

    console = pipe_safe(Console(highlight=False, soft_wrap=True, width=width))
    render_show(m, console, path=manifest)
    if show_all:
        render_packages(m, console)


def _settled(data: dict[str, Any]) -> dict[str, Any]:
    """A run record still ``running`` as a reader can state it (its supervisor gone, Slurm's
    word on the job: :func:`envlock.runs.unfinished.settle`); anything else unchanged."""
    run = data.get("run")
    if not isinstance(run, dict) or run.get("outcome") != "running":
        return data
    from envlock.runs.unfinished import settle

    return settle(data)


def _reading(path: str, not_manifest: Exception) -> Any:
    """The :class:`envlock.formats.Reading` of ``path``, a file envlock reads that is not a
    manifest; its reader's error when it is none it knows, ``not_manifest`` when it reads as a
    manifest the model refuses.

    :raises ManifestError: as said.
    """
    from envlock import formats

    reading = formats.read(path)  # another kind, or its own fault ("unknown format")
    if reading.kind == "manifest":  # read by formats but not by the model: say the model's why
        raise not_manifest
    return reading


def _show_foreign(path: str, reading: Any, show_all: bool, fmt: str, width: int | None) -> None:
    from envlock.render.readings import foreign_json, render_foreign

    will_exit(0)
    if fmt == "json":
        click.echo(json.dumps(foreign_json(reading), indent=2, default=str))
        return
    from rich.console import Console

    console = pipe_safe(Console(highlight=False, soft_wrap=True, width=width))
    render_foreign(reading, console, path=path, show_all=show_all)
