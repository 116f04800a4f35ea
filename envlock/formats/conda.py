"""conda's own formats: match specs, package URLs, build strings, channels, and the files made of
them (``environment.yml``, ``conda list --explicit``, ``conda list --export``).

Rules, each from conda's documentation or conda's/rattler's code:

* **Names are exact.** conda package names are compared as conda compares them (lower-case
  ASCII, ``_`` and ``-`` distinct): ``cached_property`` and ``cached-property`` are two packages
  on conda-forge.  PyPI normalisation (PEP 503) is for PyPI names only.
* **Match specs** (``numpy>=1.2``, ``_libgcc_mutex=0.1=main``, ``pytorch~=2.3.1 *cuda12*``,
  ``conda-forge::numpy``, ``python=3.10.*``) are parsed with py-rattler's ``MatchSpec`` in its
  lenient mode (``strict=False``: what conda itself accepts); without py-rattler, a small
  parser of the same grammar (conda's ``MatchSpec`` docs: ``name[ version[ build]]`` or
  ``name=version=build``).
* **Channels**: ``defaults`` stands for conda's default channels (``pkgs/main``, ``pkgs/r``;
  conda's ``DEFAULT_CHANNELS_UNIX``); ``nodefaults`` removes them (conda-lock, conda env).
* **Metapackages** — ``pytorch-gpu``, ``pytorch-cpu``, ``tensorflow-gpu``, ``*_mutex``,
  ``_pytorch_select``, ``*-select`` — pin a variant of another package and hold no code; they
  never stand in for the package itself.
* **Build strings** name the variant: ``cuda100py37h…`` (CUDA 10.0), ``py36_cuda8.0.61_cudnn7.1.2_3``
  (CUDA 8.0, cuDNN 7.1.2), ``cuda126py312…``, ``cuda120_py311…``, ``py3.8_cpu_0``, ``cpu_…``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envlock._io import one_line
from envlock._names import is_metapackage
from envlock.variants import build_variant
from envlock.errors import ManifestError
from envlock.redact import REDACTED, redact_url
import fnmatch
from urllib.parse import urlsplit
import platform
import sys

__all__ = ["CondaSpec", "parse_spec", "parse_url", "build_variant", "is_metapackage",
           "expand_channels", "DEFAULT_CHANNELS", "satisfies", "subdir_of",
           "current_subdir"]

#: What ``defaults`` means on Linux and macOS (conda's ``DEFAULT_CHANNELS_UNIX``).
DEFAULT_CHANNELS = ("pkgs/main", "pkgs/r")

@dataclass(frozen=True, slots=True)
class CondaSpec:
    """A conda match spec, read as conda reads it.

    :ivar name: the package name, exact.
    :ivar version: the version constraint as conda normalises it (``"==0.1"``, ``"3.10.*"``,
        ``">=2.0"``), or ``""`` for any.
    :ivar build: the build string or glob (``"main"``, ``"*cuda12*"``), or ``""``.
    :ivar channel: the channel named with ``channel::``, or ``""``.
    :ivar exact: the version is one version (``==X`` or ``name=X=build``), given in ``pin``.
    """

    name: str
    version: str = ""
    build: str = ""
    channel: str = ""
    exact: bool = False
    pin: str = ""


_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_FALLBACK = re.compile(
    rf"^(?:(?P<channel>[^:\s]+)::)?(?P<name>{_NAME})\s*"
    r"(?:(?P<ver>(?:[=<>!~]=?|\*)?[^\s=]*(?:[^\s=]*)?)(?:[=\s]+(?P<build>[^\s=]+))?)?\s*$")


def _selector_free(text: str) -> str:
    return text.split("#", 1)[0].strip()


def parse_spec(text: str) -> CondaSpec:
    """Parse one conda match spec (a ``dependencies:`` line), comment and selector removed.

    :raises ManifestError: not a match spec conda would accept (the line, shortened).
    """
    line = _selector_free(text)
    if not line:
        raise ManifestError("empty match spec")
    try:
        from rattler import MatchSpec

        have_rattler = True
    except ImportError:
        have_rattler = False
    if have_rattler:
        try:
            ms = MatchSpec(line, strict=False)
        except Exception as exc:  # noqa: BLE001 - rattler's own exception classes
            raise ManifestError(f"not a conda match spec: {one_line(line)} "
                                f"({one_line(str(exc).splitlines()[0] if str(exc) else '')})") from None
        if ms.name is None:
            raise ManifestError(f"not a conda match spec: {one_line(line)} (no package name)")
        name = _matcher_name(ms.name)
        version = _as_written(str(ms.version), line, name) if ms.version is not None else ""
        build = str(ms.build) if ms.build is not None else ""
        channel = ms.channel.name if ms.channel is not None else ""
    else:
        m = _FALLBACK.match(line)
        if not m:
            raise ManifestError(f"not a conda match spec: {one_line(line)}")
        name, version, build, channel = m["name"], m["ver"] or "", m["build"] or "", m["channel"] or ""
        if version.startswith("=") and not version.startswith("=="):
            version = version[1:] if build or version.endswith("*") else version[1:] + ".*"
        if version and version[0].isdigit() and not build and "=" not in line:
            version = f"=={version}"
        if version and version[0].isdigit() and build:
            version = f"=={version}"
    pin = ""
    exact = False
    if re.fullmatch(r"==\s*[^,|*<>=!~\s]+", version):
        exact = True
        # the version as written (rattler normalises `2023.05.30` to `2023.5.30`)
        raw = re.match(rf"^(?:[^:\s]+::)?{re.escape(name)}\s*(?:==?|\s)\s*([^\s=,|*<>!~]+)", line)
        pin = raw.group(1) if raw else version[2:].strip()
    return CondaSpec(name=name, version=version, build=build, channel=channel or "",
                     exact=exact, pin=pin)


_LITERAL = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.+!]*")


def _literals(text: str) -> list[tuple[int, int]]:
    """The spans of the version literals in a version spec (``3.0`` of ``3.0.*``)."""
    out = []
    for m in _LITERAL.finditer(text):
        end = m.end()
        while end > m.start() and text[end - 1] == ".":
            end -= 1  # the ``.`` of a ``.*`` wildcard
        out.append((m.start(), end))
    return out


def _as_written(normalised: str, line: str, name: str) -> str:
    """rattler's version spec with each version as the line writes it: conda's ``MatchSpec``
    keeps the text (``=3.000`` is ``3.000.*``, ``>=2023.05.30``), rattler prints its parsed
    numbers (``3.0.*``); the two are the same versions, and the text is what the file says.
    Literals are paired in order and only taken when rattler reads them as the same version;
    else rattler's spelling is kept."""
    m = re.match(rf"^\s*(?:[^:\s]+::)?{re.escape(name)}", line, re.IGNORECASE)
    rest = line[m.end():] if m else ""
    if not rest or "[" in rest:
        return normalised
    ours, theirs = _literals(normalised), _literals(rest)
    if len(theirs) < len(ours):
        return normalised
    try:
        from rattler import Version

        pairs = [(normalised[a:b], rest[c:d]) for (a, b), (c, d) in zip(ours, theirs)]
        if not all(x == y or Version(x) == Version(y) for x, y in pairs):
            return normalised
    except Exception:  # noqa: BLE001 - not a version rattler parses: its own spelling
        return normalised
    out, last = [], 0
    for (a, b), (_x, y) in zip(ours, pairs):
        out += [normalised[last:a], y]
        last = b
    return "".join(out) + normalised[last:]


