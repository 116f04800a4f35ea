"""The ``[libraries]`` table of the manifest: which shared libraries the main framework loads.

Kept in its own tiny module (dataclasses only) so that :mod:`envlock.manifest` can import it
without pulling in the loader model; :func:`envlock.libs.analysis.probe_libraries` fills it.
"""

from __future__ import annotations

from envlock.manifest import _model

from envlock.manifest._model import Status

__all__ = ["LibrariesInfo", "LibraryRecord", "LibraryFinding", "LibraryAnswer"]


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
class LibraryFinding:
    """One ``[[libraries.answer.findings]]`` entry: a loader finding in full (the fields of
    :class:`envlock.findings.Finding`), as ``envlock verify`` reports it (``libs.<id>``).

    :ivar id: the loader's identifier (``"shadowed"``, ``"runtime-not-found"``, …).
    :ivar severity: ``"error"``, ``"warning"`` or ``"info"``.
    :ivar title: one line; ``cause``: why it matters; ``evidence``: one fact per line;
        ``fix``: one option per line.
    :ivar library: the SONAME it is about; ``requester``: the object that asked for it.
    :ivar consequence_of: the title of the fatal error before it, if the real loader never
        reaches it.
    """

    id: str
    severity: str
    title: str
    cause: str = ""
    evidence: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    library: str | None = None
    requester: str | None = None
    consequence_of: str | None = None


@_model.table
class LibraryAnswer:
    """``[libraries.answer]``: the loader's findings for the module with what they were
    computed from, so that ``envlock verify --manifest`` reuses them instead of running the
    model while every input is unchanged (:func:`envlock.libs.cachekey.answer_inputs`).

    :ivar key: hex SHA-256 of the question (:func:`envlock.libs.cachekey.answer_key`: module,
        interpreter and its signature, ``sys.path``, prefix, root, working directory, host,
        CPU flags, uid, the loader's variables), with envlock's version and code.
    :ivar inputs: hex SHA-256 of the signature (device, inode, size, mtime, ctime; or absent) of
        every file and directory the answer depends on (:func:`envlock.cache.files_digest`).
    :ivar paths: those the loader's report names (objects loaded, files found, directories
        searched); the rest (``ld.so`` configuration, owner sources, the module's files) follow
        from the key.  A file tried and not found is covered by its directory.
    :ivar findings: the loader's findings, in full.
    """

    key: str
    inputs: str
    paths: tuple[str, ...] = ()
    findings: tuple[LibraryFinding, ...] = ()


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
    :ivar answer: the findings in full with the signatures of their inputs (``None``: not
        recorded — an older manifest, an answer whose inputs changed while it was computed).
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
    answer: LibraryAnswer | None = None
