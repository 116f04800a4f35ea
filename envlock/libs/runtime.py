"""Libraries that frameworks load with ``dlopen`` at run time (not in any DT_NEEDED).

A static closure of DT_NEEDED misses these, yet they are where CUDA set-ups fail most
("libcudnn.so.8: cannot open shared object file" at the first convolution).  This module
holds a small documented table of them and the import-time sequence of ``torch/__init__.py``,
so that :mod:`envlock.libs.analysis` can resolve them with the loader model.

The table (:data:`RUNTIME_DLOPENS`):

==========  ==================================  ==========================  =====================
framework   name dlopen'ed                      caller (SONAME glob)        when
==========  ==================================  ==========================  =====================
cuda        ``libcuda.so.1``                    ``libcudart.so.*``          first CUDA call
torch       ``libnvidia-ml.so.1``               ``libc10_cuda.so``          device queries (NVML)
nvrtc       ``libnvrtc-builtins.so.<maj.min>``  ``libnvrtc.so.*``           first JIT compile
cudnn 9     ``libcudnn_{graph,…}.so.9``         ``libcudnn.so.9``           first cuDNN call
cudnn 8     ``libcudnn_{ops,cnn,adv}_*.so.8``   ``libcudnn.so.8``           first cuDNN call
tensorflow  ``libcudart.so.11.0``, …            ``libtensorflow_framework*`` GPU start-up
jax         ``xla_cuda_plugin.so`` (by path)    the executable              backend start-up
==========  ==================================  ==========================  =====================

Sources: the strings are present in the callers (``strings libcudart.so.13`` shows
``libcuda.so.1``; ``libnvrtc.so.13`` shows ``libnvrtc-builtins.so.13.0``; ``libcudnn.so.9``
lists its sub-libraries); TensorFlow's ``tensorflow/tsl/platform/default/dso_loader.cc``
builds ``libcudart.so.<version>`` from ``build_info``; torch's sequence is in
``torch/__init__.py`` (``_load_global_deps``, ``_preload_cuda_deps``), read from the target.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
import json

__all__ = [
    "RUNTIME_DLOPENS",
    "RuntimeDlopen",
    "TorchPlan",
    "read_tf_build_info",
    "read_torch_plan",
    "runtime_dlopens_for",
    "runtime_check",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeDlopen:
    """One well-known run-time ``dlopen``.

    :ivar framework: what does it (``"cuda"``, ``"torch"``, ``"cudnn"``, ``"tensorflow"``, …).
    :ivar name: the string passed to ``dlopen`` (a SONAME, or a path for plugins).
    :ivar caller: SONAME glob of the calling library; its RPATH/RUNPATH apply.
    :ivar when: when it happens, in words.
    :ivar required: whether the feature fails without it.
    """

    framework: str
    name: str
    caller: str
    when: str
    required: bool = True


_CUDNN9 = ("graph", "engines_precompiled", "engines_runtime_compiled", "heuristic", "ops",
           "cnn", "adv")
_CUDNN8 = ("ops_infer", "ops_train", "cnn_infer", "cnn_train", "adv_infer", "adv_train")

#: The fixed part of the table (names that do not depend on a build's versions).
RUNTIME_DLOPENS: tuple[RuntimeDlopen, ...] = (
    RuntimeDlopen(framework="cuda", name="libcuda.so.1", caller="libcudart.so.*",
                  when="first CUDA call (the NVIDIA driver)"),
    RuntimeDlopen(framework="torch", name="libnvidia-ml.so.1", caller="libc10_cuda.so",
                  when="device and memory queries (NVML)", required=False),
    *(RuntimeDlopen(framework="cudnn", name=f"libcudnn_{s}.so.9", caller="libcudnn.so.9",
                    when="first cuDNN call") for s in _CUDNN9),
    *(RuntimeDlopen(framework="cudnn", name=f"libcudnn_{s}.so.8", caller="libcudnn.so.8",
                    when="first cuDNN call") for s in _CUDNN8),
)

#: TensorFlow's CUDA libraries by CUDA major: name → SONAME suffix (``dso_loader.cc``).
_TF_CUDA = {
    11: {"cudart": "11.0", "cublas": "11", "cublasLt": "11", "cufft": "10", "curand": "10",
         "cusolver": "11", "cusparse": "11"},
    12: {"cudart": "12", "cublas": "12", "cublasLt": "12", "cufft": "11", "curand": "10",
         "cusolver": "11", "cusparse": "12"},
}


def read_tf_build_info(package_dir: str) -> dict[str, str]:
    """``cuda_version``/``cudnn_version`` from ``tensorflow/python/platform/build_info.py``.

    :returns: the string values found (empty when the file is absent or holds none).
    """
    path = os.path.join(package_dir, "python", "platform", "build_info.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    return dict(re.findall(r"['\"](cuda_version|cudnn_version)['\"]\s*[:,]\s*['\"]([^'\"]+)['\"]", text))


def runtime_dlopens_for(
    *, torch_cuda: str | None = None, tf_dir: str | None = None,
) -> list[RuntimeDlopen]:
    """The table entries that apply to a build.

    :param torch_cuda: torch's CUDA version (``torch/version.py`` ``cuda``), e.g. ``"13.0"``.
    :param tf_dir: the ``tensorflow`` package directory, when TensorFlow is the target.
    :returns: entries; callers decide which apply by whether the caller library is loaded.
    """
    out = list(RUNTIME_DLOPENS)
    if torch_cuda:
        out.append(RuntimeDlopen(framework="nvrtc", name=f"libnvrtc-builtins.so.{torch_cuda}",
                                 caller="libnvrtc.so.*", when="first JIT compilation (NVRTC)",
                                 required=False))
    if tf_dir:
        info = read_tf_build_info(tf_dir)
        major = int(info.get("cuda_version", "0").split(".")[0] or 0)
        names = _TF_CUDA.get(major, {})
        for lib, suffix in names.items():
            out.append(RuntimeDlopen(framework="tensorflow", name=f"lib{lib}.so.{suffix}",
                                     caller="libtensorflow_framework.so*", when="GPU start-up"))
        cudnn = info.get("cudnn_version", "").split(".")[0]
        if cudnn:
            out.append(RuntimeDlopen(framework="tensorflow", name=f"libcudnn.so.{cudnn}",
                                     caller="libtensorflow_framework.so*", when="GPU start-up"))
    return out


def caller_matches(pattern: str, soname: str | None, path: str) -> bool:
    """Whether a loaded object (``soname``, ``path``) is the table's ``caller``."""
    base = os.path.basename(path)
    return bool(soname and fnmatch.fnmatchcase(soname, pattern)) or fnmatch.fnmatchcase(base, pattern)


