"""Where no NVIDIA kernel module is loaded, verify does not start nvidia-smi (it can only fail,
and a hanging one would cost the whole command timeout): it says so at once."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from envlock.verify.live import Live, driver_loaded

from .conftest import fake_nvidia_smi, fake_root

PROC = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
        "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:58:27 UTC 2025\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")


def test_no_driver_no_nvidia_smi(tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin", [], hang=True)
    root = fake_root(tmp_path / "none", None)
    assert not driver_loaded(str(root))
    live = Live(SimpleNamespace(), environ={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, root=str(root))
    t0 = time.monotonic()
    g = live.gpu
    apps = live.compute_apps
    assert time.monotonic() - t0 < 1.0
    assert g.status == "absent" and "nvidia-smi not run: no NVIDIA kernel module loaded" in g.error
    assert apps.status == "absent" and "no NVIDIA kernel module loaded" in apps.error


def test_with_a_driver_a_hanging_nvidia_smi_is_still_asked_and_cut(tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin", [], hang=True)
    root = fake_root(tmp_path / "drv", PROC)
    assert driver_loaded(str(root))
    live = Live(SimpleNamespace(), environ={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, root=str(root),
                deadline=time.monotonic() + 1.0)
    t0 = time.monotonic()
    g = live.gpu
    assert 0.5 < time.monotonic() - t0 < 3.0
    assert g.status == "timeout" and g.driver_version == "580.95.05"
