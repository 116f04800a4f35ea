"""``envlock show``: summarize a manifest file."""

from __future__ import annotations

import click

from envlock.commands._common import handle_errors

__all__ = ["show"]


@click.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
@handle_errors
def show(manifest: str) -> None:
    """Summarize MANIFEST (an envlock manifest, TOML or JSON)."""
    from rich.console import Console  # noqa: PLC0415

    from envlock.manifest import load  # noqa: PLC0415
    from envlock.render.show import render_show  # noqa: PLC0415

    m = load(manifest)
    render_show(m, Console(highlight=False, soft_wrap=True), path=manifest)
