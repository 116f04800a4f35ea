"""The formats that are not lockfiles of one tool: envlock's own manifest, conda's
``environment.yml``, ``conda list --explicit`` and ``--export`` lists, and pip requirements
files (``pip freeze`` output among them).  Each has a detector and a reader named in
:data:`envlock._kinds.FORMATS`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from envlock._bounded import one_line
from envlock.errors import ManifestError
from envlock.formats import conda, pep508
from envlock.formats._load import load_yaml
from envlock.formats import _reading
from envlock.formats._reading import Reading, Source, partial
from envlock.manifest._schema import check_header
from envlock.manifest._toml import with_run_environment
from envlock.redact import redact_url

__all__ = ["is_explicit", "read_explicit", "is_manifest", "read_manifest", "is_environment",
           "read_environment", "environment_reading", "selector_ok", "is_export", "read_export",
           "is_requirements", "read_requirements_file", "requirements_fault", "iter_content"]


def iter_content(text: str) -> Iterator[str]:
    """The stripped lines of ``text`` that are neither blank nor comments, one at a time."""
    for raw in pep508.iter_lines(text):
        ln = raw.strip()
        if ln and not ln.startswith("#"):
            yield ln


# -- conda list --explicit ----------------------------------------------------------------------

def is_explicit(text: str, src: Source) -> bool:
    """Whether the first content line is ``@EXPLICIT`` (conda's explicit-file marker)."""
    first = re.search(r"^[ \t]*([^#\s].*)$", text, re.MULTILINE)
    return bool(first and first.group(1).rstrip() == "@EXPLICIT")


def read_explicit(text: str, src: Source) -> Reading:
    """A ``conda list --explicit`` file: one URL per package after ``@EXPLICIT``; complete for
    conda, silent about pip."""
    lines = list(iter_content(text))
    start = lines.index("@EXPLICIT") if "@EXPLICIT" in lines else 0
    pkgs = conda.explicit(lines[start + 1:])
    sub = conda.header_platform(text) or next(
        (p["subdir"] for p in pkgs if p.get("subdir") not in (None, "noarch")), None)
    data = partial(pkgs, [], "conda list --explicit", subdir=sub, pip_status="not recorded")
    return Reading("conda-explicit", data, "conda", (sub,) if sub else ())


# -- an envlock manifest ------------------------------------------------------------------------

def is_manifest(data: Mapping[str, Any], src: Source) -> bool:
    """Whether a TOML document is an envlock manifest (an ``[envlock]`` table)."""
    return "envlock" in data


def read_manifest(data: dict[str, Any], src: Source) -> Reading:
    """An envlock manifest, its header checked (a ``run.toml`` gets its run's environment).

    :raises ManifestError: not a manifest envlock reads; ``ManifestVersionError``: newer.
    """

    if "run" in data:
        data = with_run_environment(data, src.path)
    check_header(data)
    return Reading("manifest", data, "complete")


# -- environment.yml ------------------------------------------------------------------------------

# conda-lock's filter_platform_selectors (conda_lock/src_parser/selectors.py): the selectors
# each platform satisfies.
_SELECTORS = {
    "linux-64": {"linux64", "unix", "linux"}, "linux-aarch64": {"aarch64", "unix", "linux"},
    "linux-ppc64le": {"ppc64le", "unix", "linux"}, "osx-64": {"osx", "osx64", "unix"},
    "osx-arm64": {"arm64", "osx", "unix"}, "win-64": {"win", "win64"},
}
_SELECTOR = re.compile(r"#.*\[([^\[\]]+)\]\s*$")


def selector_ok(line: str, platform: str) -> bool:
    """Whether a line of an ``environment.yml`` holds for ``platform``: no ``# [selector]``, or
    one the platform satisfies (conda-lock's rule)."""
    m = _SELECTOR.search(line)
    if not m:
        return True
    return m.group(1).strip() in _SELECTORS.get(platform, set())


def is_environment(data: Any, src: Source) -> bool:
    """Whether a YAML document is a conda environment file (a ``dependencies`` key)."""
    return "dependencies" in data


def read_environment(data: Mapping[str, Any], src: Source) -> Reading:
    """An ``environment.yml`` for ``src.platform`` (default: its first ``platforms`` entry, else
    ``linux-64``); lines whose ``# [selector]`` does not hold are dropped first.

    :raises ManifestError: malformed entries (one line).
    """
    plats = data.get("platforms")
    plat = src.platform or (str(plats[0]) if isinstance(plats, list) and plats else "linux-64")
    if re.search(r"#.*\[[^\[\]]+\]\s*$", src.text, re.MULTILINE):
        kept = "\n".join(ln for ln in src.text.splitlines() if selector_ok(ln, plat))
        data = load_yaml(kept, src.name)
        if not isinstance(data, Mapping) or "dependencies" not in data:
            raise ManifestError("not a conda environment file (no dependencies)")
    return environment_reading(data, src.name, plat, path=src.path, includes=src.includes)


def _pip_lines(deps: list[Any]) -> tuple[list[Any], list[str]]:
    """The match specs and the ``pip:`` lines of a ``dependencies`` list."""
    specs = []
    pip_lines: list[str] = []
    for i, dep in enumerate(deps):
        if isinstance(dep, Mapping) and set(dep) == {"pip"}:
            if dep["pip"] is None:
                continue
            if not isinstance(dep["pip"], list):
                raise ManifestError(f"dependencies[{i}].pip must be a list of requirements")
            pip_lines += [str(r) for r in dep["pip"] if r is not None]
            continue
        if not isinstance(dep, (str, int, float)) or isinstance(dep, bool):
            raise ManifestError(f"dependencies[{i}] is neither a match spec nor a pip: list")
        specs.append(conda.parse_spec(str(dep)))
    return specs, pip_lines


def environment_reading(data: Mapping[str, Any], name: str, platform: str | None = None, *,
                        path: str | None = None, includes: bool = True) -> Reading:
    """``environment.yml``: an export (every entry ``name=version=build``) is a complete
    listing; otherwise a spec whose entries are constraints.

    The ``pip:`` list is read as the requirements file it becomes: ``conda env create`` writes
    it to a temporary requirements file in the environment file's directory and runs ``pip
    install -r`` on it there (``conda/env/installers/pip.py``, ``_pip_install_via_requirements``
    with ``pip_workdir``).  So its ``-r FILE``/``-c FILE`` lines are followed relative to that
    directory, with the bounds and cycle errors of requirements includes
    (:func:`envlock.formats.pep508.read_requirements`), and so are its local paths.

    :param path: the environment file (its directory is where ``-r`` and local paths are read
        from); ``None``: a ``-r``/``-c`` line is an error (nowhere to read it from).
    :param includes: follow ``-r``/``-c`` (as :func:`envlock.formats.read`).
    :raises ManifestError: malformed ``dependencies`` or ``channels``, a bad ``pip:`` line or
        include (one line).
    """
    deps = data.get("dependencies")
    if not isinstance(deps, list):
        raise ManifestError("'dependencies' must be a list")
    channels_raw = data.get("channels") or []
    if not isinstance(channels_raw, list) or not all(isinstance(c, str) for c in channels_raw):
        raise ManifestError("'channels' must be a list of channel names or URLs")
    plats = data.get("platforms")
    specs, pip_lines = _pip_lines(deps)
    full = all(s.exact and s.build for s in specs) and bool(specs)
    conda_pkgs: list[dict[str, Any]] = []
    for s in specs:
        entry = conda.package_entry(s.name, s.pin if s.exact else s.version,
                                    s.build if s.exact else None, s.channel or None)
        if not s.exact or not s.build:
            entry["constraint"] = {"kind": "conda", "version": s.version, "build": s.build}
        conda_pkgs.append(entry)
    conda_pkgs = list({p["name"]: p for p in conda_pkgs}.values())  # the last entry of a name
    pip_pkgs = _pip_section(pip_lines, name, path, includes)
    out = partial(conda_pkgs, pip_pkgs, "environment.yml")
    channels, _nodefaults = conda.expand_channels(list(channels_raw))
    if channels:
        out.setdefault("conda", {"status": "ok", "source": "environment.yml", "packages": []})
        out["conda"]["channels"] = channels
    return Reading("environment.yml", out, "complete" if full else "partial",
                   tuple(str(x) for x in plats) if isinstance(plats, list) else (),
                   marked=_marked(pip_pkgs))


def _pip_section(lines: list[str], name: str, path: str | None, includes: bool
                 ) -> list[dict[str, Any]]:
    """The entries of a ``pip:`` list, read as conda hands it to pip: one requirements file."""
    text = "\n".join(lines)
    if path is None:
        for _, logical in pep508.logical_lines(text):
            if pep508.include_of(logical) is not None:
                raise ManifestError(f"pip: {one_line(logical, 80)}: an include read without "
                                    "the environment file's directory")
    entries = pep508.read_requirements(text, f"{name}: pip section", limit=_reading.MAX_PACKAGES,
                                       path=path, includes=includes)
    for e in entries:
        e.pop("wheel-subdir", None)
    return entries


# -- conda list --export --------------------------------------------------------------------------

def is_export(text: str, src: Source) -> bool:
    """Whether every content line is a ``conda list --export`` line (``name=version=build``)."""
    content = next(iter_content(text), None) is not None
    return content and all(conda.is_export_line(ln) for ln in iter_content(text))


def read_export(text: str, src: Source) -> Reading:
    """A ``conda list --export`` list: complete (its ``pypi`` lines are the pip packages)."""
    conda_pkgs, pip_pkgs = conda.export_list(list(iter_content(text)))
    sub = conda.header_platform(text)
    return Reading("conda-export", partial(conda_pkgs, pip_pkgs, "conda list --export", subdir=sub),
                   "complete", (sub,) if sub else ())


# -- requirements files ---------------------------------------------------------------------------

def is_requirements(text: str, src: Source) -> bool:
    """Whether ``text`` reads as a pip requirements file (:func:`pep508.looks_like_requirements`)."""
    return next(iter_content(text), None) is not None and pep508.looks_like_requirements(text)


def read_requirements_file(text: str, src: Source) -> Reading:
    """A requirements file, read as pip reads it (includes followed when ``src.includes``);
    complete when it is a freeze (:func:`_frozen`), else a spec.

    :raises ManifestError: a line pip refuses, a bad include (one line).
    """
    _explicit_without_marker(text)
    entries = pep508.read_requirements(text, src.name, limit=_reading.MAX_PACKAGES, path=src.path,
                                       includes=src.includes)
    # the platform of the platform-specific wheels it pins (PEP 425 tags), when one
    subs = {e.pop("wheel-subdir") for e in entries if "wheel-subdir" in e}
    sub = subs.pop() if len(subs) == 1 else None
    return Reading("requirements", partial([], entries, "requirements", subdir=sub),
                   "pip" if _frozen(iter_content(text)) else "partial", (sub,) if sub else (),
                   marked=_marked(entries))


def _marked(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """``entries`` when one has a marker (:attr:`Reading.marked`), else ``()``."""
    return tuple(entries) if any("marker" in e for e in entries) else ()


#: conda-lock's explicit render of a pip package: a comment ``# pip name @ url``
_CONDA_LOCK_PIP = re.compile(r"^[ \t]*# pip [A-Za-z0-9][A-Za-z0-9._\-]* @ \S+", re.MULTILINE)


def _explicit_without_marker(text: str) -> None:
    """Refuse conda-lock's explicit render (its ``# pip name @ url`` comments) that lacks the
    ``@EXPLICIT`` line: without it ``conda create --file`` reads each line as a ``MatchSpec``
    (conda's ``specs_from_url``), and a URL line is then no conda package name — conda cannot
    install it, so envlock does not read it as something else (pip URLs).

    :raises ManifestError: one line naming the first URL line.
    """
    if not _CONDA_LOCK_PIP.search(text):
        return
    lines = list(iter_content(text))
    if lines and all(re.match(r"[a-z][a-z0-9+.\-]*://", ln) for ln in lines):
        first = one_line(redact_url(lines[0]))
        raise ManifestError(f"a conda explicit list without its @EXPLICIT line: conda reads each "
                            f"line as a MatchSpec, and {first} is a URL, not a conda package name")


def requirements_fault(text: str, src: Source) -> None:
    """For a ``.txt``/``.in`` file no detector took: when its first line is a requirement, the
    error of the first bad line further down (pip's words).

    :raises ManifestError: that line's fault.
    """
    if next(iter_content(text), None) is None or \
            os.path.splitext(src.base)[1].lower() not in (".txt", ".in"):
        return
    lines = pep508.logical_lines(text)
    try:
        pep508.parse_line(lines[0][1])
    except ManifestError:
        return
    pep508.read_requirements(text, src.name, path=src.path, includes=src.includes)


#: options a ``pip freeze`` (or ``uv export``/``pip-compile``) output may carry besides pins.
_FREEZE_OPTIONS = ("--index-url", "--extra-index-url", "-i ", "--find-links", "-f ",
                   "--hash", "--trusted-host", "--no-index", "--pre")


def _frozen(lines: Iterable[str]) -> bool:
    """Whether a requirements file is a complete listing: ``pip freeze`` output (or a lockfile
    export) pins every installed distribution with ``==``, a direct reference (``name @ url``)
    or ``-e``; a hand-written file with a range (``>=``), a bare name or an include (``-r``,
    ``-c``) lists only what someone asked for."""
    pins = 0
    simple = pep508.SIMPLE_PIN.fullmatch
    for ln in lines:
        if simple(ln):  # name==version, the bulk of a freeze
            pins += 1
            continue
        text = ln.split(" #", 1)[0].strip().rstrip("\\").strip()
        if not text or text.startswith(_FREEZE_OPTIONS):
            continue
        if text.startswith(("-e ", "--editable")):
            pins += 1
            continue
        if text.startswith("-"):
            return False
        spec = text.split(";", 1)[0].split(" --hash", 1)[0].strip()
        if " @ " in spec or re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(?:\[[^\]]*\])?\s*===?\s*"
                                         r"[^,\s*]+", spec):
            pins += 1
            continue
        return False
    return pins > 0
