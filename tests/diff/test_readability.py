"""The text table stays one line per fact at 100 columns, and raw generic keys rank last."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import diff
from envlock.diff.engine import PairDiff
from envlock.render.difftext import ellipsize, layout_columns, render_text

from .conftest import CONDA_PACKAGES, PREFIX, build_manifest, replace

MODULES = "/cvmfs/soft.computecanada.ca/easybuild/software/2023/x86-64-v3/Compiler/gcccore"


def _libraries(gomp: str) -> dict[str, Any]:
    """A ``[libraries]`` table: libgomp from the conda env, or shadowed by a module tree."""
    rows = [{"soname": "libopenblas.so.0", "path": f"{PREFIX}/lib/libopenblas.so.0",
             "realpath": f"{PREFIX}/lib/libopenblas.so.0", "owner": "libopenblas",
             "owner-kind": "conda"}]
    if gomp == "conda":
        rows.append({"soname": "libgomp.so.1", "path": f"{PREFIX}/lib/libgomp.so.1",
                     "realpath": f"{PREFIX}/lib/libgomp.so.1.0.0", "owner": "libgomp",
                     "owner-kind": "conda"})
    else:
        rows.append({"soname": "libgomp.so.1", "path": f"{MODULES}/gcc/12.3/lib64/libgomp.so.1",
                     "realpath": f"{MODULES}/gcc/12.3/lib64/libgomp.so.1.0.0"})
    return {"libraries": {"status": "ok", "source": "loader model", "resolved": rows}}


def test_long_file_names_and_paths_stay_on_one_line(write, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    write("vm-nojob.toml", build_manifest(host="vm", stack=_libraries("conda")))
    write("gra-login3-with-modules.toml", build_manifest(
        host="gra", stack=_libraries("module"),
        conda=replace(CONDA_PACKAGES, pandas=("2.1.4", "py311h320fe9a_0"))))
    result = diff(["vm-nojob.toml", "gra-login3-with-modules.toml"])
    console = Console(file=io.StringIO(), width=100, highlight=False, soft_wrap=False,
                      color_system=None)
    render_text(result, console, cut=True)  # a terminal: cells are cut to fit
    lines = console.file.getvalue().splitlines()
    table = lines[lines.index("Differences (2)") + 1:]
    assert max(len(x) for x in table) <= 100
    head = table[0].split()
    assert head == ["area", "key", "vm-nojob.toml", "gra-login3-with-modules.toml", "change",
                    "class"]
    rows = {r.split()[1]: r for r in table[2:4]}
    assert rows["pandas"].split()[:4] == ["package", "pandas", "2.2.1", "2.1.4"]
    gomp = rows["libgomp.so.1"]
    # the unowned module file: its start and its file name survive, the middle is elided
    assert "conda package libgomp" in gomp
    cell = gomp[gomp.index("unowned"):].split("  ")[0]
    assert cell == "unowned fi…/libgomp.so.1.0.0"


def test_layout_never_wraps_and_ellipsizes_in_the_middle() -> None:
    path = "/home/ana/envs/proj/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
    lines = layout_columns(["area", "key", "a-very-long-input-name.toml", "b.toml", "change"],
                           [["libraries", "libtorch_cpu.so", path, "(absent)", "removed"]], 75)
    assert len(lines) == 3
    assert all(len(x) <= 75 for x in lines)
    assert lines[0].split()[2] == "a-very-long-input-name.toml"
    assert lines[2].split()[2] == "/home/ana/e…/libtorch_cpu.so"
    assert ellipsize(path, 20) == "/ho…/libtorch_cpu.so"
    assert ellipsize("1 × NVIDIA GeForce RTX 3090", 20) == "1 × NVIDIA… RTX 3090"
    assert ellipsize("short", 20) == "short"
    # a cut cell keeps its versions whole
    cell = ellipsize("openblas 0.3.21 (ilp64)", 20)
    assert len(cell) <= 20 and "0.3.21" in cell
    cell = ellipsize("13.0.96 (pip) 13.0.96 (toolkit)", 20)
    assert len(cell) <= 20 and cell.count("13.0.96") == 2


def test_piped_output_is_never_cut(write, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    write("vm-nojob.toml", build_manifest(host="vm", stack=_libraries("conda")))
    write("gra-login3-with-modules.toml", build_manifest(
        host="gra", stack=_libraries("module"),
        conda=replace(CONDA_PACKAGES, pandas=("2.1.4", "py311h320fe9a_0"))))
    res = CliRunner().invoke(cli, ["diff", "vm-nojob.toml", "gra-login3-with-modules.toml",
                                   "--width", "100"])
    assert res.exit_code == 1, res.output
    assert "…" not in res.output
    lines = res.output.splitlines()
    facts = lines[lines.index("Differences (2)") + 1:]
    # too wide for a table at 100 columns: one fact per line, wrapped at spaces
    assert facts[0] == "  package pandas: 2.2.1 → 2.1.4 (minor, domain)"
    assert f"{MODULES}/gcc/12.3/lib64/libgomp.so.1.0.0" in res.output
    assert all(len(x) <= 100 or " " not in x.strip() for x in lines)


def test_generic_table_facts_rank_below_classified_ones(write) -> None:
    # [ldpaths] is a table this envlock has no extractor for (a newer envlock, another branch):
    # its facts are flattened with raw keys and must not lead the explanations.
    def ldpaths(realpath: str) -> dict[str, Any]:
        return {"ldpaths": {"status": "ok", "resolved": [
            {"soname": "libgomp.so.1", "realpath": realpath}]}}

    a = build_manifest(stack=ldpaths(f"{PREFIX}/lib/libgomp.so.1.0.0"))
    b = build_manifest(stack=ldpaths(f"{MODULES}/gcc/12.3/lib64/libgomp.so.1.0.0"),
                       conda=replace(CONDA_PACKAGES, filelock=("3.13.4", "pyhd8ed1ab_0")))
    b["platform"]["kernel"] = "4.18.0-553.el8_10.x86_64"
    result = diff([write("a.toml", a), write("b.toml", b)])
    assert isinstance(result, PairDiff)
    titles = [e.title for e in result.explanations]
    assert titles[0] == "filelock 3.13.1 → 3.13.4 (patch)"          # class other
    assert titles[1].startswith("platform kernel ")                 # plumbing
    assert titles[2].startswith("ldpaths resolved[libgomp.so.1].realpath ")  # generic, last
    assert len(titles) == 3
