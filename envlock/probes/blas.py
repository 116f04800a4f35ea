"""``[blas]`` probe: the BLAS/LAPACK each numerical package uses, and the OpenMP runtimes shipped.

Read statically, nothing imported:

* ``numpy/__config__.py`` and ``scipy/__config__.py``: meson builds (numpy ≥ 1.26, scipy ≥ 1.9)
  write a ``CONFIG`` dict literal whose ``"Build Dependencies"`` give the BLAS/LAPACK name,
  version and OpenBLAS configuration line; older numpy (distutils) writes
  ``openblas64__info = {…}``-style assignments.  The files are parsed with :mod:`ast` (not run:
  they import numpy's C core).
* the OpenBLAS bundled in wheels (``numpy.libs/``, ``scipy.libs/``, ``numpy/.libs``): names such
  as ``libopenblas64_p-r0-15028c96.3.21.so`` (version 0.3.21, 64-bit integers) or
  ``libscipy_openblas64_-fdde5778.so`` (no version in the name);
* ``scipy-openblas32``/``scipy-openblas64`` distributions (their version starts with OpenBLAS's);
* conda: ``libblas``/``liblapack`` build strings (``…_openblas``, ``…_mkl``, ``…_blis``,
  ``…_netlib``), the ``mkl``, ``openblas``/``libopenblas``, ``blis`` packages;
* OpenMP runtimes (``libgomp``, ``libiomp5``, ``libomp``) in ``torch/lib``, ``*.libs`` dirs and
  ``<prefix>/lib``, and conda's ``_openmp_mutex``/``llvm-openmp``/``intel-openmp``/``libgomp``.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from envlock.manifest import PipPackage
from envlock.probes._stackutil import read_text, site_dists
from envlock import libfamilies
from envlock.probes.condameta import CondaMetaRecord, list_conda_meta
from envlock.probes.world import World
from envlock.manifest.stacktables import BlasInfo, BlasLibrary, OpenMPRuntime

__all__ = ["probe_blas"]

_IMPL_NAMES = {
    "openblas": "openblas",
    "scipy-openblas": "openblas",
    "mkl": "mkl",
    "blis": "blis",
    "netlib": "netlib",
    "accelerate": "accelerate",
    "flexiblas": "flexiblas",
    "armpl": "armpl",
    "nvpl": "nvpl",
}

_BUNDLED_RE = re.compile(
    r"^lib(?P<stem>scipy_openblas(?P<s64>64_)?|openblas(?P<o64>64_)?p?)"
    r"(?:-r\d+)?-[0-9a-f]+(?:\.(?P<ver>\d+\.\d+(?:\.\d+)?))?\.so(?:\.\d+)*$"
)
_OMP_RE = libfamilies.openmp_file_re()


def _implementation(name: str | None) -> str | None:
    if not name or name == "unknown":
        return None
    key = name.strip().lower()
    if key in _IMPL_NAMES:
        return _IMPL_NAMES[key]
    for k, v in _IMPL_NAMES.items():
        if key.startswith(k):
            return v
    return key


def _const_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _bool_expr(node: ast.AST) -> bool | None:
    """Evaluate meson's ``bool("True".lower().replace('false', ''))`` idiom without running it.

    The receiver string of the method chain is what counts: empty or ``"false"`` → ``False``.
    """
    if not (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool"
    ):
        return None
    if len(node.args) != 1:
        return None
    inner = node.args[0]
    while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
        inner = inner.func.value
    s = _const_str(inner)
    if s is None:
        return None
    return s.lower() not in ("false", "")


def _parse_meson_config(text: str) -> dict[str, dict[str, object]]:
    """Extract ``CONFIG["Build Dependencies"]`` of a meson-generated ``__config__.py``.

    :returns: ``{"blas": {...}, "lapack": {...}}`` with string fields (``name``, ``version``,
        ``openblas configuration``, …) and ``found``/``has ilp64`` as bools; ``{}`` for text that
        is not such a file.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for k, v in zip(node.keys, node.values):
            if k is not None and _const_str(k) == "Build Dependencies" and isinstance(v, ast.Dict):
                out: dict[str, dict[str, object]] = {}
                for dk, dv in zip(v.keys, v.values):
                    dep = _const_str(dk) if dk is not None else None
                    if dep is None or not isinstance(dv, ast.Dict):
                        continue
                    fields: dict[str, object] = {}
                    for fk, fv in zip(dv.keys, dv.values):
                        key = _const_str(fk) if fk is not None else None
                        if key is None:
                            continue
                        s = _const_str(fv)
                        if s is not None:
                            fields[key] = s
                        elif isinstance(fv, ast.Call):
                            b = _bool_expr(fv)
                            if b is not None:
                                fields[key] = b
                    out[dep] = fields
                return out
    return {}


