"""Package checks: the installed distributions against the manifest and lockfiles, conda records
overwritten by pip (C11), distributions shadowed on ``sys.path``, the Python version.

Finding ids: ``packages.overwritten-by-pip``, ``packages.shadowed``, ``packages.metadata-error``,
``python.version-mismatch``, ``python.unusable``, and those of the comparison
(:mod:`envlock.verify.checks.versions`: ``packages.missing``, ``packages.extra``,
``packages.version-mismatch``, ``packages.build-mismatch``, ``packages.group-not-installed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import os

from envlock.findings import Finding
from envlock.verify.checks.versions import compare, describe_build, same_version
from envlock.verify.checks.versions import install_fix as _install_fix  # also its name before the split

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = [
    "check_manifest_packages",
    "check_lock_packages",
    "check_overwritten",
    "check_shadowed",
    "check_python_version",
    "describe_build",
    "same_version",
]



def _live_pip(ctx: Context, *, skip_conda_owned: bool) -> dict[str, tuple[str, None, None]]:
    return {p.name: (p.version, None, None) for p in ctx.live.pip.packages
            if not (skip_conda_owned and p.origin == "conda")}


def _live_conda(ctx: Context) -> dict[str, tuple[str, str | None, str | None]]:
    conda = ctx.live.conda
    if conda is None:
        return {}
    return {c.name: (c.pip_version if c.overwritten_by_pip and c.pip_version else c.version, c.build, c.md5)
            for c in conda.packages}


def check_manifest_packages(ctx: Context) -> list[Finding]:
    """Installed packages against the manifest's ``[pip]`` and ``[conda]`` tables."""
    m = ctx.expected.manifest
    if m is None or (m.pip is None and m.conda is None):
        return []
    source = f"the manifest ({os.path.basename(ctx.expected.manifest_path or 'manifest')})"
    out: list[Finding] = []
    both_conda = m.conda is not None and ctx.live.conda is not None
    if both_conda:
        exp = {c.name: (c.pip_version if c.overwritten_by_pip and c.pip_version else c.version, c.build, c.md5)
               for c in m.conda.packages}
        out += compare(exp, _live_conda(ctx), source=source, kind="conda")
    if m.pip is not None:
        exp_pip = {p.name: (p.version, None, None) for p in m.pip.packages
                   if not (both_conda and p.origin == "conda")}
        out += compare(exp_pip, _live_pip(ctx, skip_conda_owned=both_conda), source=source, kind="pip",
                        python=ctx.live.target.python)
    return out


def _pixi_selection(lock: Any, source: str) -> Finding:
    """Which environment and platform of a pixi.lock were read, when it has several
    (:mod:`envlock.verify.pixichoice`)."""
    return Finding(
        id="packages.lock-selection", severity="info",
        title=f"{source} read for environment {lock.pixi_environment}, platform "
              f"{lock.lock_platform or lock.platform} ({lock.platform})",
        cause=f"{source} locks several environments or several platforms of "
              f"{lock.platform}; the target is compared with this one's packages and virtual "
              "packages.",
        evidence=lock.selection,
        fix=("Name the install with --environment NAME (pixi install -e NAME) and "
             "--platform NAME (a name of the lock's platforms list).",),
    )


def check_lock_packages(ctx: Context) -> list[Finding]:
    """Installed packages against each ``--lock`` file."""
    out: list[Finding] = []
    for lock in ctx.expected.locks:
        source = f"lockfile {os.path.basename(lock.path)}"
        if lock.selection:
            out.append(_pixi_selection(lock, source))
        mismatch = _lock_target_mismatch(ctx, lock, source)
        if mismatch is not None:
            out.append(mismatch)
            continue  # its packages are another target's: comparing them says nothing more
        conda_entries = {p.name: (p.version, p.build, p.md5) for p in lock.packages if p.manager == "conda"}
        pip_entries, optional, chose = _for_target(ctx, lock, source)
        if chose is not None:
            out.append(chose)
        conda_optional = _conda_optional(ctx, [p for p in lock.packages if p.manager == "conda"])
        group_fix = _group_fix(lock)
        live_conda = _live_conda(ctx)
        if conda_entries:
            if not live_conda:
                out.append(Finding(
                    id="packages.missing", severity="error",
                    title=f"{source} holds conda packages but the target is not a conda environment",
                    cause=f"The target {ctx.live.target.prefix} has no conda-meta/ directory.",
                    evidence=(f"target kind: {ctx.live.target.kind}",
                              f"{len(conda_entries)} conda packages in {lock.path}"),
                    fix=("Point verify at the conda prefix (--prefix), or create it from the lock "
                         "(envlock restore / conda-lock install).",),
                ))
            else:
                out += compare(conda_entries, live_conda, source=source, kind="conda",
                                optional=conda_optional, group_fix=group_fix)
        if pip_entries or lock.kind == "pylock":
            live = _live_pip(ctx, skip_conda_owned=bool(conda_entries and live_conda))
            # Distributions conda installed are conda's to account for, not a pip lock's extras.
            conda_owned = frozenset(p.name for p in ctx.live.pip.packages if p.origin == "conda")
            # The project itself (an editable or local-directory install, a workspace member
            # of the lock) is what the lock was made for, not a package of it.
            projects = frozenset(lock.projects) | frozenset(
                p.name for p in ctx.live.pip.packages if p.origin in ("editable", "directory"))
            out += compare(pip_entries, live, source=source, kind="pip",
                            extras=lock.kind == "pylock" or not conda_entries,
                            not_extra=conda_owned | projects, optional=optional,
                            python=ctx.live.target.python, group_fix=group_fix)
    return out


