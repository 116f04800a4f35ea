"""Python distributions on a target's ``sys.path``, read from their metadata files.

For each directory of ``sys.path``, in order, every ``*.dist-info`` (PEP 376/PEP 627) and
``*.egg-info`` (setuptools) entry is a distribution.  Only the header of ``METADATA`` /
``PKG-INFO`` is read (up to the first blank line), plus the small ``INSTALLER``, ``REQUESTED``
and ``direct_url.json`` (PEP 610) files.  The first copy of a project on ``sys.path`` is the
one ``importlib.metadata`` — and so ``pip list`` — reports; later copies are recorded as
shadowed.  A broken entry (no METADATA, undecodable file, broken symlink) is kept with an
``error`` and reported as a warning; it never stops the scan.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from envlock._io import InputError, one_line, read_bytes
from envlock._names import canonicalize
from envlock.manifest import PipInfo, PipPackage
from envlock.redact import redact_url

if TYPE_CHECKING:
    from envlock.probes.world import World

__all__ = [
    "CONDA_BUILD_URL",
    "canonicalize",
    "parse_direct_url",
    "probe_pip",
    "read_input",
    "read_metadata_header",
    "scan_distributions",
]

#: ``direct_url.json`` URLs that point into a conda-build work directory (case C12): they
#: exist only on the machine that built the conda package.
CONDA_BUILD_URL = re.compile(r"^file://.*/(conda-bld|feedstock_root/build_artifacts|croot|build_artifacts)/")

_HEADER_LIMIT = 256 * 1024  # bytes of METADATA read at most while looking for the header end


def read_input(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of an input file through :func:`envlock._io.read_bytes` (regular files only,
    opened ``O_NONBLOCK``, bounded), with its refusals as :class:`OSError` whose ``strerror`` is
    the reason (``"missing"``, ``"is a FIFO (named pipe), not a regular file"``, …).

    :param limit: at most this many bytes (default: the 64 MiB cap of :mod:`envlock._io`).
    :raises OSError: the file is missing (:class:`FileNotFoundError`), not regular, too large.
    """
    try:
        return read_bytes(path) if limit is None else read_bytes(path, limit=limit)
    except InputError as exc:
        name = os.fsdecode(path)
        msg = str(exc).removeprefix(f"{one_line(name)}: ")
        if msg == "no such file":
            raise FileNotFoundError(errno.ENOENT, "missing", name) from None
        raise OSError(errno.EINVAL, msg, name) from None


def read_metadata_header(
    path: str | os.PathLike[str], *, errors: str = "strict"
) -> dict[str, list[str]]:
    """Read the RFC 822 header of a METADATA/PKG-INFO file (core metadata): field name → values.

    Field names are lower-cased (``"version"``, ``"requires-dist"``); values keep file order.
    Reading stops at the first blank line (the description body is not read) or after about
    256 KiB.  Continuation lines (starting with whitespace) are joined to the previous field.

    :param path: the file.
    :param errors: how undecodable bytes are handled (:func:`bytes.decode`): ``"strict"``
        raises, ``"replace"`` substitutes U+FFFD.
    :raises OSError: the file cannot be opened or read.
    :raises UnicodeDecodeError: the header is not UTF-8 and ``errors="strict"``.
    """
    fields: dict[str, list[str]] = {}
    last: str | None = None
    read = 0
    data = read_input(path)  # a FIFO or device is refused, never waited on
    for raw in data.split(b"\n"):
        read += len(raw) + 1
        line = raw.decode("utf-8", errors).rstrip("\r\n")
        if not line.strip():
            break
        if line[0] in " \t" and last is not None:
            fields[last][-1] += "\n" + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        last = name.strip().lower()
        fields.setdefault(last, []).append(value.strip())
        if read > _HEADER_LIMIT:
            break
    return fields


@dataclass(frozen=True, slots=True)
class DirectUrl:
    """The facts of a PEP 610 ``direct_url.json`` that the manifest keeps."""

    origin: str
    url: str | None
    vcs: str | None = None
    commit: str | None = None
    requested_revision: str | None = None
    local_path: str | None = None
    conda_build: bool = False


