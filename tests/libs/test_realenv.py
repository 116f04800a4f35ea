"""envlock libs on the real torch venvs, against ldd and against the running interpreter."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.libs.analysis import analyze_module

from .conftest import real_ldd

pytestmark = pytest.mark.realenv


def _sys_path(venv: Path) -> list[str]:
    out = subprocess.run([str(venv / "bin/python"), "-c", "import sys, json; print(json.dumps(sys.path))"],
                         capture_output=True, text=True, timeout=60, check=True, cwd="/").stdout
    return [p for p in json.loads(out) if p]


def _torch_c(venv: Path) -> str:
    (path,) = glob.glob(str(venv / "lib/python3*/site-packages/torch/_C*.so"))
    return path


@pytest.fixture(params=["cpu", "cuda"])
def venv(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_venv")


def test_closure_of_torch_c_is_exactly_what_ldd_gives(venv: Path) -> None:
    """ldd's view: _C as the main object. Every name, every path string, identical."""
    c = _torch_c(venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    report = analyze_module(str(venv / "bin/python"), c, sys_path=_sys_path(venv), env=env,
                            mode="ldd", runtime=False)
    real = real_ldd(c)
    ours: dict[str, str | None] = {}
    for r in report.requests:
        ours.setdefault(r.name, r.path)
    assert real.paths
    for name, path in real.paths.items():
        assert ours.get(name) == path, name
    assert not report.findings or all(f.severity != "error" for f in report.findings)


def test_envlock_libs_torch_matches_ldd_for_the_closure(venv: Path) -> None:
    """The import view (torch's own preloading first): every library in the closure of
    torch/_C*.so is the same file ldd gives (path strings differ where torch preloads a wheel
    library by its site-packages path; the file is the same)."""
    c = _torch_c(venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    report = analyze_module(str(venv / "bin/python"), "torch", sys_path=_sys_path(venv),
                            prefix=str(venv), env=env)
    real = real_ldd(c)
    closure = report.closure(c)
    assert closure and closure[0].path == c
    by_soname = {o.soname or os.path.basename(o.path): o for o in closure}
    for name, path in real.paths.items():
        assert path is not None, f"ldd: {name} not found"
        o = by_soname.get(name) or next((x for x in report.objects if x.soname == name), None)
        assert o is not None, name
        assert o.realpath == os.path.realpath(path), name
    assert not [f for f in report.findings if f.severity == "error"]


def test_cuda_libraries_come_from_the_pinned_wheels(cuda_venv: Path) -> None:
    report = analyze_module(str(cuda_venv / "bin/python"), "torch", sys_path=_sys_path(cuda_venv),
                            prefix=str(cuda_venv), env={})
    cudnn = next(o for o in report.objects if o.soname == "libcudnn.so.9")
    assert cudnn.owner_name == "nvidia-cudnn-cu13" and cudnn.owner_version == "9.24.0.43"
    assert not [f for f in report.findings if f.id == "cuda-pin-mismatch"]
    graph = next(r for r in report.runtime if r.name == "libcudnn_graph.so.9")
    assert graph.resolution.path and graph.resolution.path.endswith("nvidia/cudnn/lib/libcudnn_graph.so.9")


@pytest.mark.parametrize(("which", "module"), [("cpu", "torch"), ("cuda", "torch"), ("cpu", "scipy"),
                                               ("cuda", "numpy")])
def test_runtime_check_has_no_unexplained_difference(request: pytest.FixtureRequest, which: str,
                                                      module: str) -> None:
    venv = request.getfixturevalue(f"{which}_venv")
    result = CliRunner().invoke(cli, ["libs", module, "--python", str(venv / "bin/python"),
                                      "--runtime", "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["runtime_check"]
    assert check["status"] == "ok" and check["error"] is None
    assert check["unexplained"] == []
    assert check["matched"]
    if module == "torch":
        assert any(p.endswith("libtorch_cpu.so") for p in check["matched"])


def test_libs_torch_binds_every_symbol(venv: Path) -> None:
    """Symbols are checked by default: on the real torch venvs nothing is missing (the
    GNU-unique definitions of libstdc++ count), and the command exits 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    result = CliRunner().invoke(cli, ["libs", "torch", "--python", str(venv / "bin/python"),
                                      "--format", "json", "--no-cache"], env=env)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [f for f in doc["findings"] if f["id"] in ("missing-symbol", "missing-version")] == []


def _old_libstdcxx_map(last: int = 21) -> str:
    """A version script with the GLIBCXX_3.4 … GLIBCXX_3.4.<last> nodes, each inheriting the
    previous one, as libstdc++'s own script has them."""
    lines = ["GLIBCXX_3.4 { global: old_cxx_marker; local: *; };"]
    for i in range(1, last + 1):
        parent = "GLIBCXX_3.4" + (f".{i - 1}" if i > 1 else "")
        lines.append(f"GLIBCXX_3.4.{i} {{ }} {parent};")
    return "\n".join(lines) + "\n"


def test_older_libstdcxx_picked_gives_the_glibcxx_finding(cpu_venv: Path, build) -> None:
    """A libstdc++.so.6 that stops at GLIBCXX_3.4.21 comes first on LD_LIBRARY_PATH: torch
    needs GLIBCXX_3.4.22, so ldd reports the version error and envlock the finding."""
    build.lib("old/libstdc++.so.6", "int old_cxx_marker(void) { return 0; }",
              soname="libstdc++.so.6", version_script=_old_libstdcxx_map())
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env["LD_LIBRARY_PATH"] = str(build.root / "old")
    real = real_ldd(_torch_c(cpu_venv), {"LD_LIBRARY_PATH": env["LD_LIBRARY_PATH"]})
    assert any("GLIBCXX_3.4.22" in e for e in real.version_errors), real.version_errors
    result = CliRunner().invoke(cli, ["libs", "torch", "--python", str(cpu_venv / "bin/python"),
                                      "--format", "json", "--no-cache"], env=env)
    assert result.exit_code == 1
    doc = json.loads(result.output)
    found = [f for f in doc["findings"] if f["id"] == "missing-version"]
    assert any("GLIBCXX_3.4.22" in f["title"] and f["library"] == "libstdc++.so.6" for f in found)
    assert not [f for f in doc["findings"] if f["id"] == "missing-symbol"]
