"""``[frameworks]`` probe: how torch, JAX, TensorFlow, CuPy and Numba were built (no import).

Static sources:

* torch: ``torch/version.py`` parsed with :mod:`ast` (never executed): ``__version__``,
  ``cuda``, ``hip``, ``xpu``, ``git_version``, ``debug``; the ``nvidia-*``/``cuda-*``
  ``Requires-Dist`` pins of its METADATA; the conda build string (``py3.8_cpu_0``) when conda
  installed it; the GPU architectures in the ``.nv_fatbin`` section of
  ``torch/lib/libtorch_cuda.so`` (entry headers only, read with bounded seeks).
* jax/jaxlib: versions, local version labels (``+cuda12.cudnn89``), and the CUDA plugins
  (``jax-cuda12-plugin``, ``jax-cuda12-pjrt``), whose names carry the CUDA major.
* tensorflow: ``tensorflow/python/platform/build_info.py`` (a dict literal, read with
  :func:`ast.literal_eval`): CUDA/cuDNN versions and compute capabilities.
* cupy (``cupy-cuda12x``, ``cupy-rocm-…``) from its distribution name; numba: version.

With ``do_import=True`` the target interpreter itself is run once (with a timeout) on a small
self-contained script that imports torch and reports run-time facts (:class:`FrameworkRuntime`;
:mod:`envlock.probes.importrun`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from envlock.manifest import PipPackage
from envlock.probes._stackutil import Dist, read_headers, read_text, site_dists
from envlock.probes.condameta import CondaMetaRecord, list_conda_meta
from envlock.probes.fatbin import cached_fatbin_archs
from envlock.probes.importrun import IMPORT_SCRIPT, import_run
from envlock.probes.importrun import parse_import_output as _parse_import_output  # noqa: F401 - its name before the split
from envlock.probes.world import World
from envlock.probes.pip import canonicalize
from envlock.manifest.stacktables import FrameworkBuild, FrameworksInfo

__all__ = ["probe_frameworks", "IMPORT_SCRIPT"]


_FRAMEWORK_RE = re.compile(
    r"^(torch|jax|jaxlib|jax-cuda\d+-(?:plugin|pjrt)|tensorflow(?:-cpu|-gpu)?|tf-nightly|"
    r"cupy(?:-cuda\w+|-rocm-[\w-]+)?|numba)$"
)
# conda package names of the same frameworks.
_CONDA_NAMES = {
    "pytorch": "torch",
    "jaxlib": "jaxlib",
    "tensorflow-base": "tensorflow",
    "cupy": "cupy",
}


# -- pure parsers ----------------------------------------------------------------------------
def _parse_torch_version_py(text: str) -> dict[str, object]:
    """Read the constant assignments of a generated ``torch/version.py`` with :mod:`ast`.

    :returns: ``{name: value}`` for top-level ``name = <constant>`` and
        ``name: T = <constant>`` statements (str, bool, int, ``None``); ``{}`` for text that
        is not Python.  Nothing is executed.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, (str, bool, int, type(None)))
        ):
            out[target.id] = value.value
    return out


