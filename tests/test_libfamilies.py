"""envlock.libfamilies: the one table of library families, and the name lists derived from it."""

from __future__ import annotations

import pytest

from envlock import libfamilies as lf


def test_derived_tables_hold_what_the_probes_need() -> None:
    assert lf.pip_components()["cuda-runtime"] == "cudart"
    assert lf.pip_components()["cudnn"] == "cudnn"
    assert lf.conda_components()["libcublas"] == "cublas"
    assert lf.conda_components()["libcusparselt"] == lf.conda_components()["cusparselt"] == "cusparselt"
    assert lf.version_json_components()["cuda_nvcc"] == "nvcc"
    assert lf.versioned_file_stems()["libnvJitLink"] == "nvjitlink"


@pytest.mark.parametrize(
    ("name", "recorded"),
    [
        ("libcudnn.so.9", True), ("libcudnn_graph.so.9", True), ("libcublasLt.so.13", True),
        ("libgomp-a34b3233.so.1", True), ("libgomp.so.1", True), ("libstdc++.so.6", True),
        ("libc.so.6", True), ("libm.so.6", True), ("libmkl_rt.so.2", True),
        ("libopenblas.so.0", True), ("libcuda.so.1", True),
        ("libz.so.1", False), ("libcrypt.so.1", False), ("libscipy_openblas64_-fdde5778.so", False),
        ("libnpp_c.so.12", False),
    ],
)
def test_key_libraries(name: str, recorded: bool) -> None:
    assert bool(lf.key_library_re().match(name)) is recorded


@pytest.mark.parametrize(
    ("name", "family", "kind"),
    [("libiomp5.so", "libiomp5", "openmp"), ("libomp.so.5", "libomp", "openmp"),
     ("/x/torch/lib/libgomp-a34b3233.so.1", "libgomp", "openmp"),
     ("libcudnn_ops.so.9.1.0", "cudnn", "cuda"), ("libnvidia-ml.so.1", "nvml", "driver"),
     ("libscipy_openblas64_-fdde5778.so", "scipy-openblas", "blas")],
)
def test_classify(name: str, family: str, kind: str) -> None:
    f = lf.classify_file(name)
    assert f is not None and (f.id, f.kind) == (family, kind)


def test_openmp_re() -> None:
    m = lf.openmp_file_re().match("libgomp-a34b3233.so.1.0.0")
    assert m and m.group("name") == "libgomp"
    assert lf.openmp_file_re().match("libgompx.so") is None


def test_ids_unique() -> None:
    ids = [f.id for f in lf.FAMILIES]
    assert len(ids) == len(set(ids))
