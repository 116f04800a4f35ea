"""``envlock find``'s operands in each fact's own order, and what is refused before anything is
read: an operand the order cannot read (PEP 440 through packaging, conda's order through
py-rattler: the oracles), ``===`` (PEP 440's arbitrary equality), a mistyped WHERE, an
``--index`` in a directory that does not exist.  Real manifests: the snapshots of
``conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet

from envlock.errors import EnvlockError
from envlock.find import find
from envlock.find.query import Cond, parse

from .conftest import envlock_cmd, load, set_pip_version
from .test_find import _expected, _got, _pip, _spec


def _one_error(r: Any, start: str) -> str:
    """The single ``Error:`` line of a refused command (exit status 2, nothing on stdout)."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(start), r.stderr
    return str(r.stderr)


def test_a_pypi_operand_pep440_cannot_read_is_one_error(results: Path, index_file: str) -> None:
    for query, spec in (("torch < banana", "<banana"), ("torch ~= 2", "~=2"),
                        ("numpy == banana", "==banana"), ("torch >= 2.13.0+cpu", ">=2.13.0+cpu")):
        with pytest.raises(InvalidSpecifier):  # packaging refuses it: no PEP 440 specifier
            Specifier(spec)
        r = envlock_cmd("find", str(results), query, "--index", index_file)
        err = _one_error(r, f"Error: query: {query}: ")
        name = query.split()[0]
        assert f"package:{name} is a PyPI package" in err, err
        if spec == "~=2":
            assert "'~=2' is not allowed: a compatible release (~=) needs at least two release segments" in err
        elif spec == ">=2.13.0+cpu":
            assert "local version label" in err
        else:
            assert "'banana' is not a PEP 440 version" in err
    # the operands packaging reads still answer as it answers
    for name, op, ref in (("torch", "~=", "2.13"), ("numpy", "~=", "1.26"), ("torch", "==", "2.13.*")):
        want = _expected(results, lambda d, s=f"{op}{ref}", n=name: _spec(s, _pip(d, n)))
        assert want and _got(results, f"{name} {op} {ref}", index_file) == want, (name, op, ref)


def test_a_conda_operand_in_condas_order(conda_manifest: Path, variant: Any, tmp_path: Path,
                                        index_file: str) -> None:
    """conda orders ``banana`` and reads ``~=2`` (py-rattler, the oracle): answers, not errors;
    what neither PEP 440 nor conda reads is refused before any file is read."""
    from rattler import Version as CondaVersion, VersionSpec
    from rattler.exceptions import InvalidVersionSpecError

    pkg = load(conda_manifest)["conda"]["packages"][0]["name"]
    versions = ["1.1.1", "2.5", "3.0.13_1", "alpha"]
    for i, v in enumerate(versions):
        def edit(d: dict[str, Any], v: str = v) -> None:
            d["conda"]["packages"][0]["version"] = v
        variant(conda_manifest, f"c/{i}/manifest.toml", edit)
    root = tmp_path / "c"
    err = _one_error(envlock_cmd("find", str(root), f"{pkg} < 1..2", "--index", index_file),
                     f"Error: query: {pkg} < 1..2: '1..2' is not a PEP 440 version, nor a conda version")
    with pytest.raises(InvalidVersionSpecError):  # py-rattler refuses it too
        VersionSpec("<1..2", strict=False)
    assert "Traceback" not in err and not os.path.exists(index_file)  # refused before the scan
    for spec in ("<banana", "~=2", ">=2.5", "==alpha"):
        want = sorted(str(root / f"{i}/manifest.toml") for i, v in enumerate(versions)
                      if VersionSpec(spec, strict=False).matches(CondaVersion(v)))
        op = next(o for o in ("~=", "==", ">=", "<") if spec.startswith(o))
        r = envlock_cmd("find", str(root), f"{pkg} {op} {spec[len(op):]}", "--index", index_file,
                        "--format", "json")
        assert r.returncode == (0 if want else 1), r.stderr
        assert _got(root, f"{pkg} {op} {spec[len(op):]}", index_file) == want, spec
    _one_error(envlock_cmd("find", str(root), f"{pkg} === 2.5", "--index", index_file),
               f"Error: query: {pkg} === 2.5: === is PEP 440's arbitrary equality, for PyPI packages; "
               f"conda's version specs have none (package:{pkg} is a conda package")


def test_another_version_fact_refuses_what_pep440_cannot_read(conda_manifest: Path, index_file: str) -> None:
    """A BLAS implementation's version (``[blas]`` of the conda fixture) orders as PEP 440 where
    it parses: ``< banana`` is refused, ``>= V`` answers as packaging does."""
    version = load(conda_manifest)["blas"]["libraries"][0]["version"]
    root = conda_manifest.parent
    _one_error(envlock_cmd("find", str(root), "blas.version < banana", "--index", index_file),
               "Error: query: blas.version < banana: 'banana' is not a PEP 440 version "
               "(blas:conda is compared in PEP 440 order)")
    for op, ref in ((">=", version), ("<", version), (">=", "0.3")):
        want = [str(conda_manifest)] if SpecifierSet(f"{op}{ref}").contains(version) else []
        assert _got(root, f"blas.version {op} {ref}", index_file) == want, (op, ref)


