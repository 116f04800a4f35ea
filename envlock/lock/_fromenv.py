"""``envlock lock --from-env``: freeze an existing environment into lockfiles.

No solver runs for the conda part: every ``conda-meta`` record already holds the URL, md5,
sha256 and run dependencies of what is installed, and those are what ``conda-lock.yml``
pins.  The pip part is pinned to the installed versions and given to uv, which finds each
file and its hash (``--no-deps``: a freeze pins exactly what is there, nothing more).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from envlock._run import Runner, run
from envlock.errors import LockError
from envlock.lock import _condalock, _pip
from envlock.lock._output import LockResult, now, pylock_text, write_all
from envlock.lock._pip import IndexOptions, Skipped
from envlock.redact import redact_text_urls

if TYPE_CHECKING:
    from envlock.manifest import Manifest

__all__ = ["lock_manifest", "environment_platform"]


def environment_platform(manifest: Manifest) -> str:
    """The conda platform (subdir) of an environment: the commonest non-``noarch`` subdir of
    its conda packages, else this machine's (as py-rattler names it)."""
    subdirs = Counter(
        c.subdir for c in (manifest.conda.packages if manifest.conda else ()) if c.subdir
        and c.subdir != "noarch"
    )
    if subdirs:
        return subdirs.most_common(1)[0][0]
    import platform  # noqa: PLC0415

    machine = platform.machine()
    return {"x86_64": "linux-64", "aarch64": "linux-aarch64", "ppc64le": "linux-ppc64le"}.get(
        machine, f"linux-{machine}"
    )


def _conda_part(manifest: Manifest, source: str) -> tuple[str | None, list[Skipped], list[str]]:
    conda = manifest.conda
    if conda is None or not conda.packages:
        return None, [], []
    platform = environment_platform(manifest)
    entries, skipped, notes = [], [], []
    for pkg in conda.packages:
        try:
            entries.append(_condalock.entry_from_conda_package(pkg, platform))
        except LockError as exc:
            skipped.append(Skipped(name=pkg.name, version=pkg.version, kind="not-reproducible",
                                   reason=str(exc)))
            continue
        if pkg.overwritten_by_pip:
            notes.append(
                f"conda package {pkg.name} {pkg.version} was overwritten by pip "
                f"({pkg.pip_version}); conda-lock.yml installs {pkg.version}, then pylock.toml "
                f"installs {pkg.pip_version} over it, as in the environment"
            )
    private = sorted({e.url.rsplit("/", 2)[0] for e in entries if _condalock.TOKEN_VAR in e.url})
    if private:
        notes.append(
            f"private channel {', '.join(private)}: its token is not written; set "
            f"{_condalock.TOKEN_VAR} to it before installing conda-lock.yml"
        )
    channels: list[str] = []
    for e in entries:
        base = e.url.rsplit("/", 2)[0]
        if base not in channels:
            channels.append(base)
    lines = sorted(f"{e.name} {e.version} {e.build} {e.url}" for e in entries)
    text = _condalock.render(
        entries,
        platforms=[platform],
        channels=channels,
        sources=[source],
        content_hashes={platform: _condalock.content_hash(lines)},
        custom={"envlock-source": "envlock lock --from-env", "envlock-created": now()},
    )
    return text, skipped, notes


def lock_manifest(
    manifest: Manifest,
    out_dir: Path,
    *,
    index: IndexOptions | None = None,
    use_pip_config: bool = True,
    force: bool = False,
    runner: Runner = run,
) -> LockResult:
    """Write ``conda-lock.yml`` and/or ``pylock.toml`` for the environment a manifest describes.

    :param manifest: a snapshot of the target (``envlock.snapshot(...)`` or a loaded file).
    :param out_dir: directory for the lockfiles.
    :param index: index options for uv; when ``None`` and ``use_pip_config``, the target's pip
        configuration is read (uv does not read ``pip.conf``).
    :raises OutputExistsError: a lockfile exists and ``force`` is false.
    :raises LockError: uv cannot find an installed version (wrong index options?).
    :returns: what was written and what was left out.
    """
    texts: dict[Path, str] = {}
    notes: list[str] = []
    source = manifest.target.prefix
    conda_text, skipped, conda_notes = _conda_part(manifest, source)
    if conda_text is not None:
        texts[out_dir / "conda-lock.yml"] = conda_text
    notes += conda_notes
    python = manifest.target.python or (manifest.python.executable if manifest.python else None)
    pins: list[str] = []
    expected: dict[str, str] = {}
    for pkg in manifest.pip.packages if manifest.pip else ():
        req = _pip.requirement_for(pkg)
        if isinstance(req, Skipped):
            skipped.append(req)
        else:
            pins.append(req)
            expected[pkg.name] = pkg.version
    if pins:
        if index is None:
            found = None
            if use_pip_config and python:
                found = _pip.pip_config_index(python, runner=runner)
            index = found or IndexOptions(source="uv defaults (PyPI)")
        shown = " ".join(redact_text_urls(a) for a in index.uv_args()) or "none"
        notes.append(f"pip index options from {index.source}: {shown}")
        version = manifest.python.version if manifest.python else None
        usable = python is not None and Path(python).exists()
        uv_out = _pip.compile_requirements(
            pins, index=index, python=python if usable else None,
            python_version=None if usable else version, no_deps=True, runner=runner,
        )
        tool = {
            "source": "envlock lock --from-env",
            "environment": source,
            "created": now(),
            **index.to_table(),
        }
        if skipped:
            tool["not-locked"] = [s.to_table() for s in skipped]
        header = (
            f"Locked by envlock from the environment {source}.\n"
            "Install into a new environment with: uv pip install -r pylock.toml"
        )
        texts[out_dir / "pylock.toml"] = pylock_text(uv_out, tool=tool, header=header,
                                                      expected=expected)
    if not texts:
        raise LockError(f"{source}: no conda or pip packages found to lock")
    files = write_all(texts, force=force)
    return LockResult(files=files, skipped=tuple(skipped), notes=tuple(notes))
