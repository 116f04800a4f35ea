"""The locations and names a pixi.lock, poetry.lock, pdm.lock, uv.lock or pylock.toml from
someone else gives are data (docs/trust.md): a PyPI location is an http/https/file URL of a
wheel or sdist, a git URL or a local path; a conda location an http/https/file (or pixi's
s3/gcs) URL of a ``.conda``/``.tar.bz2`` package, or a path (a source build); a package name a
PEP 508 name.  Anything else is one ``Error:`` naming the entry and the real fault — read,
shown and restored alike, nothing written.

The files are pixi's own ``examples/pypi-source-deps/pixi.lock`` (v6) and the peers' poetry,
pdm, uv and pip lockfiles, one location or name changed; py-rattler (pixi's lock reader) is the
oracle of what a location is and of which conda locations are invalid.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.formats import read_lock as read

from _checks import one_error

rattler = pytest.importorskip("rattler")

PEERS = Path("/work/shared/cases/peers")
PIXI = PEERS / "pixilock" / "pypi-source-deps__pixi.lock"
CLICK = "direct+https://github.com/pallets/click/releases/download/8.1.7/click-8.1.7-py3-none-any.whl"
BZIP2 = "https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_8.conda"

pytestmark = pytest.mark.skipif(not PIXI.is_file(), reason="the peers cases are not here")


def _pixi(tmp_path: Path, old: str, new: str, record: str = "") -> Path:
    """pixi's lock with location ``old`` (its environment references and its record) ``new``,
    ``record`` lines added to its record."""
    text = PIXI.read_text()
    key = next(f"\n- {k}: {old}\n" for k in ("conda", "pypi") if f"\n- {k}: {old}\n" in text)
    text = text.replace(key, key + record)
    lock = tmp_path / "pixi.lock"
    lock.write_text(text.replace(old, new))
    return lock


def _run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _rattler_click(lock: Path) -> tuple[str, str, str]:
    """``(name, version, location)`` of click on linux-64, as py-rattler reads them."""
    env = rattler.LockFile.from_path(lock).default_environment()
    plat = next(p for p in env.platforms() if p.name == "linux-64")
    q = next(q for q in env.packages(plat) if type(q).__name__ == "PypiLockedPackage"
             and q.name == "click")
    return q.name, str(q.version), str(q.location)


# -- pixi.lock PyPI locations ------------------------------------------------------------------

@pytest.mark.parametrize(("location", "scheme"), [
    ("javascript:alert(1)", "javascript:"),
    ("ftp://example.org/pub/click-8.1.7-py3-none-any.whl", "ftp:"),
    ("data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==", "data:"),
    ("git+foo://github.com/pallets/click#8f6b6e5c8a6e3f5b3a1f0c4c9e1e8a7a6c3b2d1e", "foo:"),
])
def test_a_pixi_pypi_location_of_another_url_scheme_is_refused_naming_it(
        tmp_path: Path, location: str, scheme: str) -> None:
    lock = _pixi(tmp_path, CLICK, location)
    # pixi's reader takes it as the location it is (a URL), not a local project's path
    assert _rattler_click(lock)[2] == location
    said = ("packages[11] (pypi click) location", f"its scheme {scheme!r} is not supported")
    one_error(_run("show", lock), *said)
    one_error(_run("diff", lock, lock), *said)
    one_error(_run("restore", lock, "--prefix", tmp_path / "env"), *said)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pixi.lock"]


@pytest.mark.parametrize(("location", "fault"), [
    ("file:///etc/passwd", "its file 'passwd' is neither a wheel (PEP 427 file name) nor a "
                           "source archive"),
    ("https://example.org/download/click", "its file 'click' is neither a wheel"),
    ("https://example.org/click-8.1.7.whl", "its file 'click-8.1.7.whl' is not a wheel name "
                                            "(PEP 427"),
    ("../wheels/click.whl", "its file 'click.whl' is not a wheel name"),
])
def test_a_pixi_pypi_file_location_must_name_a_wheel_or_sdist(tmp_path: Path, location: str,
                                                              fault: str) -> None:
    lock = _pixi(tmp_path, CLICK, location)
    one_error(_run("show", lock), "packages[11] (pypi click) location", fault)
    one_error(_run("restore", lock, "--prefix", tmp_path / "env"), fault)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pixi.lock"]


@pytest.mark.parametrize("location", [
    "https://files.pythonhosted.org/packages/96/d3/f04c7bfcf5c1862a2a5b845c6b2b360488cf47af55dfa79c98f6a6bf98b5/click-8.1.7.tar.gz",
    "direct+https://github.com/pallets/click/archive/refs/tags/8.1.7.zip",
    "file:///opt/wheels/click-8.1.7-py3-none-any.whl",
    "../local-wheel/click-8.1.7-py3-none-any.whl",
])
def test_the_pixi_pypi_files_pixi_writes_are_read_as_rattler_reads_them(tmp_path: Path,
                                                                        location: str) -> None:
    lock = _pixi(tmp_path, CLICK, location)
    name, version, _ = _rattler_click(lock)
    ours = [x for x in read(lock, exact=True).packages
            if x.platform == "linux-64" and x.name == "click"]
    assert [(x.manager, x.name, x.version) for x in ours] == [("pip", name, version)]


@pytest.mark.parametrize("location", ["./click", "../src/click",
                                      r"E:\Developer\click"])
def test_a_pixi_local_directory_entry_stays_the_project(tmp_path: Path, location: str) -> None:
    lock = _pixi(tmp_path, CLICK, location)
    assert _rattler_click(lock)[2] == location
    got = read(lock, exact=True)
    assert "click" in got.projects and "click" not in {x.name for x in got.packages}


def test_restore_checks_a_pixi_pypi_location_before_it_becomes_a_pylock_file(
        tmp_path: Path) -> None:
    """The pylock entry of an entry read from the real lock, its location replaced: a URL of
    another scheme or one that names no wheel/sdist is refused; the real one converts."""
    from envlock.lock._pixirestore import _pypi_package

    lock = read(PIXI, exact=True)
    click = next(x for x in lock.packages if x.platform == "linux-64" and x.name == "click")
    sha = "ae74fb96c20a0277a1d615f1e4d73c8414f5a98db8b799a7931d1582f3390c28"
    good = _pypi_package(PIXI, replace(click, sha256=sha))
    assert good["wheels"] == [{"name": "click-8.1.7-py3-none-any.whl", "url": CLICK.removeprefix(
        "direct+"), "hashes": {"sha256": sha}}]
    for bad, said in [("javascript:alert(1)", "its scheme 'javascript:' is not supported"),
                      ("file:///etc/passwd", "its file 'passwd' is neither a wheel")]:
        with pytest.raises(ManifestError) as exc:
            _pypi_package(PIXI, replace(click, url=bad, sha256=sha))
        assert "package 'click' location" in str(exc.value) and said in str(exc.value)


# -- pixi.lock conda locations -----------------------------------------------------------------

@pytest.mark.parametrize(("location", "fault"), [
    ("javascript:alert(1)", "its scheme 'javascript:' is not supported"),
    ("ftp://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_8.conda",
     "its scheme 'ftp:' is not supported"),
    ("https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_8.zip",
     "its file 'bzip2-1.0.8-hda65f42_8.zip' is not a .conda or .tar.bz2 archive"),
    ("file:///etc/passwd", "its file 'passwd' is not a .conda or .tar.bz2 archive"),
    ("https://conda.anaconda.org/conda-forge/linux-64/bzip2.conda",
     "its file 'bzip2.conda' is not named <name>-<version>-<build>"),
])
def test_a_pixi_conda_location_is_refused_for_its_real_fault(tmp_path: Path, location: str,
                                                             fault: str) -> None:
    lock = _pixi(tmp_path, BZIP2, location)
    r = _run("show", lock)
    one_error(r, "packages[4] (conda) location", fault)
    assert "source package" not in r.output  # what it said before: not the fault
    one_error(_run("restore", lock, "--prefix", tmp_path / "env"), fault)


def test_an_s3_conda_package_reads_but_restore_says_it_cannot_fetch_it(tmp_path: Path) -> None:
    """pixi reads channels from S3 (its docs, "S3"; the record then names its subdir, which
    rattler does not derive from an s3 URL); conda's explicit install does not fetch them."""
    lock = _pixi(tmp_path, BZIP2, "s3://my-bucket/custom-channel/linux-64/bzip2-1.0.8-hda65f42_8.conda",
                 "  subdir: linux-64\n")
    env = rattler.LockFile.from_path(lock).default_environment()
    plat = next(p for p in env.platforms() if p.name == "linux-64")
    assert any(str(q.location).startswith("s3://") for q in env.packages(plat))
    bz = [x for x in read(lock, exact=True).packages if x.platform == "linux-64" and x.name == "bzip2"]
    assert [(x.version, x.build) for x in bz] == [("1.0.8", "hda65f42_8")]
    one_error(_run("restore", lock, "--prefix", tmp_path / "env"),
              "package 'bzip2' location", "its scheme 's3:' is not supported")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pixi.lock"]


