"""The conda probe on a prefix laid out as conda writes it (fixtures/conda-prefix)."""

from __future__ import annotations

from pathlib import Path

import pytest

import envlock
from envlock.probes.condameta import list_conda_meta, parse_history, read_conda_prefix, short_channel

from .conftest import FIXTURES


def test_every_conda_meta_package_with_channel_and_build(conda_prefix: Path) -> None:
    m = envlock.snapshot(prefix=str(conda_prefix))
    assert m.target.kind == "conda"
    assert m.target.chosen_by == "--prefix"
    got = {(c.name, c.version, c.build, c.channel, c.subdir) for c in m.conda.packages}
    assert got == {
        ("_openmp_mutex", "4.5", "2_gnu", "conda-forge", "linux-64"),
        ("libblas", "3.9.0", "21_linux64_openblas", "conda-forge", "linux-64"),
        ("libopenblas", "0.3.26", "pthreads_h413a1c8_0", "conda-forge", "linux-64"),
        ("mylab-tools", "0.3.1", "py_0", "private-chan", "noarch"),
        ("numpy", "1.26.4", "py311h64a7726_0", "conda-forge", "linux-64"),
        ("python", "3.11.7", "hab00c5b_1_cpython", "conda-forge", "linux-64"),
        ("requests", "2.31.0", "pyhd8ed1ab_0", "conda-forge", "noarch"),
        ("twine", "1.10.0", "py311h06a4308_0", "pkgs/main", "linux-64"),
    }
    numpy = {c.name: c for c in m.conda.packages}["numpy"]
    assert numpy.build_number == 0
    assert numpy.url == "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda"
    assert len(numpy.md5) == 32 and len(numpy.sha256) == 64
    assert "libblas >=3.9.0,<4.0a0" in numpy.depends


def test_requested_specs_from_history(conda_prefix: Path) -> None:
    m = envlock.snapshot(prefix=str(conda_prefix))
    assert m.conda.requested == (
        "private-chan::mylab-tools", "numpy=1.26", "python=3.11", "requests", "twine=1.10.0",
    )


def test_c11_conda_package_overwritten_by_pip(conda_prefix: Path) -> None:
    """Case C11: conda-meta says twine 1.10.0, Python imports pip's 4.0.2."""
    m = envlock.snapshot(prefix=str(conda_prefix))
    twine_conda = {c.name: c for c in m.conda.packages}["twine"]
    assert twine_conda.overwritten_by_pip is True
    assert twine_conda.pip_version == "4.0.2"
    twine_pip = {p.name: p for p in m.pip.packages}["twine"]
    assert twine_pip.version == "4.0.2"
    assert twine_pip.installer == "pip"
    assert twine_pip.origin == "index"
    assert twine_pip.conda_package is None
    assert any("twine 1.10.0" in w and "overwritten by pip" in w and "4.0.2" in w
               for w in m.envlock.warnings)


def test_c12_conda_build_urls_attributed_to_conda(conda_prefix: Path) -> None:
    """Case C12: dist-infos owned by a conda package are conda's; the dead build URL is dropped."""
    m = envlock.snapshot(prefix=str(conda_prefix))
    pkgs = {p.name: p for p in m.pip.packages}
    for name in ("numpy", "requests"):
        assert pkgs[name].origin == "conda"
        assert pkgs[name].conda_package == name
        assert pkgs[name].url is None
    assert "feedstock_root" not in m.dumps()
    odd = pkgs["oddpkg"]
    assert odd.origin == "directory" and odd.conda_package is None
    assert any("oddpkg 0.1" in w and "conda build directory" in w for w in m.envlock.warnings)


def test_tokens_never_written(conda_prefix: Path) -> None:
    m = envlock.snapshot(prefix=str(conda_prefix))
    text = m.dumps() + m.dumps("json")
    assert "xy-1234567890-abcdef" not in text
    mylab = {c.name: c for c in m.conda.packages}["mylab-tools"]
    assert mylab.url == "https://conda.anaconda.org/t/<redacted>/private-chan/noarch/mylab-tools-0.3.1-py_0.conda"


def test_unreadable_record_is_a_warning(conda_prefix: Path) -> None:
    (conda_prefix / "conda-meta" / "broken-1.0-0.json").write_text('{"name": "broken", ')
    (conda_prefix / "conda-meta" / "nofields-1.0-0.json").write_text('{"name": "nofields"}')
    m = envlock.snapshot(prefix=str(conda_prefix))
    assert len(m.conda.packages) == 8
    assert m.conda.status == "error"
    assert any("broken-1.0-0.json: unreadable conda record" in w for w in m.envlock.warnings)
    assert any("nofields-1.0-0.json" in w and "'version'" in w for w in m.envlock.warnings)


def test_not_a_conda_prefix(tmp_path: Path) -> None:
    assert read_conda_prefix(tmp_path) is None


def test_static_fixture_reads_without_interpreter() -> None:
    read = read_conda_prefix(FIXTURES / "conda-prefix")
    assert read is not None
    owner = {Path(k).name: v for k, v in read.dist_owner.items()}
    assert owner["numpy-1.26.4.dist-info"] == "numpy"
    assert owner["twine-1.10.0.dist-info"] == "twine"


def test_list_conda_meta_matches_the_records(tmp_path: Path) -> None:
    prefix = FIXTURES / "conda-prefix"
    listed = list_conda_meta(prefix)
    read = read_conda_prefix(prefix)
    assert read is not None
    assert [(r.name, r.version, r.build) for r in listed] == [
        (p.name, p.version, p.build) for p in read.info.packages
    ]
    assert listed[0].path == prefix / "conda-meta" / "_openmp_mutex-4.5-2_gnu.json"
    assert list_conda_meta(tmp_path) == () and list_conda_meta(None) == ()


@pytest.mark.parametrize(
    ("channel", "url", "expected"),
    [
        ("https://conda.anaconda.org/conda-forge/linux-64", None, "conda-forge"),
        ("conda-forge", None, "conda-forge"),
        ("https://repo.anaconda.com/pkgs/main/linux-64", None, "pkgs/main"),
        ("https://repo.anaconda.com/pkgs/r", None, "pkgs/r"),
        ("https://conda.anaconda.org/t/tk-123/private/noarch", None, "private"),
        ("file:///srv/channel/linux-64", None, "file:///srv/channel"),
        ("https://user:pw@mirror.example.org/conda/linux-64", None, "https://mirror.example.org/conda"),
        (None, "https://conda.anaconda.org/pytorch/linux-64/pytorch-2.1.0-py3.11_cuda12.1_cudnn8.9.2_0.tar.bz2",
         "pytorch"),
        (None, None, None),
    ],
    ids=["cf-url", "cf-short", "main", "r", "token", "file", "credentials", "from-url", "none"],
)
def test_short_channel(channel: str | None, url: str | None, expected: str | None) -> None:
    assert short_channel(channel, url) == expected


def test_parse_history_handles_junk() -> None:
    text = "# update specs: [not python\n# update specs: ['a>=1']\n+junk\n# remove specs: []\n"
    assert parse_history(text) == ("a>=1",)


def test_corrupt_history_is_a_warning(conda_prefix: Path) -> None:
    history = conda_prefix / "conda-meta" / "history"
    history.write_text(history.read_text() + "# update specs: ['scipy', \n# remove specs: oops\n")
    m = envlock.snapshot(prefix=str(conda_prefix), stack=False, libraries=False)
    assert "private-chan::mylab-tools" in m.conda.requested
    assert any("history: 2 unreadable specs line(s)" in w for w in m.envlock.warnings)
    assert m.conda.status == "ok"  # the package records themselves were all read
