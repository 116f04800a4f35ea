"""Build-toolchain checks: will a CUDA/C++ extension built here match the torch it loads into?

The facts are :class:`~envlock.manifest.buildtable.BuildInfo` (:func:`envlock.probes.buildenv.
probe_build`, conda virtual packages from :func:`envlock.probes.virtual.probe_virtual`),
computed once per verify run and shared by the checks.  Finding ids, in check order:

* ``build.no-cuda-home``, ``build.nvcc-failed``, ``build.cuda-mismatch``,
  ``build.cuda-minor-mismatch``, ``build.cuda-home-incomplete`` — the toolkit
  (torch's ``_find_cuda_home`` / ``_check_cuda_version``);
* ``build.compiler-missing``, ``build.host-compiler-unsupported``,
  ``build.compiler-rejected-by-torch``, ``build.compiler-differs`` — the compilers (the toolkit's
  ``host_config.h``, NVIDIA's table :data:`envlock.nvidia.HOST_COMPILERS`, torch's
  ``CUDA_GCC_VERSIONS``);
* ``build.old-cxx-abi`` — torch's ``_GLIBCXX_USE_CXX11_ABI``;
* ``build.libstdcxx-too-old`` — the libstdc++ loaded vs what a new build may need;
* ``build.arch-list-invalid``, ``build.arch-list-missing-gpu``, ``build.arch-list-unset``;
* ``build.cuda-override``, ``build.no-virtual-cuda``, ``build.glibc-override`` — conda's
  virtual packages.

:data:`DEFAULT_BUILD_CHECKS` run in every ``envlock verify`` and stay silent unless a build is
in view (a CUDA home is found, or an override is set); :data:`BUILD_CHECKS` are all of them,
what ``envlock verify --build`` runs.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envlock.findings import Finding
from envlock.nvidia import (
    assess_arch,
    assess_host_compiler,
    host_compiler_range,
    max_cuda_for_driver,
    sm_name,
    vtuple,
)
from envlock.probes.world import World
from envlock.variants import cuda_indexes, index_name, pytorch_index_url
from envlock.verify.checks.gpucompat import visible_gpus
from envlock.verify.checks.gpucompat import _needs_cuda_from_conda

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = [
    "build_facts",
    "check_build_cuda",
    "check_build_toolkit",
    "check_build_compiler",
    "check_build_abi",
    "check_build_libstdcxx",
    "check_build_arch",
    "check_build_virtual",
    "check_build",
    "DEFAULT_BUILD_CHECKS",
    "BUILD_CHECKS",
]

#: ``TORCH_CUDA_ARCH_LIST`` names and what they stand for (``named_arches`` of torch 2.14.1's
#: ``_get_cuda_arch_flags``); combined names first, as torch replaces them in this order.
NAMED_ARCHES: tuple[tuple[str, str], ...] = (
    ("Kepler+Tesla", "3.7"), ("Kepler", "3.5+PTX"), ("Maxwell+Tegra", "5.3"), ("Maxwell", "5.0;5.2+PTX"),
    ("Pascal", "6.0;6.1+PTX"), ("Volta+Tegra", "7.2"), ("Volta", "7.0+PTX"), ("Turing", "7.5+PTX"),
    ("Ampere+Tegra", "8.7"), ("Ampere", "8.0;8.6+PTX"), ("Ada", "8.9+PTX"), ("Hopper", "9.0+PTX"),
    ("Blackwell+Tegra", "11.0"), ("Blackwell", "10.0;10.3;12.0;12.1+PTX"), ("Rubin", "10.7+PTX"),
)


def build_facts(ctx: Context, *, libraries: bool = False) -> Any:
    """The run's :class:`~envlock.manifest.buildtable.BuildInfo`, computed once (shared by the
    checks through the :class:`~envlock.verify.live.Live` fact cache).

    :param libraries: also the facts read from ELF files (torch's GCC and C++ ABI, the
        libstdc++ loaded); without them the ELF reader is not even imported.
    """
    live = ctx.live
    if not libraries and "build+libraries" in live._values:
        return live._values["build+libraries"]

    def compute() -> Any:
        from envlock.probes.buildenv import probe_build

        site = [p for p in live.python.path if os.path.isdir(p)]
        world = World(root=live.root, environ=live.environ, prefix=live.target.prefix, site_dirs=site,
                      runner=live.runner, timeout=live.command_timeout(5.0))
        return probe_build(world, virtual=(), libraries=libraries)
    return live._get("build+libraries" if libraries else "build", compute)  # Live's fact cache


def _gpu(ctx: Context) -> Any:
    return ctx.live.gpu


def _torch_label(b: Any) -> str:
    return f"torch {b.torch_version}" if b.torch_version else "torch"


def _home_evidence(b: Any) -> tuple[str, ...]:
    order = " → ".join(b.cuda_home_order) if b.cuda_home_order else ""
    src = b.cuda_home_order_source or "default"
    ev = [f"CUDA home {b.cuda_home} (found by {b.cuda_home_found_by}; lookup order {order}, from {src})"]
    if b.conda_package:
        ev.append(f"that nvcc is conda's {b.conda_package}")
    if b.nvcc:
        ev.append(f"{b.nvcc} --version: release {b.nvcc_release or '?'}"
                  + (f", V{b.nvcc_version}" if b.nvcc_version else ""))
    if b.toolkit_version:
        ev.append(f"{b.cuda_home}/version.json: cuda {b.toolkit_version}")
    if b.path_nvcc and b.cuda_home_found_by != "nvcc on PATH":
        ev.append(f"nvcc on PATH is {b.path_nvcc} (not used: {b.cuda_home_found_by} comes first)")
    ev.append(f"{_torch_label(b)}: torch/version.py cuda = {b.torch_cuda!r}"
              + (f" ({b.torch_location})" if b.torch_location else ""))
    return tuple(ev)


def _torch_for_toolkit(release: str) -> str:
    """The fix "a torch built for this toolkit's CUDA", naming only PyTorch indexes that exist
    (:data:`envlock.variants.PYTORCH_INDEXES`)."""
    major = release.split(".")[0]
    url = pytorch_index_url(index_name(release))
    if url:
        return f"or install a torch built for CUDA {release} ({url})"
    names = cuda_indexes(major)
    if names:
        return (f"or install a torch built for CUDA {major}.x: PyTorch has no "
                f"{index_name(release)} index; choose one of {', '.join(names)} "
                "(https://download.pytorch.org/whl/<index>)")
    return (f"or install a CUDA toolkit of torch's major: PyTorch has no CUDA {major} index "
            f"(its newest: {', '.join(cuda_indexes()[-3:])})")


def _toolkit(ctx: Context, *, required: bool) -> list[Finding]:
    b = build_facts(ctx)
    if not b.torch_cuda:
        return []
    if not b.cuda_home:
        if not required:
            return []
        return [Finding(
            id="build.no-cuda-home", severity="warning",
            title=f"no CUDA toolkit for a build against {_torch_label(b)} (CUDA {b.torch_cuda})",
            cause="torch.utils.cpp_extension finds no CUDA home: a CUDAExtension build fails with "
                  "\"OSError: CUDA_HOME environment variable is not set\".",
            evidence=(f"lookup order {' → '.join(b.cuda_home_order)} (from {b.cuda_home_order_source}): "
                      "nothing found",),
            fix=(f"Install a CUDA {b.torch_cuda} toolkit and export CUDA_HOME=<its directory>",
                 f"or conda install -c nvidia cuda-nvcc={b.torch_cuda} (its nvcc is then on PATH)"),
        )]
    out: list[Finding] = []
    ev = _home_evidence(b)
    if b.nvcc_error or not b.nvcc_release:
        out.append(Finding(
            id="build.nvcc-failed", severity="error",
            title=f"the CUDA home a build will use ({b.cuda_home}, found by {b.cuda_home_found_by}) "
                  "has no working nvcc",
            cause="torch's _check_cuda_version runs <CUDA home>/bin/nvcc --version: the build stops "
                  "(FileNotFoundError \"nvcc not found at …\", or the command fails).",
            evidence=(*ev, b.nvcc_error or "no release in nvcc --version"),
            fix=("Point CUDA_HOME at a complete toolkit (one with bin/nvcc).",),
        ))
        return out
    try:
        have = vtuple(b.nvcc_release)
        want = vtuple(b.torch_cuda)
    except ValueError:
        return out
    kit = f"the CUDA toolkit a build will use ({b.cuda_home}, found by {b.cuda_home_found_by})"
    if have[0] != want[0]:
        out.append(Finding(
            id="build.cuda-mismatch", severity="error",
            title=f"{kit} is CUDA {b.nvcc_release}; {_torch_label(b)} was built with CUDA {b.torch_cuda}",
            cause="torch's own rule (cpp_extension._check_cuda_version): the CUDA major must match. "
                  f"The build stops with \"The detected CUDA version ({b.nvcc_release}) mismatches the "
                  f"version that was used to compile PyTorch ({b.torch_cuda})\".",
            evidence=ev,
            fix=(f"export CUDA_HOME=<a CUDA {b.torch_cuda} toolkit> (CUDA_HOME is looked up first)",
                 _torch_for_toolkit(b.nvcc_release),
                 f"or conda install cuda-nvcc={b.torch_cuda} in the environment"),
        ))
    elif have[:2] != want[:2]:
        newer = have[:2] > want[:2]
        out.append(Finding(
            id="build.cuda-minor-mismatch", severity="warning",
            title=f"{kit} is CUDA {b.nvcc_release}; {_torch_label(b)} was built with CUDA {b.torch_cuda} "
                  "(same major, other minor)",
            cause="torch only warns (\"The detected CUDA version … has a minor version mismatch\") and "
                  "builds. " + (f"The extension is compiled with CUDA {b.nvcc_release} headers and PTX but "
                                f"runs on torch's CUDA {b.torch_cuda} runtime: newer runtime APIs are missing "
                                "and its PTX needs a driver ≥ the CUDA "
                                f"{b.nvcc_release} driver (minor-version compatibility does not JIT newer PTX)."
                                if newer else
                                f"An older toolkit ({b.nvcc_release}) than torch's ({b.torch_cuda}) usually "
                                "works; it may lack architectures or headers torch's build relies on."),
            evidence=ev,
            fix=(f"export CUDA_HOME=<a CUDA {b.torch_cuda} toolkit> to build with exactly torch's CUDA",),
        ))
    if b.cuda_runtime_header is None:
        out.append(Finding(
            id="build.cuda-home-incomplete", severity="warning",
            title=f"the CUDA home a build will use ({b.cuda_home}, found by {b.cuda_home_found_by}) has no "
                  "include/cuda_runtime.h",
            cause="cpp_extension adds <CUDA home>/include and <CUDA home>/lib64 to the build: C++ files that "
                  "include CUDA headers (ATen/cuda, cuda_runtime.h) do not compile and -lcudart does not link. "
                  "A nvcc reached through a wrapper or symlink outside the toolkit (e.g. /usr/local/bin/nvcc) "
                  "makes its parent's parent the CUDA home.",
            evidence=ev,
            fix=(f"export CUDA_HOME=<the toolkit directory> (e.g. the one {b.nvcc} belongs to)",),
        ))
    return out


def check_build_cuda(ctx: Context) -> list[Finding]:
    """The toolkit a build will use against torch's CUDA — silent without a CUDA home (default
    verify)."""
    return _toolkit(ctx, required=False)


def check_build_toolkit(ctx: Context) -> list[Finding]:
    """As :func:`check_build_cuda`, and a CUDA torch without any toolkit is a finding
    (``verify --build``)."""
    return _toolkit(ctx, required=True)


def _compilers(b: Any, role: str) -> list[Any]:
    return [c for c in b.compilers if c.role == role and c.version and c.vendor]


def check_build_compiler(ctx: Context) -> list[Finding]:
    """nvcc's host compiler against the toolkit (its ``host_config.h``, else NVIDIA's table);
    the C++ compiler against torch's ``CUDA_GCC_VERSIONS`` for the toolkit's release."""
    b = build_facts(ctx)
    if not b.cuda_home or not b.nvcc_release:
        return []
    out: list[Finding] = []
    row = host_compiler_range(b.nvcc_release)
    documented = (f"NVIDIA CUDA Installation Guide for Linux, CUDA {row.cuda}: GCC {row.gcc_min}–{row.gcc_max}, "
                  f"Clang {row.clang_min}–{row.clang_max}") if row else None
    for c in b.compilers:
        if c.path is None and c.error:
            what = "nvcc's host compiler" if c.role == "nvcc-host" else "the C++ compiler"
            out.append(Finding(
                id="build.compiler-missing", severity="error",
                title=f"{what} {c.command!r} ({c.found_by}) is not found",
                cause=("nvcc cannot run it: \"nvcc fatal : Failed to preprocess host compiler properties\"."
                       if c.role == "nvcc-host" else
                       "The build's C++ compile and link steps fail: the compiler does not exist."),
                evidence=(c.error, f"CUDA {b.nvcc_release} at {b.cuda_home} ({b.cuda_home_found_by})"),
                fix=("Install it, or point CC/CXX (or NVCC_CCBIN) at a compiler that exists.",),
            ))
    for c in _compilers(b, "nvcc-host"):
        who = f"{c.vendor} {c.version} ({c.path or c.command}, {c.found_by})"
        major = vtuple(c.version)[0]
        gate = b.host_config_gcc_max if c.vendor == "gcc" else b.host_config_clang_max if c.vendor == "clang" else None
        table = assess_host_compiler(b.nvcc_release, c.vendor, c.version)
        ev = [f"nvcc host compiler: {who}", f"CUDA {b.nvcc_release} at {b.cuda_home} ({b.cuda_home_found_by})"]
        if gate is not None:
            ev.append(f"{b.cuda_home}/include/crt/host_config.h: newest {c.vendor} major accepted: {gate}")
        if documented:
            ev.append(documented)
        rejected = gate is not None and major > gate
        if rejected or (gate is None and table == "too-new"):
            out.append(Finding(
                id="build.host-compiler-unsupported",
                severity="warning" if b.allow_unsupported_compiler else "error",
                title=f"{c.vendor} {c.version} is newer than CUDA {b.nvcc_release}'s nvcc supports",
                cause=("nvcc stops every .cu compile: \"#error -- unsupported GNU version! gcc versions later "
                       f"than {gate if gate is not None else row.gcc_max if row else '?'} are not supported!\""
                       if c.vendor == "gcc" else "nvcc stops every .cu compile: \"unsupported clang version\"")
                      + (" — here -allow-unsupported-compiler is set, so it compiles, at your own risk."
                         if b.allow_unsupported_compiler else ""),
                evidence=tuple(ev),
                fix=((f"Use a supported host compiler: export CC=<gcc ≤ {gate or (row.gcc_max if row else '?')}> "
                     "(cpp_extension passes -ccbin $CC) or NVCC_CCBIN=<it>"),
                     "or a newer CUDA toolkit whose nvcc supports this compiler"),
            ))
        elif table == "too-new":
            out.append(Finding(
                id="build.host-compiler-unsupported", severity="warning",
                title=f"{c.vendor} {c.version} is newer than NVIDIA documents for CUDA {b.nvcc_release}",
                cause="nvcc's host_config.h lets it through (it checks only the major version), but NVIDIA "
                      "does not list it as supported: it may fail on newer libstdc++ headers.",
                evidence=tuple(ev),
                fix=(f"Prefer a host compiler within the documented range (CC=<gcc ≤ {row.gcc_max}>)."
                     if row else "Prefer a documented host compiler.",),
            ))
        elif table == "too-old":
            out.append(Finding(
                id="build.host-compiler-unsupported", severity="error",
                title=f"{c.vendor} {c.version} is older than CUDA {b.nvcc_release} supports",
                cause="CUDA's headers need a newer host compiler (C++17 at least).",
                evidence=tuple(ev),
                fix=(f"export CC=<gcc ≥ {row.gcc_min if row else '?'}>",),
            ))
    # torch's own bounds, on the C++ compiler (cpp_extension._check_cuda_version)
    if b.torch_gcc_bounds and not _dont_check_abi(ctx) and _binary_build(b.torch_version):
        m = re.match(r">=([\d.]+), <([\d.]+)", b.torch_gcc_bounds)
        for c in _compilers(b, "c++"):
            if c.vendor != "gcc" or not m:
                continue
            v = vtuple(c.version)
            lo, hi = vtuple(m.group(1)), vtuple(m.group(2))
            if v < lo or v >= hi:
                out.append(Finding(
                    id="build.compiler-rejected-by-torch", severity="error",
                    title=f"{_torch_label(b)} refuses g++ {c.version} with CUDA {b.nvcc_release} "
                          f"(its bounds: {b.torch_gcc_bounds})",
                    cause="cpp_extension._check_cuda_version raises RuntimeError \"The current installed version "
                          f"of {c.command} ({c.version}) is {'greater' if v >= hi else 'less'} than the "
                          f"{'maximum' if v >= hi else 'minimum'} required version by CUDA {b.nvcc_release}\".",
                    evidence=(f"C++ compiler: {c.command} → {c.path} ({c.found_by}), gcc {c.version}",
                              f"torch/utils/cpp_extension.py CUDA_GCC_VERSIONS['{b.nvcc_release}']: "
                              f"{b.torch_gcc_bounds}"),
                    fix=("export CXX=<a g++ within the bounds> (and CC=<the matching gcc>)",
                         "or TORCH_DONT_CHECK_COMPILER_ABI=1 to skip torch's check (nvcc's own still applies)"),
                ))
    return out


def _dont_check_abi(ctx: Context) -> bool:
    return ctx.environ.get("TORCH_DONT_CHECK_COMPILER_ABI") in ("ON", "1", "YES", "TRUE", "Y")


def _binary_build(version: str | None) -> bool:
    """torch's ``_is_binary_build``: not a source build (``2.5.0a0+git1234`` is one)."""
    return bool(version) and not re.match(r"\d+\.\d+\.\d+\w+\+\w+", version or "")


