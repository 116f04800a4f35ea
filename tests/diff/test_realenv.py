"""The real torch venvs: a CPU build with numpy 1.24/scipy 1.10 against a CUDA 13.0 build with
numpy 2.4/scipy 1.17 (``pytest --realenv``).

Both venvs are observed with :func:`envlock.snapshot` (with the stack probes: ``[blas]``
reads the bundled OpenBLAS of numpy and scipy, ``[frameworks]`` torch's ``version.py``) and
written as manifests, which ``envlock diff`` reads back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from click.testing import CliRunner

import envlock
from envlock.cli import cli
from envlock.diff import diff
from envlock.diff.engine import PairDiff


def _manifest(venv: Path, path: Path) -> Path:
    manifest = envlock.snapshot(python=str(venv / "bin" / "python"))
    assert manifest.blas is not None and manifest.frameworks is not None
    manifest.write(path)
    return path


@pytest.mark.realenv
def test_cpu_venv_against_cuda_venv(cpu_venv: Path, cuda_venv: Path, tmp_path: Path) -> None:
    result = diff([_manifest(cpu_venv, tmp_path / "cpu.toml"),
                   _manifest(cuda_venv, tmp_path / "cuda.toml")])
    assert isinstance(result, PairDiff)
    top = result.explanations[:5]
    ids = [e.id for e in top]
    # both snapshots come from this GPU-less host: "a CUDA build runs kernels on the GPU" cannot
    # be a cause here (issue 25); the build is a note, torch's release move an explanation
    assert "torch-variant" not in [e.id for e in result.explanations]
    assert result.context[0].startswith("neither side has a GPU")
    note = next(n for n in result.context if n.startswith("not a cause here: torch is a"))
    assert "CPU-only build in cpu.toml and a CUDA 13.0 build in cuda.toml" in note
    assert "only with a GPU on either side" in note
    assert set(ids[:4]) == {"torch:package:torch", "numpy:package:numpy",
                            "scipy:package:scipy", "blas"}
    titles = [e.title for e in top]
    assert "numpy 1.24.4 → 2.4.1 (major)" in titles
    assert "scipy 1.10.1 → 1.17.0 (minor)" in titles
    blas = next(e for e in top if e.id == "blas")
    assert "numpy openblas 0.3.21" in blas.title and "openblas 0.3.30" in blas.title
    assert "scipy openblas 0.3.18" in blas.title
    for e in result.explanations:
        assert e.why and e.do
        assert "runs kernels on the GPU" not in e.why
    everywhere = {c.key for e in result.explanations for c in e.changes}
    assert not everywhere & {"pip", "setuptools", "wheel"}
    # the nvidia-* wheels, triton and the CUDA libraries come with the CUDA build: accounted
    # for by its note, never an explanation of their own; no false "driver" explanation
    ids = [e.id for e in result.explanations]
    assert not any(i.startswith(("driver", "cuda-libs")) for i in ids)
    cudaish = [c for c in result.changes if c.key.startswith(("nvidia-", "libcu", "libnv"))
               or c.area == "cuda" or c.key in ("triton", "cudnn", "nccl")]
    assert len(cudaish) > 40
    owner = {id(c): e.id for e in result.explanations for c in e.changes}
    assert {owner.get(id(c)) for c in cudaish} == {None}
    # the [build] table: where it was read from (paths of two venvs) is no fact; nothing of it
    # stands as an explanation of its own
    assert not [c.key for c in result.changes if c.area == "build"
                and (c.key.endswith("-source") or c.key == "torch-location")]
    assert not [e.id for e in result.explanations if e.changes and
                all(c.area == "build" for c in e.changes)]
    res = CliRunner().invoke(cli, ["diff", str(tmp_path / "cpu.toml"),
                                   str(tmp_path / "cuda.toml")])
    assert res.exit_code == 1
    assert res.output.count("neither side has a GPU (no NVIDIA driver or device recorded): "
                            "every run") == 1
    assert "driver is too old" not in res.output and "ask the admins" not in res.output
    # piped: every version of every differing fact is in the output whole
    table = res.output[res.output.index("Differences ("):]
    assert "openblas 0.3.21 (ilp64)" in table and "…" not in table


@pytest.mark.realenv
def test_ld_library_path_pair_is_one_explanation(cpu_venv: Path, tmp_path: Path) -> None:
    """The same venv snapshotted twice, with LD_LIBRARY_PATH set to the system library
    directory in the second: torch's libgomp and the interpreter's libpython resolve to
    Debian's copies.  One explanation names the variable and what it moved."""
    import os

    libdir = "/usr/lib/x86_64-linux-gnu"
    if not os.path.exists(f"{libdir}/libgomp.so.1"):
        pytest.skip(f"no libgomp.so.1 in {libdir}")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    a, b = tmp_path / "plain.toml", tmp_path / "ldpath.toml"
    envlock.snapshot(python=str(cpu_venv / "bin" / "python"), environ=env).write(a)
    envlock.snapshot(python=str(cpu_venv / "bin" / "python"),
                     environ={**env, "LD_LIBRARY_PATH": libdir}).write(b)
    result = diff([a, b])
    assert isinstance(result, PairDiff)
    loader = [e for e in result.explanations if e.id == "loader-path"]
    assert len(loader) == 1
    ex = loader[0]
    assert "LD_LIBRARY_PATH" in ex.title and "libgomp.so.1" in ex.title
    moved = {c.key for c in ex.changes if c.area == "libraries"}
    assert "libgomp.so.1" in moved
    # libpython moves only where the interpreter links a shared one and the variable's directory
    # has another copy (pyenv's, not Debian's static python3): ldd with and without it says
    if _libpython(cpu_venv, env) != _libpython(cpu_venv, {**env, "LD_LIBRARY_PATH": libdir}):
        assert any(k.startswith("libpython") for k in moved), moved
    else:
        assert not any(k.startswith("libpython") for k in moved), moved
    assert [c.key for c in ex.causes] == ["LD_LIBRARY_PATH"]
    # ranked above plumbing, and no library it moved is an explanation of its own
    assert ex.score > 20 * 10 + 9
    assert result.explanations[0] is ex
    others = {c.key for e in result.explanations if e is not ex for c in e.changes}
    assert not others & (moved | {"LD_LIBRARY_PATH"})
    assert "Python 3.11 environment" not in ex.do


