"""Many inputs (issues 24, 25): the streamed N-way diff gives the answer the whole-in-memory
comparison gives; facts without a majority are explained; the majority wording says what
it means."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import _facts, diff, expand_paths, load_inputs
from envlock.diff.engine import ManyDiff, compare_many, unique_labels
from envlock.diff.facts import FactSet, extract, same
from envlock.diff.fleet import FleetReader, read_text
from envlock.diff.impact import load_kb
from envlock.formats import read
from envlock.manifest import _toml

from .conftest import CONDA_PACKAGES, GitInfo, build_manifest, editable, gpu_table, replace
from .test_many import write_cluster

FOREIGN = Path("/work/shared/cases/foreign")
FREEZES = sorted(FOREIGN.glob("*__pip_freeze.txt"))
CPU_FREEZE = Path(__file__).parent / "data" / "cpu-torch_pip_freeze.txt"


def _reference(sets: Sequence[FactSet], globs: Sequence[str]) -> dict[str, Any]:
    """The many-input comparison by its definition, every input's facts in memory: per fact,
    the inputs recording its area, their values grouped with ``same`` in input order, the
    majority when a value has more than half of them."""
    from fnmatch import fnmatchcase

    n = len(sets)
    areas = sorted({a for s in sets for a in s.areas})
    majority_areas = {a for a in areas if sum(s.areas.get(a) == "" for s in sets) * 2 > n}
    keys = sorted({k for s in sets for k in s.facts if k[0] in majority_areas})
    varying, identical = [], 0
    for key in keys:
        if any(fnmatchcase(f"{key[0]}:{key[1]}", g) or fnmatchcase(key[1], g) for g in globs):
            continue
        groups: dict[Any, list[str]] = {}
        for s in sets:
            if s.areas.get(key[0]) != "":
                continue
            v = s.facts.get(key)
            match = next((g for g in groups if g is not None and v is not None and same(g, v)), v)
            groups.setdefault(match, []).append(s.label)
        ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        if len(ranked) == 1:
            identical += 1
            continue
        total = sum(len(ls) for _, ls in ranked)
        varying.append((key, ranked[0][0] if len(ranked[0][1]) * 2 > total else None,
                        [(v, tuple(ls)) for v, ls in ranked]))
    return {"varying": varying, "identical": identical}


def _streamed(result: ManyDiff) -> dict[str, Any]:
    return {"varying": sorted(((v.area, v.key), v.majority if v.has_majority else None,
                               [(x, labels) for x, _, labels in v.values])
                              for v in result.varying),
            "identical": sum(result.identical.values())}


def _check_same(paths: list[Path]) -> ManyDiff:
    """``diff`` (streamed, one input at a time, node manifests through the fleet reader)
    agrees with the definition and with ``compare_many`` of the inputs read whole and held
    in memory, and renders the same JSON."""
    kb = load_kb()
    files = expand_paths(paths)
    streamed = diff(paths)
    assert isinstance(streamed, ManyDiff)
    # every file read whole by its format's reader, every input's facts held in memory
    sets = [_facts(p, read(p), kb, many=True) for p in files]
    unique_labels(sets)
    assert [s.label for s in sets] == [s.label for s in load_inputs(files, kb)]
    assert _streamed(streamed) == {**_reference(sets, kb.noise),
                                   "varying": sorted(_reference(sets, kb.noise)["varying"])}
    held = compare_many(sets, kb, ignore=kb.noise)
    from envlock.render.diffreport import render_json

    assert render_json(streamed, show_all=True) == render_json(held, show_all=True)
    return streamed


def test_streamed_equals_in_memory_on_a_cluster(write, tmp_path: Path) -> None:
    write_cluster(write, tmp_path / "run", odd=5, n=9)
    result = _check_same([tmp_path / "run"])
    assert [d.b.label for d in result.deviants] == ["node05"]


def test_streamed_equals_in_memory_on_real_freezes() -> None:
    result = _check_same([*FREEZES, CPU_FREEZE])
    assert len(result.inputs) == 5


@pytest.fixture(scope="module")
def real_manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A snapshot of this test venv (a real manifest, read back as a dict)."""
    out = tmp_path_factory.mktemp("snap") / "self.toml"
    res = CliRunner().invoke(cli, ["snapshot", "--python", sys.executable, "-o", str(out)])
    assert res.exit_code == 0, res.output
    return _toml.load_file(out)


