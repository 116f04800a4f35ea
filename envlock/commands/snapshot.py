"""``envlock snapshot``: record the target environment in a manifest file."""

from __future__ import annotations

import os
import sys

import click

from envlock.commands._common import handle_errors, target_options

__all__ = ["expand_output", "snapshot"]


def expand_output(template: str, environ: dict[str, str] | None = None) -> str:
    """Fill the ``{host}``, ``{node}``, ``{job}`` and ``{time}`` placeholders of an output path
    (:func:`envlock._placeholders.expand_path`).

    :raises click.BadParameter: on an unknown placeholder.
    """
    from envlock._placeholders import expand_path
    from envlock.errors import EnvlockError

    try:
        return expand_path(template, environ)
    except EnvlockError as exc:
        raise click.BadParameter(str(exc), param_hint="'-o'") from None


@click.command()
@target_options
@click.option("-o", "--output", default="manifest.toml", show_default=True,
              help="Output file; '-' for stdout. Placeholders: {host}, {node}, {job}, {time}.")
@click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default=None,
              help="Output format [default: from the file suffix, else toml].")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--repo", type=click.Path(file_okay=False, exists=True),
              help="Directory whose git checkout is recorded [default: the working directory].")
@click.option("--env-allow", multiple=True, metavar="NAME[*]",
              help="Also record this variable (or prefix, with a trailing *). Repeatable.")
@click.option("--env-deny", multiple=True, metavar="NAME[*]",
              help="Never record this variable (or prefix). Repeatable.")
@click.option("--import", "do_import", is_flag=True,
              help="Also import torch in the target interpreter (seconds) for what only an "
                   "import can tell: cuDNN loaded, CUDA available, TF32 defaults.")
@click.option("--lock", "locks", multiple=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="Also record this lockfile in [lockfiles] (the ones beside "
                                   "the manifest are found by themselves). Repeatable.")
@click.option("--save-patch", is_flag=True,
              help="Write the uncommitted diff (git diff HEAD --binary) and the untracked file "
                   "names beside the manifest as <name>.patch; its sha256 goes in [git].")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@handle_errors
def snapshot(
    python: str | None,
    prefix: str | None,
    output: str,
    fmt: str | None,
    force: bool,
    repo: str | None,
    env_allow: tuple[str, ...],
    env_deny: tuple[str, ...],
    do_import: bool,
    locks: tuple[str, ...],
    save_patch: bool,
    quiet: bool,
) -> None:
    """Record the target environment in a manifest file.

    The target is --python, --prefix, the active conda env (CONDA_PREFIX), the active venv
    (VIRTUAL_ENV), or the first python3 on PATH, in that order.
    """
    try:
        _snapshot(python, prefix, output, fmt, force, repo, env_allow, env_deny, do_import,
                  locks, save_patch, quiet)
    except KeyboardInterrupt:
        # Ctrl-C: every child process group is already killed (probes.snapshot); leave now
        # rather than wait for probe threads to notice.
        from envlock import _run

        _run.cancel_all()
        click.echo("Error: interrupted", err=True)
        sys.stderr.flush()
        os._exit(130)


def _snapshot(
    python: str | None, prefix: str | None, output: str, fmt: str | None, force: bool,
    repo: str | None, env_allow: tuple[str, ...], env_deny: tuple[str, ...], do_import: bool,
    locks: tuple[str, ...], save_patch: bool, quiet: bool,
) -> None:
    from pathlib import Path

    from envlock.probes.assemble import snapshot as take
    from envlock.probes.target import resolve_target
    from envlock.redact import printable, redact_text

    if not output.strip():
        raise click.UsageError("-o needs a file name (or - for standard output)")
    if save_patch and output == "-":
        raise click.UsageError("--save-patch needs -o FILE (the patch is written beside it)")
    path = expand_output(output) if output != "-" else "-"
    # The target first: a wrong --python/--prefix is the error to report, whatever -o holds.
    target = resolve_target(python=python, prefix=prefix)
    if path != "-":
        # Checked again, atomically, when the file is created; this spares the probes' work.
        from envlock._io import check_writable

        check_writable(path, force=force, special=True)
    lock_dir = os.path.dirname(os.path.abspath(path)) if path != "-" else None
    from envlock.errors import ArgumentsError

    try:
        manifest = take(target=target, python=python, repo=repo, env_allow=env_allow,
                        env_deny=env_deny, command=["envlock", *sys.argv[1:]], do_import=do_import,
                        lock_dir=lock_dir, locks=locks, output=None if path == "-" else path,
                        save_patch=save_patch, force=force, require_python=True)
    except ArgumentsError as exc:
        raise click.UsageError(str(exc)) from None
    patch_path = (Path(path).with_suffix(".patch") if save_patch and manifest.git
                  and manifest.git.patch else None)
    if not quiet:
        t = manifest.target
        click.echo(
            printable(f"target: {t.kind} environment {t.prefix} "
                      f"(chosen by {t.chosen_by}; interpreter {t.python or 'none'})"),
            err=True,
        )
        for line in manifest.envlock.warnings:
            click.echo(f"warning: {redact_text(printable(line))}", err=True)
    if output == "-":
        click.echo(manifest.dumps(fmt or "toml"), nl=False)
        return
    written = manifest.write(path, fmt=fmt, force=force)
    if not quiet:
        n_pip = len(manifest.pip.packages) if manifest.pip else 0
        n_conda = len(manifest.conda.packages) if manifest.conda else 0
        counts = f"{n_pip} Python distributions" + (
            f", {n_conda} conda packages" if manifest.conda else "")
        took = manifest.envlock.duration
        click.echo(printable(f"wrote {written} ({counts}) in {took:.2f} s"), err=True)
        if patch_path is not None:
            click.echo(printable(f"wrote {patch_path} ({patch_path.stat().st_size} bytes)"), err=True)
