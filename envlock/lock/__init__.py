"""Lockfiles: ``conda-lock.yml`` (conda-lock's format) and ``pylock.toml`` (PEP 751).

Three ways in, one way out:

* :func:`lock_environment` — freeze an existing environment (``envlock lock --from-env``);
* :func:`lock_spec` — solve an ``environment.yml`` (``envlock lock -f``), with conda-lock
  when a conda executable exists, else py-rattler, offline against ``file://`` channels;
* :func:`lock_requirements` — resolve ``requirements.in``/``pyproject.toml`` with uv
  (``envlock lock -r``);
* :func:`lock_from_manifest` — the lockfiles of the environment a manifest describes, without
  building it (``envlock lock --from-manifest``);
* :func:`plan_restore` / :func:`run_plan` — the commands that recreate an environment
  (``envlock restore``);
* :func:`find_lockfiles` — the ``[lockfiles]`` table of a manifest;
* :func:`write_lockfiles` / :func:`restore` — ``envlock lock`` / ``envlock restore`` as one
  call each (:mod:`envlock.lock._api`).

The heavy tools (conda-lock, py-rattler, uv) are the optional extra ``envlock[lock]`` and are
imported only when a function needs them.  Importing this package imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock._run import Runner, run
from envlock.probes.lockfiles import find_lockfiles
from envlock.errors import LockError
from envlock._io import InputError, read_text
from envlock.errors import ManifestError
from envlock.manifest import load
import dataclasses
import importlib

if TYPE_CHECKING:
    from envlock.lock._output import LockResult
    from envlock.lock._pip import IndexOptions, Skipped
    from envlock.lock._plan import RestorePlan, Step

#: Names this package exports lazily, and the module that defines each.
_LAZY = {
    "IndexOptions": "_pip",
    "Skipped": "_pip",
    "LockResult": "_output",
    "RestorePlan": "_plan",
    "Step": "_plan",
    "plan_restore": "_restore",
    "run_plan": "_apply",
    "verify_restored": "_apply",
    "RestoreCheck": "_apply",
    "find_python": "_from_manifest",
    "write_lockfiles": "_api",
    "restore": "_api",
    "apply_restore": "_api",
    "Restored": "_api",
    "index_options": "_api",
    "variant_map": "_api",
}

__all__ = [
    "IndexOptions",
    "LockResult",
    "Skipped",
    "RestorePlan",
    "Step",
    "find_lockfiles",
    "lock_environment",
    "lock_spec",
    "lock_requirements",
    "lock_from_manifest",
    "plan_restore",
    "run_plan",
    "verify_restored",
    "RestoreCheck",
    "find_python",
    "write_lockfiles",
    "restore",
    "apply_restore",
    "Restored",
    "index_options",
    "variant_map",
]


def lock_environment(
    out_dir: str | Path,
    *,
    python: str | None = None,
    prefix: str | None = None,
    index: IndexOptions | None = None,
    use_pip_config: bool = True,
    force: bool = False,
    runner: Runner = run,
) -> LockResult:
    """Freeze the target environment into ``conda-lock.yml`` and/or ``pylock.toml``.

    :param out_dir: directory for the lockfiles (created if needed).
    :param python: the target interpreter; ``prefix``: its prefix (as ``envlock snapshot``).
    :param index: pip index options for uv; ``None``: the target's pip configuration.
    :param use_pip_config: read the target's pip configuration when ``index`` is ``None``.
    :param force: replace existing lockfiles.
    :raises TargetError: no such target.
    :raises OutputExistsError: a lockfile exists and ``force`` is false.
    :raises LockError: uv cannot find an installed version; :raises MissingDependencyError:
        ``envlock[lock]`` is not installed.
    """
    from envlock.probes.assemble import snapshot
    from envlock.lock._fromenv import lock_manifest

    # A lock needs the packages and the interpreter, not the GPU, driver or loader probes.
    manifest = snapshot(python=python, prefix=prefix, runner=runner, command=(), stack=False,
                        libraries=False)
    return lock_manifest(manifest, Path(out_dir), index=index, use_pip_config=use_pip_config,
                         force=force, runner=runner)


def lock_spec(
    spec: str | Path,
    out_dir: str | Path,
    *,
    platforms: Sequence[str] = (),
    solver: str = "auto",
    channels: Sequence[str] = (),
    virtual_package_spec: str | Path | None = None,
    cuda: str | None = None,
    index: IndexOptions | None = None,
    force: bool = False,
    runner: Runner = run,
    environ: dict[str, str] | None = None,
    allow_index: Sequence[str] = (),
    trust_lockfile_indexes: bool = False,
) -> LockResult:
    """Solve a conda ``environment.yml`` into ``<out_dir>/conda-lock.yml``.

    :param platforms: target platforms; default: the file's ``platforms:``, else this machine's.
    :param solver: ``"auto"`` (conda-lock if a conda/mamba/micromamba executable exists, else
        py-rattler), ``"conda-lock"`` or ``"rattler"``.
    :param channels: replace the file's channels.
    :param virtual_package_spec: conda-lock virtual-package spec file (``__cuda``, ``__glibc``).
    :param cuda: ``__cuda`` version to assume (``""``: none), as conda-lock's ``--with-cuda``.
    :param allow_index, trust_lockfile_indexes: admit indexes the file's ``pip:`` section names
        (docs/trust.md; :func:`envlock.lock._sources.check_admitted`).
    :raises UntrustedValueError: a dependency, channel or ``pip:`` line of the file is not what
        it must be, or the ``pip:`` section names an index not admitted; nothing was run.
    :raises SolveError: unsatisfiable (the solver's explanation); nothing is written.
    :raises ManifestError: malformed spec; :raises LockError: channel unreachable.
    """
    from envlock.formats.conda import current_subdir
    from envlock.lock import _spec, _tools
    from envlock.lock._output import LockResult, write_all

    spec = Path(spec)
    out = Path(out_dir) / "conda-lock.yml"
    first = _spec.read_environment_yml(spec)  # every value checked (docs/trust.md)
    _admit(_sources_of_spec(first, spec), spec, index, allow_index, trust_lockfile_indexes)
    if not platforms:
        platforms = first.platforms or (current_subdir(),)
    for p in platforms:
        if p not in _spec.PLATFORMS:
            raise LockError(f"unknown platform {p!r} (known: {', '.join(_spec.PLATFORMS)})")
    exe = _tools.conda_executable(environ) if solver in ("auto", "conda-lock") else None
    if solver == "conda-lock" and exe is None:
        raise LockError("--solver conda-lock needs conda, mamba or micromamba on PATH")
    said: list[str] = []
    if exe is not None:
        import tempfile

        from envlock.lock._unpinned import unpinned_spec

        _spec.read_environment_yml(spec, platforms[0])  # fail early, with our message
        with tempfile.TemporaryDirectory(prefix="envlock-conda-lock-") as tmp, \
                unpinned_spec(spec, platforms, channels) as (given, dropped):
            tmp_lock = Path(tmp) / "conda-lock.yml"
            argv = _spec.conda_lock_command(given, platforms, tmp_lock, exe, channels=channels,
                                            virtual_package_spec=virtual_package_spec, cuda=cuda)
            text = _spec.solve_with_conda_lock(argv, tmp_lock, runner=runner)
            text = text.replace(given.name, spec.name)  # metadata.sources: the user's file
        if dropped:  # the py-rattler path's sentence (render_spec_lock)
            said.append(f"channel pins dropped (-c replaces the file's channels): "
                        f"{', '.join(dropped)}")
        note = f"solved by conda-lock with {exe}"
    else:
        text = _spec.render_spec_lock(spec, platforms, out, channels=channels,
                                      virtual_package_spec=virtual_package_spec, cuda=cuda,
                                      index=index, runner=runner, notes=said)
        note = "solved by py-rattler (no conda executable needed)"
    files = write_all({out: text}, force=force)
    return LockResult(files=files, notes=(note, f"platforms: {', '.join(platforms)}",
                                          *said))


def _sources_of_spec(env: Any, spec: Path) -> Any:
    from envlock.lock._sources import pip_section_sources

    return pip_section_sources(env.pip, spec)


def _admit(sources: Any, path: Path, index: IndexOptions | None, allow_index: Sequence[str],
           trust: bool) -> None:
    """Refuse indexes a file brings that the user did not admit (docs/trust.md)."""
    from envlock.lock._sources import check_admitted, user_indexes

    given = [*allow_index]
    if index is not None:
        given += [*(u for u in (index.index_url,) if u), *index.extra_index_urls,
                  *index.find_links]
    check_admitted(sources, path, user_indexes(given), trust, command="lock")


def _check_requirements_input(source: Path) -> None:
    """What uv is given must be what ``-r`` means: a regular, readable, UTF-8 file (no FIFO, no
    64 MiB blob: :mod:`envlock._io`) that says something — a ``pyproject.toml`` (uv reads no
    other ``.toml`` as requirements) or a requirements file with at least one requirement.

    :raises ManifestError: one line naming the file and what is wrong.
    """

    try:
        text = read_text(source, limit=8 * 1024 * 1024)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    if source.suffix == ".toml" and source.name != "pyproject.toml":
        raise ManifestError(f"{source}: -r takes a requirements file or a pyproject.toml "
                            "(for a pylock.toml, use `envlock restore`)")
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    if not any(lines):
        raise ManifestError(f"{source}: no requirement in it (empty, or only comments)")


def lock_requirements(
    source: str | Path,
    out_dir: str | Path,
    *,
    python: str | None = None,
    python_version: str | None = None,
    requirements_txt: bool = False,
    index: IndexOptions | None = None,
    force: bool = False,
    runner: Runner = run,
    allow_index: Sequence[str] = (),
    trust_lockfile_indexes: bool = False,
) -> LockResult:
    """Resolve ``requirements.in`` or ``pyproject.toml`` with uv into a hash-pinned lock.

    The file is read first as uv would read it (:func:`envlock.lock._sources.
    lock_input_sources`): a requirement that is not one, an option uv would follow (``-r``,
    ``-e``, ``-c``), a dynamic ``pyproject.toml`` (uv would run its build backend) or
    ``[tool.uv.sources]`` is refused, and an index the file names is used only when the user's
    configuration names it or ``allow_index``/``trust_lockfile_indexes`` admit it
    (docs/trust.md).

    :param requirements_txt: write ``requirements.txt`` (with ``--hash`` lines and the index
        options) instead of ``pylock.toml``.
    :raises UntrustedValueError: as above; nothing was run.
    :raises SolveError: no solution (uv's explanation); :raises LockError: uv failed.
    """
    from envlock.lock import _pip
    from envlock.lock._output import LockResult, now, pylock_text, write_all
    from envlock.lock._pip import IndexOptions

    from envlock.lock._sources import lock_input_sources

    source = Path(source)
    _check_requirements_input(source)
    _admit(lock_input_sources(source), source, index, allow_index, trust_lockfile_indexes)
    index = index or IndexOptions(source="uv defaults (PyPI)")
    fmt = "requirements.txt" if requirements_txt else "pylock.toml"
    if requirements_txt:
        index_args = ["--emit-index-url", "--emit-find-links"]
        text = _pip.compile_requirements(source, index=index, python=python,
                                         python_version=python_version, fmt=fmt, runner=runner,
                                         extra=index_args)
        text = (f"# Locked by envlock from {source.name} with uv; install with:\n"
                f"#   uv pip install --require-hashes -r requirements.txt\n{text}")
    else:
        uv_out = _pip.compile_requirements(source, index=index, python=python,
                                           python_version=python_version, runner=runner)
        tool: dict[str, Any] = {"source": f"envlock lock -r {source.name}", "created": now(),
                                **index.to_table()}
        text = pylock_text(uv_out, tool=tool, header=(
            f"Locked by envlock from {source.name} with uv.\n"
            "Install with: uv pip install -r pylock.toml"))
    files = write_all({Path(out_dir) / fmt: text}, force=force)
    return LockResult(files=files, notes=(f"pip index options from {index.source}",))


def lock_from_manifest(
    manifest: str | Path,
    out_dir: str | Path,
    *,
    index_map: dict[str, str] | None = None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    no_index: bool = False,
    force: bool = False,
    runner: Runner = run,
    python: str | None = None,
) -> LockResult:
    """Write ``conda-lock.yml``/``pylock.toml`` for the environment a manifest records.

    The manifest is data (docs/trust.md): every value that reaches uv or the lockfiles is
    checked first (:func:`envlock.lock._from_manifest.check_pip_package`, conda specs and URLs),
    and the interpreter it names is never run: uv resolves for ``python`` (``--python``, the
    user's choice) or else for the recorded ``[python] version`` (``--python-version``).

    Nothing is built: conda packages are pinned to their recorded URLs and hashes, pip
    packages to their recorded versions, which uv finds (``--no-deps``) on the indexes given,
    PyTorch's per-variant index for ``+cpu``/``+cuXYZ`` versions unless ``index_map`` names
    another (see :func:`envlock.lock._from_manifest.variant_index`), and hashes.  The target's pip
    configuration is not read (the manifest may come from another machine).

    :raises ManifestError: unreadable manifest; :raises LockError: uv cannot find a recorded
        version (wrong index options?); :raises OutputExistsError: a lockfile exists.
    """
    from envlock.lock._fromenv import lock_manifest
    from envlock.lock._from_manifest import index_options

    m = load(str(manifest))
    opts, notes, warnings = index_options(m, index_map or {}, index_url, find_links, no_index)
    result = lock_manifest(m, Path(out_dir), index=opts, use_pip_config=False, force=force,
                           runner=runner, how=f"envlock lock --from-manifest {Path(manifest).name}",
                           untrusted=True, python=python)

    return dataclasses.replace(result, notes=(*result.notes, *notes,
                                              *(f"warning: {w}" for w in warnings)))


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envlock.lock' has no attribute {name!r}")

    return getattr(importlib.import_module(f"envlock.lock.{module}"), name)
