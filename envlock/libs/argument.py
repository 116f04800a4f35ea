"""What a ``MODULE|FILE`` argument of ``envlock libs`` (and of
:func:`envlock.libs.analysis.analyze_module`) names: the one FILE rule.

Kept apart from the loader model so that ``envlock libs`` can check its arguments without
importing the model (a cached answer never imports it).
"""

from __future__ import annotations

import os

__all__ = ["file_target"]


def file_target(name: str, *, check: bool = False) -> str | None:
    """The one FILE rule of ``envlock libs [MODULE|FILE]`` and :func:`analyze_module`: whether
    ``name`` names a file rather than a module, and which.

    A FILE is a name with a path separator (``dlopen(3)`` opens a name with a slash as that
    path, never searching), a name ending in ``.so``, or an existing regular file; any other
    name is a dotted module name, looked up on ``sys.path`` as ``import`` does.

    :param check: also refuse, before anything is modelled, a FILE that does not exist, is a
        directory, or is not a regular file (a FIFO, a device: never opened, since reading one
        would hang or never end), as ``envlock libs`` does.  A regular file that is not ELF
        passes: it is the loader's to judge (:func:`analyze_module` reports dlopen's own
        reason, "invalid ELF header").  Without ``check`` a missing or odd path is modelled as
        the loader treats it (one ``open``, its error).
    :returns: the absolute path of a FILE; ``None`` for a module name.
    :raises TargetError: with ``check``, one line: ``<name>: no such file``, ``<name>: is a
        directory, not a shared object``, ``<name>: is a FIFO (named pipe), not a regular file,
        so not a shared object`` (the words of :func:`envlock._io.irregular`).
    """
    if not (os.sep in name or name.endswith(".so") or os.path.isfile(name)):
        return None
    if check:
        from envlock._io import irregular
        from envlock.errors import TargetError
        from envlock.redact import printable

        if os.path.isdir(name):
            raise TargetError(f"{name}: is a directory, not a shared object")
        if not os.path.exists(name):
            raise TargetError(f"{name}: no such file")
        try:
            what = irregular(os.stat(name).st_mode)
        except OSError as exc:
            raise TargetError(f"{printable(name)}: {exc.strerror}") from None
        if what is not None:
            raise TargetError(f"{printable(name)}: {what}, so not a shared object")
    return os.path.abspath(name)
