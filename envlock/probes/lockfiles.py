"""The lockfiles an environment was built from, for the manifest's ``[lockfiles]`` table, and
whether they still describe it.

A lockfile is recorded when it lies **beside the manifest** (the directory of ``-o``) or is
given with ``--lock``; one in the working directory only is *not* the manifest's (``cd lockB &&
envlock snapshot -o ../a.toml`` must not claim lockB's pylock) and is only mentioned in a
warning.  Each recorded file has its sha256 and ``matches``: whether every package it pins is
installed at that version in the snapshot (``mismatches`` names those that are not).
:func:`contradictions` is the same comparison for ``restore``, which refuses a lock that
contradicts the manifest it was recorded with.

Every file is read through :mod:`envlock._io` (regular files only, ``O_NONBLOCK``, bounded).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock._io import InputError, read_bytes
from envlock._names import canonicalize
from envlock.manifest import LockfileRef, LockfilesInfo
import re
from collections import Counter

if TYPE_CHECKING:
    from envlock.manifest import CondaPackage, Manifest, PipPackage

__all__ = [
    "KINDS",
    "Installed",
    "collect_lockfiles",
    "compare_lock",
    "contradictions",
    "find_lockfiles",
    "lockfile_kind",
    "match_lockfiles",
]

#: File-name patterns → lockfile kind.  conda-lock's unified file and its explicit
#: per-platform renderings; PEP 751 names (``pylock.toml``, ``pylock.<name>.toml``);
#: requirements files count only when every requirement is hash-pinned.
KINDS: tuple[tuple[str, str], ...] = (
    ("conda-lock.yml", "conda-lock"),
    ("conda-lock.yaml", "conda-lock"),
    ("*.conda-lock.yml", "conda-lock"),
    ("*.conda-lock.yaml", "conda-lock"),
    ("conda-*.lock", "conda-explicit"),
    ("pylock.toml", "pylock"),
    ("pylock.*.toml", "pylock"),
    ("requirements*.txt", "requirements"),
)

_READ_LIMIT = 64 * 1024 * 1024  # bytes; larger files are not lockfiles we hash


def lockfile_kind(path: str | os.PathLike[str]) -> str | None:
    """The kind of lockfile ``path`` is by name and content, or ``None``.

    ``conda-*.lock`` must contain ``@EXPLICIT`` (conda's explicit spec); a requirements file
    must pin every requirement with ``--hash`` (pip's hash-checking mode), else it is a wish
    list, not a lock.
    """
    path = Path(path)
    name = path.name
    if name.count(".") > 2 and fnmatch.fnmatch(name, "pylock.*.toml"):
        return None  # PEP 751: the <name> part contains no dot
    kind = next((k for pattern, k in KINDS if fnmatch.fnmatch(name, pattern)), None)
    if kind == "conda-explicit":
        return kind if "@EXPLICIT" in _text(path) else None
    if kind == "requirements":
        return kind if _all_hashed(path) else None
    return kind


def _text(path: Path) -> str:
    try:
        return read_bytes(path, limit=_READ_LIMIT).decode("utf-8", "replace")
    except InputError:
        return ""


def _all_hashed(path: Path) -> bool:
    text = _text(path)
    # Join continuation lines, then every requirement line must carry a hash.
    logical = text.replace("\\\n", " ").splitlines()
    reqs = [ln.strip() for ln in logical if ln.strip() and not ln.lstrip().startswith(("#", "-"))]
    return bool(reqs) and all("--hash=" in ln for ln in reqs)


def _sniff(path: Path) -> str | None:
    """The kind of a lockfile given by the user under another name, from its content."""
    text = _text(path)
    if "@EXPLICIT" in text:
        return "conda-explicit"
    if path.suffix == ".toml" and "lock-version" in text:
        return "pylock"
    if path.suffix in (".yml", ".yaml") and "package:" in text:
        return "conda-lock"
    if path.suffix == ".txt" and _all_hashed(path):
        return "requirements"
    return None


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_bytes(path, limit=_READ_LIMIT)).hexdigest()
    except InputError:
        return None


def _refs_in(directory: Path, found: str, *, missing_ok: bool = False
             ) -> tuple[list[LockfileRef], str | None]:
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError as exc:
        if missing_ok:
            return [], None  # the output directory does not exist yet: nothing beside it
        return [], f"{directory}: {exc.strerror}"
    except OSError as exc:
        return [], f"{directory}: {exc.strerror}"
    refs = []
    for name in names:
        path = directory / name
        if not path.is_file():
            continue
        kind = lockfile_kind(path)
        if kind is None:
            continue
        digest = _sha256(path)
        if digest is None:
            continue
        refs.append(LockfileRef(path=str(path.resolve()), kind=kind, sha256=digest, found=found))
    return refs, None


def find_lockfiles(directory: str | os.PathLike[str]) -> LockfilesInfo:
    """Look in ``directory`` (not below it) for lockfiles and hash them.

    :returns: ``[lockfiles]``: ``status`` ``"ok"`` with ``files`` sorted by name,
        ``"absent"`` when there is none, ``"error"`` when the directory cannot be listed;
        each :class:`LockfileRef` has the absolute ``path``, its ``kind`` (``"conda-lock"``,
        ``"conda-explicit"``, ``"pylock"``, ``"requirements"``) and the sha256 (hex) of its
        bytes.
    """
    root = Path(directory)
    refs, error = _refs_in(root, "beside")
    if error:
        return LockfilesInfo(status="error", source=error)
    return LockfilesInfo(status="ok" if refs else "absent", source=str(root.resolve()),
                         files=tuple(refs))


def collect_lockfiles(
    beside: str | os.PathLike[str],
    given: Sequence[str | os.PathLike[str]] = (),
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> tuple[LockfilesInfo, list[str]]:
    """The lockfiles of a manifest written into ``beside``, plus those ``given`` (``--lock``).

    :param beside: the directory the manifest is written to.
    :param given: lockfiles named by the user (any file name; the kind is read from it).
    :param cwd: the working directory; lockfiles there but not beside the manifest are not
        recorded, only named in a warning.
    :returns: ``([lockfiles], warnings)``.
    :raises InputError: a given file is missing, unreadable, or not a lockfile envlock knows.
    """
    root = Path(beside)
    refs, error = _refs_in(root, "beside", missing_ok=True)
    seen = {r.path for r in refs}
    for item in given:
        path = Path(item)
        digest = _sha256(path)
        if digest is None:
            read_bytes(path, limit=_READ_LIMIT)  # raises the one-line reason
        kind = lockfile_kind(path) or _sniff(path)
        if kind is None:
            raise InputError(f"{path}: --lock: not a lockfile envlock knows (conda-lock.yml, "
                             "conda-*.lock with @EXPLICIT, pylock.toml, hash-pinned requirements)")
        real = str(path.resolve())
        if real not in seen:
            seen.add(real)
            refs.append(LockfileRef(path=real, kind=kind, sha256=digest or "", found="given"))
    warnings = []
    if cwd is not None and Path(cwd).resolve() != root.resolve():
        elsewhere = [r for r in _refs_in(Path(cwd), "cwd")[0] if r.path not in seen]
        if elsewhere:
            names = ", ".join(Path(r.path).name for r in elsewhere)
            warnings.append(f"lockfiles: {names} in the working directory {Path(cwd).resolve()} "
                            "not recorded: they are not beside the manifest (use --lock FILE)")
    refs.sort(key=lambda r: r.path)
    if error and not refs:
        return LockfilesInfo(status="error", source=error), warnings
    return LockfilesInfo(status="ok" if refs else "absent", source=str(root.resolve()),
                         files=tuple(refs)), warnings


# -- comparing a lock with an environment ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Installed:
    """What an environment has, for comparing with a lock.

    :ivar pip: normalized name → version of every importable distribution.
    :ivar conda: conda package name → ``(version, build)``.
    :ivar platform: the conda subdir (``linux-64``) or ``None``.
    :ivar markers: PEP 508 marker environment values (``python_version`` …).
    """

    pip: Mapping[str, str]
    conda: Mapping[str, tuple[str, str]]
    platform: str | None
    markers: Mapping[str, str]

    @classmethod
    def of(cls, pip: Iterable[PipPackage], conda: Iterable[CondaPackage],
           python_version: str | None, machine: str | None) -> Installed:
        """Build from a snapshot's ``[pip]`` and ``[conda]`` packages."""
        conda = tuple(conda)
        subdirs = Counter(c.subdir for c in conda if c.subdir and c.subdir != "noarch")
        markers = {"sys_platform": "linux", "os_name": "posix", "platform_system": "Linux",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython"}
        if python_version:
            markers["python_full_version"] = python_version
            markers["python_version"] = ".".join(python_version.split(".")[:2])
        if machine:
            markers["platform_machine"] = machine
        return cls(pip={p.name: p.version for p in pip},
                   conda={c.name: (c.version, c.build) for c in conda},
                   platform=subdirs.most_common(1)[0][0] if subdirs else None, markers=markers)

    @classmethod
    def of_manifest(cls, manifest: Manifest) -> Installed:
        """Build from a whole manifest."""
        return cls.of(manifest.pip.packages if manifest.pip else (),
                      manifest.conda.packages if manifest.conda else (),
                      manifest.python.version if manifest.python else None,
                      manifest.platform.machine if manifest.platform else None)


def _same_pip(locked: str, installed: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(locked) == Version(installed)
    except InvalidVersion:
        return locked == installed


def _marker_applies(marker: Any, env: Mapping[str, str]) -> bool:
    if marker is None:
        return True
    try:
        return bool(marker.evaluate(dict(env)))
    except Exception:  # noqa: BLE001 - an unknown variable: cannot tell, do not claim a mismatch
        return False


def _line_marker(rest: str) -> Any:
    """The PEP 508 marker after a requirements line's ``name==version`` (``; sys_platform ==
    'win32' --hash=…  # comment``), as pip reads it (split at ``;``, options and comments
    off), or ``None``: a line pip installs only where its marker holds
    (``InstallRequirement.match_markers``).  A marker packaging refuses: ``None`` (compared)."""
    rest = rest.strip()
    if not rest.startswith(";"):
        return None
    text = re.split(r"\s--?[a-z]|(?:^|\s)#", " " + rest[1:])[0].strip()
    from packaging.markers import InvalidMarker, Marker

    try:
        return Marker(text) if text else None
    except InvalidMarker:
        return None


def _pylock_pins(path: Path, text: str) -> list[tuple[str, str, Any]]:
    """``(name, version, marker)`` of a PEP 751 file, through :mod:`packaging.pylock`; a file
    it rejects (or an older ``packaging``) is read for its ``name``/``version``/``marker`` keys.

    :raises ValueError: not TOML (:class:`~envlock.errors.ManifestError`)."""
    from envlock.manifest._toml import loads  # tomllib, or tomli before 3.11

    data = loads(text, name=str(path))  # ManifestError (a ValueError) when malformed
    try:
        from packaging.pylock import Pylock

        lock = Pylock.from_dict(data)
        return [(str(p.name), str(p.version), p.marker) for p in lock.packages if p.version]
    except ImportError:
        pass  # packaging < 25.1: read the two keys directly
    except Exception:  # noqa: BLE001, S110 - PylockValidationError: its pins still count
        pass
    from packaging.markers import Marker

    out = []
    for p in data.get("packages") or ():
        if isinstance(p, dict) and all(isinstance(p.get(k), str) for k in ("name", "version")):
            out.append((p["name"], p["version"], Marker(p["marker"]) if p.get("marker") else None))
    return out


def _conda_file(url: str) -> tuple[str, str, str] | None:
    fname = url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    for ext in (".conda", ".tar.bz2"):
        if fname.endswith(ext):
            parts = fname[: -len(ext)].rsplit("-", 2)
            if len(parts) == 3:
                return parts[0], parts[1], parts[2]
    return None


def compare_lock(path: str | os.PathLike[str], kind: str, have: Installed) -> list[str]:
    """The packages ``path`` pins that the environment does not have at that version.

    :param kind: as :func:`lockfile_kind` names it.
    :returns: ``"<name>: locked <v>, installed <v>"`` / ``"<name>: locked <v>, not installed"``
        lines, sorted; ``[]`` when everything the lock pins is installed.  Packages whose PEP 508
        marker does not apply to the environment (a pylock entry, a requirements line) and
        entries for other conda platforms are not compared.
    :raises InputError: the file cannot be read.
    :raises ValueError: the file is malformed.
    """
    path = Path(path)
    text = read_bytes(path, limit=_READ_LIMIT).decode("utf-8", "replace")
    out: list[str] = []

    def pip(name: str, version: str) -> None:
        got = have.pip.get(canonicalize(name))
        if got is None:
            out.append(f"{canonicalize(name)}: locked {version}, not installed")
        elif not _same_pip(version, got):
            out.append(f"{canonicalize(name)}: locked {version}, installed {got}")

    def conda(name: str, version: str, build: str | None) -> None:
        got = have.conda.get(name)
        if got is None:
            out.append(f"{name}: locked {version}{' ' + build if build else ''}, not installed")
        elif got[0] != version or (build and got[1] != build):
            out.append(f"{name}: locked {version}{' ' + build if build else ''}, "
                       f"installed {got[0]} {got[1]}")

    if kind == "pylock":
        for name, version, marker in _pylock_pins(path, text):
            if _marker_applies(marker, have.markers):
                pip(name, version)
    elif kind == "requirements":
        for line in text.replace("\\\n", " ").splitlines():
            m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;]+)",
                         line)
            if m and _marker_applies(_line_marker(line[m.end():]), have.markers):
                pip(m.group(1), m.group(2))
    elif kind == "conda-explicit":
        for line in text.splitlines():
            if "://" in line and not line.lstrip().startswith("#"):
                parsed = _conda_file(line.strip())
                if parsed:
                    conda(*parsed)
    elif kind == "conda-lock":
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: malformed YAML ({str(exc).splitlines()[0]})") from None
        entries = data.get("package") if isinstance(data, dict) else None
        for e in entries if isinstance(entries, list) else ():
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                continue
            if have.platform and e.get("platform") not in (None, have.platform):
                continue
            version = str(e.get("version", ""))
            if e.get("manager") == "pip":
                pip(e["name"], version)
            else:
                parsed = _conda_file(str(e.get("url", "")))
                conda(e["name"], version, parsed[2] if parsed else None)
    return sorted(out)


def match_lockfiles(info: LockfilesInfo, have: Installed) -> tuple[LockfilesInfo, list[str]]:
    """``info`` with ``matches``/``mismatches`` filled in for each file, and warning lines for
    those that do not match the environment."""
    files, warnings = [], []
    for ref in info.files:
        try:
            bad = compare_lock(ref.path, ref.kind, have)
        except (InputError, ValueError) as exc:
            warnings.append(f"lockfiles: {exc}")
            files.append(ref)
            continue
        files.append(replace(ref, matches=not bad, mismatches=tuple(bad)))
        if bad:
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            warnings.append(f"lockfiles: {ref.path} does not match this environment: "
                            + "; ".join(bad[:3]) + more)
    return replace(info, files=tuple(files)), warnings


def contradictions(manifest: Manifest, lock_path: str | os.PathLike[str]) -> list[str]:
    """The packages where the lockfile ``lock_path`` contradicts ``manifest``.

    Used by ``restore`` before it installs a lock recorded in a manifest: a lock that pins
    other versions than the manifest records would rebuild another environment.

    :returns: lines as :func:`compare_lock` gives them; ``[]`` when the lock agrees (or its
        kind is unknown).
    :raises InputError: the lock cannot be read; :raises ValueError: it is malformed.
    """
    kind = lockfile_kind(lock_path) or _sniff(Path(lock_path))
    if kind is None:
        return []
    return compare_lock(lock_path, kind, Installed.of_manifest(manifest))
