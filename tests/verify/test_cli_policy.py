"""The command: exit codes, one line, --quiet, JSON schema, --strict, policy files, deadline."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import ConfigError
from envlock.findings import Finding
from envlock.verify import verify
from envlock.verify.checks import CHECKS
from envlock.verify.policy import apply_policy, level_for, load_config, parse_size
from envlock.verify.settings import Config
from tests.verify.conftest import fake_nvidia_smi, install_dist, install_torch, site_packages, snapshot_to


@pytest.fixture()
def clean_env(job_env, monkeypatch):
    """Run the CLI in the test's job environment and in nothing else: the snapshot was taken
    with exactly ``job_env``, so any other variable of the test runner's (Slurm's, a
    PYTHONPATH, a machine's ``OPENBLAS_CORETYPE``) would be a real difference to verify."""
    for k in list(os.environ):
        if k not in job_env:
            monkeypatch.delenv(k, raising=False)
    for k, v in job_env.items():
        monkeypatch.setenv(k, v)
    return job_env


def invoke(*args):
    return CliRunner().invoke(cli, ["verify", *args], catch_exceptions=False)


def test_all_well_is_one_line_and_quiet_is_nothing(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = snapshot_to(venv, tmp_path / "m.toml", clean_env)
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"envlock verify: ok against {m} ({len(CHECKS)} checks")
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m), "-q")
    assert r.exit_code == 0 and r.output == ""


def test_error_gives_a_table_and_exit_1_json_schema(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = snapshot_to(venv, tmp_path / "m.toml", clean_env)
    install_dist(site_packages(venv), "tqdm", "4.66.4")
    (site_packages(venv) / "numpy-1.26.4.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n\n")
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m))
    assert r.exit_code == 1
    flat = " ".join(r.output.split())
    assert "numpy 2.0.0 is installed; the manifest (m.toml) has 1.26.4" in flat
    assert "[packages.version-mismatch]" in r.output.replace("\n", "")
    assert r.output.splitlines()[-1].startswith("envlock verify: 1 error(s), 1 warning(s) against")
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m), "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["schema"] == 1 and doc["status"] == "error" and doc["exit"] == 1
    assert doc["counts"] == {"error": 1, "warning": 1, "info": 0}
    assert [c["name"] for c in doc["checks"]][:3] == ["python", "packages", "locks"]
    assert {c["status"] for c in doc["checks"]} <= {"ok", "findings"}
    f = doc["findings"][0]
    assert set(f) >= {"id", "severity", "title", "cause", "evidence", "fix"}
    assert (f["id"], f["severity"]) == ("packages.version-mismatch", "error")
    assert doc["target"]["python"] == str(venv / "bin/python") and doc["manifest"] == str(m)


def test_warnings_pass_unless_strict(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = snapshot_to(venv, tmp_path / "m.toml", clean_env)
    install_dist(site_packages(venv), "tqdm", "4.66.4")
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m))
    assert r.exit_code == 0 and "packages.extra" in r.output.replace("\n", "")
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m), "--strict", "--format", "json")
    assert r.exit_code == 1 and json.loads(r.output)["findings"][0]["severity"] == "error"


def test_policy_file_next_to_the_manifest(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = tmp_path / "proj"
    d.mkdir()
    m = snapshot_to(venv, d / "m.toml", clean_env)
    (site_packages(venv) / "numpy-1.26.4.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n\n")
    (d / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.envlock.verify]\n'
                                      'severity = { "packages.*" = "warning" }\n')
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m), "--format", "json")
    doc = json.loads(r.output)
    assert r.exit_code == 0 and doc["config"] == str(d / "pyproject.toml")
    assert [(f["id"], f["severity"]) for f in doc["findings"]] == [("packages.version-mismatch", "warning")]
    (d / "envlock.toml").write_text('[verify]\nignore = ["packages.version-mismatch"]\n')
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m))
    assert r.exit_code == 0 and len(r.output.splitlines()) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--manifest", "nope.toml"], "Error: nope.toml: no such file"),
    (["--lock", "nope.lock"], "Error: nope.lock: no such lockfile"),
    (["--python", "/no/such/python"], "Error: --python /no/such/python: no such interpreter"),
])
def test_could_not_run_is_one_line_exit_2(tmp_path, clean_env, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["verify", *args])
    assert r.exit_code == 2
    assert r.output.strip() == message


