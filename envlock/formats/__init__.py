"""Every environment file envlock reads, each read by its own tool's rules — one reader per
format, shared by ``diff``, ``verify --lock``, ``restore`` and ``lock -f``.

:func:`read` recognises a file (content first, then the file name) and returns a
:class:`Reading`: its kind, a *partial manifest* (the tables of a manifest the format can tell:
``[conda]``, ``[pip]``, ``[python]``, ``[subdir]``) and whether it is a complete listing or a
spec.  Formats (see ``docs/diff.md`` for what each can and cannot say):

===================== ===================================== =================================
kind                  recognised by                          read by
===================== ===================================== =================================
``manifest``          ``[envlock]`` table with ``schema``    :mod:`envlock.manifest`
``environment.yml``   ``dependencies:`` list                 :mod:`envlock.formats.conda`
                                                             (py-rattler ``MatchSpec``)
``conda-explicit``    ``@EXPLICIT`` line                     :func:`conda.parse_url`
``conda-export``      ``name=version=build`` lines           :func:`conda.export_list`
                      (``conda list --export``)
``requirements``      PEP 508 lines / pip options            :mod:`envlock.formats.pep508`
``conda-lock``        ``package:`` + ``metadata:`` (YAML)    conda-lock's model
``pixi.lock``         ``environments:`` + ``packages:``       :func:`locks.read_pixi_lock`
``pylock``            ``lock-version`` + ``[[packages]]``    :mod:`packaging.pylock`
``uv.lock``           ``version`` + ``[[package]]``          :func:`projectlocks.read_uv_lock`
``poetry.lock``       ``[metadata] content-hash``            :func:`projectlocks.read_poetry_lock`
``pdm.lock``          ``[metadata] lock_version``            :func:`projectlocks.read_pdm_lock`
``Pipfile.lock``      ``_meta`` + ``default``/``develop``    :func:`pipenv.read_pipfile_lock`
``Pipfile``           ``[packages]``/``[dev-packages]``      :func:`pipenv.read_pipfile` (a spec)
===================== ===================================== =================================

Every file is read with :func:`envlock._io.read_text` (regular files only, 64 MiB, strict
UTF-8) and parsed with the bounded parsers of :mod:`envlock.formats._load`.  Every error is one
:class:`~envlock.errors.ManifestError` line naming the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from envlock._io import InputError, one_line, read_text
from envlock.errors import ManifestError
from envlock.formats import conda, locks, pep508, pipenv, projectlocks
from envlock.formats._load import load_toml, load_yaml

__all__ = ["KINDS", "LOCK_KINDS", "MAX_PACKAGES", "Reading", "read", "read_lock", "detect_lockfile", "UNKNOWN"]

UNKNOWN = pep508.UNKNOWN

from envlock._kinds import KINDS, LOCK_KINDS  # noqa: E402  (the names, without the readers)

#: The most packages one input file may list (its pip entries and conda packages, on all the
#: platforms a lockfile locks).  Real environments list hundreds to a few thousand (the largest
#: real lockfiles in ``tests/formats/foreign`` lock about 2,000 packages on several platforms); a
#: file of more is refused with one line instead of costing memory and time in proportion
#: (issue 29: a 3-million-line freeze took 9.4 GB and 6 minutes through ``diff``).
MAX_PACKAGES = 100_000

_UNKNOWN = ("unknown format (expected an envlock manifest, environment.yml, conda list "
            "--explicit/--export, pip freeze/requirements.txt, conda-lock.yml, pixi.lock, "
            "pylock.toml, uv.lock, poetry.lock, pdm.lock, Pipfile or Pipfile.lock)")


@dataclass(frozen=True)
class Reading:
    """One input file, read.

    :ivar kind: one of :data:`KINDS`.
    :ivar data: the partial manifest (``dict`` in a manifest's layout).
    :ivar listing: ``"complete"`` (a package it does not list is absent), ``"partial"`` (a spec:
        unlisted packages are not compared), ``"conda"`` (complete for conda packages, silent
        about pip: an explicit list) or ``"pip"`` (complete for Python distributions, silent
        about conda packages: a ``pip freeze``).
    :ivar platforms: the conda subdirs the file is for (locks: all they lock).
    :ivar lock: the :class:`~envlock.formats.locks.LockFile` of a lockfile, else ``None``.
    :ivar meta: what the format says besides packages, for ``show`` (``Pipfile.lock``: its
        ``sha256``, ``sources``, ``requires``, ``categories``); ``{}`` for most kinds.
    """

    kind: str
    data: dict[str, Any]
    listing: str = "complete"
    platforms: tuple[str, ...] = ()
    lock: Any = field(default=None, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)


def _text(path: str) -> str:
    try:
        text = read_text(path)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    if not text.strip():
        raise ManifestError(f"{one_line(path)}: empty file")
    return text


def read(path: str | os.PathLike[str], *, platform: str | None = None,
         exact: bool = False, includes: bool = True) -> Reading:
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
    :raises ManifestError: unreadable, empty, malformed or of an unknown format (one line that
        names the file).
    :raises ManifestVersionError: a manifest of a newer schema.
    """
    p = os.fspath(path)
    text = _text(p)
    shown = one_line(p)
    try:
        return _bounded(_sniff(p, text, platform, exact, includes))
    except ManifestError as exc:
        msg = one_line(str(exc), 400)
        raise type(exc)(msg if msg.startswith(shown) else f"{shown}: {msg}") from None


def _bounded(reading: Reading) -> Reading:
    """``reading``, unless it lists more than :data:`MAX_PACKAGES` packages.

    :raises ManifestError: one line saying how many it lists and the bound.
    """
    lock = reading.lock
    if lock is not None and hasattr(lock, "packages"):
        count = len(lock.packages)
    else:
        count = sum(len(t.get("packages") or ()) for t in (reading.data.get("pip"), reading.data.get("conda"))
                    if isinstance(t, Mapping))
    if count > MAX_PACKAGES:
        raise ManifestError(f"lists {count} packages; envlock reads at most {MAX_PACKAGES} from one file")
    return reading


def _content(text: str) -> list[str]:
    return list(_iter_content(text))


def _iter_content(text: str) -> Iterator[str]:
    """The stripped lines of ``text`` that are neither blank nor comments, one at a time."""
    for raw in pep508.iter_lines(text):
        ln = raw.strip()
        if ln and not ln.startswith("#"):
            yield ln


def _sniff(p: str, text: str, platform: str | None, exact: bool = False,
           includes: bool = True) -> Reading:
    name = one_line(p)
    base = os.path.basename(p)
    suffix = os.path.splitext(p)[1].lower()
    first = re.search(r"^[ \t]*([^#\s].*)$", text, re.MULTILINE)
    if first and first.group(1).rstrip() == "@EXPLICIT":
        return _explicit(text)
    stripped = text.lstrip()
    if stripped.startswith("{") or suffix in (".toml", ".json") or base in ("uv.lock", "poetry.lock",
                                                                           "pdm.lock") \
            or re.search(r"^\s*\[", text, re.MULTILINE):
        try:
            data = load_toml(text, name, exact=exact)
        except ManifestError:
            if suffix in (".toml", ".json") or base in ("uv.lock", "poetry.lock", "pdm.lock"):
                raise
            data = None
        if data is not None:
            if "envlock" in data and "run" in data:
                from envlock.manifest._toml import with_run_environment  # noqa: PLC0415

                data = with_run_environment(data, p)
            return _toml_kind(data, name, platform, base)
    if suffix in (".yml", ".yaml") or base == "pixi.lock" or re.search(
            r"^(dependencies|package|metadata|environments|packages|version):", text, re.MULTILINE):
        data = load_yaml(text, name, exact=exact)
        if isinstance(data, Mapping):
            if "metadata" in data and ("package" in data or base.endswith(
                    ("conda-lock.yml", "conda-lock.yaml"))):
                lock = locks.read_conda_lock(data, name)
                return _from_lock(lock, platform, name)
            if "environments" in data and "packages" in data:
                lock = locks.read_pixi_lock(data, name)
                return _from_lock(lock, platform, name)
            if "dependencies" in data:
                plats = data.get("platforms")
                plat = platform or (str(plats[0]) if isinstance(plats, list) and plats
                                    else "linux-64")
                if re.search(r"#.*\[[^\[\]]+\]\s*$", text, re.MULTILINE):
                    kept = "\n".join(ln for ln in text.splitlines() if _selector_ok(ln, plat))
                    data = load_yaml(kept, name)
                    if not isinstance(data, Mapping) or "dependencies" not in data:
                        raise ManifestError("not a conda environment file (no dependencies)")
                return _environment(data, name, plat)
        raise ManifestError(_UNKNOWN)
    content = next(_iter_content(text), None) is not None
    if content and all(conda.is_export_line(ln) for ln in _iter_content(text)):
        conda_pkgs, pip_pkgs = conda.export_list(_content(text))
        sub = conda.header_platform(text)
        return Reading("conda-export", _partial(conda_pkgs, pip_pkgs, "conda list --export",
                                                subdir=sub), "complete", (sub,) if sub else ())
    if content and pep508.looks_like_requirements(text):
        entries = pep508.read_requirements(text, name, limit=MAX_PACKAGES, path=p,
                                           includes=includes)
        # the platform of the platform-specific wheels it pins (PEP 425 tags), when one
        subs = {e.pop("wheel-subdir") for e in entries if "wheel-subdir" in e}
        sub = subs.pop() if len(subs) == 1 else None
        return Reading("requirements", _partial([], entries, "requirements", subdir=sub),
                       "pip" if _frozen(_iter_content(text)) else "partial", (sub,) if sub else ())
    if content and suffix in (".txt", ".in"):
        lines = pep508.logical_lines(text)
        try:
            pep508.parse_line(lines[0][1])
        except ManifestError:
            pass
        else:  # a requirements file with a bad line further down: name that line
            pep508.read_requirements(text, name, path=p, includes=includes)
    raise ManifestError(_UNKNOWN)


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


def _toml_kind(data: dict[str, Any], name: str, platform: str | None, base: str = "") -> Reading:
    if "envlock" in data:
        from envlock.manifest._schema import check_header  # noqa: PLC0415

        check_header(data)
        return Reading("manifest", data, "complete")
    if pipenv.is_pipfile_lock(data):
        lock, entries, meta = pipenv.read_pipfile_lock(data, name)
        out = _partial([], entries, "Pipfile.lock")
        out.setdefault("pip", {"status": "ok", "source": "Pipfile.lock", "packages": []})
        return Reading("Pipfile.lock", out, "complete", (), lock, meta)
    if pipenv.is_pipfile(data, base):
        entries, meta = pipenv.read_pipfile(data, name)
        out = _partial([], entries, "Pipfile")
        out.setdefault("pip", {"status": "ok", "source": "Pipfile", "packages": []})
        return Reading("Pipfile", out, "partial", (), None, meta)
    kind = locks.sniff_toml_lock(data)
    if kind is None and re.search(r"(^|[_.-])pylock(\.[^.]+)?\.toml$", base) and "packages" in data:
        raise ManifestError("not a PEP 751 lock file: no lock-version (PEP 751 requires it)")
    if kind is None:
        raise ManifestError(_UNKNOWN)
    reader = {"pylock": locks.read_pylock, "uv.lock": projectlocks.read_uv_lock,
              "poetry.lock": projectlocks.read_poetry_lock, "pdm.lock": projectlocks.read_pdm_lock}[kind]
    return _from_lock(reader(data, name), platform, name)


def _pip_entries(pkgs: list[Any]) -> list[dict[str, Any]]:
    """One entry per (name, marker set); the marker is part of the key only where a project is
    listed more than once (``uv export`` splits by environment marker)."""
    counts: dict[str, int] = {}
    for e in pkgs:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    out = []
    seen: set[tuple[str, str | None]] = set()
    for e in pkgs:
        if "marker" in e and (counts[e["name"]] < 2 or not e["marker"]):
            e = {k: v for k, v in e.items() if k != "marker"}  # a copy: the caller's stays
        key = (e["name"], e.get("marker"))
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def _partial(conda_pkgs: list[dict[str, Any]], pip_pkgs: list[dict[str, Any]], source: str, *,
             subdir: str | None = None, pip_status: str = "ok") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if conda_pkgs:
        out["conda"] = {"status": "ok", "source": source, "packages": conda_pkgs}
    if pip_status != "ok":
        out["pip"] = {"status": pip_status, "source": source,
                      "error": f"a {source} never lists pip packages"}
    elif pip_pkgs:
        out["pip"] = {"status": "ok", "source": source, "packages": _pip_entries(pip_pkgs)}
    if subdir:
        out["subdir"] = {"status": "ok", "subdir": subdir}
    for pkg in conda_pkgs:
        v = pkg.get("version") or ""
        if pkg["name"] == "python":  # conda's python package is CPython (PyPy is `pypy`)
            out["python"] = {"status": "ok", "source": "python package",
                             "implementation": "cpython"}
            if re.match(r"\d", v) and not pkg.get("constraint"):
                out["python"]["version"] = v
    return out


def _explicit(text: str) -> Reading:
    lines = _content(text)
    start = lines.index("@EXPLICIT") if "@EXPLICIT" in lines else 0
    pkgs = conda.explicit(lines[start + 1:])
    sub = conda.header_platform(text) or next(
        (p["subdir"] for p in pkgs if p.get("subdir") not in (None, "noarch")), None)
    data = _partial(pkgs, [], "conda list --explicit", subdir=sub, pip_status="not recorded")
    return Reading("conda-explicit", data, "conda", (sub,) if sub else ())


# conda-lock's filter_platform_selectors (conda_lock/src_parser/selectors.py): the selectors
# each platform satisfies.
_SELECTORS = {
    "linux-64": {"linux64", "unix", "linux"}, "linux-aarch64": {"aarch64", "unix", "linux"},
    "linux-ppc64le": {"ppc64le", "unix", "linux"}, "osx-64": {"osx", "osx64", "unix"},
    "osx-arm64": {"arm64", "osx", "unix"}, "win-64": {"win", "win64"},
}


def _selector_ok(line: str, platform: str) -> bool:
    m = re.search(r"#.*\[([^\[\]]+)\]\s*$", line)
    if not m:
        return True
    return m.group(1).strip() in _SELECTORS.get(platform, set())


def _environment(data: Mapping[str, Any], name: str, platform: str | None = None) -> Reading:
    """``environment.yml``: an export (every entry ``name=version=build``) is a complete
    listing; otherwise a spec whose entries are constraints."""
    deps = data.get("dependencies")
    if not isinstance(deps, list):
        raise ManifestError("'dependencies' must be a list")
    channels_raw = data.get("channels") or []
    if not isinstance(channels_raw, list) or not all(isinstance(c, str) for c in channels_raw):
        raise ManifestError("'channels' must be a list of channel names or URLs")
    plats = data.get("platforms")
    conda_pkgs: list[dict[str, Any]] = []
    pip_lines: list[str] = []
    specs = []
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
    full = all(s.exact and s.build for s in specs) and bool(specs)
    for s in specs:
        entry = conda.package_entry(s.name, s.pin if s.exact else s.version,
                                    s.build if s.exact else None, s.channel or None)
        if not s.exact or not s.build:
            entry["constraint"] = {"kind": "conda", "version": s.version, "build": s.build}
        conda_pkgs.append(entry)
    conda_pkgs = _last_per_name(conda_pkgs)
    pip_pkgs = []
    for line in pip_lines:
        for _, logical in pep508.logical_lines(line):
            e = pep508.parse_line(logical)
            if e is not None:
                e.pop("wheel-subdir", None)
                pip_pkgs.append(e)
    out = _partial(conda_pkgs, pip_pkgs, "environment.yml")
    channels, _nodefaults = conda.expand_channels(list(channels_raw))
    if channels:
        out.setdefault("conda", {"status": "ok", "source": "environment.yml", "packages": []})
        out["conda"]["channels"] = channels
    return Reading("environment.yml", out, "complete" if full else "partial",
                   tuple(str(x) for x in plats) if isinstance(plats, list) else ())


def _last_per_name(pkgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for p in pkgs:
        by[p["name"]] = p
    return list(by.values())


def environment_with_selectors(path: str | os.PathLike[str], platform: str) -> Reading:
    """An ``environment.yml`` read for ``platform``: lines whose ``# [selector]`` does not hold
    are dropped first (conda-lock's rule), then :func:`read` applies.

    :raises ManifestError: as :func:`read`.
    """
    p = os.fspath(path)
    text = _text(p)
    kept = "\n".join(ln for ln in text.splitlines() if _selector_ok(ln, platform))
    data = load_yaml(kept, one_line(p))
    if not isinstance(data, Mapping) or "dependencies" not in data:
        raise ManifestError(f"{one_line(p)}: not a conda environment file (no dependencies)")
    try:
        return _environment(data, one_line(p), platform)
    except ManifestError as exc:
        raise ManifestError(f"{one_line(p)}: {exc}") from None


def _from_lock(lock: locks.LockFile, platform: str | None, name: str) -> Reading:
    platforms = lock.platforms or tuple(dict.fromkeys(
        x.platform for x in lock.packages if x.platform))
    chosen = platform or ("linux-64" if "linux-64" in platforms else
                          (platforms[0] if platforms else None))
    conda_pkgs, pip_pkgs = [], []
    for x in lock.packages:
        if x.platform is not None and chosen is not None and x.platform != chosen:
            continue
        if x.manager == "conda":
            conda_pkgs.append(conda.package_entry(x.name, x.version, x.build, x.channel))
        else:
            e: dict[str, Any] = {"name": x.name, "version": x.version}
            marker = _install_marker(x)
            if marker:
                e["marker"] = marker
            if x.vcs:
                e["vcs"] = x.vcs
            if x.commit:
                e["commit"] = x.commit
            pip_pkgs.append(e)
    source = f"{lock.kind} ({chosen})" if chosen else lock.kind
    subdir = next((q.subdir for q in lock.pixi_platforms if q.name == chosen), chosen)
    data = _partial(conda_pkgs, pip_pkgs, source, subdir=subdir if lock.platforms or chosen else None)
    if not conda_pkgs and not pip_pkgs:
        data.setdefault("pip", {"status": "ok", "source": source, "packages": []})
    return Reading(lock.kind, data, "complete", tuple(platforms), lock)


def _install_marker(x: locks.Locked) -> str | None:
    """Where an entry is installed: its own marker (a uv.lock's ``resolution-markers``: the
    fork it belongs to) and, where the lock says which installs reach it
    (:attr:`locks.Locked.groups`), the markers of those edges — what ``uv export`` writes as
    the entry's ``marker``."""
    if not x.groups or any(m is None for _g, m in x.groups):
        return x.marker
    reach = " or ".join(f"({m})" for m in dict.fromkeys(m for _g, m in x.groups if m))
    return f"({x.marker}) and ({reach})" if x.marker else reach


def reading_of_lock(lock: locks.LockFile, name: str, platform: str | None = None) -> Reading:
    """The :class:`Reading` of an already read lock (``diff`` narrows a universal lock to one
    target and reads it again through this).

    :param name: the file name, for messages; ``platform``: the conda subdir to take.
    """
    return _from_lock(lock, platform, name)


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
                                  channel=q.get("channel"))
                     for q in r.data.get("conda", {}).get("packages", []))
        return locks.LockFile("conda-explicit", r.platforms, pkgs)
    raise ManifestError(f"{one_line(os.fspath(path))}: not a lockfile ({r.kind})")
