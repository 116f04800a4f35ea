"""``[build]`` probe: the toolchain a CUDA/C++ extension build would use, found the way the build finds it.

What ``torch.utils.cpp_extension`` (``BuildExtension``, ``load()``) does, step by step, and
where envlock reads each step (nothing of the target is imported):

1. **CUDA home** — ``_find_cuda_home()``.  The order is read from the target's own
   ``torch/utils/cpp_extension.py`` (the function's source, parsed with :mod:`ast`: the
   environment variables it reads, its ``which nvcc``, its ``/usr/local/cuda``), so another
   torch release is followed as it is written.  In torch 1.x–2.14 it is: ``$CUDA_HOME``, then
   ``$CUDA_PATH`` (the first non-empty), then ``nvcc`` on ``PATH`` — the CUDA home is its
   parent's parent, **without resolving symlinks** (``/usr/local/bin/nvcc`` gives
   ``/usr/local``), then ``/usr/local/cuda`` if it exists (torch 1.x ran ``which nvcc``,
   recent 2.x ``shutil.which("nvcc")``); torch 0.4's first version tried ``/usr/local/cuda``
   before ``which nvcc``.  conda's ``cuda-nvcc`` is found through ``PATH``: its
   ``nvcc`` is ``<prefix>/bin/nvcc``, so the CUDA home is the prefix; the conda record that
   installed it is named.
2. **nvcc** — ``_check_cuda_version()`` runs ``<CUDA home>/bin/nvcc --version`` and takes
   ``release X.Y``; envlock runs the same command (with a timeout; the output is cached per
   executable).  The toolkit's ``version.json`` and ``include/crt/host_config.h`` (the newest
   GCC / Clang major nvcc accepts, from its ``#error`` lines) are read from the same home.
3. **Compilers** — ``.cpp`` files: ``$CXX``, else ``c++`` (``get_cxx_compiler()``; a
   ``setup.py`` build takes ``$CXX`` over Python's sysconfig ``CXX``).  ``.cu`` files: nvcc's
   host compiler: ``-ccbin $CC`` when ``CC`` is set (cpp_extension adds it), else
   ``-ccbin``/``--compiler-bindir`` in ``NVCC_PREPEND_FLAGS``/``NVCC_APPEND_FLAGS``, else
   ``$NVCC_CCBIN``, else ``gcc`` on ``PATH`` (nvcc's default; ``nvcc -dryrun`` shows it).
4. **Architectures** — ``TORCH_CUDA_ARCH_LIST`` (``_get_cuda_arch_flags``); unset: the
   visible GPUs' capabilities.
5. **What it will be loaded into** — torch's ``version.py`` (``cuda``), the GCC in the
   ``.comment`` section of ``torch/lib/libtorch_cpu.so``, torch's ``_GLIBCXX_USE_CXX11_ABI``
   (``-D_GLIBCXX_USE_CXX11_ABI=N`` in ``torch/share/cmake/Torch/TorchConfig.cmake`` where
   older releases write it, else the ``.dynstr`` of ``libc10.so``: mangled names with ``__cxx11``
   (``std::__cxx11::basic_string``) mean the new ABI, ``Ss`` (old ``std::string``) without any
   ``__cxx11`` the old one), and the ``libstdc++.so.6`` a process loads (the env's
   ``lib/`` copy, else the system's) with its highest ``GLIBCXX_*``.
6. **conda virtual packages** — :mod:`envlock.probes.virtual`.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from envlock._run import Runner, RunResult, run
from envlock.manifest.buildtable import BuildCompiler, BuildInfo, VirtualPackage
from envlock.probes._stackutil import read_text, under_root, which
from envlock.probes.buildfiles import (
    DEFAULT_CUDA_HOME_ORDER,
    _vt,
    parse_host_config,
    parse_nvcc_release,
    read_cuda_home_order,
    read_cxx11_abi,
    read_torch_gcc_bounds,
)
from envlock.probes.world import World

__all__ = ["probe_build", "find_cuda_home"]

_SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu", "/lib64",
                    "/usr/lib/aarch64-linux-gnu", "/usr/lib")


# -- running a tool ---------------------------------------------------------------------------
def _version_text(path: str, runner: Runner, timeout: float, env: Mapping[str, str]) -> str | RunResult:
    """``<path> --version`` output; for the real runner cached per executable (namespace
    ``tool-versions``, as the toolchain probe does), valid while the file is unchanged."""
    entry = real = None
    if runner is run:
        from envlock import cache as _statcache

        real = os.path.realpath(path)
        entry = _statcache.entry_path("tool-versions", {"v": 1, "tool": os.path.basename(path), "path": real})
        hit = _statcache.load(entry)
        if isinstance(hit, str):
            return hit
    res = runner([path, "--version"], timeout=timeout, env={**env, "LC_ALL": "C"})
    if not res.ok:
        return res
    out = res.stdout or res.stderr
    if entry is not None and real is not None:
        from envlock import cache as _statcache

        _statcache.store(entry, [real], out)
    return out


def _cc_version(text: str) -> tuple[str | None, str | None]:
    from envlock.probes.toolchain import _parse_cc_version  # the toolchain probe's parser

    vendor, version = _parse_cc_version(text)
    if version is None and "Free Software Foundation" in text:
        # ``c++``/``cc`` print their own name first (``c++ (Debian 12.2.0-14) 12.2.0``); GCC's
        # copyright line identifies them.
        first = (text.strip().splitlines() or [""])[0]
        m = re.search(r"\)\s+(\d+\.\d+(?:\.\d+)?)\b", first)
        if m:
            return "gcc", m.group(1)
    return vendor, version


# -- lookups ----------------------------------------------------------------------------------
def find_cuda_home(
    order: Sequence[str], environ: Mapping[str, str], path_dirs: Sequence[str], root: Path = Path("/")
) -> tuple[str | None, str | None, str | None]:
    """Follow ``order`` (:func:`read_cuda_home_order`) as ``_find_cuda_home`` does.

    :returns: ``(cuda home, the step that found it, the nvcc found on PATH)``;
        ``(None, None, None)`` when no step gives one.
    """
    env_steps = [s for s in order if s not in ("nvcc on PATH", "/usr/local/cuda")]
    for step in order:
        if step in env_steps:
            value = environ.get(step)
            if value:
                return value, step, None
        elif step == "nvcc on PATH":
            nvcc = which("nvcc", path_dirs)
            if nvcc:
                return os.path.dirname(os.path.dirname(nvcc)), step, nvcc
        elif step == "/usr/local/cuda" and under_root(root, "/usr/local/cuda").exists():
            return "/usr/local/cuda", step, None
    return None, None, None


def _ccbin_flag(environ: Mapping[str, str]) -> tuple[str, str] | None:
    for var in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
        try:
            words = shlex.split(environ.get(var, ""))
        except ValueError:
            continue
        for i, w in enumerate(words):
            for flag in ("-ccbin", "--compiler-bindir"):
                if w == flag and i + 1 < len(words):
                    return words[i + 1], var
                if w.startswith(flag + "="):
                    return w.split("=", 1)[1], var
    return None


def _resolve(command: str, path_dirs: Sequence[str], *, default_name: str) -> str | None:
    if "/" in command:
        if os.path.isdir(command):
            command = os.path.join(command, default_name)
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    return which(command, path_dirs)


def _compiler(role: str, command: str, found_by: str, path_dirs: Sequence[str], runner: Runner,
              timeout: float, env: Mapping[str, str], default_name: str) -> BuildCompiler:
    path = _resolve(command, path_dirs, default_name=default_name)
    if path is None:
        return BuildCompiler(role=role, command=command, found_by=found_by, error=f"{command}: not found")
    out = _version_text(path, runner, timeout, env)
    if isinstance(out, RunResult):
        return BuildCompiler(role=role, command=command, found_by=found_by, path=path,
                             error=f"{command} --version: {out.status}: {out.detail}")
    vendor, version = _cc_version(out)
    if version is None:
        first = (out.strip().splitlines() or [""])[0][:120]
        return BuildCompiler(role=role, command=command, found_by=found_by, path=path,
                             error=f"unrecognised version output: {first!r}")
    return BuildCompiler(role=role, command=command, found_by=found_by, path=path, vendor=vendor, version=version)


def _torch_dir(site_dirs: Sequence[str]) -> Path | None:
    for d in site_dirs:
        p = Path(d) / "torch"
        if (p / "version.py").is_file():
            return p
    return None


def _torch_version_py(path: Path) -> dict[str, object]:
    text = read_text(path, 1 << 16) or ""
    out: dict[str, object] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            try:
                out[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return out


def _torch_gcc(torch_dir: Path) -> tuple[str | None, str | None]:
    from envlock.libs.elf import ElfCache
    from envlock.libs.elfread import read_elf

    for name in ("libtorch_cpu.so", "libtorch_python.so", "libc10.so"):
        lib = torch_dir / "lib" / name
        if not lib.exists():
            continue
        info = read_elf(lib, cache=ElfCache())
        versions = [m.group(1) for c in info.comments if (m := re.match(r"GCC: \([^)]*\) (\d+\.\d+(?:\.\d+)?)", c))]
        if versions:
            return max(versions, key=_vt), f"{lib} .comment"
    return None, None


def _libstdcxx(prefix: str | None, root: Path) -> tuple[str | None, str | None]:
    from envlock.libs.elf import ElfCache
    from envlock.libs.elfread import read_elf

    cands = []
    if prefix:
        cands.append(Path(prefix) / "lib" / "libstdc++.so.6")
    cands += [under_root(root, d) / "libstdc++.so.6" for d in _SYSTEM_LIB_DIRS]
    for c in cands:
        if not c.exists():
            continue
        info = read_elf(c, cache=ElfCache())
        best = None
        for n in info.defined_versions():
            if n.startswith("GLIBCXX_") and re.fullmatch(r"\d+(\.\d+)*", n[8:]):
                if best is None or _vt(n[8:]) > _vt(best):
                    best = n[8:]
        return os.path.realpath(c), best
    return None, None


def _conda_nvcc(prefix: str | None, nvcc: str | None) -> str | None:
    if not prefix or not nvcc or not os.path.abspath(nvcc).startswith(os.path.join(prefix, "bin") + os.sep):
        return None
    from envlock.probes.condameta import list_conda_meta

    for r in list_conda_meta(prefix):
        if r.name in ("cuda-nvcc", "cuda-nvcc_linux-64", "nvcc_linux-64", "cudatoolkit-dev"):
            return f"{r.name}={r.version}={r.build}"
    return None


def _proc_driver(root: Path) -> dict[str, str | None]:
    """The driver version from ``/proc/driver/nvidia/version`` and the CUDA it supports
    (NVIDIA's toolkit driver table) — what conda's ``__cuda`` would be, without loading libcuda."""
    from envlock.nvidia import max_cuda_for_driver
    from envlock.probes.gpu import _parse_proc_driver_version  # the GPU probe's parser

    text = read_text(under_root(root, "/proc/driver/nvidia/version"), 4096)
    parsed = _parse_proc_driver_version(text) if text else None
    driver = parsed[0] if parsed else None
    return {"driver_version": driver, "driver_cuda": max_cuda_for_driver(driver) if driver else None}


@dataclass(frozen=True)
class _TorchSource:
    """What torch's own sources say about a build: ``cpp_extension.py``'s CUDA-home order and
    GCC bounds per CUDA release, ``version.py``'s values and the supported architectures."""

    order: tuple[str, ...] = DEFAULT_CUDA_HOME_ORDER
    order_src: str = "default"
    bounds: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    version_py: dict[str, object] = field(default_factory=dict)
    supported_archs: tuple[str, ...] = ()


def _read_torch_source(torch_dir: Path | None, errors: list[str]) -> _TorchSource:
    """Read ``torch/version.py`` and ``torch/utils/cpp_extension.py`` (nothing imported); an
    unreadable ``_find_cuda_home`` appends to ``errors`` and keeps the default order."""
    if torch_dir is None:
        return _TorchSource()
    tv = _torch_version_py(torch_dir / "version.py")
    cpp = torch_dir / "utils" / "cpp_extension.py"
    text = read_text(cpp, 1 << 22)
    if text is None:
        return _TorchSource(version_py=tv)
    order: tuple[str, ...] = DEFAULT_CUDA_HOME_ORDER
    order_src = "default"
    read = read_cuda_home_order(text)
    if read:
        order, order_src = read, f"{cpp} _find_cuda_home"
    else:
        errors.append(f"{cpp}: _find_cuda_home not readable; default order used")
    supported_archs: tuple[str, ...] = ()
    m = re.search(r"supported_arches\s*=\s*(\[[^\]]*\])", text)
    if m:
        try:
            supported_archs = tuple(str(a) for a in ast.literal_eval(m.group(1)))
        except (ValueError, SyntaxError):
            supported_archs = ()
    return _TorchSource(order, order_src, read_torch_gcc_bounds(text), tv, supported_archs)


def _cxx_spec(environ: Mapping[str, str]) -> tuple[str, str]:
    """The C++ compiler cpp_extension uses, and why: ``$CXX``'s first word, else ``c++``."""
    cxx_cmd = environ.get("CXX")
    cxx_word = (shlex.split(cxx_cmd)[0] if cxx_cmd and cxx_cmd.strip() else None)
    return (cxx_word, "CXX") if cxx_word else ("c++", "default c++ (cpp_extension.get_cxx_compiler)")


def _host_spec(environ: Mapping[str, str]) -> tuple[str, str]:
    """nvcc's host compiler, and why: ``$CC``, ``-ccbin`` in nvcc's flags, ``$NVCC_CCBIN``, gcc."""
    flag = _ccbin_flag(environ)
    if environ.get("CC"):
        return (environ["CC"].split()[0], "CC (cpp_extension passes -ccbin $CC to nvcc)")
    if flag:
        return (flag[0], f"-ccbin in {flag[1]}")
    if environ.get("NVCC_CCBIN"):
        return (environ["NVCC_CCBIN"], "NVCC_CCBIN")
    return ("gcc", "nvcc's default: gcc on PATH")


def _nvcc_release(nvcc: str | None, nvcc_out: str | RunResult | None
                  ) -> tuple[str | None, str | None, str | None]:
    """``(release, full version, error)`` from ``nvcc --version``'s output (or its failure)."""
    release = full = nvcc_err = None
    if nvcc and nvcc_out is None:
        nvcc_err = f"nvcc not found at {nvcc}"
    elif isinstance(nvcc_out, RunResult):
        nvcc_err = f"{nvcc} --version: {nvcc_out.status}: {nvcc_out.detail}"
    elif isinstance(nvcc_out, str):
        release, full = parse_nvcc_release(nvcc_out)
        if release is None:
            nvcc_err = f"{nvcc} --version: no 'release X.Y' in its output"
    return release, full, nvcc_err


def _toolkit_files(home_dir: Path | None, environ: Mapping[str, str]
                   ) -> tuple[str | None, str | None, int | None, int | None]:
    """``(toolkit version, cuda_runtime.h, host_config.h's newest GCC, newest clang)`` of the
    CUDA home's files (``version.json``, the include directories, ``crt/host_config.h``)."""
    toolkit_version = header = None
    gcc_max = clang_max = None
    if home_dir is None:
        return None, None, None, None
    h = home_dir
    # cpp_extension adds <home>/include (and $CUDA_INC_PATH); conda's CUDA 12+ packages keep
    # the headers in <prefix>/targets/<arch>/include, which their compiler activation adds.
    inc = [h / "include", *([Path(environ["CUDA_INC_PATH"])] if environ.get("CUDA_INC_PATH") else []),
           *sorted((h / "targets").glob("*/include"))]
    header = next((str(d / "cuda_runtime.h") for d in inc if (d / "cuda_runtime.h").is_file()), None)
    text = read_text(h / "version.json", 1 << 18)
    if text:
        m = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"', text)
        toolkit_version = m.group(1) if m else None
    for hc in [h / "include" / "crt" / "host_config.h",
               *sorted((h / "targets").glob("*/include/crt/host_config.h"))]:
        text = read_text(hc, 1 << 18)
        if text:
            gcc_max, clang_max = parse_host_config(text)
            break
    return toolkit_version, header, gcc_max, clang_max


def _run_tools(nvcc_file: str | None, home: str | None, environ: Mapping[str, str],
               dirs: Sequence[str], runner: Runner, timeout: float
               ) -> tuple[str | RunResult | None, list[BuildCompiler]]:
    """Run, concurrently, nvcc of the CUDA home, the C++ compiler and (with a CUDA home) nvcc's
    host compiler: ``(nvcc --version output or failure, None without an nvcc file; compilers)``."""
    cxx_spec, host_spec = _cxx_spec(environ), _host_spec(environ)
    with ThreadPoolExecutor(max_workers=3) as pool:
        f_nvcc = pool.submit(_version_text, nvcc_file, runner, timeout, environ) \
            if nvcc_file and os.path.isfile(nvcc_file) else None
        f_cxx = pool.submit(_compiler, "c++", cxx_spec[0], cxx_spec[1], dirs, runner, timeout, environ, "g++")
        f_host = pool.submit(_compiler, "nvcc-host", host_spec[0], host_spec[1], dirs, runner, timeout,
                             environ, "gcc") if home else None
        nvcc_out = f_nvcc.result() if f_nvcc else None
        compilers = [f_cxx.result()] + ([f_host.result()] if f_host else [])
    return nvcc_out, compilers


def _allow_unsupported(environ: Mapping[str, str]) -> bool:
    """Whether nvcc's flags (``NVCC_PREPEND_FLAGS``/``NVCC_APPEND_FLAGS``) allow an unsupported
    host compiler."""
    flags = f"{environ.get('NVCC_PREPEND_FLAGS', '')} {environ.get('NVCC_APPEND_FLAGS', '')}"
    return bool(re.search(r"(?:^|\s)-?-allow-unsupported-compiler\b", flags))


def _torch_build(torch_dir: Path | None, libraries: bool, release: str | None,
                 bounds: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]
                 ) -> tuple[str | None, str | None, bool | None, str | None, str | None]:
    """``(torch's GCC, its source, the C++11 ABI, its source, the GCC bounds for this CUDA
    release)``; the ELF files are read only with ``libraries``."""
    torch_gcc = torch_gcc_src = abi_src = None
    abi = None
    torch_bounds = None
    if torch_dir is not None:
        if libraries:
            torch_gcc, torch_gcc_src = _torch_gcc(torch_dir)
            abi, abi_src = read_cxx11_abi(torch_dir)
        if release and release in bounds:
            lo, hi = bounds[release]
            torch_bounds = f">={'.'.join(map(str, lo))}, <{'.'.join(map(str, hi))}"
    return torch_gcc, torch_gcc_src, abi, abi_src, torch_bounds


