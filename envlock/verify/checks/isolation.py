"""Isolation checks: the job runs from a base/system environment, or packages leak in from the
user site-packages or ``PYTHONPATH``.

A venv is recognised by ``pyvenv.cfg`` (PEP 405); a conda *base* environment by ``condabin/``
or ``envs/`` next to ``conda-meta/`` (conda's installation layout).  The user site-packages is
reported by the target interpreter when ``site.ENABLE_USER_SITE`` is true and it exists
(PEP 370; disabled inside venvs without system site-packages, and by ``PYTHONNOUSERSITE``).

Finding ids: ``isolation.system-python``, ``isolation.conda-base``, ``isolation.user-site``,
``isolation.pythonpath``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os

from envlock.findings import Finding

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["check_isolation"]


def check_isolation(ctx: Context) -> list[Finding]:
    """Where the target's packages can come from besides the environment itself."""
    t = ctx.live.target
    out: list[Finding] = []
    if t.kind == "system":
        out.append(Finding(
            id="isolation.system-python", severity="warning",
            title=f"the job runs the system Python ({t.python or t.prefix}), not a venv or conda environment",
            cause="System packages change with OS updates and are shared by everyone: the job's "
                  "environment is not under your control.",
            evidence=(f"target {t.prefix} (chosen by {t.chosen_by}): no pyvenv.cfg, no conda-meta/",),
            fix=("Create an environment (python -m venv / conda create) and activate it in the job script.",),
        ))
    elif t.kind == "conda" and (os.path.isdir(os.path.join(t.prefix, "condabin"))
                                or os.path.isdir(os.path.join(t.prefix, "envs"))):
        out.append(Finding(
            id="isolation.conda-base", severity="warning",
            title=f"the job runs in conda's base environment ({t.prefix})",
            cause="The base environment holds conda itself; updating conda changes it, and packages "
                  "installed there are shared by every project that uses it.",
            evidence=(f"{t.prefix} has conda-meta/ and "
                      + ("condabin/" if os.path.isdir(os.path.join(t.prefix, "condabin")) else "envs/"),),
            fix=("conda create -n myjob … and `conda activate myjob` in the job script.",),
        ))
    py = ctx.live.python
    user_site = getattr(py, "user_site", None)
    if user_site:
        n = sum(1 for p in ctx.live.pip.packages if os.path.realpath(p.location) == os.path.realpath(user_site))
        out.append(Finding(
            id="isolation.user-site", severity="warning",
            title=f"the user site-packages {user_site} is on sys.path"
                  + (f" and provides {n} distribution(s)" if n else ""),
            cause="Packages installed with `pip install --user` are importable by every environment of "
                  "this Python version and come before the environment's own.",
            evidence=(f"site.ENABLE_USER_SITE is true for {py.executable or t.python}", f"{user_site} exists"),
            fix=("export PYTHONNOUSERSITE=1 in the job script (or empty the directory).",),
        ))
    pythonpath = [p for p in ctx.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pythonpath:
        out.append(Finding(
            id="isolation.pythonpath", severity="warning",
            title=f"PYTHONPATH adds {len(pythonpath)} director{'y' if len(pythonpath) == 1 else 'ies'} "
                  "before the environment's site-packages",
            cause="Modules there win over the environment's packages; results depend on what those "
                  "directories hold at run time.",
            evidence=tuple(f"PYTHONPATH entry: {p}" for p in pythonpath),
            fix=("unset PYTHONPATH in the job script, or install the code into the environment "
                 "(pip install -e .).",),
        ))
    return out