# -- package names of the project locks ---------------------------------------------------------

@pytest.mark.parametrize(("source", "old", "where"), [
    ("poetrylock/outdated_lock__poetry.lock", 'name = "certifi"', "package[0].name"),
    ("pdmlock/demo__pdm.lock", 'name = "certifi"', "package[0].name"),
    ("uvlock/ecosystem__flask__uv.lock", 'name = "alabaster"', "package[0].name"),
    ("pylock/pip__pylock.toml", 'name = "simple"', "packages[0].name"),
])
@pytest.mark.parametrize(("bad", "shown"), [
    ('"--index-url=http://evil"', "'--index-url=http://evil'"),
    ('"certifi\\n--extra-index-url=http://evil"', "'certifi --extra-index-url=http://evil'"),
])
def test_a_lock_entry_whose_name_is_no_project_name_is_refused_saying_so(
        tmp_path: Path, source: str, old: str, where: str, bad: str, shown: str) -> None:
    text = (PEERS / source).read_text()
    assert old in text  # the first entry's name (a uv.lock names it again in edges)
    lock = tmp_path / source.rpartition("__")[2]
    lock.write_text(text.replace(old, f"name = {bad}", 1))
    said = (f"{where}: {shown} is not a project name (PEP 508)",)
    for r in (_run("show", lock), _run("restore", lock, "--prefix", tmp_path / "env",
                                       "--python-version", "3.12.3")):
        one_error(r, *said)
        assert "PEP 440" not in r.output and "normalized" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [lock.name]


