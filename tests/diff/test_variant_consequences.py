"""One torch variant change is one explanation (issue 25, the "H07 kind"): a CUDA build
against a CPU build of torch, or cu118 against cu121, brings the nvidia-* wheels, triton,
the CUDA runtime and cuDNN of the stack and torch's local version along with it.  ``envlock
diff`` gives that change as ONE explanation, ranked first, its cause torch and the rest its
consequences, never four explanations with a consequence (a cuDNN wheel) first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envlock.diff import diff
from envlock.diff.engine import PairDiff
from envlock.manifest import PipPackage

from .conftest import CONDA_PACKAGES, SITE, build_manifest, gpu_table, replace

#: the CUDA wheels torch 2.1.0 requires (its METADATA Requires-Dist), by CUDA major
_NVIDIA = {
    "cu11": [("nvidia-cublas-cu11", "11.11.3.6"), ("nvidia-cuda-cupti-cu11", "11.8.87"),
             ("nvidia-cuda-nvrtc-cu11", "11.8.89"), ("nvidia-cuda-runtime-cu11", "11.8.89"),
             ("nvidia-cudnn-cu11", "8.7.0.84"), ("nvidia-cufft-cu11", "10.9.0.58"),
             ("nvidia-curand-cu11", "10.3.0.86"), ("nvidia-cusolver-cu11", "11.4.1.48"),
             ("nvidia-cusparse-cu11", "11.7.5.86"), ("nvidia-nccl-cu11", "2.18.1"),
             ("nvidia-nvtx-cu11", "11.8.86")],
    "cu12": [("nvidia-cublas-cu12", "12.1.3.1"), ("nvidia-cuda-cupti-cu12", "12.1.105"),
             ("nvidia-cuda-nvrtc-cu12", "12.1.105"), ("nvidia-cuda-runtime-cu12", "12.1.105"),
             ("nvidia-cudnn-cu12", "8.9.2.26"), ("nvidia-cufft-cu12", "11.0.2.54"),
             ("nvidia-curand-cu12", "10.3.2.106"), ("nvidia-cusolver-cu12", "11.4.5.107"),
             ("nvidia-cusparse-cu12", "12.1.0.106"), ("nvidia-nccl-cu12", "2.18.1"),
             ("nvidia-nvjitlink-cu12", "12.3.101"), ("nvidia-nvtx-cu12", "12.1.105")],
}

#: the conda env without conda's torch and CUDA libraries: torch comes from pip here
_BASE = [r for r in CONDA_PACKAGES
         if r[0] not in ("pytorch", "cudnn", "cuda-version", "libcublas", "nccl")]


def _pip(name: str, version: str, requested: bool = False) -> PipPackage:
    return PipPackage(name=name, version=version, location=SITE, installer="pip",
                      requested=requested)


def _torch_env(version: str, cuda: str | None, wheels: str | None) -> dict[str, Any]:
    """A manifest of a pip-installed torch ``version`` (``cuda``: torch.version.cuda) with
    the nvidia wheels of ``wheels`` (``"cu11"``, ``"cu12"``, ``None``: a CPU build) and
    triton, on a node with an A100."""
    pkgs = [_pip("torch", version, requested=True)]
    if wheels:
        pkgs += [_pip(n, v) for n, v in _NVIDIA[wheels]] + [_pip("triton", "2.1.0")]
    fw = {"name": "torch", "version": version, "location": f"{SITE}/torch",
          "build": "cuda" if cuda else "cpu", "debug": False,
          "evidence": f"torch/version.py cuda={cuda!r}"}
    if cuda:
        fw["cuda"] = cuda
        fw["requires"] = [f"{n}=={v}" for n, v in _NVIDIA[wheels or ""]] + ["triton==2.1.0"]
    gpu = gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver="535.104.05")
    gpu["gpu"]["cuda-driver-version"] = "12.2"
    stack = {**gpu, "frameworks": {"status": "ok", "source": "dist-info", "packages": [fw]}}
    return build_manifest(conda=_BASE, extra_pip=pkgs, stack=stack)


def _pair(write, a: dict[str, Any], b: dict[str, Any]) -> PairDiff:
    result = diff([write("a.toml", a), write("b.toml", b)])
    assert isinstance(result, PairDiff)
    return result


#: what a torch variant change brings along besides torch's own facts: the nvidia-* wheels,
#: triton, conda's CUDA libraries, the pytorch channel's selectors, conda-forge's libtorch
_ALONG = ("nvidia-", "cuda", "libcu", "libnv", "libnpp", "libmagma", "pytorch-", "libtorch")


def _consequential(key: str) -> bool:
    """A fact that a torch variant change moves (torch's version, build and CUDA included)."""
    return key.startswith(("torch", *_ALONG)) or key in (
        "triton", "torchtriton", "cudnn", "nccl", "cpuonly")


def _one_explanation_first(result: PairDiff) -> None:
    top = result.explanations[0]
    assert top.id == "torch-variant", [e.id for e in result.explanations]
    # the cause is torch (its package, and its [frameworks] facts: build, CUDA), not a wheel
    causes = [c.key for c in top.causes]
    assert causes[0] == "torch" and all(k.split(".")[0] == "torch" for k in causes), causes
    moved = [c for c in result.changes if _consequential(c.key)]
    assert len(moved) >= 8
    # the cause comes first among the explanation's facts, then its consequences
    assert top.changes[:len(top.causes)] == top.causes
    # every one of them is the variant's evidence, and no other explanation has one
    mine = {id(c) for c in top.changes}
    assert [c.key for c in moved if id(c) not in mine] == []
    others = [(e.id, c.key) for e in result.explanations[1:] for c in e.changes
              if _consequential(c.key)]
    assert others == []


CASES = [
    ("cu118-to-cu121", ("2.1.0+cu118", "11.8", "cu11"), ("2.1.0+cu121", "12.1", "cu12")),
    ("pypi-cuda-to-cpu", ("2.1.0", "12.1", "cu12"), ("2.1.0+cpu", None, None)),
    ("cpu-to-cu118", ("2.1.0+cpu", None, None), ("2.1.0+cu118", "11.8", "cu11")),
]


@pytest.mark.parametrize(("case", "a", "b"), CASES, ids=[c[0] for c in CASES])
def test_a_variant_change_is_one_explanation_ranked_first(write, case: str, a: tuple,
                                                          b: tuple) -> None:
    result = _pair(write, _torch_env(*a), _torch_env(*b))
    _one_explanation_first(result)
    assert len(result.explanations) == 1, [(e.id, e.title) for e in result.explanations]


_GPU = gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver="535.104.05")
_NO_CUDA = replace(CONDA_PACKAGES, pytorch=None, cudnn=None, cuda_version=None, libcublas=None,
                   nccl=None)
