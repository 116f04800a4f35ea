"""Local-path requirements lines — ``./localpkg``, ``-e ./localpkg``, ``dist/foo-1.2-py3-none-any.whl``,
``./foo-1.2.tar.gz`` — named as pip names them, never dropped.

pip's rule (``pip/_internal/req/constructors.py``, ``parse_req_from_line`` and
``parse_editable``): a line that is a path to an archive (``.whl``, ``.tar.gz``, ``.zip``, …:
pip's ``is_archive_file``) or to a directory is a local project.  A *wheel* is named and
versioned by its file name (PEP 427; pip's ``Wheel``, here
:func:`packaging.utils.parse_wheel_filename`), without building anything.  An *sdist* and a
*directory* pip names only by building them; envlock names an sdist from its file name
(:func:`packaging.utils.parse_sdist_filename`, the sdist naming rule) and a directory from its
own static metadata — ``pyproject.toml``'s ``[project] name`` and ``version`` (PEP 621; a
``version`` listed in ``dynamic`` is :data:`~envlock.formats.pep508.UNKNOWN`), read with
envlock's one TOML reader and at most :data:`MAX_METADATA_BYTES`, else ``setup.cfg``'s
``[metadata] name`` (setuptools' declarative config) — and records how (``named-by =
"file-name"`` / ``"metadata"``).  A path that names nothing (a directory without such metadata,
one that is not there) is listed as *unnamed*: its name is the path as written, ``unnamed =
true``, and ``envlock show`` names it.

A relative path is relative to the directory of the requirements file.  pip itself resolves it
against the directory ``pip install`` runs in (``os.path.abspath``); the requirements file's
own directory is where a project's ``pip install -r requirements.txt`` runs, and the only one a
reader of the file knows.  ``conda env create`` runs pip in the ``environment.yml``'s directory
(``conda/env/installers/pip.py``: ``cwd=pip_workdir``), so there the two agree.
"""

from __future__ import annotations

import configparser
import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from envlock._io import InputError, one_line, read_text
from envlock._names import canonicalize
from envlock._untrusted import ARCHIVE_SUFFIX as _ARCHIVE
from envlock._untrusted import is_archive
from envlock.errors import ManifestError

__all__ = ["MAX_METADATA_BYTES", "is_archive", "local_entry"]

#: the most bytes read of a local project's ``pyproject.toml`` or ``setup.cfg``.
MAX_METADATA_BYTES = 1024 * 1024

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_UNKNOWN = "unknown"


def _fs_path(target: str) -> str:
    """The filesystem path a ``file:`` URL or a plain path names, its ``[extras]`` removed."""
    if target.startswith("file:"):
        parts = urlsplit(target)
        target = unquote(parts.path if target.startswith("file://") else target[5:])
    m = re.match(r"^(.+)(\[[^\]]+\])$", target)  # pip's _strip_extras
    return m.group(1) if m else target


def local_entry(target: str, base: str | None, *, editable: bool,
                marker: str | None = None) -> dict[str, Any]:
    """The ``[pip]`` entry of a local-path requirement ``target`` (as written on the line).

    :param base: the directory relative paths are read from (the requirements file's), or
        ``None`` when the text came from nowhere (then a directory cannot be read: unnamed).
    :param editable: a ``-e`` line (``origin = "editable"``).
    :param marker: the line's PEP 508 marker, kept on the entry.
    :returns: ``name``, ``version``, ``url`` (the path as written), ``local = true``, and
        ``named-by`` or ``unnamed`` as the module docstring says.
    :raises ManifestError: a ``.whl`` whose file name is not a wheel's (pip refuses it too:
        ``InvalidWheelFilename``), or a local project's ``pyproject.toml`` that is malformed
        or unreadable (one line).
    """
    from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename,
                                 parse_sdist_filename, parse_wheel_filename)

    path = _fs_path(target)
    fname = os.path.basename(path.rstrip("/\\"))
    entry: dict[str, Any]
    if fname.lower().endswith(".whl"):
        try:
            name = parse_wheel_filename(fname)[0]
        except InvalidWheelFilename as exc:
            raise ManifestError(f"{one_line(target, 80)}: not a wheel file name ({exc})") from None
        # the version as the file name writes it, as pip's Wheel reads it (`_` for `-`)
        entry = {"name": canonicalize(name), "version": fname.split("-")[1].replace("_", "-"),
                 "url": target}
    elif is_archive(fname):
        try:
            sname, sversion = parse_sdist_filename(fname)
            entry = {"name": canonicalize(sname), "version": str(sversion), "url": target,
                     "named-by": "file-name"}
        except InvalidSdistFilename:
            m = re.match(r"^(?P<name>.+?)-(?P<version>\d[^-/]*?)" + _ARCHIVE.pattern, fname,
                         re.IGNORECASE)
            entry = ({"name": canonicalize(m.group("name")), "version": m.group("version"),
                      "url": target, "named-by": "file-name"}
                     if m and _NAME.fullmatch(m.group("name")) else _unnamed(target))
    else:
        full = (os.path.normpath(os.path.join(base, os.path.expanduser(path))) if base is not None
                else None)
        named = _dir_metadata(full) if full is not None and os.path.isdir(full) else None
        entry = ({"name": canonicalize(named[0]), "version": named[1], "url": target,
                  "named-by": "metadata"} if named else _unnamed(target))
    entry["local"] = True
    if marker:
        entry["marker"] = marker
    if editable:
        entry["origin"] = "editable"
    return entry


def _unnamed(target: str) -> dict[str, Any]:
    return {"name": target, "url": target, "version": _UNKNOWN, "unnamed": True}


def _dir_metadata(directory: str) -> tuple[str, str] | None:
    """``(name, version)`` from a project directory's static metadata, or ``None``."""
    pyproject = os.path.join(directory, "pyproject.toml")
    if os.path.isfile(pyproject):
        from envlock.manifest._toml import load_toml

        try:
            text = read_text(pyproject, limit=MAX_METADATA_BYTES)
        except InputError as exc:
            raise ManifestError(f"a local project: {exc}") from None
        project = load_toml(text, one_line(pyproject), json=False).get("project")
        if isinstance(project, dict) and isinstance(project.get("name"), str) \
                and _NAME.fullmatch(project["name"]):
            dynamic = project.get("dynamic")
            version = project.get("version")
            if not isinstance(version, str) or isinstance(dynamic, list) and "version" in dynamic:
                version = _UNKNOWN
            return project["name"], version
    return _setup_cfg(os.path.join(directory, "setup.cfg"))


def _setup_cfg(path: str) -> tuple[str, str] | None:
    """``[metadata] name`` (and a literal ``version``) of a ``setup.cfg``, or ``None``."""
    if not os.path.isfile(path):
        return None
    try:
        text = read_text(path, limit=MAX_METADATA_BYTES)
    except InputError:
        return None  # setuptools would fail to build it: unnamed
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=path)
    except configparser.Error:
        return None
    name = parser.get("metadata", "name", fallback="").strip()
    if not _NAME.fullmatch(name):
        return None
    version = parser.get("metadata", "version", fallback="").strip()
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        version = _UNKNOWN  # "attr: pkg.__version__", "file: VERSION": known only when built
    return name, version
