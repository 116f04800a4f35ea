"""Environment variables that change how numerical code runs, by allow-list, secrets redacted.

Only names on the allow-list (exact names and prefixes, :data:`ALLOW_NAMES` and
:data:`ALLOW_PREFIXES`) are recorded; a deny-list wins over it.  Users extend both with
``--env-allow NAME_OR_PREFIX*`` / ``--env-deny …`` (a trailing ``*`` makes a prefix).  A value
is replaced by ``<redacted>`` when its name looks secret or the value carries a credential
(see :mod:`envlock.redact`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from envlock.manifest import _model
from envlock.manifest import EnvVars
from envlock.redact import REDACTED, redact_text_urls, secret_name, secret_value

__all__ = ["ALLOW_NAMES", "ALLOW_PREFIXES", "probe_env"]

ALLOW_NAMES = frozenset(
    {
        "PYTHONHASHSEED", "PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH",
        "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "PATH",
        "CUBLAS_WORKSPACE_CONFIG", "VIRTUAL_ENV",
        "LANG", "LC_ALL", "TZ",
    }
)
ALLOW_PREFIXES = (
    "CUDA_", "NVIDIA_", "CUDNN_", "CUBLAS_", "CUFFT_", "NCCL_", "NVTE_",
    "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "BLIS_", "GOTO", "VECLIB_", "FLEXIBLAS",
    "NPY_", "NUMEXPR_", "NUMBA_", "SCIPY_",
    "TF_", "XLA_", "JAX_", "TORCH_", "PYTORCH_",
    "CONDA_", "MAMBA_", "PIXI_", "UV_", "PIP_",
    "SLURM_", "PBS_", "LSB_", "OMPI_", "I_MPI_", "MPICH_", "UCX_", "FI_", "HWLOC_",
    "ROCM_", "HIP_", "HSA_",
)
#: Never recorded even when allowed (conda's per-shell bookkeeping, secrets by convention).
DENY_NAMES = frozenset({"CONDA_PROMPT_MODIFIER", "PIP_INDEX_URL_PASSWORD"})


def _matches(name: str, patterns: Iterable[str]) -> bool:
    for p in patterns:
        if p.endswith("*") and name.startswith(p[:-1]):
            return True
        if name == p:
            return True
    return False


def probe_env(
    environ: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
) -> EnvVars:
    """Record the allow-listed variables of ``environ`` (``os.environ`` when ``None``).

    :param allow: extra names, or prefixes ending in ``*``, to record.
    :param deny: names or prefixes never to record (wins over ``allow``).
    :returns: :class:`EnvVars` with values redacted where they look secret.
    """
    env = os.environ if environ is None else environ
    allow = tuple(allow)
    deny = tuple(deny)
    values: dict[str, str] = {}
    redacted: list[str] = []
    for name, value in env.items():
        allowed = name in ALLOW_NAMES or name.startswith(ALLOW_PREFIXES) or _matches(name, allow)
        if not allowed or name in DENY_NAMES or _matches(name, deny):
            continue
        if secret_name(name):
            values[name] = REDACTED
            redacted.append(name)
        elif secret_value(value):
            values[name] = redact_text_urls(value)
            redacted.append(name)
        else:
            values[name] = value
    return EnvVars(
        status="ok",
        source="allow-list",
        vars=_model.freeze_mapping(values),
        redacted=tuple(sorted(redacted)),
    )
