"""The ``[libraries]`` table of the manifest: which shared libraries the main framework loads.

Kept in its own tiny module (dataclasses only) so that :mod:`envlock.manifest` can import it
without pulling in the loader model; :func:`envlock.libs.analysis.probe_libraries` fills it.
"""

from __future__ import annotations

from envlock.manifest import _model

from envlock.manifest._model import Status

__all__ = ["LibrariesInfo", "LibraryRecord"]


@_model.table
class LibraryRecord:
    """One ``[[libraries.resolved]]`` entry: a library as the loader will resolve it.

    :ivar soname: the name requested (a SONAME, e.g. ``"libcudnn.so.9"``).
    :ivar path: the path the loader opens (``l_name``; may contain ``..``), ``None`` if not found.
    :ivar realpath: the same file with symlinks and ``..`` resolved.
    :ivar rule: what found it: ``rpath``, ``ld_library_path``, ``runpath``, ``ld.so.cache``,
        ``default``, ``slash`` (by path), ``preload``, ``already-loaded``.
    :ivar owner: the package that installed the file (pip/conda name, or dpkg package).
    :ivar owner_kind: ``"pip"``, ``"conda"`` or ``"dpkg"``.
    :ivar version: the owner package's version (``None`` for dpkg or no owner).
    :ivar stage: ``"import"`` (loaded by importing the module) or ``"runtime"`` (a later
        ``dlopen``, e.g. ``libcuda.so.1`` at the first CUDA call).
    :ivar error: the loader's error when it is not found.
    """

    soname: str
    path: str | None = None
    realpath: str | None = None
    rule: str | None = None
    owner: str | None = None
    owner_kind: str | None = None
    version: str | None = None
    stage: str = "import"
    error: str | None = None


@_model.table
class LibrariesInfo:
    """``[libraries]``: the key shared libraries of the main framework (torch), as resolved by
    envlock's model of the dynamic loader (``envlock libs``).

    :ivar module: the module analysed (``"torch"``).
    :ivar glibc: the glibc version modelled (``"2.36"``).
    :ivar ld_library_path: ``LD_LIBRARY_PATH`` used (it changes the answer).
    :ivar ld_preload: ``LD_PRELOAD`` used.
    :ivar resolved: CUDA libraries, C++/OpenMP runtimes and libc, sorted by SONAME.
    :ivar findings: one line per problem found (``"warning [shadowed] …"``).
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    module: str | None = None
    glibc: str | None = None
    ld_library_path: str | None = None
    ld_preload: str | None = None
    resolved: tuple[LibraryRecord, ...] = ()
    findings: tuple[str, ...] = ()
