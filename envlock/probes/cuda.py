"""``[cuda]`` probe: every CUDA toolkit, runtime and library copy the target can use, and origin.

Read statically (nothing is loaded):

* pip wheels in the target's site dirs: ``nvidia-cuda-runtime[-cuNN]``, ``nvidia-cudnn-cuNN``,
  ``nvidia-nccl-cuNN``, ``nvidia-cublas``, … (METADATA ``Version``; RECORD for the library
  files) and the ``cuda-toolkit`` meta-package;
* conda packages from ``<prefix>/conda-meta`` file names (``cuda-cudart``, ``cudatoolkit``,
  ``cuda-version``, ``cudnn``, ``nccl``, ``libcublas``, …);
* toolkit directories: ``$CUDA_HOME``, ``$CUDA_PATH``, ``<root>/usr/local/cuda*``; version from
  ``version.json`` (CUDA ≥ 11.1), ``version.txt`` (older), wheel-assembled ``dist-info/``, the
  ``libcudart.so.X.Y.Z`` file name, or the directory name;
* headers: ``cudnn_version.h`` (``cudnn.h`` for cuDNN ≤ 7) and ``nccl.h`` in the env, the
  toolkits, the pip wheels and ``<root>/usr/include``;
* versioned library file names (``libcudnn.so.8.9.7``, ``libnccl.so.2.18.3``) in the env's
  ``lib/`` and the system library directories;
* ``nvcc --version`` of the ``nvcc`` that the target's ``PATH`` finds first.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envlock import libfamilies
from envlock.manifest import PipPackage, Status
from envlock.probes._stackutil import (
    read_record_paths,
    read_text,
    site_dists,
    under_root,
    which,
)
from envlock.probes.condameta import CondaMetaRecord, list_conda_meta
from envlock.probes.world import World
from envlock.probes.pip import canonicalize
from envlock.manifest.stacktables import CudaInfo, CudaLibrary, CudaToolkit

__all__ = ["probe_cuda", "COMPONENTS"]

#: pip component name (after ``nvidia-`` and without ``-cuNN``) → envlock's component name;
#: this and the tables below come from the one table of library families (envlock.libfamilies).
COMPONENTS: Mapping[str, str] = libfamilies.pip_components()

# conda package name → component (toolkit meta-packages handled separately).
_CONDA: Mapping[str, str] = libfamilies.conda_components()
_CONDA_TOOLKITS = ("cudatoolkit", "cuda-version", "cuda-toolkit", "cuda-runtime")

# version.json key → component.
_VERSION_JSON: Mapping[str, str] = libfamilies.version_json_components()

# Library file stems whose file names carry full versions in toolkit/system installs.
_LIB_STEMS: Mapping[str, str] = libfamilies.versioned_file_stems()
_SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu")

_DIST_RE = re.compile(r"^nvidia-(?P<comp>[a-z0-9-]+?)(?:-cu(?P<cuda>\d+))?$")


def _component_for_dist(name: str) -> tuple[str, str | None] | None:
    """Map a normalized pip name to ``(component, cuda major)``.

    ``"nvidia-cudnn-cu13"`` → ``("cudnn", "13")``; ``"nvidia-cuda-runtime"`` → ``("cudart", None)``;
    names that are not CUDA libraries (``nvidia-ml-py``) → ``None``.
    """
    m = _DIST_RE.match(name)
    if not m:
        return None
    comp = COMPONENTS.get(m.group("comp"))
    if comp is None:
        return None
    return comp, m.group("cuda")


def _parse_nvcc_version(text: str) -> tuple[str, str | None] | None:
    """Parse ``nvcc --version``: ``"Cuda compilation tools, release 12.4, V12.4.131"``.

    :returns: ``(release, full version)`` e.g. ``("12.4", "12.4.131")``, or ``None``.
    """
    m = re.search(r"release (\d+\.\d+)(?:, V(\d+(?:\.\d+)+))?", text)
    if not m:
        return None
    return m.group(1), m.group(2)


def _define(text: str, name: str) -> int | None:
    m = re.search(rf"^\s*#\s*define\s+{name}\s+(\d+)\b", text, re.M)
    return int(m.group(1)) if m else None


def _parse_cudnn_version_h(text: str) -> str | None:
    """Return ``"major.minor.patch"`` from ``cudnn_version.h`` (or ``cudnn.h`` of cuDNN ≤ 7).

    The ``CUDNN_MAJOR``/``CUDNN_MINOR``/``CUDNN_PATCHLEVEL`` macros are read; ``None`` when
    any is missing.
    """
    parts = [_define(text, n) for n in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")]
    if any(p is None for p in parts):
        return None
    return ".".join(str(p) for p in parts)


def _parse_nccl_h(text: str) -> str | None:
    """Return ``"major.minor.patch"`` from ``nccl.h`` (``NCCL_MAJOR``/``_MINOR``/``_PATCH``)."""
    parts = [_define(text, n) for n in ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")]
    if any(p is None for p in parts):
        return None
    return ".".join(str(p) for p in parts)


def _parse_cuda_version_json(text: str) -> tuple[str | None, dict[str, str]]:
    """Parse a toolkit's ``version.json``.

    :returns: ``(toolkit version, {component: version})``; ``(None, {})`` for junk.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return None, {}
    if not isinstance(data, dict):
        return None, {}

    def ver(key: str) -> str | None:
        entry = data.get(key)
        v = entry.get("version") if isinstance(entry, dict) else None
        return v if isinstance(v, str) and v else None

    comps = {comp: v for key, comp in _VERSION_JSON.items() if (v := ver(key))}
    return ver("cuda"), comps


