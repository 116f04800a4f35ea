"""Files among the results that are no readable regular file: a FIFO, a file over envlock's
input limit, a file that cannot be opened.  Each is one ``skipped`` line, with why; none
hangs the walk (a FIFO is never opened for a blocking read) or stops the answer; and an
index brought up to date incrementally holds what a fresh index of the same files holds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envlock._io import MAX_INPUT_BYTES
from envlock.find import find
from envlock.find.index import Index

from .conftest import load, set_pip_version
from .test_find import _expected, _pip, _spec

#: one query of each kind (docs/find.md): versions, build, compute capability, a record's
#: numerics state, unset, host glob, time, and/or/not.
QUERY_KINDS = ["numpy < 2", "numpy ~= 1.26", "torch.build == cuda", "gpu.arch >= sm_80",
               "torch.tf32.matmul == true", "CUBLAS_WORKSPACE_CONFIG unset", "host == node0*",
               "time >= 2026-11-05", "torch < 1.12 and gpu.arch >= sm_80",
               "not (numpy < 2) or torch.build == cuda"]


def _find_cmd(results: Path, index: str, *pre: str) -> subprocess.CompletedProcess[str]:
    """``envlock find RESULTS "numpy < 2"`` (the real command line; ``pre``: a wrapper such as
    setpriv), with a deadline: a hang fails the test instead of stalling it."""
    return subprocess.run([*pre, sys.executable, "-m", "envlock", "find", str(results), "numpy < 2",
                           "--index", index], capture_output=True, text=True, timeout=120)


def _skipped(stderr: str) -> dict[str, str]:
    lines = stderr.strip().splitlines()
    assert all(ln.startswith("envlock find: skipped ") for ln in lines), stderr
    out = {}
    for ln in lines:
        path, _, why = ln[len("envlock find: skipped "):].partition(": ")
        out[path] = why
    return out


def test_a_fifo_and_an_oversized_file_are_skipped_with_why_and_never_hang(results: Path, index_file: str) -> None:
    want = _expected(results, lambda d: "pip" in d and _spec("<2", _pip(d, "numpy")))  # before the FIFOs
    fifo_named = results / "r0" / "pipe" / "manifest.toml"  # a result's name: would be read
    fifo_named.parent.mkdir()
    os.mkfifo(fifo_named)
    fifo_any = results / "r1" / "queue.json"  # any name: would be sniffed
    os.mkfifo(fifo_any)
    big = results / "r2" / "big" / "manifest.toml"
    big.parent.mkdir()
    with open(big, "wb") as f:  # sparse: over the limit without the disk space
        f.truncate(MAX_INPUT_BYTES + 1)
    for _ in range(2):  # read, then from the index (unchanged): the same lines both times
        r = _find_cmd(results, index_file)
        assert r.returncode == 0, r.stderr
        assert _skipped(r.stderr) == {
            str(fifo_named): "is a FIFO (named pipe), not a regular file",
            str(fifo_any): "is a FIFO (named pipe), not a regular file",
            str(big): f"too large ({MAX_INPUT_BYTES + 1} bytes; envlock reads at most {MAX_INPUT_BYTES})"}
        assert sorted(ln.split()[0] for ln in r.stdout.splitlines()[2:]) == want


def test_an_unreadable_file_is_skipped_with_why(results: Path, index_file: str) -> None:
    pre: list[str] = []
    if os.geteuid() == 0:  # root reads any file: run find without the two capabilities that allow it
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv cannot be denied a read")
        drop = "-dac_override,-dac_read_search"
        pre = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]
    want = _expected(results, lambda d: "pip" in d and _spec("<2", _pip(d, "numpy")))
    named = results / "r3" / "locked" / "manifest.toml"
    named.parent.mkdir()
    shutil.copy(next(results.rglob("manifest.toml")), named)
    other = results / "r4" / "locked.toml"  # any name: cannot even tell whether it is a result
    other.write_text("[envlock]\n")
    for p in (named, other):
        p.chmod(0)
    try:
        r = _find_cmd(results, index_file, *pre)
    finally:
        for p in (named, other):
            p.chmod(0o644)
    assert r.returncode == 0, r.stderr
    assert _skipped(r.stderr) == {str(named): "cannot open (Permission denied)",
                                  str(other): "cannot open (Permission denied)"}
    assert sorted(ln.split()[0] for ln in r.stdout.splitlines()[2:]) == want


def _dump(index: str) -> dict[str, Any]:
    """Every file of an index with its row (less id and signature) and its facts."""
    with Index(index) as ix:
        cols = "path, status, error, kind, time, host, node, job, label, listing, areas, fp"
        rows = {r[0]: r for r in ix.db.execute(f"SELECT {cols} FROM files")}
        ids = dict(ix.db.execute("SELECT path, id FROM files"))
        return {p: (row, sorted(ix.facts_of(ids[p]))) for p, row in rows.items()}


def test_an_incremental_index_answers_as_a_fresh_one(results: Path, tmp_path: Path) -> None:
    from envlock.cache import RACY_NS
    from envlock.manifest import _toml

    index = str(tmp_path / "inc.sqlite")
    find([results], None, index=index)
    time.sleep(3 * RACY_NS / 1e9)
    files = sorted(results.rglob("*.toml"))
    for p in files[:3]:  # changed: another numpy, another host
        d = load(p)
        set_pip_version(d, "numpy", "1.25.2")
        d["envlock"]["host"] = "moved"
        p.write_text(_toml.dumps(d), encoding="utf-8")
    files[3].unlink()
    (results / "new").mkdir()
    shutil.copy(files[4], results / "new" / "manifest.toml")
    (results / "new" / "bad.toml").write_text("[envlock]\nschema = ")
    time.sleep(3 * RACY_NS / 1e9)
    find([results], None, index=index)
    fresh = str(tmp_path / "fresh.sqlite")
    find([results], None, index=fresh)
    assert _dump(index) == _dump(fresh)
    assert len(_dump(index)) == 11  # 10 - 1 + 2 (the bad one kept as an error)
    for q in [*QUERY_KINDS, "numpy == 1.25.2", "host == moved"]:
        a, b = find([results], q, index=index, update=False), find([results], q, index=fresh, update=False)
        assert [m.path for m in a.matches] == [m.path for m in b.matches], q
    assert {m.path for m in find([results], "numpy == 1.25.2", index=index).matches} == {
        str(p) for p in files[:3]}
