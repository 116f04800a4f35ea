"""Values read from files envlock does not control are data, never options or paths outside.

A manifest or lockfile may come from someone else (docs/trust.md).  Before a value from one
reaches a command line or a path, it is checked to be exactly what it must be — a project name
(PEP 508), a pinned requirement, a hex commit, a URL of an allowed scheme, the wheel, sdist
or conda package file a location names, a conda ``name=version=build`` — and a path built
from it must stay inside its root.  A value that is not is a :class:`UntrustedValueError`:
one line naming the field and the value, raised before anything runs.  Commands still put
``--`` before such values where the tool allows it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from envlock.errors import ManifestError

__all__ = ["UntrustedValueError", "check_name", "check_requirement", "check_commit",
           "check_url", "check_git_source", "check_python_version", "check_conda_spec",
           "check_file_name", "check_match_spec", "check_channel", "contained", "INDEX_SCHEMES",
           "GIT_SCHEMES", "check_dist_file", "check_conda_file", "ARCHIVE_SUFFIX", "is_archive",
           "check_version", "check_digest", "check_hash", "check_location"]

#: URL schemes a pip index, ``--find-links`` page or archive may have (pip's "Repository API"
#: and its ``file:`` support).
INDEX_SCHEMES = frozenset({"https", "http", "file"})

#: git's own transports (git-clone(1) "GIT URLS"), without ``ext::``/``fd::`` (which run
#: commands) and without anything git hands to a remote helper.
GIT_SCHEMES = frozenset({"https", "http", "ssh", "git", "file"})


class UntrustedValueError(ManifestError):
    """A value read from a file is not what its field must be; nothing was run."""


def _shown(value: object) -> str:
    from envlock._io import one_line

    return repr(one_line(str(value), 120))


def _fail(field: str, value: object, what: str) -> UntrustedValueError:
    return UntrustedValueError(f"{field}: {_shown(value)} is not {what}; nothing was run")


def check_name(value: object, field: str) -> str:
    """A distribution name, as PEP 508 ("Names") allows it: letters, digits, ``-_.``, starting
    and ending with a letter or digit (``packaging.utils.canonicalize_name(validate=True)``).

    :param field: how the error names where the value came from (``"[pip] package name"``).
    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (``--index-url=…``, ``../../x``, an empty name).
    """
    from packaging.utils import InvalidName, canonicalize_name

    if not isinstance(value, str):
        raise _fail(field, value, "a project name")
    try:
        canonicalize_name(value, validate=True)
    except InvalidName:
        raise _fail(field, value, "a project name (PEP 508)") from None
    return value


def check_requirement(value: object, field: str) -> str:
    """A requirement line for uv: valid PEP 508 (``packaging.requirements.Requirement``), whose
    name passes :func:`check_name` and whose URL, if any (``name @ url``), passes
    :func:`check_url` (a VCS URL ``git+https://…`` by its transport).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: not such a line.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(value, str) or value.lstrip().startswith("-"):
        raise _fail(field, value, "a requirement")
    try:
        req = Requirement(value)
    except InvalidRequirement:
        raise _fail(field, value, "a requirement (PEP 508)") from None
    check_name(req.name, field)
    if req.url:
        vcs, plus, rest = req.url.partition("+")
        if plus and vcs in ("git", "hg", "svn", "bzr"):
            check_url(rest.rsplit("@", 1)[0] if vcs == "git" else rest, field, GIT_SCHEMES)
        else:
            check_url(req.url, field, INDEX_SCHEMES)
    return value


def check_version(value: object, field: str) -> str:
    """A version as PEP 440 ("Version scheme") allows it (``packaging.version.Version``, as
    uv, pdm, poetry and ``packaging.pylock`` parse a locked version).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (``not.a.version!``, ``1.0 ; rm``).
    """
    from packaging.version import InvalidVersion, Version

    if not isinstance(value, str) or not _plain(value):
        raise _fail(field, value, "a version (PEP 440)")
    try:
        Version(value)
    except InvalidVersion:
        raise _fail(field, value, "a version (PEP 440)") from None
    return value


#: hex digits of each digest a lock gives (hashlib's ``digest_size`` * 2): pip's ``--hash``
#: takes sha256/sha384/sha512, conda md5/sha256, PEP 751 any hashlib algorithm.
_DIGEST_HEX = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128,
               "blake2b": 128, "blake2s": 64, "sha3_224": 56, "sha3_256": 64, "sha3_384": 96,
               "sha3_512": 128}


