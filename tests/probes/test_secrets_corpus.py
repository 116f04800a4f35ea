"""One corpus of secrets, every form envlock must not let out, through every output: snapshot
(TOML and JSON), show, diff, libs, and the cache files they leave.  The same corpus drives the
unit tests of :mod:`envlock.redact`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.probes.condameta import parse_history, parse_spec
from envlock.redact import redact_text, redact_url, secret_name

#: (text holding a secret, the secret values that must vanish, what must stay)
CORPUS: list[tuple[str, tuple[str, ...], str]] = [
    ("https://alice:pw1SECRET@pypi.example.org/simple", ("pw1SECRET",), "https://pypi.example.org/simple"),
    ('https://alice:p w"2SECRET@pypi.example.org/simple', ('w"2SECRET', "p w"), "pypi.example.org/simple"),
    ("https://bob:a@b/3SECRET@host.example/x", ("3SECRET", "a@b"), "host.example/x"),
    ("https://ghp_tokenonly4SECRET@github.com/o/r.git", ("4SECRET",), "https://github.com/o/r.git"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA5SECRET&X-Amz-Signature=sig5SECRET&v=1",
     ("AKIA5SECRET", "sig5SECRET"), "b.s3.amazonaws.com/k"),
    ("https://acct.blob.core.windows.net/c/f.whl?sv=2022-11-02&se=2030&sig=Az6SECRET%3D",
     ("Az6SECRET",), "acct.blob.core.windows.net/c/f.whl"),
    ("https://storage.googleapis.com/b/o.whl?X-Goog-Signature=goog7SECRET&X-Goog-Credential=c7SECRET",
     ("goog7SECRET", "c7SECRET"), "storage.googleapis.com/b/o.whl"),
    ("https://h.example/simple?token=tok8SECRET&access_token=at8SECRET&key=key8SECRET&page=2",
     ("tok8SECRET", "at8SECRET", "key8SECRET"), "page=2"),
    ("https://conda.anaconda.org/t/ct-9SECRET/private/linux-64", ("9SECRET",),
     "https://conda.anaconda.org/t/<redacted>/private/linux-64"),
    ("machine pypi.example.org login alice password net10SECRET", ("net10SECRET",), "login alice"),
    ("--find-links https://h/?sig=fl11SECRET https://u:pw11SECRET@h2/x", ("fl11SECRET", "pw11SECRET"),
     "https://h2/x"),
    ("Authorization: Bearer bearer12SECRETvalue", ("bearer12SECRET",), "Authorization: Bearer"),
    ("pip install --password=opt13SECRET pkg", ("opt13SECRET",), "pkg"),
    ("HF_TOKEN=hf_env14SECRETabcdefghijklmn python train.py", ("env14SECRET",), "python train.py"),
]

#: Variables whose *name* makes the whole value secret.
SECRET_NAMES = {"HF_TOKEN": "n1SECRET", "WANDB_API_KEY": "n2SECRET", "AWS_SECRET_ACCESS_KEY": "n3SECRET",
                "MY_DB_PASSWORD": "n4SECRET", "GITHUB_PAT": "n5SECRET", "CUDA_LICENSE_KEY": "n6SECRET",
                "PIP_AUTH_TOKEN": "n7SECRET", "NCCL_IB_SECRET": "n8SECRET", "CONDA_PASSWORD_X": "n9SECRET"}


@pytest.mark.parametrize(("text", "secrets", "kept"), CORPUS, ids=[f"c{i}" for i in range(len(CORPUS))])
def test_corpus_redact_text(text: str, secrets: tuple[str, ...], kept: str) -> None:
    out = redact_text(text)
    for s in secrets:
        assert s not in out, out
    assert kept in out, out
    assert redact_text(out) == out  # idempotent


@pytest.mark.parametrize(("text", "secrets", "kept"), [c for c in CORPUS if c[0].startswith("https")],
                         ids=lambda v: v[:40] if isinstance(v, str) else "")
def test_corpus_redact_url(text: str, secrets: tuple[str, ...], kept: str) -> None:
    """A single URL (spaces and quotes in its password included) through redact_url."""
    out = redact_url(text)
    for s in secrets:
        assert s not in out, out
    assert kept.split("?")[0] in out or kept.split("=")[0] in out, out


def test_names() -> None:
    assert all(secret_name(n) for n in SECRET_NAMES)
    assert not any(secret_name(n) for n in ("PATH", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                                             "PYTHONPATH", "SPATIAL", "PATCH_LEVEL"))


def test_conda_history_url_specs() -> None:
    text = ("# update specs: ['https://user:H1SECRET@conda.example.org/chan::numpy>=1.26', "
            "'https://conda.anaconda.org/t/tk-H2SECRET/private::mylab-tools', 'python=3.11']\n")
    assert parse_history(text) == ("https://conda.anaconda.org/t/<redacted>/private::mylab-tools",
                                   "https://conda.example.org/chan::numpy>=1.26", "python=3.11")
    assert parse_spec("https://h/c/linux-64/zlib-1.3.1-h0_0.conda")[0] == "zlib"


def _envlock(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], check=False, capture_output=True, text=True,
                          timeout=180, env=env, cwd=cwd)


def _all_secrets() -> list[str]:
    out = [s for _, secrets, _ in CORPUS for s in secrets] + list(SECRET_NAMES.values())
    return out + ["H1SECRET", "H2SECRET", "R1SECRET", "D1SECRET", "C1SECRET"]


def _world(tmp_path: Path, conda_prefix: Path) -> tuple[dict[str, str], Path, Path]:
    """A conda prefix, a git checkout and an environment that hold every form of the corpus."""
    # conda: a history with URL specs, a record from a tokened channel, a PEP 610 presigned URL.
    meta = conda_prefix / "conda-meta"
    with open(meta / "history", "a", encoding="utf-8") as fh:
        fh.write("==> 2026-11-30 10:00:00 <==\n# cmd: conda install x\n"
                 "# update specs: ['https://user:H1SECRET@conda.example.org/chan::numpy>=1.26', "
                 "'https://conda.anaconda.org/t/tk-H2SECRET/private::mylab-tools']\n")
    rec = json.loads((meta / "numpy-1.26.4-py311h64a7726_0.json").read_text())
    rec["channel"] = "https://conda.anaconda.org/t/tk-C1SECRET/conda-forge/linux-64"
    rec["url"] = "https://u:C1SECRET@conda.anaconda.org/conda-forge/linux-64/" + rec["fn"]
    (meta / "numpy-1.26.4-py311h64a7726_0.json").write_text(json.dumps(rec))
    site = next((conda_prefix / "lib").glob("python3*/site-packages"))
    dist = site / "presigned-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: presigned\nVersion: 1.0\n\n")
    (dist / "INSTALLER").write_text("pip\n")
    (dist / "direct_url.json").write_text(json.dumps({
        "url": "https://b.s3.amazonaws.com/presigned-1.0-py3-none-any.whl?X-Amz-Signature=D1SECRET"
               "&X-Amz-Credential=D1SECRET", "archive_info": {}}))
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin",
                    'https://carol:R1 "SECRET@github.com/l/p.git'], check=True, timeout=60)
    cache = tmp_path / "cache"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(cache),
           **SECRET_NAMES,
           **{f"PIP_CORPUS_{i}": text for i, (text, _, _) in enumerate(CORPUS)},
           "LD_LIBRARY_PATH": "/opt/x/lib:/srv/https://u:ld15SECRET@h/lib"}
    return env, repo, cache


def _leaks(outs: list[str], where: dict[int, str], cache: Path) -> set[tuple[str, str]]:
    for f in cache.rglob("*") if cache.exists() else ():
        if f.is_file():
            outs.append(f.read_bytes().decode("utf-8", "replace"))
            where[len(outs) - 1] = f"cache {f.relative_to(cache)}"
    return {(s, where.get(i, "snapshot")) for s in [*_all_secrets(), "ld15SECRET"]
            for i, o in enumerate(outs) if s in o}


def test_no_secret_on_disk_or_screen(tmp_path: Path, conda_prefix: Path) -> None:
    """snapshot (TOML, JSON, console), show, diff and the caches a snapshot fills."""
    env, repo, cache = _world(tmp_path, conda_prefix)
    outs = []
    where: dict[int, str] = {}
    for name, fmt in (("a.toml", "toml"), ("b.json", "json")):
        r = _envlock("snapshot", "--prefix", str(conda_prefix), "--repo", str(repo), "--format", fmt,
                     "-o", str(tmp_path / name), "--env-allow", "HF_TOKEN", "--env-allow", "MY_*",
                     "--env-allow", "GITHUB_PAT", "--env-allow", "WANDB_API_KEY",
                     "--env-allow", "AWS_*", env=env)
        assert r.returncode == 0, r.stderr
        outs += [r.stdout, r.stderr, (tmp_path / name).read_text()]
    toml_text = (tmp_path / "a.toml").read_text()
    assert "https://conda.example.org/chan::numpy>=1.26" in toml_text  # parsed as a spec
    assert "https://github.com/l/p.git" in toml_text
    for cmd in (["show", str(tmp_path / "a.toml")],
                ["diff", str(tmp_path / "a.toml"), str(tmp_path / "b.json")]):
        r = _envlock(*cmd, env=env)
        assert "Traceback" not in r.stderr, r.stderr
        outs += [r.stdout, r.stderr]
        where[len(outs) - 1] = where[len(outs) - 2] = cmd[0]
    assert _leaks(outs, where, cache) == set()


def test_no_secret_in_libs_output_or_its_cache(tmp_path: Path, conda_prefix: Path) -> None:
    env, _repo, cache = _world(tmp_path, conda_prefix)
    outs: list[str] = []
    where: dict[int, str] = {}
    for cmd in (["libs", "--prefix", str(conda_prefix), "numpy"],
                ["libs", "--prefix", str(conda_prefix), "--format", "json", "numpy"]):
        r = _envlock(*cmd, env=env)
        assert "Traceback" not in r.stderr, r.stderr
        outs += [r.stdout, r.stderr]
        where[len(outs) - 1] = where[len(outs) - 2] = " ".join(cmd[:4])
    assert _leaks(outs, where, cache) == set()


def test_secret_option_value_in_a_separate_argument() -> None:
    from envlock.redact import redact_argv

    assert redact_argv(["envlock", "snapshot", "--token", "t16SECRET", "--password=p16SECRET", "-o", "x"]) == (
        "envlock", "snapshot", "--token", "<redacted>", "--password=<redacted>", "-o", "x")


def test_fragments_of_a_split_url_are_scrubbed() -> None:
    """LD_LIBRARY_PATH split at ':' cuts a URL's user-info apart; the password piece is still
    found and removed from the text made of the pieces."""
    from envlock.redact import scrub, secret_fragments

    value = "/opt/x/lib:/srv/https://u:ld15SECRET@h/lib:/q?token=tok99SECRET"
    frags = secret_fragments(value)
    assert "ld15SECRET" in frags and "tok99SECRET" in frags
    pieces = "\n".join(value.split(":"))
    out = scrub(pieces, frags)
    assert "SECRET" not in out and "/opt/x/lib" in out
    assert scrub("/usr/lib/x86_64-linux-gnu", frags) == "/usr/lib/x86_64-linux-gnu"


#: (option, whether its name says its value is a credential)
OPTIONS = [
    ("--token", True), ("--api-key", True), ("--apikey", True), ("--secret", True),
    ("--password", True), ("--passwd", True), ("--access-key", True), ("--auth", True),
    ("--hf-token", True), ("--hf_token", True), ("--HF-TOKEN", True), ("-token", True),
    ("--client-secret", True), ("--aws-secret-access-key", True), ("--private-key", True),
    ("--db-password", True), ("--cookie", True), ("--credentials", True), ("-pass", True),
    ("--oauth", True), ("--auth-token", True), ("--passphrase", True), ("--password=x", True),
    ("--tokenizer", False), ("--tokenizer-name", False), ("--max-tokens", False),
    ("--pad-token", False), ("--eos_token", False), ("--token-file", False),
    ("--password-stdin", False), ("--no-auth", False), ("--use-auth-token", False),
    ("--with-token", False), ("--key", False), ("--sort-key", False), ("--author", False),
    ("--access-key-id", False), ("-o", False), ("token", False), ("--", False), ("-", False),
]


@pytest.mark.parametrize(("option", "secret"), OPTIONS, ids=[o for o, _s in OPTIONS])
def test_secret_option_names(option: str, secret: bool) -> None:
    from envlock.redact import secret_option

    assert secret_option(option) is secret


def test_every_credential_option_loses_the_next_argument() -> None:
    """The issue's cases: a credential option's value as its own argv element, for every option
    whose name says it is one; the others keep theirs; ``--x=V`` as before."""
    from envlock.redact import redact_argv

    for option, secret in OPTIONS:
        if not option.startswith("-") or "=" in option:
            continue
        argv = ["python", "train.py", option, "v17SECRET", "--epochs", "3"]
        want = [*argv[:3], "<redacted>" if secret else "v17SECRET", "--epochs", "3"]
        assert list(redact_argv(argv)) == want, option
        joined = " ".join(argv)  # the same rule on a command line as one string (/proc cmdline)
        assert ("v17SECRET" in redact_text(joined)) is not secret, option
        eq = [*argv[:2], f"{option}=v17SECRET", *argv[4:]]
        assert ("v17SECRET" in redact_argv(eq)[2]) is not secret, option
    # the value is replaced whatever it looks like: spaces, a leading dash, an option's shape
    assert redact_argv(["x", "--token", "a b c", "--secret", "-abc", "--password", "--verbose"]) == (
        "x", "--token", "<redacted>", "--secret", "<redacted>", "--password", "<redacted>")
    # a switch before a positional argument leaves it alone; idempotent
    assert redact_argv(["git", "--no-auth", "push"]) == ("git", "--no-auth", "push")
    once = redact_argv(["a", "--token", "t", "--token", "--token", "u"])
    assert once == ("a", "--token", "<redacted>", "--token", "<redacted>", "<redacted>")
    assert redact_argv(once) == once


def test_free_text_options_do_not_hide_a_later_secret() -> None:
    """In text, a non-secret option whose name merely contains a credential word does not swallow
    the ``--token X`` after it."""
    out = redact_text("train --max-tokens 5 --token v18SECRET --auth-type --secret v19SECRET")
    assert out == "train --max-tokens 5 --token <redacted> --auth-type --secret <redacted>"


def test_manifest_writer_redacts_argv_lists_and_the_job_comment() -> None:
    """The last line of defence (every document written passes ``redact_tree``): a list of
    strings is a command line; ``SLURM_JOB_COMMENT`` becomes its digest, stably."""
    import hashlib

    from envlock.redact import free_text_digest, redact_tree, redact_variable

    comment = "run for alice, wandb key 0123456789abcdef my20SECRET"
    tree = redact_tree({"command": ["x", "--api-key", "k20SECRET"], "vars": {"SLURM_JOB_COMMENT": comment},
                        "flags": ["avx2", "fma"]})
    digest = f"<redacted: sha256 {hashlib.sha256(comment.encode()).hexdigest()}, {len(comment)} characters>"
    assert tree == {"command": ["x", "--api-key", "<redacted>"], "vars": {"SLURM_JOB_COMMENT": digest},
                    "flags": ["avx2", "fma"]}
    assert redact_variable("SLURM_JOB_COMMENT", comment) == (digest, True)
    assert free_text_digest(digest) == digest and redact_tree(tree) == tree