def probe_build(
    world: World,
    *,
    virtual: Sequence[VirtualPackage] | None = None,
    libraries: bool = True,
) -> BuildInfo:
    """Record what an extension build in this target would use (module docstring).

    :param world: what is observed: ``environ`` (the build's environment), ``prefix`` (its
        ``lib/libstdc++``; ``<prefix>/bin`` leads the default ``path_dirs``), ``site_dirs``
        (where ``torch`` is found), ``path_dirs`` (the ``PATH`` searched for ``nvcc`` and the
        compilers), ``root`` (``/usr/local/cuda``, system libraries, the driver version),
        ``runner`` (``nvcc``/compilers ``--version``) and ``timeout`` (seconds per command).
    :param virtual: the conda virtual packages (:func:`envlock.probes.virtual.probe_virtual`),
        recorded as given; ``None`` probes them (the driver from ``/proc/driver/nvidia/version``).
    :param libraries: also read torch's and libstdc++'s ELF files (GCC of ``.comment``, the C++
        ABI, ``GLIBCXX_*``); ``False`` leaves those fields unset (cheaper: no ELF reader).
    :returns: a :class:`BuildInfo`; ``status="absent"`` when there is neither a torch nor a CUDA
        home.  Never raises.
    """
    environ, prefix, site_dirs, dirs = dict(world.environ), world.prefix, world.site_dirs, world.path_dirs
    root, runner, timeout = world.root, world.runner, world.timeout
    errors: list[str] = []
    torch_dir = _torch_dir(site_dirs)
    ts = _read_torch_source(torch_dir, errors)
    order, order_src, tv = ts.order, ts.order_src, ts.version_py
    home, found_by, _nvcc_on_path = find_cuda_home(order, environ, dirs, root)
    # Only the /usr/local/cuda step names a system path (re-rooted under ``root``); the other
    # steps give paths as the environment states them.
    home_dir = (under_root(root, home) if found_by == "/usr/local/cuda" else Path(home)) if home else None
    nvcc = os.path.join(home, "bin", "nvcc") if home else None
    nvcc_file = str(home_dir / "bin" / "nvcc") if home_dir else None
    nvcc_out, compilers = _run_tools(nvcc_file, home, environ, dirs, runner, timeout)
    release, full, nvcc_err = _nvcc_release(nvcc, nvcc_out)
    toolkit_version, header, gcc_max, clang_max = _toolkit_files(home_dir, environ)
    torch_gcc, torch_gcc_src, abi, abi_src, torch_bounds = _torch_build(torch_dir, libraries, release, ts.bounds)
    libstdcxx, glibcxx = _libstdcxx(prefix, root) if libraries else (None, None)
    conda_pkg = _conda_nvcc(prefix, nvcc) if found_by == "nvcc on PATH" else None
    from envlock.probes.virtual import conda_overrides, probe_virtual
    if virtual is None:
        drv = _proc_driver(root)
        virtual = probe_virtual(world, driver_version=drv["driver_version"], driver_cuda=drv["driver_cuda"])

    status = "ok" if (torch_dir is not None or home) else "absent"
    return BuildInfo(
        status=status,
        source=", ".join(s for s in (order_src if torch_dir else None, nvcc if release else None) if s),
        error="; ".join(errors) or (None if status == "ok" else "no torch and no CUDA home"),
        cuda_home=home,
        cuda_home_found_by=found_by,
        cuda_home_order=order,
        cuda_home_order_source=order_src,
        conda_package=conda_pkg,
        nvcc=nvcc,
        nvcc_version=full,
        nvcc_release=release,
        nvcc_error=nvcc_err,
        path_nvcc=which("nvcc", dirs),
        toolkit_version=toolkit_version,
        cuda_runtime_header=header,
        host_config_gcc_max=gcc_max,
        host_config_clang_max=clang_max,
        allow_unsupported_compiler=_allow_unsupported(environ) if home else None,
        compilers=tuple(compilers),
        arch_list=environ.get("TORCH_CUDA_ARCH_LIST"),
        torch_version=str(tv["__version__"]) if isinstance(tv.get("__version__"), str) else None,
        torch_cuda=str(tv["cuda"]) if isinstance(tv.get("cuda"), str) else None,
        torch_location=str(torch_dir) if torch_dir else None,
        torch_supported_archs=ts.supported_archs,
        torch_gcc=torch_gcc,
        torch_gcc_source=torch_gcc_src,
        torch_gcc_bounds=torch_bounds,
        torch_cxx11_abi=abi,
        torch_cxx11_abi_source=abi_src,
        libstdcxx=libstdcxx,
        libstdcxx_glibcxx=glibcxx,
        virtual_packages=tuple(virtual or ()),
        conda_overrides=conda_overrides(environ),
    )