def _matcher_name(matcher: Any) -> str:
    text = str(matcher)
    m = re.search(r'"([^"]+)"', text)  # PackageNameMatcher("name", exact)
    if m:
        return m.group(1)
    for attr in ("normalized", "source"):
        if hasattr(matcher, attr):
            return str(getattr(matcher, attr))
    return text


def satisfies(spec_version: str, spec_build: str, version: str, build: str | None) -> bool | None:
    """Whether a package ``version``/``build`` satisfies a conda constraint (version spec and
    build glob), with py-rattler's ``VersionSpec`` (conda's version ordering).

    :returns: ``True``/``False``, or ``None`` when it cannot be told (py-rattler missing, or a
        version conda cannot parse).
    """
    if spec_build and build is not None and not fnmatch.fnmatchcase(build, spec_build):
        return False
    if not spec_version or spec_version == "*":
        return True
    try:
        from rattler import Version, VersionSpec
    except ImportError:
        return _fallback_satisfies(spec_version, version)
    try:
        return bool(VersionSpec(spec_version, strict=False).matches(Version(version)))
    except Exception:  # noqa: BLE001 - unparsable: cannot tell
        return None


def _fallback_satisfies(spec: str, version: str) -> bool | None:
    """conda's version-spec grammar for the common forms (``1.2.*``, ``==1.2``, ``>=1,<2``,
    ``~=2.3.1``, ``a|b``), comparing with PEP 440 ordering: used without py-rattler.
    ``None`` when a version or clause is outside what this can judge."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except (InvalidVersion, ValueError):  # ValueError: a number past int()'s digit limit
        return None

    def clause(c: str) -> bool | None:
        m = re.fullmatch(r"(==|!=|>=|<=|>|<|~=|=)?\s*([^\s,|]+)", c.strip())
        if not m:
            return None
        op, ref = m.group(1) or "", m.group(2)
        if ref.endswith(".*") or ref.endswith("*") or op == "=" :
            prefix = ref.rstrip("*").rstrip(".")
            parts, mine = prefix.split("."), str(v.public).split(".")
            ok = mine[: len(parts)] == parts
            return not ok if op == "!=" else ok
        try:
            r = Version(ref)
        except (InvalidVersion, ValueError):
            return None
        if op == "~=":
            return v >= r and str(v.public).split(".")[: len(ref.split(".")) - 1] == ref.split(".")[:-1]
        return {"": v == r, "==": v == r, "!=": v != r, ">=": v >= r, "<=": v <= r,
                ">": v > r, "<": v < r}[op]

    results = []
    for alt in spec.split("|"):
        got = [clause(c) for c in alt.split(",") if c.strip()]
        if None in got:
            return None
        results.append(all(got))
    return any(results)


def expand_channels(channels: list[str]) -> tuple[list[str], bool]:
    """conda's channel list: ``defaults`` replaced by :data:`DEFAULT_CHANNELS`, ``nodefaults``
    dropped.

    :returns: ``(channels, nodefaults)`` — the list in priority order, and whether the file said
        ``nodefaults``.
    """
    out: list[str] = []
    nodefaults = False
    for c in channels:
        if c == "nodefaults":
            nodefaults = True
        elif c == "defaults":
            out.extend(x for x in DEFAULT_CHANNELS if x not in out)
        elif c not in out:
            out.append(c)
    return out, nodefaults


def parse_url(url: str) -> dict[str, str]:
    """Split a conda package URL into name, version, build, channel and subdir.

    ``https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda``
    gives ``channel="conda-forge"``, ``subdir="linux-64"``, ``name="numpy"``,
    ``version="1.26.4"``, ``build="py311h64a7726_0"`` (conda's file name is
    ``<name>-<version>-<build>`` and neither version nor build contains ``-``).  Tokens
    (``/t/<token>/``) and passwords are removed; a ``#<md5>`` suffix is dropped.
    ``repo.anaconda.com/pkgs/main`` is the channel ``pkgs/main``.

    :raises ManifestError: the URL's file is not a conda package name.
    """
    url = redact_url(url.split("#", 1)[0].strip())
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ManifestError(f"not a conda package URL: {one_line(url)}") from None
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise ManifestError(f"not a conda package URL: {one_line(url)}")
    fname = segments[-1]
    for ext in (".conda", ".tar.bz2"):
        if fname.endswith(ext):
            fname = fname[: -len(ext)]
            break
    else:
        raise ManifestError(f"not a conda package URL: {one_line(url)}")
    bits = fname.rsplit("-", 2)
    if len(bits) != 3 or not all(bits):
        raise ManifestError(f"not a conda package file name: {one_line(segments[-1])}")
    channel_parts = [s for s in segments[:-2] if s not in ("t", REDACTED)]
    host = parts.netloc
    if host in ("conda.anaconda.org", "repo.anaconda.com", "") or not channel_parts:
        channel = "/".join(channel_parts) or host
    else:
        channel = f"{parts.scheme}://{host}/" + "/".join(channel_parts)
    return {"name": bits[0], "version": bits[1], "build": bits[2], "channel": channel,
            "subdir": segments[-2], "url": url}


#: machines conda names by themselves in a subdir (``linux-aarch64``, ``osx-arm64``); any other
#: (x86) machine is named by the interpreter's pointer size (``linux-64``, ``win-32``).
#: conda's ``conda/base/context.py``: ``non_x86_machines``.
_NON_X86_MACHINES = frozenset({"armv6l", "armv7l", "aarch64", "arm64", "ppc64", "ppc64le",
                               "riscv64", "s390x"})
#: ``sys.platform`` (or ``platform.system()``, lower-cased) → conda's platform name
#: (conda's ``_platform_map``).
_CONDA_OS = {"linux": "linux", "linux2": "linux", "darwin": "osx", "win32": "win",
             "windows": "win", "zos": "zos", "os390": "zos"}
_X86_BITS = {"x86_64": 64, "amd64": 64, "i386": 32, "i486": 32, "i586": 32, "i686": 32, "x86": 32}


def subdir_of(system: str | None, machine: str | None, bits: int | None = None) -> str | None:
    """conda's subdir for an OS and machine, the rule of conda's ``context.subdir`` (its
    ``_native_subdir``, conda/base/context.py): a non-x86 machine names itself
    (``Linux``/``aarch64`` → ``linux-aarch64``, ``Darwin``/``arm64`` → ``osx-arm64``,
    ``ppc64le`` → ``linux-ppc64le``); an x86 one is ``<os>-<bits>`` (``linux-64``, ``win-32``);
    z/OS is ``zos-z``.

    :param system: ``sys.platform`` or ``platform.system()`` (``linux``, ``Darwin``, ``Windows``…).
    :param machine: ``platform.machine()`` (``x86_64``, ``aarch64``, ``arm64``, ``AMD64``…).
    :param bits: the interpreter's pointer size in bits (conda's ``context.bits``), which names
        every machine not in conda's non-x86 list; by default the machine's own (``x86_64`` →
        64, ``i686`` → 32; ``None`` for another machine).
    :returns: the subdir, or ``None`` for an unknown OS, or an unknown machine without ``bits``.
    """
    if not system or not machine:
        return None
    osname = _CONDA_OS.get(system.lower())
    if osname is None:
        return None
    if osname == "zos":
        return "zos-z"
    m = machine.lower()
    if m in _NON_X86_MACHINES:
        return f"{osname}-{m}"
    width = bits if bits is not None else _X86_BITS.get(m)
    return f"{osname}-{width}" if width else None


def current_subdir() -> str:
    """This machine's conda platform (subdir): ``linux-64``, ``linux-aarch64``,
    ``linux-ppc64le``, ``osx-arm64``, ``win-64``…, as conda's ``context.subdir`` names it
    without a ``CONDA_SUBDIR``/``subdir`` setting (:func:`subdir_of` of ``sys.platform``,
    ``platform.machine()`` and the interpreter's pointer size).  envlock's one answer to "this
    machine's conda platform" (``lock``'s default platform, ``verify``'s lock-target check,
    ``restore``).

    :returns: the subdir (``unknown-<bits>`` on an OS conda does not know, as conda).
    """
    import struct

    bits = 8 * struct.calcsize("P")
    found = subdir_of(sys.platform, platform.machine(), bits)
    if found:
        return found
    return f"unknown-{bits}"


# -- files ------------------------------------------------------------------------------------

def package_entry(name: str, version: str, build: str | None = None, channel: str | None = None,
                  subdir: str | None = None, url: str | None = None) -> dict[str, Any]:
    """A ``[conda]`` package entry of a partial manifest (exact name; metapackages marked)."""
    entry: dict[str, Any] = {"name": name, "version": version}
    if build:
        entry["build"] = build
    if channel:
        entry["channel"] = channel
    if subdir:
        entry["subdir"] = subdir
    if url:
        entry["url"] = url
    if is_metapackage(name):
        entry["metapackage"] = True
    return entry


def header_platform(text: str) -> str | None:
    """The ``# platform: linux-64`` header line conda writes in explicit lists and exports."""
    m = re.search(r"^#\s*platform:\s*(\S+)\s*$", text[:4096], re.MULTILINE)
    return m.group(1) if m else None


