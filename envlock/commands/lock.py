"""``envlock lock`` and ``envlock restore``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from envlock._kinds import names_for_help
from envlock.commands._common import (handle_errors, index_admission_options, selection_options,
                                      target_options, will_exit)
import sys

__all__ = ["lock", "restore"]


def _python_version(value: str | None) -> str | None:
    """``--python-version``: a usage error unless uv takes it as a version."""
    from envlock.errors import EnvlockError
    from envlock.lock._api import check_python_version

    try:
        return check_python_version(value)
    except EnvlockError as exc:
        raise click.BadParameter(str(exc)) from None


@contextlib.contextmanager
def _spinner(message: str) -> Iterator[None]:
    """A rich status spinner on stderr while a solve or install runs (nothing if not a tty)."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    with console.status(message):
        yield


def _report(result: Any) -> None:
    import shlex

    for path in result.files:
        click.echo(f"wrote {path}")
    if result.files:
        files = " ".join(shlex.quote(str(p)) for p in result.files)
        click.echo(f"recreate with: envlock restore {files} --prefix NEW_ENV --run", err=True)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    conda = [s for s in result.skipped if s.kind == "conda"]
    lost = [s for s in result.skipped if s.kind != "conda"]
    if conda:
        names = ", ".join(f"{s.name} {s.version}" for s in conda)
        click.echo(f"in conda-lock.yml, not pylock.toml (installed by conda): {names}", err=True)
    if lost:
        click.echo("not reproducible from any lockfile:", err=True)
        for s in lost:
            click.echo(f"  {s.name} {s.version}: {s.reason}", err=True)


_VARIANT_HELP = ("Index for pip versions with this local label (VARIANT=URL, repeatable); "
                 "default for PyTorch's labels (cpu, cuXYZ, rocmX.Y, xpu): "
                 "https://download.pytorch.org/whl/VARIANT.")


@click.command("lock")
@click.option("--from-env", "from_env", is_flag=True,
              help="Freeze the target environment (--python/--prefix, default: the active one).")
@click.option("--from-manifest", "from_manifest", type=click.Path(dir_okay=False),
              help="Lock the environment a manifest records, without building it.")
@click.option("--index", "variant_index", multiple=True, metavar="VARIANT=URL",
              help="With --from-manifest: " + _VARIANT_HELP)
@target_options
@click.option("-f", "--file", "spec", type=click.Path(dir_okay=False),
              help=f"Solve a conda {names_for_help('lock -f')} into conda-lock.yml.")
@click.option("-r", "--requirements", "requirements", type=click.Path(dir_okay=False),
              help="Resolve requirements.in or pyproject.toml with uv into pylock.toml.")
@click.option("-o", "--output", "out_dir", default=".", show_default=True,
              type=click.Path(file_okay=False), help="Directory for the lockfiles.")
@click.option("-p", "--platform", "platforms", multiple=True,
              help="Target platform of -f (repeatable): linux-64, osx-arm64, …")
@click.option("-c", "--channel", "channels", multiple=True,
              help="Use this channel instead of the file's (repeatable; a URL or directory).")
@click.option("--solver", type=click.Choice(["auto", "conda-lock", "rattler"]), default="auto",
              show_default=True, help="auto: conda-lock if conda/mamba/micromamba exists, "
              "else py-rattler.")
@click.option("--virtual-package-spec", type=click.Path(dir_okay=False),
              help="conda-lock virtual-package spec (__cuda, __glibc per platform).")
@click.option("--with-cuda", "cuda", help="Assume this __cuda version (e.g. 12.4).")
@click.option("--without-cuda", is_flag=True, help="Assume no __cuda virtual package.")
@click.option("-i", "--index-url", help="pip index URL for uv (replaces PyPI).")
@click.option("--extra-index-url", multiple=True, help="Further pip index (repeatable).")
@click.option("--find-links", multiple=True, help="Directory or page of wheels (repeatable).")
@click.option("--no-index", is_flag=True, help="Use only --find-links.")
@click.option("--no-pip-config", is_flag=True,
              help="With --from-env: do not take index options from the target's pip config.")
@click.option("--requirements-txt", is_flag=True,
              help="With -r: write requirements.txt with hashes instead of pylock.toml.")