def _parse_distutils_config(text: str) -> dict[str, object] | None:
    """Read an old numpy/scipy ``__config__.py`` (``<name>_info = {…}`` assignments).

    :returns: ``{"implementation": …, "int64": …}`` for the BLAS in use, or ``None``.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    infos: dict[str, dict] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name = node.targets[0].id
            if name.endswith("_info"):
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                if isinstance(value, dict):
                    infos[name] = value
    for name, info in infos.items():
        if name in (
            "blas_opt_info",
            "blas_ilp64_opt_info",
            "lapack_opt_info",
            "lapack_ilp64_opt_info",
        ):
            continue
        if "lapack" in name:
            continue
        libs = info.get("libraries") or []
        impl = None
        for cand in ("openblas", "mkl", "blis", "accelerate", "flexiblas"):
            if name.startswith(cand) or any(isinstance(lib, str) and cand in lib for lib in libs):
                impl = cand
                break
        if impl is None and name.startswith(("blas_", "atlas")):
            impl = "netlib" if name.startswith("blas_") else "atlas"
        if impl:
            macros = info.get("define_macros") or []
            int64 = any(
                isinstance(m, (list, tuple)) and m and m[0] == "HAVE_BLAS_ILP64" for m in macros
            )
            return {"implementation": impl, "int64": int64, "source_name": name}
    return None


def _parse_bundled_name(fname: str) -> tuple[str | None, bool] | None:
    """Parse a bundled OpenBLAS file name.

    ``libopenblas64_p-r0-15028c96.3.21.so`` → ``("0.3.21", True)``;
    ``libopenblasp-r0-41284840.3.18.so`` → ``("0.3.18", False)``;
    ``libscipy_openblas64_-fdde5778.so`` → ``(None, True)``; other names → ``None``.
    """
    m = _BUNDLED_RE.match(fname)
    if not m:
        return None
    ver = m.group("ver")
    if ver and ver.count(".") == 1:
        ver = "0." + ver  # openblas-libs names drop the leading "0." of OpenBLAS versions
    return ver, bool(m.group("s64") or m.group("o64"))


def _conda_blas_impl(build: str) -> str | None:
    """Implementation a ``libblas``/``liblapack`` build string ends with (``20_linux64_mkl``)."""
    m = re.search(r"_(openblas|mkl|blis|netlib|accelerate|flexiblas|newaccelerate)$", build)
    if not m:
        return None
    return "accelerate" if m.group(1) == "newaccelerate" else m.group(1)


def _config_int64(config: str | None, name: str | None) -> bool | None:
    """Whether an OpenBLAS build uses 64-bit integers (ILP64), from numpy's meson config:
    OpenBLAS's ``openblas configuration`` string says ``USE64BITINT`` (older builds) or
    ``USE_64BITINT=1`` (numpy 1.26's scipy-openblas; ``USE_64BITINT=`` when unset), and its
    pkg-config name is ``openblas64`` (the ``64_`` symbol-suffix build); ``None`` when neither
    says."""
    if name and re.fullmatch(r"(scipy-)?openblas64_?", name):
        return True
    if config:
        m = re.search(r"\bUSE_?64BITINT(=(\S*))?", config)
        if m is None:
            return False  # OpenBLAS lists the flag when it is set
        return m.group(1) is None or m.group(2) not in ("", "0")
    return None


# -- probe -----------------------------------------------------------------------------------
def _package_blas(pkg: str, site: Path, version: str | None, libs_out: list[BlasLibrary]) -> None:
    pkg_dir = site / pkg
    bundled: list[tuple[str, str | None, bool]] = []
    for libdir in (site / f"{pkg}.libs", pkg_dir / ".libs"):
        try:
            names = sorted(os.listdir(libdir))
        except OSError:
            continue
        for n in names:
            parsed = _parse_bundled_name(n)
            if parsed:
                bundled.append((str(libdir / n), parsed[0], parsed[1]))
    text = read_text(pkg_dir / "__config__.py", 1 << 18)
    deps = _parse_meson_config(text) if text else {}
    blas = deps.get("blas") or {}
    if blas and blas.get("found") is not False:
        raw_name, raw_ver = blas.get("name"), blas.get("version")
        name = raw_name if isinstance(raw_name, str) else None
        ver = raw_ver if isinstance(raw_ver, str) else None
        config = blas.get("openblas configuration")
        config = config if isinstance(config, str) and config not in ("unknown", "") else None
        ilp = blas.get("has ilp64")
        int64 = bool(ilp) if isinstance(ilp, bool) else _config_int64(config, name)
        path = bundled[0][0] if bundled else None
        if int64 is None and bundled:
            int64 = bundled[0][2]
        if ver in (None, "unknown") and bundled:
            ver = bundled[0][1]
        libs_out.append(
            BlasLibrary(
                user=pkg,
                implementation=_implementation(name),
                version=ver if ver != "unknown" else None,
                int64=int64,
                config=config,
                path=path or str(pkg_dir / "__config__.py"),
                origin="build config",
                package=f"{pkg} {version}" if version else pkg,
            )
        )
        return
    old = _parse_distutils_config(text) if text else None
    if bundled:
        path, ver, int64 = bundled[0]
        libs_out.append(
            BlasLibrary(
                user=pkg,
                implementation="openblas",
                version=ver,
                int64=int64,
                path=path,
                origin="bundled file",
                package=f"{pkg} {version}" if version else pkg,
            )
        )
    elif old:
        libs_out.append(
            BlasLibrary(
                user=pkg,
                implementation=str(old["implementation"]),
                int64=bool(old["int64"]),
                path=str(pkg_dir / "__config__.py"),
                origin="build config",
                package=f"{pkg} {version}" if version else pkg,
            )
        )


def _scan_omp(d: Path, package: str | None, out: list[OpenMPRuntime], seen: set[str]) -> None:
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return
    for n in names:
        m = _OMP_RE.match(n)
        if not m:
            continue
        path = d / n
        if os.path.islink(path):
            continue  # record the real file once, not every soname link
        key = os.path.realpath(path)
        if key in seen:
            continue
        seen.add(key)
        out.append(OpenMPRuntime(name=m.group("name"), path=str(path), package=package))


def _site_blas(site_dirs: Sequence[str], dists: Sequence[PipPackage] | None,
               libs: list[BlasLibrary], omp: list[OpenMPRuntime], seen_omp: set[str]) -> None:
    """Append the BLAS libraries and OpenMP runtimes that pip installed in ``site_dirs``.

    numpy and scipy by their bundled ``.libs``; the ``scipy-openblas32/64``, ``mkl`` and
    ``intel-openmp`` wheels by their records; torch's and every ``*.libs`` folder's OpenMP.
    """
    for dist in site_dists(site_dirs, dists):
        if dist.name in ("numpy", "scipy"):
            _package_blas(dist.name, dist.site, dist.version, libs)
        elif dist.name in ("scipy-openblas32", "scipy-openblas64"):
            m = re.match(r"(\d+\.\d+\.\d+)", dist.version)
            libs.append(
                BlasLibrary(
                    user=dist.name,
                    implementation="openblas",
                    version=m.group(1) if m else None,
                    int64=dist.name.endswith("64"),
                    path=str(dist.path),
                    origin="pip",
                    package=f"{dist.name} {dist.version}",
                )
            )
        elif dist.name == "mkl":
            # Intel's MKL wheel (PyPI "mkl"): installs lib/libmkl_rt.so.* under the prefix.
            libs.append(
                BlasLibrary(
                    user="mkl",
                    implementation="mkl",
                    version=dist.version,
                    path=str(dist.path),
                    origin="pip",
                    package=f"mkl {dist.version}",
                )
            )
        elif dist.name == "intel-openmp":
            omp.append(
                OpenMPRuntime(
                    name="libiomp5",
                    path=str(dist.path),
                    package=f"intel-openmp {dist.version}",
                    version=dist.version,
                )
            )
        elif dist.name == "torch":
            _scan_omp(dist.site / "torch" / "lib", "torch", omp, seen_omp)
    for site in site_dirs:
        try:
            names = sorted(os.listdir(site))
        except OSError:
            continue
        for n in names:
            if n.endswith(".libs"):
                _scan_omp(Path(site) / n, n, omp, seen_omp)


def _conda_blas(prefix: str | None, by_name: Mapping[str, CondaMetaRecord],
                libs: list[BlasLibrary]) -> None:
    """Append the conda env's BLAS: the ``libblas``/``liblapack`` metapackages' implementation
    (from their build string), else one implementation package (``mkl``, ``openblas``, ``blis``)."""
    for name in ("libblas", "liblapack"):
        rec = by_name.get(name)
        if rec:
            impl = _conda_blas_impl(rec.build)
            version = None
            if impl == "openblas":
                version = (by_name.get("libopenblas") or by_name.get("openblas") or rec).version
            elif impl == "mkl" and "mkl" in by_name:
                version = by_name["mkl"].version
            elif impl == "blis" and "blis" in by_name:
                version = by_name["blis"].version
            libs.append(
                BlasLibrary(
                    user="conda",
                    implementation=impl,
                    version=version,
                    path=str(Path(prefix or "") / "lib"),
                    origin="conda",
                    package=f"{rec.name}={rec.version}={rec.build}",
                )
            )
    for name in ("mkl", "libopenblas", "openblas", "blis"):
        rec = by_name.get(name)
        if rec and not any(lib.user == "conda" for lib in libs):
            libs.append(
                BlasLibrary(
                    user="conda",
                    implementation="openblas" if "openblas" in name else name,
                    version=rec.version,
                    origin="conda",
                    package=f"{rec.name}={rec.version}={rec.build}",
                )
            )


#: conda package -> the OpenMP runtime library it installs
_CONDA_OPENMP = {"libgomp": "libgomp", "llvm-openmp": "libomp", "intel-openmp": "libiomp5"}


def _conda_openmp(prefix: str | None, by_name: Mapping[str, CondaMetaRecord],
                  omp: list[OpenMPRuntime]) -> None:
    """Append the OpenMP runtimes the conda env's packages install (:data:`_CONDA_OPENMP`)."""
    for cname, lib in _CONDA_OPENMP.items():
        rec = by_name.get(cname)
        if rec:
            omp.append(
                OpenMPRuntime(
                    name=lib,
                    path=str(Path(prefix or "") / "lib"),
                    package=f"{rec.name}={rec.version}={rec.build}",
                    version=rec.version,
                )
            )


def probe_blas(
    world: World,
    *,
    dists: Sequence[PipPackage] | None = None,
    conda: Sequence[CondaMetaRecord] | None = None,
) -> BlasInfo:
    """Record the BLAS/LAPACK implementation of numpy, scipy and the conda env, and OpenMP runtimes.

    :param world: what is observed: only ``prefix`` (``conda-meta`` and ``lib/``) and
        ``site_dirs`` are read (everything lives in the env; no command runs).
    :param dists: the distributions of ``site_dirs`` already read by
        :func:`~envlock.probes.pip.scan_distributions`; ``None`` scans ``site_dirs``.
    :param conda: the records of ``<prefix>/conda-meta`` already listed by
        :func:`~envlock.probes.condameta.list_conda_meta`; ``None`` lists them.
    :returns: a :class:`BlasInfo`; ``status="absent"`` when no BLAS user was found.  Never raises.
    """
    prefix, site_dirs = world.prefix, world.site_dirs
    libs: list[BlasLibrary] = []
    omp: list[OpenMPRuntime] = []
    seen_omp: set[str] = set()
    sources: list[str] = []
    _site_blas(site_dirs, dists, libs, omp, seen_omp)
    if libs or omp:
        sources.append("site-packages")

    records = list_conda_meta(prefix) if conda is None else conda
    by_name = {r.name: r for r in records}
    _conda_blas(prefix, by_name, libs)
    _conda_openmp(prefix, by_name, omp)
    if prefix and not records:
        _scan_omp(Path(prefix) / "lib", None, omp, seen_omp)
    if records:
        sources.append("conda-meta")

    return BlasInfo(
        status="ok" if libs or omp else "absent",
        source=", ".join(sources),
        error=None if libs or omp else "no numpy, scipy or conda BLAS found",
        libraries=tuple(libs),
        openmp=tuple(omp),
    )
