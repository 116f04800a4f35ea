"""GPU checks: CPU-only builds (C05), the driver against the builds' CUDA runtime (C06), GPUs'
compute capabilities against the builds' architectures (C07), lockfiles needing ``__cuda``.

Finding ids: ``gpu.cpu-only-build``, ``gpu.no-driver``, ``gpu.query-failed``,
``gpu.driver-too-old``, ``gpu.driver-minor-compat``, ``gpu.driver-unknown``,
``gpu.arch-unsupported``, ``gpu.arch-ptx-only``, ``gpu.ptx-driver-too-old``,
``gpu.arch-unknown``.  The rules are in :mod:`envlock.nvidia`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from envlock.findings import Finding, Severity
from envlock.nvidia import (
    assess_arch,
    assess_driver,
    max_cuda_for_driver,
    sm_name,
    toolkit_driver,
    vtuple,
)
from envlock.verify.live import local_label

if TYPE_CHECKING:
    from envlock.manifest.stacktables import GpuInfo
    from envlock.verify.context import Context

__all__ = [
    "ExpectedBuild",
    "expected_torch",
    "visible_gpus",
    "check_cpu_build",
    "check_driver",
    "check_arch",
    "WHEEL_ARCHS",
]

#: ``TORCH_CUDA_ARCH_LIST`` of PyTorch's x86_64 CUDA wheels (pytorch/pytorch
#: ``.ci/manywheel/build_cuda.sh``; varies by release) — only used to suggest a fix.
WHEEL_ARCHS: tuple[tuple[str, str], ...] = (
    ("cu126", "5.0 6.0 7.0 7.5 8.0 8.6 9.0"),
    ("cu128", "7.0 7.5 8.0 8.6 9.0 10.0 12.0"),
    ("cu129", "7.0 7.5 8.0 8.6 9.0 10.0 12.0+PTX"),
    ("cu130", "7.5 8.0 8.6 9.0 10.0 12.0+PTX"),
)


class ExpectedBuild(NamedTuple):
    """How the manifest says torch was built: ``build`` ``"cuda"``/``"cpu"``/``"rocm"``/``None``."""

    version: str | None
    build: str | None
    cuda: str | None
    evidence: str


def expected_torch(expected: Any) -> ExpectedBuild | None:
    """torch's build according to the manifest: its ``[frameworks]`` entry when recorded, else the
    local version label of ``[pip]`` (``+cu130``, ``+cpu``) or the conda build string."""
    fw = expected.framework("torch")
    if fw and fw.get("build"):
        return ExpectedBuild(fw.get("version"), fw.get("build"), fw.get("cuda"),
                             f"manifest [frameworks] torch: {fw.get('evidence') or fw.get('build')}")
    pip = next((p for p in expected.pip_packages() if p.name == "torch"), None)
    conda = next((c for c in expected.conda_packages() if c.name == "pytorch"), None)
    if pip is not None:
        label = local_label(pip.version)
        if label:
            m = re.fullmatch(r"cu(\d+)(\d)", label)
            if m:
                return ExpectedBuild(pip.version, "cuda", f"{m.group(1)}.{m.group(2)}",
                                     f"manifest: torch {pip.version}")
            if label.startswith("cpu"):
                return ExpectedBuild(pip.version, "cpu", None, f"manifest: torch {pip.version}")
            if label.startswith("rocm"):
                return ExpectedBuild(pip.version, "rocm", None, f"manifest: torch {pip.version}")
    if conda is not None:
        m = re.search(r"cuda(\d+)\.(\d+)", conda.build)
        if m or "cuda" in conda.build:
            return ExpectedBuild(conda.version, "cuda", f"{m.group(1)}.{m.group(2)}" if m else None,
                                 f"manifest: conda pytorch {conda.version} {conda.build}")
        if "cpu" in conda.build:
            return ExpectedBuild(conda.version, "cpu", None, f"manifest: conda pytorch {conda.version} {conda.build}")
    if pip is not None:
        # PyPI's Linux torch wheels carry no local label; their CUDA builds depend on NVIDIA's
        # runtime wheel (nvidia-cuda-runtime-cu12, or nvidia-cuda-runtime for CUDA 13), whose
        # version gives the CUDA release.
        rt = next((p for p in expected.pip_packages()
                   if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", p.name)), None)
        if rt is not None:
            m = re.match(r"(\d+)\.(\d+)", rt.version)
            return ExpectedBuild(pip.version, "cuda", f"{m.group(1)}.{m.group(2)}" if m else None,
                                 f"manifest: torch {pip.version} with {rt.name} {rt.version}")
        return ExpectedBuild(pip.version, None, None, f"manifest: torch {pip.version}")
    return None


def visible_gpus(gpus: Sequence[Any], environ: Mapping[str, str]) -> list[Any]:
    """The GPUs a CUDA process of this job sees: all of them, or those ``CUDA_VISIBLE_DEVICES``
    names (indices or ``GPU-…`` UUID prefixes; parsing stops at the first invalid entry, as
    the CUDA runtime does)."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(gpus)
    out = []
    for item in (s.strip() for s in cvd.split(",")):
        match = None
        if item.isdigit():
            match = next((g for g in gpus if g.index == int(item)), None)
        elif item.startswith(("GPU-", "MIG-")):
            match = next((g for g in gpus if g.uuid and g.uuid.startswith(item)), None)
        if match is None:
            break
        if match not in out:
            out.append(match)
    return out


