"""Choosing the target, and a target interpreter that hangs, crashes or is missing."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import envlock
from envlock.errors import TargetError
from envlock.probes.target import query_interpreter, resolve_target


def _fake_python(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_order_conda_then_venv_then_path(tmp_path: Path, small_venv: Path, conda_prefix: Path) -> None:
    env = {"PATH": str(small_venv / "bin"), "CONDA_PREFIX": str(conda_prefix), "VIRTUAL_ENV": str(small_venv)}
    t = resolve_target(environ=env)
    assert (t.kind, t.prefix, t.chosen_by) == ("conda", str(conda_prefix), "CONDA_PREFIX")
    env.pop("CONDA_PREFIX")
    t = resolve_target(environ=env)
    assert (t.kind, t.prefix, t.chosen_by) == ("venv", str(small_venv), "VIRTUAL_ENV")
    env.pop("VIRTUAL_ENV")
    t = resolve_target(environ=env)
    assert (t.kind, t.python, t.chosen_by) == ("venv", str(small_venv / "bin" / "python3"), "PATH")


def test_bad_options() -> None:
    with pytest.raises(TargetError, match="either --python or --prefix"):
        resolve_target(python="a", prefix="b")
    with pytest.raises(TargetError, match="no such interpreter"):
        resolve_target(python="/nonexistent/python", environ={"PATH": ""})
    with pytest.raises(TargetError, match="no such directory"):
        resolve_target(prefix="/nonexistent/prefix")
    with pytest.raises(TargetError, match="no python3 on PATH"):
        resolve_target(environ={"PATH": "/nonexistent"})


def test_hanging_interpreter_times_out_and_snapshot_completes(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages" / "foo-1.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Name: foo\nVersion: 1.0\n")
    py = _fake_python(prefix / "bin" / "python", "sleep 60")
    target = resolve_target(python=str(py))
    started = time.monotonic()
    info = query_interpreter(target, timeout=0.5)
    assert time.monotonic() - started < 5
    assert info.status == "timeout"
    assert info.source == "prefix layout"
    assert info.path == (str(prefix / "lib" / "python3.11" / "site-packages"),)


def test_crashing_interpreter_is_recorded(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages" / "foo-1.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Name: foo\nVersion: 1.0\n")
    py = _fake_python(prefix / "bin" / "python", "echo 'Segmentation fault' >&2; exit 139")
    m = envlock.snapshot(python=str(py))
    assert m.python.status == "error"
    assert "exited with status 139" in m.python.error
    assert [p.name for p in m.pip.packages] == ["foo"]
    assert any(w.startswith("python: ") for w in m.envlock.warnings)


def test_garbage_answer_is_recorded(tmp_path: Path) -> None:
    py = _fake_python(tmp_path / "env" / "bin" / "python", "echo not-json")
    info = query_interpreter(resolve_target(python=str(py)))
    assert info.status == "error"
    assert "unexpected answer" in info.error


def test_real_interpreter_query() -> None:
    info = query_interpreter(resolve_target(python=sys.executable))
    assert info.status == "ok"
    assert info.version == "{}.{}.{}".format(*sys.version_info[:3])
    assert info.base_prefix == sys.base_prefix
    assert "" not in info.path


def test_prefix_without_python(tmp_path: Path) -> None:
    (tmp_path / "conda-meta").mkdir()
    t = resolve_target(prefix=str(tmp_path))
    assert t.python is None and t.kind == "conda"
    info = query_interpreter(t)
    assert info.status == "absent"
    assert os.fspath(tmp_path) in info.error


def test_wrapper_script_target_uses_interpreter_prefix(tmp_path: Path, small_venv: Path) -> None:
    """A pyenv-style shim (a shell script that execs the real interpreter) is not the env root."""
    shim = _fake_python(tmp_path / "shims" / "python3", f'exec "{small_venv}/bin/python" "$@"')
    m = envlock.snapshot(python=str(shim), stack=False, libraries=False)
    assert m.target.prefix == str(small_venv)
    assert m.target.kind == "venv"
    assert m.target.python == str(shim)
    assert "alpha" in {p.name for p in m.pip.packages}


def test_stale_activation_variable_is_said(small_venv: Path) -> None:
    env = {"PATH": str(small_venv / "bin"), "CONDA_PREFIX": "/nonexistent/env"}
    t = resolve_target(environ=env)
    assert t.chosen_by == "PATH"
    assert t.skipped == ("CONDA_PREFIX=/nonexistent/env is not a directory; ignored",)
    m = envlock.snapshot(environ={**os.environ, **env}, stack=False, libraries=False)
    assert "target: CONDA_PREFIX=/nonexistent/env is not a directory; ignored" in m.envlock.warnings


def test_cached_query_is_invalidated_by_a_new_pth_file(tmp_path: Path, small_venv: Path) -> None:
    """The interpreter's answer is reused only while sys.path's directories are unchanged."""
    from envlock.probes.target import query_interpreter_cached

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    target = resolve_target(python=str(small_venv / "bin" / "python"))
    first = query_interpreter_cached(target, environ=env)
    assert first.status == "ok"
    assert list((tmp_path / "cache" / "envlock" / "python-query").glob("*.json"))
    assert query_interpreter_cached(target, environ=env) == first
    extra = tmp_path / "extra"
    extra.mkdir()
    site = Path(first.path[-1])
    pth = site / "zz-envlock-test.pth"
    pth.write_text(str(extra) + "\n")
    try:
        again = query_interpreter_cached(target, environ=env)
        assert str(extra) in again.path
    finally:
        pth.unlink()
    assert str(extra) not in query_interpreter_cached(target, environ=env).path


@pytest.mark.parametrize("kind", ["fifo", "not-executable", "directory-link"])
def test_python_that_cannot_be_an_interpreter_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO (opening it would wait forever), a file without execute permission or a directory
    given as --python: one line naming what it is, before anything opens or runs it."""
    import time

    from envlock.errors import TargetError
    from envlock.probes.target import resolve_target

    p = tmp_path / "python"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "not-executable":
        p.write_text("#!/bin/sh\n")
    else:
        (tmp_path / "d").mkdir()
        p.symlink_to(tmp_path / "d")
    t0 = time.monotonic()
    with pytest.raises(TargetError, match="not an interpreter"):
        resolve_target(python=str(p), environ={})
    assert time.monotonic() - t0 < 1
