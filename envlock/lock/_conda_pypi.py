"""The Python distributions a conda solution provides, as installed facts for uv.

conda-lock resolves an ``environment.yml``'s ``pip:`` section *against* the conda solution: every
solved conda package that is a Python distribution is both installed and locked for its pip
solver (``conda_lock.pypi_solver.solve_pypi``), so pip adds only what conda lacks and a pip
requirement that contradicts a conda pin has no solution.  envlock does the same with uv: each
such distribution becomes a metadata-only wheel (its name and version, no ``Requires-Dist``:
conda resolved its dependencies) given to ``uv pip compile`` as a constraint ``name @
file://…``, so uv must use exactly it, checks every version specifier against its version, and
pulls none of its PyPI dependencies; those distributions are then dropped from uv's answer.

Which PyPI distribution a conda package is:

1. its own ``purls`` (``pkg:pypi/torch@2.3.1``, the package URLs conda-forge's repodata carries
   for each record, as pixi reads them);
2. else, as conda-lock decides for a package that depends on ``python``: the grayskull mapping's
   PyPI name (conda-lock's ``conda_name_to_pypi_name``; the renames in :data:`envlock._names.CONDA_TO_PYPI` are
   its entries for the packages scientific environments hold, used offline), or the conda name
   itself (conda-lock's fallback, "Assuming identity").
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from envlock._io import write_file
from envlock._names import CONDA_TO_PYPI
from envlock._run import Runner
from envlock.errors import LockError, SolveError

if TYPE_CHECKING:
    from envlock.lock._condalock import Entry
    from envlock.lock._pip import IndexOptions

__all__ = ["Provided", "provided_dists", "stub_constraints", "check_direct",
           "pip_entries"]



@dataclass(frozen=True, slots=True)
class Provided:
    """One PyPI distribution a conda record provides.

    :ivar name: its normalized PyPI name (PEP 503); ``version``: its PEP 440 version.
    :ivar conda: the record as conda names it, ``name version build``.
    :ivar how: ``"purl"`` or ``"mapping"`` (conda-lock's rule).
    """

    name: str
    version: str
    conda: str
    how: str


def _purl_pypi(purls: Iterable[str]) -> tuple[str, str | None] | None:
    """``(name, version)`` of the first ``pkg:pypi/NAME[@VERSION]`` package URL (purl spec)."""
    for purl in purls:
        if not purl.startswith("pkg:pypi/"):
            continue
        rest = purl.removeprefix("pkg:pypi/").split("?", 1)[0].split("#", 1)[0]
        name, _, version = rest.partition("@")
        return unquote(name), unquote(version) or None
    return None


def _depends_on_python(depends: Iterable[str]) -> bool:
    return any(d.split()[0].split("[")[0] == "python" for d in depends if d.strip())


def provided_dists(records: Sequence[Any]) -> dict[str, Provided]:
    """The PyPI distributions of solved conda ``records`` (objects with ``name``, ``version``,
    ``build``, ``depends`` and ``purls``), keyed by normalized PyPI name.

    ``python`` itself is not one (uv resolves for its version); a version that is not PEP 440
    (conda allows ``1.0_rc1``) cannot be a fact for a PyPI resolver and is left out.  When two
    records map to one name, the one whose conda name differs from it wins (conda-lock's rule:
    ``python-xxhash`` over the C library ``xxhash``).
    """
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    out: dict[str, Provided] = {}
    for rec in records:
        if rec.name == "python" or rec.name.startswith("__"):
            continue
        found = _purl_pypi(getattr(rec, "purls", ()) or ())
        if found is not None:
            name, version, how = found[0], found[1] or rec.version, "purl"
        elif _depends_on_python(rec.depends):
            name, version, how = CONDA_TO_PYPI.get(rec.name, rec.name), rec.version, "mapping"
        else:
            continue
        try:
            version = str(Version(version))
        except InvalidVersion:
            continue
        key = canonicalize_name(name)
        if key in out and key == rec.name:
            continue
        out[key] = Provided(name=key, version=version, conda=f"{rec.name} {rec.version} "
                            f"{rec.build}", how=how)
    return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _stub_wheel(dest: Path, dist: Provided) -> Path:
    """A metadata-only wheel (PEP 427: METADATA, WHEEL, RECORD) standing for ``dist``."""
    stem = f"{dist.name.replace('-', '_')}-{dist.version}"
    info = f"{stem}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n"
                            f"Summary: provided by conda {dist.conda}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envlock\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = "".join(f"{p},sha256={_b64(t.encode())},{len(t.encode())}\n"
                     for p, t in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)
    return write_file(dest / f"{stem}-py3-none-any.whl", buf.getvalue())


def stub_constraints(provided: dict[str, Provided], dest: Path) -> Path | None:
    """Write a stub wheel for each provided distribution into ``dest`` and a constraints file
    (``name @ file://…``, one a line) for ``uv pip compile -c``; ``None`` when there are none."""
    if not provided:
        return None
    lines = [f"{d.name} @ {_stub_wheel(dest, d).resolve().as_uri()}\n"
             for d in sorted(provided.values(), key=lambda d: d.name)]
    return write_file(dest / "conda-provided.txt", "".join(lines))


def check_direct(requirements: Sequence[str], provided: dict[str, Provided], where: str) -> None:
    """Refuse a ``pip:`` requirement that contradicts what conda provides (PEP 440 specifiers,
    PEP 508 parsing by packaging; option lines, unreadable ones and ones with a marker are left
    to uv, which resolves them against the same conda facts).

    :raises LockError: one line naming the pip requirement and the conda package.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        dist = provided.get(canonicalize_name(req.name))
        if dist is None or req.marker is not None:
            continue  # a marker is the target's to evaluate: uv does, with the constraint
        if req.url:
            raise LockError(
                f"{where}: pip requirement {line!r} conflicts with conda package {dist.conda}, "
                f"which provides {dist.name} {dist.version}; one environment holds one "
                f"{dist.name}: drop one of the two"
            )
        if not req.specifier.contains(dist.version, prereleases=True):
            raise LockError(
                f"{where}: pip requirement {line!r} conflicts with conda package {dist.conda} "
                f"({dist.name} {dist.version}); change the pip pin or the conda one"
            )


def pip_entries(
    spec: Any,
    platform: str,
    records: Sequence[Any],
    target: str,
    index: IndexOptions,
    runner: Runner,
) -> list[Entry]:
    """The ``pip:`` section of ``spec`` (an :class:`envlock.lock._spec.EnvSpec`) resolved by
    uv for ``platform`` (uv's ``--python-platform`` ``target``) against the conda solution
    ``records``: what conda provides is a fact (this module's docstring), pip adds the rest.

    :returns: the pip entries of the lock (conda-lock's ``manager: pip``).

    :raises LockError: a pip requirement contradicts a conda package (one line naming both), or
        uv finds no solution with the conda packages (uv's explanation, and what conda fixed).
    """
    import tempfile

    from packaging.utils import canonicalize_name

    from envlock.lock import _condalock, _pip
    from envlock.manifest._toml import loads

    python = next((r for r in records if r.name == "python"), None)
    if python is None:
        raise LockError(f"{spec.path}: the pip: section needs python among the conda packages")
    provided = provided_dists(records)
    check_direct(spec.pip, provided, f"{spec.path} ({platform})")
    with tempfile.TemporaryDirectory(prefix="envlock-conda-dists-") as tmp:
        constraints = stub_constraints(provided, Path(tmp))
        try:
            text = _pip.compile_requirements(
                list(spec.pip), index=index, python_version=str(python.version),
                python_platform=target, runner=runner,
                extra=["-c", str(constraints)] if constraints else (),
                what=f"the pip: section of {spec.path}",
            )
        except SolveError as exc:
            if not provided:
                raise
            fixed = ", ".join(f"{d.name} {d.version} (conda {d.conda})"
                              for d in sorted(provided.values(), key=lambda d: d.name))
            raise SolveError(f"{exc}\nconda provides, for {platform}: {fixed}") from None

    out = []
    for pkg in loads(text, name="uv's pylock.toml").get("packages", []):
        if canonicalize_name(pkg["name"]) in provided:
            continue  # conda's: locked as the conda package
        files = pkg.get("wheels") or ([pkg["sdist"]] if "sdist" in pkg else [])
        files = [f for f in files if "url" in f]
        if not files:
            raise LockError(f"uv locked {pkg['name']} without a download URL; cannot write it")
        first = files[0]
        out.append(_condalock.Entry(
            manager="pip", name=pkg["name"], version=pkg["version"], platform=platform,
            url=first["url"], sha256=first.get("hashes", {}).get("sha256"),
        ))
    return out