def _cuda_builds(ctx: Context, *, archs: bool = False) -> list[Any]:
    return [b for b in ctx.live.frameworks(archs=archs) if b.build == "cuda" and b.cuda]


def _label(build: Any) -> str:
    return f"{build.name} {build.version}" if build.version else build.name


def _evidence(build: Any) -> tuple[str, ...]:
    if not build.evidence:
        return ()
    where = f" ({build.location})" if build.location else ""
    return (f"{build.name} build: {build.evidence}{where}",)


def _needs_cuda_from_conda(ctx: Context) -> list[tuple[str, str]]:
    """``(who, spec)`` for every installed conda package and lockfile entry depending on
    ``__cuda`` (the virtual package conda sets from the driver)."""
    out = []
    conda = ctx.live.conda
    for c in conda.packages if conda else ():
        for dep in c.depends:
            name, _, spec = dep.strip().partition(" ")
            if name == "__cuda":
                out.append((f"conda package {c.name} {c.version} {c.build}", spec.strip()))
    for lock in ctx.expected.locks:
        if getattr(lock, "cuda", None):  # a pixi.lock platform solved for __cuda=<v>
            out.append((f"platform {lock.lock_platform} of {lock.path} (virtual package "
                        f"__cuda={lock.cuda})", f">={lock.cuda}"))
        for p in lock.packages:
            if p.cuda is not None:
                out.append((f"{p.name} {p.version or ''} in {lock.path}".replace("  ", " "), p.cuda))
    return out


def _spec_min(spec: str) -> str | None:
    """The lower bound of a ``__cuda`` spec: ``">=12"`` → ``"12"``, ``"11.8"`` → ``"11.8"``."""
    m = re.match(r"^\s*(?:>=|==|=)?\s*(\d+(?:\.\d+)?)", spec)
    return m.group(1) if m else None