def check_build_abi(ctx: Context) -> list[Finding]:
    """torch built with the old C++ ABI (``_GLIBCXX_USE_CXX11_ABI=0``); and the C++ compiler's
    GCC major against the GCC in torch's ``.comment`` (info)."""
    b = build_facts(ctx, libraries=True)
    out: list[Finding] = []
    if b.torch_cxx11_abi is False:
        out.append(Finding(
            id="build.old-cxx-abi", severity="warning",
            title=f"{_torch_label(b)} was built with the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0)",
            cause="GCC ≥ 5 compiles with the new ABI by default. cpp_extension passes "
                  "-D_GLIBCXX_USE_CXX11_ABI=0 itself, but C++ code built any other way (CMake without "
                  "TORCH_CXX_FLAGS, another C++ library passing std::string across) fails to load with "
                  "\"undefined symbol: …__cxx11…\" or links against the wrong std::string.",
            evidence=(f"read from {b.torch_cxx11_abi_source}",
                      *(f"C++ compiler: {c.vendor} {c.version} ({c.found_by}): new ABI by default"
                        for c in _compilers(b, "c++") if c.vendor == "gcc")),
            fix=(("Build through torch.utils.cpp_extension, or add -D_GLIBCXX_USE_CXX11_ABI=0 (CMake: "
                 "${TORCH_CXX_FLAGS} from find_package(Torch))."),
                 "Or install a torch built with the new ABI (PyPI wheels are, from torch 2.7)."),
        ))
    if b.torch_gcc:
        for c in _compilers(b, "c++"):
            if c.vendor == "gcc" and vtuple(c.version)[0] != vtuple(b.torch_gcc)[0]:
                out.append(Finding(
                    id="build.compiler-differs", severity="info",
                    title=f"the C++ compiler is gcc {c.version}; {_torch_label(b)} was built with GCC {b.torch_gcc}",
                    cause="GCC's C++ ABI is stable across these releases when _GLIBCXX_USE_CXX11_ABI matches; what "
                          "can break is the libstdc++ at run time (build.libstdcxx-too-old).",
                    evidence=(f"{b.torch_gcc_source}: GCC {b.torch_gcc}", f"{c.command} → {c.path} ({c.found_by})"),
                    fix=("Nothing to do unless loading the extension fails.",),
                ))
    return out


