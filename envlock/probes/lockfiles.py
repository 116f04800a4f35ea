"""Find the lockfiles an environment was built from, for the manifest's ``[lockfiles]`` table."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path

from envlock.manifest import LockfileRef, LockfilesInfo

__all__ = ["find_lockfiles", "lockfile_kind", "KINDS"]

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


def lockfile_kind(path: str | Path) -> str | None:
    """The kind of lockfile ``path`` is by name and content, or ``None``.

    ``conda-*.lock`` must contain ``@EXPLICIT`` (conda's explicit spec); a requirements file
    must pin every requirement with ``--hash`` (pip's hash-checking mode), else it is a wish
    list, not a lock.
    """
    path = Path(path)
    name = path.name
    if name.count(".") > 2 and fnmatch.fnmatch(name, "pylock.*.toml"):  # noqa: PLR2004
        return None  # PEP 751: the <name> part contains no dot
    kind = next((k for pattern, k in KINDS if fnmatch.fnmatch(name, pattern)), None)
    if kind == "conda-explicit":
        return kind if "@EXPLICIT" in _head(path) else None
    if kind == "requirements":
        return kind if _all_hashed(path) else None
    return kind


def _head(path: Path, size: int = 65536) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def _all_hashed(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    # Join continuation lines, then every requirement line must carry a hash.
    logical = text.replace("\\\n", " ").splitlines()
    reqs = [ln.strip() for ln in logical if ln.strip() and not ln.lstrip().startswith(("#", "-"))]
    return bool(reqs) and all("--hash=" in ln for ln in reqs)


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        if path.stat().st_size > _READ_LIMIT:
            return None
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def find_lockfiles(directory: str | os.PathLike[str]) -> LockfilesInfo:
    """Look in ``directory`` (not below it) for lockfiles and hash them.

    :param directory: usually the project directory the snapshot is taken in.
    :returns: ``[lockfiles]``: ``status`` ``"ok"`` with ``files`` sorted by name,
        ``"absent"`` when there is none, ``"error"`` when the directory cannot be listed;
        each :class:`LockfileRef` has the absolute ``path``, its ``kind`` (``"conda-lock"``,
        ``"conda-explicit"``, ``"pylock"``, ``"requirements"``) and the sha256 (hex) of its
        bytes.
    """
    root = Path(directory)
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        return LockfilesInfo(status="error", source=f"{root}: {exc.strerror}")
    files = []
    for name in names:
        path = root / name
        if not path.is_file():
            continue
        kind = lockfile_kind(path)
        if kind is None:
            continue
        digest = _sha256(path)
        if digest is None:
            continue
        files.append(LockfileRef(path=str(path.resolve()), kind=kind, sha256=digest))
    return LockfilesInfo(status="ok" if files else "absent", source=str(root.resolve()),
                         files=tuple(files))