def parse_direct_url(data: object) -> DirectUrl:
    """Classify a parsed ``direct_url.json`` (PEP 610).

    :returns: origin ``"vcs"`` (``vcs_info``), ``"archive"`` (``archive_info``), ``"editable"``
        (``dir_info.editable`` true) or ``"directory"`` (``dir_info``); the URL without
        credentials; ``local_path`` for ``file://`` URLs; ``conda_build`` when the URL points
        into a conda-build directory (:data:`CONDA_BUILD_URL`).
    :raises ValueError: the data is not a PEP 610 object (no string ``url``).
    """
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise ValueError("direct_url.json has no 'url' string")
    url: str = data["url"]
    local = None
    parts = urlsplit(url)
    if parts.scheme == "file":
        local = unquote(parts.path)
    conda_build = bool(CONDA_BUILD_URL.match(url))
    clean = redact_url(url)
    vcs_info = data.get("vcs_info")
    if isinstance(vcs_info, dict):
        return DirectUrl(
            origin="vcs",
            url=clean,
            vcs=str(vcs_info.get("vcs")) if vcs_info.get("vcs") else None,
            commit=str(vcs_info.get("commit_id")) if vcs_info.get("commit_id") else None,
            requested_revision=vcs_info.get("requested_revision") or None,
            local_path=local,
        )
    if isinstance(data.get("archive_info"), dict):
        return DirectUrl(origin="archive", url=clean, local_path=local, conda_build=conda_build)
    dir_info = data.get("dir_info")
    editable = isinstance(dir_info, dict) and bool(dir_info.get("editable"))
    return DirectUrl(
        origin="editable" if editable else "directory",
        url=clean,
        local_path=local,
        conda_build=conda_build,
    )


def _read_small(path: str) -> str | None:
    try:
        return read_input(path, limit=1 << 20)[:4096].decode("utf-8", "replace").strip()
    except OSError:
        return None


_DIST_DIR = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+?)(-py\d.*)?\.(dist-info|egg-info)$")


def _read_one(location: str, entry: str) -> PipPackage:
    """Read one ``.dist-info``/``.egg-info`` entry of ``location`` into a :class:`PipPackage`."""
    path = os.path.join(location, entry)
    m = _DIST_DIR.match(entry)
    name = canonicalize(m.group("name")) if m else canonicalize(entry.rsplit(".", 1)[0])
    version = m.group("version") if m else "unknown"
    errors: list[str] = []
    is_dir = os.path.isdir(path)
    if entry.endswith(".dist-info"):
        meta = os.path.join(path, "METADATA")
    elif is_dir:
        meta = os.path.join(path, "PKG-INFO")
    else:
        meta = path  # a single-file .egg-info is the PKG-INFO itself
    if not os.path.exists(path):
        errors.append(f"{path}: broken symlink")
    else:
        try:
            header = read_metadata_header(meta)
            if header.get("name"):
                name = canonicalize(header["name"][0])
            else:
                errors.append(f"{meta}: no Name field")
            if header.get("version"):
                version = header["version"][0]
            else:
                errors.append(f"{meta}: no Version field")
        except FileNotFoundError:
            errors.append(f"{meta}: missing")
        except UnicodeDecodeError:
            errors.append(f"{meta}: not UTF-8")
        except OSError as exc:
            errors.append(f"{meta}: {exc.strerror}")
    installer = requested = None
    direct = None
    if is_dir:
        installer = _read_small(os.path.join(path, "INSTALLER")) or None
        requested = os.path.exists(os.path.join(path, "REQUESTED"))
        du_path = os.path.join(path, "direct_url.json")
        if os.path.exists(du_path):
            try:
                direct = parse_direct_url(json.loads(read_input(du_path, limit=1 << 20)))
            except (OSError, ValueError) as exc:
                errors.append(f"{du_path}: unreadable ({exc})")
    pkg = PipPackage(
        name=name,
        version=version,
        location=location,
        dist_info=entry,
        installer=installer,
        requested=bool(requested),
        error="; ".join(errors) or None,
    )
    if direct is not None:
        pkg = replace(
            pkg,
            origin=direct.origin,
            url=direct.url,
            vcs=direct.vcs,
            commit=direct.commit,
            requested_revision=direct.requested_revision,
            editable_path=direct.local_path if direct.origin in ("editable", "directory") else None,
        )
    return pkg


def _listing(location: str) -> tuple[list[str], list[str]]:
    """The ``.dist-info``/``.egg-info`` entries and the ``.egg-link`` files of ``location``."""
    try:
        names = sorted(os.listdir(location))
    except OSError:
        return [], []
    return ([e for e in names if e.endswith((".dist-info", ".egg-info"))],
            [e for e in names if e.endswith(".egg-link")])


