"""What ``envlock lock`` and ``envlock restore`` do, as library calls (issue 27: the CLI only
parses, calls these and renders).

* :func:`write_lockfiles` — the one entry of ``envlock lock``: exactly one of a target
  environment, a manifest, an ``environment.yml`` or a requirements file, locked;
* :func:`restore` — ``envlock restore``: the plan, and with ``run`` the build and its check;
  :func:`apply_restore` runs a plan already shown (the CLI says what ``--run`` contacts first);
* :func:`index_options`, :func:`variant_map`, :func:`beside` — the values the options name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvlockError
import envlock.lock as api
import os

if TYPE_CHECKING:
    from envlock.lock._apply import RestoreCheck
    from envlock.lock._output import LockResult
    from envlock.lock._pip import IndexOptions
    from envlock.lock._plan import RestorePlan

__all__ = ["write_lockfiles", "restore", "apply_restore", "Restored", "index_options",
           "variant_map", "beside", "check_python_version"]


def check_python_version(value: str | None) -> str | None:
    """``value`` when it is a Python version uv's ``--python`` takes as one (``3``, ``3.12``,
    ``3.12.3``), or ``None``.

    :raises EnvlockError: anything else (one line).
    """
    if value is not None and not re.fullmatch(r"\d{1,2}(\.\d{1,3}){0,2}", value):
        raise EnvlockError(f"{value!r} is not a Python version (e.g. 3.12 or 3.12.3)")
    return value


def index_options(index_url: str | None = None, extra_index_urls: Sequence[str] = (),
                  find_links: Sequence[str] = (), no_index: bool = False) -> IndexOptions | None:
    """The :class:`~envlock.lock._pip.IndexOptions` the command line gives, ``None`` when it
    gives none (the target's pip configuration then applies)."""
    from envlock.lock._pip import IndexOptions  # the uv layer, when locking

    if not (index_url or extra_index_urls or find_links or no_index):
        return None
    return IndexOptions(index_url=index_url, extra_index_urls=tuple(extra_index_urls),
                        find_links=tuple(find_links), no_index=no_index, source="command line")


def variant_map(values: Sequence[str]) -> dict[str, str]:
    """``--index VARIANT=URL`` values as a map (``cu130`` → URL; a leading ``+`` dropped).

    :raises EnvlockError: a value that is not ``VARIANT=URL``.
    """
    out = {}
    for value in values:
        label, sep, url = value.partition("=")
        if not sep or not label.strip() or not url.strip():
            raise EnvlockError(f"--index {value!r}: expected VARIANT=URL, e.g. "
                               "cu130=https://download.pytorch.org/whl/cu130")
        out[label.strip().lstrip("+")] = url.strip()
    return out


def write_lockfiles(out_dir: str | Path = ".", *, from_env: bool = False,
                    from_manifest: str | Path | None = None, spec: str | Path | None = None,
                    requirements: str | Path | None = None, python: str | None = None,
                    prefix: str | None = None, index: IndexOptions | None = None,
                    index_map: Mapping[str, str] | None = None, force: bool = False,
                    use_pip_config: bool = True, platforms: Sequence[str] = (),
                    solver: str = "auto", channels: Sequence[str] = (),
                    virtual_package_spec: str | None = None, cuda: str | None = None,
                    without_cuda: bool = False, python_version: str | None = None,
                    requirements_txt: bool = False, allow_index: Sequence[str] = (),
                    trust_lockfile_indexes: bool = False) -> LockResult:
    """Lock one source into ``out_dir`` — what ``envlock lock`` does.

    The source is exactly one of: the target environment (``from_env``, or ``python``/
    ``prefix`` alone: :func:`envlock.lock.lock_environment`), a manifest (``from_manifest``:
    :func:`envlock.lock.lock_from_manifest`), an ``environment.yml`` (``spec``:
    :func:`envlock.lock.lock_spec`) or a requirements file/``pyproject.toml``
    (``requirements``: :func:`envlock.lock.lock_requirements`); the other parameters are
    those functions'.  ``cuda``/``without_cuda``: the ``__cuda`` virtual package assumed.

    :raises EnvlockError: not exactly one source, both ``cuda`` and ``without_cuda``, or a bad
        ``python_version``; and what the chosen function raises.
    """
    from_env = from_env or bool((python or prefix) and not (spec or requirements or from_manifest))
    if sum((bool(from_env), bool(spec), bool(requirements), bool(from_manifest))) != 1:
        raise EnvlockError("give exactly one of --from-env, --from-manifest, -f/--file, "
                           "-r/--requirements")
    if cuda and without_cuda:
        raise EnvlockError("give either --with-cuda or --without-cuda, not both")
    check_python_version(python_version)
    if from_manifest:
        return api.lock_from_manifest(
            from_manifest, out_dir, index_map=dict(index_map or {}),
            index_url=index.index_url if index else None,
            find_links=index.find_links if index else (),
            no_index=index.no_index if index else False, force=force, python=python)
    if from_env:
        return api.lock_environment(out_dir, python=python, prefix=prefix, index=index,
                                    use_pip_config=use_pip_config, force=force)
    if spec:
        return api.lock_spec(spec, out_dir, platforms=platforms, solver=solver, channels=channels,
                             virtual_package_spec=virtual_package_spec,
                             cuda="" if without_cuda else cuda, index=index, force=force,
                             allow_index=allow_index, trust_lockfile_indexes=trust_lockfile_indexes)
    assert requirements is not None
    return api.lock_requirements(requirements, out_dir, python=python, python_version=python_version,
                                 requirements_txt=requirements_txt, index=index, force=force,
                                 allow_index=allow_index,
                                 trust_lockfile_indexes=trust_lockfile_indexes)


def beside(first: str | Path) -> str:
    """A new directory beside ``first``: ``<stem>-restored``, ``-restored-2``, … (the default
    target of ``envlock restore``)."""
    path = Path(first).resolve()
    stem = path.name.split(".")[0] or "env"
    for n in range(1, 1000):
        candidate = path.parent / (f"{stem}-restored" + (f"-{n}" if n > 1 else ""))
        if not candidate.exists():
            return str(candidate)
    return str(path.parent / f"{stem}-restored")


@dataclass(frozen=True)
class Restored:
    """What :func:`restore` did.

    :ivar plan: the :class:`~envlock.lock._plan.RestorePlan` (steps, contacts, notes, …).
    :ivar ran: whether it was built; ``lines``: what the build said, in order.
    :ivar check: the restored environment against the manifest, or against the pylock it was
        built from (:class:`~envlock.lock._apply.RestoreCheck`); else ``None`` (a conda lock's
        prefix may hold no Python to ask).
    """

    plan: RestorePlan
    ran: bool = False
    lines: tuple[str, ...] = ()
    check: RestoreCheck | None = field(default=None)

    @property
    def exit_code(self) -> int:
        """``envlock restore``'s exit status: 1 when the rebuilt environment differs from the
        manifest, else 0."""
        return self.check.exit_code if self.check is not None else 0


def apply_restore(plan: RestorePlan) -> Restored:
    """Build the environment ``plan`` describes, then check it against its manifest (when it
    came from one).

    :raises LockError: a step failed (the partial environment is removed, see
        :func:`envlock.lock.run_plan`).
    """
    from envlock.lock._apply import run_plan, verify_restored

    lines = tuple(run_plan(plan))
    kinds = {s.kind for s in plan.steps}
    checkable = plan.manifests or ("pylock" in kinds and "conda-lock" not in kinds)
    check = verify_restored(plan) if checkable else None
    return Restored(plan, True, lines, check)


def restore(inputs: Sequence[str | Path], prefix: str | Path | None = None, *, run: bool = False,
            **options: Any) -> Restored:
    """Recreate an environment from a manifest or lockfiles — what ``envlock restore`` does.

    :param prefix: the environment to create (default :func:`beside` the first input).
    :param run: build it (and verify it against the manifest); else only plan.
    :param options: :func:`envlock.lock.plan_restore`'s keyword options (``python_version``,
        ``index_map``, ``index_url``, ``find_links``, ``no_index``, ``python``,
        ``allow_index``, ``trust_lockfile_indexes``).
    :raises ManifestError: an input restore cannot read; ``LockError``: a step failed.
    """
    from envlock.lock._restore import plan_restore

    check_python_version(options.get("python_version"))
    target = os.path.abspath(prefix or beside(inputs[0]))
    plan = plan_restore(inputs, target, **options)
    return apply_restore(plan) if run else Restored(plan)
