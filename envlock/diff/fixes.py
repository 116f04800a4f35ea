"""Fix texts generated from the facts: the install commands an explanation's "do" gives.

Each command is written so that it parses as what it claims to be (``tests/diff/test_fixes.py``
checks them with :mod:`shlex`, :class:`packaging.requirements.Requirement` for pip's
requirement specifiers and conda's MatchSpec through py-rattler):

* PyTorch publishes one pip index per build variant, ``https://download.pytorch.org/whl/<variant>``
  (``cpu``, ``cu118``, ``cu121``, ``cu130``, ``rocm6.1``; the list and its source are
  :data:`envlock.variants.PYTORCH_INDEXES`): a ``+cpu`` or ``+cu130`` build is only on that
  index, so the command names it, with ``<variant>`` left as a visible placeholder and its value
  for each input spelled out; a variant PyTorch has no index for (CUDA 11.2, 8.0) is said so,
  with the indexes of that CUDA major to choose from;
* conda-forge selects the BLAS by the build string of its ``libblas`` "mutex" package
  (``libblas=*=*openblas``, ``*mkl``, ``*blis``; conda-forge docs, "Switching BLAS
  implementation"); the defaults channel by the ``blas`` metapackage (``blas=*=mkl``,
  ``blas=*=openblas``);
* conda-forge selects the variant by build string and the ``cuda-version`` metapackage
  (``pytorch * cuda*``, ``cuda-version=13.0``; conda-forge docs, "CUDA builds"); the
  ``pytorch`` channel used ``pytorch-cuda=<x.y>`` and ``cpuonly``, only for CUDA 11.6–12.4
  (its last release, torch 2.5): never for a CUDA 13.0 build.  ``cuda-version=<x.y>`` is named
  only for the versions conda-forge has (:data:`envlock.variants.CONDA_FORGE_CUDA_VERSIONS`).
"""

from __future__ import annotations

import re
import shlex

from envlock.diff.factset import Pkg
from envlock.variants import (
    PYTORCH_CUDA_CHANNEL,
    conda_forge_cuda_version,
    cuda_indexes,
    pytorch_index_url,
)

__all__ = ["variant_tag", "torch_fix", "blas_fix", "PYTORCH_INDEX", "PYTORCH_CUDA_CHANNEL"]

#: PyTorch's per-variant pip index; ``<variant>`` is the placeholder the user fills in.
PYTORCH_INDEX = "https://download.pytorch.org/whl/<variant>"



def variant_tag(variant: str) -> str | None:
    """The index name of a torch build variant: ``"CPU-only"`` → ``"cpu"``, ``"CUDA 13.0"`` →
    ``"cu130"`` (also ``"CUDA 13.0 (cuDNN 9)"``), ``"ROCm 6.1"`` → ``"rocm6.1"``; ``None`` when the
    variant is not known."""
    if variant == "CPU-only":
        return "cpu"
    m = re.match(r"CUDA (\d+)\.(\d+)(?:$| )", variant)  # "CUDA 13.0", "CUDA 13.0 (cuDNN 9)"
    if m:
        return f"cu{m.group(1)}{m.group(2)}"
    m = re.fullmatch(r"ROCm (\d+(?:\.\d+)*)", variant)
    return f"rocm{m.group(1)}" if m else None


def _public(version: str | None) -> str | None:
    return version.split("+", 1)[0] if version else None


def _conda(variant: str, channel: str | None) -> str | None:
    """The conda command that installs ``variant`` from the channel the manifest used."""
    cuda = re.match(r"CUDA (\d+\.\d+)(?:$| )", variant)
    if channel in ("pytorch", "defaults", "anaconda", "pkgs/main"):
        if variant == "CPU-only":
            return "conda install -c pytorch pytorch cpuonly"
        if cuda and cuda.group(1) in PYTORCH_CUDA_CHANNEL:
            return (f"conda install -c pytorch -c nvidia pytorch "
                    f"{shlex.quote('pytorch-cuda=' + cuda.group(1))}")
    if variant == "CPU-only":
        return "conda install -c conda-forge 'pytorch * cpu*'"
    if cuda and conda_forge_cuda_version(cuda.group(1)):
        return (f"conda install -c conda-forge 'pytorch * cuda*' "
                f"{shlex.quote('cuda-version=' + cuda.group(1))}")
    return None


