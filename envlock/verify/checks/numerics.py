"""The numerics variables the manifest recorded against the job's environment (issue 25).

``envlock diff`` ranks a thread count or a numerics variable among the first causes (C09:
``OMP_NUM_THREADS=1`` recorded, unset in the job); verify says the same before the job runs.
Which variables count is the impact model's answer (``envlock/data/impact.toml``): those of the
``blas`` class (thread counts) and the ``numerics-env`` class (``MKL_CBWR``,
``CUBLAS_WORKSPACE_CONFIG``, ``PYTHONHASHSEED``, …).  A variable the manifest redacted is not
compared; a manifest whose ``[env]`` was not recorded says nothing.
"""

from __future__ import annotations

import shlex
from typing import Any

from envlock.findings import Finding

__all__ = ["check_numerics_env", "NUMERICS_CLASSES"]

#: the impact model's classes whose ``env`` facts are numerics variables.
NUMERICS_CLASSES = frozenset({"blas", "numerics-env"})


def _numerics(name: str, kb: Any) -> bool:
    return kb.component("env", name).cls in NUMERICS_CLASSES


def check_numerics_env(ctx: Any) -> list[Finding]:
    """``env.numerics-differs``: a numerics variable set (or unset) otherwise than the manifest
    recorded; the fix is the ``export``/``unset`` line that gives the job the recorded value."""
    m = ctx.expected.manifest
    env = getattr(m, "env", None) if m is not None else None
    if env is None or getattr(env, "status", "ok") != "ok":
        return []
    from envlock.diff.impact import load_kb  # only with a manifest
    from envlock.probes.env import is_selection

    kb = load_kb()
    recorded = {k: v for k, v in env.vars.items() if k not in env.redacted}
    live = {k: v for k, v in ctx.environ.items() if not is_selection(k)}
    names = sorted(n for n in set(recorded) | set(live)
                   if _numerics(n, kb) and n not in env.redacted and recorded.get(n) != live.get(n))
    if not names:
        return []
    sets = [f"{n}={shlex.quote(recorded[n])}" for n in names if n in recorded]
    unsets = [n for n in names if n not in recorded]
    fix = "; ".join(([f"export {' '.join(sets)}"] if sets else [])
                    + ([f"unset {' '.join(unsets)}"] if unsets else []))
    shown = ", ".join(f"{n} {_v(recorded.get(n))} in the manifest, {_v(live.get(n))} here"
                      for n in names)
    source = getattr(ctx.expected, "manifest_path", None) or "the manifest"
    return [Finding(
        id="env.numerics-differs", severity="warning",
        title=f"numerics variables differ from {source}: {shown}",
        cause="Thread counts and numerics variables decide the reduction order and the kernels "
              "(BLAS/OpenMP split sums by thread; MKL_CBWR, CUBLAS_WORKSPACE_CONFIG pick code "
              "paths): the job computes otherwise than the run the manifest recorded "
              "(`envlock diff` ranks these first).",
        evidence=tuple(f"{n}: manifest {_v(recorded.get(n))}, job {_v(live.get(n))}"
                       for n in names),
        fix=(f"`{fix}` in the job script, before the program starts (or take a new snapshot "
             "if the new values are meant)",),
    )]


def _v(value: str | None) -> str:
    return "unset" if value is None else repr(value)