def check_build_libstdcxx(ctx: Context) -> list[Finding]:
    """The ``GLIBCXX_*`` a build with this GCC may need against the libstdc++ a process of the
    target loads (libstdc++ manual, "ABI Policy and Guidelines"; case C03)."""
    from envlock.probes.buildfiles import glibcxx_for_gcc

    b = build_facts(ctx, libraries=True)
    if not b.libstdcxx_glibcxx:
        return []
    out = []
    seen = set()
    for c in b.compilers:
        if c.vendor != "gcc" or not c.version or c.version in seen:
            continue
        seen.add(c.version)
        need = glibcxx_for_gcc(c.version)
        if need and vtuple(need) > vtuple(b.libstdcxx_glibcxx):
            out.append(Finding(
                id="build.libstdcxx-too-old", severity="warning",
                title=f"an extension built with gcc {c.version} may need GLIBCXX_{need}; the libstdc++ this "
                      f"target loads has up to GLIBCXX_{b.libstdcxx_glibcxx}",
                cause="Code compiled by a GCC references libstdc++ symbols of that GCC's version; loading it "
                      f"then fails with \"version `GLIBCXX_{need}' not found (required by …so)\".",
                evidence=((f"{c.role} compiler: {c.path or c.command} ({c.found_by}): gcc {c.version} ships "
                          f"GLIBCXX_{need} (libstdc++ manual, ABI policy)"),
                          f"loaded at run time: {b.libstdcxx} (GLIBCXX_{b.libstdcxx_glibcxx})"),
                fix=("Build with the GCC whose libstdc++ is loaded, or link with -static-libstdc++.",
                     ("Or load a newer libstdc++ (conda: libstdcxx-ng ≥ the gcc; or that gcc's lib64 on "
                     "LD_LIBRARY_PATH).")),
            ))
    return out


