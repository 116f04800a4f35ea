"""The build variants a fix may name, as data with their sources: PyTorch's pip indexes and
conda-forge's ``cuda-version`` values (issue 25: a fix names only things that exist); and the
variant a conda build string names (:func:`build_variant`, re-exported by
:mod:`envlock.formats.conda`).

Sources:

* **PyTorch's per-variant pip indexes**, ``https://download.pytorch.org/whl/<name>`` — the
  ``--index-url``/``--extra-index-url`` of every release's pip command on
  https://pytorch.org/get-started/previous-versions/ and https://pytorch.org/get-started/locally/
  (1.11: cu102 cu113 cu115; 1.12: cu102 cu113 cu116; 1.13: cu116 cu117; 2.0: cu117 cu118;
  2.1–2.3: cu118 cu121; 2.4–2.5: cu118 cu121 cu124; 2.6: cu118 cu124 cu126; 2.7: cu118 cu126
  cu128; 2.8: cu126 cu128 cu129; 2.9 and later: cu126 cu128 cu130; ROCm and CPU alike).  Older
  releases were ``-f https://download.pytorch.org/whl/torch_stable.html`` links, no index:
  there is no ``whl/cu80``, ``whl/cu92`` or ``whl/cu112`` index.
* **conda-forge's ``cuda-version``** — conda-forge/cuda-version-feedstock,
  ``recipe/conda_build_config.yaml`` and its ``.ci_support/linux_64_version<X.Y>.yaml``
  variants: 9.2, 10.0–10.2, 11.0–11.8, 12.0–12.6, 12.8, 12.9, 13.0, 13.1 (no 12.7, no 8.0).
* **The ``pytorch`` channel's ``pytorch-cuda``** metapackage — https://anaconda.org/pytorch/
  pytorch-cuda: 11.6, 11.7, 11.8, 12.1, 12.4 (the channel's last release was torch 2.5).

This module imports only the standard library's :mod:`re`.
"""

from __future__ import annotations

import re

__all__ = ["build_variant", "PYTORCH_INDEXES", "CONDA_FORGE_CUDA_VERSIONS", "PYTORCH_CUDA_CHANNEL",
           "pytorch_index_url", "index_name", "cuda_indexes", "conda_forge_cuda_version"]

#: the names of PyTorch's pip indexes (``https://download.pytorch.org/whl/<name>``).
PYTORCH_INDEXES: tuple[str, ...] = (
    "cpu", "cu102", "cu113", "cu115", "cu116", "cu117", "cu118", "cu121", "cu124", "cu126",
    "cu128", "cu129", "cu130",
    "rocm5.1.1", "rocm5.2", "rocm5.4.2", "rocm5.6", "rocm5.7", "rocm6.0", "rocm6.1", "rocm6.2",
    "rocm6.2.4", "rocm6.3", "rocm6.4",
)

#: conda-forge's ``cuda-version`` metapackage versions.
CONDA_FORGE_CUDA_VERSIONS: tuple[str, ...] = (
    "9.2", "10.0", "10.1", "10.2", "11.0", "11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7",
    "11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0", "13.1",
)

#: CUDA versions the ``pytorch`` conda channel had a ``pytorch-cuda`` metapackage for.
PYTORCH_CUDA_CHANNEL: frozenset[str] = frozenset({"11.6", "11.7", "11.8", "12.1", "12.4"})


def pytorch_index_url(name: str) -> str | None:
    """``https://download.pytorch.org/whl/<name>`` when PyTorch publishes that index, else
    ``None`` (``"cu121"`` → the URL; ``"cu112"``, ``"cu80"`` → ``None``)."""
    return f"https://download.pytorch.org/whl/{name}" if name in PYTORCH_INDEXES else None


def index_name(cuda: str) -> str:
    """The index name PyTorch would give CUDA ``X.Y``: ``"12.1"`` → ``"cu121"`` (whether or not
    it exists; :func:`pytorch_index_url` tells)."""
    m = re.match(r"(\d+)\.(\d+)", cuda)
    return f"cu{m.group(1)}{m.group(2)}" if m else f"cu{cuda.replace('.', '')}"


def cuda_indexes(major: str | int | None = None) -> tuple[str, ...]:
    """PyTorch's CUDA index names, oldest first; only those of CUDA ``major`` when given
    (``12`` → ``("cu121", "cu124", "cu126", "cu128", "cu129")``)."""
    out = [n for n in PYTORCH_INDEXES if n.startswith("cu")]
    if major is not None:
        out = [n for n in out if n[2:-1] == str(major)]
    return tuple(out)


def conda_forge_cuda_version(cuda: str) -> str | None:
    """The ``major.minor`` of ``cuda`` when conda-forge has that ``cuda-version``, else
    ``None`` (``"12.1.105"`` → ``"12.1"``; ``"8.0"``, ``"12.7"`` → ``None``)."""
    m = re.match(r"(\d+\.\d+)", cuda)
    return m.group(1) if m and m.group(1) in CONDA_FORGE_CUDA_VERSIONS else None


def build_variant(build: str | None) -> str | None:
    """The CUDA/cuDNN/CPU variant a conda build string names.

    ``cuda100py37h938c94c_0`` → ``"CUDA 10.0"``; ``py36_cuda8.0.61_cudnn7.1.2_3`` → ``"CUDA 8.0
    (cuDNN 7.1.2)"``; ``cuda126py312h…`` → ``"CUDA 12.6"``; ``cuda120_py311…`` → ``"CUDA 12.0"``;
    ``py3.8_cuda11.8_cudnn8.7.0_0`` → ``"CUDA 11.8 (cuDNN 8.7.0)"``; ``cpu_py311…``,
    ``py3.8_cpu_0`` → ``"CPU-only"``; anything else ``None``.  (Build strings of the
    ``pytorch`` and ``conda-forge`` channels; the digits after ``cuda`` without a dot are
    ``<major><minor>``, the last digit being the minor.)
    """
    if not build:
        return None
    if re.search(r"(^|_)cpu(_|$|py)", build):
        return "CPU-only"
    m = re.search(r"cuda(\d+)\.(\d+)", build) or re.search(r"cuda(\d{1,2})(\d)(?=_|py|h|$)", build)
    if not m:
        return None
    out = f"CUDA {int(m.group(1))}.{m.group(2)}"
    dnn = re.search(r"cudnn(\d+(?:\.\d+)*)", build)
    return f"{out} (cuDNN {dnn.group(1)})" if dnn else out