def _group_fix(lock: Any) -> str:
    """How to install (and verify with) the groups a lock's default install leaves out."""
    if lock.kind == "conda-lock":
        return (f"If the job needs them, install those categories too (conda-lock install -E NAME "
                f"{os.path.basename(lock.path)}) and verify with the same -E NAME; a dev category "
                "left out is conda-lock install --no-dev (verify --no-dev).")
    return ("If the job needs them, install those groups too (uv sync --extra NAME / --group "
            "NAME; poetry install --with NAME; pdm install -G NAME) and verify with -E NAME.")


def _lock_target_mismatch(ctx: Context, lock: Any, source: str) -> Finding | None:
    """``packages.lock-target``: the lock is for another platform (a conda-lock's
    ``platforms``; the pixi.lock platform entry chosen with ``--platform``, whose subdir is
    not this machine's), another Python (``requires-python``, PEP 440) or other environments
    (pylock's ``environments`` markers, PEP 751), so none of its packages are this target's."""
    from envlock.formats.markers import marker_holds, target_marker_env
    from envlock.formats.conda import current_subdir

    py = ctx.live.python
    version = getattr(py, "version", None)
    why = evidence = None
    fix = "Lock for this target (envlock lock), or verify on a machine and Python the lock is for."
    here = current_subdir()
    if lock.lock_platform and lock.platform and lock.platform != here:  # pixi --platform p1
        why = (f"its platform {lock.lock_platform} is {lock.platform}; this machine is {here}")
        evidence = f"{lock.path}: platform {lock.lock_platform} (subdir {lock.platform})"
        fix = (f"Verify with a platform of the lock for {here} (--platform NAME of its "
               f"platforms list), or on a {lock.platform} machine.")
    elif lock.platforms and here not in lock.platforms:
        why = f"it locks {', '.join(lock.platforms)}; this machine is {here}"
        evidence = f"{lock.path}: platforms {', '.join(lock.platforms)}"
        fix = (f"Lock for {here} too from the spec it was locked from "
               f"(`conda-lock -f <environment.yml> -p {here}`, or `envlock lock -f "
               f"<environment.yml>` here), or verify on a machine of the lock's platform.")
    elif lock.requires_python and version:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            ok = SpecifierSet(lock.requires_python).contains(Version(version), prereleases=True)
        except (InvalidSpecifier, InvalidVersion, ValueError):
            ok = True  # cannot be told: say nothing
        if not ok:
            why = f"it requires Python {lock.requires_python}; the target's is {version}"
            evidence = f"{lock.path}: requires-python = {lock.requires_python!r}"
            fix = (f"Use an interpreter the lock allows (uv venv --python '{lock.requires_python}'), "
                   "or lock again with this Python's version in requires-python.")
    if why is None and lock.environments:
        env = target_marker_env(version, getattr(py, "implementation", None))

        def holds(m: str) -> bool:
            try:
                return marker_holds(m, env)
            except ValueError:
                return True
        if not any(holds(m) for m in lock.environments):
            why = (f"none of its environments holds here (Python {version or '?'} on "
                   f"{env.get('sys_platform')} {env.get('platform_machine')})")
            evidence = f"{lock.path}: environments = {list(lock.environments)!r}"
    if why is None:
        return None
    return Finding(
        id="packages.lock-target", severity="error",
        title=f"{source} is not for this target: {why}",
        cause="A lockfile pins the packages of the platforms and Python versions it was made "
              "for; on another one none of its pins applies, so nothing can match it.",
        evidence=tuple(e for e in (evidence, f"target: {ctx.live.target.prefix}") if e),
        fix=(fix,),
    )


