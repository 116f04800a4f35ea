"""Cases C05, C08, C09, C10, C13, C14: two manifests that differ only in the cause.

Each test writes two realistic manifests (conda-forge env on a Xeon workstation, see
``conftest.build_manifest``) that differ only where the case says, and checks that the first
explanation names the cause, with its reason and fix, and accounts for the differing facts.
"""

from __future__ import annotations

from envlock.diff import diff
from envlock.diff.engine import PairDiff
from envlock.manifest import GitInfo

from .conftest import (
    AVX2,
    AVX512,
    CONDA_PACKAGES,
    build_manifest,
    editable,
    gpu_table,
    replace,
)


def _pair(write, a, b) -> PairDiff:
    result = diff([write("a.toml", a), write("b.toml", b)])
    assert isinstance(result, PairDiff)
    return result


def test_c05_cpu_build_where_cuda_build_was_meant(write) -> None:
    # conda's pytorch channel: the solver picked build py3.8_cpu_0 instead of a CUDA build.
    rows = [r for r in CONDA_PACKAGES if r[0] != "pytorch"]
    cpu = build_manifest(conda=[*rows, ("pytorch", "1.9.0", "py3.8_cpu_0")])
    cuda = build_manifest(conda=[*rows, ("pytorch", "1.9.0", "py3.8_cuda11.1_cudnn8.0.5_0")])
    result = _pair(write, cpu, cuda)
    top = result.explanations[0]
    assert top.id == "torch-variant"
    assert top.title == "torch is a CPU-only build in a.toml and a CUDA 11.1 (cuDNN 8.0.5) build in b.toml"
    assert "torch.cuda.is_available() is False" in top.why
    assert [(c.area, c.key, c.size) for c in top.changes] == [("package", "torch", "build")]
    assert [(c.area, c.key) for c in result.changes] == [("package", "torch")]


def test_c05_pip_local_version_label(write) -> None:
    from envlock.manifest import PipPackage

    from .conftest import SITE

    rows = [r for r in CONDA_PACKAGES if r[0] != "pytorch"]
    cpu = build_manifest(conda=rows, extra_pip=[PipPackage(
        name="torch", version="2.13.0+cpu", location=SITE, installer="pip", requested=True)])
    cuda = build_manifest(conda=rows, extra_pip=[PipPackage(
        name="torch", version="2.13.0+cu130", location=SITE, installer="pip", requested=True)])
    top = _pair(write, cpu, cuda).explanations[0]
    assert top.title == "torch is a CPU-only build in a.toml and a CUDA 13.0 build in b.toml"
    assert top.changes[0].size == "local"


def test_c08_avx512_vs_avx2_with_numpy_1_24(write) -> None:
    rows = replace(CONDA_PACKAGES, numpy=("1.24.4", "py311h64a7726_0"))
    skx = build_manifest(conda=rows, flags=AVX512,
                         cpu_model="Intel(R) Xeon(R) Platinum 8272CL CPU @ 2.60GHz")
    epyc = build_manifest(conda=rows, flags=AVX2, cpu_model="AMD EPYC 7763 64-Core Processor")
    result = _pair(write, skx, epyc)
    top = result.explanations[0]
    assert top.id == "simd"
    assert top.title == ("CPU SIMD differs: AVX-512 in a.toml, AVX2 (no AVX-512) in b.toml, "
                         "with numpy 1.24.4")
    assert 'NPY_DISABLE_CPU_FEATURES="AVX512_SKX"' in top.do
    assert {c.key for c in top.changes} == {"isa", "model"}
    assert len(result.explanations) == 1


def test_c08_old_numpy_is_not_blamed_on_simd_dispatch(write) -> None:
    rows = replace(CONDA_PACKAGES, numpy=("1.21.6", "py311h64a7726_0"))
    result = _pair(write, build_manifest(conda=rows, flags=AVX512),
                   build_manifest(conda=rows, flags=AVX2))
    assert result.explanations[0].id == "cpu-isa:cpu:isa"
    assert "OPENBLAS_CORETYPE" in result.explanations[0].do


def test_c09_thread_count(write) -> None:
    free = build_manifest()
    pinned = build_manifest(env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                 "MKL_NUM_THREADS": "1"})
    result = _pair(write, free, pinned)
    top = result.explanations[0]
    assert top.id == "threads"
    assert top.title == ("thread counts differ: MKL_NUM_THREADS unset → 1; "
                         "OMP_NUM_THREADS unset → 1; OPENBLAS_NUM_THREADS unset → 1")
    assert "reduction" in top.why
    assert len(result.explanations) == 1


def test_c09_core_count_matters_only_without_thread_settings(write) -> None:
    result = _pair(write, build_manifest(usable_cores=40), build_manifest(usable_cores=8))
    assert result.explanations[0].title == "thread counts differ: usable-cores 40 → 8"
    fixed = {"OMP_NUM_THREADS": "4"}
    result = _pair(write, build_manifest(usable_cores=40, env=fixed),
                   build_manifest(usable_cores=8, env=fixed))
    assert result.explanations[0].id == "thread-count"


