"""``envlock verify``'s fixes run as printed (issue 25): the fix line's command is run in bash
in the job's world (a real venv with local wheels, the job's environment), verify runs again
in the same shell, and the finding is gone with no new one."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .conftest import PY, World


def _verify(world: World, venv: Path, fix: str = ":", extra: dict[str, str] | None = None,
            args: str = "") -> list[dict]:
    """verify's findings (JSON) after running ``fix`` in the job's shell."""
    res = world.sh(fix, venv, extra, then=f"{PY} -m envlock verify --python {venv}/bin/python "
                   f"--format json {args} || true")
    return json.loads(res.stdout)["findings"]


def _one(findings: list[dict], fid: str) -> dict:
    hit = [f for f in findings if f["id"] == fid]
    assert hit, [f["id"] for f in findings]
    return hit[0]


def _command(line: str) -> str:
    """The command a fix line starts with, as printed: backticked, else up to " in the job
    script", " (" or ", or"."""
    m = re.search(r"`([^`]+)`", line)
    if m:
        return m.group(1)
    return re.split(r" in the job script| \(|, or |  \(or", line, maxsplit=1)[0].strip()


def _ids(findings: list[dict]) -> set[str]:
    return {f["id"] for f in findings}


def test_isolation_pythonpath_fix_runs(world: World) -> None:
    venv = world.venv("env")
    (world.root / "src").mkdir()
    before = _verify(world, venv, extra={"PYTHONPATH": str(world.root / "src")})
    f = _one(before, "isolation.pythonpath")
    cmd = _command(f["fix"][0])
    assert cmd == "unset PYTHONPATH"
    after = _verify(world, venv, cmd, extra={"PYTHONPATH": str(world.root / "src")})
    assert "isolation.pythonpath" not in _ids(after) and _ids(after) <= _ids(before)


def test_isolation_user_site_fix_runs(world: World) -> None:
    venv = world.venv("env")
    # a venv that sees the system site (include-system-site-packages): the user site is on
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false",
                                           "include-system-site-packages = true"))
    (world.root / "home").mkdir()
    # a user site with a package in it: ~/.local/lib/python3.X/site-packages
    out = subprocess.run([str(venv / "bin/python"), "-c", "import site; print(site.getusersitepackages())"],
                         env={"HOME": str(world.root / "home")}, capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    Path(out, "stray").mkdir(parents=True)
    Path(out, "stray", "__init__.py").write_text("")
    home = {"HOME": str(world.root / "home")}
    before = _verify(world, venv, extra=home)
    f = _one(before, "isolation.user-site")
    cmd = _command(f["fix"][0])
    assert cmd == "export PYTHONNOUSERSITE=1"
    after = _verify(world, venv, cmd, extra=home)
    assert "isolation.user-site" not in _ids(after) and _ids(after) <= _ids(before)


def test_packages_version_mismatch_fix_runs(world: World) -> None:
    for v in ("1.26.4", "2.0.1"):
        world.wheel("numpy", v)
    venv = world.venv("env", ["numpy==1.26.4"])
    manifest = world.snapshot(venv, world.root / "m.toml")
    world.sh("pip install -q numpy==2.0.1", venv)
    before = _verify(world, venv, args=f"--manifest {manifest}")
    f = _one(before, "packages.version-mismatch")
    cmd = _command(f["fix"][0])
    assert "'numpy==1.26.4'" in cmd
    after = _verify(world, venv, cmd, args=f"--manifest {manifest}")
    assert "packages.version-mismatch" not in _ids(after) and _ids(after) <= _ids(before)


def test_output_missing_fix_runs(world: World) -> None:
    venv = world.venv("env")
    out = world.root / "results" / "run1"
    before = _verify(world, venv, args=f"--output-dir {out}")
    f = _one(before, "output.missing")
    cmd = _command(f["fix"][0])
    assert cmd == f"mkdir -p {out}"
    after = _verify(world, venv, cmd, args=f"--output-dir {out}")
    assert "output.missing" not in _ids(after) and _ids(after) <= _ids(before)


def test_numerics_variables_the_manifest_records_are_checked_and_the_fix_runs(world: World) -> None:
    """C09 as a job prologue: OMP_NUM_THREADS=1 recorded, unset in the job — diff ranks it
    first, so verify warns, and its `export` line makes the job match."""
    venv = world.venv("env")
    manifest = world.snapshot(venv, world.root / "m.toml", {"OMP_NUM_THREADS": "1",
                                                              "MKL_CBWR": "COMPATIBLE"})
    before = _verify(world, venv, args=f"--manifest {manifest}",
                     extra={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    f = _one(before, "env.numerics-differs")
    assert f["severity"] == "warning"
    assert "OMP_NUM_THREADS '1' in the manifest, unset here" in f["title"]
    cmd = _command(f["fix"][0])
    assert cmd == "export MKL_CBWR=COMPATIBLE OMP_NUM_THREADS=1; unset CUBLAS_WORKSPACE_CONFIG"
    after = _verify(world, venv, cmd, args=f"--manifest {manifest}",
                    extra={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    assert "env.numerics-differs" not in _ids(after) and _ids(after) <= _ids(before)
    # the same values: nothing to say
    same = _verify(world, venv, args=f"--manifest {manifest}",
                   extra={"OMP_NUM_THREADS": "1", "MKL_CBWR": "COMPATIBLE"})
    assert "env.numerics-differs" not in _ids(same)


def test_packages_shadowed_by_pythonpath_fix_runs(world: World) -> None:
    """A copy pip installed into a PYTHONPATH directory hides the venv's: the fix's `unset
    PYTHONPATH` in the job's shell makes the venv's copy the imported one."""
    for v in ("1.26.4", "2.0.1"):
        world.wheel("numpy", v)
    venv = world.venv("env", ["numpy==1.26.4"])
    shared = world.root / "shared-libs"
    world.sh(f"pip install -q --no-deps --target {shared} numpy==2.0.1", venv)
    env = {"PYTHONPATH": str(shared)}
    before = _verify(world, venv, extra=env)
    f = _one(before, "packages.shadowed")
    cmd = _command(f["fix"][0])
    assert cmd == "unset PYTHONPATH"
    after = _verify(world, venv, cmd, extra=env)
    assert "packages.shadowed" not in _ids(after) and _ids(after) <= _ids(before)
