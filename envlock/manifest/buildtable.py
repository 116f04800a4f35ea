"""Manifest table ``[build]``: the toolchain a CUDA/C++ extension build would use here.

Written by :func:`envlock.probes.buildenv.probe_build` (``docs/verify.md``, "Build toolchain"):
the CUDA home torch's ``torch.utils.cpp_extension`` would pick and how, that toolkit's
``nvcc``, the C++ compiler and nvcc's host compiler, ``TORCH_CUDA_ARCH_LIST``, how torch itself
was built (its CUDA, the GCC of its ``.comment``, its ``_GLIBCXX_USE_CXX11_ABI``), the
libstdc++ a process of the target loads, and the conda virtual packages (``__cuda``,
``__glibc``, ``__linux``, ``__archspec``) as conda's solver would see them on this node.

Conventions are those of :mod:`envlock.manifest`; this module imports only :mod:`dataclasses`
and :mod:`envlock.manifest._model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from envlock.manifest import _model

__all__ = ["VirtualPackage", "BuildCompiler", "BuildInfo"]

_EMPTY: Mapping[str, str] = _model.freeze_mapping({})


@_model.table
class VirtualPackage:
    """One conda virtual package as the solver would see it on this node.

    :ivar name: ``"__cuda"``, ``"__glibc"``, ``"__linux"``, ``"__unix"``, ``"__archspec"``.
    :ivar version: its version (``"12.4"``, ``"2.36"``, ``"6.1.0"``, ``"1"``).
    :ivar build: its build string (``__archspec``: the microarchitecture, e.g. ``"x86_64_v3"``).
    :ivar source: where the value came from (``"CONDA_OVERRIDE_CUDA"``, ``"driver 550.54.14"``,
        the glibc detector's source, ``"platform.release()"``).
    :ivar override: the ``CONDA_OVERRIDE_*`` variable that decided it, when one did.
    """

    name: str
    version: str | None = None
    build: str | None = None
    source: str | None = None
    override: str | None = None


@_model.table
class BuildCompiler:
    """A compiler an extension build would run.

    :ivar role: ``"c++"`` (what ``cpp_extension`` compiles ``.cpp`` files with) or
        ``"nvcc-host"`` (the host compiler ``nvcc`` runs).
    :ivar command: the command as it would be run (``"g++"``, ``"/opt/gcc13/bin/gcc"``).
    :ivar found_by: why that one: ``"CXX"``, ``"CC (cpp_extension passes -ccbin $CC)"``,
        ``"NVCC_CCBIN"``, ``"default c++"``, ``"default gcc on PATH"``.
    :ivar path: the executable ``PATH`` resolves it to.
    :ivar vendor: ``"gcc"``, ``"clang"``, ``"intel"``; ``version``: from ``--version``.
    :ivar error: why it could not be asked (not found, timed out, unrecognised output).
    """

    role: str
    command: str
    found_by: str
    path: str | None = None
    vendor: str | None = None
    version: str | None = None
    error: str | None = None


@_model.table
class BuildInfo:
    """``[build]``: what an extension build here would use, and what it must match.

    :ivar cuda_home: the CUDA home ``cpp_extension`` would use (``None``: none found).
    :ivar cuda_home_found_by: the step that found it: ``"CUDA_HOME"``, ``"CUDA_PATH"``,
        ``"nvcc on PATH"``, ``"/usr/local/cuda"``.
    :ivar cuda_home_order: the lookup order, as read from the target's
        ``torch/utils/cpp_extension.py`` (``_find_cuda_home``), or envlock's default.
    :ivar cuda_home_order_source: the file the order was read from, or ``"default"``.
    :ivar conda_package: the conda package that installed that ``nvcc`` (``cuda-nvcc=12.4.131=0``).
    :ivar nvcc: ``<cuda_home>/bin/nvcc`` (the one torch's ``_check_cuda_version`` runs).
    :ivar nvcc_version, nvcc_release: from its ``--version`` (``"12.4.131"``, ``"12.4"``).
    :ivar toolkit_version: the toolkit's ``version.json`` ``cuda.version``, when present.
    :ivar cuda_runtime_header: ``<cuda_home>/include/cuda_runtime.h`` (or under
        ``$CUDA_INC_PATH``, or conda's ``<cuda_home>/targets/<arch>/include``) when it exists.
    :ivar nvcc_error: why that nvcc could not be asked.
    :ivar path_nvcc: the first ``nvcc`` on ``PATH`` (whether or not it is the one used).
    :ivar host_config_gcc_max, host_config_clang_max: the newest GCC / Clang major the
        toolkit's ``include/crt/host_config.h`` accepts.
    :ivar allow_unsupported_compiler: ``-allow-unsupported-compiler`` is in
        ``NVCC_PREPEND_FLAGS``/``NVCC_APPEND_FLAGS``.
    :ivar compilers: the C++ compiler and nvcc's host compiler.
    :ivar arch_list: ``TORCH_CUDA_ARCH_LIST`` as set.
    :ivar torch_version, torch_cuda: ``torch/version.py`` ``__version__`` and ``cuda``;
        ``torch_location``: the package directory.
    :ivar torch_supported_archs: ``supported_arches`` of ``_get_cuda_arch_flags`` (the
        ``TORCH_CUDA_ARCH_LIST`` entries it accepts, without ``+PTX``).
    :ivar torch_gcc: the GCC version in the ``.comment`` of torch's libraries;
        ``torch_gcc_source``: the library read.
    :ivar torch_gcc_bounds: torch's own bounds for the toolkit's release (``CUDA_GCC_VERSIONS``
        of ``cpp_extension.py``), e.g. ``">=6.0.0, <14.0"``.
    :ivar torch_cxx11_abi: torch's ``_GLIBCXX_USE_CXX11_ABI`` (``True``: the new ABI);
        ``torch_cxx11_abi_source``: how it was read.
    :ivar libstdcxx, libstdcxx_glibcxx: the ``libstdc++.so.6`` a process of the target loads
        and its highest ``GLIBCXX_*`` version.
    :ivar virtual_packages: the conda virtual packages of this node.
    :ivar conda_overrides: every ``CONDA_OVERRIDE_*`` variable set, with its value.
    """

    status: str = "ok"
    source: str = ""
    error: str | None = None
    cuda_home: str | None = None
    cuda_home_found_by: str | None = None
    cuda_home_order: tuple[str, ...] = ()
    cuda_home_order_source: str | None = None
    conda_package: str | None = None
    nvcc: str | None = None
    nvcc_version: str | None = None
    nvcc_release: str | None = None
    nvcc_error: str | None = None
    path_nvcc: str | None = None
    toolkit_version: str | None = None
    cuda_runtime_header: str | None = None
    host_config_gcc_max: int | None = None
    host_config_clang_max: int | None = None
    allow_unsupported_compiler: bool | None = None
    compilers: tuple[BuildCompiler, ...] = ()
    arch_list: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    torch_location: str | None = None
    torch_supported_archs: tuple[str, ...] = ()
    torch_gcc: str | None = None
    torch_gcc_source: str | None = None
    torch_gcc_bounds: str | None = None
    torch_cxx11_abi: bool | None = None
    torch_cxx11_abi_source: str | None = None
    libstdcxx: str | None = None
    libstdcxx_glibcxx: str | None = None
    virtual_packages: tuple[VirtualPackage, ...] = ()
    conda_overrides: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
