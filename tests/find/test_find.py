"""``envlock find`` on real manifests (snapshots of this test interpreter's venv and of the
conda fixture prefix, with varied facts) and on the run records ``envlock run`` writes.  Each
expected answer is computed from the files' own contents with the field's tools (packaging,
py-rattler), never written down."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.cli import cli
from envlock.find import find
from envlock.find.index import Index

from .conftest import envlock_cmd, load


def _pip(data: dict[str, Any], name: str) -> str | None:
    return next((p["version"] for p in data.get("pip", {}).get("packages", [])
                 if p["name"].lower() == name), None)


def _ccs(data: dict[str, Any]) -> list[float]:
    return [float(g["compute-capability"]) for g in data.get("gpu", {}).get("gpus", [])]


def _spec(spec: str, version: str | None) -> bool:
    """PEP 440's answer (packaging), pre-releases allowed as find allows them."""
    return version is not None and SpecifierSet(spec).contains(version, prereleases=True)


def _expected(root: Path, pred: Any) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.toml")):
        try:
            data = load(p)
        except (ValueError, UnicodeDecodeError):  # tomllib's TOMLDecodeError is a ValueError
            continue  # a corrupted file: no result
        if "envlock" in data and pred(data):
            out.append(str(p))
    return sorted(out)


def _got(root: Path, query: str, index: str) -> list[str]:
    return sorted(m.path for m in find([root], query, index=index).matches)


def test_every_query_kind_matches_what_the_files_say(results: Path, index_file: str) -> None:
    cases = {
        # PEP 440: `< 2` excludes 2.0.0rc1, a pre-release of 2 itself
        "numpy < 2": lambda d: _spec("<2", _pip(d, "numpy")),
        # PEP 440: a pre-release of 2.0.0 is below 2.0.0 and included when asked for
        "numpy >= 2.0.0rc1": lambda d: SpecifierSet(">=2.0.0rc1").contains(_pip(d, "numpy"), prereleases=True),
        "numpy ~= 1.26": lambda d: SpecifierSet("~=1.26").contains(_pip(d, "numpy"), prereleases=True),
        "torch == 2.13.0": lambda d: SpecifierSet("==2.13.0").contains(_pip(d, "torch")),
        "torch < 1.12": lambda d: Version(_pip(d, "torch")) < Version("1.12"),
        "torch.build == cuda": lambda d: d["frameworks"]["packages"][0]["build"] == "cuda",
        "gpu.arch >= sm_80": lambda d: any(c >= 8.0 for c in _ccs(d)),
        "gpu.arch == 8.6": lambda d: 8.6 in _ccs(d),
        "gpu.arch < 80": lambda d: any(c < 8.0 for c in _ccs(d)),
        "torch.tf32.matmul == true": lambda d: d.get("process", {}).get("torch", {}).get("allow-tf32-matmul") is True,
        "CUBLAS_WORKSPACE_CONFIG unset": lambda d: (
            not d.get("process", {}).get("cublas-workspace-config") if "process" in d
            else "CUBLAS_WORKSPACE_CONFIG" not in d["env"]["vars"]),
        "host == node0*": lambda d: d["envlock"]["host"].startswith("node0"),
        # a record's time is its [process] created (when record() ran), else [envlock] created
        "time >= 2026-11-05": lambda d: d.get("process", d["envlock"])["created"] >= "2026-11-05",
        "time < 2026-11-05T12": lambda d: d.get("process", d["envlock"])["created"] < "2026-11-05T12",
        "torch < 1.12 and gpu.arch >= sm_80": lambda d: Version(_pip(d, "torch")) < Version("1.12")
        and any(c >= 8.0 for c in _ccs(d)),
        "not (numpy < 2) or torch.build == cuda": lambda d: not _spec("<2", _pip(d, "numpy"))
        or d["frameworks"]["packages"][0]["build"] == "cuda",
        "python == " + load(next(results.rglob("*.toml")))["python"]["version"]: lambda d: True,
        # a result's own facts (host, time) beside the shared ones, under and/or/not
        "host == node0* and numpy < 2": lambda d: d["envlock"]["host"].startswith("node0")
        and _spec("<2", _pip(d, "numpy")),
        "not host == node01 and gpu.arch >= sm_80": lambda d: d["envlock"]["host"] != "node01"
        and any(c >= 8.0 for c in _ccs(d)),
        "time >= 2026-11-05 or not torch.build == cuda": lambda d: d.get("process", d["envlock"])[
            "created"] >= "2026-11-05" or d["frameworks"]["packages"][0]["build"] != "cuda",
        "not (torch.tf32.matmul == true or host == node09)": lambda d: not (
            d.get("process", {}).get("torch", {}).get("allow-tf32-matmul") is True
            or d["envlock"]["host"] == "node09"),
    }
    for query, pred in cases.items():
        want = _expected(results, pred)
        assert want, query  # each case selects something …
        assert _got(results, query, index_file) == want, query
    assert len(_expected(results, lambda d: _spec("<2", _pip(d, "numpy")))) < 10  # … not all
    # a directory below the indexed root is searched alone, for shared and own facts alike
    deep = results / "deep"
    for query, pred in (("gpu.arch >= sm_80", lambda d: any(c >= 8.0 for c in _ccs(d))),
                        ("not torch.build == cuda", lambda d: d["frameworks"]["packages"][0]["build"] != "cuda"),
                        ("host == node0* or CUBLAS_WORKSPACE_CONFIG unset", lambda d: True)):
        want = _expected(deep, pred)
        assert want and len(want) < len(_expected(results, pred)), query
        assert _got(deep, query, index_file) == want, query


