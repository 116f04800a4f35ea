"""The readers of :mod:`envlock.formats`, each against its own tool: py-rattler's MatchSpec for
conda specs, :mod:`packaging` for PEP 508 lines, conda's file names for URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock import formats
from envlock.errors import ManifestError
from envlock.formats import conda, pep508

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "diff"


@pytest.mark.parametrize(("build", "variant"), [
    ("cuda100py37h938c94c_0", "CUDA 10.0"),                     # pkgs/main pytorch 1.2
    ("py36_cuda8.0.61_cudnn7.1.2_3", "CUDA 8.0 (cuDNN 7.1.2)"),  # pytorch channel 0.3
    ("cuda126py312h1763f0e_306", "CUDA 12.6"),                  # conda-forge
    ("cuda120_py311h25b6552_301", "CUDA 12.0"),
    ("py3.10_cuda11.8_cudnn8.7.0_0", "CUDA 11.8 (cuDNN 8.7.0)"),
    ("cpu_generic_py311h9ab3c4e_1", "CPU-only"),
    ("py3.8_cpu_0", "CPU-only"),
    ("gpu_0", None), ("py37h17b6947_1", None), ("", None),
])
def test_build_variant(build: str, variant: str | None) -> None:
    assert conda.build_variant(build) == variant


@pytest.mark.parametrize(("spec", "name", "version", "build", "channel", "pin"), [
    ("_libgcc_mutex=0.1=main", "_libgcc_mutex", "==0.1", "main", "", "0.1"),
    ("ca-certificates=2023.05.30=h06a4308_0", "ca-certificates", "==2023.05.30", "h06a4308_0",
     "", "2023.05.30"),                                          # the pin as written
    ("font-ttf-inconsolata=3.000", "font-ttf-inconsolata", "3.000.*", "", "", ""),  # conda's text
    ("pytorch~=2.3.1 *cuda12*  # [linux]", "pytorch", "~=2.3.1", "*cuda12*", "", ""),
    ("pytorch::pytorch>=2.0 # or latest", "pytorch", ">=2.0", "", "pytorch", ""),
    ("python=3.10", "python", "3.10.*", "", "", ""),
    ("numpy", "numpy", "", "", "", ""),
    ("foo 1.0 py_0", "foo", "==1.0", "py_0", "", "1.0"),
])
def test_conda_match_specs_as_rattler_reads_them(spec, name, version, build, channel, pin) -> None:
    rattler = pytest.importorskip("rattler")
    got = conda.parse_spec(spec)
    assert (got.name, got.version, got.build, got.channel, got.pin) == (
        name, version, build, channel, pin)
    ms = rattler.MatchSpec(spec.split("#")[0].strip(), strict=False)  # the oracle
    # the same versions (rattler prints its parsed numbers, conda and envlock the text)
    ours = str(rattler.VersionSpec(got.version, strict=False)) if got.version else ""
    assert str(ms.version or "") == ours and str(ms.build or "") == got.build


def test_conda_names_are_not_pypi_names() -> None:
    assert conda.is_metapackage("pytorch-gpu") and conda.is_metapackage("_openmp_mutex")
    assert conda.is_metapackage("_pytorch_select") and not conda.is_metapackage("pytorch")
    assert conda.expand_channels(["conda-forge", "defaults", "nodefaults"]) == (
        ["conda-forge", "pkgs/main", "pkgs/r"], True)


@pytest.mark.parametrize(("line", "expected"), [
    ("numpy==1.26.4", {"name": "numpy", "version": "1.26.4"}),
    ("Jinja2>=3,<4", {"name": "jinja2", "version": "<4,>=3",
                      "constraint": {"kind": "pep440", "version": "<4,>=3"}}),
    ("ipython==8.38.0 ; python_full_version < '3.11' --hash=sha256:ab",
     {"name": "ipython", "version": "8.38.0", "marker": 'python_full_version < "3.11"'}),
    ("numpy @ file:///croot/numpy_1/work/dist/numpy-1.26.4-cp312-cp312-linux_x86_64.whl",
     {"name": "numpy", "version": "1.26.4", "wheel-subdir": "linux-64",
      "url": "file:///croot/numpy_1/work/dist/numpy-1.26.4-cp312-cp312-linux_x86_64.whl"}),
    ("certifi @ file:///home/conda/feedstock_root/build_artifacts/certifi_1/work/certifi",
     {"name": "certifi", "version": "unknown",
      "url": "file:///home/conda/feedstock_root/build_artifacts/certifi_1/work/certifi"}),
    ("git+https://github.com/o/p.git@master#egg=pep508-package&subdirectory=x",
     {"name": "pep508-package", "version": "unknown", "vcs": "git",
      "url": "git+https://github.com/o/p.git@master#egg=pep508-package&subdirectory=x"}),
    # a local path read without its file's directory: listed under its path, unnamed
    ("-e .", {"name": ".", "url": ".", "version": "unknown", "unnamed": True, "local": True,
              "origin": "editable"}),
    ("-e ./libs/mine", {"name": "./libs/mine", "url": "./libs/mine", "version": "unknown",
                        "unnamed": True, "local": True, "origin": "editable"}),
    ("--index-url=https://x/simple", None),
    ("-r other.txt", None),
])
def test_pep508_lines(line: str, expected: dict | None) -> None:
    assert pep508.parse_line(line) == expected


@pytest.mark.parametrize("line", ["--editable", "-e", "numpy==", "numpy ;; x", "foo @"])
def test_bad_requirement_lines_are_one_line_errors(line: str) -> None:
    with pytest.raises(ManifestError) as exc:
        pep508.parse_line(line)
    assert "\n" not in str(exc.value)


def test_markers_kept_one_entry_per_marker_set(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy==2.2.6 ; python_version < '3.11'\nnumpy==2.4.2 ; python_version >= '3.11'\n"
                   "scipy==1.15.0 ; python_version >= '3.10'\n-e .\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0.1"\n')
    pkgs = formats.read(req).data["pip"]["packages"]
    assert pkgs == [
        {"name": "numpy", "version": "2.2.6", "marker": 'python_version < "3.11"'},
        {"name": "numpy", "version": "2.4.2", "marker": 'python_version >= "3.11"'},
        {"name": "scipy", "version": "1.15.0"},  # listed once: the marker is not a key
        # the project itself, named from its pyproject.toml beside the file
        {"name": "proj", "version": "0.1", "url": ".", "named-by": "metadata", "local": True,
         "origin": "editable"}]


@pytest.mark.parametrize(("name", "kind", "listing"), [
    ("environment.yml", "environment.yml", "complete"),
    ("environment-nobuilds.yml", "environment.yml", "partial"),
    ("explicit.txt", "conda-explicit", "conda"),
    ("conda-list-export.txt", "conda-export", "complete"),
    ("requirements.txt", "requirements", "pip"),  # a pip freeze: every line an == pin
    ("conda-lock.yml", "conda-lock", "complete"),
    ("pixi.lock", "pixi.lock", "complete"),
    ("pylock.toml", "pylock", "complete"),
    ("uv.lock", "uv.lock", "complete"),
    ("poetry.lock", "poetry.lock", "complete"),
    ("pdm.lock", "pdm.lock", "complete"),
])
def test_every_format_is_recognised_by_content(tmp_path: Path, name, kind, listing) -> None:
    assert (formats.read(FIXTURES / name).kind, formats.read(FIXTURES / name).listing) == (
        kind, listing)
    renamed = tmp_path / "input"  # no telling file name: the content decides
    renamed.write_bytes((FIXTURES / name).read_bytes())
    assert formats.read(renamed).kind == kind


def test_pixi_lock_keeps_conda_names_exact() -> None:
    lock = formats.read(FIXTURES / "pixi.lock")
    assert lock.platforms == ("osx-arm64",)
    names = [p["name"] for p in lock.data["conda"]["packages"]]
    assert names == ["cached-property", "cached_property", "_openmp_mutex"]
    assert lock.data["conda"]["packages"][2]["metapackage"] is True


def test_a_manifests_metapackage_never_stands_in_for_the_package() -> None:
    from envlock.diff.facts import extract
    from envlock.diff.impact import load_kb

    data = {"conda": {"status": "ok", "packages": [
        {"name": "pytorch", "version": "1.2.0", "build": "cuda100py37h938c94c_0"},
        {"name": "pytorch-gpu", "version": "1.2.0", "build": "0"},
        {"name": "cached_property", "version": "1.5.2", "build": "pyha770c72_1"},
        {"name": "cached-property", "version": "1.5.2", "build": "hd8ed1ab_1"}]}}
    fs = extract(data, label="m", path="m.toml", aliases=load_kb([]).aliases)
    assert fs.facts[("package", "torch")].build == "cuda100py37h938c94c_0"
    assert fs.facts[("package", "pytorch-gpu")].build == "0"
    assert fs.facts[("package", "cached-property")].build == "hd8ed1ab_1"
    assert fs.facts[("package", "cached_property")].build == "pyha770c72_1"


@pytest.mark.parametrize(("url", "subdir"), [
    ("file:///w/numpy-1.26.4-cp312-cp312-linux_x86_64.whl", "linux-64"),
    ("https://x/torch-2.3.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "linux-64"),
    ("https://x/numpy-2.0.0-cp312-cp312-macosx_11_0_arm64.whl", "osx-arm64"),
    ("https://x/numpy-2.0.0-cp312-cp312-manylinux_2_17_aarch64.whl", "linux-aarch64"),
    ("https://x/numpy-2.0.0-cp312-cp312-win_amd64.whl", "win-64"),
    ("https://x/six-1.16.0-py2.py3-none-any.whl", None),
    ("https://x/six-1.16.0.tar.gz", None),
])
def test_wheel_platform_tags_as_conda_subdirs(url: str, subdir: str | None) -> None:
    assert pep508.wheel_subdir(url) == subdir


def test_a_freeze_of_platform_wheels_names_its_platform() -> None:
    from .conftest import real

    r = formats.read(real("Saurabhbhati__DASS__pip_freeze.txt"))
    assert r.platforms == ("linux-64",) and r.data["subdir"]["subdir"] == "linux-64"
    assert not any("wheel-subdir" in p for p in r.data["pip"]["packages"])


@pytest.mark.parametrize(("spec", "version"), [
    ("3.10.*", "3.10.14"), ("3.10.*", "3.11.0"), (">=2.0", "2.3.1"), ("~=2.3.1", "2.3.4"),
    ("~=2.3.1", "2.4.0"), ("1.0.*", "1.0"), ("1.0.*", "1.1"), (">=1,<2", "1.5"), (">=1,<2", "2.0"),
    ("==1.26.4", "1.26.4"), ("<2", "2.0.0"), ("1.4.*|>=2", "1.4.2"), ("0.3.27.*", "0.3.26"),
    ("!=1.1", "1.1"), (">2023.3", "2024.1"),
])
def test_constraints_without_py_rattler_agree_with_it(spec: str, version: str) -> None:
    """diff needs no py-rattler (it is the ``lock`` extra): the fallback matcher gives
    py-rattler's answer on the forms environment.yml files use."""
    rattler = pytest.importorskip("rattler")
    expected = rattler.VersionSpec(spec, strict=False).matches(rattler.Version(version))
    assert conda._fallback_satisfies(spec, version) is expected
