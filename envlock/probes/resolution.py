"""Which environment to observe: the *target*, chosen, in order, by ``--python PATH``,
``--prefix DIR``, the active conda environment (``CONDA_PREFIX``), the active venv
(``VIRTUAL_ENV``), or the first ``python3`` on ``PATH`` — and the inputs that choice reads, for
a cache key.  What the chosen interpreter says about itself is :mod:`envlock.probes.target`.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import TargetError

if TYPE_CHECKING:  # the model is imported only where a table is built (envlock libs needs none)
    from envlock.cache import Recorder
    from envlock.manifest import Target

__all__ = ["ResolvedTarget", "record_resolution", "resolve_target", "target_kind"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedTarget:
    """The environment to observe.

    :ivar kind: ``"conda"``, ``"venv"`` or ``"system"`` (see :func:`target_kind`).
    :ivar prefix: environment root (absolute path string).
    :ivar python: interpreter path, or ``None`` when the prefix has none.
    :ivar chosen_by: what selected it: ``"--python"``, ``"--prefix"``, ``"CONDA_PREFIX"``,
        ``"VIRTUAL_ENV"`` or ``"PATH"``.
    :ivar skipped: why earlier choices were passed over (``"CONDA_PREFIX=/x is not a
        directory"``): a stale variable is said, not silently ignored.
    """

    kind: str
    prefix: str
    python: str | None
    chosen_by: str
    skipped: tuple[str, ...] = ()

    def to_model(self) -> Target:
        """The ``[target]`` table for this target."""
        from envlock.manifest import Target

        return Target(kind=self.kind, prefix=self.prefix, python=self.python, chosen_by=self.chosen_by)


def target_kind(prefix: str | Path) -> str:
    """Classify an environment root: ``"conda"`` if it has ``conda-meta/``, ``"venv"`` if it
    has ``pyvenv.cfg`` (PEP 405), else ``"system"``."""
    p = Path(prefix)
    if (p / "conda-meta").is_dir():
        return "conda"
    if (p / "pyvenv.cfg").is_file():
        return "venv"
    return "system"


def _prefix_python(prefix: Path) -> str | None:
    for name in ("bin/python", "bin/python3"):
        candidate = prefix / name
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    return None


def _prefix_of(python: Path) -> Path:
    """Guess the environment root of an interpreter path: ``<prefix>/bin/python``."""
    parent = python.parent
    return parent.parent if parent.name == "bin" else parent


def resolve_target(
    *,
    python: str | None = None,
    prefix: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedTarget:
    """Choose the target environment.

    :param python: an interpreter path (``--python``).
    :param prefix: a conda prefix or venv directory (``--prefix``).
    :param environ: the environment to read ``CONDA_PREFIX``, ``VIRTUAL_ENV`` and ``PATH`` from
        (``os.environ`` when ``None``).
    :raises TargetError: both options given, the path does not exist, or no interpreter is found.
    :returns: the :class:`ResolvedTarget`, with the reason it was chosen.
    """
    env = os.environ if environ is None else environ
    if python and prefix:
        raise TargetError("give either --python or --prefix, not both")
    if python:
        exe = Path(python)
        if not exe.exists():
            found = shutil.which(python, path=env.get("PATH"))
            if not found:
                raise TargetError(f"--python {python}: no such interpreter")
            exe = Path(found)
        exe = Path(os.path.abspath(exe))
        _check_interpreter_file(exe, python)
        root = _prefix_of(exe)
        return ResolvedTarget(kind=target_kind(root), prefix=str(root), python=str(exe), chosen_by="--python")
    if prefix:
        root = Path(os.path.abspath(prefix))
        if not root.is_dir():
            raise TargetError(f"--prefix {prefix}: no such directory")
        return ResolvedTarget(
            kind=target_kind(root), prefix=str(root), python=_prefix_python(root), chosen_by="--prefix"
        )
    skipped: list[str] = []
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        value = env.get(var)
        if value and Path(value).is_dir():
            root = Path(os.path.abspath(value))
            return ResolvedTarget(
                kind=target_kind(root), prefix=str(root), python=_prefix_python(root), chosen_by=var,
                skipped=tuple(skipped),
            )
        if value:
            skipped.append(f"{var}={value} is not a directory; ignored")
    found = shutil.which("python3", path=env.get("PATH"))
    if not found:
        raise TargetError("no target: no CONDA_PREFIX or VIRTUAL_ENV, and no python3 on PATH")
    exe = Path(found)
    root = _prefix_of(exe)
    return ResolvedTarget(kind=target_kind(root), prefix=str(root), python=str(exe), chosen_by="PATH",
                          skipped=tuple(skipped))


def _check_interpreter_file(exe: Path, given: str) -> None:
    """Refuse, before anything opens or runs it, a ``--python`` that cannot be an interpreter:
    a FIFO (opening it would wait for a writer forever), a directory, a device, or a file
    without execute permission.

    :raises TargetError: one line naming what the path is.
    """
    try:
        st = os.stat(exe)
    except OSError as exc:
        raise TargetError(f"--python {given}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        what = ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "not a regular file")
        raise TargetError(f"--python {given}: not an interpreter: {what}")
    if not os.access(exe, os.X_OK):
        raise TargetError(f"--python {given}: not an interpreter: not executable")


def record_resolution(rec: Recorder, *, python: str | None, prefix: str | None,
                      environ: Mapping[str, str]) -> None:
    """Record through ``rec`` every input :func:`resolve_target` reads for these arguments:
    the ``PATH`` directories (a new ``python3`` earlier on ``PATH`` changes the target), the
    ``CONDA_PREFIX``/``VIRTUAL_ENV`` directories, the chosen prefix's ``bin/python``,
    ``bin/python3``, ``conda-meta`` and ``pyvenv.cfg`` (its kind).  The variables themselves
    belong in the caller's key."""
    roots: list[str] = []
    if python:
        rec.file(python)
        roots.append(str(_prefix_of(Path(os.path.abspath(python)))))
    if prefix:
        roots.append(os.path.abspath(prefix))
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        if environ.get(var):
            roots.append(os.path.abspath(environ[var]))
    for d in (environ.get("PATH") or "").split(os.pathsep):
        if d:
            rec.directory(d)
            rec.file(os.path.join(d, "python3"))
            roots.append(str(_prefix_of(Path(os.path.abspath(os.path.join(d, "python3"))))))
    for root in dict.fromkeys(roots):
        rec.directory(root)
        for name in ("bin", "bin/python", "bin/python3", "conda-meta", "pyvenv.cfg"):
            rec.file(os.path.join(root, name))