@click.option("--python-version", callback=lambda _c, _p, v: _python_version(v),
              help="With -r: resolve for this Python version.")
@index_admission_options("With -r/-f: let the file use")
@click.option("--force", is_flag=True, help="Replace existing lockfiles.")
@handle_errors
def lock(**options: Any) -> None:
    """Write lockfiles from an environment or a spec.

    \b
    envlock lock --from-env --python ENV/bin/python   conda-lock.yml + pylock.toml
    envlock lock -f environment.yml -p linux-64       conda-lock.yml (solved)
    envlock lock -r requirements.in                   pylock.toml (uv)
    envlock lock --from-manifest manifest.toml        the lockfiles of a recorded env

    A manifest or spec file is data (docs/trust.md): the interpreter a manifest names is never
    run (--python chooses one for --from-manifest), no value becomes an option, and an index a
    file names is used only if your configuration names it or --allow-index admits it.
    """
    from envlock.lock._api import index_options, variant_map, write_lockfiles

    source = (options["from_manifest"] and f"Locking the environment {options['from_manifest']} records…"
              or options["spec"] and f"Solving {options['spec']}…"
              or options["requirements"] and f"Resolving {options['requirements']} with uv…"
              or "Reading the environment and locking its packages…")
    index = index_options(options["index_url"], options["extra_index_url"], options["find_links"],
                          options["no_index"])
    with _spinner(source):
        result = write_lockfiles(
            options["out_dir"], from_env=options["from_env"], from_manifest=options["from_manifest"],
            spec=options["spec"], requirements=options["requirements"], python=options["python"],
            prefix=options["prefix"], index=index, index_map=variant_map(options["variant_index"]),
            force=options["force"], use_pip_config=not options["no_pip_config"],
            platforms=options["platforms"], solver=options["solver"], channels=options["channels"],
            virtual_package_spec=options["virtual_package_spec"], cuda=options["cuda"],
            without_cuda=options["without_cuda"], python_version=options["python_version"],
            requirements_txt=options["requirements_txt"], allow_index=options["allow_index"],
            trust_lockfile_indexes=options["trust_lockfile_indexes"])
    _report(result)


_RESTORE_HELP = f"""Recreate an environment from a manifest or lockfiles (dry run unless --run).

    INPUTS: an envlock manifest, or lockfiles ({names_for_help("restore")};
    requirements hash-pinned).  A uv.lock, pdm.lock or poetry.lock is converted for this
    machine's platform and Python (--python-version) and the install its own tool makes
    with no option (uv sync: the default groups, dev unless [tool.uv] default-groups says;
    pdm install: the groups it was locked with; poetry install: every group not optional;
    a note says what was assumed without the pyproject.toml beside the lock), with the
    extras and groups --extra/--group/--all-extras/--all-groups/--no-dev add or take away
    (as uv sync, pdm install -G, poetry install --with/-E take them), into a
    pylock.toml (poetry: a hash-pinned requirements.txt) that --run writes beside the new
    environment; a pixi.lock's environment (--environment, default: default) for this platform
    (--platform NAME: one of its platforms list, such as p2 = linux-64 with __cuda=12)
    into a conda explicit list and a pylock.toml of its PyPI packages.  A lockfile given, or
    recorded in the manifest and unchanged, is used; else the manifest alone: conda packages as name=version=build from
    their recorded channels, pip packages at their exact versions with uv, editable/VCS ones
    from their recorded commit.
    After --run the result is verified against the manifest.  Also lists what no rebuild
    restores (driver, system CUDA, compilers, CPU/GPU, kernel, …).  Exit status: 0 done (or plan
    printed), 1 the rebuilt environment differs from the manifest, 2 trouble.
    """


@click.command("restore", help=_RESTORE_HELP)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--into", "--prefix", "prefix", type=click.Path(file_okay=False),
              help="The environment directory to create (default: a new directory beside the "
                   "first input, <name>-restored).")
@click.option("--python-version", callback=lambda _c, _p, v: _python_version(v),
              help="Python for a new venv (default: the manifest's).")
@click.option("--python", "python", type=click.Path(dir_okay=False),
              help="Interpreter for a venv restored from a manifest (default: one of the "
                   "recorded version found on this machine).")