def _libpython(venv: Path, env: dict[str, str]) -> str | None:
    """The libpython file ``ldd`` (the real loader) resolves for the venv's interpreter, if any."""
    import os
    import subprocess

    out = subprocess.run(["ldd", os.path.realpath(venv / "bin" / "python")], capture_output=True,
                         text=True, timeout=60, env=env, check=False).stdout
    for line in out.splitlines():
        if line.strip().startswith("libpython") and "=>" in line:
            return os.path.realpath(line.split("=>")[1].split()[0])
    return None


def _repo(path: Path) -> Path:
    """A real git checkout with a commit and three untracked files (notes, an old result)."""
    from envlock._run import run

    path.mkdir()
    (path / "train.py").write_text("import torch\nprint(torch.ones(3).sum())\n")
    env = {"GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
           "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.org",
           "PATH": "/usr/bin:/bin", "HOME": str(path)}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "train.py"],
                 ["git", "commit", "-q", "-m", "train"]):
        assert run(argv, timeout=30, env=env, cwd=str(path)).status == "ok"
    for name in ("notes.txt", "loss.csv", "run.log"):
        (path / name).write_text("x\n")
    return path


def _snap_in_repo(venv: Path, repo: Path, name: str, environ: dict[str, str]) -> Path:
    """``envlock snapshot -o <repo>/<name>`` run inside the checkout: the previous manifest
    is an untracked file of that checkout by now."""
    import os

    manifest = envlock.snapshot(python=str(venv / "bin" / "python"), repo=str(repo),
                                environ={**os.environ, **environ})
    manifest.write(repo / name)
    return repo / name


@pytest.mark.realenv
def test_c09_second_snapshot_in_the_repo_blames_the_threads(cpu_venv: Path,
                                                            tmp_path: Path) -> None:
    repo = _repo(tmp_path / "proj")
    a = _snap_in_repo(cpu_venv, repo, "a.toml", {})
    b = _snap_in_repo(cpu_venv, repo, "b.toml", {"OMP_NUM_THREADS": "1"})
    result = diff([a, b])
    assert isinstance(result, PairDiff)
    # the first manifest, now an untracked file of the checkout, is envlock's output, not code:
    # the three user files stay the untracked count on both sides (issue 25)
    untracked = [c.values for c in result.changes if c.key == "repository.untracked"]
    assert untracked == []
    assert envlock.load(a).git.untracked == envlock.load(b).git.untracked == 3
    assert result.explanations[0].id == "threads"
    assert "OMP_NUM_THREADS" in result.explanations[0].title
    ids = [e.id for e in result.explanations]
    assert "code" not in ids and "untracked" not in ids
    assert "neither side has a GPU" in result.context[0]


@pytest.mark.realenv
def test_c05_cpu_and_cuda_snapshots_in_one_repo(cpu_venv: Path, cuda_venv: Path,
                                                tmp_path: Path) -> None:
    repo = _repo(tmp_path / "proj")
    a = _snap_in_repo(cpu_venv, repo, "cpu.toml", {})
    b = _snap_in_repo(cuda_venv, repo, "cuda.toml", {})
    result = diff([a, b])
    assert isinstance(result, PairDiff)
    ids = [e.id for e in result.explanations]
    # no GPU on this host: the CUDA build is a note, torch's release move an explanation
    assert "torch-variant" not in ids and "torch:package:torch" in ids
    assert any(n.startswith("not a cause here: torch is a CPU-only build") for n in result.context)
    assert "code" not in ids
    assert "untracked" not in ids  # cpu.toml in the checkout is envlock's output, not code
    assert "blas" in ids
