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
* ``-e <path>``, ``-e .``, a bare local path (``./localpkg``, ``dist/foo-1.2-py3-none-any.whl``,
  ``./foo-1.2.tar.gz``): a local project, named as :mod:`envlock.formats.localreq` says — a
  wheel by its file name (as pip), an sdist by its file name, a directory by its own
  ``pyproject.toml``/``setup.cfg`` metadata, relative to the requirements file — or listed
  *unnamed* under its path; never dropped.  ``-e git+…#egg=name`` and a bare
  ``git+…#egg=name`` line: the package ``name`` from that checkout;
* a VCS or archive URL without a name (no ``#egg=``, no ``name @``): pip learns its name only
  by building it, so envlock names it from the URL — the repository's last path part
  (``git+https://host/org/pydantic.git@v2`` → ``pydantic``), a wheel's or sdist's file name —
  and records ``named-by = "url"``; a URL whose last path part names nothing is recorded as
  *unnamed* (its name is the URL itself, ``unnamed = true``).  No such line is dropped: two
  files that differ only there differ;
* ``-r FILE`` / ``-c FILE`` (and ``--requirement``/``--constraint``) are followed as pip
  follows them (``pip/_internal/req/req_file.py``): a relative name is relative to the
  directory of the file that names it.  Requirements of a ``-r`` file are the including
  file's; a ``-c`` file's lines are constraints, not requirements (pip installs a constrained
  project only when something requires it), so they are read — they must be valid, and count
  towards the bound — but are not packages.  Includes nest at most :data:`MAX_INCLUDE_DEPTH`
  deep, read at most :data:`MAX_INCLUDE_BYTES` in all, and a file that includes itself (a
  cycle) is one error.  A URL include (``-r https://…``) is refused: envlock fetches nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from envlock._io import InputError, one_line, read_text
from envlock._names import canonicalize
from envlock.errors import ManifestError
from envlock.formats.localreq import is_archive, local_entry
from urllib.parse import unquote
import itertools

__all__ = ["MAX_INCLUDE_BYTES", "MAX_INCLUDE_DEPTH", "SIMPLE_PIN", "UNKNOWN", "include_of",
           "iter_lines", "iter_logical_lines", "logical_lines", "name_from_url", "parse_line",
           "read_requirements", "version_from_url", "wheel_subdir"]

#: The version of a direct reference whose URL does not name one (conda-build ``…/work`` paths).
UNKNOWN = "unknown"

#: a pip option line: ``-x value``, ``-x=value``, ``-xvalue`` (optparse's short options),
#: ``--long value``, ``--long=value``.
_OPTION = re.compile(r"^(-[a-zA-Z]|--[a-z][a-z0-9-]*)(?:(?:[ =]\s*|(?<=^-[a-zA-Z]))(.*))?$")

#: the options that include another requirements file: ``-r``/``--requirement`` (its
#: requirements) and ``-c``/``--constraint`` (constraints).
_INCLUDES = {"-r": False, "--requirement": False, "-c": True, "--constraint": True}

#: how deep ``-r``/``-c`` includes nest (pip sets no bound; real files nest one or two deep).
MAX_INCLUDE_DEPTH = 16

#: the most bytes one reading follows through includes, all files together (as one file's
#: bound, :data:`envlock._io.MAX_INPUT_BYTES`).
MAX_INCLUDE_BYTES = 64 * 1024 * 1024
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

    fname = unquote(fname)
    m = _WHEEL.match(fname) or _SDIST.match(fname)
    return m.group("version") if m else UNKNOWN


def wheel_subdir(url: str) -> str | None:
    """The conda subdir a wheel's platform tag (PEP 425/600) builds for: ``linux_x86_64``,
    ``manylinux_2_17_x86_64`` → ``linux-64``; ``macosx_11_0_arm64`` → ``osx-arm64``;
    ``win_amd64`` → ``win-64``; ``None`` for a pure wheel (``any``) or not a wheel."""
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


def _is_local_line(first: str, line: str) -> bool:
    """Whether a (non-option) line is a local project, as pip's ``parse_req_from_line`` tells:
    a path to an archive (``foo-1.2-py3-none-any.whl`` even without a ``/``; not ``name @
    …``), or a path (``./pkg``, ``/abs``, ``sub/pkg``) that is no ``name …`` requirement."""
    if "://" in first or "@" in line.split(";", 1)[0]:
        return False
    if is_archive(first):
        return True
    return _is_local(first) and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(@|[<>=!~;\[]|$)",
                                             line)


def _local_line(line: str, base: str | None) -> dict[str, Any]:
    """A bare local-path line (``./pkg[extra] ; marker --option``): its entry
    (:func:`envlock.formats.localreq.local_entry`); pip splits the marker off at ``;``."""
    text = re.split(r"\s+--?[a-z]", " " + line)[0].strip() if " -" in line else line
    target, _, marker_text = text.partition(";")
    marker = None
    if marker_text.strip():
        from packaging.markers import InvalidMarker, Marker

        try:
            marker = str(Marker(marker_text.strip()))
        except InvalidMarker as exc:
            raise ManifestError(f"not a requirement: {one_line(line)} "
                                f"({one_line(str(exc).splitlines()[0] if str(exc) else '')})"
                                ) from None
    return _local(target.strip(), base, editable=False, marker=marker)


def _local(target: str, base: str | None, *, editable: bool,
           marker: str | None = None) -> dict[str, Any]:
    """:func:`envlock.formats.localreq.local_entry`, with the conda subdir of a platform wheel
    (:func:`wheel_subdir`) as a URL's entry has it."""
    entry = local_entry(target, base, editable=editable, marker=marker)
    sub = wheel_subdir(target)
    if sub:
        entry["wheel-subdir"] = sub
    return entry


def name_from_url(url: str) -> str | None:
    """The project name a VCS or archive URL without ``#egg=`` suggests, or ``None``.

    A VCS URL (``git+https://host/org/repo.git@ref``): the repository, its last path part
    without ``@ref`` and ``.git`` — pip's own name for such a checkout comes from building it,
    and a repository is almost always named after its project.  An archive URL: the name of
    its wheel (PEP 427) or sdist file name.  Anything else (``…/archive/main.zip``, a bare host)
    names nothing: ``None``.
    """
    path = url.split("#", 1)[0].split("?", 1)[0]
    vcs = re.match(r"^(git|hg|svn|bzr)\+", path) is not None
    if "://" in path:
        path = path.split("://", 1)[1]
        path = path.split("/", 1)[1] if "/" in path else ""
    elif vcs and ":" in path:  # git+git@host:org/repo.git (scp-like)
        path = path.split(":", 1)[-1]
    last = unquote(path.rstrip("/").rsplit("/", 1)[-1]) if path.strip("/") else ""
    if vcs:
        last = last.split("@", 1)[0]
        last = last[:-4] if last.endswith(".git") else last
        return last if re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", last) else None
    m = _WHEEL.match(last) or _SDIST.match(last)
    if m and re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", m.group("name")):
        return m.group("name")
    return None


def _url_entry(name: str | None, url: str, editable: bool) -> dict[str, Any]:
    vcs = url.split("+", 1)[0] if re.match(r"^(git|hg|svn|bzr)\+", url) else None
    named_by = None
    if name is None:
        name = name_from_url(url)
        named_by = "url"
    if name is None:
        entry: dict[str, Any] = {"name": url, "url": url, "unnamed": True}
    else:
        entry = {"name": canonicalize(name), "url": url}
        if named_by:
            entry["named-by"] = named_by
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


def parse_line(line: str, base: str | None = None) -> dict[str, Any] | None:
    """Read one logical requirements line.

    :param base: the directory a local path on the line is relative to (the requirements
        file's: :mod:`envlock.formats.localreq`); ``None``: a local directory is unnamed.
    :returns: a ``[pip]`` package entry (``name``, ``version``; ``marker``, ``constraint``,
        ``url``, ``vcs``, ``commit``, ``origin``, ``local`` where they apply), or ``None`` for
        an option.
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
            if (_is_local(target) or base is not None and "://" not in target
                    and os.path.isdir(os.path.join(base, target))) and not _egg(target):
                return _local(target, base, editable=True)  # a local project or checkout
            return _url_entry(_egg(target), target, editable=True)
        return None  # -r, -c (see read_requirements), -i, --hash, --index-url, …: options, not packages
    first = line.split()[0]
    if first.startswith("file:") and not _egg(first):
        return _local_line(line, base)  # a bare file: URL names a local file or directory
    if "://" in first and "@" not in line.split("://", 1)[0] or re.match(r"^(git|hg|svn|bzr)\+", first):
        return _url_entry(_egg(first), first, editable=False)  # a bare URL line
    if _is_local_line(first, line):
        return _local_line(line, base)  # a local project: a directory, a wheel, an sdist
    req_text = re.split(r"\s+--?[a-z]", " " + line)[0].strip() if " -" in line else line
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(req_text)
    except InvalidRequirement as exc:
        raise ManifestError(f"not a requirement: {one_line(line)} "
                            f"({one_line(str(exc).splitlines()[0] if str(exc) else '')})") from None
    entry: dict[str, Any] = {"name": canonicalize(req.name)}
    if req.marker is not None:
        entry["marker"] = str(req.marker)
    if req.url:
        return {**_url_entry(req.name, req.url, editable=False), **entry}
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        entry["version"] = specs[0].version
    else:
        text = str(req.specifier)
        entry["version"] = text
        entry["constraint"] = {"kind": "pep440", "version": text}
    return entry


def include_of(line: str) -> tuple[str, bool] | None:
    """``(file, is_constraint)`` when ``line`` is ``-r FILE``/``-c FILE`` (or the long
    spellings), else ``None``."""
    opt = _OPTION.match(line)
    if not opt or opt.group(1) not in _INCLUDES:
        return None
    return (opt.group(2) or "").strip(), _INCLUDES[opt.group(1)]


@dataclass
class _Includes:
    """What one reading has followed so far: the chain of files (for cycles), bytes read."""

    chain: list[str] = field(default_factory=list)
    total: int = 0
    follow: bool = True


def read_requirements(text: str, name: str, *, limit: int | None = None,
                      path: str | os.PathLike[str] | None = None,
                      includes: bool = True) -> list[dict[str, Any]]:
    """Every package entry of a requirements file (see :func:`parse_line`), its ``-r``
    includes' too.

    :param limit: the most entries read, includes and constraint files together; one more is
        refused while reading, before the rest costs memory (``envlock.formats.MAX_PACKAGES``).
    :param path: the file ``text`` was read from: ``-r``/``-c`` names are relative to its
        directory (pip's rule).  Without it (text from elsewhere: an ``environment.yml``'s
        ``pip:`` list), or with ``includes=False``, include lines are options and are skipped.
    :param includes: follow ``-r``/``-c`` (``diff``, ``show``, ``verify``).  ``restore`` and
        ``lock`` read a lockfile from someone else without following them: their own check
        (:mod:`envlock.lock._sources`, docs/trust.md) refuses the option.
    :raises ManifestError: ``name: line N: …`` for the first line that is not a requirement,
        for the entry past ``limit``, for an include that is missing, unreadable, a URL, a
        cycle, too deep or past :data:`MAX_INCLUDE_BYTES`.
    """
    out: list[dict[str, Any]] = []
    state = _Includes(follow=path is not None and includes)
    base = None
    if path is not None:
        real = os.path.realpath(os.fspath(path))
        state.chain.append(real)
        state.total = len(text.encode("utf-8", "surrogatepass"))
        base = os.path.dirname(real)
    _read_into(out, text, name, base, limit, state, constraint=False)
    if "# Editable " in text:
        _freeze_names(text, out)
    return [e for e in out if not e.get("_constraint")]


#: ``pip freeze``'s comment above an editable install it has no VCS URL for
#: (``pip/_internal/operations/freeze.py``, ``_get_editable_info``): ``# Editable install with
#: no version control (name==version)`` / ``# Editable Git install with no remote (…)``, then
#: ``-e <location>``.
_FREEZE_EDITABLE = re.compile(
    r"^# Editable (?:[A-Za-z]+ )?install (?:with no (?:version control|remote) )?"
    r"\((?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)===?(?P<version>[^)\s]+)\)[^\n]*\n"
    r"(?:#[^\n]*\n)?-e (?P<loc>[^\n]*?)[ \t]*$", re.MULTILINE)


def _freeze_names(text: str, out: list[dict[str, Any]]) -> None:
    """Name an unnamed ``-e <location>`` of a ``pip freeze`` by the comment pip wrote above it
    from the installed distribution (``named-by = "pip-freeze"``)."""
    named = {m.group("loc"): (m.group("name"), m.group("version"))
             for m in _FREEZE_EDITABLE.finditer(text)}
    for e in out:
        got = named.get(e.get("url", "")) if e.get("unnamed") and e.get("local") else None
        if got:
            del e["unnamed"]
            e.update(name=canonicalize(got[0]), version=got[1], **{"named-by": "pip-freeze"})


def _read_into(out: list[dict[str, Any]], text: str, name: str, base: str | None,
               limit: int | None, state: _Includes, *, constraint: bool) -> None:
    for no, line in iter_logical_lines(text):
        inc = include_of(line) if state.follow and base is not None else None
        if inc is not None:
            _follow(out, inc, f"{name}: line {no}", base or ".", limit, state,
                    constraint=constraint or inc[1])
            continue
        try:
            entry = parse_line(line, base)
        except ManifestError as exc:
            raise ManifestError(f"{name}: line {no}: {exc}") from None
        if entry is not None:
            if limit is not None and len(out) >= limit:
                raise ManifestError(f"{name}: line {no}: more than {limit} requirements; envlock "
                                    f"reads at most {limit} packages from one file")
            if constraint:
                entry["_constraint"] = True
            out.append(entry)


def _follow(out: list[dict[str, Any]], inc: tuple[str, bool], where: str, base: str,
            limit: int | None, state: _Includes, *, constraint: bool) -> None:
    target, _ = inc
    flag = "-c" if inc[1] else "-r"
    if not target:
        raise ManifestError(f"{where}: {flag} names no file")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", target):
        raise ManifestError(f"{where}: {flag} {one_line(target, 80)}: a URL include; envlock "
                            "reads local files only and fetches nothing")
    full = os.path.realpath(os.path.join(base, os.path.expanduser(target.removeprefix("file:"))))
    if full in state.chain:
        cycle = " -> ".join(os.path.basename(p) for p in [*state.chain[state.chain.index(full):],
                                                           full])
        raise ManifestError(f"{where}: {flag} {one_line(target, 80)} includes itself "
                            f"(a cycle: {cycle})")
    if len(state.chain) > MAX_INCLUDE_DEPTH:
        raise ManifestError(f"{where}: {flag} {one_line(target, 80)}: includes nest more than "
                            f"{MAX_INCLUDE_DEPTH} deep")
    try:
        text = read_text(full, limit=max(1, MAX_INCLUDE_BYTES - state.total))
    except InputError as exc:
        raise ManifestError(f"{where}: {flag} {exc}") from None
    state.total += len(text.encode("utf-8", "surrogatepass"))
    if state.total > MAX_INCLUDE_BYTES:
        raise ManifestError(f"{where}: {flag} {one_line(target, 80)}: the includes read more "
                            f"than {MAX_INCLUDE_BYTES // 2**20} MiB in all")
    state.chain.append(full)
    try:
        _read_into(out, text, one_line(full), os.path.dirname(full), limit, state,
                   constraint=constraint)
    finally:
        state.chain.pop()


def looks_like_requirements(text: str) -> bool:
    """Whether every logical line of ``text`` reads as a requirement or option (format sniffing)."""
    seen = False
    try:
        for _, line in itertools.islice(iter_logical_lines(text), 2000):
            parse_line(line)
            seen = True
    except ManifestError:
        return False
    return seen
