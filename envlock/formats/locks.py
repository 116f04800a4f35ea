"""Lockfiles: the :class:`Locked` entry they are read into; conda-lock, PEP 751 ``pylock.toml``
(``pixi.lock``: :mod:`envlock.formats.pixilock`; ``uv.lock``, ``poetry.lock``, ``pdm.lock``:
:mod:`envlock.formats.projectlocks`).

Each is read into :class:`Locked` entries (manager, name, version, platform, build, source,
marker, hashes), validated by the reference parser where one exists:

* ``conda-lock.yml`` — conda-lock's own pydantic model (``conda_lock.lockfile.v1.models.Lockfile``
  then ``lockfile_v1_to_v2``, as ``parse_conda_lock_file`` does), when conda-lock is installed;
  otherwise a structural check of the same required keys and types;
* ``pylock.toml`` — :meth:`packaging.pylock.Pylock.from_dict` (packaging >= 25), which also
  refuses a ``lock-version`` it does not support (PEP 751);
* ``uv.lock``, ``poetry.lock`` and ``pdm.lock`` have no reference parser in Python: their
  readers are in :mod:`envlock.formats.projectlocks` (the shared key checks are here);
* ``pixi.lock`` (YAML, ``version`` 3–7): :mod:`envlock.formats.pixilock` (version 3, the
  conda-lock-shaped one: :mod:`envlock.formats.pixilegacy`).

Editable, virtual and local-directory entries are the project itself, not packages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, overload

from envlock._io import one_line
from envlock._names import canonicalize
from envlock.errors import ManifestError
from envlock.formats import conda as _conda
from envlock.formats.pep508 import UNKNOWN, version_from_url

__all__ = ["Locked", "LockFile", "check_conda_lock_layout", "conda_lock_groups", "read_conda_lock",
           "read_pylock", "for_install", "validate_conda_lock", "validate_pylock", "sniff_toml_lock",
           "is_conda_lock", "is_pylock", "pylock_near_miss"]


@dataclass(frozen=True, slots=True)
class Locked:
    """One locked package.

    :ivar manager: ``"conda"`` or ``"pip"``; ``name``: exact for conda, PEP 503 for pip.
    :ivar version: the pinned version (:data:`~envlock.formats.pep508.UNKNOWN` when none).
    :ivar platform: the conda subdir it is locked for (conda-lock, pixi), else ``None``.
    :ivar build, md5, cuda: conda build string, md5 and ``__cuda`` requirement.
    :ivar marker: the PEP 508 marker under which it applies (pylock, uv, pdm), else ``None``.
    :ivar vcs, commit: a VCS source and its commit.
    :ivar subdir: the conda subdir of a conda package (``noarch``, or the platform's), when
        the lock says (pixi.lock).
    :ivar url: where its file is, as the lock names it (pixi.lock: the ``conda``/``pypi``
        location), when the reader keeps it.
    :ivar groups: which installs need it, as ``(group, marker)`` pairs: group ``""`` is the
        default install (``uv sync --no-dev``, poetry's ``main``, pdm's ``default``), others
        a dependency group or ``extra:<name>``; the marker (``None``: always) is the condition
        of the dependency edges that reach it (``colorama`` only where
        ``sys_platform == 'win32'``).  ``()``: the format does not say (every entry is needed).
    """

    manager: str
    name: str
    version: str
    platform: str | None = None
    build: str | None = None
    channel: str | None = None
    md5: str | None = None
    sha256: str | None = None
    cuda: str | None = None
    marker: str | None = None
    vcs: str | None = None
    commit: str | None = None
    groups: tuple[tuple[str, str | None], ...] = ()
    subdir: str | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True)
class LockFile:
    """A lockfile read: its ``kind``, the platforms it locks (conda subdirs; ``()`` for the pip
    lockfiles, which lock for every platform through markers) and its packages.

    :ivar projects: PEP 503 names of the entries that are the project itself (uv's workspace
        members, editable/directory entries of pylock, poetry and pdm): installed, they are
        neither packages of the lock nor extra ones.
    :ivar requires_python: the lock's ``requires-python`` (PEP 440 specifier set: pylock,
        uv.lock), or ``None``.
    :ivar environments: the PEP 508 markers of the environments the lock is for (pylock's
        ``environments``; uv.lock's ``supported-markers``/``environments``); ``()``: any.
    :ivar conflicts: uv.lock's ``conflicts``: sets of extras (``"extra:<name>"``) and groups
        (``"<group>"``) of which ``uv sync`` installs at most one each (uv's
        ``tool.uv.conflicts``: the PyTorch ``cpu``/``cu124`` recipe); ``()``: none.
    :ivar pixi_platforms: a ``pixi.lock``'s platforms (:class:`~envlock.formats.pixilock.PixiPlatform`: name, subdir,
        virtual packages), in ``platforms`` order; ``()`` for other locks.
    :ivar sources: a ``pixi.lock``'s conda packages built from source (v7 ``conda_source``
        records, v6 ``conda: <path>`` ones), which rattler_lock reads as packages
        (``CondaLockedSourcePackage``: name, version) and envlock as the project too
        (:attr:`projects`; they are built, not downloaded, so never compared as packages).
    :ivar choices: every extra (``"extra:<name>"``) and dependency group a project lock
        (``uv.lock``, ``pdm.lock``, ``poetry.lock``) declares, also one no package needs
        (:func:`envlock.formats.projectlocks.declared_choices`): the names its tool's
        ``--extra``/``--group`` take (:meth:`envlock._selection.Requested.named`); ``None``
        for other locks, which declare none of their own (a conda-lock's categories are its
        packages').
    """

    kind: str
    platforms: tuple[str, ...]
    packages: tuple[Locked, ...]
    projects: tuple[str, ...] = ()
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    conflicts: tuple[frozenset[str], ...] = ()
    pixi_platforms: tuple[Any, ...] = ()
    sources: tuple[Locked, ...] = ()
    choices: frozenset[str] | None = None


def _err(name: str, what: str) -> ManifestError:
    return ManifestError(f"{name}: {what}")


# -- conda-lock ------------------------------------------------------------------------------

def _first_pydantic(exc: Any) -> str:
    try:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{first['msg']} at {where}"
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def validate_conda_lock(data: Any, name: str) -> Any:
    """Validate a parsed conda-lock document as conda-lock's own parser does.

    :returns: conda-lock's v2 ``Lockfile`` model when conda-lock is installed, else ``None``
        (after the structural check of the version-1 layout).
    :raises ManifestError: ``<name>: not a valid conda-lock file (<reason>)``.
    """
    def bad(reason: str) -> ManifestError:
        return _err(name, f"not a valid conda-lock file ({one_line(reason)})")

    if not isinstance(data, Mapping):
        raise bad("top level is not a mapping")
    try:
        import pydantic
        from conda_lock.lockfile import lockfile_v1_to_v2
        from conda_lock.lockfile.v1.models import Lockfile as LockfileV1
        from conda_lock.lockfile.v2prelim.models import Lockfile
    except ImportError:
        _structural_conda_lock(data, bad)
        return None
    content = dict(data)
    version = content.pop("version", None)
    try:
        if version == 1 and not isinstance(version, bool):
            lock = lockfile_v1_to_v2(LockfileV1.model_validate(content))
        elif version == 2 and not isinstance(version, bool):
            lock = Lockfile.model_validate(content)
        elif version is None:
            raise bad("no version")
        else:
            raise bad(f"unknown version {version!r}")
        in_file_order = list(lock.package)
        lock.toposort_inplace()  # as parse_conda_lock_file does (it can refuse a file too)
        lock.package = in_file_order
    except pydantic.ValidationError as exc:
        raise bad(_first_pydantic(exc)) from None
    except ManifestError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise bad(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return lock


def _structural_conda_lock(data: Mapping[str, Any], bad: Any) -> None:
    if data.get("version") != 1:
        raise bad(f"version {data.get('version')!r} is not 1")
    meta = data.get("metadata")
    if not isinstance(meta, Mapping):
        raise bad("no metadata mapping")
    for key, typ in (("content_hash", Mapping), ("channels", list), ("platforms", list),
                     ("sources", list)):
        if not isinstance(meta.get(key), typ):
            raise bad(f"metadata.{key} missing or of the wrong type")
    pkgs = data.get("package")
    if not isinstance(pkgs, list):
        raise bad("no package list")
    for i, p in enumerate(pkgs):
        if not isinstance(p, Mapping):
            raise bad(f"package[{i}] is not a mapping")
        for key in ("name", "version", "manager", "platform", "url"):
            if not isinstance(p.get(key), str):
                raise bad(f"package[{i}].{key} missing or not a string")
        if p["manager"] not in ("conda", "pip"):
            raise bad(f"package[{i}].manager must be conda or pip")
        if not isinstance(p.get("hash"), Mapping):
            raise bad(f"package[{i}].hash missing")
        if p["manager"] == "conda" and not p["hash"].get("md5"):
            raise bad(f"package[{i}]: conda package hashes must use MD5")
        if "optional" not in p:
            raise bad(f"package[{i}].optional missing")


def check_conda_lock_layout(data: Any, name: str) -> None:
    """The structural check used without conda-lock: the keys and types conda-lock's version-1
    model requires (``metadata.content_hash/channels/platforms/sources``; each package's
    ``name``, ``version``, ``manager`` (conda or pip), ``platform``, ``url``, ``hash`` with an
    md5 for conda packages, ``optional``).

    :raises ManifestError: ``<name>: not a valid conda-lock file (<reason>)``.
    """
    def bad(reason: str) -> ManifestError:
        return _err(name, f"not a valid conda-lock file ({one_line(reason)})")

    if not isinstance(data, Mapping):
        raise bad("top level is not a mapping")
    _structural_conda_lock(data, bad)


def read_conda_lock(data: Any, name: str) -> LockFile:
    """The packages of a conda-lock file (every platform), validated by
    :func:`validate_conda_lock`; the conda build string comes from the record or its URL."""
    model = validate_conda_lock(data, name)
    out: list[Locked] = []
    if model is not None:
        rows = [(p.manager, p.name, p.version, p.platform, p.url, p.hash.md5, p.hash.sha256,
                 dict(p.dependencies), p.build, tuple(sorted(p.categories))) for p in model.package]
        platforms = tuple(str(p) for p in model.metadata.platforms)
    else:
        rows = [(p["manager"], p["name"], p["version"], p["platform"], p["url"],
                 p["hash"].get("md5"), p["hash"].get("sha256"),
                 p.get("dependencies") if isinstance(p.get("dependencies"), Mapping) else {},
                 p.get("build"), _v1_categories(p)) for p in data["package"]]
        platforms = tuple(str(p) for p in data["metadata"]["platforms"])
    for i, (manager, pname, version, platform, url, md5, sha256, deps, build, categories
            ) in enumerate(rows):
        _conda_lock_hashes(md5, sha256, str(url), f"{name}: package[{i}] ({one_line(str(pname), 80)})")
        channel = None
        if manager == "conda":
            try:
                parsed = _conda.parse_url(url)
                build = build or parsed["build"]
                channel = parsed["channel"]
            except ManifestError:
                pass
        cuda = str(deps["__cuda"] or "").strip() if "__cuda" in deps else None
        out.append(Locked(manager=manager, name=pname if manager == "conda" else canonicalize(pname),
                          version=str(version), platform=str(platform), build=build,
                          channel=channel, md5=md5 if manager == "conda" else None, sha256=sha256,
                          cuda=cuda, groups=conda_lock_groups(categories)))
    return LockFile("conda-lock", platforms, tuple(out))


def _conda_lock_hashes(md5: Any, sha256: Any, url: str, at: str) -> None:
    """A conda-lock entry's ``hash.md5``/``hash.sha256``: hex of 32/64 digits.  conda-lock's
    own model (``HashModel``) takes any string, and only installing the package then fails
    (conda compares the download's digest), so envlock checks them when reading.  A pip entry
    from git (``url: git+https://…@<commit>``) has the commit as its ``sha256`` (conda-lock's
    pip solver writes it so): a full hex commit there."""
    from envlock._untrusted import check_commit, check_digest

    if sha256 is not None and url.startswith("git+"):
        check_commit(sha256, f"{at}.hash.sha256")
        sha256 = None
    for algo, digest in (("md5", md5), ("sha256", sha256)):
        if digest is not None:
            check_digest(algo, digest, f"{at}.hash.{algo}")


def _v1_categories(p: Mapping[str, Any]) -> tuple[str, ...]:
    cat = p.get("category", "main")  # conda-lock's v1 model: ``category: str = "main"``
    return (cat,) if isinstance(cat, str) else ("main",)


def conda_lock_groups(categories: Iterable[str]) -> tuple[tuple[str, str | None], ...]:
    """:attr:`Locked.groups` of a conda-lock entry from its categories.

    conda-lock installs an entry when one of its categories is ``main``, ``dev`` (unless
    ``conda-lock install --no-dev``) or a category named with ``-E/--extras``
    (``render_lockfile_for_platform``: ``categories_to_install = {"main", *extras, "dev"?}``).
    A version-1 file writes one entry per category (``category:``, with ``optional: true``
    for every category but ``main``); conda-lock's v2 model merges them into ``categories``.

    :returns: ``("", None)`` for ``main`` (the default install), ``("dev", None)`` for
        ``dev``, ``("extra:<category>", None)`` for any other category.
    """
    out = {"" if c == "main" else "dev" if c == "dev" else f"extra:{c}" for c in categories}
    return tuple((g, None) for g in sorted(out or {""}))


def for_install(lock: LockFile, *, extras: Iterable[str] = (), dev: bool | None = None) -> LockFile:
    """``lock`` as its tool's install with ``extras`` (and the ``dev`` group) takes it: the
    entries of those groups become part of the default install (group ``""``).

    :param extras: ``-E NAME`` selects the group ``extra:NAME`` (``conda-lock install -E``,
        ``uv sync --extra``, ``poetry install -E``).
    :param dev: select the group ``dev``; ``None``: as the tool does by default — a
        conda-lock file's ``dev`` category is installed (``conda-lock install --dev`` is its
        default, ``DEFAULT_INSTALL_OPT_DEV = True``), other locks' ``dev`` group is not.
    """
    if dev is None:
        dev = lock.kind == "conda-lock"
    chosen = {f"extra:{e}" for e in extras} | ({"dev"} if dev else set())
    if not chosen:
        return lock
    out = []
    for x in lock.packages:
        if any(g in chosen for g, _ in x.groups):
            x = replace(x, groups=tuple(("" if g in chosen else g, m) for g, m in x.groups))
        out.append(x)
    return replace(lock, packages=tuple(out))


# -- pylock (PEP 751) ------------------------------------------------------------------------

def validate_pylock(data: Any, name: str) -> Any:
    """Validate a parsed ``pylock.toml`` with :mod:`packaging.pylock` (packaging >= 25).

    :returns: the ``Pylock`` object, or ``None`` with packaging < 25 (after checking
        ``lock-version`` 1.x and a ``packages`` array).
    :raises ManifestError: ``<name>: not a valid PEP 751 lock file (<reason>)``.
    """
    if not isinstance(data, Mapping):
        raise _err(name, "not a valid PEP 751 lock file (top level is not a table)")
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:
        version = str(data.get("lock-version", ""))
        if version.split(".")[0] != "1" or not isinstance(data.get("packages"), list):
            raise _err(name, f"not a valid PEP 751 lock file (lock-version "
                             f"{one_line(version) or 'missing'}, or no packages array)") from None
        return None
    packages = data.get("packages")
    for i, p in enumerate(packages if isinstance(packages, list) else ()):
        if isinstance(p, Mapping) and isinstance(p.get("name"), str):
            _name(p, f"packages[{i}]", name)  # its real fault, not packaging's "not normalized"
    try:
        lock = Pylock.from_dict(dict(data))
    except PylockValidationError as exc:
        raise _err(name, f"not a valid PEP 751 lock file ({one_line(str(exc))})") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise _err(name, f"not a valid PEP 751 lock file ({one_line(str(exc) or type(exc).__name__)})") from None
    for i, p in enumerate(data["packages"]):  # a file packaging reads: its digests, as values
        _pylock_hashes(p, f"{name}: packages[{i}] ({one_line(p['name'], 80)})")
    return lock


def _pylock_hashes(p: Mapping[str, Any], at: str) -> None:
    """Each ``hashes`` table of a pylock package (its ``archive``, ``sdist``, ``wheels``:
    PEP 751 "``hashes``", ``{algorithm = hex digest}``) checked by
    :func:`envlock._untrusted.check_digest` (``packaging.pylock`` checks only strings)."""
    from envlock._untrusted import check_digest

    files = [(k, p[k]) for k in ("archive", "sdist") if isinstance(p.get(k), Mapping)]
    wheels = p.get("wheels")
    files += [(f"wheels[{j}]", w) for j, w in enumerate(wheels if isinstance(wheels, list) else ())]
    for key, f in files:
        hashes = f.get("hashes") if isinstance(f, Mapping) else None
        for algo, digest in (hashes.items() if isinstance(hashes, Mapping) else ()):
            check_digest(algo, digest, f"{at}.{key}.hashes.{one_line(str(algo), 20)}")


def read_pylock(data: Any, name: str) -> LockFile:
    """The packages of a ``pylock.toml``; directory (project) entries are left out."""
    lock = validate_pylock(data, name)
    out = []
    projects: list[str] = []
    if lock is not None:
        for p in lock.packages:
            if p.directory is not None:
                projects.append(canonicalize(str(p.name)))
                continue  # the project (or a local directory) itself
            version = str(p.version) if p.version else None
            if version is None and p.archive is not None:
                version = version_from_url(p.archive.url or p.archive.path or "")
            if version is None and p.wheels:
                version = version_from_url(p.wheels[0].name or p.wheels[0].url or "")
            out.append(Locked("pip", canonicalize(str(p.name)), version or UNKNOWN,
                              marker=str(p.marker) if p.marker else None,
                              vcs=p.vcs.type if p.vcs else None,
                              commit=p.vcs.commit_id if p.vcs else None))
    else:
        for p in data["packages"]:
            if not isinstance(p, Mapping) or not isinstance(p.get("name"), str):
                continue
            if "directory" in p:
                projects.append(canonicalize(p["name"]))
                continue
            raw_vcs = p.get("vcs")
            vcs = raw_vcs if isinstance(raw_vcs, Mapping) else {}
            out.append(Locked("pip", canonicalize(p["name"]), str(p.get("version") or UNKNOWN),
                              marker=str(p["marker"]) if p.get("marker") else None,
                              vcs=vcs.get("type"), commit=vcs.get("commit-id")))
    rp = data.get("requires-python") if isinstance(data, Mapping) else None
    envs = data.get("environments") if isinstance(data, Mapping) else None
    return LockFile("pylock", (), tuple(out), projects=tuple(projects),
                    requires_python=rp if isinstance(rp, str) and rp.strip() else None,
                    environments=tuple(e for e in envs if isinstance(e, str))
                    if isinstance(envs, list) else ())


# -- key checks shared with envlock.formats.projectlocks --------------------------------------

@overload
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: Literal[True] = True) -> str: ...
@overload
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: bool) -> str | None: ...
def _str(p: Mapping[str, Any], key: str, where: str, name: str, required: bool = True) -> str | None:
    v = p.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise _err(name, f"{where}.{key} must be a non-empty string")
    return v


def _name(p: Mapping[str, Any], where: str, name: str) -> str:
    """``where.name``: a project name as PEP 508 ("Names") allows it — each tool's own reader
    requires one (uv's ``PackageName``, packaging's ``canonicalize_name(validate=True)`` that
    poetry, pdm and ``packaging.pylock`` use) — checked by
    :func:`envlock._untrusted.check_name` before the name is used (it may become a
    requirement line).

    :raises ManifestError: not a non-empty string, or not a PEP 508 name
        (``--index-url=http://evil``), quoted on one line.
    """
    from envlock._untrusted import UntrustedValueError, check_name

    try:
        return check_name(_str(p, "name", where, name), f"{name}: {where}.name")
    except UntrustedValueError as exc:  # the file is malformed (its own tool refuses it too),
        raise ManifestError(str(exc)) from None  # not a value refused after a good parse


def _packages(data: Mapping[str, Any], key: str, name: str) -> list[Mapping[str, Any]]:
    pkgs = data.get(key, [])
    if not isinstance(pkgs, list):
        raise _err(name, f"'{key}' must be an array of tables")
    for i, p in enumerate(pkgs):
        if not isinstance(p, Mapping):
            raise _err(name, f"{key}[{i}] is not a table")
    return pkgs


def _sha(hash_text: Any) -> str | None:
    return hash_text[7:] if isinstance(hash_text, str) and hash_text.startswith("sha256:") else None


def sniff_toml_lock(data: Mapping[str, Any]) -> str | None:
    """Which TOML lockfile ``data`` is: ``"pylock"``, ``"uv.lock"``, ``"poetry.lock"``,
    ``"pdm.lock"``, or ``None``."""
    if "lock-version" in data and "packages" in data:
        return "pylock"
    meta = data.get("metadata")
    if isinstance(meta, Mapping):
        if "lock_version" in meta:
            return "pdm.lock"
        if "content-hash" in meta or "lock-version" in meta:
            return "poetry.lock"
    if "version" in data and "package" in data and ("requires-python" in data or "revision" in data
                                                     or isinstance(data.get("package"), list)):
        return "uv.lock"
    return None



def is_conda_lock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a YAML document is a conda-lock file: ``metadata`` and ``package`` (or the file
    is named ``*conda-lock.yml``) — but not, without conda-lock's ``version``, a poetry or pdm
    lock's ``[metadata]`` (``content-hash``, ``lock_version``): such a lock written as JSON
    (which is YAML too) has both keys."""
    from envlock.formats.pixilegacy import is_legacy_pixi

    if "version" not in data and sniff_toml_lock(data) in ("poetry.lock", "pdm.lock"):
        return False
    if is_legacy_pixi(data):  # rattler's version 3: a pixi.lock, which conda-lock refuses
        return False
    return "metadata" in data and ("package" in data or src.base.endswith(
        ("conda-lock.yml", "conda-lock.yaml")))


def is_pylock(data: Mapping[str, Any], src: Any) -> bool:
    """Whether a TOML document is a PEP 751 ``pylock.toml``."""
    return sniff_toml_lock(data) == "pylock"


def pylock_near_miss(data: Mapping[str, Any], src: Any) -> None:
    """A file named like a pylock (``pylock.toml``, ``pylock.NAME.toml``) with ``packages`` but
    no ``lock-version``: say so, rather than "unknown format".

    :raises ManifestError: that fault.
    """
    if re.search(r"(^|[_.-])pylock(\.[^.]+)?\.toml$", src.base) and "packages" in data:
        raise ManifestError("not a PEP 751 lock file: no lock-version (PEP 751 requires it)")
