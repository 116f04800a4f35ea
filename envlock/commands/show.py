"""``envlock show``: summarize a manifest file, list its packages, or print it as JSON."""

from __future__ import annotations

from typing import Any

import click

from envlock.commands._common import handle_errors, pipe_safe, will_exit

__all__ = ["show"]


@click.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--all", "show_all", is_flag=True,
              help="After the summary, list every package (name, version, where from).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text: the summary; json: the manifest itself as JSON.")
@click.option("--width", type=click.IntRange(min=40), default=None, metavar="COLUMNS",
              help="Wrap the text to this many columns (default: the terminal's, else 80).")
@handle_errors
def show(manifest: str, show_all: bool, fmt: str, width: int | None) -> None:
    """Summarize MANIFEST (an envlock manifest, TOML or JSON), or a lockfile (conda-lock.yml,
    pixi.lock, pylock.toml, uv.lock, …): its platforms and package counts.

    The summary: platform and CPU, Python, the numerical stack, GPU and CUDA, BLAS and
    threads, the code, numerics variables, then key packages.  `--format json` prints the
    manifest as JSON (what `envlock snapshot --format json` writes; it reads back the same).
    """
    from envlock.errors import ManifestError, ManifestVersionError  # noqa: PLC0415
    from envlock.manifest import load  # noqa: PLC0415

    try:
        m = load(manifest)
    except ManifestVersionError:
        raise
    except ManifestError as not_manifest:
        lock = _lockfile(manifest, not_manifest)
        if fmt == "json":
            raise ManifestError(f"{manifest}: a {lock.kind} file; --format json prints "
                                "manifests only") from None
        will_exit(0)
        from rich.console import Console  # noqa: PLC0415

        from envlock.render.show import render_lock_summary  # noqa: PLC0415

        render_lock_summary(lock, pipe_safe(Console(highlight=False, soft_wrap=True, width=width)),
                            path=manifest)
        return
    will_exit(0)
    if fmt == "json":
        click.echo(m.dumps("json"), nl=False)
        return
    from rich.console import Console  # noqa: PLC0415

    from envlock.render.show import render_packages, render_show  # noqa: PLC0415

    console = pipe_safe(Console(highlight=False, soft_wrap=True, width=width))
    render_show(m, console, path=manifest)
    if show_all:
        render_packages(m, console)


def _lockfile(path: str, not_manifest: Exception) -> Any:
    """The :class:`~envlock.formats.locks.LockFile` of ``path`` when it is a lockfile, else
    ``not_manifest`` (why it is no manifest) is raised."""
    from envlock import formats  # noqa: PLC0415
    from envlock.errors import ManifestError  # noqa: PLC0415

    try:
        reading = formats.read(path)
    except ManifestError as exc:
        if "unknown format" in str(exc):
            raise not_manifest from None
        raise  # a lockfile, with its own fault
    if reading.lock is None:
        raise not_manifest
    return reading.lock