def _fleet(base: dict[str, Any], directory: Path, n: int,
           deviants: dict[int, Any]) -> None:
    """``n`` node manifests of one job made of ``base``, as ``srun envlock snapshot`` writes
    them (own node name, time and Slurm ids); ``deviants``: node number → a change."""
    import copy

    directory.mkdir(parents=True)
    for i in range(1, n + 1):
        data = copy.deepcopy(base)
        name = f"n{i:03d}"
        data["envlock"]["created"] = f"2026-12-02T22:{i % 60:02d}:00Z"
        data["slurm"] = {"status": "ok", "source": "SLURM_* environment", "job-id": "77",
                         "node": name, "num-nodes": n, "ntasks": n}
        data.setdefault("env", {"status": "ok"}).setdefault("vars", {}).update(
            {"SLURM_JOB_ID": "77", "SLURM_NODEID": str(i - 1), "SLURM_PROCID": str(i - 1)})
        if i in deviants:
            deviants[i](data)
        (directory / f"{name}.toml").write_text(_toml.dumps(data), encoding="utf-8")


def _ld_library_path(data: dict[str, Any]) -> None:
    data["env"]["vars"]["LD_LIBRARY_PATH"] = "/cvmfs/soft.example.org/gcc-9/lib64"


def _older_pip(data: dict[str, Any]) -> None:
    for p in data["pip"]["packages"]:
        if p["name"] == "pip":
            p["version"] = "22.3.1"


def test_streamed_equals_in_memory_on_real_node_manifests(real_manifest, tmp_path: Path) -> None:
    _fleet(real_manifest, tmp_path / "run", 40, {7: _ld_library_path, 30: _older_pip})
    result = _check_same([tmp_path / "run"])
    assert sorted(d.b.label for d in result.deviants) == ["n007", "n030"]
    n7 = next(d for d in result.deviants if d.b.label == "n007")
    assert [(c.area, c.key, c.majority_count) for c in n7.changes] == [
        ("env", "LD_LIBRARY_PATH", 39)]


def test_fleet_reader_reads_each_manifest_as_extract_does(real_manifest, write, tmp_path: Path
                                                          ) -> None:
    """Table by table, cached by text, the facts are those of the whole file."""
    _fleet(real_manifest, tmp_path / "run", 6, {2: _ld_library_path, 4: _older_pip})
    files = sorted((tmp_path / "run").glob("*.toml"))
    files.append(write("c13.toml", build_manifest(extra_pip=[editable(
        "proj", "/home/ana/proj", commit="a" * 40, dirty=True, untracked=2)])))
    files.append(write("gpu.toml", build_manifest(stack=gpu_table("NVIDIA A100-SXM4-80GB", "8.0"))))
    files.append(Path(__file__).parents[1] / "data" / "manifest.example.toml")
    kb = load_kb()
    reader = FleetReader(kb.aliases)
    for path in files + files:  # the second time from the cache
        got = reader.facts(str(path), read_text(str(path)) or "")
        assert got is not None, path
        data, fs, (shared, own) = got
        r = read(path)
        whole = extract(r.data, label="", path=str(path), kind="manifest", aliases=kb.aliases)
        assert data == r.data
        assert (fs.facts, fs.areas, fs.listing, fs.generic) == (
            whole.facts, whole.areas, whole.listing, whole.generic)
        assert {k: v for d in [*shared, own] for k, v in d.items()} == whole.facts


def test_fleet_reader_leaves_what_it_cannot_split_to_the_whole_reader(tmp_path: Path) -> None:
    """A table header inside a multi-line string, a key before the first table, a quoted
    table name: read whole (and a broken file gets the whole reader's error line)."""
    head = '[envlock]\nschema = 1\nversion = "0.1.0"\n'
    cases = {
        "string.toml": head + '[pip]\nstatus = "ok"\nnote = """\n[cpu]\nx = 1\n"""\n',
        "root.toml": 'a = 1\n' + head,
        "quoted.toml": head + '["pip"]\nstatus = "ok"\n',
    }
    reader = FleetReader({})
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert reader.facts(str(tmp_path / name), text) is None, name
    bad = tmp_path / "n3.toml"
    bad.write_text(head + "[cpu]\nlogical-cores = 'many'\n")
    good = tmp_path / "n1.toml"
    good.write_text(head)
    (tmp_path / "n2.toml").write_text(head)
    res = CliRunner().invoke(cli, ["diff", str(good), str(tmp_path / "n2.toml"), str(bad)])
    assert res.exit_code == 2
    assert res.output == (f"Error: {bad}: expected int, got str in 'cpu.logical-cores'\n")


