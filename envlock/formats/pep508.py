"""``pip freeze`` output and ``requirements.txt`` files, read line by line with :mod:`packaging`.

pip's requirements-file format (pip docs, "Requirements File Format"): one requirement per
line, ``\\`` continues a line, ``#`` starts a comment at the line start or after whitespace,
options (``-r``, ``-c``, ``-i``/``--index-url``, ``--extra-index-url``, ``-f``, ``--hash=…``, …)
are not packages.  Each requirement is a PEP 508 string parsed by
:class:`packaging.requirements.Requirement`:

* ``name==version`` is a pin; any other specifier is a *constraint* (compared as "satisfied"
  or "violated", never as a version);
* environment markers are kept: a project listed once per marker set (``uv export`` writes
  ``numpy==2.2.6 ; python_full_version < '3.11'`` and ``numpy==2.4.2 ; …>= '3.11'``) gives one
  entry per marker set;
* a direct reference (``name @ URL``, PEP 440 "direct references") has the version of its wheel
  file name (``numpy-1.26.4-cp312-…whl``, PEP 427) or sdist name, else ``"unknown"``;
  ``git+…@<commit>`` keeps the commit;
* ``-e <path>``, ``-e .``, a bare local path: the project itself (not a package); ``-e
  git+…#egg=name`` and a bare ``git+…#egg=name`` line: the package ``name`` from that
  checkout.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from envlock._io import one_line
from envlock._names import canonicalize
from envlock.errors import ManifestError

__all__ = ["SIMPLE_PIN", "UNKNOWN", "iter_lines", "iter_logical_lines", "logical_lines", "parse_line",
           "read_requirements", "version_from_url", "wheel_subdir"]

#: The version of a direct reference whose URL does not name one (conda-build ``…/work`` paths).
UNKNOWN = "unknown"

_OPTION = re.compile(r"^(-[a-zA-Z]|--[a-z][a-z0-9-]*)(?:[ =]\s*(.*))?$")
_WHEEL = re.compile(r"^(?P<name>[^-/]+)-(?P<version>[^-/]+)(?:-[^-/]+)?-[^-/]+-[^-/]+-[^-/]+\.whl$")
_SDIST = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-/]*?)\.(?:tar\.gz|tar\.bz2|zip|tgz)$")


_COMMENT = re.compile(r"(^|\s)#.*$")


def iter_logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each logical line: continuations joined, comments removed;
    one line at a time (a 3-million-line freeze is never held as a list of lines)."""
    buf, start = "", 0
    for i, raw in enumerate(iter_lines(text), 1):
        line = _COMMENT.sub("", raw) if "#" in raw else raw
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        stripped = buf.strip()
        if stripped:
            yield start, stripped
        buf = ""
    if buf.strip():
        yield start, buf.strip()


