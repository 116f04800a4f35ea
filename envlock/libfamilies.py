"""The library families envlock knows: one declarative table, as threadpoolctl keeps one
controller per library.

Each :class:`LibFamily` says what a library is (CUDA component, BLAS, OpenMP runtime, C/C++
runtime, driver), the names it goes by in every place envlock meets it — the stem of its file
names and SONAME (``libcudnn``), its pip distribution (``nvidia-cudnn-cu13`` → ``cudnn``), its conda
package (``cudnn``), its key in a CUDA toolkit's ``version.json`` — and where its version can be
read.  The probes (:mod:`envlock.probes.cuda`, :mod:`envlock.probes.blas`) and the loader model's
``[libraries]`` table derive their name lists from here, so a new component is one row.

Sources: NVIDIA's pip wheel names (``nvidia-*-cuNN``, pypi.org/user/nvidia), conda-forge's CUDA
12+ package split (``cuda-cudart``, ``libcublas``, …; conda-forge/cuda-feedstock), the
``version.json`` of CUDA toolkits ≥ 11.1, threadpoolctl's ``filename_prefixes`` for BLAS and
OpenMP libraries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Literal

__all__ = [
    "Kind",
    "LibFamily",
    "FAMILIES",
    "by_id",
    "pip_components",
    "conda_components",
    "version_json_components",
    "versioned_file_stems",
    "openmp_file_re",
    "key_library_re",
    "classify_file",
]

Kind = Literal["cuda", "driver", "blas", "openmp", "cxx", "libc"]


@dataclass(frozen=True, slots=True)
class LibFamily:
    """One library (or one CUDA component).

    :ivar id: envlock's name for it (``"cudnn"``, ``"cudart"``, ``"libgomp"``, ``"openblas"``).
    :ivar kind: what it is (:data:`Kind`).
    :ivar what: a few words for people.
    :ivar stems: file-name stems, the SONAME without ``.so…`` (``"libcudnn"``); a stem may end
        in ``*`` for a family of files (``"libcudnn_*"``, ``"libmkl_*"``).
    :ivar pip: pip component names (after ``nvidia-``, without ``-cuNN``).
    :ivar conda: conda package names.
    :ivar version_json: keys in a CUDA toolkit's ``version.json``.
    :ivar versioned_files: toolkit and system installs name the files with the full version
        (``libcudnn.so.8.9.7``), so the version can be read from the file name.
    :ivar recorded: its resolution is recorded in the manifest's ``[libraries]`` table.
    """

    id: str
    kind: Kind
    what: str
    stems: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    conda: tuple[str, ...] = ()
    version_json: tuple[str, ...] = ()
    versioned_files: bool = False
    recorded: bool = True


def _cuda(id: str, what: str, stems: tuple[str, ...], *, pip: tuple[str, ...] = (),
          conda: tuple[str, ...] = (), vj: tuple[str, ...] = (), versioned: bool = False,
          recorded: bool = True) -> LibFamily:
    return LibFamily(id=id, kind="cuda", what=what, stems=stems, pip=pip, conda=conda,
                     version_json=vj, versioned_files=versioned, recorded=recorded)


#: Every family, in the order envlock reports them.
FAMILIES: tuple[LibFamily, ...] = (
    LibFamily(id="libcuda", kind="driver", what="NVIDIA driver's CUDA library",
              stems=("libcuda",)),
    LibFamily(id="nvml", kind="driver", what="NVIDIA management library (driver)",
              stems=("libnvidia-ml",)),
    _cuda("cudart", "CUDA runtime", ("libcudart",), pip=("cuda-runtime",), conda=("cuda-cudart",),
          vj=("cuda_cudart",), versioned=True),
    _cuda("cudnn", "cuDNN", ("libcudnn", "libcudnn_*"), pip=("cudnn",), conda=("cudnn",),
          versioned=True),
    _cuda("nccl", "NCCL", ("libnccl",), pip=("nccl",), conda=("nccl",), versioned=True),
    _cuda("cublas", "cuBLAS", ("libcublas", "libcublasLt"), pip=("cublas",), conda=("libcublas",),
          vj=("libcublas",), versioned=True),
    _cuda("cufft", "cuFFT", ("libcufft", "libcufftw"), pip=("cufft",), conda=("libcufft",),
          vj=("libcufft",), versioned=True),
    _cuda("cusparse", "cuSPARSE", ("libcusparse",), pip=("cusparse",), conda=("libcusparse",),
          vj=("libcusparse",), versioned=True),
    _cuda("cusolver", "cuSOLVER", ("libcusolver", "libcusolverMg"), pip=("cusolver",),
          conda=("libcusolver",), vj=("libcusolver",), versioned=True),
    _cuda("nvjitlink", "nvJitLink", ("libnvJitLink",), pip=("nvjitlink",), conda=("libnvjitlink",),
          vj=("libnvjitlink",), versioned=True),
    _cuda("nvrtc", "NVRTC", ("libnvrtc", "libnvrtc-builtins"), pip=("cuda-nvrtc",),
          conda=("cuda-nvrtc",), vj=("cuda_nvrtc",), versioned=True),
    _cuda("cupti", "CUPTI", ("libcupti",), pip=("cuda-cupti",), conda=("cuda-cupti",),
          vj=("cuda_cupti",)),
    _cuda("curand", "cuRAND", ("libcurand",), pip=("curand",), conda=("libcurand",),
          vj=("libcurand",), versioned=True),
    _cuda("cusparselt", "cuSPARSELt", ("libcusparseLt",), pip=("cusparselt",),
          conda=("cusparselt", "libcusparselt")),
    _cuda("nvshmem", "NVSHMEM", ("libnvshmem_host",), pip=("nvshmem",), conda=("libnvshmem",)),
    _cuda("nvtx", "NVTX", ("libnvToolsExt",), pip=("nvtx",), conda=("cuda-nvtx",)),
    _cuda("cufile", "GPUDirect Storage (cuFile)", ("libcufile",), pip=("cufile",), conda=("libcufile",)),
    _cuda("nvcc", "CUDA compiler", (), pip=("cuda-nvcc",), conda=("cuda-nvcc",), vj=("cuda_nvcc",),
          recorded=False),
    _cuda("npp", "NPP", ("libnpp*",), pip=("npp",), vj=("libnpp",), recorded=False),
    _cuda("nvjpeg", "nvJPEG", ("libnvjpeg",), pip=("nvjpeg",), vj=("libnvjpeg",), recorded=False),
    LibFamily(id="libgomp", kind="openmp", what="GNU OpenMP runtime", stems=("libgomp",)),
    LibFamily(id="libiomp5", kind="openmp", what="Intel OpenMP runtime", stems=("libiomp5",)),
    LibFamily(id="libomp", kind="openmp", what="LLVM OpenMP runtime", stems=("libomp",)),
    LibFamily(id="openblas", kind="blas", what="OpenBLAS", stems=("libopenblas*",)),
    LibFamily(id="scipy-openblas", kind="blas", what="OpenBLAS, SciPy's build (scipy-openblas wheels)",
              stems=("libscipy_openblas*",), recorded=False),
    LibFamily(id="mkl", kind="blas", what="Intel MKL", stems=("libmkl_*",)),
    LibFamily(id="libstdc++", kind="cxx", what="GNU C++ runtime", stems=("libstdc++",)),
    LibFamily(id="libgcc_s", kind="cxx", what="GCC support library", stems=("libgcc_s",)),
    LibFamily(id="libc", kind="libc", what="GNU C library", stems=("libc", "libm")),
)


@cache
def by_id() -> Mapping[str, LibFamily]:
    """``id`` → family."""
    return {f.id: f for f in FAMILIES}


def _names(attr: str) -> dict[str, str]:
    return {name: f.id for f in FAMILIES for name in getattr(f, attr)}


@cache
def pip_components() -> Mapping[str, str]:
    """pip component name (``nvidia-<name>[-cuNN]``) → family id: ``"cuda-runtime"`` → ``"cudart"``."""
    return _names("pip")


@cache
def conda_components() -> Mapping[str, str]:
    """conda package name → family id: ``"libcublas"`` → ``"cublas"``."""
    return _names("conda")


@cache
def version_json_components() -> Mapping[str, str]:
    """``version.json`` key of a CUDA toolkit → family id: ``"cuda_cudart"`` → ``"cudart"``."""
    return _names("version_json")


@cache
def versioned_file_stems() -> Mapping[str, str]:
    """First file stem of each family whose installs carry full versions in file names
    (``"libcudnn"`` → ``"cudnn"``)."""
    return {f.stems[0]: f.id for f in FAMILIES if f.versioned_files and f.stems}


def _stem_re(stem: str) -> str:
    return re.escape(stem[:-1]) + r"\w*" if stem.endswith("*") else re.escape(stem)


@cache
def openmp_file_re() -> re.Pattern[str]:
    """File names of OpenMP runtimes, bundled copies included (``libgomp-a34b3233.so.1.0.0``);
    group ``name`` is the family id."""
    stems = "|".join(_stem_re(s) for f in FAMILIES if f.kind == "openmp" for s in f.stems)
    return re.compile(rf"^(?P<name>{stems})(?:[-.][^/]*)?\.so(?:\.\d+)*$")


@cache
def key_library_re() -> re.Pattern[str]:
    """SONAMEs and file names whose resolution the manifest's ``[libraries]`` table records:
    every family with ``recorded``, by its stems, plain or as a bundled copy
    (``libgomp-a34b3233.so.1``)."""
    stems = sorted({_stem_re(s) for f in FAMILIES if f.recorded for s in f.stems}, key=len, reverse=True)
    return re.compile(rf"^(?:{'|'.join(stems)})(\.so.*|-[0-9a-f]+\.so.*)$")


def classify_file(name: str) -> LibFamily | None:
    """The family of a library file or SONAME (``"libcudnn_ops.so.9"`` → cuDNN), else ``None``."""
    base = name.rsplit("/", 1)[-1]
    for f in FAMILIES:
        for s in f.stems:
            if re.match(rf"^{_stem_re(s)}(?:\.so|-[0-9a-f]+\.so)", base):
                return f
    return None
