"""A v7 ``pixi.lock`` platform's ``virtual-packages`` (``__cuda=12``) is a requirement verify
compares with this node's driver, as a package's ``__cuda`` dependency is (NVIDIA's
driver → CUDA table, :mod:`envlock.nvidia`); py-rattler is the oracle for the platform."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

rattler = pytest.importorskip("rattler")

MULTI = Path("/work/shared/cases/peers/pixilock/multi-machine__pixi.lock")


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_a_cuda_platform_is_checked_against_the_driver(tmp_path: Path, venv: Path,
                                                       job_env: dict[str, str]) -> None:
    """A v7 lock whose only linux-64 platform is ``p2`` (virtual package ``__cuda=12``): on a
    node whose driver supports CUDA 11.4, verify says the platform needs a newer driver."""
    from envlock.formats.conda import current_subdir
    from envlock.verify import verify
    from envlock.verify.checks import CHECKS
    from envlock.verify.expected import read_lock
    from tests.verify.conftest import fake_nvidia_smi, fake_root, gpu_line

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")

    def only_p2(d: dict[str, Any]) -> None:
        d["platforms"] = [p for p in d["platforms"] if p["name"] != "linux-64"]
        d["environments"]["default"]["packages"].pop("linux-64")

    data = yaml.safe_load(MULTI.read_text())
    only_p2(data)
    path = tmp_path / "pixi.lock"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    p2 = next(p for p in rattler.LockFile.from_path(path).platforms() if p.name == "p2")
    assert str(p2.subdir) == "linux-64" and "__cuda=12" in p2.virtual_packages
    lock = read_lock(path)
    assert (lock.lock_platform, lock.cuda, lock.platforms) == ("p2", "12", (
        "win-64", "linux-64", "osx-arm64"))
    assert len(lock.packages) == 133
    root = fake_root(tmp_path / "n", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  "
                                     "Tue Oct 26 2021\n")
    fake_nvidia_smi(tmp_path / "bin", [gpu_line(0, "Tesla V100-SXM2-32GB", "GPU-aa", 32510, "7.0",
                                                "470.82.01")])
    r = verify(python=str(venv / "bin/python"), locks=[str(path)], environ=job_env, root=str(root),
               checks=[c for c in CHECKS if c[0] == "driver"])
    (f,) = [f for f in r.findings if f.id == "gpu.driver-too-old"]
    assert "platform p2 of" in f.title and "driver 470.82.01 supports up to CUDA 11.4" in f.title
