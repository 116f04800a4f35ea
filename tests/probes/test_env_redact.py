"""Environment variables by allow-list, and secrets kept out of manifests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import envlock
from envlock.probes.env import probe_env
from envlock.probes.world import World
from envlock.redact import redact_url

SECRETS = {
    "HF_TOKEN": "hf_abcdefSECRET1",
    "WANDB_API_KEY": "wandbSECRET2",
    "AWS_SECRET_ACCESS_KEY": "awsSECRET3",
    "CONDA_TOKEN_X": "condaSECRET4",
    "PIP_INDEX_URL": "https://bob:pipSECRET5@pypi.example.org/simple",
    "CONDA_CHANNEL_URL": "https://conda.anaconda.org/t/tkSECRET6/private",
    "MY_DB_PASSWORD": "dbSECRET7",
    "GITHUB_AUTH": "ghSECRET8",
}


def test_allow_list_and_redaction() -> None:
    env = {
        "OMP_NUM_THREADS": "4", "MKL_CBWR": "AVX2", "CUDA_VISIBLE_DEVICES": "0,1",
        "NPY_DISABLE_CPU_FEATURES": "AVX512_SKX", "PYTHONHASHSEED": "0", "SLURM_JOB_ID": "77",
        "HOME": "/home/alice", "EDITOR": "vim", "SSH_AUTH_SOCK": "/tmp/x",
        "TORCH_HOME": "/scratch/torch", **SECRETS,
    }
    e = probe_env(World(environ=env))
    assert e.vars["OMP_NUM_THREADS"] == "4"
    assert e.vars["MKL_CBWR"] == "AVX2"
    assert e.vars["NPY_DISABLE_CPU_FEATURES"] == "AVX512_SKX"
    assert e.vars["SLURM_JOB_ID"] == "77"
    assert "HOME" not in e.vars and "EDITOR" not in e.vars and "SSH_AUTH_SOCK" not in e.vars
    assert e.vars["PIP_INDEX_URL"] == "https://pypi.example.org/simple"
    assert e.vars["CONDA_CHANNEL_URL"] == "https://conda.anaconda.org/t/<redacted>/private"
    assert e.vars["CONDA_TOKEN_X"] == "<redacted>"
    assert "PIP_INDEX_URL" in e.redacted and "CONDA_TOKEN_X" in e.redacted


def test_user_allow_and_deny() -> None:
    env = {"MYAPP_SEED": "1", "MYAPP_MODE": "x", "OMP_NUM_THREADS": "2", "EXTRA": "y"}
    e = probe_env(World(environ=env), allow=["MYAPP_*", "EXTRA"], deny=["MYAPP_MODE", "OMP_*"])
    assert dict(e.vars) == {"EXTRA": "y", "MYAPP_SEED": "1"}


def test_no_secret_in_any_output(tmp_path: Path, small_venv: Path) -> None:
    """Secret-looking variables and a credentialed remote never reach TOML or JSON."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, timeout=60)
    subprocess.run(["git", "remote", "add", "origin", "https://carol:ghp_REMOTESECRET9@github.com/l/p.git"],
                   cwd=repo, check=True, timeout=60)
    env = {"PATH": "/usr/bin:/bin", **SECRETS, **{f"CUDA_{k}": v for k, v in SECRETS.items()}}
    m = envlock.snapshot(python=str(small_venv / "bin" / "python"), repo=str(repo), environ=env,
                         command=["envlock", "snapshot", "--repo", "https://x:cmdSECRET10@h/r"])
    text = m.dumps("toml") + m.dumps("json")
    for n in range(1, 11):
        assert f"SECRET{n}" not in text
    assert "https://github.com/l/p.git" in text
    assert json.loads(m.dumps("json"))["git"]["remotes"][0]["url"] == "https://github.com/l/p.git"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@host/p", "https://host/p"),
        ("https://ghp_tokenonly@github.com/o/r.git", "https://github.com/o/r.git"),
        ("ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"),
        ("ssh://git:pw@github.com/o/r.git", "ssh://github.com/o/r.git"),
        ("git+ssh://git@github.com/o/r.git@v1", "git+ssh://git@github.com/o/r.git@v1"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://h/simple?token=abc&x=1", "https://h/simple?x=1"),
        ("https://conda.anaconda.org/t/abc/chan/linux-64", "https://conda.anaconda.org/t/<redacted>/chan/linux-64"),
        ("file:///home/me/src", "file:///home/me/src"),
    ],
    ids=["userpass", "token-user", "ssh-user", "ssh-pass", "vcs-ssh", "scp", "query", "conda-token", "file"],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_selection_variables_are_set_apart() -> None:
    e = probe_env(World(environ={"VIRTUAL_ENV": "/v", "PATH": "/v/bin:/usr/bin", "CONDA_PREFIX": "/c",
                   "CONDA_DEFAULT_ENV": "c", "CONDA_SHLVL": "2", "CONDA_PREFIX_1": "/base",
                   "OMP_NUM_THREADS": "2", "CONDA_OVERRIDE_CUDA": "12.4"}))
    assert dict(e.vars) == {"OMP_NUM_THREADS": "2", "CONDA_OVERRIDE_CUDA": "12.4"}
    assert set(e.selection) == {"VIRTUAL_ENV", "PATH", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
                                "CONDA_SHLVL", "CONDA_PREFIX_1"}


def test_tensorflow_by_exact_name_not_terraform() -> None:
    e = probe_env(World(environ={"TF_DETERMINISTIC_OPS": "1", "TF_ENABLE_ONEDNN_OPTS": "0", "XLA_FLAGS": "--x",
                   "TF_CLI_CONFIG_FILE": "/home/u/.terraformrc", "TF_VAR_region": "eu",
                   "TF_LOG": "DEBUG", "XLA_SOMETHING_ELSE": "y"}))
    assert dict(e.vars) == {"TF_DETERMINISTIC_OPS": "1", "TF_ENABLE_ONEDNN_OPTS": "0", "XLA_FLAGS": "--x"}


def test_activated_and_python_snapshots_of_one_venv_do_not_differ(tmp_path: Path, small_venv: Path) -> None:
    """``source venv/bin/activate; envlock snapshot`` vs ``envlock snapshot --python venv/bin/python``
    run from envlock's own venv: the same environment, ``diff`` exit 0."""
    import os
    import sys

    own = Path(sys.prefix)
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    rest = base.get("PATH", "/usr/bin:/bin")
    activated = {**base, "VIRTUAL_ENV": str(small_venv), "PATH": f"{small_venv}/bin:{rest}"}
    from_own = {**base, "VIRTUAL_ENV": str(own), "PATH": f"{own}/bin:{rest}"}

    def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "envlock", *args], check=False, capture_output=True,
                              text=True, timeout=120, env=env, cwd=tmp_path)

    a = run(["snapshot", "-q", "-o", "a.toml"], activated)
    b = run(["snapshot", "-q", "--python", str(small_venv / "bin" / "python"), "-o", "b.toml"], from_own)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ma, mb = envlock.load(str(tmp_path / "a.toml")), envlock.load(str(tmp_path / "b.toml"))
    assert ma.target.chosen_by == "VIRTUAL_ENV" and mb.target.chosen_by == "--python"
    assert ma.env.selection["VIRTUAL_ENV"] == str(small_venv)
    assert mb.env.selection["VIRTUAL_ENV"] == str(own)
    d = run(["diff", "a.toml", "b.toml"], from_own)
    assert d.returncode == 0, d.stdout + d.stderr
