"""A 1,500-deep DT_NEEDED chain of hand-made objects: modelled and rendered without recursion,
and the same closure as ``ld.so --list`` (no gcc needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envlock.libs.analysis import analyze_module
from envlock.render.libsreport import render_text

from .elfgen import tiny_so

NEEDS_NO_GCC = True
LDSO = "/lib64/ld-linux-x86-64.so.2"
DEPTH = 1500


def test_deep_needed_chain_models_and_renders(tmp_path: Path) -> None:
    for i in range(DEPTH):
        tiny_so(tmp_path / f"libk{i}.so", soname=f"libk{i}.so", runpath="$ORIGIN",
                needed=[f"libk{i + 1}.so"] if i < DEPTH - 1 else [])
    top = tmp_path / "libk0.so"
    report = analyze_module(str(top), str(top), sys_path=[], env={}, mode="ldd", owners=False,
                            runtime=False)
    names = [o.soname for o in report.objects if o.soname and o.soname.startswith("libk")]
    assert names == [f"libk{i}.so" for i in range(DEPTH)]
    text = render_text(report)
    assert f"libk{DEPTH - 1}.so => {tmp_path}/libk{DEPTH - 1}.so" in text
    assert text.count("[RUNPATH]") == DEPTH - 1
    if os.path.exists(LDSO) and os.uname().machine == "x86_64":
        real = subprocess.run([LDSO, "--list", str(top)], capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin"})
        assert real.returncode == 0
        listed = [line.split()[0] for line in real.stdout.splitlines() if "libk" in line]
        assert listed == names[1:]
    else:  # pragma: no cover - other hosts
        pytest.skip("no x86-64 loader to compare with")