def _expand(arch_list: str) -> list[str]:
    s = arch_list.replace(" ", ";")
    for name, value in NAMED_ARCHES:
        s = s.replace(name, value)
    return [e for e in s.split(";") if e]


def check_build_arch(ctx: Context) -> list[Finding]:
    """``TORCH_CUDA_ARCH_LIST`` against the entries torch accepts and the GPUs present."""
    b = build_facts(ctx)
    if not b.torch_cuda or not b.cuda_home:
        return []
    gpu = _gpu(ctx)
    gpus = [g for g in visible_gpus(gpu.gpus, ctx.environ) if g.compute_capability]
    if not b.arch_list:
        if gpus:
            return []
        return [Finding(
            id="build.arch-list-unset", severity="warning",
            title="TORCH_CUDA_ARCH_LIST is unset and no GPU is visible: a build has no architecture to target",
            cause="cpp_extension builds for the visible GPUs when TORCH_CUDA_ARCH_LIST is unset; with none "
                  "(a login node, CUDA_VISIBLE_DEVICES empty) torch 2.x's _get_cuda_arch_flags has an empty "
                  "list (an IndexError in 2.14), older releases built for a default list.",
            evidence=(gpu.error or "no visible GPU", "TORCH_CUDA_ARCH_LIST: unset"),
            fix=(("export TORCH_CUDA_ARCH_LIST=\"<the compute capabilities of the GPUs the job runs on>\" "
                 "(e.g. \"8.0;9.0+PTX\")"),),
        )]
    entries = _expand(b.arch_list)
    valid = set(b.torch_supported_archs)
    bad = [e for e in entries if not re.fullmatch(r"\d+\.\d+a?(\+PTX)?", e)
           or (valid and e.split("+")[0] not in valid)]
    out: list[Finding] = []
    if bad:
        out.append(Finding(
            id="build.arch-list-invalid", severity="error",
            title=f"TORCH_CUDA_ARCH_LIST={b.arch_list!r} has entries torch does not accept: {', '.join(bad)}",
            cause=f"cpp_extension raises ValueError \"Unknown CUDA arch ({bad[0]}) or GPU not supported\".",
            evidence=(f"TORCH_CUDA_ARCH_LIST={b.arch_list}",
                      *((f"accepted by {_torch_label(b)}: {' '.join(b.torch_supported_archs)} (each also with +PTX)",)
                        if valid else ())),
            fix=("Use X.Y or X.Y+PTX entries separated by ';' or spaces, e.g. \"8.0;8.6;9.0+PTX\".",),
        ))
    good = [e for e in entries if e not in bad]
    for g in gpus:
        try:
            verdict = assess_arch(g.compute_capability, good)
        except ValueError:
            continue
        if verdict.mode == "none":
            out.append(Finding(
                id="build.arch-list-missing-gpu", severity="warning",
                title=f"GPU {g.index} {g.name or ''} (compute capability {g.compute_capability}) is not in "
                      f"TORCH_CUDA_ARCH_LIST={b.arch_list!r}".replace("  ", " "),
                cause="The extension gets no kernel image for this GPU: \"no kernel image is available for "
                      "execution on the device\" when it runs here.",
                evidence=(f"TORCH_CUDA_ARCH_LIST={b.arch_list} → {' '.join(good) or 'nothing valid'}",
                          f"GPU {g.index}: {sm_name(g.compute_capability)}"),
                fix=(f"Add {g.compute_capability} (or an older X.Y+PTX) to TORCH_CUDA_ARCH_LIST.",),
            ))
    return out