def check_cpu_build(ctx: Context) -> list[Finding]:
    """torch is a CPU-only build where the manifest expects a CUDA build or Slurm allocated GPUs
    (error), or where the node merely has GPUs (warning) — case C05.  A CPU build the manifest
    also records is only questioned when GPUs were allocated (warning)."""
    torch = next((b for b in ctx.live.frameworks() if b.name == "torch"), None)
    if torch is None or torch.build != "cpu":
        return []
    reasons: list[str] = []
    exp = expected_torch(ctx.expected)
    meant_cpu = exp is not None and exp.build == "cpu"
    severity: Severity = "error"
    if exp is not None and exp.build == "cuda":
        reasons.append(f"{exp.evidence} (a CUDA {exp.cuda or ''} build)".replace(" )", ")"))
    allocated = ctx.gpus_allocated()
    if allocated:
        reasons.append(f"Slurm allocated {allocated} GPU(s) to this job (SLURM_GPUS_ON_NODE / SLURM_JOB_GPUS)")
        if meant_cpu:  # a CPU build was recorded: the allocation, not the build, looks wrong
            severity = "warning"
    if not reasons and not meant_cpu:
        gpu = ctx.live.gpu
        if gpu.driver_version and gpu.gpus:
            reasons.append(f"this node has {len(gpu.gpus)} NVIDIA GPU(s), driver {gpu.driver_version}")
            severity = "warning"  # no allocation or manifest says the job wants them
    if not reasons:
        return []
    want = exp.cuda if exp is not None and exp.build == "cuda" else None
    from envlock.variants import (
        PYTORCH_CUDA_CHANNEL,
        conda_forge_cuda_version,
        cuda_indexes,
        index_name,
        pytorch_index_url,
    )

    index = pytorch_index_url(index_name(want)) if want else None
    want_version = exp.version if want and exp is not None else None
    pin = (want_version if want_version else torch.version or "").split("+")[0]
    if index:
        pip_fix = f"pip install 'torch=={pin}' --index-url {index}"
    else:  # no index for that CUDA (cu112) or none expected: a choice, named
        major = want.split(".")[0] if want else None
        names = cuda_indexes(major) or cuda_indexes()[-3:]
        pip_fix = ((f"PyTorch has no {index_name(want)} index: " if want else "")
                   + f"choose a CUDA build: pip install 'torch=={pin}' --index-url "
                   "https://download.pytorch.org/whl/<index> with <index> one of "
                   + ", ".join(names) + " (one this node's driver supports)")
    forge = conda_forge_cuda_version(want) if want else None
    return [Finding(
        id="gpu.cpu-only-build",
        severity=severity,
        title=f"{_label(torch)} is a CPU-only build"
              + (f"; the manifest expects a CUDA {want} build ({want_version})" if want
                 else "; GPUs are available to this job"),
        cause="torch.cuda.is_available() will be False: every tensor stays on the CPU "
              "(a CPU wheel, or a conda solve that fell back to a *_cpu_* build).",
        evidence=(*_evidence(torch), *reasons),
        fix=(pip_fix,
             # the pytorch channel's pytorch-cuda exists for CUDA 11.6-12.4 only (torch <= 2.5)
             f"conda: install a CUDA build (`conda install -c pytorch -c nvidia pytorch "
             f"pytorch-cuda={want}`)" if want in PYTORCH_CUDA_CHANNEL else
             "conda: install a CUDA build (conda-forge: `conda install -c conda-forge "
             f"'pytorch * cuda*' cuda-version={forge}`) and check the build string contains 'cuda'"
             if forge else
             "conda: install a CUDA build (conda-forge: `conda install -c conda-forge "
             "'pytorch * cuda*' cuda-version=<x.y>`, <x.y> one of conda-forge's cuda-version "
             "values this node's driver supports) and check the build string contains 'cuda'"),
    )]


def _driver_unanswered(gpu: GpuInfo) -> list[Finding]:
    """``gpu.query-failed``: the driver's query timed out, or failed without a driver version."""
    return [Finding(
        id="gpu.query-failed",
        severity="error",
        title=f"the GPU driver did not answer: {gpu.error}",
        cause="nvidia-smi hanging or failing usually means a wedged driver or GPU (Xid errors); "
              "CUDA programs on this node will hang or fail too.",
        evidence=(f"source: {gpu.source or 'nvidia-smi'}", f"status: {gpu.status}"),
        fix=("Drain the node / report it to the admins, and resubmit the job elsewhere.",),
    )]


