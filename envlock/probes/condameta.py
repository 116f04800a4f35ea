"""Packages of a conda prefix, read from ``<prefix>/conda-meta``.

conda writes one JSON record per installed package, ``conda-meta/<name>-<version>-<build>.json``
(fields ``name``, ``version``, ``build``, ``build_number``, ``channel``, ``subdir``, ``url``,
``md5``, ``sha256``, ``depends``, ``files`` …), and appends every transaction to
``conda-meta/history``: a ``==> <date> <==`` header, ``# cmd:`` and
``# update specs: [...]`` / ``# remove specs: [...]`` comment lines, and ``+``/``-`` lines with
the linked and unlinked packages.  This module reads both; it never runs conda.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from envlock._io import read_bytes, read_text
from envlock.libs.condadist import conda_dist_dir
from envlock.manifest import CondaInfo, CondaPackage
from envlock.probes.pip import canonicalize
from envlock.redact import redact_text, redact_url
import ast

if TYPE_CHECKING:
    from envlock.probes.world import World

__all__ = [
    "CondaMetaRecord",
    "CondaRead",
    "list_conda_meta",
    "parse_history",
    "parse_spec",
    "probe_conda",
    "read_conda_prefix",
    "short_channel",
]

_SPEC_LINE = re.compile(r"^#\s*(update|remove|neutered)\s+specs:\s*(\[.*\])\s*$")
_SPEC_NAME = re.compile(r"^(?:[^:]+::)?([A-Za-z0-9_.\-]+)")
_SUBDIRS = {
    "noarch", "linux-64", "linux-aarch64", "linux-ppc64le", "linux-s390x", "linux-32",
    "osx-64", "osx-arm64", "win-64", "win-32", "win-arm64", "emscripten-wasm32", "wasi-wasm32",
}


def short_channel(channel: str | None, url: str | None = None) -> str | None:
    """Return conda's short channel name, credentials removed.

    >>> short_channel("https://conda.anaconda.org/conda-forge/linux-64")
    'conda-forge'
    >>> short_channel("https://repo.anaconda.com/pkgs/main")
    'pkgs/main'
    >>> short_channel("https://conda.anaconda.org/t/abc/private/noarch")
    'private'
    >>> short_channel(None, "https://conda.anaconda.org/pytorch/linux-64/pytorch-2.1.0.tar.bz2")
    'pytorch'
    """
    value = channel or None
    if value is None and url:
        value = url.rsplit("/", 2)[0]  # strip "<subdir>/<file>"
    if not value:
        return None
    if "://" not in value:
        return value
    parts = urlsplit(value)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) >= 2 and segments[0] == "t":
        segments = segments[2:]  # drop the /t/<token> prefix
    if segments and segments[-1] in _SUBDIRS:
        segments = segments[:-1]
    host = parts.hostname or ""
    if host in {"conda.anaconda.org", "repo.anaconda.com", "repo.continuum.io", "conda.anaconda.com"}:
        return "/".join(segments) or None
    # Another server or a local file:// channel: keep the URL, without subdir and credentials.
    value = value.rstrip("/")
    if value.rsplit("/", 1)[-1] in _SUBDIRS:
        value = value.rsplit("/", 1)[0]
    return redact_url(value)


def parse_spec(spec: str) -> tuple[str | None, str]:
    """Split a requested match spec into its package key and its recordable form.

    conda's MatchSpec string forms (conda docs, "Package match specifications"):
    ``name[ version[ build]]``, ``channel::name…``, ``channel/subdir::name…`` where ``channel``
    may be a URL (``https://user:pw@host/chan::pkg``, ``https://host/t/<token>/chan::pkg``), or
    the URL of a package archive (``https://host/chan/linux-64/pkg-1.0-h0_0.conda``).

    :returns: ``(canonical package name or None, the spec with credentials removed)``.

    >>> parse_spec("https://u:pw@h.org/chan::numpy>=1.2")
    ('numpy', 'https://h.org/chan::numpy>=1.2')
    >>> parse_spec("https://h.org/chan/linux-64/zlib-1.3-h0_0.conda")
    ('zlib', 'https://h.org/chan/linux-64/zlib-1.3-h0_0.conda')
    """
    spec = spec.strip()
    channel, sep, rest = spec.rpartition("::")
    if sep:
        n = _SPEC_NAME.match(rest.strip())
        clean_channel = redact_url(channel) if "://" in channel else redact_text(channel)
        return (canonicalize(n.group(1)) if n else None), f"{clean_channel}::{redact_text(rest)}"
    if "://" in spec:
        fname = spec.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        for ext in (".conda", ".tar.bz2"):
            if fname.endswith(ext):
                parts = fname[: -len(ext)].rsplit("-", 2)
                name = parts[0] if len(parts) == 3 else None
                return (canonicalize(name) if name else None), redact_url(spec)
        return None, redact_url(spec)
    n = _SPEC_NAME.match(spec)
    return (canonicalize(n.group(1)) if n else None), redact_text(spec)


def parse_history(text: str) -> tuple[str, ...]:
    """Return the match specs the user requested, from a ``conda-meta/history`` text.

    Each ``# update specs: [...]`` adds or replaces specs by package name (:func:`parse_spec`:
    a channel URL before ``::`` is not the name, and loses its credentials); ``# remove specs``
    drops them.  The result is sorted by package name.

    >>> parse_history("# update specs: ['python=3.11', 'numpy']\\n# remove specs: ['numpy']\\n")
    ('python=3.11',)
    """
    specs: dict[str, str] = {}
    for line in text.splitlines():
        m = _SPEC_LINE.match(line.strip())
        if not m:
            continue
        try:
            items = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
        for item in items if isinstance(items, (list, tuple)) else ():
            key, spec = parse_spec(str(item))
            if not key:
                continue
            if m.group(1) == "update":
                specs[key] = spec
            elif m.group(1) == "remove":
                specs.pop(key, None)
    return tuple(specs[k] for k in sorted(specs))


@dataclass(frozen=True, slots=True)
class CondaMetaRecord:
    """A ``conda-meta/<name>-<version>-<build>.json`` record, known from its file name only.

    :ivar name: conda package name (``"cuda-cudart"``).
    :ivar version: package version (``"12.4.127"``).
    :ivar build: build string (``"h5888daf_0"``).
    :ivar path: the record file.
    """

    name: str
    version: str
    build: str
    path: Path


def _record_files(meta: Path) -> list[str]:
    """The ``*.json`` file names of a ``conda-meta`` directory, sorted; ``[]`` when unreadable."""
    try:
        names = os.listdir(meta)
    except OSError:
        return []
    return sorted(n for n in names if n.endswith(".json"))


def list_conda_meta(prefix: str | os.PathLike[str] | None) -> tuple[CondaMetaRecord, ...]:
    """List the packages of ``prefix`` from the *names* of ``conda-meta/*.json``, sorted by name.

    Cheap (one directory listing, no JSON parsed): what the stack probes need to know which
    packages conda installed.  conda names each record ``<name>-<version>-<build>.json``;
    version and build never contain ``-`` (conda's match-spec rules), so the last two dashes
    split it; other file names are skipped.  :func:`read_conda_prefix` reads the records.

    :returns: the records in file-name order; ``()`` when ``prefix`` is empty or has no
        readable ``conda-meta`` directory.
    """
    if not prefix:
        return ()
    meta = Path(prefix) / "conda-meta"
    out = []
    for fname in _record_files(meta):
        parts = fname[: -len(".json")].rsplit("-", 2)
        if len(parts) != 3 or not all(parts):
            continue
        name, version, build = parts
        out.append(CondaMetaRecord(name=name, version=version, build=build, path=meta / fname))
    return tuple(out)


def _unreadable_spec_lines(text: str) -> list[int]:
    """Line numbers (1-based) of ``# … specs:`` lines whose list cannot be read."""
    bad = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if re.match(r"^#\s*(update|remove|neutered)\s+specs:", stripped):
            m = _SPEC_LINE.match(stripped)
            try:
                if m is None or not isinstance(ast.literal_eval(m.group(2)), (list, tuple)):
                    bad.append(number)
            except (ValueError, SyntaxError):
                bad.append(number)
    return bad


@dataclass(frozen=True, slots=True)
class CondaRead:
    """What :func:`read_conda_prefix` found.

    :ivar info: the ``[conda]`` table.
    :ivar dist_owner: dist-info/egg-info directory (absolute path) → conda package name, for
        every such directory listed in a package's ``files``.
    :ivar warnings: one line per unreadable record.
    """

    info: CondaInfo
    dist_owner: dict[str, str]
    warnings: tuple[str, ...]


def _one(path: Path, prefix: Path, dist_owner: dict[str, str]) -> CondaPackage:
    data = json.loads(read_text(path))  # a regular file only, bounded (a FIFO is an error)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for key in ("name", "version", "build"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"no {key!r} string")
    # Every dist-info/egg-info the package ships is conda's: a framework package may carry the
    # dist-info of its plugins too (conda-meta ``files`` lists them all).
    python_dist = None
    files = data.get("files")
    for f in files if isinstance(files, list) else ():
        found = conda_dist_dir(str(f))
        if found is not None:
            python_dist = python_dist or found
            dist_owner.setdefault(os.path.normpath(prefix / found), data["name"])
    url = data.get("url") if isinstance(data.get("url"), str) else None
    channel = data.get("schannel") or data.get("channel")
    bn = data.get("build_number")
    return CondaPackage(
        name=data["name"],
        version=data["version"],
        build=data["build"],
        build_number=bn if isinstance(bn, int) and not isinstance(bn, bool) else None,
        channel=short_channel(channel if isinstance(channel, str) else None, url),
        subdir=data.get("subdir") if isinstance(data.get("subdir"), str) else None,
        url=redact_url(url) if url else None,
        md5=data.get("md5") if isinstance(data.get("md5"), str) else None,
        sha256=data.get("sha256") if isinstance(data.get("sha256"), str) else None,
        depends=tuple(str(d) for d in data.get("depends") or ()),
        python_dist=python_dist,
    )


def read_conda_prefix(prefix: str | os.PathLike[str]) -> CondaRead | None:
    """Read ``<prefix>/conda-meta``; ``None`` when the prefix is not a conda environment.

    Unreadable records (bad JSON, missing fields) are skipped with a warning; the rest is read.
    """
    root = Path(prefix)
    meta = root / "conda-meta"
    if not meta.is_dir():
        return None
    dist_owner: dict[str, str] = {}
    warnings: list[str] = []
    unreadable = 0
    packages: list[CondaPackage] = []
    for fname in _record_files(meta):
        path = meta / fname
        try:
            packages.append(_one(path, root, dist_owner))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            detail = str(exc).removeprefix(f"{path}: ")
            warnings.append(f"{path}: unreadable conda record ({detail})")
            unreadable += 1
    requested: tuple[str, ...] = ()
    history = meta / "history"
    if history.exists():
        try:
            text = read_bytes(history).decode("utf-8", "replace")
            requested = parse_history(text)
            bad = _unreadable_spec_lines(text)
            if bad:
                warnings.append(f"{history}: {len(bad)} unreadable specs line(s), first at line "
                                f"{bad[0]}; the requested specs may be incomplete")
        except (OSError, ValueError) as exc:
            warnings.append(f"{history}: {getattr(exc, 'strerror', None) or exc}")
    packages.sort(key=lambda p: (p.name, p.version, p.build))
    info = CondaInfo(
        status="ok" if not unreadable else "error",
        source=str(meta),
        error=f"{unreadable} unreadable record(s)" if unreadable else None,
        requested=requested,
        packages=tuple(packages),
    )
    return CondaRead(info=info, dist_owner=dist_owner, warnings=tuple(warnings))


def probe_conda(world: World) -> CondaRead | None:
    """The ``[conda]`` table of the target: :func:`read_conda_prefix` of ``world.prefix``.

    :param world: what is observed (only ``prefix`` is read).
    :returns: the :class:`CondaRead`, or ``None`` when there is no prefix or it has no
        ``conda-meta/`` (not a conda environment).  Unreadable records are warnings, not raised.
    """
    return read_conda_prefix(world.prefix) if world.prefix else None
