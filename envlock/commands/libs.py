"""``envlock libs``: which shared libraries a module will really load, and why.

The answer comes from envlock's model of glibc's loader (:mod:`envlock.libs.search`), without
importing the module; ``--runtime`` then imports it in the target interpreter and compares
``/proc/self/maps`` with the model.  Exit status: 0 fine, 1 an error-level finding (or an
unexplained ``--runtime`` difference), 2 envlock could not run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from envlock._io import has_elf_magic
from envlock.commands._common import handle_errors, target_options, will_exit

if TYPE_CHECKING:
    from envlock.libs.analysis import LibsReport

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
    from envlock.probes.target import ResolvedTarget, query_sys_path  # noqa: PLC0415

    target = ResolvedTarget(kind="venv", prefix=prefix, python=python, chosen_by="--python")
    got, executable, error = query_sys_path(target, timeout=QUERY_TIMEOUT, environ=dict(environ), cache=cache)
    path = list(got)
    if error is not None:
        return path, None, f"could not ask {python} for sys.path ({error}); using {path}"
    return path, executable, None


class _Background:
    """``fn()`` run in a thread, as part of the current cache computation
    (:func:`envlock.cache.in_thread`); :meth:`result` waits for it and returns its value or
    raises its exception.  On Ctrl-C in the waiting thread every child process is killed
    (:func:`envlock._run.cancel_all`), so the thread ends at once."""

    def __init__(self, fn: Any) -> None:
        import threading  # noqa: PLC0415

        from envlock.cache import in_thread  # noqa: PLC0415

        self._value: Any = None
        self._error: BaseException | None = None
        bound = in_thread(fn)

        def work() -> None:
            try:
                self._value = bound()
            except BaseException as exc:  # noqa: BLE001 - re-raised by result()
                self._error = exc

        self._thread = threading.Thread(target=work, name="envlock-query", daemon=True)
        self._thread.start()

    def result(self) -> Any:
        try:
            self._thread.join()
        except BaseException:
            from envlock import _run  # noqa: PLC0415

            _run.cancel_all()
            raise
        if self._error is not None:
            raise self._error
        return self._value


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
@click.option("--no-cache", is_flag=True,
              help="Recompute everything: use and fill no cache (ELF facts, owners, answers).")
@handle_errors
def libs(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, symbols: bool, no_cache: bool,
) -> None:
    """Show which shared libraries MODULE (or FILE) will really load, and why.

    Models glibc's dynamic loader for the target interpreter: RPATH/RUNPATH, LD_LIBRARY_PATH,
    LD_PRELOAD, ld.so.cache, default directories, torch's preloading of nvidia wheels, and
    well-known run-time dlopens (libcuda.so.1, cuDNN sub-libraries). Nothing is imported
    unless --runtime is given.
    """
    _check_arguments(targets, why)
    environ = dict(os.environ)
    from envlock.cache import is_enabled  # noqa: PLC0415
    from envlock.libs.answer import memo_answer  # noqa: PLC0415

    no_cache = no_cache or not is_enabled(environ)
    argv = ["libs", *targets, f"--python={python}", f"--prefix={prefix}", f"--format={fmt}", f"--why={why}",
            f"--symbols={symbols}"]
    keep = not (no_cache or runtime)

    def compute(rec: Any) -> tuple[str, str, int]:
        if not keep:  # nothing is stored: the inputs need not be recorded
            return _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ, symbols)
        from envlock.probes.target import record_resolution  # noqa: PLC0415

        record_resolution(rec, python=python, prefix=prefix, environ=environ)
        return _compute(targets, python, prefix, fmt, why, runtime, no_cache, environ, symbols, rec=rec)

    out, err, code = memo_answer(argv, environ, compute, enabled=keep)
    will_exit(code)
    if err:
        click.echo(err, err=True, nl=False)
    sys.stdout.write(out)
    sys.stdout.flush()  # a reader gone shows here, inside handle_errors
    if code:
        sys.exit(code)


def _check_arguments(targets: Sequence[str], why: str | None) -> None:
    """Reject arguments that cannot name anything: an empty ``--why``, an empty argument, a
    FILE that is missing, a directory or not a regular file
    (:func:`envlock.libs.argument.file_target` with ``check``).

    :raises TargetError: (shown as one ``Error:`` line, exit status 2).
    """
    from envlock.errors import TargetError  # noqa: PLC0415
    from envlock.libs.argument import file_target  # noqa: PLC0415

    if why is not None and not why.strip():
        raise TargetError("--why needs a SONAME or file name (got an empty string)")
    for name in targets:
        if not name.strip():
            raise TargetError("an empty MODULE|FILE argument")
        file_target(name, check=True)


def _compute(
    targets: tuple[str, ...], python: str | None, prefix: str | None, fmt: str, why: str | None,
    runtime: bool, no_cache: bool, environ: dict[str, str], symbols: bool = False, rec: Any = None,
) -> tuple[str, str, int]:
    """Run the analysis: returns ``(stdout, stderr, exit status)``; the inputs each report
    depends on are recorded through ``rec`` (:func:`envlock.libs.cache.record_report`)."""
    from envlock.probes.target import resolve_target  # noqa: PLC0415

    target = resolve_target(python=python, prefix=prefix, environ=environ)
    target_prefix, target_python = target.prefix, target.python
    if target_python is None:
        from envlock.errors import TargetError  # noqa: PLC0415

        raise TargetError(f"{target_prefix}: no interpreter (bin/python) in this environment")
    # The interpreter answers in its own process while the loader model is imported and the
    # loader's configuration read here.
    query = _Background(lambda: target_query(target_python, target_prefix, environ=environ,
                                             cache=not no_cache))
    from envlock.libs.analysis import analyze_module  # noqa: PLC0415
    from envlock.libs.elf import ElfCache  # noqa: PLC0415
    from envlock.libs.search import detect_config  # noqa: PLC0415
    from envlock.redact import redact_tree, scrub, secret_fragments  # noqa: PLC0415

    # the loader variables are split into directories before they are printed: scrub what a
    # URL rule could no longer see in the pieces
    hidden = secret_fragments(" ".join(environ.get(v, "") for v in ("LD_LIBRARY_PATH", "LD_PRELOAD")))
    elf_cache = None if no_cache else ElfCache()
    try:
        config = detect_config(root="/", env=environ)
    finally:
        sys_path, executable, warn = query.result()
    err = f"warning: {warn}\n" if warn else ""
    launcher = None
    if executable and not has_elf_magic(target_python) and has_elf_magic(executable):
        # A wrapper script (pyenv shim): the kernel runs its #! interpreter, which execs the
        # real Python; that program, as sys.executable names it, is what the loader sees.
        launcher, target_python = target_python, executable
    names = list(targets) or [target_python]
    documents = []
    chunks: list[str] = []
    worst = 0
    for name in names:
        mode = "ldd" if name == target_python else "import"

        def analyze(extra: Sequence[str] = (), _name: str = name, _mode: str = mode) -> LibsReport:
            return analyze_module(target_python, _name, sys_path=sys_path, prefix=target_prefix,
                                  env=environ, elf_cache=elf_cache, mode=_mode, extra_modules=extra,
                                  config=config,
                                  extra_first=bool(extra), check_symbols=symbols)

        report = analyze()
        if rec is not None:
            from envlock.libs.cache import record_report  # noqa: PLC0415

            record_report(rec, report, name, sys_path, target_prefix, "/")
        if launcher:
            import dataclasses  # noqa: PLC0415

            report = dataclasses.replace(report, launcher=launcher)
        check = None
        if runtime and mode == "import":
            from envlock.libs.runtime import runtime_check  # noqa: PLC0415

            check = runtime_check(report, target_python, name, environ=environ, reanalyze=analyze)
            if check["unexplained"] or check["status"] != "ok":
                worst = max(worst, 1)
        if any(f.severity == "error" for f in report.findings) or report.errors:
            worst = max(worst, 1)
        if fmt == "json":
            doc = report.to_json()
            if check is not None:
                doc["runtime_check"] = check
            documents.append(doc)
        elif why:
            from envlock.render.libs import render_why  # noqa: PLC0415

            chunks.append(scrub(render_why(report, why), hidden))
        else:
            from envlock.render.libs import render_text  # noqa: PLC0415

            chunks.append(scrub(render_text(report, check=check), hidden))
    if fmt == "json":
        doc_out = documents[0] if len(documents) == 1 else {"schema": 1, "reports": documents}
        chunks.append(scrub(json.dumps(redact_tree(doc_out), indent=2), hidden) + "\n")
    # every string that leaves the process (and the answer cache, which stores this text) is
    # redacted: LD_LIBRARY_PATH and paths can hold credentials
    return "".join(chunks), err, worst
