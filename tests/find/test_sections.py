"""The section-shared reading of ``envlock find`` (envlock/find/sections.py) answers as diff's own
reading: the same table as ``load_toml`` and ``tomllib`` for every text (a header inside a
multi-line string or array, a table defined in two places, a truncated or corrupted section,
JSON), and the same index rows as the plain reading for real manifests, conda manifests and run
records, however many files share which sections."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from envlock.errors import ManifestError
from envlock.find.entry import read_result
from envlock.find.sections import SectionCache
from envlock.manifest import _toml
from envlock.manifest._toml import load_toml

from .conftest import gpu, load, process, set_pip_version

EDGE_TEXTS = {
    "header inside a multi-line string": '[envlock]\nschema = 1\nnote = """\n[pip]\nx = 1\n"""\n[pip]\ny = 2\n',
    "header inside a literal string": "[envlock]\nnote = '''\n[gpu]\n'''\n[gpu]\nz = 1\n",
    "array rows that look like headers": "[a]\nx = [\n[1, 2],\n[b]\n]\n[c]\nz = 1\n",
    "one table in two places": "[a]\nx = 1\n[b]\ny = 1\n[a.c]\nz = 1\n",
    "one table defined twice": "[a]\nx = 1\n[b]\n[a]\ny = 2\n",
    "a dotted root key and its table": "a.x = 1\n[a]\ny = 2\n",
    "root keys before the first table": "title = 't'\n[a]\nx = 1\n[b]\ny = [1, 2]\n",
    "a quoted table name": '["pip"]\nx = 1\n[gpu]\ny = 1\n["gpu2"]\nz = 3\n',
    "an indented table header": "[a]\nx = 1\n  [b]\n  y = 2\n[c]\nz = 3\n",
    "CRLF line ends": "[a]\r\nx = 1\r\n[[b.c]]\r\nn = 1\r\n[[b.c]]\r\nn = 2\r\n",
    "a table, an array of tables, a table of it": "[p]\n[[p.packages]]\nname = 'a'\n[p.packages.git]\nc = 1\n"
                                                 "[[p.packages]]\nname = 'b'\n[q]\n",
    "an array of tables redefined as a table": "[[a]]\nx = 1\n[b]\n[a]\ny = 1\n",
    "a malformed section": "[a]\nx = 1\n[b]\ny = = 2\n[c]\n",
    "an unterminated string at the end": '[a]\nx = 1\n[b]\ny = "abc\n',
    "nested deeper than the limit": "[a]\nx = " + "[" * 120 + "]" * 120 + "\n[b]\n",
    "JSON": '{"envlock": {"schema": 1}, "pip": {"packages": []}}',
    "empty sections": "[a]\n[b]\n[c]\n",
    "comments only between": "# head\n[a]\n# [b]\nx = 1\n#[c]\n[d]\n",
}


def _answer(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", load(text, "f.toml")
    except ManifestError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("case", sorted(EDGE_TEXTS))
def test_a_sectioned_parse_is_load_tomls_parse(case: str) -> None:
    text = EDGE_TEXTS[case]
    want = _answer(load_toml, text)
    cache = SectionCache()
    assert _answer(cache.load, text) == want  # sections parsed now
    assert _answer(cache.load, text) == want  # and taken from the cache
    if want[0] == "ok" and not text.startswith("{"):
        assert want[1] == tomllib.loads(text)  # the standard reader agrees
    else:
        with pytest.raises(ValueError):  # tomllib's TOMLDecodeError and ManifestError
            if text.startswith("{"):
                raise ValueError("JSON: not TOML")
            load_toml(text, "f.toml")


def test_real_manifests_parse_as_load_toml_parses_them(base_manifest: Path, conda_manifest: Path,
                                                       run_dirs: list[Path]) -> None:
    cache = SectionCache()
    texts = [p.read_text() for p in (base_manifest, conda_manifest, *(d / "run.toml" for d in run_dirs))]
    for text in texts * 2:
        assert cache.load(text, "m.toml") == load_toml(text, "m.toml") == tomllib.loads(text)
    # a manifest cut anywhere: the cache (primed with the whole) words the error as load_toml
    text = texts[0]
    for cut in range(len(text) // 7, len(text), len(text) // 7):
        assert _answer(cache.load, text[:cut]) == _answer(load_toml, text[:cut])


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_toml.dumps(data), encoding="utf-8")
    return path


def test_shared_sections_give_the_rows_of_the_plain_reading(base_manifest: Path, conda_manifest: Path,
                                                            run_dirs: list[Path], tmp_path: Path) -> None:
    """Many files sharing sections in every mix, corrupt ones among them: each file's index
    rows are those of diff's plain reading (nothing shared), whatever was read before."""
    files = [base_manifest, conda_manifest, *(d / "run.toml" for d in run_dirs)]
    bad: set[str] = set()
    for i in range(24):
        for src in (base_manifest, conda_manifest):
            d = copy.deepcopy(load(src))
            d["envlock"]["host"] = f"n{i}"
            if i % 2:
                set_pip_version(d, "numpy", ["1.26.4", "2.4.1"][i % 4 // 2])
            if i % 3:
                d["gpu"] = gpu([["8.0"], ["9.0", "8.6"]][i % 2])
            if i % 4 == 1:
                d["process"] = process(tf32=True)
            if i % 5 == 2:
                d.setdefault("env", {"status": "ok", "source": "allow-list"}).setdefault(
                    "vars", {})["SLURM_JOB_ID"] = str(i)
            if i == 7:  # a shared-looking section with one value of the wrong type
                d["gpu"] = gpu(["8.0"])
                d["gpu"]["gpus"][0]["index"] = "zero"
            if i == 9 and "pip" in d:
                d["pip"]["packages"][0]["version"] = 3
            files.append(_write(tmp_path / src.stem / f"r{i}" / "manifest.toml", d))
            if i in (7, 9) and (i == 7 or "pip" in d):
                bad.add(str(files[-1]))
    text = base_manifest.read_text()
    cut = tmp_path / "cut" / "manifest.toml"
    cut.parent.mkdir()
    cut.write_text(text[:text.index('= "', len(text) // 2) + 3])
    files.append(cut)
    bad.add(str(cut))
    errors = set()
    for p in files * 2:  # the second round: every section is shared
        want = read_result(str(p), "sig", plain=True)
        got = read_result(str(p), "sig")
        assert got == want, p
        if got.status == "error":
            errors.add(got.path)
            assert got.error and "\n" not in got.error
    assert errors == bad  # each corrupt one an error: a shared section never hides its fault


def test_results_alike_share_one_fact_set_and_unused_sets_go(base_manifest: Path, tmp_path: Path) -> None:
    """Nodes of one environment hold one fact set in the index; a file that changes gets its
    new set, a set no file names any more is dropped, and every file's facts stay its own."""
    import time

    from envlock.cache import RACY_NS
    from envlock.find import find
    from envlock.find.index import Index

    root = tmp_path / "job"
    for i in range(12):
        d = load(base_manifest)
        d["envlock"]["host"] = f"node{i:02d}"
        d["gpu"] = gpu(["8.0"] if i < 8 else ["9.0"])
        _write(root / f"n{i:02d}" / "manifest.toml", d)
    index = str(tmp_path / "ix.sqlite")

    def sets() -> tuple[int, int]:
        with Index(index) as ix:
            return (ix.db.execute("SELECT count(*) FROM sets").fetchone()[0],
                    ix.db.execute("SELECT count(DISTINCT set_id) FROM set_facts").fetchone()[0])

    assert find([root], None, index=index).count == 12
    assert sets() == (2, 2)
    time.sleep(3 * RACY_NS / 1e9)
    for i in range(8, 12):  # the 9.0 nodes move to 8.6: their set is no file's any more
        d = load(root / f"n{i:02d}" / "manifest.toml")
        d["gpu"] = gpu(["8.6"])
        _write(root / f"n{i:02d}" / "manifest.toml", d)
    time.sleep(3 * RACY_NS / 1e9)
    assert sorted(m.host for m in find([root], "gpu.arch == 8.6", index=index).matches) == [
        f"node{i:02d}" for i in range(8, 12)]
    assert find([root], "gpu.arch == 9.0", index=index).count == 0
    assert sets() == (2, 2)
    with Index(index) as ix:
        for fid, path in ix.scope([str(root)]).items():
            want = read_result(path, None, plain=True)
            assert sorted(ix.facts_of(fid)) == sorted(want.facts + want.shared)