def iter_lines(text: str) -> Iterator[str]:
    """``text.splitlines()`` one line at a time: the same lines (every line boundary
    :meth:`str.splitlines` knows), without a list of them all."""
    if text.isascii() and "\r" not in text and not any(c in text for c in "\v\f\x1c\x1d\x1e"):
        pos, n = 0, len(text)
        while pos < n:
            end = text.find("\n", pos)
            if end < 0:
                yield text[pos:]
                return
            yield text[pos:end]
            pos = end + 1
        return
    yield from text.splitlines()


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of each logical line: continuations joined, comments removed
    (the list of :func:`iter_logical_lines`)."""
    return list(iter_logical_lines(text))


def version_from_url(url: str) -> str:
    """The version a direct-reference URL names: its wheel (PEP 427) or sdist file name, else
    :data:`UNKNOWN`."""
    path = url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    fname = path.rsplit("/", 1)[-1]
    from urllib.parse import unquote  # noqa: PLC0415

    fname = unquote(fname)
    m = _WHEEL.match(fname) or _SDIST.match(fname)
    return m.group("version") if m else UNKNOWN


def wheel_subdir(url: str) -> str | None:
    """The conda subdir a wheel's platform tag (PEP 425/600) builds for: ``linux_x86_64``,
    ``manylinux_2_17_x86_64`` → ``linux-64``; ``macosx_11_0_arm64`` → ``osx-arm64``;
    ``win_amd64`` → ``win-64``; ``None`` for a pure wheel (``any``) or not a wheel."""
    from urllib.parse import unquote  # noqa: PLC0415

    fname = unquote(url.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])
    if not fname.endswith(".whl"):
        return None
    plat = fname[:-4].split("-")[-1]
    found = set()
    for tag in plat.split("."):
        osname = ("linux" if tag.startswith(("linux", "manylinux", "musllinux")) else
                  "osx" if tag.startswith("macosx") else "win" if tag.startswith("win") else None)
        arch = next((a for k, a in (("x86_64", "64"), ("amd64", "64"), ("aarch64", "aarch64"),
                                    ("arm64", "arm64"), ("ppc64le", "ppc64le"), ("s390x", "s390x"))
                     if tag.endswith(k)), None)
        if osname and arch:
            found.add(f"{osname}-{'aarch64' if osname == 'linux' and arch == 'arm64' else arch}")
    return found.pop() if len(found) == 1 else None


def _vcs_commit(url: str) -> str | None:
    m = re.search(r"@([0-9a-f]{7,40})(?:[#&]|$)", url)
    return m.group(1) if m else None


def _egg(url: str) -> str | None:
    m = re.search(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9_.\-]*)", url)
    return m.group(1) if m else None


def _is_local(target: str) -> bool:
    return target.startswith((".", "/", "~", "file:")) or re.match(r"^[A-Za-z]:[\\/]", target) \
        is not None or "/" in target and "://" not in target and "@" not in target


def _url_entry(name: str | None, url: str, editable: bool) -> dict[str, Any] | None:
    vcs = url.split("+", 1)[0] if re.match(r"^(git|hg|svn|bzr)\+", url) else None
    if name is None:
        return None  # a project path without a name: the project itself
    entry: dict[str, Any] = {"name": canonicalize(name), "url": url}
    commit = _vcs_commit(url) if vcs else None
    if vcs:
        entry["vcs"] = vcs
        if commit:
            entry["commit"] = commit
        entry["version"] = f"{vcs} {commit}" if commit and len(commit) == 40 else UNKNOWN
    else:
        entry["version"] = version_from_url(url)
        sub = wheel_subdir(url)
        if sub:
            entry["wheel-subdir"] = sub
    if editable:
        entry["origin"] = "editable"
    return entry


#: ``name==version`` with a PEP 508 name (``[A-Za-z0-9]`` at both ends, ``._-`` inside) and a
#: public or local PEP 440 version in canonical spelling: :func:`parse_line` gives for it what
#: :class:`packaging.requirements.Requirement` gives (``tests/formats`` compares the two), much
#: faster — a ``pip freeze`` is almost only such lines.
SIMPLE_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)[ \t]*==[ \t]*"
    r"(?P<version>[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
    r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?)", re.ASCII)

#: longest logical requirements line read (a URL with a long fragment and a dozen
#: ``--hash`` options stays well under it).
MAX_LINE = 64 * 1024


def parse_line(line: str) -> dict[str, Any] | None:
    """Read one logical requirements line.

    :returns: a ``[pip]`` package entry (``name``, ``version``; ``marker``, ``constraint``,
        ``url``, ``vcs``, ``commit``, ``origin`` where they apply), or ``None`` for an option or
        the project itself (``-e .``).
    :raises ManifestError: the line is not a requirement (PEP 508) nor an option, or is longer
        than :data:`MAX_LINE` characters (no requirement is; a hash-pinned one is ~200).
    """
    if len(line) > MAX_LINE:
        raise ManifestError(f"a line of {len(line):,} characters is not a requirement "
                            f"(at most {MAX_LINE:,}): {one_line(line, 60)}")
    pin = SIMPLE_PIN.fullmatch(line)
    if pin:  # what packaging makes of it, without building a Requirement (pip freeze lines)
        return {"name": canonicalize(pin.group("name")), "version": pin.group("version")}
    opt = _OPTION.match(line)
    if opt:
        flag, value = opt.group(1), (opt.group(2) or "").strip()
        if flag in ("-e", "--editable"):
            if not value:
                raise ManifestError(f"{flag} without a path or URL: {one_line(line)}")
            target = value.split()[0]
            if _is_local(target) and not _egg(target):
                return None  # the project (or a local checkout) itself, not a package
            return _url_entry(_egg(target), target, editable=True)
        return None  # -r, -c, -i, --hash, --index-url, …: options, not packages
    first = line.split()[0]
    if "://" in first and "@" not in line.split("://", 1)[0] or re.match(r"^(git|hg|svn|bzr)\+", first):
        return _url_entry(_egg(first), first, editable=False)  # a bare URL line
    if _is_local(first) and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(@|[<>=!~;\[]|$)", line):
        return None  # a local project path
    req_text = re.split(r"\s+--?[a-z]", " " + line)[0].strip() if " -" in line else line
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    try:
        req = Requirement(req_text)
    except InvalidRequirement as exc:
        raise ManifestError(f"not a requirement: {one_line(line)} "
                            f"({one_line(str(exc).splitlines()[0] if str(exc) else '')})") from None
    entry: dict[str, Any] = {"name": canonicalize(req.name)}
    if req.marker is not None:
        entry["marker"] = str(req.marker)
    if req.url:
        e = _url_entry(req.name, req.url, editable=False)
        assert e is not None
        return {**e, **entry}
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        entry["version"] = specs[0].version
    else:
        text = str(req.specifier)
        entry["version"] = text
        entry["constraint"] = {"kind": "pep440", "version": text}
    return entry


def read_requirements(text: str, name: str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Every package entry of a requirements file (see :func:`parse_line`).

    :param limit: the most entries read; one more is refused while reading, before the rest of
        the file costs memory (``envlock.formats.MAX_PACKAGES``).
    :raises ManifestError: ``name: line N: …`` for the first line that is not a requirement, or
        for the entry past ``limit``.
    """
    out: list[dict[str, Any]] = []
    for no, line in iter_logical_lines(text):
        try:
            entry = parse_line(line)
        except ManifestError as exc:
            raise ManifestError(f"{name}: line {no}: {exc}") from None
        if entry is not None:
            if limit is not None and len(out) >= limit:
                raise ManifestError(f"{name}: line {no}: more than {limit} requirements; envlock "
                                    f"reads at most {limit} packages from one file")
            out.append(entry)
    return out


def looks_like_requirements(text: str) -> bool:
    """Whether every logical line of ``text`` reads as a requirement or option (format sniffing)."""
    import itertools  # noqa: PLC0415

    seen = False
    try:
        for _, line in itertools.islice(iter_logical_lines(text), 2000):
            parse_line(line)
            seen = True
    except ManifestError:
        return False
    return seen
