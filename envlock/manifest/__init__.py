"""The manifest model, schema v1: what an environment was.

A manifest is a tree of frozen dataclasses, one per TOML table (see ``docs/snapshot.md`` for
every field).  :func:`envlock.manifest._model.to_dict` / :func:`~envlock.manifest._model.from_dict` map it to
plain dicts; only :mod:`envlock.manifest._toml` touches TOML or JSON text.

Conventions used by every table:

* ``status`` says how the area was obtained: ``"ok"``, ``"absent"`` (the thing does not exist
  here, e.g. not a git checkout), ``"error"`` (it exists but could not be read) or
  ``"timeout"``; ``error`` then holds a one-line explanation.
* ``source`` names where the facts came from (a file, a command).
* sizes are in bytes, times are UTC ISO-8601 strings, versions are strings as the tool or
  package reports them.
* package names are normalized (PEP 503: lower case, runs of ``-_.`` become ``-``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.manifest import _model
from envlock.manifest._model import Status
from envlock.manifest._schema import SCHEMA, check_header
from envlock.errors import ManifestError

if TYPE_CHECKING:
    from envlock.manifest.buildtable import BuildInfo
    from envlock.manifest.librariestable import LibrariesInfo
    from envlock.manifest.stacktables import (
        BlasInfo,
        CudaInfo,
        FrameworksInfo,
        GpuInfo,
        SlurmInfo,
        ToolchainInfo,
    )


def _type_namespace() -> dict[str, Any]:
    """Names of the table classes defined in other modules, for resolving this module's
    annotations when a manifest is read (:func:`envlock.manifest._model.from_dict`).  Imported only then,
    so that writing a snapshot does not wait for classes its probes create in other threads."""
    from envlock.manifest import librariestable as libraries_model
    from envlock.manifest import stacktables as stack_model

    names = {n: getattr(stack_model, n) for n in stack_model.__all__}
    names["LibrariesInfo"] = libraries_model.LibrariesInfo
    from envlock.manifest import buildtable as build_model

    names.update({n: getattr(build_model, n) for n in build_model.__all__})
    return names

__all__ = [
    "load",
    "SCHEMA",
    "AREAS",
    "Manifest",
    "EnvlockInfo",
    "Target",
    "PythonInfo",
    "PlatformInfo",
    "CpuInfo",
    "GitInfo",
    "GitRemote",
    "PipPackage",
    "PipInfo",
    "CondaPackage",
    "CondaInfo",
    "EnvVars",
    "LockfileRef",
    "LockfilesInfo",
]


_EMPTY: Mapping[str, str] = _model.freeze_mapping({})


@_model.table
class EnvlockInfo:
    """``[envlock]``: who wrote the manifest, when and how.

    :ivar schema: schema major version (``1``); a newer major is refused on reading.
    :ivar version: envlock's version string.
    :ivar created: creation time, UTC, ISO-8601 with ``Z`` (e.g. ``2026-11-29T23:58:00Z``).
    :ivar host: the host name (``socket.gethostname()``).
    :ivar command: the command line that wrote it (``sys.argv``), secrets redacted.
    :ivar duration: seconds the snapshot took (wall clock).
    :ivar warnings: one line per problem met while taking the snapshot.
    """

    schema: int = SCHEMA
    version: str
    created: str
    host: str
    command: tuple[str, ...] = ()
    duration: float | None = None
    warnings: tuple[str, ...] = ()


@_model.table
class Target:
    """``[target]``: which environment was observed, and why that one.

    :ivar kind: ``"conda"`` (a prefix with ``conda-meta/``), ``"venv"`` (``pyvenv.cfg``) or
        ``"system"``.
    :ivar prefix: the environment's root directory (``sys.prefix`` of its interpreter).
    :ivar python: the interpreter path (absolute, symlinks not resolved).
    :ivar chosen_by: ``"--python"``, ``"--prefix"``, ``"CONDA_PREFIX"``, ``"VIRTUAL_ENV"`` or
        ``"PATH"``.
    """

    kind: str
    prefix: str
    python: str | None = None
    chosen_by: str


@_model.table
class PythonInfo:
    """``[python]``: the target interpreter, as it reports itself.

    :ivar version: ``platform.python_version()``, e.g. ``"3.11.7"``.
    :ivar implementation: ``sys.implementation.name``, e.g. ``"cpython"``.
    :ivar executable: ``sys.executable``.
    :ivar prefix: ``sys.prefix``; ``base_prefix``: ``sys.base_prefix``.
    :ivar path: ``sys.path`` in order (the empty/current-directory entry removed).
    :ivar user_site: the user site-packages directory, when it is enabled and exists.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    version: str | None = None
    implementation: str | None = None
    executable: str | None = None
    prefix: str | None = None
    base_prefix: str | None = None
    path: tuple[str, ...] = ()
    user_site: str | None = None