def check_digest(algorithm: object, digest: object, field: str) -> str:
    """A digest as ``hashlib``'s ``hexdigest()`` writes it: hex, of its algorithm's length
    (:data:`_DIGEST_HEX`: md5 32, sha256 64, sha384 96, sha512 128); an algorithm envlock does
    not know the length of only hex.  What pip (``--hash``), uv, conda and PEP 751
    ("``hashes``") compare a download with.

    :returns: ``digest`` unchanged.
    :raises UntrustedValueError: not hex, or of another length (``sha256:zzz``).
    """
    algo = str(algorithm).lower()
    if not isinstance(algorithm, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", algorithm):
        raise _fail(field, algorithm, "a hash algorithm")
    want = _DIGEST_HEX.get(algo.replace("-", "_"))
    if (not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]+", digest)
            or (want is not None and len(digest) != want)):
        what = f"{want} hex digits" if want else "hex digits"
        raise _fail(field, f"{algorithm}:{digest}", f"a digest ({algo}: {what})")
    return digest


def check_hash(value: object, field: str) -> str:
    """A hash written ``<algorithm>:<hex digest>`` (pip's ``--hash``, ``Pipfile.lock``, uv,
    pdm and poetry locks), its digest checked by :func:`check_digest`.

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: no ``:``, or a digest that is not one.
    """
    if not isinstance(value, str) or ":" not in value:
        raise _fail(field, value, "a hash (<algorithm>:<hex digest>)")
    algorithm, _, digest = value.partition(":")
    check_digest(algorithm, digest, field)
    return value


_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def check_location(value: object, field: str, schemes: frozenset[str] = INDEX_SCHEMES) -> str:
    """An index or file location: a URL passing :func:`check_url`, or a plain path — one with
    no URL scheme (``x:`` not a Windows drive ``C:\\``/``C:/``), as uv reads a registry
    ``source`` (its ``RegistrySource``: a URL or a path).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: a URL of another scheme (``javascript:alert(1)``, named in
        the message), or not plain (white space, an option).
    """
    if isinstance(value, str) and (":" not in value or _DRIVE.match(value)) and _plain(value):
        return value
    return check_url(value, field, schemes)


_HEX_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def check_commit(value: object, field: str) -> str:
    """A full git object name: 40 hex digits (SHA-1) or 64 (SHA-256), lower case, as
    ``git rev-parse`` prints it (gitglossary(7) "object name").

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (``--orphan=x``, ``HEAD~1``, an abbreviation).
    """
    if not isinstance(value, str) or not _HEX_COMMIT.fullmatch(value):
        raise _fail(field, value, "a full hex commit (40 or 64 hex digits)")
    return value


def _plain(value: str) -> bool:
    return bool(value) and not value.startswith("-") and not any(
        c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value)


def check_url(value: object, field: str, schemes: frozenset[str] = INDEX_SCHEMES) -> str:
    """A URL whose scheme is one of ``schemes`` and that has a host (``file:`` a path), with no
    white space or control characters and not starting with ``-``.

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (``--upload-pack=…``, ``ext::sh -c …``); a
        scheme not in ``schemes`` (``javascript:``, ``ftp:``) is named in the message.
    """
    if not isinstance(value, str) or not _plain(value) or "::" in value:
        raise _fail(field, value, f"a URL ({', '.join(sorted(schemes))})")
    try:
        parts = urlsplit(value)
        hostname = parts.hostname  # the port and a bracketed host are checked here too
        _ = parts.port
    except ValueError:  # an unbalanced or non-IP "[...]" host, a port that is no number
        raise _fail(field, value, f"a URL ({', '.join(sorted(schemes))})") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        said = f"its scheme {scheme + ':'!r} is not supported" if scheme else "it has no scheme"
        raise _fail(field, value, f"a URL ({', '.join(sorted(schemes))}): {said}")
    if (scheme != "file" and not hostname) or (scheme == "file" and not parts.path.startswith("/")):
        raise _fail(field, value, f"a URL ({', '.join(sorted(schemes))})")
    return value