def test_each_match_shows_the_facts_it_matched(results: Path, index_file: str) -> None:
    """The MATCHED column: per result, the value of each fact a condition read, as the file
    records it (a result's own host, a shared package version, "(unset)")."""
    ans = find([results], "host == node0* and torch < 1.12 and CUBLAS_WORKSPACE_CONFIG unset",
               index=index_file)
    assert ans.matches
    for m in ans.matches:
        d = load(Path(m.path))
        facts = dict(m.facts)
        assert facts["result:host"] == d["envlock"]["host"], m
        assert facts["package:torch"] == _pip(d, "torch"), m
        assert facts["CUBLAS_WORKSPACE_CONFIG"] == "(unset)", m


def test_conda_versions_in_condas_order(conda_manifest: Path, variant: Any, tmp_path: Path,
                                        index_file: str) -> None:
    """A conda package's version compares as conda orders it (py-rattler is the oracle):
    ``1.1.1w`` and ``3.0.13_1`` are no PEP 440 versions, and conda still orders them."""
    from rattler import Version as CondaVersion, VersionSpec

    data = load(conda_manifest)
    pkg = data["conda"]["packages"][0]["name"]
    versions = ["1.1.1", "1.1.1w", "3.0.13", "3.0.13_1", "3.1.0"]
    for i, v in enumerate(versions):
        def edit(d: dict[str, Any], v: str = v) -> None:
            d["conda"]["packages"][0]["version"] = v
        variant(conda_manifest, f"c/{i}/manifest.toml", edit)
    for spec in (">=1.1.1k", ">3.0.13", "<3.0.13_1", "==3.0.13_1"):
        want = sorted(str(tmp_path / f"c/{i}/manifest.toml") for i, v in enumerate(versions)
                      if VersionSpec(spec, strict=False).matches(CondaVersion(v)))
        op = next(o for o in ("==", ">=", "<=", ">", "<") if spec.startswith(o))
        assert _got(tmp_path / "c", f"{pkg} {op} {spec[len(op):]}", index_file) == want, spec


def test_a_typo_is_one_error_with_the_nearest_names(results: Path, index_file: str) -> None:
    r = envlock_cmd("find", str(results), "nunpy < 2", "--index", index_file)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "Error: unknown fact 'nunpy' (no indexed result records it); nearest: numpy"]
    r = envlock_cmd("find", str(results), "gpu.arc >= sm_80", "--index", index_file)
    assert r.returncode == 2 and "nearest: gpu.arch" in r.stderr and "Traceback" not in r.stderr
    r = envlock_cmd("find", str(results), "numpy < ", "--index", index_file)
    assert r.returncode == 2 and r.stderr.startswith("Error: query: numpy < needs a value")


