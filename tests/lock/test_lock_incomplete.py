"""``envlock lock --from-env`` refuses what it cannot lock faithfully, in one line.

An environment that could not be read completely (corrupt ``conda-meta`` records, a
``.dist-info`` without readable METADATA) or whose interpreter hangs or crashes must not give
a lockfile that silently lacks packages, nor uv's multi-line report about a
``requirements.in`` the user never wrote.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock._run import run
from envlock.cli import cli
from envlock.errors import LockError

pytestmark = pytest.mark.usefixtures("offline_pip")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def truncate(path: Path) -> None:
    """Cut a JSON file in the middle, as a full disk or a killed ``conda install`` leaves it."""
    text = path.read_text()
    path.unlink()
    path.write_text(text[: len(text) // 2])


def written(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir()) if out.exists() else []


def test_corrupt_conda_meta_records_fail_the_lock(tmp_path, conda_prefix, h):
    records = sorted((conda_prefix / "conda-meta").glob("*.json"))
    assert len(records) == 8
    broken = records[:6]  # among them libblas, libopenblas, mylab-tools, numpy
    for path in broken:
        truncate(path)
    wheels = tmp_path / "wheels"
    h.make_wheel(wheels, "twine", "4.0.2")
    out = tmp_path / "lock"
    result = invoke("lock", "--from-env", "--prefix", str(conda_prefix), "-o", str(out),
                    "--no-index", "--find-links", str(wheels))
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"Error: cannot lock {conda_prefix}: 6 conda-meta record(s) could not be read "
        f"(first: {broken[0]}: unreadable conda record (")
    assert lines[0].endswith("the lock would lack their packages. Repair or reinstall them, "
                             "then lock again")
    assert written(out) == []


def test_one_corrupt_record_is_enough(tmp_path, conda_prefix):
    numpy = next((conda_prefix / "conda-meta").glob("numpy-*.json"))
    numpy.unlink()
    numpy.write_bytes(b"")  # an empty record: conda was killed while writing it
    result = invoke("lock", "--from-env", "--prefix", str(conda_prefix), "-o",
                    str(tmp_path / "lock"))
    assert result.exit_code == 2
    assert f"1 conda-meta record(s) could not be read (first: {numpy}: " in result.output
    assert written(tmp_path / "lock") == []


@pytest.mark.parametrize("damage", ["missing", "not-utf8"])
def test_unreadable_dist_metadata_fails_the_lock(tmp_path, wheelhouse, h, damage):
    venv = h.make_venv(tmp_path / "env", wheelhouse, "gamma-pkg", "beta==2.5")
    meta = h.site_packages(venv) / "beta-2.5.dist-info" / "METADATA"
    if damage == "missing":
        meta.unlink()
        reason = f"{meta}: missing"
    else:
        meta.unlink()  # uv hard-links from its cache: never write through the link
        meta.write_bytes(b"Metadata-Version: 2.1\nName: beta\nVersion: 2.5\nSummary: caf\xe9\n")
        reason = f"{meta}: not UTF-8"
    out = tmp_path / "lock"
    result = invoke("lock", "--from-env", "--prefix", str(venv), "-o", str(out), "--no-index",
                    "--find-links", str(wheelhouse))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: cannot lock {venv}: 1 pip distribution(s) could not be read (first: beta: "
        f"{reason}); the lock would lack or mis-pin them. "
        "Reinstall them, then lock again"]
    assert written(out) == []


def fake_python(venv: Path, script: str) -> Path:
    """Replace a venv's interpreter by a shell script (a broken or hanging ``bin/python``)."""
    python = venv / "bin" / "python"
    for name in ("python", "python3"):
        (venv / "bin" / name).unlink()
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    os.symlink("python", venv / "bin" / "python3")
    return python


def test_broken_interpreter_is_one_line_before_uv(tmp_path, wheelhouse, h):
    venv = h.make_venv(tmp_path / "env", wheelhouse, "beta==2.5")
    # What a conda env's python prints when its libpython went missing.
    python = fake_python(venv, (
        'echo "$0: error while loading shared libraries: libpython3.11.so.1.0: cannot open '
        'shared object file: No such file or directory" >&2\nexit 127\n'))
    out = tmp_path / "lock"
    result = invoke("lock", "--from-env", "--python", str(python), "-o", str(out),
                    "--no-index", "--find-links", str(wheelhouse))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: cannot lock the pip packages of {venv}: the target interpreter {python} does "
        f"not run (exited with status 127: {python}: error while loading shared libraries: "
        "libpython3.11.so.1.0: cannot open shared object file: No such file or directory)"]
    assert "requirements.in" not in result.output
    assert written(out) == []


def test_hanging_interpreter_is_reported_without_calling_uv(tmp_path, wheelhouse, h):
    from envlock.lock import lock_environment

    venv = h.make_venv(tmp_path / "env", wheelhouse, "beta==2.5")
    python = fake_python(venv, "exec sleep 60\n")
    calls: list[list[str]] = []

    def runner(argv, *, timeout, **kw):  # the real runner, with a 1 s budget for the test
        calls.append(list(argv))
        return run(argv, timeout=min(timeout, 1.0), **kw)

    started = time.monotonic()
    with pytest.raises(LockError) as info:
        lock_environment(tmp_path / "lock", python=str(python), runner=runner,
                         use_pip_config=True)
    assert str(info.value) == (
        f"cannot lock the pip packages of {venv}: the target interpreter {python} did not "
        f"answer within 1 s; check that `{python} -c pass` returns")
    # The snapshot asked the interpreter once; neither pip config nor uv was run after it.
    asked = [c[:2] for c in calls if c[0] == str(python)]
    assert asked == [[str(python), "-c"]]
    assert not [c for c in calls if c[0] == h.uv()]
    assert time.monotonic() - started < 30
    assert written(tmp_path / "lock") == []


def test_conda_only_prefix_locks_without_an_interpreter(tmp_path, conda_prefix):
    """No pip package to pin: the interpreter is not needed, a broken one does not matter."""
    for dist in (conda_prefix / "lib").glob("python3*/site-packages/*.dist-info"):
        if (dist / "INSTALLER").exists() and (dist / "INSTALLER").read_text().strip() != "conda":
            import shutil

            shutil.rmtree(dist)
    fake_python(conda_prefix, "exit 1\n")
    out = tmp_path / "lock"
    result = invoke("lock", "--from-env", "--prefix", str(conda_prefix), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert written(out) == ["conda-lock.yml"]


def test_nothing_found_with_a_broken_interpreter_names_the_interpreter(tmp_path, h):
    """Without an answer from the interpreter the package list is a guess: say why."""
    venv = h.make_venv(tmp_path / "env", tmp_path)  # no packages at all
    python = fake_python(venv, "echo 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    result = invoke("lock", "--from-env", "--prefix", str(venv), "-o", str(tmp_path / "lock"))
    assert result.exit_code == 2
    assert result.output == (
        f"Error: cannot lock the pip packages of {venv}: the target interpreter {python} does "
        "not run (exited with status 1: Fatal Python error: init_fs_encoding)\n")
