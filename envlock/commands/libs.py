"""``envlock libs``: which shared libraries a module will really load, and why.

The answer comes from envlock's model of glibc's loader (:func:`envlock.libs.runlibs.run_libs`), without
importing the module; ``--runtime`` then imports it in the target interpreter and compares
``/proc/self/maps`` with the model.  Exit status: 0 fine, 1 an error-level finding (or an
unexplained ``--runtime`` difference), 2 envlock could not run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import click

from envlock.commands._common import handle_errors, target_options, will_exit

__all__ = ["libs", "target_query"]

#: Seconds allowed for the target interpreter to report its sys.path.
QUERY_TIMEOUT = 20.0

def target_query(
    python: str, prefix: str, *, environ: Mapping[str, str], cache: bool = True,
) -> tuple[list[str], str | None, str | None]:
    """The target interpreter's ``sys.path`` and ``sys.executable``, asked once (with a
    timeout) and cached while valid (:func:`envlock.probes.target.query_sys_path`; not
    with ``cache=False``, i.e. ``--no-cache``).  ``sys.executable`` is the program that really
    runs when ``python`` is a wrapper script (a pyenv shim execs the real interpreter).

    :returns: ``(sys_path, executable, error)``; on failure the prefix's ``site-packages``,
        ``None`` and a message.
    """
    from envlock.probes.target import ResolvedTarget, query_sys_path

    target = ResolvedTarget(kind="venv", prefix=prefix, python=python, chosen_by="--python")
    got, executable, error = query_sys_path(target, timeout=QUERY_TIMEOUT, environ=dict(environ), cache=cache)
    path = list(got)
    if error is not None:
        return path, None, f"could not ask {python} for sys.path ({error}); using {path}"
    return path, executable, None


# -- the command ---------------------------------------------------------------------------


@click.command()
@click.argument("targets", nargs=-1, metavar="[MODULE|FILE]...")
@target_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format (json: schema 1, see docs/libs.md).")
@click.option("--why", "why", metavar="SONAME", help="List every place tried for SONAME, in order.")
@click.option("--runtime", is_flag=True,
              help="Also import the module in the target and compare /proc/self/maps with the model.")
@click.option("--symbols/--no-symbols", default=True, show_default=True,
              help="Check that every undefined symbol binds, as Python's RTLD_NOW import "
                   "does (--no-symbols: search paths and versions only).")
@click.option("--secure", is_flag=True,
              help="Model the target as a setuid/setgid program (AT_SECURE): LD_LIBRARY_PATH, "
                   "LD_PRELOAD and GLIBC_TUNABLES ignored, $ORIGIN restricted.")
@click.option("--no-cache", is_flag=True,
              help="Recompute everything: use and fill no cache (ELF facts, owners, answers).")
@handle_errors
def libs(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, symbols: bool, secure: bool, no_cache: bool,
) -> None:
    """Show which shared libraries MODULE (or FILE) will really load, and why.

    Models glibc's dynamic loader for the target interpreter: RPATH/RUNPATH, LD_LIBRARY_PATH,
    LD_PRELOAD, ld.so.cache, default directories, torch's preloading of nvidia wheels, and
    well-known run-time dlopens (libcuda.so.1, cuDNN sub-libraries). Nothing is imported
    unless --runtime is given.
    """
    from envlock.libs.runlibs import check_arguments

    check_arguments(targets, why)
    environ = dict(os.environ)
    from envlock.cache import is_enabled
    from envlock.libs.answer import memo_answer

    no_cache = no_cache or not is_enabled(environ)
    argv = ["libs", *targets, f"--python={python}", f"--prefix={prefix}", f"--format={fmt}", f"--why={why}",
            f"--symbols={symbols}", *(["--secure"] if secure else [])]
    keep = not (no_cache or runtime)

    def compute(rec: Any) -> tuple[str, str, int]:
        if not keep:  # nothing is stored: the inputs need not be recorded
            return _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ, symbols,
                            secure=secure)
        from envlock.probes.target import record_resolution

        record_resolution(rec, python=python, prefix=prefix, environ=environ)
        return _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ, symbols, rec=rec,
                        secure=secure)

    out, err, code = memo_answer(argv, environ, compute, enabled=keep)
    will_exit(code)
    if err:
        click.echo(err, err=True, nl=False)
    if fmt == "text":  # folded after the answer cache: the width is not one of its inputs
        import shutil

        from envlock.render.libsreport import fit

        out = fit(out, shutil.get_terminal_size().columns)
    sys.stdout.write(out)
    sys.stdout.flush()  # a reader gone shows here, inside handle_errors
    if code:
        sys.exit(code)


def _compute(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, no_cache: bool, environ: dict[str, str], symbols: bool = False, rec: Any = None,
    secure: bool = False,
) -> tuple[str, str, int]:
    """Resolve the target, run :func:`envlock.libs.runlibs.run_libs`, render its answer:
    ``(stdout, stderr, exit status)``."""
    from envlock.errors import TargetError
    from envlock.libs.runlibs import run_libs
    from envlock.probes.target import resolve_target

    target = resolve_target(python=python, prefix=prefix, environ=environ)
    if target.python is None:
        raise TargetError(f"{target.prefix}: no interpreter (bin/python) in this environment")
    target_python, target_prefix = target.python, target.prefix
    answer = run_libs(
        targets, python=target_python, prefix=target_prefix, environ=environ, runtime=runtime,
        symbols=symbols, no_cache=no_cache, rec=rec, secure=secure,
        query=lambda: target_query(target_python, target_prefix, environ=environ, cache=not no_cache))
    err = f"warning: {answer.warning}\n" if answer.warning else ""
    return _render(answer, fmt, why, environ), err, answer.status


def _render(answer: Any, fmt: str, why: str | None, environ: dict[str, str]) -> str:
    """The text (or JSON) of a :class:`~envlock.libs.runlibs.LibsRun`, redacted: every string that
    leaves the process (and the answer cache, which stores this text) is, because
    LD_LIBRARY_PATH and paths can hold credentials."""
    from envlock.redact import redact_tree, scrub, secret_fragments

    # the loader variables are split into directories before they are printed: scrub what a
    # URL rule could no longer see in the pieces
    hidden = secret_fragments(" ".join(environ.get(v, "") for v in ("LD_LIBRARY_PATH", "LD_PRELOAD")))
    if fmt == "json":
        documents = []
        for report, check in zip(answer.reports, answer.checks):
            doc = report.to_json()
            if check is not None:
                doc["runtime_check"] = check
            documents.append(doc)
        doc_out = documents[0] if len(documents) == 1 else {"schema": 1, "reports": documents}
        return scrub(json.dumps(redact_tree(doc_out), indent=2), hidden) + "\n"
    from envlock.render.libsreport import render_text, render_why

    if why:
        return "".join(scrub(render_why(r, why), hidden) for r in answer.reports)
    return "".join(scrub(render_text(r, check=c), hidden) for r, c in zip(answer.reports, answer.checks))
