"""The real torch venvs: a CPU build with numpy 1.24/scipy 1.10 against a CUDA 13.0 build with
numpy 2.4/scipy 1.17 (``pytest --realenv``).

Both venvs are observed with :func:`envlock.snapshot`.  The ``[blas]`` table comes from the
stack probes (branch ``stack``); until the snapshot writes it, this test adds a ``[blas]``
table in that layout read from the venvs' real bundled OpenBLAS files and build configs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import envlock
from envlock.diff import diff
from envlock.diff.engine import PairDiff


def _bundled_blas(site: Path) -> dict[str, Any]:
    """``[blas]`` of numpy/scipy wheels: bundled ``*openblas*`` file and ``__config__.py``."""
    libs = []
    for user in ("numpy", "scipy"):
        files = sorted((site / f"{user}.libs").glob("lib*openblas*.so*"))
        if not files:
            continue
        version = None
        # libopenblas64_p-r0-15028c96.3.21.so: OpenBLAS 0.3.21 (the wheels drop the "0.")
        m = re.search(r"-r0-[0-9a-f]+\.(\d+\.\d+)\.so$", files[0].name)
        if m:
            version = f"0.{m.group(1)}"
        else:
            config = (site / user / "__config__.py").read_text(encoding="utf-8")
            m = re.search(r'"blas":\s*\{.*?"version":\s*"([^"]+)"', config, re.DOTALL)
            version = m.group(1) if m else None
        assert version, f"no OpenBLAS version for {user} in {site}"
        libs.append({"user": user, "implementation": "openblas", "version": version,
                     "path": str(files[0]), "origin": "bundled file"})
    return {"status": "ok", "source": "site-packages", "libraries": libs}


def _manifest(venv: Path, path: Path) -> Path:
    manifest = envlock.snapshot(python=str(venv / "bin" / "python"))
    data = manifest.to_dict()
    if "blas" not in data:
        site = next((venv / "lib").glob("python3*/site-packages"))
        data["blas"] = _bundled_blas(site)
    from envlock import _toml

    path.write_text(_toml.dumps(data), encoding="utf-8")
    return path


@pytest.mark.realenv
def test_cpu_venv_against_cuda_venv(cpu_venv: Path, cuda_venv: Path, tmp_path: Path) -> None:
    result = diff([_manifest(cpu_venv, tmp_path / "cpu.toml"),
                   _manifest(cuda_venv, tmp_path / "cuda.toml")])
    assert isinstance(result, PairDiff)
    top = result.explanations[:5]
    ids = [e.id for e in top]
    assert ids[0] == "torch-variant"
    assert top[0].title.startswith(
        "torch is a CPU-only build in cpu.toml and a CUDA 13.0 build in cuda.toml")
    assert set(ids[:4]) == {"torch-variant", "numpy:package:numpy", "scipy:package:scipy",
                            "blas"}
    titles = [e.title for e in top]
    assert "numpy 1.24.4 → 2.4.1 (major)" in titles
    assert "scipy 1.10.1 → 1.17.0 (minor)" in titles
    blas = next(e for e in top if e.id == "blas")
    assert "numpy openblas 0.3.21" in blas.title and "openblas 0.3.30" in blas.title
    assert "scipy openblas 0.3.18" in blas.title
    for e in top:
        assert e.why and e.do
    # the nvidia-* wheels and triton come with the CUDA build: explained by it, not listed apart
    absorbed = {c.key for c in top[0].changes}
    assert {"torch", "nvidia-cublas", "cudnn", "triton"} <= absorbed
    everywhere = {c.key for e in result.explanations for c in e.changes}
    assert not everywhere & {"pip", "setuptools", "wheel"}