def _no_driver(gpu: GpuInfo, builds: Sequence[Any], needs_cuda: Sequence[tuple[str, str]],
               allocated: int | None) -> list[Finding]:
    """``gpu.no-driver``: no NVIDIA driver, but a CUDA build, a ``__cuda`` requirement or a
    Slurm GPU allocation wants one (an error for an allocation or a lock's requirement)."""
    what = [f"{_label(b)} is a CUDA {b.cuda} build" for b in builds]
    what += [f"{who} needs __cuda {spec}".strip() for who, spec in needs_cuda]
    if allocated:
        what.append(f"Slurm allocated {allocated} GPU(s)")
    hard = bool(allocated or any(" in " in who for who, _ in needs_cuda))
    return [Finding(
        id="gpu.no-driver",
        severity="error" if hard else "warning",
        title="no NVIDIA driver on this node, but " + "; ".join(what[:2]),
        cause="Without the kernel driver (and its libcuda.so.1) CUDA is unavailable: the job "
              "falls back to the CPU or fails. On a login node this is expected.",
        evidence=(gpu.error or "no /proc/driver/nvidia/version", *what),
        fix=("Run the job on a GPU node (request GPUs: --gpus / --gres=gpu:N).",
             "On a login node, ignore this finding: [tool.envlock.verify] ignore = [\"gpu.no-driver\"]"),
    )]


def _build_driver(b: Any, driver: str, supports: str | None, gpu: GpuInfo) -> list[Finding]:
    """The driver against one framework's CUDA build (NVIDIA's table, minor-version
    compatibility): too old, minor-compat or unknown; nothing when it is fine."""
    try:
        v = assess_driver(b.cuda, driver)
    except ValueError:
        return []
    table = (f"NVIDIA table: CUDA {v.cuda} toolkit ships driver {v.full}" if v.full
             else f"CUDA {v.cuda} is not in NVIDIA's driver table known to envlock")
    floor = f"minor-version compatibility: any CUDA {v.cuda.split('.')[0]}.x runs on ≥ {v.needs}" \
        if v.needs and v.needs != v.full else None
    ev = (*_evidence(b), f"driver {driver} ({gpu.source or 'driver'}); supports up to CUDA {supports or '< 7.0'}",
          table, *((floor,) if floor else ()))
    if v.status == "too-old":
        return [Finding(
            id="gpu.driver-too-old",
            severity="error",
            title=f"{_label(b)} was built with CUDA {v.cuda}; driver {driver} supports up to "
                  f"CUDA {supports or '< 7.0'}; needs ≥ {v.needs}",
            cause="The CUDA runtime refuses to start (cudaErrorInsufficientDriver: \"CUDA driver "
                  "version is insufficient for CUDA runtime version\"); the framework sees no GPU "
                  "(torch.cuda.is_available() is False). The CUDA toolkit in /usr/local does not matter "
                  "to wheels: they bring their own runtime.",
            evidence=ev,
            fix=(f"Upgrade the NVIDIA driver to ≥ {v.needs} (ask the admins), or run on nodes that have it.",
                 (f"Or install a build made for CUDA ≤ {supports}"
                  + (f" (PyTorch: a https://download.pytorch.org/whl/cuXY index with X.Y ≤ {supports})"
                     if b.name == "torch" else "")) if supports else
                 "Or install an older build this driver supports.",
                 "Data-center GPUs: the cuda-compat package can run a newer CUDA on an older driver."),
        )]
    if v.status == "minor-compat":
        return [Finding(
            id="gpu.driver-minor-compat",
            severity="info",
            title=f"{_label(b)} (CUDA {v.cuda}) runs on driver {driver} under minor-version "
                  f"compatibility (its toolkit driver is {v.full or 'newer'})",
            cause="It runs, but PTX from its toolkit cannot be JIT-compiled by this driver and some "
                  "newer APIs return cudaErrorCallRequiresNewerDriver.",
            evidence=ev,
            fix=(f"Nothing to do unless a GPU needs PTX JIT; a driver ≥ {v.full} removes the limits."
                 if v.full else "Nothing to do unless a GPU needs PTX JIT.",),
        )]
    if v.status == "unknown":
        return [Finding(
            id="gpu.driver-unknown", severity="info",
            title=f"cannot judge driver {driver} for {_label(b)} (CUDA {v.cuda}): not in NVIDIA's table",
            cause="envlock's driver table does not cover this CUDA version.",
            evidence=ev, fix=("Compare with NVIDIA's CUDA release notes, Table 3.",),
        )]
    return []


