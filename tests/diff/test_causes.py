"""The cause graph: each explanation is a cause with the facts it accounts for (the model's
``[[edge]]`` entries), ranked by the documented impact classes, then by the size of the change."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import diff
from envlock.diff.engine import PairDiff
from envlock.diff.impact import load_kb
from envlock.manifest import PipPackage

from .conftest import CONDA_PACKAGES, PREFIX, SITE, build_manifest, editable, gpu_table, replace


def _pair(write, a, b, *args: str) -> PairDiff:
    result = diff([write("a.toml", a), write("b.toml", b)], **_opts(args))
    assert isinstance(result, PairDiff)
    return result


def _opts(args: tuple[str, ...]) -> dict[str, Any]:
    return {"only": [a for a in args if not a.startswith("!")],
            "ignore": [a[1:] for a in args if a.startswith("!")]}


def _owner(result: PairDiff) -> dict[str, str]:
    return {c.key: e.id for e in result.explanations for c in e.changes}


def test_exact_entry_beats_a_glob() -> None:
    kb = load_kb()
    # HuggingFace accelerate is named exactly with the ML frameworks (F11); `scipy-openblas*` is
    # still BLAS
    assert kb.component("package", "accelerate").id == "frameworks"
    assert kb.component("package", "scipy-openblas32").id == "blas-package"


def test_cuda_variants_name_cudnn_and_say_why_for_two_gpu_builds(write) -> None:
    old = replace(CONDA_PACKAGES, pytorch=("2.1.2", "cuda118_py311h25b6552_301"),
                  cudnn=("8.4.1.50", "hed8a83a_1"), cuda_version=("11.8", "h70ddcb2_2"))
    result = _pair(write, build_manifest(conda=old), build_manifest())
    top = result.explanations[0]
    assert top.id == "torch-variant"
    assert top.title == ("torch is a CUDA 11.8 build in a.toml and a CUDA 12.0 build in b.toml "
                         "(cuDNN 8.4.1.50 → 8.9.7.29)")
    assert "CPU-only" not in top.why and "bundle different cuBLAS, cuDNN" in top.why
    owner = _owner(result)
    assert [owner[k] for k in ("torch", "cudnn", "cuda-version")] == ["torch-variant"] * 3
    assert [c.key for c in top.causes] == ["torch"]
    # conda-forge's names: the cuda-version pin and a cuda build string
    assert "`conda install -c conda-forge 'pytorch * cuda*' cuda-version=11.8`" in top.do
    assert "pytorch-cuda" not in top.do


def test_cuda_13_never_gets_pytorch_cuda(write) -> None:
    a = replace(CONDA_PACKAGES, pytorch=("2.1.2", "py3.11_cpu_0"))
    b = replace(CONDA_PACKAGES, pytorch=("2.1.2", "py3.11_cuda13.0_cudnn9_0"))
    rows_a = [(n, v, bld) for n, v, bld in a]
    result = _pair(write, build_manifest(conda=rows_a), build_manifest(conda=b))
    top = result.explanations[0]
    assert top.title.startswith("torch is a CPU-only build in a.toml and a CUDA 13.0 (cuDNN 9) build")
    assert "cuda-version=13.0" in top.do and "pytorch-cuda" not in top.do
    assert "pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/<variant>" \
        in top.do
    assert "cpu for the CPU-only build of a.toml, cu130 for the CUDA 13.0 (cuDNN 9) build of b.toml" \
        in top.do


def test_ranking_follows_the_classes_then_the_size(write) -> None:
    # numpy 1 → 2 (major) before "scipy added"; the code after numerical packages;
    # a CPU-vs-CUDA torch above an editable package present on one side only
    a = build_manifest(conda=replace(CONDA_PACKAGES, numpy=("1.26.4", "py311h64a7726_0"),
                                     pytorch=("2.1.2", "cpu_mkl_py311h1234_100"), scipy=None))
    b = build_manifest(conda=replace(CONDA_PACKAGES, numpy=("2.0.1", "py311h64a7726_0")),
                       extra_pip=[editable("libero", "/home/ana/libero", commit="a" * 40,
                                           dirty=False, untracked=0)])
    result = _pair(write, a, b)
    ids = [e.id for e in result.explanations]
    assert ids[0] == "torch-variant"
    assert ids.index("numpy:package:numpy") < ids.index("scipy:package:scipy")
    assert ids.index("scipy:package:scipy") < ids.index("code")
    scores = [e.score for e in result.explanations]
    assert scores == sorted(scores, reverse=True)


def test_only_and_ignore_filter_explanations_and_facts_alike(write) -> None:
    a = build_manifest(conda=replace(CONDA_PACKAGES, pytorch=("2.1.2", "py3.11_cpu_0")))
    b = build_manifest()
    paths = [str(write("a.toml", a)), str(write("b.toml", b))]
    res = CliRunner().invoke(cli, ["diff", *paths, "--only", "env"])
    assert res.exit_code == 0, res.output
    assert "torch" not in res.output and "Differences (0)" in res.output
    doc = json.loads(CliRunner().invoke(cli, ["diff", *paths, "--only", "env", "--format",
                                              "json"]).output)
    assert doc["explanations"] == [] and doc["differ"] is False
    result = _pair(write, a, b, "!package:torch")
    assert "torch-variant" not in [e.id for e in result.explanations]
    assert all(c.key != "torch" for e in result.explanations for c in e.changes)


def _libs(ld: str | None) -> dict[str, Any]:
    """A [libraries] table of torch; with LD_LIBRARY_PATH=ld, libgomp and libpython move."""
    own = {"soname": "libgomp.so.1", "path": f"{SITE}/torch/lib/libgomp.so.1",
           "realpath": f"{SITE}/torch/lib/libgomp.so.1", "rule": "runpath", "owner": "torch",
           "owner-kind": "pip", "version": "2.1.2"}
    stdcxx = {"soname": "libstdc++.so.6", "path": f"{PREFIX}/lib/libstdc++.so.6",
              "realpath": f"{PREFIX}/lib/libstdc++.so.6.0.32", "rule": "runpath",
              "owner": "libstdcxx-ng", "owner-kind": "conda"}
    table: dict[str, Any] = {"status": "ok", "source": "envlock loader model (torch)",
                             "module": "torch", "resolved": [own, stdcxx]}
    if ld:
        table["ld-library-path"] = ld
        table["resolved"] = [{"soname": "libgomp.so.1", "path": f"{ld}/libgomp.so.1",
                              "realpath": f"{ld}/libgomp.so.1.0.0", "rule": "ld_library_path",
                              "owner": "libgomp1:amd64", "owner-kind": "dpkg"}, stdcxx]
        table["findings"] = [
            f"warning [shadowed] libpython3.11.so.1.0 is shadowed: {ld}/libpython3.11.so.1.0 "
            f"is loaded instead of {PREFIX}/lib/libpython3.11.so.1.0"]
    return {"libraries": table}


def test_ld_library_path_is_one_explanation_with_what_it_moved(write) -> None:
    ld = "/usr/lib/x86_64-linux-gnu"
    result = _pair(write, build_manifest(stack=_libs(None)),
                   build_manifest(env={"LD_LIBRARY_PATH": ld}, stack=_libs(ld)))
    (ex,) = [e for e in result.explanations if e.id == "loader-path"]
    assert result.explanations == (ex,)
    assert ex.title == (f"LD_LIBRARY_PATH differs (unset in a.toml, {ld} in b.toml): the loader "
                        "picks other copies of libgomp.so.1, libpython3.11.so.1.0")
    assert [c.key for c in ex.causes] == ["LD_LIBRARY_PATH"]
    assert {c.key for c in ex.changes} == {"LD_LIBRARY_PATH", "libgomp.so.1",
                                           "libpython3.11.so.1.0"}
    assert ex.score > load_kb().score("plumbing", "variant")  # above every plumbing fact
    # a choice of the two sides' values, each a bash line (run in tests/fixes/test_env_fixes_run.py)
    assert (f"as in a.toml: `unset LD_LIBRARY_PATH`; or as in b.toml: "
            f"`export LD_LIBRARY_PATH={ld}`") in ex.do and "Python 3.11" not in ex.do
    # the same variable changing nothing the loader model saw is plumbing, not this rule
    quiet = _pair(write, build_manifest(), build_manifest(env={"LD_LIBRARY_PATH": "/opt/x"}))
    assert [e.id for e in quiet.explanations] == ["plumbing:env:LD_LIBRARY_PATH"]


def test_driver_accounts_for_driver_cuda_and_libcuda(write) -> None:
    def stack(driver: str, cuda: str, libcuda: str) -> dict[str, Any]:
        s = gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver=driver)
        s["gpu"]["cuda-driver-version"] = cuda
        s["libraries"] = {"status": "ok", "resolved": [
            {"soname": "libcuda.so.1", "path": libcuda, "realpath": libcuda,
             "rule": "ld.so.cache"}]}
        return s

    result = _pair(write, build_manifest(stack=stack("550.54.14", "12.4", "/usr/lib64/libcuda.so.550")),
                   build_manifest(stack=stack("535.104.05", "12.2", "/usr/lib64/libcuda.so.535")))
    (ex,) = result.explanations
    assert ex.id == "driver" and ex.cls == "gpu-runtime"
    assert [c.key for c in ex.causes] == ["driver"]
    assert {c.key for c in ex.changes} == {"driver", "driver-cuda", "libcuda.so.1"}


def test_scheduler_is_one_explanation_in_one_area(write) -> None:
    a = build_manifest(env={"SLURM_NNODES": "2", "SLURM_NTASKS": "8",
                            "SLURM_CPUS_PER_TASK": "4", "SLURM_GPUS_PER_TASK": "1",
                            "SLURM_PARTITION": "gpu", "SLURM_JOB_ID": "1"})
    b = build_manifest(env={"SLURM_NNODES": "4", "SLURM_NTASKS": "16",
                            "SLURM_CPUS_PER_TASK": "4", "SLURM_GPUS_PER_TASK": "2",
                            "SLURM_PARTITION": "gpu-long", "SLURM_JOB_ID": "2"})
    result = _pair(write, a, b)
    assert {c.area for c in result.changes} == {"slurm"}
    (ex,) = result.explanations
    assert ex.id == "scheduler"
    assert ex.title == ("scheduler allocation differs: nodes 2 → 4; tasks 8 → 16; "
                        "GPUs per task 1 → 2; 1 other scheduler setting")
    assert {c.key for c in ex.changes} == {"SLURM_NNODES", "SLURM_NTASKS",
                                           "SLURM_GPUS_PER_TASK", "SLURM_PARTITION"}


def test_pip_packages_of_one_cuda_build(write) -> None:
    """pip: a +cpu wheel against the PyPI CUDA wheel with its nvidia-* wheels."""
    def pip(version: str, nvidia: bool) -> list[PipPackage]:
        rows = [PipPackage(name="torch", version=version, location=SITE)]
        if nvidia:
            rows += [PipPackage(name=n, version=v, location=SITE) for n, v in (
                ("nvidia-cuda-runtime", "13.0.96"), ("nvidia-cublas", "13.1.1.3"),
                ("triton", "3.8.0"))]
        return rows

    rows = [r for r in CONDA_PACKAGES if r[0] != "pytorch"]
    result = _pair(write, build_manifest(conda=rows, extra_pip=pip("2.14.1+cpu", False)),
                   build_manifest(conda=rows, extra_pip=pip("2.14.1", True)))
    (ex,) = result.explanations
    assert ex.title == "torch is a CPU-only build in a.toml and a CUDA 13.0 build in b.toml"
    assert {c.key for c in ex.changes} == {"torch", "nvidia-cuda-runtime", "nvidia-cublas",
                                           "triton"}
    assert "`pip install torch==2.14.1 --index-url https://download.pytorch.org/whl/<variant>`" \
        in ex.do


def test_kb_edge_makes_a_consequence(write, tmp_path) -> None:
    """A lab's own causal link (--kb): its driver module also loads another MPI build."""
    kb = tmp_path / "lab.toml"
    kb.write_text('schema = 1\n[[edge]]\ncause = "driver"\naccounts = ["package:openmpi"]\n')
    a = build_manifest(conda=[*CONDA_PACKAGES, ("openmpi", "4.1.6", "h1")],
                       stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver="550.54.14"))
    b = build_manifest(conda=[*CONDA_PACKAGES, ("openmpi", "5.0.3", "h1")],
                       stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0", driver="535.104.05"))
    paths = [write("a.toml", a), write("b.toml", b)]
    plain = diff(paths)
    assert sorted(e.id for e in plain.explanations) == ["driver", "plumbing:package:openmpi"]
    linked = diff(paths, kb_files=[kb])
    (ex,) = linked.explanations
    assert ex.id == "driver" and {c.key for c in ex.changes} == {"driver", "openmpi"}
    assert [c.key for c in ex.causes] == ["driver"]