def _parse_tf_build_info(text: str) -> dict[str, object]:
    """Read ``build_info = {…}`` from TensorFlow's ``python/platform/build_info.py``.

    :returns: the dict literal (only literal values), or ``{}``.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "build_info"
        ):
            value = node.value
            # ``build_info = collections.OrderedDict({...})`` in some releases.
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            try:
                data = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return {}
            if isinstance(data, list) and all(isinstance(p, tuple) and len(p) == 2 for p in data):
                data = dict(data)  # OrderedDict([(key, value), ...])
            return data if isinstance(data, dict) else {}
    return {}


def _local_label(version: str | None) -> str | None:
    if not version or "+" not in version:
        return None
    return version.split("+", 1)[1]


def _torch_build(
    info: Mapping[str, object], version: str | None, conda_build: str | None
) -> tuple[str | None, str]:
    """Decide torch's build kind from ``version.py`` values, the local version and conda build.

    :returns: ``(build, evidence)`` with build ``"cuda"``, ``"rocm"``, ``"xpu"``, ``"cpu"`` or
        ``None`` when version.py is unreadable and nothing else tells.
    """
    label = _local_label(version)
    ev = []
    if label:
        ev.append(f"local version +{label}")
    if conda_build:
        ev.append(f"conda build {conda_build}")
    if info:
        for key in ("hip", "cuda", "xpu"):
            val = info.get(key)
            if isinstance(val, str) and val:
                ev.insert(0, f"torch/version.py {key}={val!r}")
                return {"hip": "rocm", "cuda": "cuda", "xpu": "xpu"}[key], "; ".join(ev)
        ev.insert(0, "torch/version.py cuda=None hip=None")
        return "cpu", "; ".join(ev)
    if label:
        if label == "cpu" or label.startswith("cpu"):
            return "cpu", "; ".join(ev)
        if label.startswith("cu"):
            return "cuda", "; ".join(ev)
        if label.startswith("rocm"):
            return "rocm", "; ".join(ev)
    if conda_build:
        if "cpu" in conda_build:
            return "cpu", "; ".join(ev)
        if "cuda" in conda_build:
            return "cuda", "; ".join(ev)
    return None, "; ".join(ev) or "torch/version.py unreadable"


def _cuda_from_label(label: str | None) -> str | None:
    """``"cu124"`` → ``"12.4"``, ``"cu130"`` → ``"13.0"``, ``"cuda12.cudnn89"`` → ``"12"``."""
    if not label:
        return None
    m = re.match(r"cu(\d{2,3})$", label)
    if m:
        d = m.group(1)
        return f"{d[:-1]}.{d[-1]}"
    m = re.match(r"cuda(\d+)(?:\.(\d+))?", label)
    if m:
        return m.group(1) + (f".{m.group(2)}" if m.group(2) else "")
    return None


def _requires_cuda(requires: Sequence[str]) -> tuple[str, ...]:
    """Keep ``nvidia-*``/``cuda-*`` requirements of ``Requires-Dist``, markers removed."""
    out = []
    for req in requires:
        spec = req.split(";", 1)[0].strip()
        name = canonicalize(re.split(r"[\s\[<>=!~(]", spec, maxsplit=1)[0])
        if name.startswith(("nvidia-", "cuda-")):
            if "extra ==" in req:
                continue
            out.append(spec.replace(" ", ""))
    return tuple(out)


# -- probes per framework --------------------------------------------------------------------
def _torch(dist: Dist | None, conda: CondaMetaRecord | None, read_archs: bool) -> FrameworkBuild:
    version = dist.version if dist else (conda.version if conda else None)
    location = None
    info: dict[str, object] = {}
    requires: tuple[str, ...] = ()
    errors = []
    if dist is not None:
        headers = read_headers(dist)
        requires = _requires_cuda(headers.get("requires-dist", []))
        pkg = dist.site / "torch"
        location = str(pkg)
        text = read_text(pkg / "version.py", 65536)
        if text is None:
            errors.append("torch/version.py not readable")
        else:
            info = _parse_torch_version_py(text)
            if not info:
                errors.append("torch/version.py has no readable constants")
        if isinstance(info.get("__version__"), str):
            version = str(info["__version__"])
    conda_build = conda.build if conda else None
    build, evidence = _torch_build(info, version, conda_build)
    raw_cuda = info.get("cuda")
    cuda = raw_cuda if isinstance(raw_cuda, str) else None
    if cuda is None and build == "cuda":
        cuda = _cuda_from_label(_local_label(version))
    archs: tuple[str, ...] = ()
    archs_src = None
    if read_archs and build == "cuda" and location:
        lib = Path(location) / "lib" / "libtorch_cuda.so"
        if lib.exists():
            archs, err = cached_fatbin_archs(lib)
            archs_src = str(lib)
            if err:
                errors.append(err)
    return FrameworkBuild(
        name="torch",
        version=version,
        location=location,
        build=build,
        cuda=cuda,
        hip=info.get("hip") if isinstance(info.get("hip"), str) else None,  # type: ignore[arg-type]
        git_version=info.get("git_version") if isinstance(info.get("git_version"), str) else None,  # type: ignore[arg-type]
        debug=info.get("debug") if isinstance(info.get("debug"), bool) else None,  # type: ignore[arg-type]
        evidence=evidence,
        requires=requires,
        conda_build=conda_build,
        cuda_archs=archs,
        cuda_archs_source=archs_src,
        error="; ".join(errors) or None,
    )


def _tensorflow(dist: Dist) -> FrameworkBuild:
    version = dist.version
    pkg = dist.site / "tensorflow"
    text = read_text(pkg / "python" / "platform" / "build_info.py", 65536)
    if text is None:
        return FrameworkBuild(
            name=dist.name,
            version=version,
            location=str(pkg),
            error="tensorflow build_info.py not readable",
        )
    info = _parse_tf_build_info(text)
    cuda = info.get("cuda_version")
    cudnn = info.get("cudnn_version")
    if info.get("is_rocm_build"):
        build = "rocm"
    elif info.get("is_cuda_build"):
        build = "cuda"
    elif info:
        build = "cpu"
    else:
        build = None
    caps = info.get("cuda_compute_capabilities")
    archs = tuple(str(c) for c in caps) if isinstance(caps, (list, tuple)) else ()
    return FrameworkBuild(
        name=dist.name,
        version=version,
        location=str(pkg),
        build=build,
        cuda=str(cuda) if cuda else None,
        cudnn=str(cudnn) if cudnn else None,
        evidence="tensorflow/python/platform/build_info.py" if info else None,
        cuda_archs=archs,
        cuda_archs_source="tensorflow/python/platform/build_info.py" if archs else None,
        error=None if info else "tensorflow build_info.py has no build_info dict",
    )


def _other(dist: Dist) -> FrameworkBuild:
    headers = read_headers(dist)
    version = dist.version
    name = dist.name
    build = cuda = cudnn = None
    evidence = None
    m = re.match(r"^(?:jax-cuda(\d+)-(?:plugin|pjrt)|cupy-cuda(\d+)x?)$", name)
    if m:
        build, cuda = "cuda", m.group(1) or m.group(2)
        if cuda and len(cuda) == 3 and name.startswith("cupy"):  # cupy-cuda102
            cuda = f"{cuda[:2]}.{cuda[2]}"
        evidence = f"distribution name {name}"
    elif name.startswith("cupy-rocm"):
        build, evidence = "rocm", f"distribution name {name}"
    elif name == "jaxlib":
        label = _local_label(version)
        if label and label.startswith("cuda"):
            build, cuda = "cuda", _cuda_from_label(label)
            m2 = re.search(r"cudnn(\d)(\d+)", label)
            cudnn = f"{m2.group(1)}.{m2.group(2)}" if m2 else None
            evidence = f"local version +{label}"
    return FrameworkBuild(
        name=name,
        version=version,
        location=str(dist.site),
        build=build,
        cuda=cuda,
        cudnn=cudnn,
        evidence=evidence,
        requires=_requires_cuda(headers.get("requires-dist", [])),
    )


def probe_frameworks(
    world: World,
    *,
    dists: Sequence[PipPackage] | None = None,
    conda: Sequence[CondaMetaRecord] | None = None,
    do_import: bool = False,
    import_timeout: float = 60.0,
    read_archs: bool = True,
) -> FrameworksInfo:
    """Record how the target's frameworks were built (and, with ``do_import``, run-time facts).

    :param world: what is observed: ``prefix`` (``conda-meta`` build strings) and ``site_dirs``;
        in ``do_import`` mode also ``python`` (the interpreter run), ``environ`` (its
        environment) and ``runner``.  ``root`` is not read (frameworks live in the env), and
        ``timeout`` not used (the static part runs no command; the import run has its own).
    :param dists: the distributions of ``site_dirs`` already read by
        :func:`~envlock.probes.pip.scan_distributions`; ``None`` scans ``site_dirs``.
    :param conda: the records of ``<prefix>/conda-meta`` already listed by
        :func:`~envlock.probes.condameta.list_conda_meta`; ``None`` lists them.
    :param do_import: also run ``world.python`` on :data:`IMPORT_SCRIPT`.
    :param import_timeout: seconds allowed for the import run.
    :param read_archs: read GPU architectures from ``libtorch_cuda.so``'s ``.nv_fatbin``.
    :returns: a :class:`FrameworksInfo`; ``status="absent"`` when no framework is installed.
        Never raises.
    """
    prefix, site_dirs = world.prefix, world.site_dirs
    packages: list[FrameworkBuild] = []
    records = list_conda_meta(prefix) if conda is None else conda
    torch_conda = {r.name: r for r in records}.get("pytorch")
    torch_seen = False
    for dist in site_dists(site_dirs, dists):
        if not _FRAMEWORK_RE.match(dist.name):
            continue
        if dist.name == "torch":
            packages.append(_torch(dist, torch_conda, read_archs))
            torch_seen = True
        elif dist.name.startswith(("tensorflow", "tf-nightly")):
            packages.append(_tensorflow(dist))
        else:
            packages.append(_other(dist))
    if torch_conda and not torch_seen:
        packages.append(_torch(None, torch_conda, read_archs))
    packages.sort(key=lambda p: p.name)

    runtime = None
    if do_import:
        runtime = import_run(world.python, world.environ, world.runner, import_timeout)
    sources = ["dist-info"] if packages else []
    if records:
        sources.append("conda-meta")
    if runtime is not None:
        sources.append("import")
    return FrameworksInfo(
        status="ok" if packages or (runtime and runtime.status == "ok") else "absent",
        source=", ".join(sources),
        error=None if packages else "no torch, jax, tensorflow, cupy or numba installed",
        packages=tuple(packages),
        runtime=runtime,
    )