def _parse_cuda_version_txt(text: str) -> str | None:
    """Parse an old toolkit's ``version.txt``: ``"CUDA Version 10.2.89"`` → ``"10.2.89"``."""
    m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def _version_from_filename(fname: str, stem: str) -> str | None:
    """``("libcudnn.so.8.9.7", "libcudnn")`` → ``"8.9.7"``; only names with ≥ 2 version parts."""
    m = re.fullmatch(re.escape(stem) + r"\.so\.(\d+(?:\.\d+)+)", fname)
    return m.group(1) if m else None


def _dist_info_versions(d: Path) -> dict[str, str]:
    """Versions of a wheel-assembled toolkit (``<toolkit>/dist-info/nvidia_*-<ver>.dist-info``)."""
    out: dict[str, str] = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        if not n.endswith(".dist-info"):
            continue
        name, _, version = n[: -len(".dist-info")].partition("-")
        comp = _component_for_dist(canonicalize(name))
        if comp and version:
            out[comp[0]] = version
    return out


def _lib_files(files: list[str]) -> tuple[str, ...]:
    return tuple(
        sorted({os.path.basename(f) for f in files if re.search(r"/lib[^/]*\.so(\.|$)", "/" + f)})
    )


@dataclass
class _Found:
    """What the steps of :func:`probe_cuda` have found so far, in the order they found it."""

    toolkits: list[CudaToolkit] = field(default_factory=list)
    libs: list[CudaLibrary] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    header_dirs: list[tuple[Path, str]] = field(default_factory=list)  # (real dir, recorded dir)


def probe_cuda(
    world: World,
    *,
    dists: Sequence[PipPackage] | None = None,
    conda: Sequence[CondaMetaRecord] | None = None,
) -> CudaInfo:
    """Find every CUDA toolkit and library copy the target can use.

    :param world: what is observed: ``root`` for fixed system paths (``/usr/local/cuda*``,
        ``/usr/include``), ``environ`` (``CUDA_HOME``, ``CUDA_PATH``), ``prefix``
        (``conda-meta/``, ``include/``, ``lib/``), ``site_dirs``, ``path_dirs`` (searched for
        ``nvcc``), ``runner`` and ``timeout`` (seconds for ``nvcc --version``).
    :param dists: the distributions of ``site_dirs`` already read by
        :func:`~envlock.probes.pip.scan_distributions`; ``None`` scans ``site_dirs``.
    :param conda: the records of ``<prefix>/conda-meta`` already listed by
        :func:`~envlock.probes.condameta.list_conda_meta`; ``None`` lists them.
    :returns: a :class:`CudaInfo`; ``status="absent"`` when nothing CUDA was found.  Never raises.
    """
    root, prefix = world.root, world.prefix
    found = _Found()
    _find_pip_wheels(world, dists, found)
    _find_conda_packages(prefix, conda, found)
    _find_toolkit_dirs(root, dict(world.environ), found)
    _find_headers(root, found)
    # versioned library files in the env and the system
    if prefix:
        _scan_lib_dir(Path(prefix) / "lib", str(Path(prefix) / "lib"), found.libs, origin="file")
    for d in _SYSTEM_LIB_DIRS:
        _scan_lib_dir(under_root(root, d), d, found.libs, origin="file")
    nvcc, nvcc_release, nvcc_version = _run_nvcc(world, found)

    toolkits, libs, errors = found.toolkits, found.libs, found.errors
    libs.sort(key=lambda lib: (lib.name, _ORIGIN_ORDER.get(lib.origin, 9), lib.path or ""))
    any_found = bool(toolkits or libs or nvcc)
    status: Status = "ok" if any_found else "absent"
    error = "; ".join(errors) or (None if any_found else "no CUDA toolkit or library found")
    if any_found and errors and not (libs or toolkits or nvcc_release):
        status = "error"
    return CudaInfo(
        status=status,
        source=", ".join(found.sources),
        error=error,
        toolkits=tuple(toolkits),
        nvcc=nvcc,
        nvcc_version=nvcc_version,
        nvcc_release=nvcc_release,
        libraries=tuple(libs),
    )