def _legacy_editable(pkg: PipPackage, egg_links: Mapping[str, str]) -> PipPackage:
    """A ``setup.py develop`` install (``pip install -e`` by pip < 23.1, or ``--no-use-pep517``)
    as pip itself recognises it: no PEP 610 ``direct_url.json``, but a ``<name>.egg-link`` in
    a site directory; the project location is where its ``.egg-info`` is (pip
    ``_internal/utils/egg_link.py`` and ``BaseDistribution.editable_project_location``).

    :param pkg: a package of the scan.
    :param egg_links: normalized project name (PEP 503) → path of its ``.egg-link`` file.
    :returns: ``pkg`` with origin ``"editable"`` and ``editable_path``, or ``pkg`` unchanged.
    """
    if pkg.origin != "index" or pkg.name not in egg_links:
        return pkg
    return replace(pkg, origin="editable", editable_path=os.path.normpath(pkg.location))


def _own_build_metadata(first: PipPackage, location: str, entry: str) -> bool:
    """Whether ``location/entry``, found after ``first``, is the editable project's own build
    metadata rather than a second installed copy: an ``.egg-info`` inside the project tree that
    ``first`` (installed editable, PEP 660 ``direct_url.json`` ``dir_info.editable``) points to.

    setuptools writes ``<name>.egg-info`` next to the packages (``src/`` in a src layout) on every
    in-tree build (``pip wheel .``, ``python -m build``, ``setup.py develop``), and a PEP 660
    install puts that directory on ``sys.path`` (its ``__editable__.*.pth``); the code imported
    from there is the same project, so uninstalling "the extra copy" would remove the package in
    use. ``importlib.metadata`` and pip take the first copy all the same.
    """
    if not entry.endswith(".egg-info") or first.origin != "editable" or not first.editable_path:
        return False
    project = os.path.realpath(first.editable_path)
    here = os.path.realpath(location)
    return here == project or here.startswith(project + os.sep)


def conda_build_url(pkg: PipPackage) -> bool:
    """``True`` when the package's PEP 610 URL points into a conda-build directory (C12)."""
    return bool(pkg.url and CONDA_BUILD_URL.match(pkg.url))


def scan_distributions(path_entries: Iterable[str]) -> PipInfo:
    """Read every distribution on ``path_entries`` (a ``sys.path``), first copy winning.

    :param path_entries: directories in ``sys.path`` order; files (zips, eggs) and missing
        directories are skipped.
    :returns: :class:`PipInfo` with packages sorted by normalized name; a project found more
        than once lists the later copies in ``shadowed`` as ``"<version> at <dir>"``; one with a
        ``<name>.egg-link`` in a scanned directory is editable, as pip says (:func:`_legacy_editable`).
    """
    winners: dict[str, PipPackage] = {}
    shadows: dict[str, list[str]] = {}
    seen_dirs: set[str] = set()
    egg_links: dict[str, str] = {}
    for location in path_entries:
        real = os.path.realpath(location)
        if real in seen_dirs or not os.path.isdir(location):
            continue
        seen_dirs.add(real)
        entries, links = _listing(location)
        for link in links:
            egg_links.setdefault(canonicalize(link[: -len(".egg-link")]), os.path.join(location, link))
        for entry in entries:
            pkg = _read_one(location, entry)
            first = winners.get(pkg.name)
            if first is not None and first.location == location and first.version == pkg.version:
                continue  # one install described twice (Debian ships .egg-info beside .dist-info)
            if first is not None and _own_build_metadata(first, location, entry):
                continue  # an editable project's src/<name>.egg-info: its build metadata, not a copy
            if first is not None:
                shadows.setdefault(pkg.name, []).append(f"{pkg.version} at {location}")
            else:
                winners[pkg.name] = pkg
    packages = tuple(
        replace(_legacy_editable(p, egg_links), shadowed=tuple(shadows[n])) if n in shadows
        else _legacy_editable(p, egg_links)
        for n, p in sorted(winners.items())
    )
    return PipInfo(status="ok", source="dist-info/egg-info on sys.path", packages=packages)


def probe_pip(world: World) -> PipInfo:
    """The ``[pip]`` table of the target: :func:`scan_distributions` of ``world.site_dirs``
    (the directories of the target interpreter's ``sys.path``, in its order; files and missing
    entries of ``sys.path`` would be skipped by the scan anyway).

    :param world: what is observed (only ``site_dirs`` is read).
    :returns: the :class:`PipInfo`; a distribution that cannot be read is listed with its
        ``error``, never raised.
    """
    return scan_distributions(world.site_dirs)
