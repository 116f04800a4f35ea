"""``conda-lock.yml``: written with conda-lock's own models, read with its parser.

The file format belongs to conda-lock (``conda_lock.lockfile``): a version-1 YAML document
whose ``package`` list holds one entry per (manager, name, platform) with its URL and hashes
(md5 is required for conda packages).  envlock builds :class:`LockedDependency` objects and
lets :func:`conda_lock.lockfile.write_conda_lock_file` serialize them, so that
``conda-lock install`` accepts what envlock writes.

Entries come from two places: the ``conda-meta`` records of an existing prefix (no solver:
the URL, md5, sha256 and ``depends`` that conda recorded), or the records py-rattler's solver
returned.  :func:`install` installs such a file with py-rattler's installer (conda packages)
and uv (pip entries), for machines without conda.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import LockError, ManifestError
from envlock.formats.conda import current_subdir
from envlock.lock._tools import require, run_async
from envlock.redact import REDACTED
import os
import re

if TYPE_CHECKING:
    from envlock.manifest import CondaPackage

__all__ = [
    "Entry",
    "install_explicit",
    "entry_from_conda_package",
    "entries_from_records",
    "split_depends",
    "render",
    "read",
    "install",
    "content_hash",
    "pip_requirements",
    "expand_url",
    "TOKEN_VAR",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One package of a conda-lock file, independent of conda-lock's classes.

    :ivar manager: ``"conda"`` or ``"pip"``.
    :ivar platform: the target platform (``"linux-64"``), also for ``noarch`` packages.
    :ivar url: where the package file is downloaded from.
    :ivar md5, sha256: hex digests of that file (``md5`` is required for conda packages).
    :ivar dependencies: name → version/build constraint (``""`` when unconstrained).
    :ivar build: the conda build string (``None`` for pip).
    """

    manager: str
    name: str
    version: str
    platform: str
    url: str
    md5: str | None = None
    sha256: str | None = None
    dependencies: tuple[tuple[str, str], ...] = ()
    build: str | None = None


#: The variable a private channel's token is read from when a lockfile is installed.  The
#: token itself is never written: conda-lock and conda expand ``$VAR`` in channel URLs.
TOKEN_VAR = "CONDA_TOKEN"


def expand_url(url: str) -> str:
    """Put environment variables (``${CONDA_TOKEN}``) into a lockfile URL.

    :raises LockError: a variable the URL names is not set.
    """

    missing = [v for v in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", url)
               if v not in os.environ]
    if missing:
        raise LockError(f"{url} needs the environment variable {missing[0]} (the channel's token)")
    return os.path.expandvars(url)