def check_build_virtual(ctx: Context) -> list[Finding]:
    """conda's ``__cuda`` as the solver sees it here against what packages and locks need, and
    every ``CONDA_OVERRIDE_*`` that fakes a virtual package (conda docs, "Managing virtual
    packages")."""
    env = ctx.environ
    override = env.get("CONDA_OVERRIDE_CUDA")
    glibc_override = env.get("CONDA_OVERRIDE_GLIBC")
    needs = _needs_cuda_from_conda(ctx)
    if override is None and not needs and not glibc_override:
        return []
    out: list[Finding] = []
    gpu = _gpu(ctx)
    driver = gpu.driver_version
    supports = gpu.cuda_driver_version or (max_cuda_for_driver(driver) if driver else None)
    need_ev = tuple(f"{who} depends on __cuda {spec}".rstrip() for who, spec in needs)
    node = (f"driver {driver} (supports CUDA {supports or '?'})" if driver
            else f"no NVIDIA driver ({gpu.error or 'no /proc/driver/nvidia/version'})")
    if override is not None and override.strip():
        v = override.strip()
        if not driver:
            out.append(Finding(
                id="build.cuda-override", severity="warning" if needs else "info",
                title=f"CONDA_OVERRIDE_CUDA={v} makes conda's solver believe in CUDA {v}; "
                      "this node has no NVIDIA driver",
                cause="conda's __cuda virtual package is the CUDA the driver supports; the override replaces it, so "
                      "solves here pick CUDA builds that cannot run on this node.",
                evidence=(f"CONDA_OVERRIDE_CUDA={v} → __cuda={v}", node, *need_ev),
                fix=(("Fine for solving on a login node for GPU nodes; unset it in jobs that run here "
                     "(unset CONDA_OVERRIDE_CUDA)."),),
            ))
        elif supports:
            try:
                more = vtuple(v) > vtuple(supports)
            except ValueError:
                more = False
            if more:
                out.append(Finding(
                    id="build.cuda-override", severity="warning",
                    title=f"CONDA_OVERRIDE_CUDA={v} claims more CUDA than driver {driver} supports ({supports})",
                    cause="The solver picks packages built for CUDA up to the override; those needing more than "
                          "the driver gives fail with cudaErrorInsufficientDriver.",
                    evidence=(f"CONDA_OVERRIDE_CUDA={v} → __cuda={v}", node, *need_ev),
                    fix=(f"unset CONDA_OVERRIDE_CUDA, or set it to {supports}",),
                ))
    elif override is not None and driver:
        out.append(Finding(
            id="build.cuda-override", severity="warning",
            title="CONDA_OVERRIDE_CUDA is empty: conda's solver sees no CUDA although driver "
                  f"{driver} supports CUDA {supports or '?'}",
            cause="An empty override removes __cuda: solves pick CPU-only builds and packages needing __cuda "
                  "are unsatisfiable.",
            evidence=("CONDA_OVERRIDE_CUDA=''", node, *need_ev),
            fix=("unset CONDA_OVERRIDE_CUDA",),
        ))
    elif not driver and needs:
        low = next((m.group(1) for _w, spec in needs if (m := re.search(r"(\d+(?:\.\d+)?)", spec or ""))), None)
        out.append(Finding(
            id="build.no-virtual-cuda", severity="warning",
            title="conda's solver sees no __cuda on this node, but " + "; ".join(need_ev[:2]),
            cause="Without a driver there is no __cuda virtual package: a solve or install of these packages "
                  "here (conda install/update, conda-lock install) fails with \"nothing provides __cuda\".",
            evidence=(node, "CONDA_OVERRIDE_CUDA: unset", *need_ev),
            fix=((f"To solve here for GPU nodes: CONDA_OVERRIDE_CUDA={low or '<version>'} conda … "
                 "(the override is then what makes the solver believe in CUDA)"),
                 "or solve on a GPU node"),
        ))
    if glibc_override and glibc_override.strip():
        from envlock.libs.glibc import detect_glibc

        found = detect_glibc(ctx.live.root or "/")
        real = found.version if found else None
        try:
            higher = real is not None and vtuple(glibc_override) > vtuple(real)
        except ValueError:
            higher = False
        if higher:
            out.append(Finding(
                id="build.glibc-override", severity="warning",
                title=f"CONDA_OVERRIDE_GLIBC={glibc_override.strip()} claims a newer glibc than this node's ({real})",
                cause="Packages solved for the override may need GLIBC_ symbols this node lacks: \"version "
                      "`GLIBC_2.xx' not found\".",
                evidence=(f"CONDA_OVERRIDE_GLIBC={glibc_override.strip()}",
                          f"glibc {real} ({found.source if found else 'this node'})"),
                fix=("unset CONDA_OVERRIDE_GLIBC in jobs that run here",),
            ))
    return out


