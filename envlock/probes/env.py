"""Environment variables the job sees that change how numerical code runs: by allow-list, secrets
redacted, target-selecting variables set apart.

Only names on the allow-list (exact names and prefixes, :data:`ALLOW_NAMES` and
:data:`ALLOW_PREFIXES`) are recorded; a deny-list wins over it.  Users extend both with
``--env-allow NAME_OR_PREFIX*`` / ``--env-deny …`` (a trailing ``*`` makes a prefix).  A value
is replaced by ``<redacted>`` when its name looks secret, and loses its credentials when it
carries one (:mod:`envlock.redact`).

The variables that only say *which* environment is active (:data:`SELECTION`: ``VIRTUAL_ENV``,
``CONDA_PREFIX``, ``CONDA_DEFAULT_ENV``, ``PATH`` and conda's activation bookkeeping) go to
``[env] selection``, not ``vars``: "activate the venv, then snapshot" and
``snapshot --python venv/bin/python`` observe the same environment, and ``diff`` says so.

TensorFlow and XLA are matched by exact names (:data:`TF_NAMES`), not by a ``TF_`` prefix,
which Terraform shares (``TF_VAR_*``, ``TF_CLI_CONFIG_FILE``, ``TF_LOG``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envlock.manifest import EnvVars, _model
from envlock.probes.world import World
from envlock.redact import printable, redact_variable

__all__ = ["ALLOW_NAMES", "ALLOW_PREFIXES", "SELECTION", "TF_NAMES", "is_selection", "probe_env"]

#: TensorFlow / XLA variables that change numerics, determinism, threading or GPU memory
#: (TensorFlow's ``tensorflow/core/util/env_var.cc`` users, the determinism guide, JAX's GPU
#: memory page).  Exact names: ``TF_`` is also Terraform's prefix.
TF_NAMES = frozenset(
    {
        "TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC", "TF_CUDNN_USE_AUTOTUNE",
        "TF_CUDNN_USE_FRONTEND", "TF_CUDNN_WORKSPACE_LIMIT_IN_MB",
        "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT", "TF_CUDNN_RESET_RND_GEN_STATE",
        "TF_ENABLE_ONEDNN_OPTS", "TF_ENABLE_AUTO_MIXED_PRECISION",
        "TF_ENABLE_AUTO_MIXED_PRECISION_GRAPH_REWRITE",
        "TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_LEVEL",
        "TF_ENABLE_CUBLAS_TENSOR_OP_MATH_FP32", "TF_ENABLE_CUDNN_TENSOR_OP_MATH_FP32",
        "TF_ENABLE_CUDNN_RNN_TENSOR_OP_MATH_FP32", "TF_DISABLE_CUBLAS_TENSOR_OP_MATH",
        "TF_DISABLE_CUDNN_TENSOR_OP_MATH", "TF_DISABLE_CUDNN_RNN_TENSOR_OP_MATH",
        "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_GPU_THREAD_MODE",
        "TF_GPU_THREAD_COUNT", "TF_GPU_ALLOCATOR", "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_FORCE_UNIFIED_MEMORY", "TF_GPU_HOST_MEM_LIMIT_IN_MB", "TF_XLA_FLAGS",
        "TF_ENABLE_XLA", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_VMODULE",
        "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_CLIENT_MEM_FRACTION",
    }
)

ALLOW_NAMES = frozenset(
    {
        "PYTHONHASHSEED", "PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH",
        "PYTHONWARNINGS", "PYTHONOPTIMIZE", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8",
        "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "PATH",
        "CUBLAS_WORKSPACE_CONFIG", "VIRTUAL_ENV",
        "LANG", "LC_ALL", "LC_NUMERIC", "TZ",
        *TF_NAMES,
    }
)
ALLOW_PREFIXES = (
    "CUDA_", "NVIDIA_", "CUDNN_", "CUBLAS_", "CUFFT_", "NCCL_", "NVTE_",
    "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "BLIS_", "GOTO", "VECLIB_", "FLEXIBLAS",
    "NPY_", "NUMEXPR_", "NUMBA_", "SCIPY_",
    "JAX_", "TORCH_", "PYTORCH_",
    "CONDA_", "MAMBA_", "PIXI_", "UV_", "PIP_",
    "SLURM_", "PBS_", "LSB_", "OMPI_", "I_MPI_", "MPICH_", "UCX_", "FI_", "HWLOC_",
    "ROCM_", "HIP_", "HSA_",
)
#: Never recorded even when allowed (conda's per-shell bookkeeping, secrets by convention).
DENY_NAMES = frozenset({"CONDA_PROMPT_MODIFIER", "PIP_INDEX_URL_PASSWORD"})

#: Variables that select the target (set by ``activate``) rather than change how code runs.
SELECTION = frozenset(
    {"VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PATH", "CONDA_SHLVL", "CONDA_EXE",
     "CONDA_PYTHON_EXE"}
)
_SELECTION_RE = re.compile(r"^CONDA_PREFIX_\d+$")


def is_selection(name: str) -> bool:
    """``True`` for a variable that only selects the target (:data:`SELECTION`, and conda's
    stacked ``CONDA_PREFIX_<n>``)."""
    return name in SELECTION or bool(_SELECTION_RE.match(name))


def _matches(name: str, patterns: Iterable[str]) -> bool:
    for p in patterns:
        if p.endswith("*") and name.startswith(p[:-1]):
            return True
        if name == p:
            return True
    return False


def allowed(name: str, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> bool:
    """``True`` when ``name`` is recorded: on the allow-list (or ``allow``), not denied."""
    ok = name in ALLOW_NAMES or name.startswith(ALLOW_PREFIXES) or _matches(name, allow)
    return ok and name not in DENY_NAMES and not _matches(name, deny)


def probe_env(
    world: World,
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
) -> EnvVars:
    """Record the allow-listed variables of ``world.environ`` (the job's environment).

    :param world: what is observed (only :attr:`~envlock.probes.world.World.environ` is read).
    :param allow: extra names, or prefixes ending in ``*``, to record.
    :param deny: names or prefixes never to record (wins over ``allow``).
    :returns: :class:`EnvVars`: ``vars`` and ``selection`` (:func:`is_selection`), values
        redacted where they look secret (:func:`envlock.redact.redact_variable`); bytes that are
        not UTF-8 (``surrogateescape``) are written as ``\\xNN``.
    """
    env = world.environ
    allow = tuple(allow)
    deny = tuple(deny)
    values: dict[str, str] = {}
    selection: dict[str, str] = {}
    redacted: list[str] = []
    for raw_name, raw_value in env.items():
        name = printable(raw_name)
        if not allowed(name, allow, deny):
            continue
        value, changed = redact_variable(name, raw_value)
        if changed:
            redacted.append(name)
        (selection if is_selection(name) else values)[name] = value
    return EnvVars(
        status="ok",
        source="allow-list",
        vars=_model.freeze_mapping(values),
        selection=_model.freeze_mapping(selection),
        redacted=tuple(sorted(redacted)),
    )
