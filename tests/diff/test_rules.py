"""Unit checks of the facts the rules read: torch builds, BLAS vendors, versions."""

from __future__ import annotations

import pytest

from envlock.diff.facts import Impl, Pkg
from envlock.diff.impact import change_size, plain_release, version_in
from envlock.diff.rules import blas_vendors, torch_variant


@pytest.mark.parametrize(("facts", "variant"), [
    ({("package", "torch"): Pkg("2.13.0+cpu")}, "CPU-only"),
    ({("package", "torch"): Pkg("2.2.1+cu121")}, "CUDA 12.1"),
    ({("package", "torch"): Pkg("2.5.1+rocm6.2")}, "ROCm 6.2"),
    ({("package", "torch"): Pkg("1.9.0", "py3.8_cpu_0", "pytorch", "conda")}, "CPU-only"),
    ({("package", "torch"): Pkg("1.8.1", "py3.8_cuda11.1_cudnn8.0.5_0", "pytorch", "conda")},
     "CUDA 11.1 (cuDNN 8.0.5)"),
    ({("package", "torch"): Pkg("2.1.2", "cuda120_py311h25b6552_301", "conda-forge", "conda")},
     "CUDA 12.0"),
    ({("package", "torch"): Pkg("1.12.1", "cuda112py310h51fe464_200", "conda-forge", "conda")},
     "CUDA 11.2"),
    ({("package", "torch"): Pkg("2.1.2", "cpu_generic_py311h9ab3c4e_1", "conda-forge", "conda")},
     "CPU-only"),
    # PyPI's default torch wheel has no local label: the CUDA runtime wheel beside it tells
    ({("package", "torch"): Pkg("2.4.0"), ("package", "nvidia-cuda-runtime-cu12"):
      Pkg("12.1.105")}, "CUDA 12.1"),
    ({("package", "torch"): Pkg("2.14.1"), ("frameworks", "torch.build"): "cuda",
      ("frameworks", "torch.cuda"): "13.0"}, "CUDA 13.0"),
    ({("package", "torch"): Pkg("2.4.0")}, None),
    ({}, None),
    # macOS has no CUDA build: the pytorch channel's osx-arm64 pytorch-2.3.1-py3.10_0 (the
    # build string of /work/shared/cases/foreign/konstantinjdobler__…__conda-lock.yml) and a
    # PyPI wheel on macOS are CPU builds (issue 25)
    ({("package", "torch"): Pkg("2.3.1", "py3.10_0", "pytorch", "conda", "pytorch"),
      ("subdir", "platform"): "osx-arm64"}, "CPU-only"),
    ({("package", "torch"): Pkg("2.4.0"), ("platform", "os"): "macOS 14.5"}, "CPU-only"),
], ids=["pip-cpu", "pip-cu121", "pip-rocm", "conda-cpu", "conda-cuda111", "forge-cuda120",
        "forge-cuda112-old", "forge-cpu", "pypi-default", "frameworks", "unknown", "absent",
        "osx-conda", "osx-pip"])
def test_torch_variant(facts: dict, variant: str | None) -> None:
    assert torch_variant(facts) == variant


def test_blas_vendors() -> None:
    assert blas_vendors({("blas", "numpy"): Impl("openblas", "0.3.27"),
                         ("blas", "openmp libgomp (torch)"): "present"}) == {"openblas"}
    assert blas_vendors({("package", "libblas"): Pkg("3.9.0", "20_linux64_blis")}) == {"blis"}
    assert blas_vendors({("package", "blas"): Pkg("1.0", "mkl", "pkgs/main")}) == {"mkl"}
    assert blas_vendors({("package", "mkl"): Pkg("2023.1.0")}) == {"mkl"}
    assert blas_vendors({("package", "numpy"): Pkg("1.26.4")}) == frozenset()


@pytest.mark.parametrize(("a", "b", "size"), [
    (Pkg("1.24.4"), Pkg("2.4.1"), "major"),
    (Pkg("1.10.1"), Pkg("1.17.0"), "minor"),
    (Pkg("0.3.21"), Pkg("0.3.30"), "patch"),
    (Pkg("2.13.0+cpu"), Pkg("2.13.0+cu130"), "local"),
    (Pkg("1.26"), Pkg("1.26.0"), "build"),  # equal versions (PEP 440), other text
    (Pkg("1.4.1.post1"), Pkg("1.4.2"), "patch"),
    (Pkg("2.0.0rc1"), Pkg("2.0.0"), "patch"),
    (Pkg("3.9.0", "21_linux64_openblas"), Pkg("3.9.0", "21_linux64_mkl"), "build"),
    (Impl("openblas", "0.3.27"), Impl("mkl", "2024.0"), "vendor"),
    (None, Pkg("1.0"), "added"),
    ("550.54.14", "535.104.05", "major"),  # driver branches
    ("1", "8", "value"),
], ids=lambda v: str(v))
def test_change_size(a: object, b: object, size: str) -> None:
    assert change_size(a, b) == size


def test_versions() -> None:
    assert plain_release("2.13.0+CPU") == ((2, 13, 0), "cpu")
    assert plain_release("2.0.0rc1") is None
    assert version_in("1.8.1", ">=1.7,<1.12")
    assert not version_in("1.12.0", ">=1.7,<1.12")
    assert version_in("1.11", ">=1.7,<1.12")
    assert version_in("1.22.0rc1", ">=1.21")  # through packaging
    assert not version_in("not-a-version", ">=1.0")