def test_unreadable_manifest_and_bad_policy_exit_2(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.toml").write_text("[envlock\n")
    r = CliRunner().invoke(cli, ["verify", "--python", str(venv / "bin/python"), "--manifest", "m.toml"])
    assert r.exit_code == 2 and r.output.startswith("Error: m.toml: malformed TOML") and len(r.output.splitlines()) == 1
    m = snapshot_to(venv, tmp_path / "good.toml", clean_env)
    (tmp_path / "envlock.toml").write_text('[verify]\nseverity = { "packages.extra" = "fatal" }\n')
    r = CliRunner().invoke(cli, ["verify", "--python", str(venv / "bin/python"), "--manifest", str(m)])
    assert r.exit_code == 2 and "severity of 'packages.extra' must be one of error, warning, info, ignore" in r.output


def test_hanging_nvidia_smi_is_cut_by_the_deadline(tmp_path, venv, clean_env, monkeypatch):
    """A wedged driver: nvidia-smi never answers. verify returns within --timeout and says so."""
    monkeypatch.chdir(tmp_path)
    install_torch(site_packages(venv), "2.14.1+cu130", "13.0")
    fake_nvidia_smi(tmp_path / "bin", [], hang=True)
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    t0 = time.monotonic()
    r = invoke("--python", str(venv / "bin/python"), "--timeout", "2", "--format", "json")
    elapsed = time.monotonic() - t0
    assert elapsed < 3.5, elapsed
    doc = json.loads(r.output)
    found = {f["id"] for f in doc["findings"]}
    errors = {f["id"] for f in doc["findings"] if f["severity"] == "error"}
    assert r.exit_code == (3 if errors <= {"verify.timeout"} else 1) == doc["exit"]
    from envlock.verify.live import driver_loaded

    # Without a loaded kernel module nvidia-smi is not even started: "no driver", at once.
    expected = {"gpu.query-failed", "verify.timeout"} if driver_loaded() else {"gpu.no-driver"}
    assert found & expected, found


def test_a_check_stuck_past_the_deadline_is_a_timeout_finding(tmp_path, venv, job_env):
    release = threading.Event()

    def stuck(ctx):
        release.wait(30)
        return []

    def quick(ctx):
        return [Finding(id="demo.ok", severity="info", title="quick check ran")]

    t0 = time.monotonic()
    r = verify(python=str(venv / "bin/python"), environ=job_env, timeout=0.5,
               checks=[("stuck", stuck), ("quick", quick)], config_dir=str(tmp_path))
    release.set()
    assert time.monotonic() - t0 < 2.0
    assert [(c.name, c.status) for c in r.checks] == [("stuck", "timeout"), ("quick", "findings")]
    timeout = [f for f in r.findings if f.id == "verify.timeout"][0]
    assert timeout.severity == "error" and timeout.title == "check stuck did not finish within 0.5 s"
    assert r.exit_code == 3  # no verdict: the only error is envlock's own (a Prolog must not drain)


def test_a_crashing_check_is_an_internal_error_finding(tmp_path, venv, job_env):
    def broken(ctx):
        raise KeyError("frameworks")

    r = verify(python=str(venv / "bin/python"), environ=job_env, checks=[("broken", broken)], config_dir=str(tmp_path))
    (f,) = r.findings
    assert f.id == "verify.internal-error" and "KeyError" in f.title and r.checks[0].status == "error"
    assert r.exit_code == 3


# -- policy ----------------------------------------------------------------------------------
def test_levels_exact_beats_pattern_longest_pattern_wins():
    sev = {"packages.*": "warning", "packages.version-*": "info", "packages.missing": "error", "gpu.*": "ignore"}
    assert level_for("packages.missing", sev) == "error"
    assert level_for("packages.version-mismatch", sev) == "info"
    assert level_for("packages.extra", sev) == "warning"
    assert level_for("output.low-space", sev) is None
    fs = [Finding(id="gpu.no-driver", severity="warning", title="t"),
          Finding(id="packages.extra", severity="warning", title="t"),
          Finding(id="isolation.user-site", severity="warning", title="t")]
    out = apply_policy(fs, Config(severity=sev), strict=True)
    assert [(f.id, f.severity) for f in out] == [("packages.extra", "error"), ("isolation.user-site", "error")]


def test_load_config_files(tmp_path):
    assert load_config(tmp_path) == Config()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path).source is None
    (tmp_path / "pyproject.toml").write_text(
        "[tool.envlock.verify]\nignore = ['isolation.*']\nmin-free-space = '5GiB'\nmin-free-inodes = 500\n"
        "modules = ['mylab._fast']\n")
    cfg = load_config(tmp_path)
    assert (cfg.min_free_bytes, cfg.min_free_inodes, cfg.modules) == (5 * 1024**3, 500, ("mylab._fast",))
    assert cfg.severity == {"isolation.*": "ignore"}
    (tmp_path / "envlock.toml").write_text("[verify]\nmin-free-space = 2000000\n")
    assert load_config(tmp_path).min_free_bytes == 2_000_000  # envlock.toml wins


@pytest.mark.parametrize(("text", "message"), [
    ("[verify]\nfoo = 1\n", "unknown verify setting 'foo'"),
    ("[verify]\nignore = 'x'\n", "'ignore' must be a list"),
    ("[verify]\nmin-free-space = 'lots'\n", "not a size"),
    ("[verify]\nmin-free-inodes = -1\n", "non-negative"),
    ("[verify\n", "malformed TOML"),
])
def test_bad_config(tmp_path, text, message):
    (tmp_path / "envlock.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path)


def test_parse_size():
    assert parse_size("500MB") == 500_000_000
    assert parse_size("1.5GiB") == int(1.5 * 1024**3)
    assert parse_size(1024) == 1024
    with pytest.raises(ConfigError):
        parse_size(True)


def test_rich_table_on_a_terminal_and_plain_text_in_a_log(tmp_path, venv, job_env):
    import io

    from envlock.render.verifyreport import format_plain, print_report

    install_dist(site_packages(venv), "tqdm", "4.66.4")
    m = snapshot_to(venv, tmp_path / "m.toml", job_env)
    (site_packages(venv) / "numpy-1.26.4.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n\n")
    r = verify(python=str(venv / "bin/python"), manifest=str(m), environ=job_env, config_dir=str(tmp_path))
    plain = format_plain(r, width=100)
    assert plain.splitlines()[0] == "error    numpy 2.0.0 is installed; the manifest (m.toml) has 1.26.4  [packages.version-mismatch]"
    assert "           fix: uv pip install" in plain and "'numpy==1.26.4'" in plain
    assert max(len(line) for line in plain.splitlines()[:-1]) <= 100
    # in a log (not a terminal): 80 columns, as the job's log viewer shows them (issue 25)
    buf = io.StringIO()
    print_report(r, file=buf)
    assert buf.getvalue().startswith("error    numpy 2.0.0 is installed; the manifest (m.toml) has")
    long = [x for x in buf.getvalue().splitlines()[:-1] if len(x) > 80]
    assert all(max(len(w) for w in x.split()) > 60 for x in long), long  # a path kept whole
    buf = io.StringIO()
    print_report(r, file=buf, width=120, color=True)
    text = buf.getvalue()
    assert "numpy 2.0.0 is installed; the manifest (m.toml) has 1.26.4  [packages.version-mismatch]" in text
    assert text.splitlines()[-1].startswith("envlock verify: 1 error(s) against")


def test_skip_checks_by_name(tmp_path, venv, job_env):
    (tmp_path / "envlock.toml").write_text('[verify]\nskip = ["libraries", "gpu-processes"]\n')
    cfg = load_config(tmp_path)
    assert cfg.skip == ("libraries", "gpu-processes")
    r = verify(python=str(venv / "bin/python"), environ=job_env, config_dir=str(tmp_path))
    names = [c.name for c in r.checks]
    assert "libraries" not in names and "gpu-processes" not in names and "packages" in names
    (tmp_path / "envlock.toml").write_text('[verify]\nskip = ["gpu"]\n')
    with pytest.raises(ConfigError, match="unknown check 'gpu' in 'skip'"):
        load_config(tmp_path)


def test_summary_names_manifest_and_lockfiles(tmp_path, venv, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = snapshot_to(venv, tmp_path / "m.toml", clean_env)
    (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "numpy"\n'
                                          'version = "1.26.4"\nwheels = [{ url = \"https://files.example.invalid/numpy-1.26.4-py3-none-any.whl\", hashes = { sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\" } }]\n\n[[packages]]\nname = "requests"\nversion = "2.31.0"\nwheels = [{ url = \"https://files.example.invalid/requests-2.31.0-py3-none-any.whl\", hashes = { sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\" } }]\n')
    r = invoke("--python", str(venv / "bin/python"), "--manifest", str(m), "--lock", "pylock.toml")
    assert r.exit_code == 0 and r.output.startswith(f"envlock verify: ok against {m}, pylock.toml ({len(CHECKS)} checks")


def test_an_interpreter_that_does_not_answer_is_an_error(tmp_path) -> None:
    """A --python that hangs: the checks that read it have nothing to read, and verify says so
    (exit 1), instead of "ok"."""
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    r = verify(python=str(slow), environ={"PATH": "/usr/bin:/bin"}, timeout=4)
    ids = [f.id for f in r.findings]
    assert "verify.interpreter" in ids or "verify.timeout" in ids
    assert r.exit_code == (1 if "verify.interpreter" in ids else 3)