def check_build(ctx: Context) -> list[Finding]:
    """The build checks of a plain ``envlock verify``, as one check: the toolkit against torch
    (:func:`check_build_cuda`), the host compilers (:func:`check_build_compiler`) and conda's
    virtual packages (:func:`check_build_virtual`) — each silent unless a build is in view.

    A job need not build anything, so here an error is reported as a warning (``verify --build``
    and the policy's ``severity`` give it back its weight)."""
    out = check_build_virtual(ctx)
    # Only a CUDA torch can get a CUDA extension: the toolchain is not even looked at otherwise.
    if any(b.name == "torch" and b.build == "cuda" for b in ctx.live.frameworks()):
        out = [*check_build_cuda(ctx), *check_build_compiler(ctx), *out]
    return [f.with_severity("warning") if f.severity == "error" else f for f in out]


#: In every ``envlock verify`` (silent unless a build is in view).
DEFAULT_BUILD_CHECKS: tuple[tuple[str, Callable[[Any], list[Finding]]], ...] = (
    ("build", check_build),
)

def _with_libraries(fn: Callable[[Any], list[Finding]]) -> Callable[[Any], list[Finding]]:
    """``fn`` run on the complete facts (one probe shared by all of ``--build``'s checks)."""
    @functools.wraps(fn)
    def run(ctx: Context) -> list[Finding]:
        build_facts(ctx, libraries=True)
        return fn(ctx)
    return run


#: ``envlock verify --build``: all build-toolchain checks, in this order.
BUILD_CHECKS: tuple[tuple[str, Callable[[Any], list[Finding]]], ...] = tuple(
    (name, _with_libraries(fn)) for name, fn in (
        ("build-cuda", check_build_toolkit),
        ("build-compiler", check_build_compiler),
        ("build-abi", check_build_abi),
        ("build-libstdcxx", check_build_libstdcxx),
        ("build-arch", check_build_arch),
        ("build-virtual", check_build_virtual),
    ))