@_model.table
class PlatformInfo:
    """``[platform]``: operating system and C library.

    :ivar os_id: ``ID`` from ``/etc/os-release`` (``"debian"``, ``"rhel"``, ``"ubuntu"``).
    :ivar os_version: ``VERSION_ID`` from os-release; ``os_name``: ``PRETTY_NAME``.
    :ivar kernel: kernel release (``uname -r``); ``machine``: ``uname -m``.
    :ivar glibc: the system glibc version (:func:`envlock.libs.glibc.detect_glibc`), e.g. ``"2.36"``.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    os_id: str | None = None
    os_version: str | None = None
    os_name: str | None = None
    kernel: str | None = None
    machine: str | None = None
    glibc: str | None = None


@_model.table
class CpuInfo:
    """``[cpu]``: the processor and memory, from ``/proc/cpuinfo`` and ``/proc/meminfo``.

    :ivar vendor: ``vendor_id`` (x86, e.g. ``"GenuineIntel"``) or ``CPU implementer`` (Arm).
    :ivar model: ``model name``.
    :ivar logical_cores: logical CPUs of the machine (``os.cpu_count()``).
    :ivar usable_cores: CPUs this process may run on (``sched_getaffinity``; Slurm/cgroup limits).
    :ivar flags: the numerics-relevant ISA flags present, sorted (see ``ISA_FLAGS`` in
        :mod:`envlock.probes.system`).
    :ivar memory: total memory in bytes (``MemTotal``).
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    vendor: str | None = None
    model: str | None = None
    logical_cores: int | None = None
    usable_cores: int | None = None
    flags: tuple[str, ...] = ()
    memory: int | None = None


@_model.table
class GitRemote:
    """One git remote, its URL with any credentials removed."""

    name: str
    url: str


@_model.table
class GitInfo:
    """``[git]`` (and the ``git`` of an editable install): the state of a checkout.

    :ivar path: the top-level directory of the working tree.
    :ivar commit: ``HEAD`` as a full hex object name; ``None`` before the first commit.
    :ivar branch: the current branch, or ``None`` when HEAD is detached.
    :ivar describe: ``git describe --tags --always --dirty``.
    :ivar dirty: tracked files differ from HEAD (staged or not).
    :ivar untracked: number of untracked, not ignored files.
    :ivar diff_sha256: sha256 (hex) of ``git diff HEAD --binary``, or ``None`` when clean.
    :ivar patch: ``--save-patch``: the patch file written beside the manifest (its name).
    :ivar patch_sha256: sha256 (hex) of that file's bytes.
    :ivar patch_note: why the patch is incomplete (over the size cap), when it is.
    :ivar remotes: remotes sorted by name, URLs without user-info or tokens.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    path: str | None = None
    commit: str | None = None
    branch: str | None = None
    describe: str | None = None
    dirty: bool | None = None
    untracked: int | None = None
    diff_sha256: str | None = None
    patch: str | None = None
    patch_sha256: str | None = None
    patch_note: str | None = None
    remotes: tuple[GitRemote, ...] = ()


@_model.table
class PipPackage:
    """One ``[[pip.packages]]`` entry: a distribution importable from the target's ``sys.path``.

    :ivar name: normalized project name (PEP 503).
    :ivar version: the ``Version`` field of its METADATA, as written.
    :ivar location: the ``sys.path`` directory holding its ``.dist-info``/``.egg-info``.
    :ivar dist_info: the name of that metadata directory (or file), e.g. ``numpy-2.4.1.dist-info``.
    :ivar installer: the INSTALLER file's content (``"pip"``, ``"uv"``, ``"conda"``), if any.
    :ivar requested: a REQUESTED file exists (the user asked for it, PEP 376).
    :ivar origin: ``"index"`` (no ``direct_url.json``), ``"archive"`` (a URL or local file of a
        wheel/sdist), ``"directory"``, ``"editable"``, ``"vcs"`` (PEP 610), or ``"conda"`` when
        the dist-info belongs to a conda package (case C12).
    :ivar url: the PEP 610 URL, credentials removed (not recorded for conda-built ones).
    :ivar vcs: ``"git"``, …; ``commit``: the VCS commit id; ``requested_revision``: as asked.
    :ivar editable_path: local directory of an editable or directory install.
    :ivar git: state of that directory's checkout, when it is in a git repository (case C13).
    :ivar conda_package: name of the conda package whose ``files`` list this dist-info.
    :ivar shadowed: further copies of the same project later on ``sys.path``, as
        ``"<version> at <location>"``; the first one wins at import.
    :ivar error: why the metadata could not be read fully (the entry is kept).
    """

    name: str
    version: str
    location: str
    dist_info: str | None = None
    installer: str | None = None
    requested: bool = False
    origin: str = "index"
    url: str | None = None
    vcs: str | None = None
    commit: str | None = None
    requested_revision: str | None = None
    editable_path: str | None = None
    git: GitInfo | None = None
    conda_package: str | None = None
    shadowed: tuple[str, ...] = ()
    error: str | None = None


@_model.table
class PipInfo:
    """``[pip]``: every distribution found on the target's ``sys.path``, sorted by name."""

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    packages: tuple[PipPackage, ...] = ()