def split_depends(depends: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Split conda match specs into (name, constraint) pairs, as conda-lock stores them.

    ``"python_abi 3.11.* *_cp311"`` becomes ``("python_abi", "3.11.* *_cp311")``; a bare name
    has the constraint ``""``.  Virtual packages (``__glibc``) are kept: they are real run
    requirements of the package.
    """
    out: dict[str, str] = {}
    for spec in depends:
        parts = spec.strip().split(None, 1)
        if not parts:
            continue
        out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return tuple(out.items())


def entry_from_conda_package(pkg: CondaPackage, platform: str) -> Entry:
    """Turn a ``conda-meta`` record (a manifest :class:`CondaPackage`) into an entry.

    :raises LockError: the record has no download URL or no md5, so no lockfile can pin it
        (e.g. a package built locally with ``conda build`` and installed from its file).
    """
    if not pkg.url or not pkg.md5:
        missing = "url" if not pkg.url else "md5"
        raise LockError(
            f"conda package {pkg.name} {pkg.version} {pkg.build} has no {missing} in conda-meta "
            "(installed from a local file?); it cannot be locked"
        )
    return Entry(
        manager="conda",
        name=pkg.name,
        version=pkg.version,
        platform=platform,
        url=pkg.url.replace(f"/t/{REDACTED}/", f"/t/${{{TOKEN_VAR}}}/"),
        md5=pkg.md5,
        sha256=pkg.sha256,
        dependencies=split_depends(pkg.depends),
        build=pkg.build,
    )


def entries_from_records(records: Iterable[Any], platform: str) -> list[Entry]:
    """Turn solved records (:class:`envlock.lock._spec.SolvedRecord`, or py-rattler
    ``RepoDataRecord`` objects) into entries."""
    out = []
    for rec in records:
        name = rec.name if isinstance(rec.name, str) else rec.name.normalized
        md5, sha256 = rec.md5, rec.sha256
        out.append(
            Entry(
                manager="conda",
                name=name,
                version=str(rec.version),
                platform=platform,
                url=str(rec.url),
                md5=md5.hex() if isinstance(md5, bytes) else md5,
                sha256=sha256.hex() if isinstance(sha256, bytes) else sha256,
                dependencies=split_depends(rec.depends),
                build=str(rec.build),
            )
        )
    return out


def content_hash(lines: Iterable[str]) -> str:
    """sha256 (hex) of text lines, used for conda-lock's ``content_hash`` metadata."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def render(
    entries: Sequence[Entry],
    *,
    platforms: Sequence[str],
    channels: Sequence[str],
    sources: Sequence[str],
    content_hashes: dict[str, str],
    custom: dict[str, str] | None = None,
) -> str:
    """Serialize entries to conda-lock.yml text with conda-lock's models and writer.

    :param platforms: target platforms, e.g. ``["linux-64"]``.
    :param channels: channel names or URLs, highest priority first.
    :param sources: the input files, relative to the lockfile's directory.
    :param content_hashes: platform → hash of the input (conda-lock's ``content_hash``).
    :param custom: extra ``custom_metadata`` (string values), e.g. how the lock was made.
    :raises MissingDependencyError: conda-lock is not installed.
    :raises LockError: conda-lock's models reject an entry (the message names it).
    :returns: the YAML text.
    """
    lockfile = require("conda_lock.lockfile")
    models = require("conda_lock.lockfile.v2prelim.models")
    pydantic = require("pydantic")
    try:
        packages = [
            models.LockedDependency(
                name=e.name,
                version=e.version,
                manager=e.manager,
                platform=e.platform,
                dependencies=dict(e.dependencies),
                url=e.url,
                hash=models.HashModel(md5=e.md5, sha256=e.sha256),
                categories={"main"},
                build=e.build,
            )
            for e in entries
        ]
        meta = models.LockMeta(
            content_hash=dict(content_hashes),
            channels=list(channels),
            platforms=list(platforms),
            sources=list(sources),
            custom_metadata=dict(custom) if custom else None,
        )
        doc = models.Lockfile(package=packages, metadata=meta)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise LockError(f"conda-lock rejects the lock: {first['msg']} at {first['loc']}") from None
    with tempfile.TemporaryDirectory(prefix="envlock-lock-") as tmp:
        out = Path(tmp) / "conda-lock.yml"
        lockfile.write_conda_lock_file(doc, out, metadata_choices=(), include_help_text=True)
        return out.read_text(encoding="utf-8")