def _find_pip_wheels(world: World, dists: Sequence[PipPackage] | None, found: _Found) -> None:
    """The ``nvidia-*`` wheels and the ``cuda-toolkit`` meta-package of the site dirs."""
    pip_found = False
    for dist in site_dists(world.site_dirs, dists):
        if dist.name == "cuda-toolkit":
            found.toolkits.append(
                CudaToolkit(version=dist.version, origin="pip", source=str(dist.path)))
            pip_found = True
            continue
        comp = _component_for_dist(dist.name)
        if comp is None:
            continue
        pip_found = True
        files = read_record_paths(dist.path)
        lib_files = _lib_files(files)
        lib_dirs = sorted({os.path.dirname(f) for f in files if os.path.basename(f) in lib_files})
        found.libs.append(
            CudaLibrary(
                name=comp[0],
                version=dist.version,
                origin="pip",
                package=dist.name,
                cuda=comp[1],
                path=str(dist.site / lib_dirs[0]) if lib_dirs else None,
                files=lib_files,
            )
        )
        for f in files:
            if os.path.basename(f) in ("cudnn_version.h", "nccl.h"):
                found.header_dirs.append(
                    (dist.site / os.path.dirname(f), str(dist.site / os.path.dirname(f)))
                )
    if pip_found:
        found.sources.append("pip dist-info")


def _find_conda_packages(
    prefix: str | Path | None, conda: Sequence[CondaMetaRecord] | None, found: _Found
) -> None:
    """The toolkit meta-packages and CUDA library packages of ``<prefix>/conda-meta``."""
    records = list_conda_meta(prefix) if conda is None else conda
    for rec in records:
        if rec.name in _CONDA_TOOLKITS:
            found.toolkits.append(
                CudaToolkit(
                    path=str(Path(prefix)) if rec.name == "cudatoolkit" and prefix else None,
                    version=rec.version,
                    origin="conda",
                    source=f"conda-meta/{rec.path.name}",
                )
            )
        elif rec.name in _CONDA:
            found.libs.append(
                CudaLibrary(
                    name=_CONDA[rec.name],
                    version=rec.version,
                    origin="conda",
                    package=f"{rec.name}={rec.version}={rec.build}",
                    path=str(Path(prefix) / "lib") if prefix else None,
                )
            )
    if any(r.name in _CONDA or r.name in _CONDA_TOOLKITS for r in records):
        found.sources.append("conda-meta")
    if prefix:
        found.header_dirs.append((Path(prefix) / "include", str(Path(prefix) / "include")))


def _find_toolkit_dirs(root: Path, env: Mapping[str, str], found: _Found) -> None:
    """``$CUDA_HOME``, ``$CUDA_PATH`` and ``<root>/usr/local/cuda*``, each real directory once."""
    candidates: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            candidates.append((env[var], var))
    local = under_root(root, "/usr/local")
    try:
        for n in sorted(os.listdir(local)):
            if n == "cuda" or re.fullmatch(r"cuda-\d+(?:\.\d+)*", n):
                candidates.append((f"/usr/local/{n}", "/usr/local"))
    except OSError:
        pass
    seen_real: set[str] = set()
    for shown, origin in candidates:
        real = under_root(root, shown)
        if not real.is_dir():
            if origin != "/usr/local":
                found.errors.append(f"{origin}={shown} is not a directory")
            continue
        key = os.path.realpath(real)
        if key in seen_real:
            continue
        seen_real.add(key)
        # Record the resolved directory (``/usr/local/cuda`` → ``/usr/local/cuda-13.0``).
        if root == Path("/"):
            shown = key
        elif os.path.islink(real):
            shown = "/" + os.path.relpath(key, root)
        found.toolkits.append(_read_toolkit(real, shown, origin, found.libs))
        found.header_dirs.append((real / "include", f"{shown}/include"))
        for lib in ("lib64", "lib"):
            _scan_lib_dir(real / lib, f"{shown}/{lib}", found.libs, origin="toolkit")
    if seen_real:
        found.sources.append("toolkit directories")


#: header file → (component, parser); the first that parses in a directory wins for its component.
_HEADERS = (
    ("cudnn_version.h", "cudnn", _parse_cudnn_version_h),
    ("cudnn_version_v9.h", "cudnn", _parse_cudnn_version_h),
    ("cudnn_version_v8.h", "cudnn", _parse_cudnn_version_h),
    ("cudnn.h", "cudnn", _parse_cudnn_version_h),
    ("nccl.h", "nccl", _parse_nccl_h),
)


