"""Every environment file envlock reads, each read by its own tool's rules — one reader per
format, shared by ``diff``, ``verify --lock``, ``restore`` and ``lock -f``.

:func:`read` recognises a file (content first, then the file name) and returns a
:class:`Reading`: its kind, a *partial manifest* (the tables of a manifest the format can tell:
``[conda]``, ``[pip]``, ``[python]``, ``[subdir]``) and whether it is a complete listing or a
spec.  The formats, their detectors and readers are the registry
:data:`envlock._kinds.FORMATS` (``docs/diff.md`` lists them with what each can and cannot
say); dispatch here parses a file as the first syntax that fits (a first-line marker, TOML/JSON,
YAML, lines) and hands it to the first format of that syntax whose detector says yes.  A text
opening with ``{`` goes only to the formats whose own tool would read it, parsed as that tool
parses it (:attr:`envlock._kinds.Format.json_as`: JSON for ``Pipfile.lock``, YAML for
conda-lock, pixi and conda files, never TOML).

Every file is read with :func:`envlock._io.read_text` (regular files only, 64 MiB, strict
UTF-8) and parsed with the bounded parsers of :mod:`envlock.formats._load`.  Every error is one
:class:`~envlock.errors.ManifestError` line naming the file.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from envlock._io import InputError, one_line, read_text
from envlock._kinds import FORMATS, KINDS, LOCK_KINDS, Format
from envlock.errors import ManifestError
from envlock.formats import locks, pep508
from envlock.formats._load import load_toml, load_yaml
from envlock.formats._reading import MAX_PACKAGES, Reading, Source, bounded, from_lock

__all__ = ["KINDS", "LOCK_KINDS", "MAX_PACKAGES", "Reading", "read", "read_lock", "detect_lockfile",
           "UNKNOWN", "environment_with_selectors", "reading_of_lock"]

UNKNOWN = pep508.UNKNOWN


def _names(formats: tuple[Format, ...]) -> str:
    names = [f.said for f in formats]
    return ", ".join(names[:-1]) + " or " + names[-1]


_UNKNOWN = f"unknown format (expected {_names(FORMATS)})"

#: file names that are TOML whatever their content looks like (a malformed one is refused as TOML).
_TOML_NAMES = frozenset(n for f in FORMATS if f.syntax == "toml" and f.lock_reader
                        for n in f.names if not n.endswith(".toml"))
#: file names that are YAML whatever their content looks like.
_YAML_NAMES = frozenset(n for f in FORMATS if f.syntax == "yaml"
                        for n in f.names if not n.endswith((".yml", ".yaml")))
_YAML_KEYS = re.compile(r"^(dependencies|package|metadata|environments|packages|version):", re.MULTILINE)


def _function(ref: str) -> Callable[..., Any]:
    """The function a registry entry names (``"module:function"`` in :mod:`envlock.formats`)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(f"envlock.formats.{module}"), name)  # type: ignore[no-any-return]


def _text(path: str) -> str:
    try:
        text = read_text(path)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    if not text.strip():
        raise ManifestError(f"{one_line(path)}: empty file")
    return text


def read(path: str | os.PathLike[str], *, platform: str | None = None,
         exact: bool = False, includes: bool = True,
         parse: Callable[[str, str], dict[str, Any]] | None = None) -> Reading:
    """Read one input file (any of :data:`KINDS`).

    :param platform: for lockfiles of several platforms, which one's packages go into
        ``data`` (default ``linux-64`` when locked, else the first).
    :param exact: parse YAML and TOML exactly as the tools that install lockfiles do
        (PyYAML's pure-Python ``safe_load`` as conda-lock, :mod:`tomllib`), not with the faster
        libyaml/rtoml; ``verify --lock`` and ``restore`` validate with it, so that they accept
        exactly what conda-lock and packaging accept.
    :param includes: follow a requirements file's ``-r``/``-c`` includes (relative to the
        including file, as pip does; :func:`pep508.read_requirements`).  ``restore`` reads a
        lockfile from someone else with ``False``: its trust rules refuse ``-r`` instead.
    :param parse: parses TOML/JSON text in place of :func:`envlock.manifest._toml.load_toml`,
        with its contract (``parse(text, name)``: the same table, the same errors); ``envlock
        find`` passes :meth:`envlock.find.sections.SectionCache.load`.  Not used with ``exact``.
    :raises ManifestError: unreadable, empty, malformed or of an unknown format (one line that
        names the file).
    :raises ManifestVersionError: a manifest of a newer schema.
    """
    p = os.fspath(path)
    text = _text(p)
    shown = one_line(p)
    src = Source(p, shown, os.path.basename(p), text, platform, exact, includes, parse)
    try:
        return bounded(_dispatch(src))
    except ManifestError as exc:
        msg = one_line(str(exc), 400)
        raise type(exc)(msg if msg.startswith(shown) else f"{shown}: {msg}") from None


