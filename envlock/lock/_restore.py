"""``envlock restore``: the exact commands that recreate an environment, and what they cannot.

A plan is built from lockfiles (``conda-lock.yml``, ``pylock.toml``, hash-pinned
``requirements.txt``) or from a manifest, whose ``[lockfiles]`` table names the files the
environment was built from.  A manifest that names no lockfile (or whose recorded lockfiles are
missing or changed since the snapshot) is restored from its own tables: conda packages as
``name=version=build`` from the URLs and md5/sha256 of their ``conda-meta`` records (py-rattler,
nothing solved), pip packages at their exact versions with uv (``--no-deps``: the recorded set,
nothing added), VCS and editable packages from their recorded commit, and, for a venv, an
interpreter of the recorded version found on this machine (:func:`find_python`).  The plan is
printed as shell commands; ``--run`` runs them (through :func:`envlock._run.run`, with a generous
timeout), installing a conda-lock file with py-rattler when no conda/mamba/micromamba exists.

No lockfile restores the machine: the NVIDIA driver, a system CUDA, compilers, the C library,
the CPU and GPU, environment variables, uncommitted code.  The plan lists those, taken from
the manifest, so that nobody expects a lockfile to bring them back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock._run import Runner, run
from envlock.errors import ManifestError
from envlock.lock._from_manifest import find_python, index_options, plan_from_manifest
from envlock.lock._lockselect import check_applies
from envlock.lock._plan import RestorePlan, Step, not_restored
from envlock.lock._projectlocks import PROJECT_LOCKS
from envlock.probes.lockfiles import _sha256, lockfile_kind
from envlock.errors import LockContradictionError
from envlock.probes.lockfiles import contradictions
from urllib.parse import urlparse
from envlock.manifest import load

if TYPE_CHECKING:
    from envlock._selection import Requested
    from envlock.manifest import Manifest

__all__ = ["plan_restore", "validate_lockfile"]
def _lockfiles_of(manifest_path: Path, manifest: Manifest) -> tuple[list[Path], list[str]]:
    files, warnings = [], []
    info = manifest.lockfiles
    for ref in info.files if info else ():
        path = Path(ref.path)
        if not path.is_absolute():
            path = manifest_path.parent / path
        if not path.exists():
            warnings.append(f"{path}: recorded in the manifest but missing")
            continue
        if _sha256(path) != ref.sha256:
            warnings.append(f"{path}: changed since the manifest was taken (sha256 differs); "
                            "not used")
            continue
        _refuse_contradiction(manifest_path, manifest, path)
        files.append(path)
    return files, warnings


def _refuse_contradiction(manifest_path: Path, manifest: Manifest, lock: Path) -> None:
    """Refuse a recorded lock that pins other packages than the manifest (probes.lockfiles)."""

    try:
        bad = contradictions(manifest, lock)
    except ValueError as exc:  # InputError too: unreadable or malformed
        raise ManifestError(str(exc)) from None
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise LockContradictionError(
            f"{lock} contradicts the manifest {manifest_path}: " + "; ".join(bad[:5]) + more
            + "; it would build another environment, not restoring")


def _pylock_not_locked(path: Path) -> list[str]:
    from envlock.manifest._toml import load_file

    data = load_file(path)
    table = data.get("tool", {}).get("envlock", {}) if isinstance(data.get("tool"), dict) else {}
    out = []
    for item in table.get("not-locked", []) if isinstance(table, dict) else []:
        if isinstance(item, dict) and item.get("kind") == "not-reproducible":
            out.append(f"{item.get('name')} {item.get('version')}: {item.get('reason')}")
    return out


def validate_lockfile(path: str | Path, kind: str) -> None:
    """Check that a lockfile is one its installer will accept, before anything runs.

    * ``conda-lock``: conda-lock's own parser (``conda_lock.lockfile.parse_conda_lock_file``);
      without conda-lock installed, a structural check of the same version-1 layout.
    * ``pylock``: packaging's reference PEP 751 parser (``packaging.pylock``, packaging >= 25),
      which also refuses a ``lock-version`` it does not support (PEP 751: a tool must not
      install from a major version it does not know).
    * ``conda-explicit``: UTF-8 text whose lines after ``@EXPLICIT`` are package URLs
      (conda's explicit-spec format).
    * ``requirements``: every requirement parses as a PEP 508 requirement
      (``packaging.requirements``).

    :param kind: as :func:`envlock.probes.lockfiles.lockfile_kind` names it.
    :raises ManifestError: one line naming the file and what is wrong with it.
    """
    from envlock.manifest._toml import read_text

    path = Path(path)
    if kind in ("conda-lock", "pylock"):  # the shared readers: conda-lock's model, packaging
        from envlock import formats

        formats.read_lock(path)
    elif kind == "conda-explicit":
        _check_explicit(path, read_text(path))
    elif kind == "requirements":
        _check_requirements(path, read_text(path))


def _check_explicit(path: Path, text: str) -> None:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "@EXPLICIT"), None)
    if start is None:
        raise ManifestError(f"{path}: not a conda explicit lock (no @EXPLICIT line)")
    for number, line in enumerate(lines[start + 1:], start + 2):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        url = entry.split("#", 1)[0]
        if not urlparse(url).scheme or not url.endswith((".conda", ".tar.bz2")):
            raise ManifestError(f"{path}: line {number} is not a conda package URL: {entry[:80]}")


def _check_requirements(path: Path, text: str) -> None:

    from packaging.requirements import InvalidRequirement, Requirement

    for line in text.replace("\\\n", " ").splitlines():
        entry = line.strip()
        if not entry or entry.startswith(("#", "-")):
            continue
        req = re.sub(r"\s--hash[= ]\S+", "", entry).split(" #", 1)[0].strip()
        try:
            Requirement(req)
        except InvalidRequirement as exc:
            raise ManifestError(f"{path}: requirement {req[:80]!r} is not valid PEP 508 "
                                f"({str(exc).splitlines()[0]})") from None


def _kind_of(path: Path) -> str | None:
    """What ``path`` is, by its content, with the shared reader (:mod:`envlock.formats`: regular
    files only, bounded): ``None`` for an envlock manifest, else the lockfile kind restore
    installs (``conda-lock``, ``conda-explicit``, ``pylock``, ``requirements`` when every line is
    hash-pinned).

    :raises ManifestError: unreadable or malformed (one line), or a kind restore cannot install.
    """
    from envlock import formats

    try:
        # a lockfile from someone else: its `-r`/`-c` are not followed here, and
        # envlock.lock._sources refuses them (docs/trust.md)
        kind = formats.read(path, exact=True, includes=False).kind
    except ManifestError as exc:
        if "unknown format" in str(exc):
            raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile"
                                ) from None
        raise
    if kind == "manifest":
        return None
    if kind in ("conda-lock", "conda-explicit", "pylock", "pixi.lock", *PROJECT_LOCKS):
        return kind
    if kind == "requirements" and lockfile_kind(path) == "requirements":
        return kind
    if kind == "requirements":  # not hash-pinned: a wish list, not a lock
        raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile")
    raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile (a {kind} is "
                        "not installed by restore: it installs conda-lock.yml, conda explicit "
                        "lists, pylock.toml, hash-pinned requirements.txt, uv.lock, pdm.lock, "
                        "poetry.lock and pixi.lock)")


def plan_restore(
    inputs: Sequence[str | Path], prefix: str | Path, *, python_version: str | None = None,
    index_map: Mapping[str, str] | None = None, index_url: str | None = None,
    find_links: Sequence[str] = (), no_index: bool = False, python: str | None = None,
    allow_index: Sequence[str] = (), trust_lockfile_indexes: bool = False,
    environ: Mapping[str, str] | None = None, runner: Runner = run,
    requested: Requested | None = None, environment: str | None = None,
    lock_platform: str | None = None,
) -> RestorePlan:
    """Build the restore plan for manifests and/or lockfiles.

    Nothing an input names is run, fetched or written here (docs/trust.md): every value that
    reaches a command is checked (:mod:`envlock._untrusted`), and the plan names every index,
    channel, URL and VCS remote ``--run`` contacts and every source it builds.

    Lockfiles given, or recorded in a manifest's ``[lockfiles]`` and unchanged since (same
    sha256), are preferred.  Without any, the manifest is restored from its own tables
    (:func:`manifest_pins`, :func:`find_python`, the ``conda-meta`` records).

    :param inputs: manifest files (``.toml``/``.json`` with an ``[envlock]`` table) and
        lockfiles, in any order; conda lockfiles are installed before pip ones.
    :param prefix: the environment directory to create.
    :param python_version: Python for a new venv when there is no conda-lock file: uv finds
        it (``--python VERSION``), or, where uv finds none, envlock's own interpreter when it is
        that version (``--python PATH``, :func:`find_python`).
    :param index_map: local-version label → index URL (``{"cu130": "https://…"}``) for pip
        packages with that label; PyTorch's labels default to :data:`PYTORCH_INDEX`.
    :param index_url: replaces PyPI; ``find_links``: directories of wheels; ``no_index``: use
        only ``find_links`` (uv's options of the same names).
    :param python: the interpreter for a venv restored from a manifest (default: one of the
        recorded version found on this machine).
    :param allow_index: further indexes a lockfile may bring (``--allow-index URL``); the
        user's own configuration is always admitted (:func:`envlock.lock._sources.user_indexes`).
    :param trust_lockfile_indexes: admit every index a lockfile names.
    :param environ: the variables pip's and uv's configuration is read from (``os.environ``).
    :param requested: the extras and groups of a uv.lock, pdm.lock or poetry.lock to install;
        ``environment``: a pixi.lock's (:mod:`envlock.lock._lockselect`; ``None``: the default);
        ``lock_platform``: its platform entry (``p2``; :func:`envlock.lock._pixirestore.convert_pixi`).
    :raises ManifestError: an input is neither a manifest nor a known lockfile, or a lockfile
        is malformed (see :func:`validate_lockfile`); nothing is run then.
    :raises UntrustedValueError: a value of an input is not what its field must be, or a
        lockfile names an index that is not admitted.
    """
    from envlock.lock._sources import user_indexes

    prefix = str(prefix)
    asked_version = python_version
    lockfiles, warnings, missing, bare, python_version = _gather(inputs, python_version)
    kinds = {p: _kind_of(p) for p in lockfiles}
    check_applies([*kinds.values(), *([None] if bare else [])], requested, environment,
                  lock_platform)
    if not lockfiles and bare:
        if len(bare) > 1:
            raise ManifestError("restore one manifest at a time when none records a lockfile "
                                f"({', '.join(str(p) for p, _ in bare)})")
        path, manifest = bare[0]
        return plan_from_manifest(
            path, manifest, prefix, warnings=warnings, missing=missing,
            index=index_options(manifest, index_map or {}, index_url, find_links, no_index),
            python=python, runner=runner, python_version=asked_version)
    projects = [p for p in dict.fromkeys(lockfiles) if kinds[p] in (*PROJECT_LOCKS, "pixi.lock")]
    lockfiles = [p for p in lockfiles if p not in projects]
    python_version = _venv_python(lockfiles, kinds, python_version, asked_version, warnings)
    python_version, notes = _project_python([p for p in projects if kinds[p] != "pixi.lock"], python_version)
    admitted = user_indexes([*allow_index, *(f for f in find_links if "://" in f),
                             *([index_url] if index_url else []), *(index_map or {}).values()],
                            environ)
    contacts, builds = _checked_sources(lockfiles, kinds, admitted, trust_lockfile_indexes)
    order = {"conda-lock": 0, "conda-explicit": 0, "pylock": 1, "requirements": 2}
    lockfiles = sorted(dict.fromkeys(lockfiles), key=lambda p: order.get(kinds[p] or "", 3))
    made = {p: "conda-explicit" for p in projects if kinds[p] == "pixi.lock"}  # conda creates it
    steps = _venv_step([*lockfiles, *projects], {**kinds, **made}, prefix, python_version, runner)
    steps += [s for p in sorted(projects, key=lambda p: p not in made)  # pixi's: conda makes it
              for s in _converted_steps(p, kinds[p] or "", prefix, python_version, admitted,
                                        trust_lockfile_indexes, contacts, builds, notes,
                                        (requested, environment, lock_platform))]
    steps += _install_steps(lockfiles, kinds, prefix, missing, warnings)
    return RestorePlan(prefix=prefix, steps=tuple(steps), notes=tuple(notes),
                       not_restored=tuple(dict.fromkeys(missing)), warnings=tuple(warnings),
                       contacts=tuple(dict.fromkeys(contacts)), builds=tuple(dict.fromkeys(builds)))


def _install_steps(lockfiles: list[Path], kinds: Mapping[Path, str | None], prefix: str,
                   missing: list[str], warnings: list[str]) -> list[Step]:
    """The steps that install ``lockfiles`` in order; what a pylock left out is added to
    ``missing``, a conda-lock file's pip-over-conda entries to ``warnings``."""
    steps = []
    for p in lockfiles:
        steps.append(_install_step(p, kinds[p], prefix))
        if kinds[p] == "pylock":
            missing += _pylock_not_locked(p)
        if kinds[p] == "conda-lock":
            warnings += _two_builds(p)
    return steps


def _project_python(projects: list[Path], version: str | None) -> tuple[str | None, list[str]]:
    """The Python project locks are converted for: ``version`` (asked or recorded), else
    envlock's own (said in a note, since a project lock names a range, not one version)."""
    if not projects or version is not None:
        return version, []
    import platform

    own = platform.python_version()
    return own, [f"{', '.join(p.name for p in projects)}: converted for Python {own} "
                 "(envlock's own; --python-version chooses another)"]


def _two_builds(path: Path) -> list[str]:
    """The pip entries of a conda-lock file that install a distribution one of its conda
    packages already provides (:func:`envlock.lock._conda_pypi.provided_dists`, conda-lock's
    rule), per platform: installed in order, pip's replaces conda's files — a lock conda-lock
    never writes (its pip solver takes conda's packages as installed)."""
    from types import SimpleNamespace

    from packaging.utils import canonicalize_name

    from envlock.lock import _condalock
    from envlock.lock._conda_pypi import provided_dists

    doc = _condalock.read(path)
    out = []
    for platform in sorted({p.platform for p in doc.package}):
        conda = [SimpleNamespace(name=p.name, version=p.version,
                                 build=p.url.rsplit("/", 1)[-1].removesuffix(".conda")
                                 .removesuffix(".tar.bz2").rsplit("-", 1)[-1],
                                 depends=tuple(p.dependencies), purls=())
                 for p in doc.package if p.manager == "conda" and p.platform == platform]
        provided = provided_dists(conda)
        for p in doc.package:
            dist = provided.get(canonicalize_name(p.name)) if p.manager == "pip" else None
            if dist is not None and p.platform == platform:
                out.append(f"{path.name} ({platform}): pip {p.name} {p.version} is installed over "
                           f"conda package {dist.conda} ({dist.name} {dist.version}): two builds "
                           "of one package, the environment ends with pip's; lock the spec "
                           "again (envlock lock -f) to resolve pip against conda")
    return out


def _gather(inputs: Sequence[str | Path], python_version: str | None
            ) -> tuple[list[Path], list[str], list[str], list[tuple[Path, Manifest]], str | None]:
    """The lockfiles the inputs give or record, the warnings, what no rebuild restores, the
    manifests that name no usable lockfile, and the Python version (asked, else recorded).

    :raises ManifestError: an input missing or unreadable.
    """
    lockfiles: list[Path] = []
    warnings: list[str] = []
    missing: list[str] = []
    bare: list[tuple[Path, Manifest]] = []
    for item in inputs:
        path = Path(item)
        if not path.exists():
            raise ManifestError(f"{path}: no such file")
        if _kind_of(path) is not None:
            lockfiles.append(path)
            continue
        manifest = load(str(path))
        found, warns = _lockfiles_of(path, manifest)
        lockfiles += found
        warnings += warns
        missing += not_restored(manifest)
        if python_version is None and manifest.python and manifest.python.version:
            python_version = manifest.python.version
        if not found:
            bare.append((path, manifest))
    return lockfiles, warnings, missing, bare, python_version


def _venv_python(lockfiles: list[Path], kinds: Mapping[Path, str | None], version: str | None,
                 asked: str | None, warnings: list[str]) -> str | None:
    """The venv's Python: ``version`` (asked, else recorded), else the one a pylock was locked
    for (:func:`_pylock_python`); a difference from the pylock's is said in ``warnings``."""
    locked_for, where = _pylock_python(lockfiles, kinds)
    if locked_for and version is None:
        warnings.append(f"{where}: locked for Python {locked_for}; the new venv gets exactly "
                        f"{locked_for} (another version only with --python-version)")
        return locked_for
    if locked_for and version != locked_for:
        warnings.append(f"{where}: locked for Python {locked_for}; the new venv gets {version}, as "
                        + ("--python-version asks" if asked else "the manifest records"))
    return version


def _pylock_python(lockfiles: list[Path], kinds: Mapping[Path, str | None]
                   ) -> tuple[str | None, str]:
    """The Python a pylock was locked for, when no manifest or ``--python-version`` says it.

    ``uv pip compile --format pylock.toml`` (how ``envlock lock`` writes a pylock) records the
    interpreter it resolved for as ``requires-python = ">=X.Y.Z"``; without that version ``uv
    venv`` takes whichever Python it finds first (a pyenv 3.11.7 for a Debian 3.11.2 lock), so a
    full ``X.Y.Z`` lower bound is the version it was locked for (issue 25).

    :returns: the version (``"3.11.2"``) or ``None``, and where it was read
        (``"pylock.toml: requires-python '>=3.11.2'"``).
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from envlock._io import InputError
    from envlock._io import read_text
    from envlock.formats.locks import read_pylock
    from envlock.manifest._toml import load_toml

    for p in lockfiles:
        if kinds[p] != "pylock":
            continue
        try:
            rp = read_pylock(load_toml(read_text(p, limit=1 << 24), str(p)), str(p)).requires_python
            specs = list(SpecifierSet(rp or ""))
        except (InputError, InvalidSpecifier, ManifestError):
            continue
        if len(specs) == 1 and specs[0].operator == ">=" and re.fullmatch(
                r"\d+\.\d+\.\d+", specs[0].version):
            return specs[0].version, f"{p}: requires-python {rp!r}"
    return None, ""


def _venv_step(lockfiles: list[Path], kinds: Mapping[Path, str | None], prefix: str,
               python_version: str | None, runner: Runner) -> list[Step]:
    """``uv venv`` first when no conda lockfile creates the environment (with envlock's own
    interpreter where uv would find none of ``python_version``)."""
    if not lockfiles or any(kinds[p] in ("conda-lock", "conda-explicit") for p in lockfiles):
        return []
    title, interpreter = "create a virtual environment", python_version
    if python_version:  # what uv finds it finds again; else envlock's own, if that version
        choice = find_python(python_version, own_last=True, runner=runner)
        if choice.exact and choice.how == "envlock's own" and choice.path:
            title, interpreter = f"create a virtual environment with {choice.describe()}", choice.path
    argv = ["uv", "venv", prefix] + (["--python", interpreter] if interpreter else [])
    return [Step(title=title, argv=tuple(argv), kind="uv-venv")]


def _install_step(p: Path, kind: str | None, prefix: str) -> Step:
    """The step that installs lockfile ``p`` of ``kind`` into ``prefix``."""
    python = f"{prefix}/bin/python"
    if kind == "conda-lock":
        return Step(title=f"install the conda packages of {p.name}", kind="conda-lock",
                    argv=("conda-lock", "install", "--prefix", prefix, str(p)), lockfile=str(p))
    if kind == "conda-explicit":
        return Step(title=f"install the explicit conda lock {p.name}", kind="conda-lock",
                    argv=("conda", "create", "--prefix", prefix, "--file", str(p)), lockfile=str(p))
    if kind == "pylock":
        return Step(title=f"install the pip packages of {p.name}", kind="pylock",
                    argv=("uv", "pip", "install", "--python", python, "-r", str(p)), lockfile=str(p))
    return Step(title=f"install the hash-pinned requirements {p.name}", kind="requirements",
                lockfile=str(p), argv=("uv", "pip", "install", "--python", python,
                                       "--require-hashes", "-r", str(p)))


def _checked_sources(lockfiles: list[Path], kinds: Mapping[Path, str | None], admitted: Any,
                     trust: bool) -> tuple[list[str], list[str]]:
    """Validate every lockfile and admit its indexes, before any command is printed or run;
    the places ``--run`` contacts and the sources it builds.

    :raises ManifestError: a malformed lockfile; :raises UntrustedValueError: an index not
        admitted.
    """
    from envlock.lock._sources import check_admitted, lockfile_sources

    contacts: list[str] = []
    builds: list[str] = []
    for p in dict.fromkeys(lockfiles):
        validate_lockfile(p, kinds[p] or "")
        sources = lockfile_sources(p, kinds[p] or "")
        check_admitted(sources, p, admitted, trust)
        contacts += sources.contacts
        builds += sources.builds
    return contacts, builds


def _converted_steps(path: Path, kind: str, prefix: str, python_version: str | None,
                     admitted: Any, trust: bool, contacts: list[str], builds: list[str],
                     notes: list[str],
                     select: tuple[Any, str | None, str | None] = (None, None, None)
                     ) -> list[Step]:
    """A project lock (``uv.lock``, ``pdm.lock``, ``poetry.lock``) converted for this target
    and the extras and groups ``select[0]`` (:func:`envlock.lock._projectlocks.convert`), or a
    ``pixi.lock``'s environment ``select[1]`` and platform entry ``select[2]`` for this
    platform (:func:`convert_pixi`): for
    each file, the step that writes it beside the prefix and the step that installs it.  Its
    indexes and URLs are checked and admitted here, before anything is printed or run;
    ``contacts``, ``builds`` and ``notes`` are extended.

    :raises ManifestError: the lock cannot be converted; :raises UntrustedValueError: an index
        or URL not admitted.
    """
    from envlock.formats.conda import current_subdir
    from envlock.formats.markers import target_marker_env
    from envlock.lock._pixirestore import convert_pixi
    from envlock.lock._projectlocks import convert, destination
    from envlock.lock._sources import (
        check_admitted,
        explicit_sources,
        pylock_sources,
        requirements_sources,
    )

    steps = []
    for done in (convert_pixi(path, current_subdir(), select[1], select[2])
                 if kind == "pixi.lock" else
                 [convert(path, kind, target_marker_env(python_version, "cpython"), select[0])]):
        dest = destination(prefix, done.kind)
        if done.kind == "conda-explicit":
            _check_explicit(dest, done.text)
            sources = explicit_sources(done.text, path)
        else:
            sources = (pylock_sources(done.data, path) if done.data is not None
                       else requirements_sources(dest, done.text))
        check_admitted(sources, path, admitted, trust)
        contacts += sources.contacts
        builds += sources.builds
        notes += done.left_out
        steps += [Step(title=f"write {dest.name}: {len(done.names)} package(s) of {done.title}",
                       argv=("write", str(dest)), kind="write", lockfile=str(dest),
                       content=done.text),
                  _install_step(dest, done.kind, prefix)]
    return steps
