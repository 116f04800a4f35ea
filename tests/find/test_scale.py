"""Many results: concurrent finds while a job writes a manifest, ``--group-by environment`` on
a 1,024-node set checked against ``envlock diff``'s N-way comparison, the Parquet export read
back by DuckDB, and the advisories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envlock.find import find
from envlock.find.index import Index
from envlock.manifest import _toml

from .conftest import gpu, load, process, set_pip_version


def _cluster_set(base: Path, root: Path, n: int, deviants: dict[int, Any]) -> None:
    """``n`` node manifests of one Slurm job from the real snapshot ``base``; ``deviants``:
    node number → edit."""
    data = load(base)
    for i in range(n):
        d = json.loads(json.dumps(data))
        d["envlock"]["host"] = f"node{i:04d}"
        d["slurm"] = {"status": "ok", "source": "environment", "scheduler": "slurm", "job-id": "77",
                      "node": f"node{i:04d}", "partition": "gpu", "num-nodes": n}
        d["gpu"] = gpu(["8.0"] * 4)
        d.setdefault("env", {"status": "ok", "source": "allow-list"}).setdefault("vars", {})[
            "OMP_NUM_THREADS"] = "8"
        if i in deviants:
            deviants[i](d)
        p = root / f"node{i:04d}" / "manifest.toml"
        p.parent.mkdir(parents=True)
        p.write_text(_toml.dumps(d), encoding="utf-8")


def test_group_by_environment_names_the_deviants_as_the_n_way_diff(base_manifest: Path, tmp_path: Path) -> None:
    from envlock.diff import diff
    from envlock.find.group import group_by_environment

    root = tmp_path / "job"

    def old_driver(d: dict[str, Any]) -> None:
        d["gpu"] = gpu(["8.0"] * 4, driver="535.104.05")

    def threads(d: dict[str, Any]) -> None:
        d["env"]["vars"]["OMP_NUM_THREADS"] = "1"

    def numpy(d: dict[str, Any]) -> None:
        set_pip_version(d, "numpy", "2.4.1")

    deviants = {17: old_driver, 500: old_driver, 733: threads, 1000: numpy}
    _cluster_set(base_manifest, root, 1024, deviants)
    index = str(tmp_path / "ix.sqlite")
    answer = find([root], None, index=index)
    assert answer.searched == 1024
    with Index(index) as ix:
        clusters = group_by_environment(ix, answer.ids)
    oracle = diff([str(p) for p in sorted(root.rglob("manifest.toml"))])
    # the N-way diff's deviants, each with its differing facts and values
    want = {d.b.label: sorted((c.area, c.key, str(c.values[0]), str(c.values[1])) for c in d.changes)
            for d in oracle.deviants}
    assert sorted(want) == ["node0017", "node0500", "node0733", "node1000"]
    assert clusters[0].size == 1020
    got = {}
    for c in clusters[1:]:
        changes = sorted((x.area, x.key, str(x.values[0]), str(x.values[1])) for x in c.diff.changes)
        for label in c.labels:
            got[label] = changes
    assert got == want
    assert sorted(c.size for c in clusters[1:]) == [1, 1, 2]
    # and the explanations are diff's own, ranked as it ranks them
    by_label = {d.b.label: [e.title.split(": ", 1)[0] for e in d.explanations] for d in oracle.deviants}
    for c in clusters[1:]:
        heads = [e.title.split(": ", 1)[0] for e in c.explanations]
        assert heads == by_label[c.labels[0]]
        if c.size == 1:  # one node: word for word what diff says of it
            oracle_dev = next(d for d in oracle.deviants if d.b.label == c.labels[0])
            assert [e.title for e in c.explanations] == [e.title for e in oracle_dev.explanations]


def test_parquet_export_read_by_duckdb_answers_as_the_index(base_manifest: Path, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    root = tmp_path / "res"
    versions = ["1.24.4", "1.26.4", "2.0.1", "2.4.1"]
    for i in range(12):
        d = load(base_manifest)
        set_pip_version(d, "numpy", versions[i % 4])
        d["envlock"]["host"] = f"h{i}"
        d["gpu"] = gpu([["7.5"], ["8.0"], ["9.0", "8.6"]][i % 3])
        if i % 2:
            d["process"] = process(tf32=i % 4 == 1)
        d["envlock"]["created"] = f"2026-{1 + i:02d}-01T10:00:00Z"
        d["frameworks"] = {"status": "ok", "source": "dist-info", "packages": [
            {"name": "torch", "version": "2.13.0", "build": "cuda" if i % 3 else "cpu"}]}
        d.setdefault("env", {"status": "ok", "source": "allow-list"}).setdefault("vars", {})[
            "OMP_NUM_THREADS"] = str([1, 8][i % 2])
        p = root / f"r{i}" / "manifest.toml"
        p.parent.mkdir(parents=True)
        p.write_text(_toml.dumps(d), encoding="utf-8")
    index = str(tmp_path / "ix.sqlite")
    out = tmp_path / "facts.parquet"
    from click.testing import CliRunner

    from envlock.cli import cli

    res = CliRunner().invoke(cli, ["find", str(root), "--index", index, "--export", str(out)])
    assert res.exit_code == 0, res.output
    con = duckdb.connect()
    con.execute(f"CREATE VIEW f AS SELECT * FROM read_parquet('{out}')")
    pairs = {
        "numpy < 2": "fact = 'package:numpy' AND release < [2, 0, 0, 0, 0, 0]",
        "numpy >= 1.26": "fact = 'package:numpy' AND release >= [1, 26, 0, 0, 0, 0]",
        "gpu.arch >= sm_80": "fact = 'gpu:compute-capability' AND number >= 8.0",
        "gpu.arch == 8.6": "fact = 'gpu:compute-capability' AND number = 8.6",
        "torch.tf32.matmul == true": "fact = 'process:torch.allow-tf32-matmul' AND flag",
        "host == h1": "fact = 'result:host' AND value = 'h1'",
        "host == h1*": "fact = 'result:host' AND value LIKE 'h1%'",
        "numpy ~= 1.26": "fact = 'package:numpy' AND release >= [1, 26, 0, 0, 0, 0] "
                         "AND release < [2, 0, 0, 0, 0, 0]",
        "torch.build == cuda": "fact = 'frameworks:torch.build' AND value = 'cuda'",
        "OMP_NUM_THREADS == 8": "fact = 'env:OMP_NUM_THREADS' AND value = '8'",
        "time >= 2026-06": "fact = 'result:time' AND value >= '2026-06'",
    }
    # and/or/not: the set operations over the single facts' answers
    every = "SELECT DISTINCT path FROM f"
    pairs["numpy < 2 and gpu.arch >= sm_80"] = (
        f"path IN (SELECT path FROM f WHERE {pairs['numpy < 2']}) AND "
        f"path IN (SELECT path FROM f WHERE {pairs['gpu.arch >= sm_80']})")
    pairs["not (numpy < 2) or torch.build == cuda"] = (
        f"path NOT IN (SELECT path FROM f WHERE {pairs['numpy < 2']}) OR "
        f"path IN (SELECT path FROM f WHERE {pairs['torch.build == cuda']})")
    for query, where in pairs.items():
        sqlite = sorted(m.path for m in find([root], query, index=index).matches)
        duck = sorted(r[0] for r in con.execute(f"{every} WHERE {where}").fetchall())
        assert sqlite and duck == sqlite, query
        assert len(sqlite) < 12, query  # each selects some, not all
    # one row per result × fact (a set-valued fact: one per member)
    n_results = con.execute("SELECT count(DISTINCT path) FROM f").fetchone()[0]
    assert n_results == 12
    with Index(index) as ix:
        total = sum(len(ix.facts_of(fid)) for fid in ix.scope([str(root)]))
    members = con.execute("SELECT count(*) FROM f").fetchone()[0]
    sets = con.execute("SELECT count(DISTINCT (path, fact)) FROM f").fetchone()[0]
    assert sets == total and members >= total


def test_advisories_parse_and_find_what_they_say(base_manifest: Path, tmp_path: Path) -> None:
    from envlock.find.advisories import load_advisories
    from envlock.find.query import parse

    advisories = load_advisories()
    assert len(advisories) >= 5
    assert all(a.source.startswith("https://") and parse(a.query) for a in advisories)
    root = tmp_path / "res"
    cases = {"old-ampere": ("1.10.2", ["8.0"], None), "old-ampere-off": ("1.10.2", ["8.0"], False),
             "old-volta": ("1.10.2", ["7.0"], None), "new-ampere": ("2.13.0", ["8.0"], None)}
    for name, (torch, cc, tf32) in cases.items():
        d = load(base_manifest)
        set_pip_version(d, "torch", torch)
        d["gpu"] = gpu(cc)
        if tf32 is not None:
            d["process"] = process(tf32=tf32)
        p = root / name / "manifest.toml"
        p.parent.mkdir(parents=True)
        p.write_text(_toml.dumps(d), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "envlock", "find", str(root), "--advisories", "--format",
                        "json", "--index", str(tmp_path / "ix.sqlite")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    doc = {a["id"]: sorted(Path(m["path"]).parent.name for m in a["matches"])
           for a in json.loads(r.stdout)["advisories"]}
    assert doc["torch-tf32-matmul-default"] == ["old-ampere"]
    assert doc["torch-tf32-cudnn-default"] == ["new-ampere", "old-ampere"]


WRITER = r'''
import sys, time
path, text = sys.argv[1], open(sys.argv[2]).read()
with open(path, "w") as fh:          # a job writing its manifest in pieces, not atomically
    for i in range(0, len(text), 512):
        fh.write(text[i:i + 512]); fh.flush(); time.sleep(0.01)
'''


def test_two_finds_at_once_while_a_manifest_is_written(base_manifest: Path, tmp_path: Path) -> None:
    root = tmp_path / "res"
    for i in range(40):
        d = load(base_manifest)
        d["envlock"]["host"] = f"h{i}"
        p = root / f"r{i}" / "manifest.toml"
        p.parent.mkdir(parents=True)
        p.write_text(_toml.dumps(d), encoding="utf-8")
    index = str(tmp_path / "ix.sqlite")
    (tmp_path / "w.py").write_text(WRITER)
    late = root / "late" / "manifest.toml"
    late.parent.mkdir()
    writer = subprocess.Popen([sys.executable, str(tmp_path / "w.py"), str(late), str(base_manifest)])
    time.sleep(0.05)
    cmd = [sys.executable, "-m", "envlock", "find", str(root), "python set", "--index", index,
           "--format", "json"]
    finds = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [f.communicate(timeout=120) for f in finds]
    assert writer.wait(timeout=60) == 0
    for f, (out, err) in zip(finds, outs):
        assert f.returncode == 0, err
        assert "Traceback" not in err and "locked" not in err
        doc = json.loads(out)
        paths = {m["path"] for m in doc["matches"]}
        assert {str(root / f"r{i}" / "manifest.toml") for i in range(40)} <= paths
        # the file being written is a result once complete, or one skipped line, never more
        assert paths <= {*(str(root / f"r{i}" / "manifest.toml") for i in range(40)), str(late)}
        assert all(ln.startswith("envlock find: skipped ") for ln in err.splitlines())
    time.sleep(0.05)
    answer = find([root], "python set", index=index)
    assert len(answer.matches) == 41 and not answer.errors
    with Index(index) as ix:
        assert ix.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert ix.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert os.path.exists(index)
