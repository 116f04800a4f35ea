"""Cases F01–F13: real environment files from public repositories, each read the way its own
tool reads it, with the result the case table (``../shared/cases/foreign/README.md``) gives."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from envlock import formats
from envlock.cli import cli
from envlock.diff import diff
from envlock.diff.engine import PairDiff
from envlock.diff.facts import Pkg
from envlock.verify.expected import read_lock

from .conftest import build_manifest, real


def _pair(a, b) -> PairDiff:
    result = diff([a, b])
    assert isinstance(result, PairDiff)
    return result


def _json(*args: object) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["diff", "--format", "json", *map(str, args)])
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.output)


def test_f01_one_environment_in_two_formats_is_identical() -> None:
    lock = real("pytorch-notebook_conda-lock.yml")
    explicit = real("pytorch-notebook_conda-linux-64.lock")
    code, doc = _json(lock, explicit)
    assert code == 0 and doc["differences"] == []
    assert doc["identical"]["areas"]["package"] > 800
    result = _pair(lock, explicit)
    for fs in (result.a, result.b):  # two conda packages, two facts: never merged by PyPI rules
        names = {v.name for (area, _), v in fs.facts.items() if area == "package"}
        assert {"cached_property", "cached-property", "typing_extensions",
                "typing-extensions"} <= names
        assert fs.facts[("package", "cached_property")].build == "pyha770c72_1"
        assert fs.facts[("package", "cached-property")].build == "hd8ed1ab_1"


def test_f02_torch_cuda_variant_from_conda_build_strings_metapackages_apart() -> None:
    a, b = real("AKASH2907__semi_sup_active_learning__spec-file.txt"), real(
        "3like3beer__torchpractice__spec-file.txt")
    result = _pair(a, b)
    first = result.explanations[0]
    assert first.id == "torch-variant"
    assert "a CUDA 10.0 build in" in first.title
    assert "a CUDA 8.0 (cuDNN 7.1.2) build in" in first.title
    torch = result.a.facts[("package", "torch")]
    assert (torch.name, torch.version, torch.build) == ("pytorch", "1.2.0", "cuda100py37h938c94c_0")
    assert result.a.facts[("package", "pytorch-gpu")].version == "1.2.0"  # its own fact
    assert result.a.facts[("package", "tensorflow")].name == "tensorflow"
    assert result.a.facts[("package", "tensorflow-gpu")].name == "tensorflow-gpu"
    assert result.a.facts[("package", "_pytorch_select")].build == "gpu_0"


def test_f03_direct_references_version_from_the_wheel_name_work_dirs_unknown() -> None:
    dass, moma = real("Saurabhbhati__DASS__pip_freeze.txt"), real("PBarde__moma-ppo__pip_freeze.txt")
    pkgs = {p["name"]: p for p in formats.read(dass).data["pip"]["packages"]}
    assert pkgs["numpy"]["version"] == "1.26.4"
    assert pkgs["numpy"]["url"].split("#")[0].endswith("numpy-1.26.4-cp312-cp312-linux_x86_64.whl")
    assert pkgs["asttokens"]["version"] == formats.UNKNOWN  # …/feedstock_root/…/work
    result = _pair(dass, moma)
    assert result.a.facts[("package", "numpy")].version == "1.26.4"
    assert result.b.facts[("package", "numpy")].version == "unknown"
    # an "unknown" version is never shown equal (never counted as identical), nor different:
    # it is not compared, and named as such
    assert Pkg("unknown").same(Pkg("unknown")) is False
    changed = {c.key for c in result.changes}
    assert "numpy" not in changed and "idna" not in changed  # idna: …/work on both sides
    assert {"numpy", "idna"} <= set(result.unknown)
    assert result.satisfied == {} and "package" in result.identical


def test_f04_uv_export_requirements_and_pylock_of_one_lock_are_identical() -> None:
    req, lock = real("Oyez-SA-ASR__requirements.txt"), real("Oyez-SA-ASR__pylock.toml")
    code, doc = _json(req, lock)
    assert code == 0 and doc["differences"] == []
    result = _pair(req, lock)
    keys = {k for (area, k) in result.a.facts if area == "package"}
    assert "-" not in keys and not any(k.startswith("oyez") for k in keys)  # `-e .`: the project
    # read outside its project `-e .` names nothing; listed, but the lock's project: not compared
    assert any(n.startswith(".: an editable local project of ") for n in result.a.notes)
    assert {"numpy ; python_full_version < \"3.11\"",
            "numpy ; python_full_version >= \"3.11\""} <= keys  # one entry per marker set
    assert keys == {k for (area, k) in result.b.facts if area == "package"}


def test_f05_real_conda_export_is_parsed_as_conda_parses_it(monkeypatch, tmp_path) -> None:
    from envlock.lock import _spec

    env = real("GuyTevet__motion-diffusion-model__environment.yml")
    spec = _spec.read_environment_yml(env, "linux-64")
    assert "_libgcc_mutex=0.1=main" in spec.conda and spec.pip
    assert len(_spec.match_specs(spec)) == len(spec.conda)
    # no channel reachable: the one error line is about the channels, not the build string
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    res = CliRunner().invoke(cli, ["lock", "-f", str(env), "-o", str(tmp_path), "-p", "linux-64",
                                   "--solver", "rattler"])
    assert res.exit_code == 2
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: cannot read the channels of {env}")


def test_f06_defaults_are_the_default_channels() -> None:
    from envlock.lock import _spec

    env = real("PBarde__moma-ppo__environment.yml")
    spec = _spec.read_environment_yml(env, "linux-64")
    assert "defaults" not in spec.channels
    assert spec.channels[-2:] == ("https://repo.anaconda.com/pkgs/main",
                                  "https://repo.anaconda.com/pkgs/r")
    assert formats.read(env).data["conda"]["channels"][-2:] == ["pkgs/main", "pkgs/r"]


def test_f07_version_constraint_plus_build_glob_under_a_selector() -> None:
    from envlock.lock import _spec

    env = real("Clay_c661ea4p__environment.yml")
    linux = _spec.read_environment_yml(env, "linux-64")
    assert "pytorch~=2.3.1 *cuda12*" in linux.conda and "pytorch~=2.3.1" not in linux.conda
    ms = {str(m.name): m for m in _spec.match_specs(linux)}
    assert len(ms) == len(linux.conda)
    osx = _spec.read_environment_yml(env, "osx-arm64")
    assert "pytorch~=2.3.1" in osx.conda
    data = formats.read(env).data  # diff reads the file's platform (linux-64)
    torch = next(p for p in data["conda"]["packages"] if p["name"] == "pytorch")
    assert torch["constraint"] == {"kind": "conda", "version": "~=2.3.1", "build": "*cuda12*"}
    assert Pkg("2.3.1", "cuda120_py311h", constraint=("conda", "~=2.3.1", "*cuda12*")).same(
        Pkg("2.3.1", "cuda120_py311h")) is True
    assert Pkg("2.3.1", constraint=("conda", "~=2.3.1", "*cuda12*")).same(
        Pkg("2.3.1", "cpu_py311h")) is False


def test_f08_explicit_list_never_holds_pip_packages() -> None:
    env, explicit = real("3dlg-hcvc__paris__environment.yml"), real("3dlg-hcvc__paris__spec-file.txt")
    code, doc = _json(env, explicit)
    assert code == 0 and doc["differences"] == []
    assert doc["identical"]["areas"]["package"] > 80
    reasons = dict((n["area"], n["reason"]) for n in doc["not_compared"])
    assert "never lists pip packages" in reasons["pip"]
    assert doc["unlisted"]["package"] >= 150  # the pip packages: not compared, never "removed"


def test_f09_locks_for_other_platforms_name_the_platform_first() -> None:
    a, b = real("nlp-research-template__conda-lock.yml"), real("nlp-research-template__ppc64le.conda-lock.yml")
    result = _pair(a, b)
    first = result.explanations[0]
    assert first.id.startswith("subdir")
    assert "linux-64 → linux-ppc64le" in first.title
    assert formats.read(a).platforms == ("linux-64", "osx-arm64", "win-64")


def test_f10_spec_against_its_lock_every_constraint_holds(tmp_path) -> None:
    spec, lock = real("nlp-research-template__environment.yml"), real(
        "nlp-research-template__conda-lock.yml")
    code, doc = _json(spec, lock)
    assert code == 0 and doc["differences"] == [] and doc["explanations"] == []
    result = _pair(spec, lock)
    assert result.a.facts[("package", "torch")].constraint == ("conda", ">=2.0", "")
    # satisfied constraints: neither differences nor "identical", a count of their own
    assert result.satisfied["package"] >= 20 and "package" not in result.identical
    assert doc["satisfied"]["total"] == sum(result.satisfied.values())
    # a violated constraint is named as a violation
    bad = tmp_path / "environment.yml"
    bad.write_text(spec.read_text().replace("- numpy\n", "- numpy<2\n"))
    result = _pair(bad, lock)
    [change] = result.changes
    assert (change.key, change.size) == ("numpy", "violation")
    assert result.explanations[0].title == "numpy 2.0.0 violates the constraint <2"


def test_f11_accelerate_is_an_ml_framework_not_blas() -> None:
    a, b = real("Excedrin__nix_python_cuda_flake__pip_freeze.txt"), real("BELIV-ASU__GLANCE__pip_freeze.txt")
    result = _pair(a, b)
    acc = next(c for c in result.changes if c.key == "accelerate")
    assert acc.component == "frameworks" and acc.cls == "numerical-core"
    assert not any("BLAS" in e.title and "accelerate" in e.title for e in result.explanations)


def test_f12_conda_list_export_and_bare_vcs_lines_are_read(write) -> None:
    export = real("PBarde__moma-ppo__conda_list.txt")
    r = formats.read(export)
    assert (r.kind, r.listing, r.platforms) == ("conda-export", "complete", ("linux-64",))
    conda = {p["name"]: p for p in r.data["conda"]["packages"]}
    assert conda["_libgcc_mutex"]["build"] == "conda_forge"
    assert "absl-py" in {p["name"] for p in r.data["pip"]["packages"]}  # pypi_0: installed by pip
    req = formats.read(real("pdm-project__pdm__tests_fixtures_requirements.txt"))
    pkgs = {p["name"]: p for p in req.data["pip"]["packages"]}
    assert pkgs["pep508-package"]["vcs"] == "git"
    assert pkgs["pip"]["origin"] == "editable"
    assert pkgs["whoosh"]["version"] == "2.7.4"
    manifest = write("m.toml", build_manifest())
    for path in (export, real("pdm-project__pdm__tests_fixtures_requirements.txt")):
        res = CliRunner().invoke(cli, ["diff", str(manifest), str(path)])
        assert res.exit_code in (0, 1), res.output


@pytest.mark.parametrize(("name", "kind", "count", "probe"), [
    ("Comfy-Org__comfy-cli__uv.lock", "uv.lock", 77, ("anyio", "4.10.0")),
    ("EthanMarx__ztf-lfi-demo__poetry.lock", "poetry.lock", 57, ("appdirs", "1.4.4")),
    ("pdm-project__pdm__pdm.lock", "pdm.lock", 96, ("anyio", "4.13.0")),
])
def test_f13_uv_poetry_pdm_locks_read_by_diff_and_verify(name, kind, count, probe, write) -> None:
    path = real(name)
    r = formats.read(path)
    assert (r.kind, r.listing) == (kind, "complete")
    versions = {(p.name, p.version) for p in r.lock.packages}
    assert probe in versions and len(r.lock.packages) >= count - 5
    assert not any(p.name == "comfy-cli" for p in r.lock.packages)  # the project itself
    lock = read_lock(path, marker_env={"python_version": "3.12", "python_full_version": "3.12.3",
                                       "sys_platform": "linux", "platform_system": "Linux",
                                       "implementation_name": "cpython",
                                       "platform_machine": "x86_64", "os_name": "posix",
                                       "platform_python_implementation": "CPython",
                                       "extra": ""})
    assert lock.kind == kind and probe in {(p.name, p.version) for p in lock.packages}
    res = CliRunner().invoke(cli, ["diff", str(write("m.toml", build_manifest())), str(path)])
    assert res.exit_code in (0, 1), res.output


def test_f13_uv_lock_markers_and_forks() -> None:
    lock = formats.read(real("Comfy-Org__comfy-cli__uv.lock")).lock
    forked = [p for p in lock.packages if p.marker]
    assert forked and all("python_full_version" in p.marker for p in forked)


def test_a_pip_freeze_against_a_copy_of_itself_exits_0(tmp_path) -> None:
    """Its `name @ file:///…/work` entries have no version: not compared, never differences."""
    freeze = real("PBarde__moma-ppo__pip_freeze.txt")
    copy = tmp_path / "copy.txt"
    copy.write_bytes(freeze.read_bytes())
    code, doc = _json(copy, freeze)
    assert code == 0 and doc["differences"] == []
    assert "brotli" in doc["unknown"] and len(doc["unknown"]) >= 20


def test_a_pip_freeze_does_not_list_conda_packages_that_are_not_python(tmp_path) -> None:
    """The same project's `conda list` against its `pip freeze`: cuda-cudart, libgcc, … are
    not in a pip freeze by nature; they are "not listed", not "removed"."""
    listing, freeze = real("PBarde__moma-ppo__conda_list.txt"), real("PBarde__moma-ppo__pip_freeze.txt")
    result = _pair(listing, freeze)
    removed = {c.key for c in result.changes if c.values[1] is None}
    conda = {k[1]: v for k, v in result.a.facts.items() if k[0] == "package"}
    assert not any(conda[k].build and "py" not in conda[k].build for k in removed if k in conda)
    assert "cuda-cudart" in conda and "cuda-cudart" not in removed
    assert result.unlisted["package"] > 50