#: the pytorch channel: pytorch-cuda pulls the CUDA libraries, pytorch-mutex selects the build
_PYTORCH_CUDA = [("pytorch", "2.1.2", "py3.11_cuda12.1_cudnn8.9.2_0"),
                 ("pytorch-cuda", "12.1", "ha16c6d3_5"), ("pytorch-mutex", "1.0", "cuda"),
                 ("cuda-cudart", "12.1.105", "0"), ("cuda-nvrtc", "12.1.105", "0"),
                 ("cuda-runtime", "12.1.0", "0"), ("cuda-libraries", "12.1.0", "0"),
                 ("libcublas", "12.1.0.26", "0"), ("libcufft", "11.0.2.4", "0"),
                 ("libnpp", "12.0.2.50", "0"), ("libnvjpeg", "12.1.1.14", "0"),
                 ("libnvjitlink", "12.1.105", "0"), ("torchtriton", "2.1.0", "py311")]
_PYTORCH_CPU = [("pytorch", "2.1.2", "py3.11_cpu_0"), ("pytorch-mutex", "1.0", "cpu"),
                ("cpuonly", "2.0", "0")]
#: conda-forge: libtorch carries pytorch's build string; magma comes with the CUDA build
_FORGE_CUDA = [("pytorch", "2.1.2", "cuda120_py311h25b6552_301"),
               ("libtorch", "2.1.2", "cuda120_h2aa5df7_301"), ("cuda-version", "12.0", "hffde075_2"),
               ("cudnn", "8.9.7.29", "hbc23b4c_3"), ("nccl", "2.20.3.1", "h3a97aeb_0"),
               ("libcublas", "12.0.1.189", "hd3aeb46_3"), ("cuda-nvrtc", "12.0.76", "hd3aeb46_2"),
               ("libmagma", "2.7.2", "h173bb3b_2"), ("libmagma_sparse", "2.7.2", "h173bb3b_3")]