def _conda_driver(who: str, spec: str, driver: str, supports: str | None, gpu: GpuInfo) -> list[Finding]:
    """The driver's CUDA against one conda ``__cuda`` requirement ``spec`` of ``who``."""
    low = _spec_min(spec)
    if low is None or supports is None:
        return []
    if vtuple(supports) < vtuple(low):
        need = toolkit_driver(low)
        return [Finding(
            id="gpu.driver-too-old",
            severity="error",
            title=f"{who} needs __cuda {spec}; driver {driver} supports up to CUDA {supports}",
            cause="conda's __cuda virtual package is the CUDA version the driver supports; the "
                  "package was solved for a newer one and its CUDA code will not start.",
            evidence=(f"driver {driver} ({gpu.source or 'driver'})", f"{who}: depends on __cuda {spec}"),
            fix=(f"Upgrade the driver (≥ {need})" if need else "Upgrade the driver",
                 f"or re-solve the lock for __cuda={supports} (CONDA_OVERRIDE_CUDA={supports})"),
        )]
    return []


def check_driver(ctx: Context) -> list[Finding]:
    """The NVIDIA driver against the CUDA runtime each framework was built with (case C06), and
    against ``__cuda`` requirements of conda packages and lockfiles."""
    builds = _cuda_builds(ctx)
    needs_cuda = _needs_cuda_from_conda(ctx)
    allocated = ctx.gpus_allocated()
    if not builds and not needs_cuda and not allocated:
        return []
    gpu = ctx.live.gpu
    out: list[Finding] = []
    if gpu.status == "timeout" or (gpu.status == "error" and not gpu.driver_version):
        return _driver_unanswered(gpu)
    driver = gpu.driver_version
    if not driver:
        return _no_driver(gpu, builds, needs_cuda, allocated)
    supports = gpu.cuda_driver_version or max_cuda_for_driver(driver)
    for b in builds:
        out += _build_driver(b, driver, supports, gpu)
    for who, spec in needs_cuda:
        out += _conda_driver(who, spec, driver, supports, gpu)
    return out


def _no_kernel_image(b: Any, who: str, cc: str, verdict: Any, ev: tuple[str, ...]) -> Finding:
    """``gpu.arch-unsupported``: neither SASS nor PTX of the build serves compute capability
    ``cc``; the fix names PyTorch's wheel variants whose architecture lists have SASS for it."""
    why = {
        "too-new": f"the GPU is newer than every architecture in the build and there is no "
                   f"PTX ≤ {cc} to JIT-compile",
        "too-old": "the GPU is older than the lowest architecture in the build",
        "gap": f"no SASS for {sm_name(cc)}'s major version with a minor ≤ {cc.split('.')[1]}, "
               "and no PTX it could JIT-compile",
    }[verdict.reason or "gap"]
    fits = [tag for tag, lst in WHEEL_ARCHS if assess_arch(cc, lst.split()).mode == "sass"]
    return Finding(
        id="gpu.arch-unsupported",
        severity="error",
        title=f"{who} cannot run {_label(b)}: no kernel image for {sm_name(cc)}",
        cause=f"CUDA kernels fail with \"no kernel image is available for execution on the "
              f"device\": {why}.",
        evidence=ev,
        fix=((f"Install a build that includes {sm_name(cc)}; PyTorch's "
              + ", ".join(fits) + f" wheels list {cc} (lists vary by release)") if fits
             else f"Install or build a version that includes {sm_name(cc)} "
                  f"(TORCH_CUDA_ARCH_LIST=\"{cc}\").",
             "Or run on GPUs the build supports."),
    )


