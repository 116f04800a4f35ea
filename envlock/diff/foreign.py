"""Read inputs of ``envlock diff``: manifests and foreign environment descriptions.

Each reader turns a file into a *partial manifest* — the same dict layout a manifest has,
holding only the tables the format can tell (``[conda]``, ``[pip]``, ``[python]``,
``[git]``) — so that :func:`envlock.diff.facts.extract` handles every input alike.

Formats, recognised from content first and the file name second:

* an envlock manifest (TOML or JSON with an ``[envlock]`` table);
* ``environment.yml`` (``conda env export``, with or without build strings, with a ``pip:``
  sub-list) — complete when every conda entry has a build string (an export), else a *spec*
  whose unlisted packages are not compared;
* ``conda list --explicit`` (``@EXPLICIT`` then one package URL per line);
* ``pip freeze`` / ``requirements.txt`` (``name==version``, ``-e …``, ``name @ url``) — a spec;
* ``conda-lock.yml`` (conda-lock's unified lockfile, version 1), one platform;
* ``pylock.toml`` (PEP 751), read with :mod:`packaging.pylock` when available.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from envlock._names import canonicalize
from envlock.manifest._schema import SCHEMA, check_header
from envlock.manifest._toml import read_text
from envlock.errors import ManifestError
from envlock.redact import REDACTED, redact_url

__all__ = ["read", "parse_conda_url", "KINDS", "SCHEMA"]


#: every format ``read`` recognises, in the words used by reports.
KINDS = ("manifest", "environment.yml", "conda-explicit", "requirements", "conda-lock",
         "pylock")

_UNKNOWN = ("unknown format (expected an envlock manifest, environment.yml, "
            "conda list --explicit, pip freeze/requirements.txt, conda-lock.yml or pylock.toml)")


def read(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any], str]:
    """Read one input file.

    :param path: the file.
    :returns: ``(kind, data, listing)``: one of :data:`KINDS`, the (partial) manifest dict, and
        ``"complete"`` or ``"partial"`` (whether packages it does not list are absent).
    :raises ManifestError: unreadable, empty, malformed or of an unknown format (one line).
    :raises ManifestVersionError: a manifest of a newer schema.
    """
    p = os.fspath(path)
    text = read_text(p)
    try:
        return _sniff(p, text)
    except ManifestError as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith(p) else f"{p}: {msg}") from None


def _content(text: str) -> list[str]:
    lines = (ln.strip() for ln in text.splitlines())
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _sniff(p: str, text: str) -> tuple[str, dict[str, Any], str]:
    suffix = os.path.splitext(p)[1]
    first = re.search(r"^[ \t]*([^#\s].*)$", text, re.MULTILINE)
    if first and first.group(1).rstrip() == "@EXPLICIT":
        return "conda-explicit", _explicit(_content(text)[1:]), "complete"
    stripped = text.lstrip()
    if stripped.startswith("{") or suffix == ".toml" or re.search(r"^\s*\[", text, re.MULTILINE):
        data = _try_toml(p, text)
        if data is not None:
            return _toml_kind(data)
    if suffix in (".yml", ".yaml") or re.search(r"^(dependencies|package|metadata):", text,
                                                   re.MULTILINE):
        data = _yaml(text)
        if isinstance(data, Mapping):
            if isinstance(data.get("package"), list) and "metadata" in data:
                return "conda-lock", _conda_lock(data), "complete"
            if isinstance(data.get("dependencies"), list):
                env = _environment(data)
                conda = env.get("conda", {}).get("packages", [])
                # `conda env export` pins every package with its build: a complete listing;
                # without builds it may be hand-written or --from-history: only a spec.
                full = bool(conda) and all(p.get("build") for p in conda)
                return "environment.yml", env, "complete" if full else "partial"
        raise ManifestError(_UNKNOWN)
    content = _content(text)
    if content and all(_REQ_LINE.match(ln) for ln in content):
        return "requirements", _requirements(content), "complete" if _frozen(content) \
            else "partial"
    raise ManifestError(_UNKNOWN)


def parse_toml(text: str, name: str) -> dict[str, Any]:
    """Parse TOML (or JSON, starting with ``{``) text.

    With ``rtoml`` installed (Rust; ~15x faster than :mod:`tomllib` on a 1,000-package
    manifest) it parses first; on any failure :func:`envlock.manifest._toml.loads` parses again, so
    errors are always worded the same way.

    :raises ManifestError: malformed text.
    """
    if not text.lstrip().startswith("{"):
        try:
            import rtoml  # noqa: PLC0415

            data = rtoml.loads(text)
            if isinstance(data, dict):
                return data
        except ImportError:
            pass
        except Exception:  # noqa: BLE001, S110 - any rtoml failure: tomllib judges and words it
            pass
    from envlock.manifest import _toml  # noqa: PLC0415

    return _toml.loads(text, name=name)


def _try_toml(p: str, text: str) -> dict[str, Any] | None:
    try:
        return parse_toml(text, p)
    except ManifestError:
        if os.path.splitext(p)[1] in (".toml", ".json"):
            raise
        return None


def _toml_kind(data: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    if "envlock" in data:
        check_header(data)
        return "manifest", data, "complete"
    if "lock-version" in data and isinstance(data.get("packages"), list):
        return "pylock", _pylock(data), "complete"
    raise ManifestError(_UNKNOWN)


def _yaml(text: str) -> Any:
    import yaml  # noqa: PLC0415 - only YAML inputs pay for it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ManifestError(f"malformed YAML{where}") from None


def parse_conda_url(url: str) -> dict[str, str]:
    """Split a conda package URL into name, version, build, channel and subdir.

    ``https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda``
    gives ``channel="conda-forge"``, ``subdir="linux-64"``, ``name="numpy"``,
    ``version="1.26.4"``, ``build="py311h64a7726_0"`` (conda's file name is
    ``<name>-<version>-<build>`` and neither version nor build contains ``-``).

    :raises ManifestError: the URL's file is not a conda package name.
    """
    from urllib.parse import urlsplit  # noqa: PLC0415 - only explicit lists and locks need it

    url = redact_url(url.split("#", 1)[0].strip())
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:  # noqa: PLR2004
        raise ManifestError(f"not a conda package URL: {url}")
    fname = segments[-1]
    for ext in (".conda", ".tar.bz2"):
        if fname.endswith(ext):
            fname = fname[: -len(ext)]
            break
    else:
        raise ManifestError(f"not a conda package URL: {url}")
    bits = fname.rsplit("-", 2)
    if len(bits) != 3:  # noqa: PLR2004
        raise ManifestError(f"not a conda package file name: {segments[-1]}")
    channel_parts = [s for s in segments[:-2] if s not in ("t", REDACTED)]
    host = parts.netloc
    if host in ("conda.anaconda.org", "repo.anaconda.com", "") or not channel_parts:
        channel = "/".join(channel_parts) or host
    else:
        channel = f"{parts.scheme}://{host}/" + "/".join(channel_parts)
    return {"name": bits[0], "version": bits[1], "build": bits[2], "channel": channel,
            "subdir": segments[-2], "url": url}


def _with_python(conda: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    for pkg in conda:
        if pkg["name"] == "python" and pkg.get("version") and re.match(r"\d", pkg["version"]):
            out["python"] = {"status": "ok", "source": "python package",
                             "version": pkg["version"], "implementation": "cpython"}
    return out


def _explicit(lines: list[str]) -> dict[str, Any]:
    packages = [parse_conda_url(ln) for ln in lines if not ln.startswith("@")]
    conda = {"status": "ok", "source": "conda list --explicit", "packages": packages}
    return _with_python(packages, {"conda": conda})


_SPEC = re.compile(
    r"^(?:(?P<channel>[^:\s]+)::)?(?P<name>[A-Za-z0-9_.\-]+)\s*"
    r"(?:(?P<op>==|=|>=|<=|>|<|~=|!=)?\s*(?P<version>[^=\s]+)?)?(?:=(?P<build>\S+))?\s*$")


def _environment(data: Mapping[str, Any]) -> dict[str, Any]:
    conda: list[dict[str, Any]] = []
    pip: list[dict[str, Any]] = []
    for dep in data.get("dependencies") or ():
        if isinstance(dep, Mapping):
            for line in dep.get("pip") or ():
                entry = _requirement(str(line).strip())
                if entry:
                    pip.append(entry)
            continue
        m = _SPEC.match(str(dep).strip())
        if not m:
            raise ManifestError(f"cannot read dependency {dep!r}")
        op, version = m["op"], m["version"] or ""
        if op and op not in ("=", "=="):
            version = f"{op}{version}"
        entry = {"name": m["name"], "version": version}
        if m["build"]:
            entry["build"] = m["build"]
        if m["channel"]:
            entry["channel"] = m["channel"]
        conda.append(entry)
    out: dict[str, Any] = {}
    if conda:
        out["conda"] = {"status": "ok", "source": "environment.yml", "packages": conda}
    if pip:
        out["pip"] = {"status": "ok", "source": "environment.yml pip:", "packages": pip}
    return _with_python(conda, out)


_REQ_LINE = re.compile(
    r"^(?:-e\s+\S+|--?[a-z][\w-]*(?:[ =]\S+)?|[A-Za-z0-9][A-Za-z0-9_.\-]*(?:\[[^\]]*\])?"
    r"\s*(?:(?:===|==|~=|>=|<=|!=|>|<)\s*[^;\s\\]+\s*(?:,\s*(?:===|==|~=|>=|<=|!=|>|<)"
    r"\s*[^;\s\\]+\s*)*)?(?:@\s*\S+)?\s*(?:;[^\\]*)?(?:\s+--hash=\S+)*\s*\\?)$|^--hash=\S+\s*\\?$")


def _requirement(line: str) -> dict[str, Any] | None:
    line = line.split(" #", 1)[0].strip().rstrip("\\").strip()
    if not line or line.startswith(("#", "--hash")):
        return None
    if line.startswith(("-e ", "--editable")):
        target = line.split(None, 1)[1].strip()
        egg = re.search(r"[#&]egg=([A-Za-z0-9_.\-]+)", target)
        commit = re.search(r"@([0-9a-f]{7,40})(?:#|$)", target)
        name = egg.group(1) if egg else os.path.basename(target.rstrip("/"))
        entry: dict[str, Any] = {"name": canonicalize(name), "version": "", "origin": "editable"}
        if commit:
            entry.update(vcs="git", commit=commit.group(1))
        return entry
    if line.startswith("-"):
        return None  # --index-url, -r, -c: options, not packages
    line = line.split(";", 1)[0].split(" --hash", 1)[0].strip()
    if " @ " in line:
        name, url = (s.strip() for s in line.split(" @ ", 1))
        entry = {"name": canonicalize(name.split("[", 1)[0]), "version": "", "url": url}
        commit = re.search(r"@([0-9a-f]{7,40})(?:#|$)", url)
        if url.startswith("git+") and commit:
            entry.update(vcs="git", commit=commit.group(1))
        return entry
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?\s*(.*)$", line)
    if not m:
        return None
    spec = m.group(2).replace(" ", "")
    version = spec[2:] if spec.startswith("==") and "," not in spec else spec
    return {"name": canonicalize(m.group(1)), "version": version.lstrip("=")}


#: options a ``pip freeze`` (or ``uv export``/``pip-compile``) output may carry besides pins.
_FREEZE_OPTIONS = ("--index-url", "--extra-index-url", "-i ", "--find-links", "-f ",
                   "--hash", "--trusted-host", "--no-index", "--pre")


def _frozen(lines: list[str]) -> bool:
    """Whether a requirements file is a complete listing: ``pip freeze`` output (or a lockfile
    export) pins every installed distribution with ``==``, a direct reference (``name @ url``)
    or ``-e``; a hand-written file with a range (``>=``), a bare name or an include (``-r``,
    ``-c``) lists only what someone asked for."""
    pins = 0
    for ln in lines:
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


def _requirements(lines: list[str]) -> dict[str, Any]:
    packages = [e for e in (_requirement(ln) for ln in lines) if e]
    return {"pip": {"status": "ok", "source": "requirements", "packages": packages}}


def _conda_lock(data: Mapping[str, Any]) -> dict[str, Any]:
    if str(data.get("version")) != "1":
        raise ManifestError(f"conda-lock version {data.get('version')!r} is not supported (1)")
    entries = [p for p in data["package"] if isinstance(p, Mapping)]
    platforms = sorted({str(p.get("platform")) for p in entries})
    platform = "linux-64" if "linux-64" in platforms else (platforms[0] if platforms else "")
    conda: list[dict[str, Any]] = []
    pip: list[dict[str, Any]] = []
    for p in entries:
        if str(p.get("platform")) != platform or not p.get("name"):
            continue
        if p.get("manager") == "pip":
            pip.append({"name": canonicalize(str(p["name"])), "version": str(p.get("version", ""))})
            continue
        rec: dict[str, Any] = {"name": str(p["name"]), "version": str(p.get("version", ""))}
        if p.get("url"):
            try:
                parsed = parse_conda_url(str(p["url"]))
                rec.update(build=parsed["build"], channel=parsed["channel"])
            except ManifestError:
                pass
        conda.append(rec)
    src = f"conda-lock.yml ({platform})"
    out: dict[str, Any] = {"conda": {"status": "ok", "source": src, "packages": conda}}
    if pip:
        out["pip"] = {"status": "ok", "source": src, "packages": pip}
    return _with_python(conda, out)


def _pylock(data: dict[str, Any]) -> dict[str, Any]:
    try:
        from packaging.pylock import Pylock, PylockValidationError  # noqa: PLC0415
    except ImportError:  # packaging < 25.1: read the PEP 751 keys ourselves
        Pylock = None  # noqa: N806
    if Pylock is not None:
        try:
            lock = Pylock.from_dict(data)
        except PylockValidationError as exc:
            raise ManifestError(f"invalid pylock.toml ({exc})") from None
        raw = [{"name": str(p.name), "version": str(p.version) if p.version else "",
                "commit": p.vcs.commit_id if p.vcs else None,
                "editable": bool(p.directory and p.directory.editable)} for p in lock.packages]
    else:
        if not str(data.get("lock-version", "")).startswith("1."):
            raise ManifestError(f"pylock lock-version {data.get('lock-version')!r} unsupported")
        raw = [{"name": str(p.get("name", "")), "version": str(p.get("version", "")),
                "commit": (p.get("vcs") or {}).get("commit-id"),
                "editable": bool((p.get("directory") or {}).get("editable"))}
               for p in data["packages"] if isinstance(p, Mapping)]
    merged: dict[str, dict[str, Any]] = {}
    for p in raw:
        name = canonicalize(p["name"])
        prior = merged.get(name)
        if prior:  # the same project for several environments (markers): keep every version
            versions = sorted(set(prior["version"].split(" | ")) | {p["version"]})
            prior["version"] = " | ".join(versions)
            continue
        entry: dict[str, Any] = {"name": name, "version": p["version"]}
        if p["commit"]:
            entry.update(vcs="git", commit=p["commit"])
        if p["editable"]:
            entry["origin"] = "editable"
        merged[name] = entry
    return {"pip": {"status": "ok", "source": "pylock.toml", "packages": list(merged.values())}}