def test_arbitrary_equality_is_the_version_text(results: Path, base_manifest: Path, variant: Any,
                                                index_file: str, tmp_path: Path) -> None:
    """``===`` (PEP 440, "Arbitrary equality"): the version text, as packaging compares it —
    ``1.10.2.0`` is ``== 1.10.2`` and not ``=== 1.10.2``."""
    assert parse("torch === 3") == Cond("torch", "===", "3")
    variant(base_manifest, "results/padded/manifest.toml", lambda d: set_pip_version(d, "torch", "1.10.2.0"))
    for query in ("torch === 1.10.2", "torch == 1.10.2", "torch === 1.10.2.0", "torch === 2.13.0+CPU",
                  "torch === 2.13.0"):
        spec = query.split(" ", 1)[1].replace(" ", "")
        want = _expected(results, lambda d, s=spec: SpecifierSet(s).contains(_pip(d, "torch") or "",
                                                                             prereleases=True))
        assert _got(results, query, index_file) == want, query
    assert _got(results, "torch === 1.10.2", index_file) != _got(results, "torch == 1.10.2", index_file)
    assert _got(results, "torch === 2.13.0", index_file) == []
    # a recorded version that is no PEP 440 version: === matches its text, == cannot read it
    custom = variant(base_manifest, "results/custom/manifest.toml",
                     lambda d: set_pip_version(d, "torch", "1.0-custom"))
    assert SpecifierSet("===1.0-custom").contains("1.0-custom")
    assert _got(results, "torch === 1.0-custom", index_file) == [str(custom)]
    _one_error(envlock_cmd("find", str(results), "torch == 1.0-custom", "--index", index_file),
               "Error: query: torch == 1.0-custom: '1.0-custom' is not a PEP 440 version")
    fresh = str(tmp_path / "fresh.sqlite")
    for query in ("gpu.arch === 8.0", "os === linux", "CUBLAS_WORKSPACE_CONFIG === :4096:8"):
        name = query.split()[0]
        _one_error(envlock_cmd("find", str(results), query, "--index", fresh),
                   f"Error: query: {query}: === is PEP 440's arbitrary equality, for PyPI package "
                   f"versions; {name} is not a package")
    assert not os.path.exists(fresh)
    _one_error(envlock_cmd("find", str(results), "platform:os === linux", "--index", index_file),
               "Error: query: platform:os === linux: === is PEP 440's arbitrary equality")


def test_a_bad_query_or_where_fails_before_anything_is_read(results: Path, tmp_path: Path) -> None:
    """The query is parsed and checked, and WHERE found, before any file is read: the index is
    never even created."""
    index = str(tmp_path / "ix.sqlite")
    for query, start in (("numpy <", "Error: query: numpy < needs a value"),
                         ("gpu.arch >= banana", "Error: query: gpu.arch >= banana: 'banana' is not a compute capability"),
                         ("torch.tf32.matmul < true", "Error: query: torch.tf32.matmul < true: a boolean compares with == and != only"),
                         ("torch.deterministic == maybe", "Error: query: torch.deterministic == maybe: 'maybe' is not a boolean"),
                         ("gpu.driver < 5x5", "Error: query: gpu.driver < 5x5: '5x5' is not a PEP 440 version"),
                         ("(numpy < 2", "Error: query: missing ')'")):
        _one_error(envlock_cmd("find", str(results), query, "--index", index), start)
        with pytest.raises(EnvlockError):
            find([results], query, index=index)
    # a mistyped WHERE in the directory holding the results: refused, "." never scanned
    for bad, args in (("resultz", ("resultz", "numpy < 2")), ("resultz", ("resultz", "numpy", "<", "2")),
                      ("resultz/", ("resultz/", "numpy < 2")), ("resultz", ("results", "resultz", "numpy < 2"))):
        _one_error(envlock_cmd("find", *args, "--index", index, cwd=tmp_path),
                   f"Error: {bad}: no such file or directory")
    assert not os.path.exists(index)
    # a fact followed by the query's own words is the query
    r = envlock_cmd("find", "results", "torch", "unset", "or", "numpy", "<", "2", "--index", index,
                    "--format", "json", cwd=tmp_path)
    want = _expected(results, lambda d: _pip(d, "torch") is None or _spec("<2", _pip(d, "numpy")))
    assert r.returncode == 0 and r.stdout.count('"path"') == len(want) > 0, r.stderr
    # a query of several words without WHERE is still the query (WHERE is .)
    r = envlock_cmd("find", "torch", "<", "1.12", "--index", index, "--format", "json", cwd=results)
    assert r.returncode == 0, r.stderr
    want = _expected(results, lambda d: _spec("<1.12", _pip(d, "torch")))
    assert len(want) == r.stdout.count('"path"') > 0


def test_the_index_directory_must_exist(results: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "deeper"
    index = missing / "ix.sqlite"
    _one_error(envlock_cmd("find", str(results), "numpy < 2", "--index", str(index)),
               f"Error: --index {index}: directory {missing} does not exist (create it first)")
    with pytest.raises(EnvlockError, match="does not exist"):
        find([results], "numpy < 2", index=str(index))
    assert not (tmp_path / "nope").exists()
    r = envlock_cmd("find", "--help")
    assert "in a directory that exists" in " ".join(r.stdout.split())
    # the default index, in the user's cache, is created with its directory
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = envlock_cmd("find", str(results), "numpy < 2", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cache" / "envlock" / "find" / "index.sqlite").is_file()
