"""What a lockfile makes ``restore --run`` contact and build, read before anything runs.

A lockfile is data (docs/trust.md).  :func:`lockfile_sources` reads, for one lockfile, every
index, channel, URL and VCS remote its installer will contact and every source it will build
(which runs that source's build backend), so that the plan names them.  Indexes the lockfile
itself brings (a requirements file's ``--index-url``/``--extra-index-url``/``--find-links``/
``--trusted-host``, a pylock package's ``index``) are used only when they are in the user's own
configuration (:func:`user_indexes`: the command line, pip's and uv's configuration files and
variables) or admitted by ``--allow-index URL`` / ``--trust-lockfile-indexes``; otherwise
:func:`check_admitted` refuses the lockfile, before anything runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from envlock._untrusted import (
    GIT_SCHEMES,
    INDEX_SCHEMES,
    UntrustedValueError,
    check_dist_file,
    check_requirement,
    check_url,
)
from envlock._io import InputError
from envlock._io import read_text as read
from envlock.errors import ManifestError

__all__ = ["Sources", "lockfile_sources", "pylock_sources", "requirements_sources", "explicit_sources",
           "lock_input_sources", "pip_section_sources", "user_indexes", "check_admitted", "PYPI"]

#: uv's and pip's default index (PyPI's simple API); a user without configuration has it.
PYPI = "https://pypi.org/simple"


@dataclass(frozen=True, kw_only=True, slots=True)
class Sources:
    """What installing one lockfile contacts and builds.

    :ivar indexes: index / find-links URLs the lockfile itself names (need admitting).
    :ivar insecure_hosts: ``--trusted-host`` hosts (TLS not verified; need admitting).
    :ivar contacts: every line the plan shows as contacted (indexes, channels, URLs, remotes).
    :ivar builds: what is built from source (runs its build backend).
    """

    indexes: tuple[str, ...] = ()
    insecure_hosts: tuple[str, ...] = ()
    contacts: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()


#: Options of a requirements file (pip's "Requirements File Format") that bring an index, and
#: which kind: a value follows them (``--opt VALUE`` or ``--opt=VALUE``).
_INDEX_OPTIONS = {"-i": "index", "--index-url": "index", "--extra-index-url": "index",
                  "-f": "find-links", "--find-links": "find-links",
                  "--trusted-host": "trusted-host"}
#: Options that change nothing restore must name (flags without a value).
_FLAGS = frozenset({"--no-index", "--pre", "--prefer-binary", "--require-hashes"})
#: Options with a value that change nothing restore must name.
_VALUED = frozenset({"--only-binary", "--no-binary"})


def _requirements(path: Path, text: str, command: str = "restore") -> Sources:
    indexes: list[str] = []
    hosts: list[str] = []
    contacts: list[str] = []
    builds: list[str] = []
    default_index = True
    for number, raw in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        where = f"{path.name} line {number}"
        tokens = line.split()
        if not tokens[0].startswith("-"):
            # the requirement (markers included: `name==1 ; python_version < "3.12"`) ends
            # where its options (`--hash=…`) begin
            opt_at = re.search(r"\s--?[A-Za-z]", line)
            req = line[:opt_at.start()].strip() if opt_at else line
            rest = line[len(req):].split()
            for opt in rest:
                if not opt.startswith("--hash="):
                    raise UntrustedValueError(f"{where}: option {opt.split('=')[0]!r} on a "
                                              f"requirement is not one {command} passes on (only "
                                              "--hash); nothing was run")
            check_requirement(req, where)
            name, at, url = req.partition("@")
            if at:
                url = url.strip()
                contacts.append(f"{url} ({name.strip()})")
                if not url.split("#")[0].endswith(".whl"):
                    builds.append(f"{name.strip()}: builds {url} (runs its build backend)")
            continue
        opt, eq, value = tokens[0].partition("=")
        if not eq and len(tokens) > 1:
            value = tokens[1]
        extra = tokens[1:] if eq else tokens[2:]
        if opt in _FLAGS and not eq and len(tokens) == 1:
            default_index = default_index and opt != "--no-index"
            continue
        if opt in _VALUED and value and not extra:
            continue
        kind = _INDEX_OPTIONS.get(opt)
        if kind is None or not value or extra:
            raise UntrustedValueError(f"{where}: {opt!r} is not an option {command} passes "
                                      "on from a lockfile; nothing was run")
        if kind == "trusted-host":
            if not re.fullmatch(r"[A-Za-z0-9.-]+(:\d+)?", value):
                raise UntrustedValueError(f"{where}: --trusted-host {value!r} is not a host; "
                                          "nothing was run")
            hosts.append(value)
            contacts.append(f"{value} without TLS verification (--trusted-host, {path.name})")
            continue
        if "://" not in value and kind == "find-links":
            raise UntrustedValueError(f"{where}: --find-links {value!r} is a local path; give "
                                      f"it on {command}'s command line instead; nothing was run")
        check_url(value, f"{where} {opt}", INDEX_SCHEMES)
        if opt in ("-i", "--index-url"):
            default_index = False
        indexes.append(value)
        contacts.append(f"{'pip index' if kind == 'index' else 'find-links'} {value} ({opt} "
                        f"in {path.name})")
    if default_index:
        contacts.insert(0, "pip index: uv's default (PyPI) or the one your uv configuration "
                           "sets")
    return Sources(indexes=tuple(indexes), insecure_hosts=tuple(hosts),
                   contacts=tuple(contacts), builds=tuple(builds))


def _pylock(path: Path) -> Sources:
    from envlock.manifest._toml import load_file

    return pylock_sources(load_file(path), path)


def pylock_sources(data: Mapping[str, object], path: Path) -> Sources:
    """What installing the parsed pylock ``data`` (named ``path``) contacts and builds: each
    package's ``index`` (to admit), wheel, sdist, archive and VCS URLs (checked as URLs of an
    allowed scheme, a file URL naming a wheel or sdist: :func:`check_dist_file`), and what is
    built from source.

    :raises UntrustedValueError: a URL is not one of an allowed scheme, or names another file
        (``file:///etc/passwd``).
    """
    indexes: list[str] = []
    contacts: list[str] = []
    builds: list[str] = []
    raw = data.get("packages")
    for pkg in raw if isinstance(raw, list) else []:
        if not isinstance(pkg, dict):
            continue
        name = str(pkg.get("name"))
        where = f"{path.name} package {name!r}"
        index = pkg.get("index")
        if isinstance(index, str):
            check_url(index, f"{where} index", INDEX_SCHEMES)
            indexes.append(index)
        for wheel in pkg.get("wheels", []) if isinstance(pkg.get("wheels"), list) else []:
            if isinstance(wheel, dict) and isinstance(wheel.get("url"), str):
                check_url(wheel["url"], f"{where} wheel url", INDEX_SCHEMES)
                check_dist_file(wheel["url"], f"{where} wheel url")
                url = wheel["url"]
                contacts.append(f"wheel {url}" if url.startswith("file:")
                                else f"wheels from {_origin(url)}")
        for key, schemes in (("sdist", INDEX_SCHEMES), ("archive", INDEX_SCHEMES),
                             ("vcs", GIT_SCHEMES)):
            part = pkg.get(key)
            if isinstance(part, dict) and isinstance(part.get("url"), str):
                check_url(part["url"], f"{where} {key} url", schemes)
                if key != "vcs":  # a file uv fetches: a wheel or an sdist, by its name
                    check_dist_file(part["url"], f"{where} {key} url")
                contacts.append(f"{'git remote' if key == 'vcs' else 'URL'} {part['url']} "
                                f"({name})")
                if key == "sdist" and pkg.get("wheels"):
                    builds.append(f"{name}: builds its sdist {part['url']} if none of its wheels "
                                  "fits this target (runs its build backend)")
                elif key != "archive" or not part["url"].endswith(".whl"):
                    builds.append(f"{name}: builds its {key} {part['url']} (runs its build "
                                  "backend)")
        directory = pkg.get("directory")
        if isinstance(directory, dict) and directory.get("path"):
            builds.append(f"{name}: builds the directory {directory['path']} (runs its build "
                          "backend)")
    contacts = [f"pip index {i} (index of packages in {path.name})"
                for i in dict.fromkeys(indexes)] + contacts
    return Sources(indexes=tuple(dict.fromkeys(indexes)), contacts=tuple(dict.fromkeys(contacts)),
                   builds=tuple(builds))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _conda_urls(urls: Iterable[str], path: Path) -> Sources:
    channels: list[str] = []
    for url in urls:
        check_url(url, f"{path.name} package url", INDEX_SCHEMES)
        channels.append(url.rsplit("/", 2)[0] if url.count("/") >= 3 else url)
    return Sources(contacts=tuple(f"conda channel {c}" for c in dict.fromkeys(channels)))


def lockfile_sources(path: Path, kind: str) -> Sources:
    """What installing the lockfile ``path`` of ``kind`` contacts and builds.

    :param kind: ``"requirements"``, ``"pylock"``, ``"conda-lock"`` or ``"conda-explicit"``.
    :raises UntrustedValueError: a value is not what it must be (an option restore does not
        pass on, a URL of another scheme), one line naming the file and line or package.
    """
    from envlock.manifest._toml import read_text

    if kind == "requirements":
        return _requirements(path, read_text(path))
    if kind == "pylock":
        return _pylock(path)
    if kind == "conda-explicit":
        return explicit_sources(read_text(path), path)
    if kind == "conda-lock":
        from envlock.lock import _condalock

        doc = _condalock.read(path)
        conda = _conda_urls([str(p.url) for p in doc.package if p.manager == "conda"], path)
        pip = [f"URL {p.url} ({p.name})" for p in doc.package if p.manager == "pip"]
        return Sources(contacts=conda.contacts + tuple(pip))
    return Sources()


def explicit_sources(text: str, path: Path) -> Sources:
    """The conda channels a conda explicit list ``text`` (named ``path``) is fetched from, each
    package URL checked as a URL of an allowed scheme.

    :raises UntrustedValueError: a URL is not one.
    """
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    start = lines.index("@EXPLICIT") + 1 if "@EXPLICIT" in lines else len(lines)
    return _conda_urls([ln for ln in lines[start:] if ln], path)


def requirements_sources(path: Path, text: str) -> Sources:
    """What installing the hash-pinned requirements ``text`` (named ``path``) contacts and
    builds, read as :func:`lockfile_sources` reads a requirements file.

    :raises UntrustedValueError: a line is not a requirement or an index option.
    """
    return _requirements(path, text)


def lock_input_sources(path: Path) -> Sources:
    """What ``envlock lock -r FILE`` makes uv contact, read before uv runs.

    A requirements file (``requirements.in``) is read as :func:`lockfile_sources` reads one
    (its ``--index-url``/``--extra-index-url``/``--find-links``/``--trusted-host`` become
    :attr:`Sources.indexes` to admit; ``-r``, ``-c``, ``-e`` and other options are refused).  A
    ``pyproject.toml`` (PEP 621) must list its dependencies statically: uv builds a project
    whose ``dynamic`` names them (it runs the build backend, code of the project) and follows
    ``[tool.uv.sources]`` (git, URL and path sources), so both are refused; each dependency
    must be a PEP 508 requirement, and the indexes of its ``[tool.uv]`` table are indexes to
    admit.

    :raises UntrustedValueError: one line naming the file, the field and the value.
    """
    from envlock.manifest._toml import load_file, read_text

    if path.name != "pyproject.toml":
        return _requirements(path, read_text(path), command="lock")
    data = load_file(path)
    project = data.get("project")
    if not isinstance(project, Mapping):
        raise UntrustedValueError(f"{path}: no [project] table (PEP 621) to lock; nothing was "
                                  "run")
    dynamic = project.get("dynamic")
    for key in ("dependencies", "optional-dependencies"):
        if isinstance(dynamic, list) and key in dynamic:
            raise UntrustedValueError(
                f"{path}: [project] dynamic names {key!r}: uv would run the project's build "
                "backend (code from there) to read them; lock a requirements file instead; "
                "nothing was run")
    deps = project.get("dependencies", [])
    optional = project.get("optional-dependencies", {})
    lines = list(deps) if isinstance(deps, list) else [deps]
    if isinstance(optional, Mapping):
        for extra in optional.values():
            lines += list(extra) if isinstance(extra, list) else [extra]
    else:
        lines.append(optional)
    for line in lines:
        check_requirement(line, f"{path.name} [project] dependency")
    tool = data.get("tool")
    uv = tool.get("uv") if isinstance(tool, Mapping) else None
    if not isinstance(uv, Mapping):
        return Sources(contacts=("pip index: uv's default (PyPI) or the one your uv "
                                 "configuration sets",))
    if uv.get("sources"):
        raise UntrustedValueError(
            f"{path}: [tool.uv.sources] names where packages come from (git, URL, path); "
            "envlock lock -r does not follow them; nothing was run")
    indexes = _uv_table_values(uv)
    for url in indexes:
        check_url(url, f"{path.name} [tool.uv] index", INDEX_SCHEMES)
    return Sources(indexes=tuple(indexes),
                   contacts=tuple(f"pip index {u} ([tool.uv] in {path.name})" for u in indexes))


def pip_section_sources(lines: Iterable[str], path: Path) -> Sources:
    """The ``pip:`` section of an ``environment.yml``, read as a requirements file
    (:func:`lock_input_sources`): what uv or conda-lock would contact for it.

    :raises UntrustedValueError: a line is not a requirement or an index option.
    """
    return _requirements(path, "\n".join(lines), command="lock")


def _norm(url: str) -> str:
    return url.strip().rstrip("/")


def _pip_conf_values(environ: Mapping[str, str]) -> list[str]:
    import configparser


    home = Path(environ.get("HOME", "~")).expanduser()
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), home / ".pip" / "pip.conf",
             xdg / "pip" / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE"):
        files = [Path(environ["PIP_CONFIG_FILE"])]  # pip: it replaces the others
    out: list[str] = []
    for f in files:
        try:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(read(f, limit=1 << 20))
        except (InputError, configparser.Error):
            continue
        for section in ("global", "install"):
            for key in ("index-url", "extra-index-url", "find-links"):
                if parser.has_option(section, key):
                    out += parser.get(section, key).split()
    return out


def _uv_toml_values(environ: Mapping[str, str]) -> list[str]:
    from envlock.manifest._toml import load_toml

    home = Path(environ.get("HOME", "~")).expanduser()
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = ([Path(environ["UV_CONFIG_FILE"])] if environ.get("UV_CONFIG_FILE")
             else [Path("/etc/uv/uv.toml"), xdg / "uv" / "uv.toml"])
    out: list[str] = []
    for f in files:
        try:
            data = load_toml(read(f, limit=1 << 20), str(f))  # rtoml: the Rust toml crate uv reads with
        except (InputError, ManifestError):
            continue
        out += _uv_table_values(data)
    return out


def _uv_table_values(data: Mapping[str, object]) -> list[str]:
    """The index and find-links URLs a uv settings table names (uv's "Settings":
    ``index-url``, ``extra-index-url``, ``find-links``, ``[[index]] url``, and the same under
    ``[pip]``)."""
    out: list[str] = []
    pip = data.get("pip")
    for table in (data, pip if isinstance(pip, Mapping) else {}):
        for key in ("index-url", "extra-index-url", "find-links"):
            value = table.get(key)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                out += [v for v in value if isinstance(v, str)]
        indexes = table.get("index")
        for index in indexes if isinstance(indexes, list) else []:
            if isinstance(index, Mapping) and isinstance(index.get("url"), str):
                out.append(index["url"])
    return out


def user_indexes(given: Iterable[str], environ: Mapping[str, str] | None = None) -> set[str]:
    """The indexes the user's own configuration names, normalized (no trailing ``/``).

    ``given`` (restore's ``--index-url``, ``--find-links``, ``--index``, ``--allow-index``), the
    variables pip and uv read (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``,
    ``UV_INDEX_URL``, ``UV_EXTRA_INDEX_URL``, ``UV_DEFAULT_INDEX``, ``UV_INDEX``,
    ``UV_FIND_LINKS``), pip's configuration files (pip's "Configuration": ``PIP_CONFIG_FILE``
    or the global, user and site files; ``global``/``install`` sections), uv's ``uv.toml``
    (uv's "Configuration files": ``UV_CONFIG_FILE`` or the system and user files), and PyPI,
    both tools' default.
    """
    env = os.environ if environ is None else environ
    values = list(given)
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "UV_INDEX_URL",
                "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_FIND_LINKS"):
        values += [v.split("=", 1)[-1] if "://" in v.split("=", 1)[-1] else v
                   for v in env.get(var, "").split()]
    values += _pip_conf_values(env) + _uv_toml_values(env)
    return {_norm(v) for v in values if v} | {PYPI}


def check_admitted(sources: Sources, path: Path, admitted: set[str], trust_all: bool,
                   command: str = "restore") -> None:
    """Refuse a lockfile whose own indexes or ``--trusted-host`` hosts the user has not
    admitted (:func:`user_indexes`, ``--allow-index``, ``--trust-lockfile-indexes``).

    :param command: the command the error names (``restore``, ``lock``).

    :raises UntrustedValueError: one line naming the index and the flag that admits it.
    """
    if trust_all:
        return
    for index in sources.indexes:
        if _norm(index) not in admitted:
            raise UntrustedValueError(
                f"{path}: names the index {index}, which is not in your configuration; "
                f"{command} uses it only with --allow-index {index} (or "
                "--trust-lockfile-indexes); nothing was run")
    hosts = {urlsplit(a).netloc for a in admitted}
    for host in sources.insecure_hosts:
        if host not in hosts:
            raise UntrustedValueError(
                f"{path}: --trusted-host {host} turns off TLS verification for a host not in "
                f"your configuration; {command} does so only with --allow-index naming a URL of "
                "that host (or --trust-lockfile-indexes); nothing was run")
