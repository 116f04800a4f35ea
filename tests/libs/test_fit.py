"""``envlock libs`` text in a log: no line wider than 80 columns (issue 25: 101 of 112 lines of
torch's tree were, up to 568), folded between a path's directories under the tree guides, and
the same answer as the wide text, folded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.render.libsreport import fit


def test_fold_a_tree_line_between_directories() -> None:
    line = ("├── libcudart.so.13 => /root/.cache/envlock-test-venvs/cpython311-3f41e2cc0b/cuda/lib/"
            "python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13  [RPATH]  nvidia-cuda-runtime "
            "13.0.96 (pip)")
    text = f"import torch\n{line}\n│   └── librt.so.1 => /lib/librt.so.1  [ld.so.cache]\n"
    folded = fit(text, 80).split("\n")
    assert max(len(x) for x in folded) <= 80
    assert folded[1].endswith("/") and folded[2].startswith("│   │   ")  # a child follows: its bar
    assert folded[-2] == "│   └── librt.so.1 => /lib/librt.so.1  [ld.so.cache]"
    assert fit(text, 4000) == text


def test_a_word_wider_than_the_width_is_cut_not_lost() -> None:
    word = "x" * 200
    folded = fit(word, 80)
    assert max(len(x) for x in folded.split("\n")) <= 80
    assert folded.replace("\n", "").replace(" ", "") == word


@pytest.mark.realenv
def test_torch_tree_in_a_log_fits_80_columns(tmp_path: Path) -> None:
    """The real CUDA torch venv (with ``--realenv``; the cached one, never rebuilt here), stdout
    a file."""
    from tests._realenv import venv_root

    cuda = sorted(venv_root().glob("*/cuda/bin/python")) if venv_root().is_dir() else []
    if not cuda:
        pytest.skip("no cached CUDA torch venv under ~/.cache/envlock-test-venvs")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    log = tmp_path / "job.log"
    with log.open("w") as f:
        r = subprocess.run([sys.executable, "-m", "envlock", "libs", "--python", str(cuda[0]), "torch"],
                           stdout=f, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    lines = log.read_text().split("\n")
    assert max(len(x) for x in lines) <= 80
    wide = subprocess.run([sys.executable, "-m", "envlock", "libs", "--python", str(cuda[0]), "torch"],
                          capture_output=True, text=True, env={**env, "COLUMNS": "4000"}, timeout=300)
    assert any(len(x) > 80 for x in wide.stdout.split("\n"))  # the same answer, unfolded
    assert fit(wide.stdout, 80) == log.read_text()