def read(path: str | Path) -> Any:
    """Parse a conda-lock file with conda-lock's parser.

    :raises MissingDependencyError: conda-lock is not installed.
    :raises ManifestError: the file is missing or not a valid conda-lock file.
    :returns: conda-lock's ``Lockfile`` (v2 model).
    """
    lockfile = require("conda_lock.lockfile")
    pydantic = require("pydantic")
    yaml = require("yaml")
    path = Path(path)
    try:
        return lockfile.parse_conda_lock_file(path)
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file") from None
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        reason = f"{first['msg']} at {where}"
        raise ManifestError(f"{path}: not a valid conda-lock file ({reason})") from None
    except (yaml.YAMLError, ValueError, AttributeError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ManifestError(f"{path}: not a valid conda-lock file ({reason})") from None


def install(
    path: str | Path,
    prefix: str | Path,
    *,
    platform: str | None = None,
    cache_dir: str | Path | None = None,
) -> list[str]:
    """Install the conda packages of a conda-lock file into ``prefix`` with py-rattler.

    Every package's URL, md5 and sha256 come from the lockfile; nothing is solved.  pip entries
    are not installed here (see :func:`pip_requirements`).

    :param platform: which platform's packages to install (default: this machine's).
    :raises LockError: the file has no package for that platform, or a download/link fails.
    :returns: the names installed, sorted.
    """
    doc = read(path)
    platform = platform or current_subdir()
    conda = [p for p in doc.package if p.manager == "conda" and p.platform == platform]
    if not conda:
        raise LockError(f"{path}: no conda packages for platform {platform}")
    return _rattler_install([(p.name, p.version, p.build or "", p.url, p.hash.md5, p.hash.sha256,
                              [f"{k} {v}".strip() for k, v in p.dependencies.items()])
                             for p in conda], path, prefix, platform, cache_dir)


def install_explicit(path: str | Path, prefix: str | Path, *,
                     cache_dir: str | Path | None = None) -> list[str]:
    """Install a conda explicit list (``@EXPLICIT``, then ``URL#md5`` lines: conda's
    explicit-spec format) into ``prefix`` with py-rattler, as ``conda create --file`` does
    without conda: each URL and its md5 as listed, nothing solved.

    :raises LockError: no package in it, a line is not a package URL, or a download/link fails.
    :returns: the names installed, sorted.
    """
    from envlock.formats.conda import parse_url
    from envlock.manifest._toml import read_text

    lines = [ln.strip() for ln in read_text(path).splitlines()]
    start = lines.index("@EXPLICIT") + 1 if "@EXPLICIT" in lines else len(lines)
    packages: list[tuple[str, str, str, str, str | None, str | None, list[str]]] = []
    for line in lines[start:]:
        if not line or line.startswith("#"):
            continue
        url, _, digest = line.partition("#")
        try:
            q = parse_url(url)
        except ManifestError as exc:
            raise LockError(f"{path}: {exc}") from None
        md5 = digest if re.fullmatch(r"[0-9a-f]{32}", digest) else None
        sha = digest[7:] if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else None
        packages.append((q["name"], q["version"], q["build"], url, md5, sha, []))
    if not packages:
        raise LockError(f"{path}: no conda package after @EXPLICIT")
    return _rattler_install(packages, path, prefix, current_subdir(), cache_dir)


def _rattler_install(packages: Sequence[tuple[str, str, str, str, str | None, str | None,
                                              list[str]]],
                     path: str | Path, prefix: str | Path, platform: str,
                     cache_dir: str | Path | None) -> list[str]:
    """Install ``(name, version, build, url, md5, sha256, depends)`` records with py-rattler."""
    rattler = require("rattler")
    records = []
    for name, version, build, raw_url, md5, sha256, depends in packages:
        file_name = raw_url.rsplit("/", 1)[-1]
        subdir = raw_url.rsplit("/", 2)[-2] if raw_url.count("/") >= 2 else platform
        number = build.rsplit("_", 1)[-1]
        record = rattler.PackageRecord(
            name=name,
            version=version,
            build=rattler.BuildString(build),
            build_number=int(number) if number.isdigit() else 0,
            subdir=subdir,
            depends=depends,
            md5=bytes.fromhex(md5) if md5 else None,
            sha256=bytes.fromhex(sha256) if sha256 else None,
        )
        url = expand_url(raw_url)
        channel = url.rsplit("/", 2)[0] + "/"
        records.append(rattler.RepoDataRecord(record, file_name, url, channel))
    try:
        run_async(
            rattler.install(
                records,
                target_prefix=str(prefix),
                cache_dir=str(cache_dir) if cache_dir else None,
                show_progress=False,
            )
        )
    except Exception as exc:  # noqa: BLE001 - py-rattler raises its own exception classes
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LockError(f"installing {path} into {prefix} failed: {reason}") from None
    return sorted(name for name, *_ in packages)


def pip_requirements(path: str | Path, platform: str) -> list[str]:
    """Return the pip entries of a conda-lock file as hash-pinned requirement lines.

    Each line is ``name @ url --hash=sha256:…``, the form uv and pip install from without an
    index.
    """
    doc = read(path)
    out = []
    for p in doc.package:
        if p.manager != "pip" or p.platform != platform:
            continue
        line = f"{p.name} @ {p.url}"
        if p.hash.sha256:
            line += f" --hash=sha256:{p.hash.sha256}"
        out.append(line)
    return out
