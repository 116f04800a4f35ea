"""Foreign inputs (fixtures/diff/) and bad inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff import diff, foreign
from envlock.diff.engine import PairDiff
from envlock.diff.facts import Pkg
from envlock.errors import ManifestError

from .conftest import build_manifest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "diff"


def _conda(data: dict, name: str) -> dict:
    return next(p for p in data["conda"]["packages"] if p["name"] == name)


def test_environment_yml_with_builds_and_pip_section() -> None:
    kind, data, listing = foreign.read(FIXTURES / "environment.yml")
    assert (kind, listing) == ("environment.yml", "complete")  # an export: builds everywhere
    assert foreign.read(FIXTURES / "environment-nobuilds.yml")[2] == "partial"
    assert _conda(data, "numpy") == {"name": "numpy", "version": "1.26.4",
                                     "build": "py311h64a7726_0"}
    assert [p["name"] for p in data["pip"]["packages"]] == ["joblib", "scikit-learn",
                                                            "threadpoolctl"]
    assert data["python"]["version"] == "3.11.8"


def test_explicit_list_urls() -> None:
    kind, data, listing = foreign.read(FIXTURES / "explicit.txt")
    assert (kind, listing) == ("conda-explicit", "conda")  # complete for conda, silent on pip
    assert len(data["conda"]["packages"]) == 20
    pip = _conda(data, "pip")
    assert (pip["version"], pip["build"], pip["channel"], pip["subdir"]) == (
        "24.0", "pyhd8ed1ab_0", "conda-forge", "noarch")
    assert _conda(data, "_libgcc_mutex")["build"] == "conda_forge"


@pytest.mark.parametrize(("url", "expected"), [
    ("https://repo.anaconda.com/pkgs/main/linux-64/numpy-base-1.26.4-py311hf175353_0.conda",
     ("numpy-base", "1.26.4", "py311hf175353_0", "pkgs/main", "linux-64")),
    ("https://conda.anaconda.org/t/ab-12345678/mychan/linux-64/foo-1.0-h1234_0.tar.bz2#abc",
     ("foo", "1.0", "h1234_0", "mychan", "linux-64")),
    ("https://user:secret@mirror.example.org/conda/conda-forge/noarch/six-1.16.0-pyh6c4a22f_0.tar.bz2",
     ("six", "1.16.0", "pyh6c4a22f_0", "https://mirror.example.org/conda/conda-forge", "noarch")),
], ids=["defaults", "token", "mirror-credentials"])
def test_conda_url(url: str, expected: tuple[str, ...]) -> None:
    got = foreign.parse_conda_url(url)
    assert (got["name"], got["version"], got["build"], got["channel"], got["subdir"]) == expected
    assert "secret" not in got["url"] and "ab-12345678" not in got["url"]


def test_requirements_pins_and_editable() -> None:
    kind, data, listing = foreign.read(FIXTURES / "requirements.txt")
    # a pip freeze pins every Python distribution installed: what it lacks is absent, except
    # conda packages that are not Python distributions (listing "pip")
    assert (kind, listing) == ("requirements", "pip")
    pkgs = {p["name"]: p for p in data["pip"]["packages"]}
    assert pkgs["torch"]["version"] == "2.2.1+cu121"
    assert pkgs["jinja2"]["version"] == "3.1.3"
    sha = "3f1c2a9e7b6d5c4b3a2918f7e6d5c4b3a2918f7e"
    assert pkgs["mylib"] == {"name": "mylib", "version": f"git {sha}", "origin": "editable",
                             "vcs": "git", "commit": sha,
                             "url": f"git+ssh://git@github.com/ana-lab/mylib.git@{sha}#egg=mylib"}


def test_conda_lock_takes_linux_64() -> None:
    kind, data, _ = foreign.read(FIXTURES / "conda-lock.yml")
    assert kind == "conda-lock"
    assert _conda(data, "numpy")["build"] == "py311h64a7726_0"
    assert _conda(data, "libblas")["build"] == "21_linux64_openblas"
    assert data["pip"]["packages"] == [{"name": "threadpoolctl", "version": "3.3.0"}]
    assert data["conda"]["source"] == "conda-lock (linux-64)"


def test_pylock() -> None:
    kind, data, listing = foreign.read(FIXTURES / "pylock.toml")
    assert (kind, listing) == ("pylock", "complete")
    assert data["pip"]["packages"] == [
        {"name": "numpy", "version": "2.4.1"}, {"name": "scipy", "version": "1.17.0"},
        {"name": "mylib", "version": "0.3.1", "vcs": "git",
         "commit": "3f1c2a9e7b6d5c4b3a2918f7e6d5c4b3a2918f7e"}]


def test_environment_yml_against_explicit_list_finds_the_blas_vendor() -> None:
    result = diff([FIXTURES / "environment.yml", FIXTURES / "explicit.txt"])
    assert isinstance(result, PairDiff)
    assert result.explanations[0].title == (
        "BLAS/LAPACK vendor differs: OpenBLAS in environment.yml, MKL in explicit.txt")
    # an export with build strings is complete: mkl and llvm-openmp are really absent from it
    assert result.a.listing == "complete"
    keys = {c.key for c in result.changes}
    assert {"mkl", "llvm-openmp", "libopenblas", "libblas"} <= keys
    assert result.explanations[0].changes[0].values[1] == Pkg(
        "3.9.0", "21_linux64_mkl", "conda-forge", "conda", "libblas")
    assert result.a.facts[("python", "version")] == "3.11.8"


def test_requirements_against_pylock() -> None:
    result = diff([FIXTURES / "requirements.txt", FIXTURES / "pylock.toml"])
    assert isinstance(result, PairDiff)
    titles = [e.title for e in result.explanations]
    assert "numpy 1.26.4 → 2.4.1 (major)" in titles
    assert "scipy 1.12.0 → 1.17.0 (minor)" in titles
    assert result.b.facts[("package", "numpy")] == Pkg("2.4.1", None, None, "pip", "numpy")


def test_manifest_against_spec_reports_what_cannot_be_compared(write) -> None:
    path = write("ws01.toml", build_manifest())
    result = diff([path, FIXTURES / "environment-nobuilds.yml"])
    assert isinstance(result, PairDiff)
    assert ("cpu", "environment-nobuilds.yml lacks it") in result.not_compared
    assert result.unlisted["package"] > 10  # manifest packages the yml does not list
    # numpy 1.26.4 has a build string only in the manifest: equal where both sides know
    assert "numpy" not in {c.key for c in result.changes}
    # conda's `scipy=1.13.0` is the constraint 1.13.0.* (conda MatchSpec): 1.12.0 violates it;
    # pip's `scikit-learn==1.4.2` is a pin
    assert [(c.area, c.key, c.size) for c in result.changes] == [
        ("package", "libopenblas", "violation"), ("package", "scikit-learn", "patch"),
        ("package", "scipy", "violation"), ("package", "setuptools", "violation"),
        ("python", "version", "violation")]
    assert [e.title for e in result.explanations] == [
        "BLAS/LAPACK packages: libopenblas 0.3.26 violates the constraint 0.3.27.*",
        "scipy 1.12.0 violates the constraint 1.13.0.*",
        "scikit-learn 1.4.1.post1 → 1.4.2 (patch)",
        "python version 3.11.8 violates the constraint 3.11.9.*"]


@pytest.mark.parametrize("content", ["", "   \n\n"], ids=["empty", "blank"])
def test_empty_file_is_one_line_exit_2(tmp_path: Path, content: str) -> None:
    (tmp_path / "a.toml").write_text(content)
    res = CliRunner().invoke(cli, ["diff", str(tmp_path / "a.toml"),
                                   str(FIXTURES / "pylock.toml")])
    assert res.exit_code == 2
    assert res.output == f"Error: {tmp_path / 'a.toml'}: empty file\n"


def test_unknown_formats_are_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Results of run 3\n\nloss went down: 0.31\n")
    (tmp_path / "data.csv").write_text("step,loss\n1,0.9\n2,0.5\n")
    res = CliRunner().invoke(cli, ["diff", str(tmp_path / "notes.txt"),
                                   str(tmp_path / "data.csv")])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1
    assert res.output.startswith(f"Error: {tmp_path / 'notes.txt'}: unknown format (expected")


def test_newer_schema_is_one_line_exit_2(write) -> None:
    data = build_manifest()
    data["envlock"]["schema"] = 2
    newer = write("newer.toml", data)
    res = CliRunner().invoke(cli, ["diff", str(write("ok.toml", build_manifest())), str(newer)])
    assert res.exit_code == 2
    assert res.output == (f"Error: {newer}: manifest schema 2 is newer than this envlock reads "
                          "(1); upgrade envlock\n")


def test_malformed_yaml_and_too_few_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "environment.yml"
    bad.write_text("name: x\ndependencies:\n  - numpy=1.0\n - [oops\n")
    with pytest.raises(ManifestError, match=r"environment.yml: malformed YAML at line \d+ \("):
        foreign.read(bad)
    res = CliRunner().invoke(cli, ["diff", str(FIXTURES / "pylock.toml")])
    assert res.exit_code == 2
    assert res.output == "Error: need at least two inputs to compare\n"


def test_pylock_without_packaging_pylock(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = foreign.read(FIXTURES / "pylock.toml")
    monkeypatch.setitem(sys.modules, "packaging.pylock", None)  # packaging < 25.1
    assert foreign.read(FIXTURES / "pylock.toml") == expected


def test_json_manifest_against_toml(write, tmp_path: Path) -> None:
    data = build_manifest()
    (tmp_path / "a.json").write_text(json.dumps(data), encoding="utf-8")
    result = diff([tmp_path / "a.json", write("b.toml", data)])
    assert isinstance(result, PairDiff)
    assert result.a.kind == "manifest"
    assert not result.differ
    assert result.identical == {"code": 4, "package": 27, "cpu": 6, "platform": 4, "env": 2,
                                "target": 1, "python": 2}


@pytest.mark.parametrize(("text", "listing"), [
    ("numpy==1.26.4\nscipy==1.12.0\n", "pip"),
    ("--index-url https://download.pytorch.org/whl/cu121\ntorch==2.2.1+cu121\n", "pip"),
    ("numpy>=1.26\nscipy==1.12.0\n", "partial"),
    ("numpy\n", "partial"),
    ("-r base.txt\nnumpy==1.26.4\n", "partial"),
], ids=["freeze", "freeze-with-index", "range", "bare-name", "include"])
def test_pip_freeze_is_a_complete_listing(tmp_path: Path, text: str, listing: str) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    (tmp_path / "base.txt").write_text("scipy==1.12.0\n")  # the include is read, as pip reads it
    assert foreign.read(path)[2] == listing