def _read_as(f: Format, parsed: Any, src: Source) -> Reading:
    if f.lock_reader:
        return from_lock(_function(f.read)(parsed, src.name), src.platform, src.name)
    return _function(f.read)(parsed, src)  # type: ignore[no-any-return]


def _first(syntax: str, parsed: Any, src: Source) -> Reading | None:
    """The reading of the first format of ``syntax`` whose detector takes ``parsed``."""
    for f in FORMATS:
        if f.syntax == syntax and _function(f.detect)(parsed, src):
            return _read_as(f, parsed, src)
    return None


def _json_document(src: Source) -> Reading:
    """A text that opens with ``{`` (a JSON object, or a YAML flow mapping), read as each tool
    would read it (:attr:`envlock._kinds.Format.json_as`): offered first to the formats whose
    tool parses JSON, then — unless the file is named as TOML (``uv.lock``, ``*.toml``,
    ``Pipfile``: its tool parses TOML, which refuses any such text) — to those whose tool parses
    YAML (a JSON text is YAML), each parsed with that tool's parser; never to a TOML format.
    So a ``conda-lock.yml`` written as JSON is a conda-lock file (conda-lock's
    ``yaml.safe_load`` reads it), not a ``uv.lock`` although it has ``version`` and ``package``.

    :raises ManifestError: a TOML-named file: malformed TOML, as ``tomllib`` says; a text
        neither parser takes: the fault of the parser its name calls for (JSON unless it is
        named as YAML); else an unknown format.
    """
    parsed: dict[str, Any] = {}
    faults: dict[str, ManifestError] = {}
    suffix = os.path.splitext(src.path)[1].lower()
    for how in ("json", "yaml"):
        if how == "yaml" and (suffix == ".toml" or src.base in _TOML_NAMES or src.base == "Pipfile"):
            _toml_refusal(src.text)
        for f in FORMATS:
            if f.json_as != how:
                continue
            if how not in parsed and how not in faults:
                try:
                    parsed[how] = (load_toml(src.text, src.name) if how == "json"
                                   else load_yaml(src.text, src.name, exact=src.exact))
                except ManifestError as exc:
                    faults[how] = exc
            data = parsed.get(how)
            if isinstance(data, Mapping) and _function(f.detect)(data, src):
                return _read_as(f, data, src)
    if not parsed:
        named_yaml = suffix in (".yml", ".yaml") or src.base in _YAML_NAMES
        raise faults["yaml" if named_yaml else "json"]
    data = next(iter(parsed.values()))
    for f in FORMATS:  # the keys of a TOML format: its tool would refuse the text, say so
        if f.syntax == "toml" and not f.json_as and isinstance(data, Mapping) \
                and _function(f.detect)(data, src):
            raise ManifestError(f"a {f.name} written as JSON: its tool reads TOML only")
    raise ManifestError(_UNKNOWN)


def _toml_refusal(text: str) -> None:
    """Raise what ``tomllib`` (the parser of uv's, poetry's, pdm's and pipenv's Python side and
    of ``packaging.pylock`` users) says of ``text``, one line."""
    try:  # tomllib judges (exact); the caller names the file, so load_toml is given no name
        load_toml(text, "", exact=True, json=False)
    except ManifestError as exc:
        raise ManifestError(str(exc).removeprefix(": ")) from None
    raise ManifestError(_UNKNOWN)  # pragma: no cover - no TOML document opens with '{'


