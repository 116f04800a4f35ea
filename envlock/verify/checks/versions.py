"""How an installed package compares with the version recorded for it: the comparison of the
package checks (:mod:`envlock.verify.checks.packages`), what a local version label means, and
the install command a fix names.

Finding ids: ``packages.missing``, ``packages.group-not-installed``, ``packages.extra``,
``packages.version-mismatch``, ``packages.build-mismatch``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from envlock.findings import Finding
from envlock.variants import pytorch_index_url

__all__ = ["TOOLING", "compare", "describe_build", "install_fix", "install_many", "same_version"]

#: Installer tooling: a different version does not change what the job computes.
TOOLING = frozenset({"pip", "setuptools", "wheel", "uv", "envlock", "distribute"})
_LIST = 6  # names shown in a title before "+N more"


def describe_build(label: str | None) -> str | None:
    """Say what a local version label means for GPU frameworks' wheels.

    >>> describe_build("cpu"), describe_build("cu130"), describe_build("rocm6.1")
    ('CPU-only build', 'CUDA 13.0 build', 'ROCm 6.1 build')
    """
    if not label:
        return None
    if label.startswith("cpu"):
        return "CPU-only build"
    m = re.fullmatch(r"cu(\d+)(\d)", label)
    if m:
        return f"CUDA {m.group(1)}.{m.group(2)} build"
    m = re.fullmatch(r"rocm([\d.]+)", label)
    if m:
        return f"ROCm {m.group(1)} build"
    return f"local build +{label}"


def _split_local(version: str) -> tuple[str, str | None]:
    public, _, local = version.partition("+")
    return public, local or None


def same_version(a: str, b: str) -> bool:
    """Equal as strings, or as PEP 440 versions (``"1.0"`` == ``"1.0.0"``); packaging is only
    imported when the strings differ."""
    if a == b:
        return True
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging is a dependency
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


def _names(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(items[:_LIST])
    return shown + (f" (+{len(items) - _LIST} more)" if len(items) > _LIST else "")


def compare(
    expected: Mapping[str, tuple[str | None, str | None, str | None]],
    live: Mapping[str, tuple[str, str | None, str | None]],
    *,
    source: str,
    kind: str,
    extras: bool = True,
    not_extra: frozenset[str] = frozenset(),
    optional: Mapping[str, tuple[str, ...]] | None = None,
    python: str | None = None,
    group_fix: str | None = None,
) -> list[Finding]:
    """Compare ``{name: (version, build, md5)}`` maps; ``kind`` is ``"pip"`` or ``"conda"``.

    :param source: the expected side as the findings name it (``the manifest (m.toml)``).
    :param extras: report installed packages ``expected`` does not list (less :data:`TOOLING`
        and ``not_extra``).
    :param optional: entries of ``expected`` that only a dependency group or an extra needs
        (name → groups): not installed, they are an ``info``, not ``packages.missing``;
        ``group_fix``: the fix it names (how to install those groups).
    :param python: the target interpreter, named by the install commands of the fixes.
    :returns: the findings: not installed, then one per mismatched name (sorted), then extra.
    """
    optional = optional or {}
    has_pip = "pip" in live
    out = _not_installed(expected, live, source=source, kind=kind, optional=optional,
                         group_fix=group_fix, python=python, has_pip=has_pip)
    for name in sorted(n for n in expected if n in live):
        found = _mismatch(name, expected[name], live[name], source=source, kind=kind,
                          python=python, has_pip=has_pip)
        if found is not None:
            out.append(found)
    if extras:
        out += _extra(expected, live, source=source, kind=kind, not_extra=not_extra)
    return out


def _not_installed(expected: Mapping[str, tuple[str | None, str | None, str | None]],
                   live: Mapping[str, tuple[str, str | None, str | None]], *, source: str,
                   kind: str, optional: Mapping[str, tuple[str, ...]], group_fix: str | None,
                   python: str | None = None, has_pip: bool = True) -> list[Finding]:
    """``packages.group-not-installed`` (only optional groups need them, an ``info``) and
    ``packages.missing`` (an error) for the names of ``expected`` that ``live`` lacks."""
    out: list[Finding] = []
    skipped = sorted(n for n in expected if n not in live and n in optional)
    if skipped:
        groups = sorted({g for n in skipped for g in optional[n]})
        shown = ", ".join(g.replace("extra:", "extra ") for g in groups)
        out.append(Finding(
            id="packages.group-not-installed",
            severity="info",
            title=f"{len(skipped)} package(s) of {source} not installed, needed only by {shown}: "
                  f"{_names(skipped)}",
            cause=f"{source} locks them for dependency groups, extras or categories that this "
                  "environment was not installed with (and verify was not given with -E/--dev): "
                  "an install without them leaves them out.",
            evidence=tuple(f"{n} {expected[n][0] or ''} (only {', '.join(optional[n])})".replace("  ", " ")
                           for n in skipped),
            fix=(group_fix or "If the job needs them, install those groups too (uv sync --extra "
                 "NAME / --group NAME; poetry install --with NAME; pdm install -G NAME).",),
        ))
    missing = sorted(n for n in expected if n not in live and n not in optional)
    if missing:
        out.append(Finding(
            id="packages.missing",
            severity="error",
            title=f"{len(missing)} package(s) of {source} not installed: {_names(missing)}",
            cause=f"{source} lists them but the target's {'conda-meta' if kind == 'conda' else 'sys.path'} "
                  "has no such distribution; code importing them fails.",
            evidence=tuple(f"{n} {expected[n][0] or ''} ({kind})".replace("  ", " ") for n in missing),
            fix=(install_many(((n, expected[n][0]) for n in missing), kind, python=python,
                              has_pip=has_pip)
                 + f"  (or recreate the environment from {source}: envlock restore)",),
        ))
    return out


def _mismatch(name: str, exp: tuple[str | None, str | None, str | None],
              got: tuple[str, str | None, str | None], *, source: str, kind: str,
              python: str | None, has_pip: bool) -> Finding | None:
    """One installed package against its expected ``(version, build, md5)``: a build mismatch
    (same public version, other local label; or, for conda, another build string or md5), a
    version mismatch, or ``None``.  :data:`TOOLING` mismatches are warnings."""
    exp_v, exp_b, exp_md5 = exp
    live_v, live_b, live_md5 = got
    if exp_v is None:
        return None
    tooling = name in TOOLING
    if not same_version(exp_v, live_v):
        e_pub, e_loc = _split_local(exp_v)
        l_pub, l_loc = _split_local(live_v)
        if kind == "pip" and (e_loc or l_loc) and same_version(e_pub, l_pub):
            what_e = describe_build(e_loc) or "no local label"
            what_l = describe_build(l_loc) or "no local label"
            return Finding(
                id="packages.build-mismatch",
                severity="warning" if tooling else "error",
                title=f"{name} {live_v} is a {what_l}; {source} has {exp_v} ({what_e})",
                cause="Same release, different build: the compiled code (CUDA/CPU variant, "
                      "linked libraries) differs.",
                evidence=(f"installed: {name} {live_v}", f"{source}: {name} {exp_v}"),
                fix=(install_fix(name, exp_v, kind, python=python, has_pip=has_pip,
                             exact=e_loc is None) + f"  (the build {source} records)",),
            )
        builds = [b for b in (
            f"installed is a {describe_build(l_loc)}" if l_loc else None,
            f"{source} has a {describe_build(e_loc)}" if e_loc else None,
        ) if b]
        return Finding(
            id="packages.version-mismatch",
            severity="warning" if tooling else "error",
            title=f"{name} {live_v} is installed; {source} has {exp_v}"
                  + (f" ({'; '.join(builds)})" if builds else ""),
            cause="A different release than the one recorded: results and APIs may differ.",
            evidence=(f"installed: {name} {live_v}" + (f" (build {live_b})" if live_b else ""),
                      f"{source}: {name} {exp_v}" + (f" (build {exp_b})" if exp_b else "")),
            fix=(install_fix(name, exp_v, kind, python=python, has_pip=has_pip)
                 + f"  (or recreate the environment from {source})",),
        )
    if kind == "conda" and ((exp_b and live_b and exp_b != live_b)
                            or (exp_md5 and live_md5 and exp_md5 != live_md5)):
        detail = (f"build {live_b} vs {exp_b}" if exp_b != live_b else f"md5 {live_md5} vs {exp_md5}")
        return Finding(
            id="packages.build-mismatch",
            severity="warning" if tooling else "error",
            title=f"conda package {name} {live_v}: {detail} ({source})",
            cause="Same version, different conda build: another variant (e.g. cpu vs cuda, "
                  "mkl vs openblas) or a rebuilt archive.",
            evidence=(f"installed: {name} {live_v} {live_b or ''} md5 {live_md5 or '?'}".strip(),
                      f"{source}: {name} {exp_v} {exp_b or ''} md5 {exp_md5 or '?'}".strip()),
            fix=(f"conda install '{name}={exp_v}={exp_b}'" if exp_b else f"reinstall {name} from {source}",),
        )
    return None


def _extra(expected: Mapping[str, tuple[str | None, str | None, str | None]],
           live: Mapping[str, tuple[str, str | None, str | None]], *, source: str, kind: str,
           not_extra: frozenset[str]) -> list[Finding]:
    """``packages.extra``: installed packages that ``expected`` does not list."""
    extra = sorted(n for n in live if n not in expected and n not in TOOLING and n not in not_extra)
    if not extra:
        return []
    return [Finding(
        id="packages.extra",
        severity="warning",
        title=f"{len(extra)} package(s) installed that {source} does not list: {_names(extra)}",
        cause="They were added after the environment was recorded; an import may now pick "
              "them up (plugins, optional backends).",
        evidence=tuple(f"{n} {live[n][0]} ({kind})" for n in extra),
        fix=(f"Remove them, or take a new snapshot if they belong ({source}).",),
    )]


#: PyTorch serves its local-label builds (``+cpu``, ``+cu130``, ``+rocm6.1``) from one index per
#: variant, not from PyPI (pytorch.org "Start Locally"; docs/diff.md "fix texts").
_TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio"})


def _requirement(name: str, version: str | None, kind: str, exact: bool = False) -> str:
    """``'name==version'`` (conda: ``'name=version'``), quoted for bash; the name alone where
    the version is not known.  ``exact``: PEP 440's arbitrary equality ``===``, which a
    local-label build (``2.1.0+cpu``) does not satisfy where ``==2.1.0`` does."""
    if version in (None, "", "unknown"):
        return shlex.quote(name)
    return (f"'{name}={version}'" if kind == "conda"
            else f"'{name}{'===' if exact else '=='}{version}'")


def install_many(pkgs: Iterable[tuple[str, str | None]], kind: str, *, python: str | None = None,
                 has_pip: bool = True) -> str:
    """One install command for ``(name, version)`` pairs (:func:`install_fix`'s form), joined
    by ``&&`` with one command for each local-label build of torch's family, whose PyTorch
    index is its own; ``""`` for none."""
    pkgs = list(pkgs)
    own = [(n, v) for n, v in pkgs if kind == "pip" and n in _TORCH_FAMILY and "+" in (v or "")]
    plain = [p for p in pkgs if p not in own]
    cmds = []
    if plain:
        cmds.append(" ".join([install_fix(*plain[0], kind, python=python, has_pip=has_pip),
                              *(_requirement(n, v, kind) for n, v in plain[1:])]))
    cmds += [install_fix(n, v, kind, python=python, has_pip=has_pip) for n, v in own]
    return " && ".join(cmds)


def install_fix(name: str, version: str | None, kind: str, *, python: str | None = None,
                has_pip: bool = True, reinstall: bool = False, exact: bool = False) -> str:
    """The install command for ``name==version``: conda's ``name=version``; for pip a local
    label of torch's family (``2.13.0+cpu``) names the PyTorch index that serves it.

    :param version: ``None`` (or ``"unknown"``): the name alone.
    :param python: the target interpreter: the command then names it (``PY -m pip install``),
        so that it installs into the environment verified, not the shell's.
    :param has_pip: the target has pip; without it (a venv made by uv) ``uv pip install
        --python PY``.
    :param reinstall: install again over a broken copy of the same version, its dependencies
        left alone (pip's ``--force-reinstall --no-deps``, uv's ``--reinstall --no-deps``).
    :param exact: ``===version`` (PEP 440 arbitrary equality): the build without a local label
        where one with a label is installed, which ``==`` would leave in place.
    """
    req = _requirement(name, version, kind, exact)
    if kind == "conda":
        return f"conda install {'--force-reinstall ' if reinstall else ''}{req}"
    if python and not has_pip:
        flags = " --reinstall --no-deps" if reinstall else ""
        cmd = f"uv pip install --python {shlex.quote(python)}{flags} {req}"
    else:
        flags = " --force-reinstall --no-deps" if reinstall else ""
        cmd = (f"{shlex.quote(python)} -m pip" if python else "pip") + f" install{flags} {req}"
    version = version or ""
    if "+" in version and name in _TORCH_FAMILY:
        label = version.split("+", 1)[1]
        url = pytorch_index_url(label)
        if url is None:  # +cu112: PyTorch publishes no such index (envlock/variants.py)
            return (f"{cmd} from wherever {name} {version} came from (PyTorch has no {label} "
                    "index; or choose a build of an index it has)")
        cmd += " --index-url " + url
    return cmd