# -- ranking (issue 25: "N-way diffs hide the cause") -----------------------------------------
def test_the_only_cpu_torch_among_five_real_freezes_is_the_first_explanation() -> None:
    """Four real pip freezes (CUDA torch or unlabelled) and a real freeze of a CPU torch:
    torch differs in every input, so no input is "the odd one" by its version, but its
    build does: the CPU one is the first explanation of the output, not a line at the end."""
    result = diff([*FREEZES, CPU_FREEZE])
    assert isinstance(result, ManyDiff)
    first = result.spread[0]
    assert first.id == "torch-variant"
    assert first.title.startswith("torch builds differ: CPU-only on cpu-torch_pip_freeze.txt; ")
    assert "CUDA 12.4 on BELIV-ASU__GLANCE__pip_freeze.txt" in first.title
    assert all(first.score > e.score for d in result.deviants for e in d.explanations)
    res = CliRunner().invoke(cli, ["diff", *map(str, FREEZES), str(CPU_FREEZE), "--width", "200"])
    assert res.exit_code == 1
    import re

    numbered = re.findall(r"^\s+(\d+\. .*)$", res.output, re.MULTILINE)
    assert numbered[0].startswith("1. torch builds differ: CPU-only on cpu-torch_pip_freeze.txt")
    doc = json.loads(CliRunner().invoke(cli, ["diff", *map(str, FREEZES), str(CPU_FREEZE),
                                              "--format", "json"]).output)
    assert doc["no_majority"]["explanations"][0]["id"] == "torch-variant"


def _three(write, directory: Path) -> list[Path]:
    """Three environments as bisect meets them: numpy moved at every step (the culprit),
    and an unrelated package added in the second."""
    out = []
    for i, (numpy, extra) in enumerate((("1.26.4", None), ("2.0.2", "wandb"),
                                        ("2.1.3", None)), 1):
        conda = replace(CONDA_PACKAGES, numpy=(numpy, "py311h64a7726_0"))
        data = build_manifest(host=f"step{i}", conda=conda)
        if extra:
            data["pip"]["packages"].append({"name": "wandb", "version": "0.17.0",
                                            "location": "/opt/conda/envs/proj/lib/python3.11/"
                                            "site-packages", "installer": "pip"})
        out.append(write(f"step{i}.toml", data, directory))
    return out


def test_a_package_that_differs_in_every_input_explains_before_an_added_one(write, tmp_path
                                                                            ) -> None:
    paths = _three(write, tmp_path)
    result = diff(paths)
    assert isinstance(result, ManyDiff)
    (numpy,) = [e for e in result.spread if e.changes[0].key == "numpy"]
    assert numpy.title == ("numpy differs on every input: 1.26.4 on step1; 2.0.2 on step2; "
                           "2.1.3 on step3")
    (wandb,) = [e for d in result.deviants for e in d.explanations if e.changes[0].key == "wandb"]
    assert wandb.title == "step2 has wandb 0.17.0 while 2 others do not have it installed"
    assert numpy.score > wandb.score
    out = CliRunner().invoke(cli, ["diff", *map(str, paths), "--width", "200"]).output
    assert out.index("numpy differs on every input") < out.index("step2 has wandb")


def test_majority_wording_says_what_it_means(write, tmp_path: Path) -> None:
    """"untracked files differ: 2 on 1" and "others have unset" for a package, in words."""
    base = list(CONDA_PACKAGES)
    paths = []
    for i, untracked in enumerate((2, 5, 3), 1):
        git = GitInfo(source="git", path="/home/ana/proj", commit="9" * 40, branch="main",
                      describe="v0.3-4-g9999999", dirty=False, untracked=untracked)
        conda = replace(base, libgfortran5=None) if i == 3 else base
        paths.append(write(f"n{i}.toml", build_manifest(host=f"n{i}", git=git, conda=conda),
                           tmp_path))
    doc = json.loads(CliRunner().invoke(cli, ["diff", *map(str, paths), "--format", "json"]).output)
    (repo,) = doc["code"]
    assert "numbers of untracked files differ: 2 on n1; 5 on n2; 3 on n3" in repo["text"]
    titles = [e["title"] for d in doc["deviants"] for e in d["explanations"]]
    assert any(t.startswith("n3 does not have libgfortran5 installed while 2 others have ")
               for t in titles), titles
    assert not any("have unset" in t for t in titles)
