"""One producer per fact: the NVIDIA tables are one object wherever they are used."""

from __future__ import annotations

import ast
from pathlib import Path

import envlock.nvidia as nvidia
from envlock.probes import gpu

PKG = Path(__file__).resolve().parents[1] / "envlock"


def test_driver_answer_is_the_nvidia_table() -> None:
    for cuda, minimum in nvidia.TOOLKIT_DRIVERS:
        assert gpu.cuda_for_driver(minimum) == nvidia.max_cuda_for_driver(minimum) == cuda
    assert gpu.cuda_for_driver("396.26") == "9.2"  # the two tables once disagreed here


def test_no_second_driver_table() -> None:
    """No module but envlock/nvidia.py spells out a driver → CUDA table (a tuple of 410.48-like
    driver versions next to CUDA releases)."""
    drivers = {d for _, d in nvidia.TOOLKIT_DRIVERS}
    for p in PKG.rglob("*.py"):
        if p.name == "nvidia.py" and p.parent == PKG:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in drivers}
        found |= {".".join(str(e.value) for e in n.elts) for n in ast.walk(tree)
                  if isinstance(n, ast.Tuple) and n.elts and all(isinstance(e, ast.Constant)
                                                                  and isinstance(e.value, int) for e in n.elts)
                  and ".".join(str(e.value) for e in n.elts) in drivers}
        assert len(found) < 3, f"{p}: looks like another driver table: {sorted(found)}"


def test_one_nvidia_smi_reader() -> None:
    """Only envlock/probes/nvsmi.py builds nvidia-smi queries; the [gpu] probe and verify use it."""
    from envlock.probes import nvsmi
    from envlock.verify import live

    for p in PKG.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if p.name != "nvsmi.py":
            assert "--query-gpu=" not in text and "--query-compute-apps=" not in text, p
    assert live.read_compute_apps is nvsmi.read_compute_apps
    assert gpu.SMI_FIELDS is nvsmi.SMI_FIELDS


def test_one_glibc_detector() -> None:
    for p in PKG.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if p.name != "glibc.py":
            assert "CS_GNU_LIBC_VERSION" not in text and "libc-2." not in text, p
