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


def convert_pixi(path: Path, subdir: str, environment: str | None = None,
                 platform: str | None = None) -> list[Converted]:
    """Convert ``environment`` of the pixi.lock ``path`` for conda ``subdir`` (``pixi install
    -e NAME``; ``None``: ``default``), its platform entry ``platform`` (a name of the lock's
    ``platforms`` list, ``p2``; ``None``: the one named ``subdir``, else the first of that
    subdir), as ``verify --lock --platform`` takes it
    (:func:`envlock.verify.pixichoice.choose_pixi`).

    :returns: the conda explicit list (kind ``"conda-explicit"``), then, when the environment
        has PyPI packages there, the pylock (kind ``"pylock"``); where several platform entries
        of ``subdir`` fit and none was named, the first's ``left_out`` says which was taken
        and names the others.
    :raises ManifestError: malformed, no such environment or platform, a platform of another
        subdir, no platform of that subdir, or a package without a hash (one line naming it).
    """
    from envlock.formats._load import load_yaml
    from envlock.formats.pixilegacy import upgraded
    from envlock.formats.pixilock import read_pixi_lock
    from envlock.lock._lockselect import pixi_environment
    from envlock.manifest._toml import read_text

    data = upgraded(load_yaml(read_text(path), str(path), exact=True), str(path))
    environment = pixi_environment(path, data, environment)
    lock = read_pixi_lock(data, str(path), environment)
    plat, taken = _platform(path, lock, data, subdir, environment, platform)
    entries = [x for x in lock.packages if x.platform == plat.name]
    conda = [x for x in entries if x.manager == "conda"]
    pypi = [x for x in entries if x.manager == "pip"]
    if not conda:
        raise ManifestError(f"{path}: environment {environment!r} has no conda package for "
                            f"{subdir}; nothing was run")
    where = f"{path.name} environment {environment!r} for {subdir}" + (
        f" (platform {plat.name})" if plat.name != subdir else "")
    lines = [f"# converted by envlock restore from {path.resolve()}", f"# platform: {subdir}",
             "@EXPLICIT"]
    for x in conda:
        if not x.md5 or not re.fullmatch(r"[0-9a-f]{32}", x.md5):
            raise _refuse(path, x.name, "its conda record has no md5")
        if not x.url or re.search(r"[\s#]", x.url) or not conda_location(
                x.url, f"{path}: package {x.name!r} location", INDEX_SCHEMES):
            raise _refuse(path, x.name, f"its location {x.url!r} is not a package URL")
        lines.append(f"{x.url}#{x.md5}")
    left = (*taken, *(f"{path.name}: the project itself ({n}) is not installed, only its "
                      "locked packages" for n in lock.projects))
    out = [Converted(kind="conda-explicit", text="".join(f"{ln}\n" for ln in lines), data=None,
                     names={x.name: x.version for x in conda}, title=f"{where}, conda packages",
                     left_out=left)]
    if pypi:
        python = next((x.version for x in conda if x.name == "python"), None)
        doc = converted_pylock(path, [_pypi_package(path, x) for x in pypi],
                               f"=={python}" if python else None,
                               {"environment": environment, "platform": subdir,
                                **({"pixi-platform": plat.name} if plat.name != subdir else {})})
        out.append(Converted(kind="pylock", data=doc, names={x.name: x.version for x in pypi},
                             text=dump_converted(doc), title=f"{where}, PyPI packages"))
    return out


def _platform(path: Path, lock: Any, data: Any, subdir: str, environment: str,
              platform: str | None) -> tuple[Any, list[str]]:
    """The platform entry of ``environment`` to convert for ``subdir``
    (:func:`envlock.verify.pixichoice.choose_pixi`), and the note saying which was taken when
    several of ``subdir`` fit and ``platform`` named none.

    :raises ManifestError: no such platform, one of another subdir, or none of ``subdir``.
    """
    from envlock.verify.pixichoice import DEFAULT_RULE, choose_pixi

    try:
        chosen = choose_pixi(path, lock, subdir, environment, platform, data=data,
                             lock_environment=environment)
    except ManifestError as exc:
        raise ManifestError(f"{exc}; nothing was run") from None
    plat = next((p for p in lock.pixi_platforms if p.name == chosen.platform), None)
    if plat is not None and plat.subdir != subdir:
        raise ManifestError(f"{path}: platform {plat.name} of environment {environment!r} is "
                            f"{plat.subdir}; this machine is {subdir} (--platform NAME: one of "
                            f"{_of_subdir(lock, subdir)}); nothing was run")
    if plat is None:
        raise ManifestError(f"{path}: environment {environment!r} is not locked for this "
                            f"machine's platform {subdir} (only "
                            f"{', '.join(p.subdir for p in lock.pixi_platforms) or 'none'}); "
                            "nothing was run")
    taken = [] if platform is not None or not chosen.others else [
        f"{path.name}: platform {plat.name} taken for {subdir} ({DEFAULT_RULE}); also for "
        f"{subdir}: {'; '.join(chosen.others)} (--platform NAME chooses one)"]
    return plat, taken


def _of_subdir(lock: Any, subdir: str) -> str:
    """The names of ``lock``'s platform entries of ``subdir``, or ``"none"``."""
    return ", ".join(p.name for p in lock.pixi_platforms if p.subdir == subdir) or "none"


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