def explicit(lines: list[str]) -> list[dict[str, Any]]:
    """The packages of a ``conda list --explicit`` body (the lines after ``@EXPLICIT``).

    :raises ManifestError: a line is not a conda package URL.
    """
    out = []
    for ln in lines:
        if ln.startswith("@"):
            continue
        p = parse_url(ln)
        entry = package_entry(p["name"], p["version"], p["build"], p["channel"], p["subdir"])
        md5 = _EXPLICIT_MD5.search(ln.strip())
        if md5:  # conda's explicit(): ``url_pat``'s ``#<md5>``, checked when it installs
            entry["md5"] = md5.group(1)
        out.append(entry)
    return out


#: the ``#<md5>`` an explicit line may end with (conda's ``misc.url_pat``)
_EXPLICIT_MD5 = re.compile(r"#([0-9a-f]{32})$")


_EXPORT_LINE = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.\-]*)=([^=\s]+)=([^=\s]+)$")


def is_export_line(line: str) -> bool:
    """Whether ``line`` is a ``conda list --export`` line ``name=version=build``."""
    return bool(_EXPORT_LINE.match(line))


def export_list(lines: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The packages of ``conda list --export`` output (``name=version=build`` lines).

    A build ``pypi_0`` is a package pip installed (conda lists it, conda did not install it);
    ``dev_0`` is a development install (``pip install -e``/``setup.py develop``): the project,
    not a package.

    :returns: ``(conda, pip)`` entries.
    """
    conda, pip = [], []
    for ln in lines:
        m = _EXPORT_LINE.match(ln)
        if not m:
            raise ManifestError(f"not a conda list --export line: {one_line(ln)}")
        name, version, build = m.groups()
        if build == "dev_0":
            continue
        if build.startswith("pypi_"):
            pip.append({"name": name, "version": version})
        else:
            conda.append(package_entry(name, version, build))
    return conda, pip
