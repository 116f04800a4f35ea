"""Two builds of one distribution in one lock (issue 23, item 7): a conda-lock.yml with conda
``pytorch`` 1.13.1 and pip ``torch`` 2.3.1 lists two packages; conda-lock's own parser is the
oracle for what the file holds, and envlock's diff and show keep both."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from envlock.cli import cli

_HASH = {"md5": "0" * 32, "sha256": "1" * 64}


def _entry(name: str, version: str, manager: str, url: str, deps: dict[str, str]) -> dict:
    hashes = _HASH if manager == "conda" else {"sha256": _HASH["sha256"]}
    return {"name": name, "version": version, "manager": manager, "platform": "linux-64",
            "dependencies": deps, "url": url, "hash": hashes, "category": "main",
            "optional": False}


def _lock(path: Path, *, pip_torch: bool) -> Path:
    cf, pt = "https://conda.anaconda.org/conda-forge/linux-64", "https://conda.anaconda.org/pytorch"
    package = [
        _entry("python", "3.11.7", "conda", f"{cf}/python-3.11.7-hab00c5b_1_cpython.conda", {}),
        _entry("pytorch", "1.13.1", "conda",
               f"{pt}/linux-64/pytorch-1.13.1-py3.11_cuda11.7_cudnn8.5.0_0.tar.bz2",
               {"python": ">=3.11,<3.12.0a0"}),
    ]
    if pip_torch:
        package.append(_entry("torch", "2.3.1", "pip", "https://files.pythonhosted.org/packages/"
                              "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", {}))
    doc = {"version": 1, "metadata": {
        "content_hash": {"linux-64": "x"}, "channels": [{"url": "pytorch", "used_env_vars": []}],
        "platforms": ["linux-64"], "sources": ["environment.yml"]}, "package": package}
    import yaml

    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_conda_and_pip_builds_of_torch_are_two_facts(tmp_path):
    from conda_lock.lockfile import parse_conda_lock_file

    both = _lock(tmp_path / "conda-lock.yml", pip_torch=True)
    oracle = {(p.manager, p.name, p.version) for p in parse_conda_lock_file(both).package}
    assert {("conda", "pytorch", "1.13.1"), ("pip", "torch", "2.3.1")} <= oracle

    same = CliRunner().invoke(cli, ["diff", str(both), str(both), "--format", "json"])
    assert same.exit_code == 0, same.output
    report = json.loads(same.output)
    assert report["identical"]["areas"]["package"] == 2  # torch (conda) and torch: not merged
    note = [c for c in report["context"] if "two builds of torch" in str(c)]
    assert len(note) == 1, report["context"]
    assert "conda pytorch 1.13.1" in str(note[0]) and "pip torch 2.3.1" in str(note[0])

    (tmp_path / "conda-only").mkdir()
    conda_only = _lock(tmp_path / "conda-only" / "conda-lock.yml", pip_torch=False)
    result = CliRunner().invoke(cli, ["diff", str(conda_only), str(both), "--format", "json"])
    assert result.exit_code == 1, result.output
    changed = {d["key"]: d for d in json.loads(result.output)["differences"]
               if d["area"] == "package"}
    assert set(changed) == {"torch", "torch (conda)"}, changed

    show = CliRunner().invoke(cli, ["show", str(both)])
    assert show.exit_code == 0, show.output
    assert "two builds: torch: conda pytorch 1.13.1" in " ".join(show.output.split())


def test_restore_says_pip_installs_over_the_conda_build(tmp_path):
    """``restore`` of that lock installs conda's pytorch, then pip's torch over it: said before
    anything runs; a lock whose pip part lacks torch says nothing of the kind."""
    both = _lock(tmp_path / "conda-lock.yml", pip_torch=True)
    plan = CliRunner().invoke(cli, ["restore", str(both), "--prefix", str(tmp_path / "env")])
    assert plan.exit_code == 0, plan.output
    warned = [ln for ln in plan.output.splitlines() if "two builds of one package" in ln]
    assert len(warned) == 1, plan.output
    assert "pip torch 2.3.1 is installed over conda package pytorch 1.13.1 " \
           "py3.11_cuda11.7_cudnn8.5.0_0 (torch 1.13.1)" in warned[0]
    assert not (tmp_path / "env").exists()
    (tmp_path / "conda-only").mkdir()
    alone = _lock(tmp_path / "conda-only" / "conda-lock.yml", pip_torch=False)
    plan = CliRunner().invoke(cli, ["restore", str(alone), "--prefix", str(tmp_path / "env")])
    assert plan.exit_code == 0 and "two builds" not in plan.output, plan.output