@click.option("--index", "variant_index", multiple=True, metavar="VARIANT=URL", help=_VARIANT_HELP)
@click.option("-i", "--index-url", help="pip index URL for uv (replaces PyPI).")
@click.option("--find-links", multiple=True, help="Directory of wheels (repeatable).")
@click.option("--no-index", is_flag=True, help="Use only --find-links.")
@index_admission_options("Let a lockfile use")
@selection_options(installs=True)
@click.option("--environment", "-e", "environment", metavar="NAME",
              help="The environment of a pixi.lock to install (pixi install -e; default: "
                   "default).")
@click.option("--platform", "lock_platform", metavar="NAME",
              help="The pixi.lock platform entry to install (a name of its platforms list, "
                   "such as p2; default: the one named as this machine's subdir, else the "
                   "first of this subdir, and the others of this subdir are named).")
@click.option("--run", "do_run", is_flag=True,
              help="Build the environment (default: print the plan), then verify it.")
@handle_errors
def restore(inputs: tuple[str, ...], prefix: str | None, python_version: str | None,
            python: str | None, variant_index: tuple[str, ...], index_url: str | None,
            find_links: tuple[str, ...], no_index: bool, allow_index: tuple[str, ...],
            trust_lockfile_indexes: bool, environment: str | None, lock_platform: str | None,
            do_run: bool, requested: Any) -> None:
    """Recreate an environment (help: ``_RESTORE_HELP``)."""
    from envlock.lock._api import apply_restore, restore as plan_only, variant_map

    plan = plan_only(inputs, prefix, python_version=python_version,
                     index_map=variant_map(variant_index), index_url=index_url,
                     find_links=find_links, no_index=no_index, python=python,
                     allow_index=allow_index, trust_lockfile_indexes=trust_lockfile_indexes,
                     requested=requested, environment=environment,
                     lock_platform=lock_platform).plan
    for warning in plan.warnings:
        click.echo(f"warning: {warning}", err=True)
    for note in plan.notes:
        click.echo(f"note: {note}", err=True)
    if not do_run:
        click.echo("# Recreate the environment from the manifest alone (dry run; --run "
                   "builds it, then verifies it):" if plan.manifests
                   else "# Recreate the environment:")
        _say_sources(plan)
        if not plan.steps:
            click.echo("# (nothing to install)")
        for step in plan.steps:
            click.echo(f"# {step.title}")
            click.echo(f"# (--run writes {step.argv[1]})" if step.kind == "write" else step.shell)
        _say_not_restored(plan)
        return
    _say_sources(plan)
    with _spinner(f"Recreating {plan.prefix}…" if not plan.manifests else
                  f"Recreating {plan.prefix} and verifying it against {plan.manifests[0]}…"):
        done = apply_restore(plan)
    for line in done.lines:
        click.echo(line)
    check = done.check
    if check is None:
        _say_not_restored(plan)
        return
    will_exit(check.exit_code)
    click.echo(f"# Came back exactly: {len(check.exact)} package(s)")
    for item in check.exact:
        click.echo(f"#   {item}")
    against = "the manifest" if plan.manifests else "the lockfile"
    click.echo(f"# Packages and Python that differ from {against}:"
               + ("" if check.differs else " none"))
    for item in check.differs:
        click.echo(f"#   {item}")
    click.echo("# A rebuild can never restore (comes from the machine or the job):")
    for item in check.machine:
        click.echo(f"#   {item}")
    sys.stdout.flush()
    sys.exit(check.exit_code)


def _say_not_restored(plan: Any) -> None:
    if plan.not_restored:
        click.echo("# Not restored by any lockfile (comes from the machine or the job):")
        for item in plan.not_restored:
            click.echo(f"#   {item}")


def _say_sources(plan: Any) -> None:
    """What --run contacts and builds, before any step is shown or run (docs/trust.md)."""
    from envlock.redact import printable

    if plan.contacts:
        click.echo("# --run contacts:")
        for item in plan.contacts:
            click.echo(printable(f"#   {item}"))
    if plan.builds:
        click.echo("# --run builds from source (runs code from there):")
        for item in plan.builds:
            click.echo(printable(f"#   {item}"))
    if plan.python is not None and plan.python.path is None and plan.python.proposed:
        click.echo(printable(f"# the manifest names the interpreter {plan.python.proposed}: "
                             "not run (a manifest is data); --python PATH chooses one"))
