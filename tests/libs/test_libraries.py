"""The [libraries] manifest table, the JSON document, and the libs command's edges."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.manifest import _model
from envlock.cli import cli
from envlock.libs.analysis import SCHEMA, analyze_module, probe_libraries
from envlock.manifest.librariestable import LibrariesInfo
from envlock.manifest import EnvlockInfo, Manifest, Target

from .conftest import Builder, real_ldd
from .test_cases import EXT, make_dist


def _fake_torch(build: Builder) -> Path:
    site = build.root / "site"
    build.lib("site/nvidia/cudnn/lib/libcudnn.so.9", soname="libcudnn.so.9")
    build.lib("site/torch/lib/libtorch_cuda.so", soname="libtorch_cuda.so",
              needed=["site/nvidia/cudnn/lib/libcudnn.so.9"], rpath="$ORIGIN/../../nvidia/cudnn/lib",
              extra=["-lstdc++"])
    build.lib(f"site/torch/_C.{EXT}", needed=["site/torch/lib/libtorch_cuda.so"], rpath="$ORIGIN/lib")
    (site / "torch/__init__.py").write_text("")
    (site / "torch/version.py").write_text("__version__ = '9.9.9'\ncuda = '12.4'\n")
    make_dist(site, "nvidia-cudnn-cu12", "9.1.0.70", ["nvidia/cudnn/lib/libcudnn.so.9"])
    make_dist(site, "torch", "9.9.9", ["torch/lib/libtorch_cuda.so", f"torch/_C.{EXT}"],
              requires=['nvidia-cudnn-cu12==9.1.0.71; platform_system == "Linux"',
                        'nvidia-nccl-cu12==2.20.5; extra == "distributed"'])
    return site


def test_probe_libraries_and_manifest_round_trip(build: Builder) -> None:
    site = _fake_torch(build)
    info = probe_libraries(python_exe=sys.executable, sys_path=[str(site)], prefix=None, env={})
    assert isinstance(info, LibrariesInfo) and info.status == "ok" and info.module == "torch"
    cudnn = next(r for r in info.resolved if r.soname == "libcudnn.so.9")
    assert cudnn.path == f"{site}/torch/lib/../../nvidia/cudnn/lib/libcudnn.so.9"
    assert cudnn.realpath == f"{site}/nvidia/cudnn/lib/libcudnn.so.9"
    assert (cudnn.rule, cudnn.owner, cudnn.owner_kind, cudnn.version) == (
        "rpath", "nvidia-cudnn-cu12", "pip", "9.1.0.70")
    assert any(r.soname == "libstdc++.so.6" and r.owner_kind in ("dpkg", None) for r in info.resolved)
    # torch pins 9.1.0.71 (for Linux; the nccl pin is only for an extra): a mismatch finding.
    assert any(f.startswith("warning [cuda-pin-mismatch] libcudnn.so.9 comes from nvidia-cudnn-cu12 9.1.0.70")
               for f in info.findings)
    assert not any("nccl" in f for f in info.findings)
    manifest = Manifest(envlock=EnvlockInfo(version="0", created="2026-01-01T00:00:00Z", host="h"),
                        target=Target(kind="venv", prefix="/p", chosen_by="--prefix"),
                        libraries=info)
    data = manifest.to_dict()
    assert data["libraries"]["resolved"][0]["soname"] == min(r.soname for r in info.resolved)
    assert Manifest.from_dict(json.loads(json.dumps(data))).libraries == info
    assert "[[libraries.resolved]]" in manifest.dumps("toml")


def test_probe_libraries_absent_and_never_raises(tmp_path: Path) -> None:
    absent = probe_libraries(python_exe=sys.executable, sys_path=[str(tmp_path)], prefix=None, env={})
    assert absent.status == "absent" and absent.resolved == ()
    broken = probe_libraries(python_exe=sys.executable, sys_path=None, prefix=None, env={})  # type: ignore[arg-type]
    assert broken.status == "error" and broken.error


def test_json_document_shape(build: Builder) -> None:
    site = _fake_torch(build)
    report = analyze_module(sys.executable, "torch", sys_path=[str(site)], env={})
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["schema"] == SCHEMA == 1
    assert set(doc) == {"schema", "python", "launcher", "target", "files", "config", "objects",
                        "requests", "runtime", "findings", "errors"}
    assert doc["launcher"] is None
    assert doc["files"] == [f"{site}/torch/_C.{EXT}"]
    obj = next(o for o in doc["objects"] if o["soname"] == "libcudnn.so.9")
    assert obj["owner"] == {"kind": "pip", "name": "nvidia-cudnn-cu12", "version": "9.1.0.70"}
    assert obj["rule"] == "rpath" and obj["stage"] == "import"
    req = next(r for r in doc["requests"] if r["name"] == "libcudnn.so.9")
    assert req["tried"][-1] == {"path": obj["path"], "rule": "rpath",
                                "source": f"RPATH of {site}/torch/lib/libtorch_cuda.so", "outcome": "found"}
    assert _model  # the manifest model is what probe_libraries feeds


def test_file_target_in_ldd_mode_matches_ldd(build: Builder) -> None:
    site = _fake_torch(build)
    c = f"{site}/torch/_C.{EXT}"
    report = analyze_module(sys.executable, c, sys_path=[], env={}, mode="ldd")
    ours = {}
    for r in report.requests:
        ours.setdefault(r.name, r.path)
    for name, path in real_ldd(c).paths.items():
        assert ours[name] == path


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["libs", "torch", "--python", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.output.startswith("Error: ") and len(result.output.strip().splitlines()) == 1


def test_cli_module_not_found_exits_1(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["libs", "no_such_module_xyz", "--python", sys.executable], env=env)
    assert result.exit_code == 1
    assert "error: no_such_module_xyz: no extension module found" in result.output


def test_cli_interpreter_only(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["libs", "--python", sys.executable, "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert any(o["soname"] == "libc.so.6" for o in doc["objects"])
    # parsed ELF facts are not kept on disk (reading them again is as fast); a second run,
    # from the caches that are kept, gives the same answer
    assert not (tmp_path / "envlock" / "elf-v2").exists()
    again = CliRunner().invoke(cli, ["libs", "--python", sys.executable, "--format", "json"], env=env)
    assert json.loads(again.output)["objects"] == doc["objects"]



def test_answer_cache_is_reused_and_invalidated(build: Builder, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored answer is printed again only while every input is unchanged: a library that
    appears in an LD_LIBRARY_PATH directory changes that directory, so the answer is redone."""
    from envlock import cache

    monkeypatch.setattr(cache, "RACY_NS", 0)  # the files are built just before the first run
    site = build.root / "site"
    build.lib("site/nvidia/cudnn/lib/libcudnn.so.8", soname="libcudnn.so.8")
    build.lib("site/torch/lib/libtorch_cuda.so", soname="libtorch_cuda.so",
              needed=["site/nvidia/cudnn/lib/libcudnn.so.8"], runpath="$ORIGIN/../../nvidia/cudnn/lib")
    build.lib(f"site/torch/_C.{EXT}", needed=["site/torch/lib/libtorch_cuda.so"], runpath="$ORIGIN/lib")
    (site / "torch/__init__.py").write_text("")
    module_dir = build.root / "modules/cudnn"
    module_dir.mkdir(parents=True)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(site),
           "LD_LIBRARY_PATH": str(module_dir)}
    args = ["libs", "torch", "--python", sys.executable, "--format", "json"]
    runner = CliRunner()
    first = runner.invoke(cli, args, env=env)
    assert first.exit_code == 0, first.output
    stored = list((tmp_path / "cache/envlock/libs-answers").glob("*.json"))
    assert len(stored) == 1
    cudnn = next(r for r in json.loads(first.output)["requests"] if r["name"] == "libcudnn.so.8")
    assert cudnn["rule"] == "runpath"
    # Same inputs: the stored answer is printed (make that visible by editing it).
    data = json.loads(stored[0].read_text())
    payload = data["value"]
    payload["stdout"] = payload["stdout"].replace('"schema": 1', '"schema": 1, "from-cache": true', 1)
    stored[0].write_text(json.dumps(data))
    again = runner.invoke(cli, args, env=env)
    assert json.loads(again.output).get("from-cache") is True
    # A cluster module drops an old cuDNN into its directory: the answer must change.
    build.lib("modules/cudnn/libcudnn.so.8", soname="libcudnn.so.8")
    third = runner.invoke(cli, args, env=env)
    doc = json.loads(third.output)
    assert "from-cache" not in doc
    cudnn = next(r for r in doc["requests"] if r["name"] == "libcudnn.so.8")
    assert cudnn["rule"] == "ld_library_path" and cudnn["path"] == f"{module_dir}/libcudnn.so.8"
    assert any(f["id"] == "shadowed" for f in doc["findings"])


def test_find_module_files_packages_subpackages_and_pure_python(build: Builder) -> None:
    from envlock.libs.analysis import find_module_files

    site = build.root / "site"
    build.lib(f"site/pkg/core/_impl.{EXT}")
    build.lib(f"site/pkg/linalg/_lapack.{EXT}")
    for d in ("pkg", "pkg/core", "pkg/linalg"):
        (site / d / "__init__.py").write_text("")
    (site / "pure.py").write_text("x = 1\n")
    where, files = find_module_files("pkg", [str(site)])
    assert where == str(site / "pkg")
    assert files == [str(site / f"pkg/core/_impl.{EXT}"), str(site / f"pkg/linalg/_lapack.{EXT}")]
    assert find_module_files("pkg.core._impl", [str(site)]) == (None, [str(site / f"pkg/core/_impl.{EXT}")])
    assert find_module_files("pure", [str(site)]) == (str(site / "pure.py"), [])
    assert find_module_files("absent", [str(site)]) == (None, [])
    report = analyze_module(sys.executable, "pure", sys_path=[str(site)], env={})
    assert report.files == () and report.errors == ()