def _dispatch(src: Source) -> Reading:
    text = src.text
    suffix = os.path.splitext(src.path)[1].lower()
    found = _first("marker", text, src)
    if found is not None:
        return found
    if text.lstrip().startswith("{"):
        return _json_document(src)
    if suffix in (".toml", ".json") or src.base in _TOML_NAMES \
            or re.search(r"^\s*\[", text, re.MULTILINE):
        try:
            if src.parse is not None and not src.exact:
                data = src.parse(text, src.name)
            else:
                data = load_toml(text, src.name, exact=src.exact)
        except ManifestError:
            if suffix in (".toml", ".json") or src.base in _TOML_NAMES:
                raise
            data = None
        if data is not None:
            found = _first("toml", data, src)
            if found is not None:
                return found
            locks.pylock_near_miss(data, src)
            raise ManifestError(_UNKNOWN)
    if suffix in (".yml", ".yaml") or src.base in _YAML_NAMES or _YAML_KEYS.search(text):
        data = load_yaml(text, src.name, exact=src.exact)
        if isinstance(data, Mapping):
            found = _first("yaml", data, src)
            if found is not None:
                return found
        raise ManifestError(_UNKNOWN)
    found = _first("lines", text, src)
    if found is not None:
        return found
    from envlock.formats.envfiles import requirements_fault  # the error path

    requirements_fault(text, src)
    raise ManifestError(_UNKNOWN)


def environment_with_selectors(path: str | os.PathLike[str], platform: str) -> Reading:
    """An ``environment.yml`` read for ``platform``: lines whose ``# [selector]`` does not hold
    are dropped first (conda-lock's rule), then :func:`read` applies.

    :raises ManifestError: as :func:`read`.
    """
    from envlock.formats.envfiles import environment_reading, selector_ok

    p = os.fspath(path)
    text = _text(p)
    kept = "\n".join(ln for ln in text.splitlines() if selector_ok(ln, platform))
    data = load_yaml(kept, one_line(p))
    if not isinstance(data, Mapping) or "dependencies" not in data:
        raise ManifestError(f"{one_line(p)}: not a conda environment file (no dependencies)")
    try:
        return environment_reading(data, one_line(p), platform, path=p)
    except ManifestError as exc:
        raise ManifestError(f"{one_line(p)}: {exc}") from None


def reading_of_lock(lock: locks.LockFile, name: str, platform: str | None = None) -> Reading:
    """The :class:`Reading` of an already read lock (``diff`` narrows a universal lock to one
    target and reads it again through this).

    :param name: the file name, for messages; ``platform``: the conda subdir to take.
    """
    return from_lock(lock, platform, name)


def detect_lockfile(path: str | os.PathLike[str]) -> str | None:
    """The lockfile kind of ``path`` by its content (``conda-lock``, ``pylock``, ``uv.lock``,
    ``poetry.lock``, ``pdm.lock``, ``pixi.lock``, ``conda-explicit``, ``requirements``), or
    ``None`` when it is none of them.

    :raises ManifestError: unreadable or malformed (one line).
    """
    r = read(path)
    return r.kind if r.kind in (*LOCK_KINDS, "requirements") else None


def read_lock(path: str | os.PathLike[str], *, exact: bool = True) -> locks.LockFile:
    """Read a lockfile of any kind in :data:`LOCK_KINDS` into its packages (all platforms).

    :param exact: parse as the installing tool does (see :func:`read`).
    :raises ManifestError: unreadable, malformed, invalid for its own tool, or not a lockfile.
    """
    r = read(path, exact=exact)
    if r.lock is not None:
        return r.lock
    if r.kind == "conda-explicit":
        pkgs = tuple(locks.Locked("conda", q["name"], q["version"], platform=r.platforms[0]
                                  if r.platforms else None, build=q.get("build"),
                                  channel=q.get("channel"), md5=q.get("md5"),
                                  subdir=q.get("subdir"))
                     for q in r.data.get("conda", {}).get("packages", []))
        return locks.LockFile("conda-explicit", r.platforms, pkgs)
    raise ManifestError(f"{one_line(os.fspath(path))}: not a lockfile ({r.kind})")