def _ptx_jit(b: Any, who: str, cc: str, verdict: Any, ev: tuple[str, ...], gpu: GpuInfo) -> Finding:
    """Only PTX serves the GPU: ``gpu.ptx-driver-too-old`` when the driver is older than the
    build's toolkit driver (it cannot JIT that PTX), else ``gpu.arch-ptx-only``."""
    driver_ok = True
    if gpu.driver_version:
        try:
            driver_ok = assess_driver(b.cuda, gpu.driver_version).status == "ok"
        except ValueError:
            driver_ok = True
    if not driver_ok:
        return Finding(
            id="gpu.ptx-driver-too-old",
            severity="error",
            title=f"{who} can run {_label(b)} only by JIT-compiling {verdict.via}, which "
                  f"driver {gpu.driver_version} cannot (PTX from CUDA {b.cuda} is newer)",
            cause="The build has no SASS for this GPU; its PTX was produced by a newer toolkit "
                  "than the driver (minor-version compatibility does not cover PTX JIT): "
                  "cudaErrorUnsupportedPtxVersion.",
            evidence=(*ev, f"driver {gpu.driver_version}; CUDA {b.cuda} toolkit driver "
                           f"{toolkit_driver(b.cuda) or 'unknown'}"),
            fix=(f"Upgrade the driver to ≥ {toolkit_driver(b.cuda) or 'the toolkit driver'}, or "
                 f"install a build with SASS for {sm_name(cc)}.",),
        )
    return Finding(
        id="gpu.arch-ptx-only",
        severity="warning",
        title=f"{who} runs {_label(b)} only through PTX JIT ({verdict.via})",
        cause="No SASS for this GPU: the driver compiles the PTX at first use (minutes "
              "for large libraries, cached in ~/.nv/ComputeCache), and the code is not "
              "tuned for it.",
        evidence=ev,
        fix=(f"Install a build with SASS for {sm_name(cc)}, or keep the JIT cache "
             "(CUDA_CACHE_PATH on a persistent disk, CUDA_CACHE_MAXSIZE).",),
    )


def check_arch(ctx: Context) -> list[Finding]:
    """Each visible GPU's compute capability against each CUDA build's architectures (C07).

    SASS ``sm_XY`` serves ``X.Z`` with ``Z ≥ Y``; otherwise PTX ``compute_XY`` ≤ the GPU is JIT-
    compiled (slow first start; needs a driver ≥ the build's toolkit driver); otherwise
    "no kernel image is available for execution on the device".
    """
    if not _cuda_builds(ctx):
        return []
    gpu = ctx.live.gpu
    gpus = [g for g in visible_gpus(gpu.gpus, ctx.environ) if g.compute_capability]
    if not gpus:
        return []
    builds = _cuda_builds(ctx, archs=True)
    out: list[Finding] = []
    for b in builds:
        if not b.cuda_archs:
            out.append(Finding(
                id="gpu.arch-unknown", severity="info",
                title=f"the GPU architectures of {_label(b)} could not be read",
                cause="Without them envlock cannot tell whether every GPU has a kernel image.",
                evidence=(b.error or "no architecture list recorded",),
                fix=("Run `python -c 'import torch; print(torch.cuda.get_arch_list())'` on this node.",),
            ))
            continue
        archs = " ".join(b.cuda_archs)
        src = f" (from {b.cuda_archs_source})" if getattr(b, "cuda_archs_source", None) else ""
        for g in gpus:
            cc = g.compute_capability
            try:
                verdict = assess_arch(cc, b.cuda_archs)
            except ValueError:
                continue
            who = f"GPU {g.index} {g.name or ''} (compute capability {cc})".replace("  ", " ")
            ev = (f"{who}", f"{_label(b)} is built for: {archs}{src}", *_evidence(b))
            if verdict.mode == "none":
                out.append(_no_kernel_image(b, who, cc, verdict, ev))
            elif verdict.mode == "ptx":
                out.append(_ptx_jit(b, who, cc, verdict, ev, gpu))
    return out