def test_the_poetry_conversion_names_a_bad_name_as_such() -> None:
    """Behind the reader: the requirement line is written only of a normalized PEP 508 name."""
    from envlock.lock._projectlocks import _poetry_requirements

    path = PEERS / "poetrylock/outdated_lock__poetry.lock"
    x = next(x for x in read(path).packages if x.name == "certifi")
    raw = {"name": "certifi", "files": [{"file": "certifi-2020.6.20-py2.py3-none-any.whl",
                                         "hash": "sha256:" + "0" * 64}]}
    assert _poetry_requirements(path, [(x, raw)], {}).splitlines()[1].startswith(
        "certifi==2020.6.20 --hash=sha256:")
    with pytest.raises(ManifestError) as exc:
        _poetry_requirements(path, [(replace(x, name="--index-url=http://evil"), raw)], {})
    assert "its name is not a project name (PEP 508)" in str(exc.value)
    assert "PEP 440" not in str(exc.value)


# -- the files a uv.lock or pylock.toml names -----------------------------------------------------

@pytest.mark.parametrize(("source", "args"), [
    ("uvlock/inline__lock_sdist_url_subdirectory__1__uv.lock",
     ("--python-version", "3.12.3", "--allow-index", "https://example-index.invalid/simple")),
    ("pylock/uvexport__pep_751_sdist_url_subdirectory__1.pylock.toml",
     ("--allow-index", "https://example-index.invalid/simple")),
])
@pytest.mark.parametrize(("location", "fault"), [
    ("file:///etc/passwd", "its file 'passwd' is neither a wheel (PEP 427 file name) nor a "
                           "source archive"),
    ("https://example.org/download?id=18216295", "its file 'download' is neither a wheel"),
])
def test_restore_takes_an_archive_url_of_a_lock_only_of_a_wheel_or_sdist(
        tmp_path: Path, source: str, args: tuple[str, ...], location: str, fault: str) -> None:
    """uv's own sdist-URL-with-subdirectory lock and its PEP 751 export: the archive URL (which
    uv would fetch, and which it requires to end as a wheel or sdist) replaced."""
    real = "https://github.com/user-attachments/files/18216295/subdirectory-test.tar.gz"
    text = (PEERS / source).read_text()
    assert real in text
    ok = _run("restore", PEERS / source, "--prefix", tmp_path / "env", *args)
    assert ok.exit_code == 0 and f"URL {real}" in ok.output, ok.output
    lock = tmp_path / ("uv.lock" if source.endswith("uv.lock") else "pylock.toml")
    lock.write_text(text.replace(real, location))
    one_error(_run("restore", lock, "--prefix", tmp_path / "env", *args),
              "package 'root' archive url", fault)
    assert sorted(p.name for p in tmp_path.iterdir()) == [lock.name]
