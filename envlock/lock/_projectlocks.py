"""Project lockfiles (``uv.lock``, ``pdm.lock``, ``poetry.lock``) as a lockfile restore installs.

``envlock restore`` installs ``pylock.toml`` and hash-pinned ``requirements.txt`` with uv.  A
project lock holds every platform, Python, extra and dependency group; :func:`convert` takes
from it the packages one install needs on one target, read with envlock's own readers
(:mod:`envlock.formats.projectlocks`, tested equal to each tool's reading) and
:func:`envlock.formats.markers.applicable` for the target's marker environment, and writes
them, with their files' URLs and hashes exactly as locked, as:

* ``uv.lock`` and ``pdm.lock`` → a PEP 751 ``pylock.toml`` (checked with ``packaging.pylock``);
* ``poetry.lock`` → a hash-pinned ``requirements.txt`` (what ``poetry export`` writes): a
  poetry.lock records its files' names and hashes, not their URLs, and PEP 751 needs a URL or
  path for every file.

The install is the one each tool makes with the options given, and with none its own default
(``uv sync``: the default groups; ``pdm install``: the groups it was locked with; ``poetry
install``: every group not optional), as :mod:`envlock.formats.lockchoice` reads them; the project itself
(editable, virtual, directory entries) is not installed.  A package the lock gives no file
with a hash for (a poetry entry with ``files = []``, a wheel of a ``--find-links`` directory
uv recorded without a hash, a local path) cannot be hash-checked: the conversion stops with
one line naming it.  Nothing is written or fetched here: the text is returned, and the
restore plan writes it with ``--run``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from envlock._names import canonicalize
from envlock.errors import ManifestError

if TYPE_CHECKING:
    from envlock._selection import Requested

__all__ = ["PROJECT_LOCKS", "Converted", "convert", "destination"]

#: the project lockfile kinds :func:`convert` takes, and the lockfile kind each becomes.
PROJECT_LOCKS = {"uv.lock": "pylock", "pdm.lock": "pylock", "poetry.lock": "requirements"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Converted:
    """A project lock converted for one target.

    :ivar kind: ``"pylock"`` or ``"requirements"`` (as restore installs them).
    :ivar text: the file's text; ``data``: the parsed pylock (``None`` for requirements).
    :ivar names: ``{name: version}`` of the packages it installs.
    :ivar title: what was converted, for the plan (``"uv.lock for CPython 3.12.3 on
        linux x86_64, default install as uv sync takes it: groups dev"``).
    :ivar left_out: groups and extras of the lock not installed, and the project's own entries.
    """

    kind: str
    text: str
    data: dict[str, Any] | None
    names: dict[str, str]
    title: str
    left_out: tuple[str, ...] = ()


def destination(prefix: str, kind: str) -> Path:
    """Where the plan writes the converted lock of environment ``prefix``: beside it, named as
    its installer requires (uv: ``pylock.toml`` or ``pylock.<name>.toml``)."""
    p = Path(prefix)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", p.name) or "env"
    name = {"pylock": f"pylock.{slug}.toml", "conda-explicit": f"{slug}.conda-explicit.txt"
            }.get(kind, f"{slug}.requirements.txt")
    return p.parent / name


def _refuse(path: Path, pname: str, why: str) -> ManifestError:
    return ManifestError(f"{path}: package {pname!r} cannot be restored from this lock: {why}; "
                         "nothing was run")


def convert(path: Path, kind: str, env: Mapping[str, str],
            requested: Requested | None = None) -> Converted:
    """Convert the project lock ``path`` of ``kind`` (a key of :data:`PROJECT_LOCKS`) for the
    target of PEP 508 marker environment ``env`` and the extras and groups ``requested``
    (:func:`envlock.formats.lockchoice.choose`: as ``uv sync``, ``pdm install -G``, ``poetry
    install --with/-E`` take them; ``None``: each tool's own no-option install).

    :raises ManifestError: the lock is malformed, does not admit the target's Python
        (``requires-python``), has no extra or group of a name asked for, is asked for
        conflicting extras, or a package it needs there has no hash-checkable file (one line
        naming it).
    """
    from envlock import formats
    from envlock.formats.markers import applicable
    from envlock.formats.lockchoice import choose
    from envlock.manifest._toml import load_file

    lock = formats.read_lock(path)
    data = load_file(path)
    # a bad option is said before a fact of the environment (its Python), as uv sync says it
    try:
        chosen_install = choose(path, kind, lock, data, requested)  # verify's and diff's rule
    except ManifestError as exc:
        raise ManifestError(f"{exc}; nothing was run") from None
    selection, said = chosen_install.selection, chosen_install.said
    _check_python(path, lock.requires_python, env)
    raw = _raw_entries(data, kind)
    if [canonicalize(str(r.get("name"))) for r in raw] != [x.name for x in lock.packages]:
        raise ManifestError(f"{path}: its entries could not be matched to their files; nothing "
                            "was run")
    needed, optional = applicable(lock.packages, env, selection, conflicts=lock.conflicts)
    chosen: list[tuple[Any, Mapping[str, Any]]] = []
    for x, r in zip(lock.packages, raw):
        if x.name in needed and x.name not in optional and x.version == needed[x.name] \
                and x.name not in {c.name for c, _ in chosen}:
            chosen.append((x, r))
    where = (f"{path.name} for {env.get('platform_python_implementation', 'Python')} "
             f"{env.get('python_full_version')} on {env.get('sys_platform')} "
             f"{env.get('platform_machine')}, {said}")
    groups = sorted({g for gs in optional.values() for g in gs})
    left = ([f"{path.name}: not installed, needed only by "
             + ", ".join(g.replace("extra:", "extra ") for g in groups)
             + f": {', '.join(sorted(optional))}"] if groups else [])
    left += [f"{path.name}: the project itself ({n}) is not installed, only its locked "
             "dependencies" for n in lock.projects]
    left += chosen_install.notes
    names = {x.name: x.version for x, _ in chosen}
    lv = data.get("metadata", {}).get("lock-version", "1.0") if kind == "poetry.lock" else None
    if isinstance(lv, str) and tuple(int(n) for n in re.findall(r"\d+", lv)[:2]) < (2, 1):
        left.append(f"{path.name}: lock-version {lv} records no markers per target (poetry "
                    "re-resolves such a lock from pyproject.toml); every package of its main "
                    "group whose own markers hold is installed")
    if kind == "poetry.lock":
        text = _poetry_requirements(path, chosen, data)
        return Converted(kind="requirements", text=text, data=None, names=names,
                         title=where, left_out=tuple(left))
    packages = [(_uv_package if kind == "uv.lock" else _pdm_package)(path, x, r)
                for x, r in chosen]
    doc = _pylock_doc(path, packages, env, data)
    return Converted(kind="pylock", text=dump_converted(doc), data=doc, names=names, title=where,
                     left_out=tuple(left))


def _check_python(path: Path, requires: str | None, env: Mapping[str, str]) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires:
        return
    try:
        ok = SpecifierSet(requires).contains(env["python_full_version"], prereleases=True)
    except InvalidSpecifier:
        raise ManifestError(f"{path}: requires-python {requires!r} is not a PEP 440 specifier "
                            "set") from None
    if not ok:
        raise ManifestError(f"{path}: locked for Python {requires}, not "
                            f"{env['python_full_version']}; give --python-version VERSION; "
                            "nothing was run")


def _raw_entries(data: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The lock's own tables of its package entries, in the order and with the skips of its
    reader (:mod:`envlock.formats.projectlocks`: the project's own entries left out)."""
    out = []
    for p in data.get("package", []):
        source = p.get("source", {})
        if kind == "uv.lock" and {"editable", "virtual", "directory"} & set(source):
            continue
        if kind == "poetry.lock" and (source.get("type") == "directory" or p.get("develop") is True):
            continue
        if kind == "pdm.lock" and (p.get("editable") is True or "path" in p):
            continue
        out.append(p)
    return out


def _sha256(value: Any) -> str | None:
    if isinstance(value, str) and value.startswith("sha256:") and re.fullmatch(
            r"[0-9a-fA-F]{64}", value[7:]):
        return value[7:].lower()
    return None


def _file_name(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _local(path: Path, base: str, rel: str) -> str:
    """A file uv recorded as a path (a local registry's, relative to it) as a ``file:`` URL."""
    root = Path(base) if Path(base).is_absolute() else path.parent / base
    return (root / rel).resolve().as_uri() if not Path(rel).is_absolute() else Path(rel).as_uri()


def _uv_package(path: Path, x: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """One uv.lock entry as a PEP 751 package (its files' URLs and sha256 as locked)."""
    source = p.get("source", {})
    out: dict[str, Any] = {"name": x.name}
    if p.get("version"):
        out["version"] = str(p["version"])
    if "git" in source:
        return {**out, "vcs": _git(path, x.name, str(source["git"]))}
    if "path" in source:
        raise _refuse(path, x.name, f"it is the local path {source['path']}")
    registry = source.get("registry")
    base = str(registry) if isinstance(registry, str) and "://" not in registry else None
    files: list[dict[str, Any]] = []
    for w in p.get("wheels", []) if isinstance(p.get("wheels"), list) else []:
        files.append(_uv_file(path, x.name, w, base, source.get("url"), "wheel"))
    sdist = p.get("sdist") if isinstance(p.get("sdist"), Mapping) else None
    if "url" in source and not files:
        if sdist is None or not _sha256(sdist.get("hash")):
            raise _refuse(path, x.name, f"the archive {source['url']} has no sha256 in the lock")
        archive: dict[str, Any] = {"url": str(source["url"]),
                                   "hashes": {"sha256": _sha256(sdist.get("hash"))}}
        if source.get("subdirectory"):
            archive["subdirectory"] = str(source["subdirectory"])
        return {**out, "archive": archive}
    if files:
        out["wheels"] = files
    if sdist is not None:
        out["sdist"] = _uv_file(path, x.name, sdist, base, None, "sdist")
    if not files and sdist is None:
        raise _refuse(path, x.name, "the lock names no file for it")
    if isinstance(registry, str):
        out["index"] = registry if "://" in registry else (
            Path(registry) if Path(registry).is_absolute() else path.parent / registry
        ).resolve().as_uri()
    return out


def _uv_file(path: Path, pname: str, f: Any, base: str | None, direct: Any,
             what: str) -> dict[str, Any]:
    if not isinstance(f, Mapping):
        raise _refuse(path, pname, f"a {what} entry is not a table")
    url = f.get("url") or (direct if what == "sdist" else None)
    if not url and isinstance(f.get("path"), str):
        url = _local(path, base or ".", f["path"])
    sha = _sha256(f.get("hash"))
    if not isinstance(url, str) or not sha:
        said = url or f.get("path") or "?"
        why = (" (uv records none for a --find-links directory); lock against an index that "
               "serves hashes" if f.get("path") and not f.get("url") else "")
        raise _refuse(path, pname, f"its {what} {said} has no sha256 in the lock, which PEP 751 "
                      f"requires{why}")
    out: dict[str, Any] = {"name": _file_name(url), "url": url, "hashes": {"sha256": sha}}
    if isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool):
        out["size"] = f["size"]
    return out


def _git(path: Path, pname: str, git: str) -> dict[str, Any]:
    """uv's ``git = "URL?rev=REF&subdirectory=D#COMMIT"`` as PEP 751 ``vcs``."""
    url, _, commit = git.partition("#")
    base, _, query = url.partition("?")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise _refuse(path, pname, f"its git source {base} names no full commit")
    q = dict(parse_qsl(query))
    out = {"type": "git", "url": base.removeprefix("git+"), "commit-id": commit}
    ref = q.get("rev") or q.get("tag") or q.get("branch")
    if ref:
        out["requested-revision"] = ref
    if q.get("subdirectory"):
        out["subdirectory"] = q["subdirectory"]
    return out


def _pdm_package(path: Path, x: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """One pdm.lock entry as a PEP 751 package: its ``files`` (``url`` + ``hash``) as wheels and
    one sdist, a ``git`` + ``revision`` as ``vcs``."""
    out: dict[str, Any] = {"name": x.name}
    if p.get("version"):
        out["version"] = str(p["version"])
    if p.get("git"):
        if not p.get("revision"):
            raise _refuse(path, x.name, "its git source has no revision")
        vcs = {"type": "git", "url": str(p["git"]), "commit-id": str(p["revision"])}
        if p.get("ref"):
            vcs["requested-revision"] = str(p["ref"])
        if p.get("subdirectory"):
            vcs["subdirectory"] = str(p["subdirectory"])
        return {**out, "vcs": vcs}
    wheels: list[dict[str, Any]] = []
    sdists: list[dict[str, Any]] = []
    for f in p.get("files", []) if isinstance(p.get("files"), list) else []:
        url = f.get("url") if isinstance(f, Mapping) else None
        sha = _sha256(f.get("hash")) if isinstance(f, Mapping) else None
        if not isinstance(url, str) or not sha:
            said = f.get("file") if isinstance(f, Mapping) else f
            raise _refuse(path, x.name, f"its file {said} has no URL with a sha256 in the lock "
                          "(pdm lock --static-urls records them)")
        entry = {"name": _file_name(url), "url": url, "hashes": {"sha256": sha}}
        (wheels if _file_name(url).endswith(".whl") else sdists).append(entry)
    if p.get("url") and not wheels and not sdists:
        raise _refuse(path, x.name, f"the archive {p['url']} has no sha256 in the lock")
    if not wheels and not sdists:
        raise _refuse(path, x.name, "the lock names no file for it")
    if wheels:
        out["wheels"] = wheels
    if sdists:
        out["sdist"] = sdists[0]
    return out


def _poetry_requirements(path: Path, chosen: list[tuple[Any, Mapping[str, Any]]],
                         data: Mapping[str, Any]) -> str:
    """``name==version --hash=sha256:…`` per package (``name @ URL`` for a ``url`` source), and
    an ``--extra-index-url`` per ``legacy`` source the packages come from."""
    lines: list[str] = []
    indexes: list[str] = []
    for x, p in chosen:
        source = p.get("source", {}) if isinstance(p.get("source"), Mapping) else {}
        kind = source.get("type")
        files = p.get("files") if isinstance(p.get("files"), list) else []
        if not files:  # lock-version 1.x keeps them in [metadata.files], by package name
            listed = data.get("metadata", {}).get("files", {})
            files = next((v for k, v in listed.items() if canonicalize(k) == x.name
                          and isinstance(v, list)), []) if isinstance(listed, Mapping) else []
        hashes = [h for h in (_sha256(f.get("hash")) for f in files if isinstance(f, Mapping)) if h]
        if kind not in (None, "legacy", "url"):
            raise _refuse(path, x.name, f"its {kind} source cannot be hash-checked")
        if not hashes:
            raise _refuse(path, x.name, "the lock records no file hash for it (files = [])")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", x.name):  # PEP 503-normalized PEP 508
            raise _refuse(path, x.name, "its name is not a project name (PEP 508)")
        if not _pep440(x.version):
            raise _refuse(path, x.name, f"{x.version!r} is not a PEP 440 version")
        if kind == "legacy" and isinstance(source.get("url"), str):
            indexes.append(source["url"])
        req = f"{x.name} @ {source['url']}" if kind == "url" else f"{x.name}=={x.version}"
        lines.append(" ".join([req, *(f"--hash=sha256:{h}" for h in dict.fromkeys(hashes))]))
    head = [f"--extra-index-url {u}" for u in dict.fromkeys(indexes)]
    return "".join(f"{line}\n" for line in [f"# converted by envlock restore from {path}",
                                             *head, *lines])


def _pep440(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def _pylock_doc(path: Path, packages: list[dict[str, Any]], env: Mapping[str, str],
                data: Mapping[str, Any]) -> dict[str, Any]:
    from envlock.probes.lockfiles import _sha256 as file_sha256

    return converted_pylock(path, packages, f">={env['python_full_version']}", {
        "sha256": file_sha256(path), "python": env["python_full_version"],
        "platform": f"{env['sys_platform']} {env['platform_machine']}"})


def converted_pylock(path: Path, packages: list[dict[str, Any]], requires_python: str | None,
                     tool: Mapping[str, Any]) -> dict[str, Any]:
    """The PEP 751 document of ``packages`` converted from the lock at ``path`` (what it was
    converted from and for in ``[tool.envlock]``), checked as ``packaging.pylock`` reads it.

    :raises ManifestError: the document is not a valid pylock (one line).
    """
    from envlock.lock._pip import validate_pylock

    doc: dict[str, Any] = {"lock-version": "1.0", "created-by": "envlock"}
    if requires_python:
        doc["requires-python"] = requires_python
    doc["packages"] = packages
    doc["tool"] = {"envlock": {"converted-from": str(path.resolve()), **tool}}
    validate_pylock(doc, f"the pylock.toml converted from {path}")
    return doc


def dump_converted(doc: Mapping[str, Any]) -> str:
    """The text of a converted pylock document (a comment line first)."""
    import tomli_w

    return "# converted by envlock restore; see [tool.envlock]\n" + tomli_w.dumps(dict(doc))