@_model.table
class CondaPackage:
    """One ``[[conda.packages]]`` entry, from ``<prefix>/conda-meta/<name>-<ver>-<build>.json``.

    :ivar name, version, build, build_number: as conda records them.
    :ivar channel: short channel name (``"conda-forge"``, ``"pkgs/main"``), tokens removed.
    :ivar subdir: ``"linux-64"``, ``"noarch"``, …
    :ivar url: download URL, tokens removed; ``md5``/``sha256``: hex digests of the archive.
    :ivar depends: the package's run dependencies as match specs.
    :ivar python_dist: the dist-info directory it installs into site-packages, if any.
    :ivar overwritten_by_pip: that dist-info is gone and another installer's copy of the same
        project is what Python imports (case C11); the conda record is stale.
    :ivar pip_version: the version Python will import in that case.
    """

    name: str
    version: str
    build: str
    build_number: int | None = None
    channel: str | None = None
    subdir: str | None = None
    url: str | None = None
    md5: str | None = None
    sha256: str | None = None
    depends: tuple[str, ...] = ()
    python_dist: str | None = None
    overwritten_by_pip: bool = False
    pip_version: str | None = None


@_model.table
class CondaInfo:
    """``[conda]``: the packages of a conda prefix and what the user asked for.

    :ivar requested: match specs requested over the prefix's history (``conda-meta/history``),
        after later removals, sorted by package name.
    :ivar packages: every ``conda-meta/*.json`` record, sorted by name.
    """

    status: Status = "ok"
    source: str = ""
    error: str | None = None
    requested: tuple[str, ...] = ()
    packages: tuple[CondaPackage, ...] = ()


@_model.table
class EnvVars:
    """``[env]``: environment variables that change how numerical code runs (allow-list).

    :ivar vars: name → value; secret-looking values are replaced by ``"<redacted>"``.
    :ivar selection: the variables that only select the target (``VIRTUAL_ENV``,
        ``CONDA_PREFIX``, ``CONDA_DEFAULT_ENV``, ``PATH``, …): recorded, not compared by ``diff``.
    :ivar redacted: names whose value was redacted.
    """

    status: Status = "ok"
    source: str = "allow-list"
    vars: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    selection: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    redacted: tuple[str, ...] = ()


@_model.table
class LockfileRef:
    """A lockfile the environment was built from: ``path`` and ``sha256`` (hex) of its bytes.

    :ivar found: ``"beside"`` (next to the manifest), ``"given"`` (``--lock``) or ``"cwd"``.
    :ivar matches: ``True`` when every package the lock pins is installed at that version,
        ``False`` when some is not (``mismatches`` lists them), ``None`` when not checked.
    :ivar mismatches: ``"<name> <locked> (installed <version>|not installed)"``, sorted.
    """

    path: str
    kind: str
    sha256: str
    found: str | None = None
    matches: bool | None = None
    mismatches: tuple[str, ...] = ()