def _find_headers(root: Path, found: _Found) -> None:
    """cuDNN and NCCL versions from the headers of the directories found so far and the system's."""
    header_dirs = found.header_dirs + [
        (under_root(root, "/usr/include"), "/usr/include"),
        (under_root(root, "/usr/include/x86_64-linux-gnu"), "/usr/include/x86_64-linux-gnu"),
    ]
    seen_headers: set[str] = set()
    for real, shown in header_dirs:
        done: set[str] = set()  # one cuDNN / NCCL header per directory
        for fname, component, parse in _HEADERS:
            path = real / fname
            rp = os.path.realpath(path)
            if component in done or rp in seen_headers:
                continue
            text = read_text(path, 1 << 18)
            if text is None:
                continue
            version = parse(text)
            if version is None:
                continue  # cudnn.h of cuDNN >= 8 has no version macros: cudnn_version.h has them
            seen_headers.add(rp)
            done.add(component)
            found.libs.append(
                CudaLibrary(name=component, version=version, origin="header", path=f"{shown}/{fname}")
            )
    if seen_headers:
        found.sources.append("headers")


def _run_nvcc(world: World, found: _Found) -> tuple[str | None, str | None, str | None]:
    """``(nvcc path, release, version)`` of the ``nvcc`` the target's ``PATH`` finds first."""
    nvcc = which("nvcc", world.path_dirs)
    nvcc_release = nvcc_version = None
    if nvcc:
        res = world.runner([nvcc, "--version"], timeout=world.timeout,
                           env={**dict(world.environ), "LC_ALL": "C"})
        parsed = _parse_nvcc_version(res.stdout) if res.ok else None
        if parsed:
            nvcc_release, nvcc_version = parsed
            found.sources.append(f"{nvcc} --version")
        else:
            found.errors.append(
                res.detail if not res.ok else f"{nvcc} --version: no release in output")
    return nvcc, nvcc_release, nvcc_version


_ORIGIN_ORDER = {"pip": 0, "conda": 1, "toolkit": 2, "header": 3, "file": 4}


def _read_toolkit(real: Path, shown: str, origin: str, libs: list[CudaLibrary]) -> CudaToolkit:
    """Read one toolkit directory's version and component versions (appended to ``libs``)."""
    text = read_text(real / "version.json", 1 << 18)
    if text is not None:
        version, comps = _parse_cuda_version_json(text)
        for comp, v in sorted(comps.items()):
            libs.append(CudaLibrary(name=comp, version=v, origin="toolkit", path=shown))
        if version:
            return CudaToolkit(
                path=shown, version=version, origin=origin, source=f"{shown}/version.json"
            )
    text = read_text(real / "version.txt", 4096)
    if text is not None and (version := _parse_cuda_version_txt(text)):
        return CudaToolkit(
            path=shown, version=version, origin=origin, source=f"{shown}/version.txt"
        )
    comps = _dist_info_versions(real / "dist-info")
    if comps:
        for comp, v in sorted(comps.items()):
            libs.append(CudaLibrary(name=comp, version=v, origin="toolkit", path=shown))
        if "cudart" in comps:
            # The toolkit release is the runtime's major.minor (cudart 13.0.96 ships in CUDA 13.0).
            return CudaToolkit(
                path=shown,
                version=_major_minor(comps["cudart"]),
                origin=origin,
                source=f"{shown}/dist-info (cuda-runtime {comps['cudart']})",
            )
    for lib in ("lib64", "lib", "targets/x86_64-linux/lib"):
        try:
            names = os.listdir(real / lib)
        except OSError:
            continue
        for n in sorted(names):
            if (fv := _version_from_filename(n, "libcudart")) and fv.count(".") >= 2:
                return CudaToolkit(
                    path=shown, version=_major_minor(fv), origin=origin, source=f"{shown}/{lib}/{n}"
                )
    m = re.search(r"cuda-(\d+(?:\.\d+)+)$", shown)
    if m:
        return CudaToolkit(path=shown, version=m.group(1), origin=origin, source="directory name")
    return CudaToolkit(path=shown, origin=origin)


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _scan_lib_dir(real: Path, shown: str, libs: list[CudaLibrary], *, origin: str) -> None:
    """Record versioned CUDA library files (``libcudnn.so.8.9.7``) of one directory."""
    try:
        names = os.listdir(real)
    except OSError:
        return
    found: dict[tuple[str, str], list[str]] = {}
    for n in names:
        if not n.startswith("lib") or ".so." not in n:
            continue
        stem = n.split(".so.", 1)[0]
        comp = _LIB_STEMS.get(stem)
        if comp is None:
            continue
        v = _version_from_filename(n, stem)
        if v:
            found.setdefault((comp, v), []).append(n)
    for (comp, v), files in sorted(found.items()):
        if any(lib.name == comp and lib.version == v and lib.path == shown for lib in libs):
            continue
        libs.append(
            CudaLibrary(name=comp, version=v, origin=origin, path=shown, files=tuple(sorted(files)))
        )
