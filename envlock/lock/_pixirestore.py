"""A ``pixi.lock`` as lockfiles restore installs: one environment, this machine's platform.

A pixi.lock holds environments (``default``, and any the project's features define) for
several platforms; :func:`convert_pixi` takes one environment on this machine's conda subdir,
read with envlock's reader (:func:`envlock.formats.pixilock.read_pixi_lock`, tested equal to
py-rattler's ``LockFile``), and gives:

* its conda packages as a conda explicit list (``@EXPLICIT``, each package's URL as locked
  with its ``#md5``; conda's explicit-spec format), which ``conda create --file`` installs with
  nothing solved;
* its PyPI packages, when it has any, as a PEP 751 ``pylock.toml`` (each the one file pixi
  locked for that platform, with its sha256), installed by uv into that prefix's Python —
  pixi's own order: conda first, then PyPI packages on top.

The project itself (a ``conda: .`` source package, an editable or local-directory PyPI entry)
is not installed.  A package without a hash is one line naming it.  Nothing is written here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envlock._untrusted import INDEX_SCHEMES
from envlock.errors import ManifestError
from envlock.formats.pixilock import conda_location, pypi_location
from envlock.lock._projectlocks import Converted, _file_name, converted_pylock, dump_converted

__all__ = ["convert_pixi"]


def convert_pixi(path: Path, subdir: str, environment: str | None = None) -> list[Converted]:
    """Convert ``environment`` of the pixi.lock ``path`` for conda ``subdir`` (``pixi install
    -e NAME``; ``None``: ``default``).

    :returns: the conda explicit list (kind ``"conda-explicit"``), then, when the environment
        has PyPI packages there, the pylock (kind ``"pylock"``).
    :raises ManifestError: malformed, no such environment, no platform of that subdir, or a
        package without a hash (one line naming it).
    """
    from envlock.formats.pixilock import read_pixi_lock
    from envlock.manifest._toml import read_text
    from envlock.formats._load import load_yaml

    from envlock.lock._lockselect import pixi_environment

    data = load_yaml(read_text(path), str(path), exact=True)
    environment = pixi_environment(path, data, environment)
    lock = read_pixi_lock(data, str(path), environment)
    plat = next((p for p in lock.pixi_platforms if p.subdir == subdir), None)
    if plat is None:
        raise ManifestError(f"{path}: environment {environment!r} is not locked for this "
                            f"machine's platform {subdir} (only "
                            f"{', '.join(p.subdir for p in lock.pixi_platforms) or 'none'}); "
                            "nothing was run")
    entries = [x for x in lock.packages if x.platform == plat.name]
    conda = [x for x in entries if x.manager == "conda"]
    pypi = [x for x in entries if x.manager == "pip"]
    if not conda:
        raise ManifestError(f"{path}: environment {environment!r} has no conda package for "
                            f"{subdir}; nothing was run")
    where = f"{path.name} environment {environment!r} for {subdir}"
    lines = [f"# converted by envlock restore from {path.resolve()}", f"# platform: {subdir}",
             "@EXPLICIT"]
    for x in conda:
        if not x.md5 or not re.fullmatch(r"[0-9a-f]{32}", x.md5):
            raise _refuse(path, x.name, "its conda record has no md5")
        if not x.url or re.search(r"[\s#]", x.url) or not conda_location(
                x.url, f"{path}: package {x.name!r} location", INDEX_SCHEMES):
            raise _refuse(path, x.name, f"its location {x.url!r} is not a package URL")
        lines.append(f"{x.url}#{x.md5}")
    left = tuple(f"{path.name}: the project itself ({n}) is not installed, only its locked "
                 "packages" for n in lock.projects)
    out = [Converted(kind="conda-explicit", text="".join(f"{ln}\n" for ln in lines), data=None,
                     names={x.name: x.version for x in conda}, title=f"{where}, conda packages",
                     left_out=left)]
    if pypi:
        python = next((x.version for x in conda if x.name == "python"), None)
        doc = converted_pylock(path, [_pypi_package(path, x) for x in pypi],
                               f"=={python}" if python else None,
                               {"environment": environment, "platform": subdir})
        out.append(Converted(kind="pylock", data=doc, names={x.name: x.version for x in pypi},
                             text=dump_converted(doc), title=f"{where}, PyPI packages"))
    return out


def _refuse(path: Path, name: str, why: str) -> ManifestError:
    return ManifestError(f"{path}: package {name!r} cannot be restored from this lock: {why}; "
                         "nothing was run")


def _pypi_package(path: Path, x: Any) -> dict[str, Any]:
    """One pixi PyPI entry as a PEP 751 package: its one locked file (a wheel, else an sdist
    archive), or a git location ``git+URL?…#COMMIT`` as ``vcs``.

    :raises UntrustedValueError: a location of another URL scheme, or one that names no wheel
        or sdist (:func:`envlock.formats.pixilock.pypi_location`).
    :raises ManifestError: a local directory, a git location without a commit, a file
        without a sha256.
    """
    from urllib.parse import parse_qsl

    what = pypi_location(str(x.url), f"{path}: package {x.name!r} location")
    loc = str(x.url).removeprefix("direct+")  # pixi's mark of a direct URL (not an index's)
    out: dict[str, Any] = {"name": x.name, "version": x.version}
    if what == "directory":
        raise _refuse(path, x.name, f"it is the local directory {loc}")
    if what == "git":
        if not x.commit:
            raise _refuse(path, x.name, f"its git location {loc} names no commit")
        base, _, query = loc.removeprefix("git+").split("#", 1)[0].partition("?")
        vcs = {"type": "git", "url": base, "commit-id": x.commit}
        q = dict(parse_qsl(query))
        if q.get("rev") or q.get("tag") or q.get("branch"):
            vcs["requested-revision"] = q.get("rev") or q.get("tag") or q["branch"]
        if q.get("subdirectory"):
            vcs["subdirectory"] = q["subdirectory"]
        return {"name": x.name, "vcs": vcs}
    if not x.sha256:
        raise _refuse(path, x.name, f"its file {loc} has no sha256 in the lock")
    url = loc if what == "url" else (path.parent / loc).resolve().as_uri()
    hashes = {"sha256": x.sha256}
    if _file_name(url).endswith(".whl"):
        out["wheels"] = [{"name": _file_name(url), "url": url, "hashes": hashes}]
    else:
        out["archive"] = {"url": url, "hashes": hashes}
    return out