@_model.table
class LockfilesInfo:
    """``[lockfiles]``: lockfiles found beside the snapshot (``conda-lock.yml``, ``pylock.toml``)."""

    status: Status = "ok"
    source: str = ""
    files: tuple[LockfileRef, ...] = ()


@_model.table
class Manifest:
    """A whole manifest: one attribute per TOML table (``None`` when not recorded).

    Tables this version does not know are kept, unchanged, in ``extra`` and written back, so a
    manifest passes through ``load``/``write`` byte-for-byte.
    """

    envlock: EnvlockInfo
    target: Target
    python: PythonInfo | None = None
    platform: PlatformInfo | None = None
    cpu: CpuInfo | None = None
    env: EnvVars | None = None
    git: GitInfo | None = None
    conda: CondaInfo | None = None
    pip: PipInfo | None = None
    lockfiles: LockfilesInfo | None = None
    gpu: GpuInfo | None = None
    cuda: CudaInfo | None = None
    frameworks: FrameworksInfo | None = None
    blas: BlasInfo | None = None
    toolchain: ToolchainInfo | None = None
    slurm: SlurmInfo | None = None
    libraries: LibrariesInfo | None = None
    build: BuildInfo | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    # -- conversion -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return the manifest as plain dicts (kebab-case keys, no ``None``), tables in order."""
        out = _model.to_dict(self)
        extra = out.pop("extra", {})
        out.update(extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """Build a manifest from parsed TOML/JSON.

        :raises ManifestVersionError: when ``[envlock] schema`` is a newer major than :data:`SCHEMA`.
        :raises ManifestError: when the data is not a manifest or a value has the wrong type.
        """
        check_header(data)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        extra = {k: v for k, v in data.items() if k not in known}
        core = {k: v for k, v in data.items() if k in known}
        core["extra"] = extra
        return _model.from_dict(cls, core)

    # -- files ------------------------------------------------------------------------------
    def dumps(self, fmt: str = "toml") -> str:
        """Serialize to ``"toml"`` or ``"json"`` text (deterministic)."""
        from envlock.manifest import _toml  # keeps tomli_w off the import path

        return _toml.dumps(self.to_dict(), fmt)

    def write(self, path: str | Path, *, fmt: str | None = None, force: bool = False) -> Path:
        """Write the manifest atomically (temporary file, fsync, rename).

        :param path: destination; its suffix ``.json`` selects JSON unless ``fmt`` is given.
        :param fmt: ``"toml"`` or ``"json"``.
        :param force: replace an existing file (or write into an existing FIFO or character
            device, ``-o /dev/full``).
        :raises OutputExistsError: when ``path`` exists and ``force`` is false, or is a
            symbolic link (never written through, even with ``force``:
            :func:`envlock._io.write_file`).
        :returns: the path written.
        """
        from envlock.manifest import _toml

        path = Path(path)
        fmt = fmt or ("json" if path.suffix == ".json" else "toml")
        _toml.atomic_write(path, self.dumps(fmt), force=force)
        return path

    # -- convenience ------------------------------------------------------------------------
    def packages(self) -> dict[str, str]:
        """Return ``{normalized name: version}`` of what Python imports (pip view wins)."""
        out: dict[str, str] = {}
        if self.conda:
            for c in self.conda.packages:
                out[c.name] = c.version
        if self.pip:
            for p in self.pip.packages:
                out[p.name] = p.version
        return out


#: The manifest's tables in the order they are written.
AREAS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Manifest) if f.name != "extra")


def load(path: str, *, reader: Callable[[dict[str, Any]], dict[str, Any]] | None = None
         ) -> Manifest:
    """Read a manifest file (TOML or JSON) into a :class:`Manifest`.

    :param path: the file.
    :param reader: applied to the parsed tables before the model is built (``show`` passes
        :func:`envlock.runs.unfinished.settle`: a run record as a reader can state it).
    :raises ManifestError: the file is missing, not valid TOML/JSON, or not a manifest.
    :raises ManifestVersionError: its schema major is newer than this envlock reads.
    """
    from envlock.manifest._toml import load_file, with_run_environment

    data = with_run_environment(load_file(path), path)
    if reader is not None:
        data = reader(data)
    try:
        return Manifest.from_dict(data)
    except ManifestError as exc:
        raise type(exc)(f"{path}: {exc}") from None