#: pip's ``ARCHIVE_EXTENSIONS`` (``pip/_internal/utils/filetypes.py``): the files pip installs
#: from, a wheel or an sdist archive.
ARCHIVE_SUFFIX = re.compile(r"\.(?:whl|zip|tar\.gz|tgz|tar|tar\.bz2|tbz|tar\.xz|txz|tlz|tar\.lz|"
                            r"tar\.lzma)$", re.IGNORECASE)


def is_archive(target: str) -> bool:
    """Whether ``target`` ends as a file pip installs from (a wheel or an sdist archive:
    :data:`ARCHIVE_SUFFIX`), a ``#fragment`` left out."""
    return ARCHIVE_SUFFIX.search(target.split("#", 1)[0]) is not None


def check_dist_file(value: object, field: str) -> str:
    """The file a PyPI package's URL or path names (its last path part, query and fragment
    left out): a wheel whose file name is PEP 427's (``packaging.utils.parse_wheel_filename``,
    as ``packaging.pylock`` checks a pylock's wheels) or a source archive of an extension pip
    and uv install from (``.tar.gz``, ``.zip``, …: :func:`is_archive`).

    :returns: that file name (percent-decoded).
    :raises UntrustedValueError: neither (``file:///etc/passwd``, ``…/download/click``, a
        ``.whl`` that is no wheel's name).
    """
    from urllib.parse import unquote

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not isinstance(value, str):
        raise _fail(field, value, "a wheel or sdist location")
    path = urlsplit(value).path if "://" in value else value.split("#", 1)[0]
    fname = unquote(path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1])
    if fname.lower().endswith(".whl"):
        try:
            parse_wheel_filename(fname)
        except InvalidWheelFilename:
            raise _fail(field, value, f"a wheel: its file {_shown(fname)} is not a wheel name "
                        "(PEP 427: name-version[-build]-python-abi-platform.whl)") from None
    elif not is_archive(fname):
        raise _fail(field, value, f"a wheel or sdist: its file {_shown(fname)} is neither a "
                    "wheel (PEP 427 file name) nor a source archive (.tar.gz, .zip, …)")
    return fname


def check_conda_file(value: object, field: str) -> str:
    """The file a conda package URL names (its last path part): a package archive
    ``<name>-<version>-<build>.conda`` or ``.tar.bz2`` (conda's "Package naming conventions";
    neither version nor build holds ``-``).

    :returns: that file name (percent-decoded).
    :raises UntrustedValueError: another file (``…/bzip2-1.0.8-h0_8.zip``, ``/etc/passwd``).
    """
    from urllib.parse import unquote

    if not isinstance(value, str):
        raise _fail(field, value, "a conda package location")
    fname = unquote(urlsplit(value).path.rstrip("/").rsplit("/", 1)[-1])
    stem = fname.removesuffix(".conda") if fname.endswith(".conda") else (
        fname.removesuffix(".tar.bz2") if fname.endswith(".tar.bz2") else None)
    if stem is None:
        raise _fail(field, value, f"a conda package: its file {_shown(fname)} is not a .conda or "
                    ".tar.bz2 archive")
    bits = stem.rsplit("-", 2)
    if len(bits) != 3 or not all(bits):
        raise _fail(field, value, f"a conda package: its file {_shown(fname)} is not named "
                    "<name>-<version>-<build>")
    return fname


_SCP_LIKE = re.compile(r"(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)[^\s]+")


def check_git_source(value: object, field: str) -> str:
    """A git remote ``git clone`` may be given: a URL of :data:`GIT_SCHEMES`, the scp-like
    ``[user@]host:path`` of ssh (git-clone(1) "GIT URLS"), or an absolute local path.

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (an option, ``ext::``, a relative path).
    """
    if isinstance(value, str) and _plain(value) and "::" not in value:
        if value.startswith("/") or _SCP_LIKE.fullmatch(value):
            return value
        if "://" in value:
            return check_url(value, field, GIT_SCHEMES)
    raise _fail(field, value, "a git remote (https/http/ssh/git/file URL, host:path, or an "
                "absolute path)")


_PY_VERSION = re.compile(r"\d{1,2}(?:\.\d{1,3}){0,2}(?:(?:a|b|rc)\d{1,3})?\+?")


