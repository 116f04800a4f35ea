"""``verify --lock`` and ``diff`` refuse what ``uv sync`` refuses of ``--extra``/``--group``/
``--all-extras`` — a name the lock does not declare, and extras its ``conflicts`` declare
incompatible — with one ``Error:`` line and exit 2, as ``restore`` does (one rule:
:meth:`envlock._selection.Requested.resolve`).  The oracle is uv itself (``uv export --frozen``
on uv's own PyTorch recipe, refusing or accepting the same options); pdm's and poetry's names
are read from real locks of the peers cases, each as its own tool names them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock._selection import Requested, check_requested
from envlock.cli import cli
from envlock.errors import ManifestError

from _projectlocks import PEERS, pytorch_project

pytestmark = pytest.mark.skipif(not PEERS.is_dir(), reason="the peers cases are not here")


def _uv_accepts(proj: Path, *args: str) -> bool:
    """Whether ``uv export --frozen ARGS`` of the project accepts the options (tests/formats'
    oracle helper: ``None`` when uv refuses)."""
    from formats.test_uv_export_oracle import _export

    return _export(proj, *args) is not None


@pytest.fixture
def pytorch(tmp_path: Path) -> Path:
    return pytorch_project(tmp_path / "p")


def _one_error(r, *fragments: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.output.count("Error:") == 1 and "Traceback" not in r.output, r.output
    for f in fragments:
        assert f in r.output, r.output


UNKNOWN = [(["--extra", "cu999"], "no extra 'cu999' in this lock (its extras: cpu, cu124; its "
            "groups: none)"),
           (["--group", "docs"], "no group 'docs' in this lock (its extras: cpu, cu124; its "
            "groups: none)")]
CONFLICTING = [["--extra", "cpu", "--extra", "cu124"], ["--all-extras"]]


@pytest.mark.parametrize(("args", "said"), UNKNOWN)
def test_verify_refuses_a_name_the_lock_lacks_as_uv_does(pytorch: Path, venv: Path,
                                                         args: list[str], said: str) -> None:
    assert not _uv_accepts(pytorch, *args)
    r = CliRunner().invoke(cli, ["verify", "--python", str(venv / "bin/python"),
                                 "--lock", str(pytorch / "uv.lock"), *args])
    _one_error(r, f"{pytorch / 'uv.lock'}: {said}")


@pytest.mark.parametrize("args", CONFLICTING)
def test_verify_refuses_conflicting_extras_as_uv_does(pytorch: Path, venv: Path,
                                                      args: list[str]) -> None:
    assert not _uv_accepts(pytorch, *args)
    r = CliRunner().invoke(cli, ["verify", "--python", str(venv / "bin/python"),
                                 "--lock", str(pytorch / "uv.lock"), *args])
    _one_error(r, "extra cpu and extra cu124 are declared conflicting (the lock's conflict set: "
                  "extra cpu, extra cu124); uv sync refuses them together")


def test_an_extra_uv_takes_is_taken(pytorch: Path, venv: Path) -> None:
    assert _uv_accepts(pytorch, "--extra", "cu124")
    r = CliRunner().invoke(cli, ["verify", "--python", str(venv / "bin/python"),
                                 "--lock", str(pytorch / "uv.lock"), "--extra", "cu124"])
    # taken: the verdict is the environment's (this venv's Python is not the lock's >=3.12)
    assert r.exit_code == 1 and "Error:" not in r.output, r.output
    assert "[packages.lock-target]" in r.output and "requires Python >=3.12.0" in r.output


@pytest.mark.parametrize(("args", "said"), [
    *UNKNOWN, *((a, "are declared conflicting") for a in CONFLICTING)])
def test_diff_refuses_them_against_a_manifest_and_another_lock(pytorch: Path, venv: Path,
                                                              tmp_path: Path, args: list[str],
                                                              said: str) -> None:
    from verify.conftest import snapshot_to

    manifest = snapshot_to(venv, tmp_path / "m.toml")
    other = PEERS / "uvlock" / "inline__lock_pytorch_cpu__1__uv.lock"
    for pair in ([str(manifest), str(pytorch / "uv.lock")], [str(pytorch / "uv.lock"), str(other)]):
        r = CliRunner().invoke(cli, ["diff", *pair, *args])
        _one_error(r, f"{pytorch / 'uv.lock'}: ", said)
    r = CliRunner().invoke(cli, ["diff", str(manifest), str(pytorch / "uv.lock"),
                                 "--extra", "cpu"])
    assert r.exit_code in (0, 1) and "read for --extra cpu (as given)" in r.output, r.output


def test_pdm_and_poetry_names_are_their_own_tools() -> None:
    """A pdm.lock's ``[metadata] groups`` (``pdm install -G`` takes an extra and a group alike)
    and a poetry.lock's ``[extras]``: named, taken; another name, refused."""
    from envlock import formats

    pdm = PEERS / "pdmlock" / "pdm-root__pdm.lock"
    poetry = PEERS / "poetrylock" / "installation__extras__poetry.lock"
    if not (pdm.is_file() and poetry.is_file()):
        pytest.skip("the pdm and poetry peers cases are not here")
    import tomllib

    pdm_groups = [g for g in tomllib.loads(pdm.read_text())["metadata"]["groups"]
                  if g != "default"]
    poetry_extras = list(tomllib.loads(poetry.read_text())["extras"])
    assert pdm_groups and poetry_extras
    pdm_lock, poetry_lock = formats.read_lock(pdm), formats.read_lock(poetry)
    for g in pdm_groups:  # pdm install -G NAME: --extra and --group both name a pdm group
        check_requested(Requested(extras=(g,)), pdm_lock, str(pdm))
        check_requested(Requested(groups=(g,)), pdm_lock, str(pdm))
    for x in poetry_extras:
        check_requested(Requested(extras=(x,)), poetry_lock, str(poetry))
    for lock, path in ((pdm_lock, pdm), (poetry_lock, poetry)):
        with pytest.raises(ManifestError, match=r"no extra 'nope' in this lock \(its extras"):
            check_requested(Requested(extras=("nope",)), lock, str(path))
    # a lock that declares no names of its own (a conda-lock's categories) is not checked
    conda_lock = next((PEERS / "condalock").glob("*.yml"))
    check_requested(Requested(extras=("nope",)), formats.read_lock(conda_lock), str(conda_lock))