_FORGE_CPU = [("pytorch", "2.1.2", "cpu_generic_py311h1234_0"),
              ("libtorch", "2.1.2", "cpu_generic_h1234_0")]
CONDA_CASES = [("pytorch-channel", _PYTORCH_CUDA, _PYTORCH_CPU),
               ("conda-forge", _FORGE_CUDA, _FORGE_CPU)]


@pytest.mark.parametrize(("case", "a", "b"), CONDA_CASES, ids=[c[0] for c in CONDA_CASES])
def test_a_conda_variant_change_is_one_explanation(write, case: str, a: list, b: list) -> None:
    """The selectors (pytorch-mutex, cpuonly), libtorch, libnpp, libnvjpeg, magma and
    torchtriton move with the build: consequences, not explanations of their own."""
    result = _pair(write, build_manifest(conda=_NO_CUDA + a, stack=_GPU),
                   build_manifest(conda=_NO_CUDA + b, stack=_GPU))
    _one_explanation_first(result)
    assert len(result.explanations) == 1, [(e.id, e.title) for e in result.explanations]


@pytest.mark.realenv
def test_the_real_venvs_variant_is_one_explanation_with_a_gpu(cpu_venv: Path, cuda_venv: Path,
                                                              tmp_path: Path, write) -> None:
    """The real venvs (torch 2.13.0+cpu; torch 2.14.1, CUDA 13.0, with its nvidia-* and
    cuda-* wheels and triton), their manifests given an A100 on both sides: the variant is
    explanation #1 and holds every CUDA fact; numpy, scipy and BLAS stay their own."""
    import tomllib

    import envlock

    docs = []
    for venv in (cpu_venv, cuda_venv):
        path = envlock.snapshot(python=str(venv / "bin" / "python")).write(
            tmp_path / f"{venv.name}-here.toml")
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        doc.update(_GPU)  # as if taken on a GPU node: the variant can change numbers there
        docs.append(doc)
    result = _pair(write, *docs)
    _one_explanation_first(result)
    assert {e.id for e in result.explanations[1:]} <= {
        "numpy:package:numpy", "scipy:package:scipy", "blas"}


def test_among_three_inputs_the_odd_build_is_one_explanation(write) -> None:
    """Two nodes with PyPI's CUDA build, one with a CPU build (pip, then the pytorch
    channel): the odd input's explanations are the variant alone, its cause first."""
    from envlock.diff.majority import ManyDiff

    for case, docs in (
            ("pip", [_torch_env("2.1.0", "12.1", "cu12")] * 2 + [_torch_env("2.1.0+cpu", None, None)]),
            ("conda", [build_manifest(conda=_NO_CUDA + _PYTORCH_CUDA, stack=_GPU)] * 2
             + [build_manifest(conda=_NO_CUDA + _PYTORCH_CPU, stack=_GPU)])):
        paths = [write(f"{case}/n{i}.toml", d) for i, d in enumerate(docs)]
        result = diff(paths)
        assert isinstance(result, ManyDiff)
        (odd,) = result.deviants
        assert [e.id for e in odd.explanations] == ["torch-variant"], case
        _one_explanation_first(odd)
