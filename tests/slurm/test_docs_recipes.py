"""docs/slurm.md's recipes, taken from the document itself (a docs change is tested), run on
the real cluster.  The only edits are the site paths of the recipes (``/opt/envlock/bin``,
``/etc/envlock/node.toml``, ``/opt/site/bin/python``, ``/var/log/…``), replaced by this test's
venv and temp files: the machine's own ``/etc`` and ``/opt`` stay untouched."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.conftest import BIN, ENVLOCK, Cluster

DOCS = Path(__file__).resolve().parents[2] / "docs"


def block(doc: str, marker: str) -> str:
    """The ``sh`` code block of ``docs/<doc>`` that contains ``marker``."""
    text = (DOCS / doc).read_text()
    found = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if marker in b]
    assert len(found) == 1, f"{doc}: {len(found)} sh blocks contain {marker!r}"
    return found[0]


def site(script: str, tmp: Path, **paths: str) -> str:
    """The recipe with its site paths pointing into ``tmp`` and at this venv."""
    out = script.replace("/opt/envlock/bin/envlock", ENVLOCK).replace("/opt/site/bin/python", sys.executable)
    out = out.replace("/var/log/envlock-prolog.log", str(tmp / "prolog.log"))
    for old, new in paths.items():
        out = out.replace(old, new)
    return out


def manifest(path: Path, *, click_version: str | None = None) -> Path:
    """A real snapshot of this venv; ``click_version``: with click's version changed (a node
    whose environment is not the recorded one)."""
    subprocess.run([ENVLOCK, "snapshot", "--python", sys.executable, "-o", str(path), "--force"],
                   check=True, capture_output=True, timeout=60)
    if click_version:
        text = path.read_text()
        new = re.sub(r'(name = "click"\nversion = ")[^"]*"', rf'\g<1>{click_version}"', text, count=1)
        assert new != text
        path.write_text(new)
    return path


PROLOG = "# /etc/slurm/prolog.sh"


def test_prolog_recipe_passes_a_good_node_and_never_drains_for_envlocks_own_failure(
        slurm: Cluster, tmp_path: Path) -> None:
    """The Prolog runs as root with Slurm's tiny environment.  A manifest that matches: the job
    runs; a malformed one (verify exit 2: envlock's own failure, not a verdict): the job still
    runs and every node stays idle — a Prolog's non-zero exit would have drained it."""
    good = manifest(tmp_path / "good.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[envlock\nschema = 1\n")
    for m, rc in ((good, 0), (bad, 2)):
        (tmp_path / "prolog.log").unlink(missing_ok=True)
        slurm.prolog(site(block("slurm.md", PROLOG), tmp_path, **{"/etc/envlock/node.toml": str(m)}))
        r = slurm.cmd("srun", "-N2", "-w", "n1,n2", "echo", "ran", cwd=tmp_path, check=False)
        assert r.returncode == 0 and r.stdout.split() == ["ran", "ran"], r.stderr
        log = (tmp_path / "prolog.log").read_text()
        assert log.count(f"envlock verify exit {rc}") == 2, log  # once on each node
        # idle again once the job's epilog is done ("completing" a moment), never drained
        slurm.wait_nodes("idle", nodes=("n1", "n2"), deadline=15)


def test_prolog_recipe_drains_the_node_on_an_enforced_verdict_then_resume(
        slurm: Cluster, tmp_path: Path) -> None:
    """A node whose environment differs from the site's manifest (verify exit 1, its JSON
    verdict ``"exit": 1``) fails the Prolog: Slurm drains it with reason ``Prolog error`` and
    requeues the job held; ``scontrol update … State=RESUME`` returns it to service."""
    m = manifest(tmp_path / "node.toml", click_version="0.0.1")
    slurm.prolog(site(block("slurm.md", PROLOG), tmp_path, **{"/etc/envlock/node.toml": str(m)}))
    job = slurm.sbatch("#!/bin/sh\necho never\n", "-w", "n3", cwd=tmp_path)
    slurm.wait_nodes("drained", nodes=("n3",), deadline=30)
    reason = slurm.cmd("scontrol", "show", "node", "n3").stdout
    assert "Reason=Prolog error" in reason, reason
    assert "envlock verify exit 1" in (tmp_path / "prolog.log").read_text()
    info = slurm.wait_job(job, states=("PENDING",), deadline=20)
    assert info.get("Reason") in ("launch failed requeued held", "JobHeldAdmin") or info.get("Restarts") == "1", info
    assert not (tmp_path / f"slurm-{job}.out").exists() or "never" not in (tmp_path / f"slurm-{job}.out").read_text()
    slurm.prolog(None)
    slurm.cmd("scancel", job)
    slurm.cmd("scontrol", "update", "NodeName=n3", "State=RESUME")
    slurm.wait_nodes("idle", nodes=("n3",))


def test_task_prolog_recipe_checks_the_environment_active_at_submission(
        slurm: Cluster, tmp_path: Path) -> None:
    """The TaskProlog runs before the job script: verify observes the environment exported from
    the submitting shell (here ``VIRTUAL_ENV`` = this venv).  Matching manifest: no output;
    a manifest with another click: the findings reach the task's output as ``print`` lines, and
    the task still runs (report only)."""
    slurm.task_prolog(site(block("slurm.md", "# /etc/slurm/task_prolog.sh"), tmp_path))
    venv = {"VIRTUAL_ENV": str(Path(BIN).parent)}
    manifest(tmp_path / "manifest.toml")
    r = slurm.cmd("srun", "-N1", "echo", "task", cwd=tmp_path, env=venv)
    assert r.stdout.split() == ["task"], r.stdout
    manifest(tmp_path / "manifest.toml", click_version="0.0.1")
    r = slurm.cmd("srun", "-N1", "echo", "task", cwd=tmp_path, env=venv)
    assert "envlock verify found problems (exit 1):" in r.stdout, r.stdout
    assert "click" in r.stdout and r.stdout.rstrip().endswith("task"), r.stdout


def test_verify_step_recipe_runs_on_every_node(slurm: Cluster, tmp_path: Path) -> None:
    """``srun --ntasks-per-node=1 envlock verify --manifest manifest.toml -q || exit 1`` in a
    four-node job: quiet when every node matches; exit 1 when the manifest differs."""
    line = next(s for s in block("slurm.md", "srun --ntasks-per-node=1 envlock verify").splitlines() if s.startswith("srun"))
    manifest(tmp_path / "manifest.toml")
    job = slurm.sbatch(f"#!/bin/bash\nsource {BIN}/activate\n{line}\necho checked\n", "-N4", cwd=tmp_path)
    assert slurm.wait_job(job)["JobState"] == "COMPLETED"
    assert (tmp_path / f"slurm-{job}.out").read_text().split() == ["checked"]
    manifest(tmp_path / "manifest.toml", click_version="0.0.1")
    job = slurm.sbatch(f"#!/bin/bash\nsource {BIN}/activate\n{line}\necho checked\n", "-N4", cwd=tmp_path)
    info = slurm.wait_job(job)
    out = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "FAILED" and "checked" not in out, out
    assert out.count("packages.version-mismatch") == 4 or out.count("click") >= 4, out


@pytest.fixture(autouse=True)
def _no_stray_log(tmp_path: Path) -> None:
    (tmp_path / "prolog.log").unlink(missing_ok=True)