def test_c09_every_thread_count_variable_is_a_thread_count(write) -> None:
    # MKL/OpenBLAS/BLIS/… thread counts set alone, without OMP_NUM_THREADS: same class and
    # component as OMP_NUM_THREADS, and explained by the thread rule.
    names = ["MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "GOTO_NUM_THREADS"]
    for name in names:
        result = _pair(write, build_manifest(env={name: "8"}), build_manifest(env={name: "1"}))
        [change] = result.changes
        assert (change.component, change.cls) == ("thread-count", "blas"), name
        assert result.explanations[0].title == f"thread counts differ: {name} 8 → 1"
    omp = _pair(write, build_manifest(env={"OMP_NUM_THREADS": "8"}),
                build_manifest(env={"OMP_NUM_THREADS": "1"})).changes[0]
    assert (omp.component, omp.cls) == ("thread-count", "blas")


def test_c10_blas_vendor_outranks_version_bumps(write) -> None:
    openblas = replace(CONDA_PACKAGES, pandas=("2.2.0", "py311h320fe9a_0"))
    mkl = replace(CONDA_PACKAGES, libblas=("3.9.0", "21_linux64_mkl"),
                  libcblas=("3.9.0", "21_linux64_mkl"), liblapack=("3.9.0", "21_linux64_mkl"),
                  libopenblas=None)
    mkl += [("mkl", "2024.0.0", "ha957f24_49657"), ("llvm-openmp", "17.0.6", "h4dfa4b3_0")]
    result = _pair(write, build_manifest(conda=openblas), build_manifest(conda=mkl))
    top = result.explanations[0]
    assert top.title == "BLAS/LAPACK vendor differs: OpenBLAS in a.toml, MKL in b.toml"
    assert {c.key for c in top.changes} == {"libblas", "libcblas", "liblapack", "libopenblas",
                                            "mkl"}
    # the fix in the names of the manifest's channel (conda-forge's libblas mutex)
    assert ("conda (conda-forge): `conda install -c conda-forge 'libblas=*=*openblas'` or "
            "`conda install -c conda-forge 'libblas=*=*mkl'`") in top.do
    assert [e.title for e in result.explanations[1:]] == [
        "OpenMP runtimes: llvm-openmp 17.0.6 (h4dfa4b3_0, conda-forge) added",
        "pandas 2.2.0 → 2.2.1 (patch)"]


def test_c10_blas_table_from_the_stack_probe(write) -> None:
    def blas(impl: str, version: str) -> dict:
        return {"blas": {"status": "ok", "source": "numpy/__config__.py", "libraries": [
            {"user": "numpy", "implementation": impl, "version": version,
             "origin": "build config", "package": "numpy 1.26.4"}]}}

    result = _pair(write, build_manifest(stack=blas("openblas", "0.3.26")),
                   build_manifest(stack=blas("mkl", "2024.0")))
    assert result.explanations[0].id == "blas-vendor"
    assert result.explanations[0].changes[0].size == "vendor"


def test_c13_editable_checkout_uncommitted_diff(write) -> None:
    commit = "3f1c2a9e7b6d5c4b3a2918f7e6d5c4b3a2918f7e"
    a = build_manifest(extra_pip=[editable("mylib", "/home/ana/src/mylib", commit=commit,
                                           dirty=True, untracked=0, diff_sha256="a" * 64)])
    b = build_manifest(extra_pip=[editable("mylib", "/home/ana/src/mylib", commit=commit,
                                           dirty=True, untracked=0, diff_sha256="b" * 64)])
    result = _pair(write, a, b)
    top = result.explanations[0]
    assert top.id == "code"
    assert top.title == ("the code differs: mylib (editable checkout): uncommitted "
                         "sha256:aaaaaaaaaaaa… → sha256:bbbbbbbbbbbb…")
    assert [(c.area, c.key) for c in result.changes] == [("code", "mylib.uncommitted")]


def test_c14_tf32_on_ampere_with_torch_1_8(write) -> None:
    rows = replace(CONDA_PACKAGES, pytorch=("1.8.1", "py3.8_cuda11.1_cudnn8.0.5_0"))
    ampere = build_manifest(conda=rows, stack=gpu_table("NVIDIA GeForce RTX 3090", "8.6"))
    pascal = build_manifest(conda=rows, stack=gpu_table("NVIDIA GeForce GTX 1080 Ti", "6.1"))
    result = _pair(write, ampere, pascal)
    top = result.explanations[0]
    assert top.id == "tf32"
    assert top.title == ("TF32 matmul is on by default in a.toml (GPU compute capability 8.6, "
                         "torch 1.8.1) and not in b.toml")
    assert "torch.backends.cuda.matmul.allow_tf32 = False" in top.do
    assert 'set_float32_matmul_precision("highest")' in top.do
    assert {c.key for c in top.changes} == {"compute-capability", "models"}


def test_c14_from_torch_1_12_only_cudnn_convolutions_default_to_tf32(write) -> None:
    """C14: "from torch 1.12 the matmul default is off (cuDNN convolutions still default on)":
    the explanation names cuDNN's TF32, not matmul's, and takes the GPU-architecture facts."""
    rows = replace(CONDA_PACKAGES, pytorch=("1.12.1", "cuda112py310h51fe464_200"))
    result = _pair(write, build_manifest(conda=rows, stack=gpu_table("RTX 3090", "8.6")),
                   build_manifest(conda=rows, stack=gpu_table("GTX 1080 Ti", "6.1")))
    top = result.explanations[0]
    assert top.id == "tf32-cudnn"
    assert top.title.startswith("TF32 cuDNN convolutions are on by default in a.toml (GPU compute "
                                "capability 8.6, torch 1.12.1) and not in b.toml")
    assert "torch.backends.cudnn.allow_tf32 = False" in top.do
    assert "compute-capability" in {c.key for c in top.changes}
    assert not any(e.id == "tf32" for e in result.explanations)  # the matmul default is off


def _repo(untracked: int, **kw) -> GitInfo:
    state = {"commit": "9" * 40, "dirty": False, **kw}
    return GitInfo(source="git", path="/home/ana/proj", branch="main",
                   describe="v0.3-4-g9999999", untracked=untracked, **state)


def test_c09_new_manifest_in_the_repo_is_not_the_code(write) -> None:
    # `envlock snapshot -o a.toml; OMP_NUM_THREADS=1 envlock snapshot -o b.toml`: a.toml is
    # untracked when b.toml is taken, so b records one more untracked file.
    a = build_manifest(git=_repo(3))
    b = build_manifest(git=_repo(4), env={"OMP_NUM_THREADS": "1"})
    result = _pair(write, a, b)
    assert [e.id for e in result.explanations] == ["threads", "untracked"]
    assert result.explanations[0].title == "thread counts differ: OMP_NUM_THREADS unset → 1"
    low = result.explanations[1]
    assert low.cls == "plumbing"
    assert [(c.key, c.component, c.cls) for c in low.changes] == [
        ("repository.untracked", "untracked", "plumbing")]
    assert low.title == ("untracked files in the repository: 3 → 4 (same commit, same "
                         "uncommitted changes)")
    from envlock.render.diffreport import to_json

    [row] = to_json(result)["code"]
    assert row["differs"] is False
    assert row["text"] == ("same commit 999999999999; same uncommitted changes (none); "
                           "untracked files 3 → 4 (new manifests count too); branch main")


def test_c05_new_manifest_ranks_below_cpu_vs_cuda_torch(write) -> None:
    rows = [r for r in CONDA_PACKAGES if r[0] != "pytorch"]
    diff_hash = "c" * 64
    cpu = build_manifest(conda=[*rows, ("pytorch", "2.1.2", "cpu_py311h6d93b4c_0")],
                         git=_repo(3, dirty=True, diff_sha256=diff_hash))
    cuda = build_manifest(conda=[*rows, ("pytorch", "2.1.2", "cuda120_py311h25b6552_301")],
                          git=_repo(4, dirty=True, diff_sha256=diff_hash))
    result = _pair(write, cpu, cuda)
    assert [e.id for e in result.explanations] == ["torch-variant", "untracked"]


def test_c13_commit_change_ranks_by_its_class_with_untracked_change(write) -> None:
    # the documented order: BLAS vendor and threads > numerical packages > the code >
    # numerics variables > plumbing; the untracked count joins the commit's explanation
    a = build_manifest(git=_repo(3), env={"MKL_CBWR": "AUTO"})
    b = build_manifest(git=_repo(4, commit="8" * 40), env={"OMP_NUM_THREADS": "1",
                                                            "MKL_CBWR": "COMPATIBLE"})
    result = _pair(write, a, b)
    assert [e.id for e in result.explanations] == [
        "threads", "code", "mkl-env:env:MKL_CBWR"]
    assert result.explanations[1].title == ("the code differs: the repository: commit "
                                            "999999999999 → 888888888888; untracked 3 → 4")


def test_untracked_with_unhashed_dirty_trees_is_still_the_code(write) -> None:
    # both dirty, no diff hash recorded: the tracked code is not known to be the same
    a = build_manifest(git=_repo(3, dirty=True))
    b = build_manifest(git=_repo(4, dirty=True))
    result = _pair(write, a, b)
    assert result.explanations[0].id == "code"
    assert result.explanations[0].title == "the code differs: the repository: untracked 3 → 4"
