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
from envlock.formats.conda import current_subdir
import re

if TYPE_CHECKING:
    from envlock.manifest import Manifest

__all__ = ["lock_manifest", "environment_platform", "check_complete", "check_interpreter"]


def environment_platform(manifest: Manifest) -> str:
    """The conda platform (subdir) of an environment: the commonest non-``noarch`` subdir of
    its conda packages, else this machine's
    (:func:`envlock.formats.conda.current_subdir`)."""
    subdirs = Counter(
        c.subdir for c in (manifest.conda.packages if manifest.conda else ()) if c.subdir
        and c.subdir != "noarch"
    )
    if subdirs:
        return subdirs.most_common(1)[0][0]

    return current_subdir()


def check_complete(manifest: Manifest) -> None:
    """Refuse to lock an environment that could not be read completely.

    A ``conda-meta`` record that cannot be parsed, or a ``.dist-info`` whose METADATA (or
    ``direct_url.json``, PEP 610) cannot be read, would silently drop its package from the
    lock, or pin it wrongly; the snapshot records these as ``[conda] status = "error"`` and in
    ``[envlock] warnings`` and as ``error`` of the pip entry.

    :param manifest: the snapshot of the target.
    :raises LockError: one line naming how many records are unreadable and the first of them.
    """
    where = manifest.target.prefix
    conda = manifest.conda
    if conda is not None and conda.status in ("error", "timeout"):
        meta = conda.source.rstrip("/") + "/" if conda.source else None
        bad = [w for w in (manifest.envlock.warnings if manifest.envlock else ())
               if meta is not None and w.startswith(meta)]
        if bad:
            first = bad[0]
            raise LockError(
                f"cannot lock {where}: {len(bad)} conda-meta record(s) could not be read "
                f"(first: {first}); the lock would lack their packages. Repair or reinstall "
                "them, then lock again"
            )
        raise LockError(f"cannot lock {where}: conda-meta could not be read completely "
                        f"({conda.error or conda.status}); the lock would be incomplete")
    pip = manifest.pip
    if pip is not None and pip.status in ("error", "timeout"):
        raise LockError(f"cannot lock {where}: its pip packages could not be read "
                        f"({pip.error or pip.status})")
    broken = [p for p in pip.packages if p.error] if pip is not None else []
    if broken:
        first_broken = broken[0]
        raise LockError(
            f"cannot lock {where}: {len(broken)} pip distribution(s) could not be read "
            f"(first: {first_broken.name}: {first_broken.error}); the lock would lack "
            "or mis-pin them. Reinstall them, then lock again"
        )


def check_interpreter(manifest: Manifest) -> tuple[str | None, str | None]:
    """Check that the target interpreter answered, before uv is asked to resolve for it.

    uv runs the interpreter given with ``--python`` to learn its version and tags; a hanging
    or broken one makes uv hang or fail with the interpreter's traceback.  The snapshot has
    already asked it (``[python] status``), so its answer decides here.

    :returns: ``(python, None)`` to resolve for that interpreter, or ``(None, version)`` for a
        manifest taken elsewhere whose interpreter is not on this machine (uv's
        ``--python-version``).
    :raises LockError: the interpreter is missing, did not answer in time or failed; one line.
    """
    info = manifest.python
    python = manifest.target.python or (info.executable if info else None)
    head = f"cannot lock the pip packages of {manifest.target.prefix}"
    if info is None or python is None or info.status == "absent":
        raise LockError(f"{head}: it has no Python interpreter to resolve them for")
    detail = (info.error or "").removeprefix(f"{python}: ").removeprefix(f"{python} ")
    if info.status == "timeout":
        m = re.search(r"within (\S+ s)", detail)
        within = f" within {m.group(1)}" if m else ""
        raise LockError(f"{head}: the target interpreter {python} did not answer{within}; "
                        f"check that `{python} -c pass` returns")
    if info.status != "ok":
        raise LockError(f"{head}: the target interpreter {python} does not run "
                        f"({detail or info.status})")
    if Path(python).exists():
        return python, None
    return None, info.version


def check_untrusted(manifest: Manifest) -> None:
    """Check every value of a manifest that ``lock --from-manifest`` puts into uv's input or a
    lockfile (docs/trust.md): each pip package (:func:`envlock.lock._from_manifest.
    check_pip_package`: PEP 508 name, VCS/archive URL, full commit), each conda package (an
    exact ``name=version=build``, its URL and subdir) and the recorded Python version.

    :raises UntrustedValueError: one line naming the field and the value; nothing was run.
    """
    from envlock._untrusted import (
        check_conda_spec,
        check_file_name,
        check_python_version,
        check_url,
    )
    from envlock.lock._from_manifest import check_pip_package

    for pkg in manifest.pip.packages if manifest.pip else ():
        if pkg.origin != "conda":
            check_pip_package(pkg)
    for c in manifest.conda.packages if manifest.conda else ():
        where = f"[[conda.packages]] {c.name!r}"
        check_conda_spec(c.name, c.version, c.build, where)
        if c.url:
            check_url(c.url, f"{where} url")
        if c.subdir:
            check_file_name(c.subdir, f"{where} subdir")
    if manifest.python is not None and manifest.python.version:
        check_python_version(manifest.python.version, "[python] version")


