"""Fix texts name only variants that exist: PyTorch's pip indexes and conda-forge's cuda-version
values come from one table with its sources (envlock/variants.py; issue 25)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from envlock.diff.facts import Pkg
from envlock.diff.fixes import torch_fix
from envlock.variants import (
    CONDA_FORGE_CUDA_VERSIONS,
    PYTORCH_INDEXES,
    conda_forge_cuda_version,
    cuda_indexes,
    index_name,
    pytorch_index_url,
)

PKG = Path(__file__).resolve().parents[1] / "envlock"

#: CUDA versions a manifest may hold, real and not: 8.0 and 11.2 builds existed (torch 0.4,
#: conda's pytorch 1.8 ``cuda112``), PyTorch never had an index for them
CUDAS = ["8.0", "9.2", "10.0", "10.2", "11.1", "11.2", "11.8", "12.1", "12.7", "13.0"]


def _named(text: str) -> tuple[list[str], list[str]]:
    urls = re.findall(r"https://download\.pytorch\.org/whl/([A-Za-z0-9.<>_-]+)", text)
    cudas = re.findall(r"cuda-version=([0-9.]+)", text)
    return urls, cudas


def test_the_tables() -> None:
    assert pytorch_index_url("cu121") == "https://download.pytorch.org/whl/cu121"
    for name in ("cu80", "cu92", "cu112", "cu127"):
        assert pytorch_index_url(name) is None
    assert index_name("11.2") == "cu112" and index_name("13.0.1") == "cu130"
    assert cuda_indexes(12) == ("cu121", "cu124", "cu126", "cu128", "cu129")
    assert conda_forge_cuda_version("12.1.105") == "12.1"
    assert conda_forge_cuda_version("8.0") is None and conda_forge_cuda_version("12.7") is None
    assert len(set(PYTORCH_INDEXES)) == len(PYTORCH_INDEXES)


@pytest.mark.parametrize(("ca", "cb"), list(itertools.permutations(CUDAS + ["cpu"], 2)))
def test_every_torch_fix_names_existing_indexes_and_cuda_versions(ca: str, cb: str) -> None:
    variants = tuple("CPU-only" if c == "cpu" else f"CUDA {c}" for c in (ca, cb))
    forge = Pkg("2.1.2", "cuda120_py311h25b6552_301", "conda-forge", "conda", "pytorch")
    for pkgs in ((None, None), (forge, forge)):
        text = torch_fix(variants, ("a.toml", "b.toml"), pkgs)  # type: ignore[arg-type]
        urls, cudas = _named(text)
        assert all(u == "<variant>" or u in PYTORCH_INDEXES for u in urls), text
        assert all(c in CONDA_FORGE_CUDA_VERSIONS for c in cudas), text
        for c in (ca, cb):
            if c != "cpu" and not pytorch_index_url(index_name(c)):
                # a variant without an index: said so, with the choices
                assert f"PyTorch has no {index_name(c)} index" in text and "choose" in text, text
        for name in re.findall(r"\b(cu\d+|cpu) for the", text):
            assert name in PYTORCH_INDEXES, text


def test_no_fix_builds_an_index_url_or_cuda_version_by_hand() -> None:
    """Every ``download.pytorch.org/whl/cu…`` and ``cuda-version=`` of a fix text goes through
    envlock/variants.py: no f-string glues a CUDA version into one."""
    bad = []
    for path in PKG.rglob("*.py"):
        if path.name == "variants.py":
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"whl/cu\{|cuda-version=\{(?!forge)", text):
            bad.append(f"{path.relative_to(PKG)}:{text[: m.start()].count(chr(10)) + 1}")
    assert not bad, bad