def _conda_optional(ctx: Context, packages: list[Any]) -> dict[str, tuple[str, ...]]:
    """The conda entries of a lock that only a category not installed needs (name → groups:
    :func:`envlock.formats.markers.applicable`; the categories asked for with ``-E`` were made
    part of the default install when the lock was read, :func:`envlock.formats.locks.for_install`)."""
    from envlock.formats.markers import applicable, target_marker_env

    py = ctx.live.python
    return applicable(packages, target_marker_env(getattr(py, "version", None),
                                                  getattr(py, "implementation", None)))[1]


def _for_target(ctx: Context, lock: Any, source: str
                ) -> tuple[dict[str, tuple[str | None, None, None]], dict[str, tuple[str, ...]],
                           Finding | None]:
    """:func:`envlock.formats.markers.applicable` for the target interpreter and the extras
    and groups it was installed with, as ``_compare`` takes it, and the ``info`` finding
    ``packages.lock-selection`` that says which selection was read (given with ``--extra`` /
    ``--group`` / ``--all-extras`` / ``--no-dev``, as the lock's own tool takes them:
    ``lock.chosen``, :func:`envlock.formats.lockchoice.given_choice`; or inferred from what is
    installed: :func:`envlock.formats.markers.infer_selection`) when the lock has extras or
    groups."""
    from envlock.formats.markers import applicable, select_install, target_marker_env

    packages = [p for p in lock.packages if p.manager == "pip"]
    py = ctx.live.python
    env = target_marker_env(getattr(py, "version", None), getattr(py, "implementation", None))
    choices = sorted({g for p in packages for g, _m in p.groups if g})
    finding = None
    installed = {p.name: p.version for p in ctx.live.pip.packages}
    given = lock.chosen
    selection, how = select_install(packages, env, installed, ctx.expected.requested,
                                    conflicts=lock.conflicts, given=given)
    if selection is not None:
        shown = ", ".join(g.replace("extra:", "extra ") for g in choices)
        tool = given.tool if given is not None else "uv sync"
        read_for = selection.label() if tool == "uv sync" else given.said
        command = (f"`uv sync {selection.label()}`" if tool == "uv sync"
                   else f"`{tool} {given.words}`")
        finding = Finding(
            id="packages.lock-selection", severity="info",
            title=f"{source} read for {read_for} ({how})",
            cause=f"{source} locks the packages of several installs (its extras and groups: "
                  f"{shown}); the target is compared with the one {command} installs"
                  + (", the one closest to what is installed" if selection.inferred else "")
                  + ".",
            evidence=(*(f"conflicting, at most one installed: {', '.join(sorted(c))}"
                        for c in lock.conflicts), *(given.notes if given is not None else ())),
            fix=("Name the install to check: --extra NAME / --group NAME / --all-extras / "
                 f"--all-groups / --no-dev, as {tool} takes them (verify --help).",),
        )
    needed, optional = applicable(packages, env, selection, conflicts=lock.conflicts)
    return {n: (v, None, None) for n, v in needed.items()}, optional, finding


def check_overwritten(ctx: Context) -> list[Finding]:
    """Conda packages whose files another installer replaced (case C11)."""
    conda = ctx.live.conda
    if conda is None:
        return []
    by_name = {p.name: p for p in ctx.live.pip.packages}
    out = []
    for c in conda.packages:
        if not c.overwritten_by_pip:
            continue
        imported = by_name.get(c.name) or next(
            (p for p in ctx.live.pip.packages if c.python_dist and p.name in c.python_dist.lower()), None)
        installer = (imported.installer if imported and imported.installer else "pip")
        where = os.path.join(imported.location, imported.dist_info) if imported and imported.dist_info else None
        out.append(Finding(
            id="packages.overwritten-by-pip",
            severity="warning",
            title=f"conda package {c.name} {c.version} was overwritten by {installer}: Python imports "
                  f"{c.pip_version or '?'}",
            cause="Two installers own one package: conda-meta still records the conda version, so "
                  "conda, `conda env export` and conda lockfiles report a version that is not the one "
                  "imported, and a later conda transaction may break the other copy.",
            evidence=tuple(e for e in (
                f"conda-meta: {c.name}-{c.version}-{c.build}.json ({c.channel or 'unknown channel'})",
                f"its dist-info {c.python_dist} is gone" if c.python_dist else None,
                f"imported: {where} (INSTALLER {installer})" if where else None,
            ) if e),
            fix=(f"Let one installer own it: `pip uninstall {c.name}` then "
                 f"`conda install {c.name}={c.pip_version or c.version}`",
                 f"`conda remove --force {c.name}` and keep the {installer} copy"),
        ))
    return out