def _untrusted_interpreter(manifest: Manifest, python: str | None
                           ) -> tuple[str | None, str | None]:
    """What uv resolves for when the manifest is data: the user's ``--python``, else the
    recorded version; the manifest's own ``[target] python``/``[python] executable`` is never
    handed to uv (uv would run it to read its tags)."""
    if python:
        return python, None
    info = manifest.python
    if info is None or not info.version:
        raise LockError(f"cannot lock the pip packages of {manifest.target.prefix}: the manifest "
                        "records no Python version; give --python PATH to resolve for")
    return None, info.version


def _conda_part(manifest: Manifest, source: str, how: str = "envlock lock --from-env"
                ) -> tuple[str | None, list[Skipped], list[str]]:
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
        custom={"envlock-source": how, "envlock-created": now()},
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
    how: str = "envlock lock --from-env",
    untrusted: bool = False,
    python: str | None = None,
) -> LockResult:
    """Write ``conda-lock.yml`` and/or ``pylock.toml`` for the environment a manifest describes.

    :param manifest: a snapshot of the target (``envlock.snapshot(...)`` or a loaded file).
    :param out_dir: directory for the lockfiles.
    :param index: index options for uv; when ``None`` and ``use_pip_config``, the target's pip
        configuration is read (uv does not read ``pip.conf``).
    :param untrusted: the manifest is a file, maybe from someone else (``lock
        --from-manifest``; docs/trust.md): every value that reaches uv or the lockfiles is
        checked first (:func:`check_untrusted`), and the interpreter it names is never run —
        uv resolves for ``python`` if given, else for the recorded version.
    :param python: with ``untrusted``: the interpreter the user chose (``--python``).
    :raises OutputExistsError: a lockfile exists and ``force`` is false.
    :raises LockError: uv cannot find an installed version (wrong index options?).
    :raises UntrustedValueError: with ``untrusted``, a value is not what it must be; nothing
        was run.
    :returns: what was written and what was left out.
    """
    if untrusted:
        check_untrusted(manifest)
    check_complete(manifest)
    texts: dict[Path, str] = {}
    notes: list[str] = []
    source = manifest.target.prefix
    conda_text, skipped, conda_notes = _conda_part(manifest, source, how)
    if conda_text is not None:
        texts[out_dir / "conda-lock.yml"] = conda_text
    notes += conda_notes
    pins: list[str] = []
    expected: dict[str, str] = {}
    for pkg in manifest.pip.packages if manifest.pip else ():
        req = _pip.requirement_for(pkg)
        if isinstance(req, Skipped):
            skipped.append(req)
        else:
            pins.append(req)
            expected[pkg.name] = pkg.version
    if untrusted:
        from envlock._untrusted import check_requirement

        pins = [check_requirement(p, "[[pip.packages]] requirement") for p in pins]
    if pins:
        texts[out_dir / "pylock.toml"] = _pylock_part(
            manifest, pins, expected, skipped, notes, index=index, use_pip_config=use_pip_config,
            runner=runner, how=how, untrusted=untrusted, python=python)
    if not texts:
        if manifest.python is None or manifest.python.status != "ok":
            check_interpreter(manifest)  # the package list may be incomplete: say why
        raise LockError(f"{source}: no conda or pip packages found to lock")
    files = write_all(texts, force=force)
    return LockResult(files=files, skipped=tuple(skipped), notes=tuple(notes))


def _pylock_part(manifest: Manifest, pins: list[str], expected: dict[str, str],
                 skipped: list[Skipped], notes: list[str], *, index: IndexOptions | None,
                 use_pip_config: bool, runner: Runner, how: str, untrusted: bool,
                 python: str | None) -> str:
    """The ``pylock.toml`` text of the manifest's pip ``pins``, resolved by uv for its
    interpreter with ``index`` (else the target's pip configuration); appends the index note
    to ``notes``.

    :raises LockError: uv cannot find an installed version.
    """
    source = manifest.target.prefix
    if untrusted:
        python, version = _untrusted_interpreter(manifest, python)
    else:
        python, version = check_interpreter(manifest)
    if index is None:
        found = None
        if use_pip_config and python:
            found = _pip.pip_config_index(python, runner=runner)
        index = found or IndexOptions(source="uv defaults (PyPI)")
    shown = " ".join(redact_text_urls(a) for a in index.uv_args()) or "none"
    notes.append(f"pip index options from {index.source}: {shown}")
    uv_out = _pip.compile_requirements(
        pins, index=index, python=python, python_version=version, no_deps=True, runner=runner,
        what=f"the {len(pins)} installed pip package(s) of {source}", one_line=True,
    )
    tool = {
        "source": how,
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
    return pylock_text(uv_out, tool=tool, header=header, expected=expected)