# -- torch's import sequence ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchPlan:
    """What ``import torch`` loads before ``torch._C``, read from the target's files.

    :ivar package_dir: the ``torch`` directory.
    :ivar version: ``torch/version.py`` ``__version__``.
    :ivar cuda: ``torch/version.py`` ``cuda`` (``None`` for CPU builds).
    :ivar global_deps: path of ``lib/libtorch_global_deps.so`` (``None`` if absent).
    :ivar preload_map: ``(folder, glob)`` pairs of ``_preload_cuda_deps``, in order.
    :ivar preload_after_success: this torch preloads the wheels also when the global deps
        loaded fine and ``libcudart`` is mapped (torch ≥ 2.8-style ``_load_global_deps``).
    :ivar cu_major_folder: ``_get_cuda_dep_paths`` also looks in ``nvidia/cu<major>/lib``.
    """

    package_dir: str
    version: str | None = None
    cuda: str | None = None
    global_deps: str | None = None
    preload_map: tuple[tuple[str, str], ...] = ()
    preload_after_success: bool = False
    cu_major_folder: bool = False

    def preload_candidates(self, sys_path: list[str]) -> list[tuple[str, str]]:
        """``(folder, path)`` that ``_preload_cuda_deps`` would ``ctypes.CDLL``, in order.

        For each map entry, the first ``sys.path`` entry with a match wins; within it, the
        ``nvidia/<folder>/lib`` matches come before ``nvidia/cu<major>/lib`` and
        ``<folder>/lib`` (as ``_get_cuda_dep_paths`` orders them).  Glob results are sorted
        (Python's order is the directory's, which is not defined).
        """
        out = []
        major = (self.cuda or "").split(".")[0]
        for folder, pattern in self.preload_map:
            for entry in sys_path:
                dirs = [os.path.join(entry, "nvidia", folder, "lib")]
                if self.cu_major_folder and major:
                    dirs.append(os.path.join(entry, "nvidia", f"cu{major}", "lib"))
                dirs.append(os.path.join(entry, folder, "lib"))
                found = []
                for d in dirs:
                    try:
                        names = sorted(os.listdir(d))
                    except OSError:
                        continue
                    found += [os.path.join(d, n) for n in names if fnmatch.fnmatchcase(n, pattern)]
                if found:
                    out.append((folder, found[0]))
                    break
        return out


def read_torch_plan(package_dir: str) -> TorchPlan:
    """Read ``torch/__init__.py`` and ``torch/version.py`` statically (no import).

    :param package_dir: the ``torch`` package directory.
    :returns: a :class:`TorchPlan`; missing files give empty fields.
    """
    def read(name: str) -> str:
        try:
            with open(os.path.join(package_dir, name), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    version_py = read("version.py")
    init = read("__init__.py")
    ver = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", version_py, re.MULTILINE)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", version_py, re.MULTILINE)
    body = ""
    m = re.search(r"def _preload_cuda_deps\(.*?(?=\ndef |\Z)", init, re.DOTALL)
    if m:
        body = m.group(0)
    pairs = tuple(re.findall(r"\(\s*['\"]([\w.]+)['\"]\s*,\s*['\"](lib[^'\"]+)['\"]\s*\)", body))
    # Optional libraries preloaded by a direct call after the loop (nvtx).
    pairs += tuple(p for p in re.findall(
        r"_preload_cuda_lib\(\s*['\"]([\w.]+)['\"]\s*,\s*['\"](lib[^'\"]+)['\"]", body) if p not in pairs)
    gd = os.path.join(package_dir, "lib", "libtorch_global_deps.so")
    return TorchPlan(
        package_dir=package_dir,
        version=ver.group(1) if ver else None,
        cuda=cuda.group(1) if cuda else None,
        global_deps=gd if os.path.exists(gd) else None,
        preload_map=pairs,
        preload_after_success='"libcudart.so" not in _maps' in init
        or "'libcudart.so' not in _maps" in init,
        cu_major_folder='f"cu{maj_cuda_version}"' in init,
    )