def torch_fix(variants: tuple[str, str], labels: tuple[str, str],
              packages: tuple[Pkg | None, Pkg | None]) -> str:
    """The install commands for torch's build, one per way the inputs installed it.

    :param variants: the two builds (:func:`envlock.diff.rules.torch_variant`).
    :param labels: the two inputs' labels.
    :param packages: each side's ``torch`` package fact, if any (its manager and channel
        choose the conda command; its version goes into the pip one).
    :returns: text with the commands in backticks.
    """
    tags = [variant_tag(v) for v in variants]
    versions = [_public(p.version) if isinstance(p, Pkg) else None for p in packages]
    if versions[0] and versions[0] == versions[1]:
        spec, vnote = f"torch=={versions[0]}", ""
    elif all(versions):  # a placeholder would not parse as a requirement: b's, a's noted
        spec = f"torch=={versions[1]}"
        vnote = f"; torch=={versions[0]} for {labels[0]}'s version"
    else:
        spec, vnote = "torch", ""
    shown, missing = [], []
    for t, v, lab in zip(tags, variants, labels, strict=True):
        if t and pytorch_index_url(t):
            shown.append(f"{t} for the {v} build of {lab}")
        elif t:
            major = re.match(r"cu(\d+)\d$", t)
            near = cuda_indexes(major.group(1)) if major else ()
            missing.append(f"PyTorch has no {t} index for the {v} build of {lab}"
                           + (f" (choose one of its CUDA {major.group(1) if major else ''} "
                              f"indexes: {', '.join(near)})" if near else
                              " (choose a newer CUDA build: " + ", ".join(cuda_indexes()[-3:]) + ")"))
    if not shown:  # no index to name: the choice, spelled out
        return "pip: " + "; ".join(missing) + vnote
    parts = [f"pip: `pip install {shlex.quote(spec)} --index-url {PYTORCH_INDEX}` (<variant>: "
             + ", ".join(shown) + vnote + ")" + "".join(f"; {m}" for m in missing)]
    for p, v, lab in zip(packages, variants, labels, strict=True):
        if isinstance(p, Pkg) and p.manager == "conda":
            cmd = _conda(v, p.channel)
            if cmd:
                parts.append(f"conda ({p.channel or 'its channel'}, for {lab}'s build): `{cmd}`")
    return "; ".join(parts)


_DEFAULTS = ("defaults", "anaconda", "pkgs/main")


def blas_fix(vendors: tuple[str, str], packages: tuple[object, object]) -> str:
    """The conda command that selects each side's BLAS, in its channel's names.

    :param vendors: the two implementations (``"openblas"``, ``"mkl"``, ``"blis"``, …), each
        the single vendor of a side, or ``""`` when a side has several or none.
    :param packages: each side's ``libblas`` (conda-forge) or ``blas`` (defaults) package fact.
    :returns: text with the commands in backticks, e.g. ``conda-forge: `conda install -c
        conda-forge 'libblas=*=*mkl'` (MKL) or `… '*openblas'` (OpenBLAS)``.
    """
    channel = next((p.channel for p in packages if isinstance(p, Pkg) and p.channel), None)
    cmds = []
    for v in dict.fromkeys(x for x in vendors if x in ("openblas", "mkl", "blis", "netlib",
                                                        "accelerate")):
        if channel in _DEFAULTS and v in ("openblas", "mkl"):
            cmds.append(f"`conda install {shlex.quote('blas=*=' + v)}`")
        else:
            cmds.append(f"`conda install -c conda-forge {shlex.quote('libblas=*=*' + v)}`")
    where = "defaults" if channel in _DEFAULTS else "conda-forge"
    return f"conda ({where}): " + " or ".join(cmds) if cmds else \
        "pin the same BLAS build on both sides"