def check_python_version(value: object, field: str) -> str:
    """A Python version as ``platform.python_version()`` prints it (``3.11.7``, ``3.14.0rc1``).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else.
    """
    if not isinstance(value, str) or not _PY_VERSION.fullmatch(value):
        raise _fail(field, value, "a Python version")
    return value


#: conda's package name, version and build string characters (conda's MatchSpec grammar;
#: ``conda.models.version`` and ``conda build`` never produce others).
_CONDA_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_CONDA_TOKEN = re.compile(r"[A-Za-z0-9_.+!]+")


def check_conda_spec(name: object, version: object, build: object, field: str) -> str:
    """An exact conda MatchSpec ``name=version=build`` (conda's "Package match
    specifications"), each part of conda's own characters.

    :returns: the spec string.
    :raises UntrustedValueError: a part is empty, an option, or holds other characters.
    """
    for part, rx in ((name, _CONDA_NAME), (version, _CONDA_TOKEN), (build, _CONDA_TOKEN)):
        if not isinstance(part, str) or not rx.fullmatch(part):
            raise _fail(field, f"{name}={version}={build}", "an exact conda MatchSpec "
                        "(name=version=build)")
    return f"{name}={version}={build}"


def check_match_spec(value: object, field: str) -> str:
    """A conda MatchSpec as an ``environment.yml`` dependency line gives it (conda's "Package
    match specifications": ``[channel::]name[ version[ build]]`` or with ``=``/``[…]``), that is
    not an option (``--override-channels`` parses as a spec named ``--override-channels``, and
    conda-lock hands specs to ``conda create``): its package name is of conda's own characters
    and its channel, if any, passes :func:`check_channel`.  The grammar itself is checked by
    :func:`envlock.formats.conda.parse_spec`.

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else.
    """
    if not isinstance(value, str) or value.lstrip().startswith("-") or any(
            ord(c) < 32 or ord(c) == 127 for c in value):
        raise _fail(field, value, "a conda MatchSpec")
    channel, sep, rest = value.strip().rpartition("::")
    if sep:
        check_channel(channel, field)
    name = re.match(r"[^\s=<>!~\[]*", rest)
    if name is None or not _CONDA_NAME.fullmatch(name.group(0)):
        raise _fail(field, value, "a conda MatchSpec")
    return value


_CHANNEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


def check_channel(value: object, field: str) -> str:
    """A conda channel as ``channels:`` or ``-c`` gives it (conda's "Channels"): a name
    (``conda-forge``, ``pkgs/main``, ``conda-forge/label/dev``), a URL of
    :data:`INDEX_SCHEMES`, or a local directory (absolute, ``./``, ``../`` or ``~/``: read
    only).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else (an option, ``ext::``, white space).
    """
    if isinstance(value, str) and _plain(value):
        if "://" in value:
            return check_url(value, field, INDEX_SCHEMES)
        if _CHANNEL_NAME.fullmatch(value) or value.startswith(("/", "./", "../", "~/")):
            return value
    raise _fail(field, value, "a conda channel (a name, an https/http/file URL or a local "
                "directory)")


def check_file_name(value: object, field: str) -> str:
    """A bare file name (no directory part, not ``.``/``..``, not an option).

    :returns: ``value`` unchanged.
    :raises UntrustedValueError: anything else.
    """
    if (not isinstance(value, str) or not _plain(value) or value in (".", "..")
            or "/" in value or os.sep in value or "\0" in value):
        raise _fail(field, value, "a file name")
    return value


def contained(root: str | os.PathLike[str], *parts: str, field: str) -> Path:
    """``root/parts…``, refused unless it stays inside ``root`` once both are resolved
    (symbolic links followed, ``..`` removed), as every path derived from a file must.

    :returns: the joined path (not resolved, so the plan shows what the user asked for).
    :raises UntrustedValueError: the path leaves ``root``.
    """
    path = Path(root).joinpath(*parts)
    base = Path(root).resolve()
    if not path.resolve().is_relative_to(base) or path.resolve() == base:
        raise UntrustedValueError(f"{field}: {_shown('/'.join(parts))} leads outside "
                                  f"{_shown(os.fspath(root))}; nothing was run")
    return path
