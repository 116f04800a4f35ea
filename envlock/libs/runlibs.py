"""What ``envlock libs`` does, as one library call: :func:`run_libs`.

The command parses its options, resolves the target (:func:`envlock.probes.target.resolve_target`)
and hands :func:`run_libs` the interpreter, its prefix and a way to ask it for ``sys.path``;
:func:`run_libs` reads the loader's configuration while the interpreter answers, models each
MODULE or FILE (:func:`envlock.libs.analysis.analyze_module`), runs ``--runtime``'s check when
asked (:func:`envlock.libs.runtime.runtime_check`) and decides the exit status.  Rendering is
the caller's (:mod:`envlock.render.libsreport`, or ``LibsReport.to_json``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envlock._io import has_elf_magic
from envlock.errors import TargetError
from envlock.libs.argument import file_target
from envlock.libs.report import LibsReport
from envlock.libs.config import detect_config
from envlock.libs.elf import ElfCache

__all__ = ["LibsRun", "check_arguments", "run_libs"]

#: ``query()`` → ``(sys_path, sys.executable or None, warning or None)`` of the target.
Query = Callable[[], tuple[list[str], "str | None", "str | None"]]


@dataclass(frozen=True, kw_only=True)
class LibsRun:
    """The answer of :func:`run_libs`.

    :ivar reports: one :class:`~envlock.libs.report.LibsReport` per MODULE|FILE (the
        interpreter itself when none was given), in order.
    :ivar checks: ``--runtime``'s comparison per report (``None`` where not run).
    :ivar warning: a problem that did not stop the analysis (``sys.path`` not obtained), or
        ``None``.
    :ivar status: the exit status: 0 fine, 1 an error-level finding, an analysis error or an
        unexplained ``--runtime`` difference.
    """

    reports: tuple[LibsReport, ...]
    checks: tuple[dict[str, Any] | None, ...]
    warning: str | None
    status: int


def check_arguments(targets: Sequence[str], why: str | None) -> None:
    """Reject arguments that cannot name anything: an empty ``--why``, an empty argument, a
    FILE that is missing, a directory or not a regular file
    (:func:`envlock.libs.argument.file_target` with ``check``).

    :raises TargetError: (shown as one ``Error:`` line, exit status 2).
    """
    if why is not None and not why.strip():
        raise TargetError("--why needs a SONAME or file name (got an empty string)")
    for name in targets:
        if not name.strip():
            raise TargetError("an empty MODULE|FILE argument")
        file_target(name, check=True)


class _Background:
    """``fn()`` run in a thread, as part of the current cache computation
    (:func:`envlock.cache.in_thread`); :meth:`result` waits for it and returns its value or
    raises its exception.  On Ctrl-C in the waiting thread every child process is killed
    (:func:`envlock._run.cancel_all`), so the thread ends at once."""

    def __init__(self, fn: Any) -> None:
        from envlock.cache import in_thread

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
            from envlock import _run

            _run.cancel_all()
            raise
        if self._error is not None:
            raise self._error
        return self._value


def run_libs(
    targets: Sequence[str], *, python: str, prefix: str, query: Query, environ: Mapping[str, str],
    runtime: bool = False, symbols: bool = True, no_cache: bool = False, rec: Any = None,
    secure: bool = False,
) -> LibsRun:
    """Model which shared libraries each of ``targets`` will load in ``python``, and why.

    :param targets: module names (``torch``) or extension files; none: the interpreter itself,
        as the main program (``ldd`` of it).
    :param python: the target interpreter (``bin/python`` of the resolved target); when it is
        a wrapper script and ``query`` names a real ELF ``sys.executable``, that program is
        modelled and the wrapper recorded as the report's ``launcher``.
    :param prefix: the target's prefix (conda-meta, stray copies).
    :param query: asks the target for ``sys.path`` and ``sys.executable`` (run in a thread
        while the loader's configuration is read; see :data:`Query`).
    :param environ: the target's environment (the loader's variables are read from it).
    :param runtime: also import each module in the target and compare ``/proc/self/maps``.
    :param symbols: check that every undefined symbol binds (``--no-symbols``: ``False``).
    :param no_cache: use and fill no cache (ELF facts, owners).
    :param secure: model the target as a setuid/setgid program (``AT_SECURE``, glibc
        ``elf/dl-load.c``/``elf/rtld.c``): ``LD_LIBRARY_PATH``, ``LD_PRELOAD`` and the
        tunables are ignored, ``$ORIGIN`` is restricted (:func:`envlock.libs.config.expand_dst`).
    :param rec: a cache recorder (:func:`envlock.libs.cachekey.record_report` records each
        report's inputs through it), or ``None``.
    :returns: a :class:`LibsRun`.
    """
    from envlock.libs.analysis import analyze_module

    # The interpreter answers in its own process while the loader's configuration is read.
    background = _Background(query)
    env = dict(environ)
    elf_cache = None if no_cache else ElfCache()
    try:
        config = detect_config(root="/", env=env, secure=secure)
    finally:
        sys_path, executable, warning = background.result()
    launcher = None
    if executable and not has_elf_magic(python) and has_elf_magic(executable):
        # A wrapper script (pyenv shim): the kernel runs its #! interpreter, which execs the
        # real Python; that program, as sys.executable names it, is what the loader sees.
        launcher, python = python, executable
    reports: list[LibsReport] = []
    checks: list[dict[str, Any] | None] = []
    status = 0
    for name in list(targets) or [python]:
        mode = "ldd" if name == python else "import"

        def analyze(extra: Sequence[str] = (), _name: str = name, _mode: str = mode) -> LibsReport:
            return analyze_module(python, _name, sys_path=sys_path, prefix=prefix, env=env,
                                  elf_cache=elf_cache, mode=_mode, extra_modules=extra, config=config,
                                  extra_first=bool(extra), check_symbols=symbols)

        report = analyze()
        if rec is not None:
            from envlock.libs.cachekey import record_report

            record_report(rec, report, name, sys_path, prefix, "/")
        if launcher:
            report = dataclasses.replace(report, launcher=launcher)
        check = None
        if runtime and mode == "import":
            from envlock.libs.runtime import runtime_check

            check = runtime_check(report, python, name, environ=env, reanalyze=analyze)
            if check["unexplained"] or check["status"] != "ok":
                status = 1
        if any(f.severity == "error" for f in report.findings) or report.errors:
            status = 1
        reports.append(report)
        checks.append(check)
    return LibsRun(reports=tuple(reports), checks=tuple(checks), warning=warning, status=status)
