"""The fixes of the job's environment run as printed (issue 25): the loader path of a diff,
the GPUs of a Slurm allocation (verify and run), the working directory of a job, conda's CUDA
override; each line is run in bash in the world it was printed for and the command that
printed it runs again: the finding is gone, and nothing new appears.

The Slurm worlds are the variables Slurm sets (``SLURM_JOB_ID``, ``SLURM_GPUS_ON_NODE``,
``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``, ``SLURM_SUBMIT_DIR``): these findings read nothing else,
so no scheduler is needed.  Where a fix depends on the GPUs the job sees (their numbering), the
node's GPUs are the ``nvidia-smi`` and ``/proc`` of tests/verify's fakes, as there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from envlock.verify import verify as verify_api
from tests.verify.conftest import fake_nvidia_smi, fake_root, gpu_line

from .conftest import PY, World, commands, pair, side_fix
from .test_verify_fixes_run import _command, _ids, _one, _verify

GCC = shutil.which("gcc")


def _gcc(*args: str) -> None:
    subprocess.run([str(GCC), *args], check=True, capture_output=True, timeout=120)


def _env_after(world: World, venv: Path, fix: str, extra: dict[str, str]) -> dict[str, str]:
    """The job's environment after ``fix`` ran in its bash (for the library's ``verify``)."""
    out = world.sh(fix, venv, extra, then="env -0").stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


# -- diff: LD_LIBRARY_PATH moved torch's OpenMP runtime ---------------------------------------
@pytest.mark.skipif(GCC is None, reason="needs gcc to build the libraries")
def test_loader_path_fix_runs(world: World) -> None:
    """A torch whose extension finds libgomp.so.1 through its RUNPATH ($ORIGIN/lib); a module
    directory on LD_LIBRARY_PATH has another libgomp.so.1, which the loader then takes first."""
    venv = world.venv("env")
    site = next((venv / "lib").glob("python3*/site-packages"))
    torch = site / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "__init__.py").write_text("__version__ = '2.3.1'\n")
    mod = world.root / "modules" / "gcc-13" / "lib64"
    mod.mkdir(parents=True)
    src = world.root / "gomp.c"
    src.write_text("int omp_get_max_threads(void) { return 1; }\n")
    for d in (torch / "lib", mod):
        _gcc("-shared", "-fPIC", "-Wl,-soname,libgomp.so.1", "-o", str(d / "libgomp.so.1"), str(src))
    ext = world.root / "c.c"
    ext.write_text("int omp_get_max_threads(void);\nint f(void) { return omp_get_max_threads(); }\n")
    _gcc("-shared", "-fPIC", "-o", str(torch / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"),
         str(ext), f"-L{torch / 'lib'}", "-l:libgomp.so.1", "-Wl,--enable-new-dtags",
         "-Wl,-rpath,$ORIGIN/lib")
    job = {"LD_LIBRARY_PATH": str(mod)}
    a = world.snapshot(venv, world.root / "a.toml")
    b = world.snapshot(venv, world.root / "b.toml", job)
    before = pair(a, b)
    ex = next(e for e in before.explanations if e.id == "loader-path")
    assert {(c.area, c.key) for c in ex.changes} == {("env", "LD_LIBRARY_PATH"),
                                                     ("libraries", "libgomp.so.1")}
    to_a, to_b = side_fix(ex.do, "a.toml"), side_fix(ex.do, "b.toml")
    assert to_a == "unset LD_LIBRARY_PATH" and to_b == f"export LD_LIBRARY_PATH={mod}"
    # b's job with a's line: the packages' own copy again, no difference left
    b2 = world.snapshot(venv, world.root / "b2.toml", job, fix=to_a)
    assert not pair(a, b2).changes, pair(a, b2).changes
    # a's job with b's line: the module's copy, as in b
    a2 = world.snapshot(venv, world.root / "a2.toml", fix=to_b)
    assert not pair(b, a2).changes, pair(b, a2).changes
    # the diagnostic the text names: `envlock libs` shows the module's copy in b's job
    libs = world.sh(to_b, venv, then=f"{PY} -m envlock libs --python {venv}/bin/python "
                    "--format json torch").stdout
    assert "`envlock libs`" in ex.do and f'"{mod}/libgomp.so.1"' in libs, libs


# -- diff: two platforms ----------------------------------------------------------------------
def _explicit(path: Path, subdir: str, build: str) -> Path:
    path.write_text(f"# platform: {subdir}\n@EXPLICIT\n"
                    f"https://conda.anaconda.org/conda-forge/{subdir}/"
                    f"numpy-1.26.4-{build}.conda\n")
    return path


def test_platform_difference_is_a_choice_naming_both(tmp_path: Path) -> None:
    """No command changes the platform of a machine: the text says which two there are to
    choose from, and the lock command with the choice as its visible placeholder."""
    a = _explicit(tmp_path / "linux.txt", "linux-64", "py311h64a7726_0")
    b = _explicit(tmp_path / "mac.txt", "osx-arm64", "py311h7125741_0")
    ex = next(e for e in pair(a, b).explanations if e.id.split(":", 1)[0] == "subdir")
    assert commands(ex.do) == ["conda-lock -f <environment.yml> -p <platform>"]
    assert "<platform>: linux-64 or osx-arm64" in ex.do
    assert "Choose one platform" in ex.do


# -- verify: CUDA_VISIBLE_DEVICES gone in a Slurm GPU job -------------------------------------
@pytest.mark.parametrize("ids_var", ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"])
def test_visible_devices_fix_runs_in_a_slurm_job(world: World, ids_var: str) -> None:
    """In an srun step (SLURM_STEP_GPUS) and in the batch step (only SLURM_JOB_GPUS): the one
    line gives back the ids Slurm allocated."""
    venv = world.venv("env")
    job = {"SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "1", ids_var: "0"}
    before = _verify(world, venv, extra=job)
    f = _one(before, "allocation.visible-devices-unset")
    cmd = _command(f["fix"][0])
    assert cmd == "export CUDA_VISIBLE_DEVICES=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"
    after = _verify(world, venv, cmd, extra=job)
    assert not {i for i in _ids(after) if i.startswith("allocation.")}, _ids(after)
    assert _ids(after) <= _ids(before)
    assert _env_after(world, venv, cmd, job)["CUDA_VISIBLE_DEVICES"] == "0"


def _node(world: World, gpus: int) -> tuple[Path, Path]:
    """A node with ``gpus`` GPUs as /proc and nvidia-smi show them (tests/verify's fakes)."""
    bindir = world.root / f"smi-{gpus}"
    bindir.mkdir()
    fake_nvidia_smi(bindir, [gpu_line(i, "NVIDIA A100-SXM4-80GB", f"GPU-{i:04d}", 81920, "8.0",
                                      "535.104.05") for i in range(gpus)])
    root = fake_root(world.root / f"node-{gpus}",
                     "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Release Build\n")
    return bindir, root


@pytest.mark.parametrize(("seen", "expected"), [
    (2, "export CUDA_VISIBLE_DEVICES=0,1"),  # cgroup-constrained: only its own, from 0
    (4, "export CUDA_VISIBLE_DEVICES=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"),  # the whole node
])
def test_visible_devices_fix_follows_the_numbering_the_job_sees(world: World, seen: int,
                                                                expected: str) -> None:
    """Slurm allocated the node's GPUs 2 and 3: where the job sees only those two (numbered 0
    and 1) the node's ids would name a GPU it does not have; where it sees all four they are
    right.  The line printed is the one that makes verify content on that node."""
    venv = world.venv("env")
    bindir, root = _node(world, seen)
    job = {"SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": "2,3",
           "PATH": f"{bindir}:{world.env(venv)['PATH']}"}

    def findings(env: dict[str, str]) -> dict[str, list[str]]:
        rep = verify_api(python=str(venv / "bin/python"), environ=env, root=str(root), timeout=20)
        return {f.id: list(f.fix) for f in rep.findings}

    before = findings(world.env(venv, job))
    cmd = _command(before["allocation.visible-devices-unset"][0])
    assert cmd == expected
    after = findings(_env_after(world, venv, cmd, job))
    assert not [i for i in after if i.startswith("allocation.")], after
    assert set(after) <= set(before)


def test_visible_devices_fix_names_both_numberings_when_the_gpus_are_unknown(world: World) -> None:
    venv = world.venv("env")
    job = {"SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": "2,3"}
    f = _one(_verify(world, venv, extra=job), "allocation.visible-devices-unset")
    assert commands(f["fix"][0]) == [
        "nvidia-smi -L", "export CUDA_VISIBLE_DEVICES=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}",
        "export CUDA_VISIBLE_DEVICES=0,1"]
    assert f["fix"][0].startswith("Choose by what the job sees")
    # only a count (SLURM_GPUS_ON_NODE): no ids to export, so no export line; where Slurm lists them
    f = _one(_verify(world, venv, extra={"SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "2"}),
             "allocation.visible-devices-unset")
    assert commands(f["fix"][0]) == ["scontrol show job -d $SLURM_JOB_ID"]


# -- run: the same, in the record of `envlock run` --------------------------------------------
def _run(world: World, venv: Path, name: str, argv: str, extra: dict[str, str],
         fix: str = ":") -> tuple[dict[str, dict], str]:
    """``envlock run`` of ``argv`` in the job's shell after ``fix``: its findings, its stderr."""
    res = world.sh(fix, venv, extra, then=f"{PY} -m envlock run --dir {name} -q -- {argv} || true")
    data = tomllib.loads((world.root / name / "run.toml").read_text())["run"]
    return {f["id"]: f for f in data.get("findings", [])}, res.stderr


def test_run_visible_devices_fix_runs(world: World) -> None:
    venv = world.venv("env")
    job = {"SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "0"}
    before, _ = _run(world, venv, "r1", "true", job)
    f = before["run.visible-devices-unset"]
    cmd = _command(f["fix"][0])
    assert cmd == "export CUDA_VISIBLE_DEVICES=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"
    after, _ = _run(world, venv, "r2", "true", job, fix=cmd)
    assert "run.visible-devices-unset" not in after and set(after) <= set(before)


def test_run_crashed_names_the_diagnostic_that_works(world: World) -> None:
    """A crash is not fixed by a line: the finding names the step that shows where it crashed
    (faulthandler's traceback), and once that is set says where the traceback is."""
    venv = world.venv("env")
    crash = world.root / "crash.py"
    crash.write_text("import ctypes\n\ndef load():\n    return ctypes.string_at(0)\n\nload()\n")
    before, _ = _run(world, venv, "c1", f"python {crash}", {})
    f = before["run.crashed"]
    assert f["title"] == "the command crashed: SIGSEGV"
    cmd = _command(f["fix"][0])
    assert cmd == "export PYTHONFAULTHANDLER=1"
    after, stderr = _run(world, venv, "c2", f"python {crash}", {}, fix=cmd)
    assert "Fatal Python error: Segmentation fault" in stderr
    assert f'File "{crash}", line 4 in load' in stderr
    # already set: not named again; the text says where its output is
    assert "PYTHONFAULTHANDLER=1" not in after["run.crashed"]["fix"][0]
    assert "traceback of the crash is in its stderr" in after["run.crashed"]["fix"][0]
    assert set(after) == set(before)


# -- verify: the job runs elsewhere than it was submitted from --------------------------------
def test_workdir_fix_runs(world: World) -> None:
    venv = world.venv("env")
    submit, elsewhere = world.root / "project", world.root / "scratch"
    submit.mkdir()
    elsewhere.mkdir()
    job = {"SLURM_JOB_ID": "4242", "SLURM_SUBMIT_DIR": str(submit)}

    def findings(fix: str = ":") -> list[dict]:
        import json

        res = world.sh(fix, venv, job, cwd=elsewhere,
                       then=f"{PY} -m envlock verify --python {venv}/bin/python --format json || true")
        return json.loads(res.stdout)["findings"]

    before = findings()
    f = _one(before, "output.workdir-differs")
    cmd = _command(f["fix"][0])
    assert cmd == 'cd "$SLURM_SUBMIT_DIR"'
    after = findings(cmd)
    assert "output.workdir-differs" not in _ids(after) and _ids(after) <= _ids(before)


# -- verify --build: CONDA_OVERRIDE_CUDA --------------------------------------------------------
def test_cuda_override_fix_runs_on_a_node_without_driver(world: World) -> None:
    venv = world.venv("env")
    job = {"CONDA_OVERRIDE_CUDA": "12.4"}
    before = _verify(world, venv, extra=job, args="--build")
    f = _one(before, "build.cuda-override")
    cmd = _command(f["fix"][0])
    assert cmd == "unset CONDA_OVERRIDE_CUDA"
    after = _verify(world, venv, cmd, extra=job, args="--build")
    assert "build.cuda-override" not in _ids(after) and _ids(after) <= _ids(before)


@pytest.mark.parametrize(("override", "lines"), [
    ("12.8", ["unset CONDA_OVERRIDE_CUDA", "export CONDA_OVERRIDE_CUDA=12.2"]),  # > the driver's
    ("", ["unset CONDA_OVERRIDE_CUDA"]),  # empty: no __cuda at all
])
def test_cuda_override_fix_runs_against_the_driver(world: World, override: str,
                                                   lines: list[str]) -> None:
    """Driver 535.104.05 supports CUDA 12.2 (tests/verify's fake node): each line the fix
    names leaves conda's solver the CUDA the driver gives."""
    venv = world.venv("env")
    bindir, root = _node(world, 1)
    job = {"CONDA_OVERRIDE_CUDA": override, "PATH": f"{bindir}:{world.env(venv)['PATH']}"}

    def findings(env: dict[str, str]) -> dict[str, list[str]]:
        rep = verify_api(python=str(venv / "bin/python"), environ=env, root=str(root),
                         build=True, timeout=20)
        return {f.id: list(f.fix) for f in rep.findings}

    before = findings(world.env(venv, job))
    fix = before["build.cuda-override"][0]
    assert (commands(fix) or [fix]) == lines, fix
    for line in lines:
        after = findings(_env_after(world, venv, line, job))
        assert "build.cuda-override" not in after and set(after) <= set(before), (line, after)


if sys.platform != "linux":  # the loader, /proc and Slurm's variables are Linux's
    pytestmark = pytest.mark.skip(reason="Linux only")