# -- --runtime: import the module and compare with the model -----------------------------

#: Seconds allowed for ``--runtime`` to import the module.
IMPORT_TIMEOUT = 180.0

RUNTIME_SCRIPT = r"""
import importlib, json, sys
name = sys.argv[1]
err = None
try:
    if name.endswith(".so") or "/" in name:
        import ctypes
        ctypes.CDLL(name)
    else:
        importlib.import_module(name)
except BaseException as exc:
    err = "%s: %s" % (type(exc).__name__, exc)
imported = []
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if isinstance(f, str) and f.endswith(".so") and f not in imported:
        imported.append(f)
files = []
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            p = parts[5].strip()
            if p not in files:
                files.append(p)
print(json.dumps({"error": err, "files": files, "imported": imported}))
"""


def runtime_check(
    report: Any, python: str, module: str, *, environ: Mapping[str, str],
    reanalyze: Any,
) -> dict[str, Any]:
    """Import ``module`` in the target (an :class:`~envlock.libs.analysis.LibsReport`'s target) and
    compare the files it maps with the model.

    :param reanalyze: ``callable(extra_modules) -> LibsReport``: the same analysis with the
        extension modules the import loaded ``dlopen``'ed first, in the order Python loaded
        them (to explain their libraries and which copy each SONAME binds to).
    :returns: ``{"status", "error", "matched", "explained", "unexplained", "not_loaded"}``;
        ``status`` is ``"import-failed"`` when the import raised (``error`` says how);
        ``unexplained`` lists files mapped by the process that the model cannot account for
        and model objects missing from the process.
    """
    from envlock._run import run

    res = run([report.launcher or python, "-c", RUNTIME_SCRIPT, module], timeout=IMPORT_TIMEOUT,
              env=dict(environ), cwd="/")
    if not res.ok:
        return {"status": res.status, "error": res.detail, "matched": [], "explained": [],
                "unexplained": [], "not_loaded": []}
    try:
        data = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "error", "error": "unexpected output from the target", "matched": [],
                "explained": [], "unexplained": [], "not_loaded": []}
    mapped = [f for f in data["files"] if ".so" in os.path.basename(f) or f == os.path.realpath(python)]
    static = {o.realpath: o for o in report.objects if o.stage in ("startup", "import")}
    # Model again with every extension module the import really loaded, in the order Python
    # loaded them (sys.modules order): that order decides which copy a SONAME binds to.
    imported = [f for f in data.get("imported", []) if isinstance(f, str)]
    full = reanalyze(imported) if imported else report
    known = {o.realpath: o for o in full.objects}
    reachable: set[str] = {o.realpath for o in full.objects if o.stage == "startup"}
    for o in full.objects:
        if o.via and o.via.startswith("torch"):
            reachable |= {x.realpath for x in full.closure(o.path)}
    for f in imported:
        reachable |= {x.realpath for x in full.closure(f)}
    imported_real = {os.path.realpath(f) for f in imported}
    matched, explained, unexplained, not_loaded = [], [], [], []
    for f in mapped:
        if f in static:
            matched.append(f)
        elif f in known:
            o = known[f]
            why = ("Python extension module imported by the module's Python code"
                   if _is_ext_module(f) else f"needed by {o.requested_by} (an extension module's closure)")
            explained.append({"path": f, "why": why})
        elif f.startswith("/usr/lib/locale/") or f.endswith(".cache"):
            explained.append({"path": f, "why": "data file mapped by the C library"})
        else:
            unexplained.append({"path": f, "why": "mapped by the process, not predicted by the model"})
    mapped_set = set(mapped)
    for real, o in static.items():
        if real in mapped_set or o.kind == "interpreter":
            continue
        if _is_ext_module(real) and real not in imported_real:
            explained.append({"path": o.path, "why": "an extension module of the package that "
                              f"`import {module}` does not import (the model loads them all)"})
        elif real not in reachable:
            explained.append({"path": o.path, "why": "needed only by extension modules that "
                              f"`import {module}` does not import"})
        else:
            not_loaded.append({"path": o.path, "why": "predicted but not mapped"})
    unexplained += not_loaded
    # An import that raised is not "ok", whatever was mapped before it failed.
    status = "import-failed" if data.get("error") else "ok"
    return {"status": status, "error": data.get("error"), "matched": matched,
            "explained": explained, "unexplained": unexplained, "not_loaded": not_loaded}


def _is_ext_module(path: str) -> bool:
    return bool(re.search(r"\.(cpython-\d+[^/]*|abi3)\.so$", path)) or "/lib-dynload/" in path