def check_shadowed(ctx: Context) -> list[Finding]:
    """Distributions hidden by an earlier copy on ``sys.path`` (user site, ``PYTHONPATH``),
    and distributions whose metadata cannot be read."""
    py = ctx.live.python
    user_site = getattr(py, "user_site", None)
    pythonpath = [p for p in ctx.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    out = []
    for p in ctx.live.pip.packages:
        if p.error:
            again = _install_fix(p.name, p.version, "pip", reinstall=True,
                                 python=ctx.live.target.python,
                                 has_pip=any(q.name == "pip" for q in ctx.live.pip.packages))
            if p.dist_info and not all("direct_url.json" in e for e in p.error.split("; ")):
                # the broken dist-info goes first: pip reads it to uninstall and fails on a
                # METADATA without Version (TypeError, pip 23.2), and a dangling link where the
                # dist-info is written fails either installer ("File exists"); the package's
                # files are written again by the install
                import shlex

                again = f"rm -r {shlex.quote(os.path.join(p.location, p.dist_info))} && {again}"
            out.append(Finding(
                id="packages.metadata-error", severity="warning",
                title=f"{p.name}: metadata unreadable at {p.location}",
                cause="A broken installation (interrupted install, broken symlink, corrupt METADATA); "
                      "importing or upgrading it may fail.",
                evidence=(p.error,),
                fix=(again,),
            ))
        if not p.shadowed:
            continue
        why = None
        if user_site and os.path.realpath(p.location) == os.path.realpath(user_site):
            why = "the user site-packages"
            fix = (f"export PYTHONNOUSERSITE=1 in the job script, or `pip uninstall --user {p.name}`",)
        elif any(os.path.realpath(p.location) == os.path.realpath(d) for d in pythonpath):
            why = "PYTHONPATH"
            fix = (f"unset PYTHONPATH (or remove {p.location} from it) in the job script",)
        else:
            fix = (f"remove the extra copy: `pip uninstall {p.name}` until one remains",)
        out.append(Finding(
            id="packages.shadowed",
            severity="warning",
            title=f"{p.name} {p.version} from {p.location} hides " + ", ".join(p.shadowed),
            cause="The first copy on sys.path wins at import"
                  + (f" ({why} comes before the environment)" if why else "")
                  + "; the environment's own copy is never used.",
            evidence=(f"imported: {p.name} {p.version} at {p.location}",
                      *(f"hidden: {s}" for s in p.shadowed)),
            fix=fix,
        ))
    return out


def check_python_version(ctx: Context) -> list[Finding]:
    """The interpreter answers, and its version matches the manifest's ``[python] version``."""
    py = ctx.live.python
    if py.status != "ok":
        return [Finding(
            id="python.unusable",
            severity="error",
            title=f"the target interpreter did not answer: {py.error}",
            cause="The job's `python` would fail the same way (missing, crashing, hanging: a broken "
                  "environment, a wrong PATH, a hung file system). Packages were read from the "
                  "prefix's site-packages instead.",
            evidence=(f"interpreter: {ctx.live.target.python or 'none'}", f"status: {py.status}",
                      f"sys.path fallback: {', '.join(py.path) or 'none'}"),
            fix=("Run the interpreter by hand (`<env>/bin/python -c pass`) and repair or recreate the "
                 "environment.",),
        )]
    m = ctx.expected.manifest
    exp = m.python.version if m is not None and m.python is not None else None
    live = py.version
    if not exp or not live or exp == live:
        return []
    major_minor_differs = exp.split(".")[:2] != live.split(".")[:2]
    return [Finding(
        id="python.version-mismatch",
        severity="error" if major_minor_differs else "warning",
        title=f"Python {live} runs; the manifest has {exp}",
        cause=("A different minor version: compiled extensions and pinned wheels differ."
               if major_minor_differs else "A different patch release of the same Python."),
        evidence=(f"interpreter: {ctx.live.python.executable or ctx.live.target.python}",
                  f"manifest: python {exp}"),
        fix=(f"Use a Python {'.'.join(exp.split('.')[:2])} environment.",),
    )]