def test_corrupted_and_truncated_files_are_one_line_each_and_skipped(results: Path, base_manifest: Path,
                                                                     index_file: str) -> None:
    text = base_manifest.read_text()
    (results / "cut").mkdir()
    # cut just after an opening quote past a third of the file: a truncation inside a string,
    # never valid TOML (a cut between lines can leave a shorter valid manifest)
    cut = text.index('= "', len(text) // 3) + 3
    (results / "cut" / "manifest.toml").write_text(text[:cut])
    (results / "cut" / "run.toml").write_bytes(b"\xff\xfe[envlock]\n")
    (results / "cut" / "empty.json").write_text('{"envlock": ')
    (results / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # not a result: silent
    r = envlock_cmd("find", str(results), "numpy < 2", "--index", index_file)
    want = _expected(results, lambda d: "pip" in d and _spec("<2", _pip(d, "numpy")))
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3 and all(ln.startswith("envlock find: skipped ") for ln in lines), r.stderr
    assert sorted(ln.split()[3].rstrip(":") for ln in lines) == sorted(
        str(results / "cut" / n) for n in ("empty.json", "manifest.toml", "run.toml"))
    assert r.returncode == 0
    got = sorted(ln.split()[0] for ln in r.stdout.splitlines()[2:])
    assert got == want


def test_incremental_by_signature_and_deleted_files_drop_out(results: Path, index_file: str) -> None:
    import time

    from envlock.cache import RACY_NS

    # a file written within one clock tick of the scan is read again next time (racily clean)
    with Index(index_file) as ix:
        assert ix.update([str(results)]).read == 10
        assert ix.update([str(results)]).read <= 10
    time.sleep(3 * RACY_NS / 1e9)
    os.remove(index_file)
    with Index(index_file) as ix:
        first = ix.update([str(results)])
        assert first.read == 10 and first.unchanged == 0
        second = ix.update([str(results)])
        assert second.read == 0 and second.unchanged == 10
    victim = next(p for p in sorted(results.rglob("*.toml")) if _pip(load(p), "numpy") == "1.24.4")
    data = victim.read_text().replace('version = "1.24.4"', 'version = "1.25.2"')
    victim.write_text(data)
    gone = next(p for p in sorted(results.rglob("*.toml")) if p != victim)
    gone.unlink()
    time.sleep(3 * RACY_NS / 1e9)
    with Index(index_file) as ix:
        third = ix.update([str(results)])
        assert (third.read, third.removed, third.unchanged) == (1, 1, 8)
    assert str(gone) not in _got(results, "numpy set", index_file)
    assert _got(results, "numpy == 1.25.2", index_file) == [str(victim)]


def test_run_records_of_envlock_run(run_dirs: list[Path], index_file: str) -> None:
    root = run_dirs[0].parent
    want_failed = _expected(root, lambda d: d.get("run", {}).get("outcome") == "failed")
    assert want_failed == [str(root / "bad" / "run.toml")]
    assert _got(root, "run.outcome == failed", index_file) == want_failed
    assert _got(root, "run:exit-status == 3", index_file) == want_failed
    assert _got(root, "kind == run", index_file) == _expected(root, lambda d: "run" in d)
    # a run record carries its manifest's environment (diff reads it so): same python
    ver = load(root / "ok" / "manifest.toml")["python"]["version"]
    assert _got(root, f"kind == run and python == {ver}", index_file) == _expected(root, lambda d: "run" in d)


def test_json_output_and_exit_status(results: Path, index_file: str) -> None:
    res = CliRunner().invoke(cli, ["find", str(results), "torch < 1.12", "--index", index_file,
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    want = _expected(results, lambda d: Version(_pip(d, "torch")) < Version("1.12"))
    assert [m["path"] for m in sorted(doc["matches"], key=lambda m: m["path"])] == want
    assert all(m["facts"] == {"package:torch": "1.10.2"} for m in doc["matches"])
    assert doc["searched"] == 10
    res = CliRunner().invoke(cli, ["find", str(results), "numpy > 99", "--index", index_file])
    assert res.exit_code == 1 and res.output.startswith("0 of 10 results match")


def test_no_cache_indexes_in_memory(results: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ENVLOCK_NO_CACHE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = envlock_cmd("find", str(results), "numpy < 2", env=env)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "cache").exists()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = envlock_cmd("find", str(results), "numpy < 2", env=env)
    assert (tmp_path / "cache" / "envlock" / "find" / "index.sqlite").is_file()


def test_help_lists_find_and_imports_no_subcommand() -> None:
    import subprocess
    import sys

    code = ("import sys; from envlock.cli import main\n"
            "try:\n main(['--help'])\nexcept SystemExit: pass\n"
            "print([m for m in sys.modules if m.startswith(('envlock.commands.', 'envlock.find'))\n"
            "       and m != 'envlock.commands._common'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "find " in r.stdout and r.stdout.strip().splitlines()[-1] == "[]"


def test_bad_where_and_bad_index_are_one_line(results: Path, tmp_path: Path) -> None:
    r = envlock_cmd("find", str(tmp_path / "nope"), "numpy < 2", "--index", str(tmp_path / "i.sqlite"))
    assert r.returncode == 2 and r.stderr == f"Error: {tmp_path / 'nope'}: no such file or directory\n"
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    r = envlock_cmd("find", str(results), "numpy < 2", "--index", str(bad))
    assert r.returncode == 2 and r.stderr.startswith(f"Error: {bad}: cannot use as envlock find's index")
    assert len(r.stderr.splitlines()) == 1
    r = envlock_cmd("find", str(results), "numpy < 2", "--index", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr
