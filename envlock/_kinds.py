"""The registries of envlock's plug-in kinds, importable without the plug-ins (issue 27).

* :data:`FORMATS` — every file format :func:`envlock.formats.read` recognises: its name (the
  *kind* reports use), how it is recognised, the function that reads it, what it can say, the
  commands that accept it and the reference tool the tests compare its reading with.  Dispatch
  (:mod:`envlock.formats`), the ``--help`` texts of ``diff``/``verify``/``show``/``lock``/
  ``restore`` and the format table of ``docs/diff.md`` are derived from it (a test checks the
  last two).  **Adding a reader is one entry here plus its module** in :mod:`envlock.formats`.
* :data:`STACK_AREAS` — the manifest tables of the numerical stack (``[gpu]``, ``[cuda]``, …):
  the record class that holds each, whether ``diff`` turns it into facts, whether a lockfile
  restores it; :mod:`envlock.probes.stack`, :mod:`envlock.diff.facts`, ``show`` and the
  ``restore`` plan derive their lists from it.

Readers and detectors are named ``"module:function"`` inside :mod:`envlock.formats` and are
imported only when a file is read, so command-line help costs no reader import.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Format", "FORMATS", "KINDS", "LOCK_KINDS", "StackArea", "STACK_AREAS", "format_of",
           "accepted_by", "names_for_help"]

#: the commands a format can be accepted by, as ``Format.commands`` names them.
COMMANDS = ("show", "diff", "verify --lock", "restore", "lock -f", "lock -r")


@dataclass(frozen=True)
class Format:
    """One file format envlock reads.

    :ivar name: the kind, in the words reports use (``"uv.lock"``).
    :ivar said: how a user knows such a file, for messages (``"pip freeze/requirements.txt"``).
    :ivar syntax: how the file is parsed before its detector sees it, in the order dispatch
        tries them: ``"marker"`` (a first content line decides, before any parse), ``"toml"``
        (TOML or JSON), ``"yaml"``, ``"lines"`` (line-oriented text).  Within one syntax the
        formats are tried in :data:`FORMATS` order; the first detector that says yes reads it.
    :ivar recognised_by: what the detector looks for, in words (for docs).
    :ivar detect: ``"module:function"`` in :mod:`envlock.formats`, ``(parsed, source) -> bool``
        (``parsed``: the TOML/YAML document, or the text for ``marker``/``lines``; ``source``: a
        :class:`envlock.formats._reading.Source`).
    :ivar read: ``"module:function"``, ``(parsed, source) -> Reading``; or, for a lockfile with
        ``lock_reader``, ``(parsed, name) -> LockFile`` (the reading is then derived).
    :ivar lock_reader: whether ``read`` returns a :class:`~envlock.formats.locks.LockFile`.
    :ivar listing: what an unlisted package means (``Reading.listing``): ``complete``,
        ``partial`` (a spec), ``conda``/``pip`` (complete for one manager), or ``"complete or
        partial"`` (an export pinning every build is complete, else a spec).
    :ivar says: what the format can tell: ``conda``, ``pip``, ``python``, ``platforms``,
        ``channels``, ``builds``, ``hashes``, ``markers``, ``groups`` (extras/categories), ``vcs``.
    :ivar commands: the commands that accept it (of :data:`COMMANDS`).
    :ivar names: the file names it usually has (for help and docs).
    :ivar oracle: the reference reader its tests compare envlock's reading with.
    :ivar versions: the versions of the format envlock reads (``""``: unversioned).
    """

    name: str
    said: str
    syntax: str
    recognised_by: str
    detect: str
    read: str
    listing: str
    says: tuple[str, ...]
    commands: tuple[str, ...]
    names: tuple[str, ...]
    oracle: str
    versions: str = ""
    json_as: str = ""
    lock_reader: bool = False

    @property
    def is_lock(self) -> bool:
        """Whether it is a lockfile ``verify --lock`` reads (an installable complete listing)."""
        return "verify --lock" in self.commands


_ALL = ("show", "diff")
_LOCK = ("show", "diff", "verify --lock")

#: every format.  Within one syntax, dispatch tries them in this order (their detectors are
#: exclusive but for a file named ``Pipfile``); messages list them in this order.
FORMATS: tuple[Format, ...] = (
    Format("manifest", "an envlock manifest", "toml", "an `[envlock]` table with `schema`", "envfiles:is_manifest",
           "envfiles:read_manifest", "complete",
           ("conda", "pip", "python", "platforms", "channels", "builds", "hashes", "vcs"),
           (*_ALL, "restore"), ("manifest.toml",), "envlock's own model", "schema 1",
           json_as="json"),
    Format("environment.yml", "environment.yml", "yaml", "a `dependencies:` list", "envfiles:is_environment",
           "envfiles:read_environment", "complete or partial",
           ("conda", "pip", "platforms", "channels", "builds"), (*_ALL, "lock -f"),
           ("environment.yml",), "py-rattler's `MatchSpec` (conda's grammar); conda-lock's "
           "`parse_environment_file` (selectors, every spec; its `-e` lines read as pip does)",
           json_as="yaml"),
    Format("conda-explicit", "conda list --explicit", "marker", "an `@EXPLICIT` line", "envfiles:is_explicit",
           "envfiles:read_explicit", "conda", ("conda", "platforms", "channels", "builds", "hashes"),
           (*_LOCK, "restore"), ("conda-linux-64.lock", "spec-file.txt"),
           "conda's `MatchSpec` of each URL and `explicit()`'s `#<md5>` (the conda "
           "conda-lock vendors)"),
    Format("conda-export", "conda list --export", "lines", "`name=version=build` lines", "envfiles:is_export",
           "envfiles:read_export", "complete", ("conda", "pip", "platforms", "builds"), _ALL,
           ("conda_list.txt",), "conda's `name=version=build` form (no reference tool in the tests)"),
    Format("requirements", "pip freeze/requirements.txt", "lines", "PEP 508 lines / pip options",
           "envfiles:is_requirements",
           "envfiles:read_requirements_file", "complete or partial",
           ("pip", "hashes", "markers", "vcs"), (*_ALL, "restore", "lock -r"),
           ("requirements.txt", "requirements.in", "pip_freeze.txt"),
           "pip's `parse_requirements` (includes) and `packaging.requirements`"),
    Format("conda-lock", "conda-lock.yml", "yaml", "`package:` + `metadata:`", "locks:is_conda_lock",
           "locks:read_conda_lock", "complete",
           ("conda", "pip", "platforms", "channels", "builds", "hashes", "groups"),
           (*_LOCK, "restore"), ("conda-lock.yml",), "conda-lock's `parse_conda_lock_file`",
           "version 1 and 2", json_as="yaml", lock_reader=True),
    Format("pixi.lock", "pixi.lock", "yaml", "`environments:` + `packages:`", "pixilock:is_pixi_lock",
           "pixilock:read_pixi_lock", "complete",
           ("conda", "pip", "platforms", "channels", "builds", "hashes", "vcs"), (*_LOCK, "restore"),
           ("pixi.lock",), "py-rattler's `LockFile.from_path`", "version 3-7", json_as="yaml", lock_reader=True),
    Format("pylock", "pylock.toml", "toml", "`lock-version` + `[[packages]]`", "locks:is_pylock",
           "locks:read_pylock", "complete", ("pip", "python", "hashes", "markers", "groups", "vcs"),
           (*_LOCK, "restore"), ("pylock.toml", "pylock.NAME.toml"), "`packaging.pylock`",
           "PEP 751 lock-version 1.0", lock_reader=True),
    Format("uv.lock", "uv.lock", "toml", "`version` + `[[package]]`", "projectlocks:is_uv_lock",
           "projectlocks:read_uv_lock", "complete",
           ("pip", "python", "hashes", "markers", "groups", "vcs"), (*_LOCK, "restore"), ("uv.lock",),
           "`uv export --frozen` (every extra/group, `--no-dev`, one target), `uv sync`", "version 1 (revision 1-4)",
           lock_reader=True),
    Format("poetry.lock", "poetry.lock", "toml", "`[metadata] content-hash`", "projectlocks:is_poetry_lock",
           "projectlocks:read_poetry_lock", "complete",
           ("pip", "python", "hashes", "markers", "groups", "vcs"), (*_LOCK, "restore"), ("poetry.lock",),
           "poetry's `Locker.locked_repository` (what `poetry show` reads; in its own "
           "environment, `uv run --with poetry`: it cannot be installed beside conda-lock)", "lock-version 1.0-2.1",
           lock_reader=True),
    Format("pdm.lock", "pdm.lock", "toml", "`[metadata] lock_version`", "projectlocks:is_pdm_lock",
           "projectlocks:read_pdm_lock", "complete", ("pip", "python", "hashes", "markers", "groups"),
           (*_LOCK, "restore"), ("pdm.lock",),
           "pdm's `Project.get_locked_repository` (the candidates `pdm export` takes)",
           "lock_version 4.x", lock_reader=True),
    Format("Pipfile.lock", "Pipfile.lock", "toml", "`_meta` + `default`/`develop` (JSON)",
           "pipenv:is_pipfile_lock", "pipenv:pipfile_lock_reading", "complete",
           ("pip", "python", "hashes", "markers", "groups", "vcs"), _LOCK, ("Pipfile.lock",),
           "pipenv's `requirement_from_lockfile` (what `pipenv requirements` prints)", "pipfile-spec 6",
           json_as="json"),
    Format("Pipfile", "Pipfile", "toml", "`[packages]`/`[dev-packages]`", "pipenv:is_pipfile",
           "pipenv:pipfile_reading", "partial", ("pip", "python", "markers", "groups", "vcs"),
           _ALL, ("Pipfile",), "pipenv's `requirement_from_pipfile`"),
)

#: every kind :func:`envlock.formats.read` recognises, in the words reports use.
KINDS: tuple[str, ...] = tuple(f.name for f in FORMATS)

#: the lockfile kinds (installable, complete listings) ``verify --lock`` reads.
LOCK_KINDS: tuple[str, ...] = tuple(f.name for f in FORMATS if f.is_lock)


def format_of(name: str) -> Format:
    """The :class:`Format` named ``name``.

    :raises KeyError: no such format.
    """
    for f in FORMATS:
        if f.name == name:
            return f
    raise KeyError(name)


def accepted_by(command: str) -> tuple[Format, ...]:
    """The formats ``command`` (one of :data:`COMMANDS`) accepts, in :data:`FORMATS` order."""
    return tuple(f for f in FORMATS if command in f.commands)


def names_for_help(command: str, *, conj: str = "or") -> str:
    """The files ``command`` (one of :data:`COMMANDS`) accepts besides an envlock manifest, as a
    user knows them (:attr:`Format.said`), for its ``--help``: ``"a, b or c"``."""
    names = [f.said for f in accepted_by(command) if f.name != "manifest"]
    return ", ".join(names[:-1]) + f" {conj} " + names[-1] if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class StackArea:
    """One manifest table of the numerical stack, filled by :func:`envlock.probes.stack.probe_stack`.

    :ivar name: the table (``"gpu"``).
    :ivar record: the record class in :mod:`envlock.manifest` (``"stack:GpuInfo"``: module
        under ``envlock.manifest``, class).
    :ivar facts: whether ``diff`` reads the table into facts (:mod:`envlock.diff.stackfacts`
        has a function of that name).
    :ivar restored: what a restore does with it: ``"packages"`` (it follows from the packages a
        lockfile installs), ``"machine"`` (the node has it; no rebuild restores it), ``"job"``
        (it describes the batch job), ``"build"`` (the extension-build toolchain, as
        ``machine`` but not said in the plan).
    :ivar shown: whether ``show`` summarises it.
    """

    name: str
    record: str
    facts: bool
    restored: str
    shown: bool = True


STACK_AREAS: tuple[StackArea, ...] = (
    StackArea("gpu", "stack:GpuInfo", True, "machine"),
    StackArea("cuda", "stack:CudaInfo", True, "machine"),
    StackArea("frameworks", "stack:FrameworksInfo", True, "packages"),
    StackArea("blas", "stack:BlasInfo", True, "packages"),
    StackArea("toolchain", "stack:ToolchainInfo", True, "machine"),
    StackArea("slurm", "stack:SlurmInfo", True, "job"),
    StackArea("build", "build:BuildInfo", False, "build", shown=False),
)


def format_table() -> str:
    """The Markdown table of :data:`FORMATS` that ``docs/diff.md`` holds between its
    ``<!-- formats -->`` markers (a test keeps the two equal): each format, the versions read,
    how it is recognised, what it can say, the commands that take it and the oracle its tests
    compare the reading with."""
    rows = ["| kind | versions | recognised by | can say | listing | accepted by | oracle in tests |",
            "|---|---|---|---|---|---|---|"]
    for f in FORMATS:
        rows.append(f"| `{f.name}` | {f.versions or '—'} | {f.recognised_by} | {', '.join(f.says)} "
                    f"| {f.listing} | {', '.join(f'`{c}`' for c in f.commands)} | {f.oracle} |")
    return "\n".join(rows) + "\n"
