"""``[toolchain]`` probe: compilers, MPI and CMake on the target's PATH; glibc; libstdc++ versions.

* Tools are looked up in the target's ``PATH`` order (a conda env's ``bin`` first) and asked
  their version (``--version``; ``mpicc -show``/``--showme`` to see the compiler an MPI wrapper
  runs).  All commands run concurrently, each with a timeout.
* glibc: :func:`envlock.libs.glibc.detect_glibc`, the detector ``[platform]`` uses too.
* libstdc++: the highest ``GLIBCXX_*``/``CXXABI_*`` version definitions (ELF ``Verdef``,
  read by envlock.libs.elf) of ``<prefix>/lib/libstdc++.so.6`` and of the system's copy.
* ``built_with``: the ``.comment`` section of key binaries (torch, numpy), which names the
  compilers that produced them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from envlock._run import Runner, RunResult, run
from envlock.manifest import PipPackage, Status
from envlock.manifest.stacktables import BuiltWith, Libstdcxx, Tool, ToolchainInfo
from envlock.probes._stackutil import site_dists, under_root, which
from envlock.probes.world import World

if TYPE_CHECKING:
    from envlock.libs.elf import ElfInfo

__all__ = ["TOOLS", "probe_toolchain"]

#: Tools looked up, in the order recorded.
TOOLS: tuple[str, ...] = (
    "gcc",
    "g++",
    "gfortran",
    "clang",
    "clang++",
    "icx",
    "icpx",
    "nvcc",
    "mpicc",
    "mpirun",
    "cmake",
)

_SYSTEM_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib",
)


# -- pure parsers ----------------------------------------------------------------------------
def _parse_cc_version(text: str) -> tuple[str | None, str | None]:
    """Parse ``<compiler> --version`` of GCC, Clang or Intel oneAPI compilers.

    :returns: ``(vendor, version)``: ``("gcc", "12.2.0")``, ``("clang", "17.0.6")``,
        ``("intel", "2024.0.0")``; ``(None, None)`` when unrecognised.
    """
    first = (text.strip().splitlines() or [""])[0]
    m = re.search(r"clang version (\d+(?:\.\d+)+)", first)
    if m:
        return "clang", m.group(1)
    m = re.search(r"Intel\(R\) oneAPI .*?Compiler (\d+(?:\.\d+)+)", first)
    if m:
        return "intel", m.group(1)
    m = re.search(r"\)\s+(\d+\.\d+(?:\.\d+)?)\b", first)
    if m and (
        "GCC" in first or "gcc" in first or "g++" in first or "Fortran" in first or "GNU" in first
    ):
        return "gcc", m.group(1)
    return None, None


def _parse_mpirun_version(text: str) -> tuple[str | None, str | None]:
    """Parse ``mpirun --version``: Open MPI, MPICH (Hydra) or Intel MPI.

    :returns: ``(vendor, version)``, e.g. ``("Open MPI", "4.1.4")``, or ``(None, None)``.
    """
    m = re.search(r"\((Open MPI|OpenRTE|PRRTE)\)\s+(\d+(?:\.\d+)+\w*)", text)
    if m:
        return "Open MPI", m.group(2)
    m = re.search(r"Intel\(R\) MPI Library.*?Version\s+(\d+(?:\.\d+)+)", text)
    if m:
        return "Intel MPI", m.group(1)
    if "HYDRA build details" in text:
        m = re.search(r"^\s*Version:\s+(\S+)", text, re.MULTILINE)
        return "MPICH", m.group(1) if m else None
    return None, None


def _parse_cmake_version(text: str) -> str | None:
    """``"cmake version 3.25.1"`` → ``"3.25.1"``."""
    m = re.search(r"cmake version (\d+(?:\.\d+)+\S*)", text)
    return m.group(1) if m else None


def _parse_nvcc_release(text: str) -> str | None:
    m = re.search(r"release \d+\.\d+, V(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def _parse_mpicc_show(text: str) -> str | None:
    """First word of ``mpicc -show``/``--showme``: the compiler the wrapper runs."""
    words = text.split()
    return words[0] if words else None


def _max_version(names: Sequence[str], prefix: str) -> str | None:
    """Highest ``<prefix>X.Y.Z`` among version-definition names, compared numerically."""
    best: tuple[int, ...] | None = None
    for n in names:
        if not n.startswith(prefix):
            continue
        rest = n[len(prefix) :]
        if not re.fullmatch(r"\d+(?:\.\d+)*", rest):
            continue
        v = tuple(int(p) for p in rest.split("."))
        if best is None or v > best:
            best = v
    return ".".join(map(str, best)) if best else None


# -- small private ELF readers (the loader's envlock.libs.elf may replace these) -------------------
def _elf_facts(path: str | os.PathLike[str]) -> ElfInfo:
    """The ELF facts of ``path`` (version definitions, ``.comment``) through envlock's ELF
    reader and its on-disk cache.

    :raises ValueError: the file cannot be read or is not a valid ELF file.
    """
    from envlock.libs.elf import ElfCache  # only when needed
    from envlock.libs.elfread import read_elf  # only when needed

    from envlock.cache import is_enabled

    info = read_elf(path, cache=ElfCache() if is_enabled() else None)
    if info.error is not None:
        raise ValueError(f"{info.error.kind}: {info.error.message}")
    return info


# -- probe -----------------------------------------------------------------------------------
#: Tools whose ``--version`` output depends only on their executable file (the version string is
#: compiled into the driver).  Not clang or icx: theirs comes from a shared library
#: (``libclang-cpp.so``), which ``LD_LIBRARY_PATH`` or an upgrade can change under the same binary.
_CACHEABLE = frozenset({"gcc", "g++", "gfortran", "nvcc", "cmake"})


def _version_output(name: str, path: str, call: Callable[..., RunResult], *, cache: bool,
                    env: Mapping[str, str] | None = None) -> str | RunResult:
    """``<tool> --version``'s output, or the failed :class:`RunResult`.

    For compilers and cmake the output is kept by :func:`envlock.cache.memo` (namespace
    ``tool-versions``) while the executable file (symlinks resolved) is unchanged: the same
    binary prints the same version, and a job prologue need not start four compilers.  The
    ``LD_*`` variables of ``env`` are in the key, their directories are witnesses; a failed run
    is not kept.
    """
    if not (cache and name in _CACHEABLE):
        res = call("--version")
        return (res.stdout or res.stderr) if res.ok else res
    from envlock import cache as _cache

    real = os.path.realpath(path)

    env = {} if env is None else env
    loader_env = {k: v for k, v in env.items() if k.startswith("LD_")}

    def compute(rec: _cache.Recorder) -> str | RunResult:
        rec.file(real)
        for d in (loader_env.get("LD_LIBRARY_PATH") or "").split(":"):
            if d:
                rec.directory(d)
        rec.file("/etc/ld.so.cache")
        res = call("--version")
        if not res.ok:
            rec.uncacheable(res.detail or res.status)
            return res
        return res.stdout or res.stderr

    def decode(v: object) -> str:
        if not isinstance(v, str):
            raise TypeError("bad entry")
        return v

    return _cache.memo("tool-versions", {"v": 2, "tool": name, "path": real, "env": loader_env}, compute,
                       decode=decode)


def _probe_tool(name: str, path: str, runner: Runner, timeout: float, env: dict[str, str]) -> Tool:
    def call(*args: str) -> RunResult:
        return runner([path, *args], timeout=timeout, env=env)

    if name == "mpicc":
        res = call("-show")
        if not res.ok:
            res2 = call("--showme")
            res = res2 if res2.ok else res
        if not res.ok:
            return Tool(name=name, path=path, status=res.status, error=res.detail)
        return Tool(name=name, path=path, wraps=_parse_mpicc_show(res.stdout))
    out = _version_output(name, path, call, cache=runner is run, env=env)
    if isinstance(out, RunResult):
        return Tool(name=name, path=path, status=out.status, error=out.detail)
    if name == "mpirun":
        vendor, version = _parse_mpirun_version(out)
    elif name == "cmake":
        vendor, version = None, _parse_cmake_version(out)
    elif name == "nvcc":
        vendor, version = "nvidia", _parse_nvcc_release(out)
    else:
        vendor, version = _parse_cc_version(out)
    if version is None:
        first = (out.strip().splitlines() or [""])[0][:120]
        return Tool(
            name=name,
            path=path,
            vendor=vendor,
            status="error",
            error=f"unrecognised version output: {first!r}",
        )
    return Tool(name=name, path=path, version=version, vendor=vendor)


def _libstdcxx_copies(root: Path, prefix: str | None) -> list[Libstdcxx]:
    """Each distinct ``libstdc++.so.6`` (by real path) of the env's ``lib/`` and the system
    library directories, with its newest ``GLIBCXX_``/``CXXABI_`` version definitions."""
    stdcxx: list[Libstdcxx] = []
    seen: set[str] = set()
    cands: list[tuple[Path, str, str]] = []
    if prefix:
        cands.append((Path(prefix) / "lib" / "libstdc++.so.6", str(Path(prefix) / "lib"), "env"))
    for d in _SYSTEM_LIB_DIRS:
        cands.append((under_root(root, d) / "libstdc++.so.6", d, "system"))
    for path, shown_dir, origin in cands:
        if not path.exists():
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        shown = f"{shown_dir}/{os.path.basename(real)}" if origin == "system" else real
        try:
            names = _elf_facts(real).defined_versions()
        except ValueError as exc:
            stdcxx.append(Libstdcxx(path=shown, origin=origin, error=str(exc)))
            continue
        stdcxx.append(
            Libstdcxx(
                path=shown,
                origin=origin,
                glibcxx=_max_version(names, "GLIBCXX_"),
                cxxabi=_max_version(names, "CXXABI_"),
            )
        )
    return stdcxx


def _built_with(site_dirs: Sequence[str], dists: Sequence[PipPackage] | None,
                errors: list[str]) -> list[BuiltWith]:
    """The compilers (ELF ``.comment``) that built each package's first key binary that has
    any; an unreadable binary is appended to ``errors``."""
    built: list[BuiltWith] = []
    for dist in site_dists(site_dirs, dists):
        for binary in _key_binaries(dist.name, dist.site):
            try:
                comments = _elf_facts(binary).comments
            except ValueError as exc:
                errors.append(f"{binary}: {exc}")
                continue
            if comments:
                built.append(BuiltWith(package=dist.name, path=str(binary), compilers=comments))
            break
    return built


def probe_toolchain(
    world: World,
    *,
    dists: Sequence[PipPackage] | None = None,
    tools: Sequence[str] = TOOLS,
    confstr: Callable[[str], str | None] | None = None,
) -> ToolchainInfo:
    """Record compilers, MPI, CMake, glibc and libstdc++ of the target.

    :param world: what is observed: ``root`` for the system libraries, ``environ`` (the tools
        run with it, plus ``LC_ALL=C``), ``prefix`` (its ``lib/libstdc++.so.6``), ``site_dirs``
        (binaries for ``built_with``), ``path_dirs`` (searched in order), ``runner`` and
        ``timeout`` (seconds per tool).
    :param dists: the distributions of ``site_dirs`` already read by
        :func:`~envlock.probes.pip.scan_distributions`; ``None`` scans ``site_dirs``.
    :param tools: tool names to look for.
    :param confstr: ``os.confstr`` (injectable); used only when ``world.root`` is ``/``.
    :returns: a :class:`ToolchainInfo`.  Never raises.
    """
    root, prefix, site_dirs = world.root, world.prefix, world.site_dirs
    path_dirs, runner, timeout = world.path_dirs, world.runner, world.timeout
    child_env = {**world.environ, "LC_ALL": "C"}
    found = [(t, p) for t in tools if (p := which(t, path_dirs))]
    recorded: list[Tool] = []
    if found:
        with ThreadPoolExecutor(max_workers=min(8, len(found))) as pool:
            futures = [pool.submit(_probe_tool, t, p, runner, timeout, child_env) for t, p in found]
            recorded = [f.result() for f in futures]
    sources = ["PATH"] if found else []
    errors: list[str] = []

    # glibc: the one detector (envlock.libs.glibc)
    from envlock.libs.glibc import detect_glibc

    found_glibc = detect_glibc(root, confstr=confstr)
    glibc, glibc_src = (found_glibc.version, found_glibc.source) if found_glibc else (None, None)
    if glibc_src:
        sources.append("glibc")

    stdcxx = _libstdcxx_copies(root, prefix)
    built = _built_with(site_dirs, dists, errors)

    status: Status = "ok" if (recorded or glibc or stdcxx) else "absent"
    timed_out = [t for t in recorded if t.status == "timeout"]
    if timed_out:
        # A manifest never lies: a compiler that did not answer makes the table incomplete.
        status = "timeout"
        errors[:0] = [t.error or f"{t.name}: no answer within {timeout:g} s" for t in timed_out]
    return ToolchainInfo(
        status=status,
        source=", ".join(sources),
        error="; ".join(errors)
        or (None if status == "ok" else "no compiler, glibc or libstdc++ found"),
        tools=tuple(recorded),
        glibc=glibc,
        glibc_source=glibc_src,
        libstdcxx=tuple(stdcxx),
        built_with=tuple(built),
    )


def _key_binaries(name: str, site: Path) -> list[Path]:
    """Candidate binaries of ``name`` whose ``.comment`` is recorded (first existing wins)."""
    if name == "torch":
        lib = site / "torch" / "lib"
        return [p for p in (lib / "libtorch_cpu.so", lib / "libtorch_python.so") if p.exists()]
    if name == "numpy":
        out = []
        for sub in ("_core", "core"):
            d = site / "numpy" / sub
            try:
                out += sorted(
                    d / n for n in os.listdir(d) if n.startswith("_multiarray_umath") and ".so" in n
                )
            except OSError:
                continue
        return out
    return []
