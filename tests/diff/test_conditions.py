"""An explanation is only a possible cause: each kind's condition (``needs``) is checked
against both sides' facts (issue 25).

CUBLAS_WORKSPACE_CONFIG or TF32 with no GPU on either side, MKL_CBWR with no MKL loaded, "a
CUDA build runs kernels on the GPU" when neither side has a GPU: a note of the context, never
an explanation; the same differences with the condition met on one side stay explanations.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from envlock.diff import diff
from envlock.diff.conditions import NEEDS
from envlock.diff.engine import PairDiff
from envlock.diff.impact import _shipped, load_kb

from .conftest import CONDA_PACKAGES, build_manifest, gpu_table, replace

#: a recorded [gpu] table of a host without a GPU (what the probe writes there)
NO_GPU: dict[str, Any] = {"gpu": {"status": "absent", "source": "nvidia-smi",
                                 "error": "no NVIDIA driver: nvidia-smi not found"}}

#: conda-forge packages without torch and MKL: numpy on OpenBLAS
NO_MKL = [r for r in CONDA_PACKAGES if r[0] not in ("pytorch", "cuda-version", "cudnn",
                                                    "libcublas", "nccl")]


def _pair(write, a, b) -> PairDiff:
    res = diff([str(write("a.toml", a)), str(write("b.toml", b))])
    assert isinstance(res, PairDiff)
    return res


def _ids(res: PairDiff) -> list[str]:
    return [e.id for e in res.explanations]


def _keys(res: PairDiff) -> set[str]:
    return {c.key for e in res.explanations for c in e.changes}


@pytest.mark.parametrize("var", ["CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE"])
def test_a_cublas_variable_without_a_gpu_is_a_note(write, var: str) -> None:
    a = build_manifest(host="a", stack=NO_GPU)
    b = build_manifest(host="b", stack=NO_GPU, env={var: ":4096:8" if "CUBLAS" in var else "0"})
    res = _pair(write, a, b)
    assert var not in _keys(res), _ids(res)
    note = next(n for n in res.context if n.startswith("not a cause here"))
    assert var in note and "only with a GPU on either side" in note
    assert "neither side has a GPU" in note
    # the fact is still a difference
    assert any(c.key == var for c in res.changes)
    # with a GPU on one side it is an explanation
    b = build_manifest(host="b", stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0"),
                       env={var: ":4096:8" if "CUBLAS" in var else "0"})
    res = _pair(write, a, b)
    assert var in _keys(res)
    assert not [n for n in res.context if n.startswith("not a cause here")]


def test_mkl_cbwr_without_mkl_is_a_note_and_with_mkl_a_cause(write) -> None:
    a = build_manifest(host="a", conda=NO_MKL, env={"MKL_CBWR": "AUTO"})
    b = build_manifest(host="b", conda=NO_MKL, env={"MKL_CBWR": "COMPATIBLE"})
    res = _pair(write, a, b)
    assert "MKL_CBWR" not in _keys(res)
    note = next(n for n in res.context if "MKL_CBWR" in n)
    assert "only with MKL loaded on either side" in note and "neither side has MKL" in note
    # MKL on one side (conda-forge's libblas mutex on mkl): the variable can change numbers
    mkl = replace(NO_MKL, libblas=("3.9.0", "21_linux64_mkl")) + [("mkl", "2023.2.0",
                                                                    "h84fe81f_50496")]
    res = _pair(write, a, build_manifest(host="b", conda=mkl, env={"MKL_CBWR": "COMPATIBLE"}))
    assert "MKL_CBWR" in _keys(res)
    # torch on one side: its x86-64 builds link MKL statically, so MKL_CBWR may matter
    res = _pair(write, build_manifest(host="a", env={"MKL_CBWR": "AUTO"}),
                build_manifest(host="b", env={"MKL_CBWR": "COMPATIBLE"}))
    assert "MKL_CBWR" in _keys(res)


def test_a_cuda_build_without_a_gpu_is_a_note_and_its_version_stays_explained(write) -> None:
    cpu = replace(CONDA_PACKAGES, pytorch=("2.1.2", "cpu_generic_py311h1a2b3c4_0"))
    cuda = replace(CONDA_PACKAGES, pytorch=("2.3.1", "cuda120_py311h25b6552_301"))
    a = build_manifest(host="a", conda=cpu, stack=NO_GPU)
    b = build_manifest(host="b", conda=cuda, stack=NO_GPU)
    res = _pair(write, a, b)
    assert "torch-variant" not in _ids(res)
    note = next(n for n in res.context if n.startswith("not a cause here: torch is a"))
    assert "neither side has a GPU" in note
    assert not any("runs kernels on the GPU" in e.why for e in res.explanations)
    torch = next(e for e in res.explanations if any(c.key == "torch" for c in e.changes))
    assert "2.1.2" in torch.title and "2.3.1" in torch.title
    # a GPU on the CUDA side: the build is the first explanation
    b = build_manifest(host="b", conda=cuda, stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0"))
    assert _ids(_pair(write, a, b))[0] == "torch-variant"


def test_an_input_that_records_no_gpu_table_may_have_one(write, tmp_path: Path) -> None:
    """No [gpu] recorded (a requirements file, a manifest without the table) is no evidence of
    no GPU: the explanation stays."""
    a = build_manifest(host="a")
    b = build_manifest(host="b", env={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    res = _pair(write, a, b)
    assert "CUBLAS_WORKSPACE_CONFIG" in _keys(res)


def _kinds() -> dict[str, dict[str, Any]]:
    data = _shipped()
    out = {rid: body for rid, body in data["rules"].items()}
    out.update({c["id"]: c for c in data["component"]})
    return out


def test_every_kind_has_its_condition_in_the_docs() -> None:
    """docs/diff.md's table "When a cause can change numbers" has one row per rule and
    component of the impact model, with the condition the data names (``needs``)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "diff.md").read_text(encoding="utf-8")
    section = doc[doc.index("### When a cause can change numbers"):]
    section = section[: section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([a-z0-9-]+)` \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    kinds = _kinds()
    assert set(kinds) <= set(rows), sorted(set(kinds) - set(rows))
    for kind, body in kinds.items():
        needs = body.get("needs")
        names = [needs] if isinstance(needs, str) else list(needs or ())
        if names:
            for n in names:
                assert NEEDS[n].text in rows[kind], (kind, rows[kind])
        else:
            assert rows[kind].startswith(("always", "never")), (kind, rows[kind])


def test_a_kb_file_with_an_unknown_condition_is_refused(tmp_path: Path) -> None:
    from envlock.errors import ManifestError

    kb = tmp_path / "lab.toml"
    kb.write_text('[[component]]\nid = "x"\nclass = "other"\nmatch = ["env:X"]\n'
                  'needs = "quantum"\n')
    with pytest.raises(ManifestError, match="unknown condition 'component\\[0\\].needs'"):
        load_kb([kb])
    kb.write_text('[[component]]\nid = "x"\nclass = "other"\nmatch = ["env:X"]\nneeds = "gpu"\n')
    assert load_kb([kb]).needs("x") == ("gpu",)
