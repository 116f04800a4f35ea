"""Requirements files read as pip reads them (``-r``/``-c`` includes, unnamed VCS/URL lines),
``Pipfile.lock``/``Pipfile`` read as pipenv reads them.  Oracles: pip's own requirements-file
parser (``pip._internal.req.req_file.parse_requirements``), ``packaging.requirements``, and
pipenv's ``requirement_from_lockfile``/``requirement_from_pipfile`` (what ``pipenv
requirements`` prints) on the real files in ``shared/cases``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envlock import formats
from envlock.cli import cli
from envlock.errors import ManifestError
from envlock.formats import pipenv as pipenv_reader
from envlock.formats.pep508 import read_requirements

CASES = Path(__file__).resolve().parents[2] / ".." / "shared" / "cases"
if not CASES.is_dir():
    CASES = Path("/work/shared/cases")
PEERS, FOREIGN = CASES / "peers", CASES / "foreign"


def _pip_reading(path: Path) -> tuple[set[tuple[str, str]], set[str]]:
    """pip's reading: ``{(name, version or spec)}`` of the requirements (not constraints) whose
    name pip knows without building, and the URLs of those it does not."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import parse_requirements

    named, urls = set(), set()
    for parsed in parse_requirements(str(path), session=PipSession()):
        if parsed.constraint:
            continue
        ireq = install_req_from_parsed_requirement(parsed)
        if ireq.req is not None:
            spec = str(ireq.req.specifier)
            named.add((canonicalize_name(ireq.req.name), spec.removeprefix("==")
                       if spec.startswith("==") and "," not in spec else spec))
        elif ireq.link is not None:  # a local path: the file or directory pip's link names
            urls.add(ireq.link.url_without_fragment if ireq.link.is_file else parsed.requirement)
    return named, urls


def _envlock_reading(path: Path) -> tuple[set[tuple[str, str]], set[str]]:
    """envlock's reading in :func:`_pip_reading`'s terms (a local path as pip's ``file:`` link
    of it, relative to the requirements file: the tests run pip in the file's directory)."""
    from pip._internal.utils.urls import path_to_url

    pkgs = formats.read(path).data.get("pip", {}).get("packages", [])
    named = {(p["name"], p["version"]) for p in pkgs if not p.get("named-by") and not p.get("unnamed")
             and not p.get("vcs")}
    named |= {(p["name"], "") for p in pkgs if p.get("vcs") and not p.get("named-by")}
    urls = {path_to_url(str(path.parent / p["url"]))
            if p.get("local") and not p["url"].startswith("file:") else p["url"]
            for p in pkgs if p.get("named-by") or p.get("unnamed")}
    return named, urls


def _requirement_files() -> list[Path]:
    out = sorted((PEERS / "reqs").iterdir())
    out += [p for p in sorted(FOREIGN.iterdir()) if p.name.endswith(("requirements.txt",))]
    return out


@pytest.mark.parametrize("path", _requirement_files(), ids=lambda p: p.name)
def test_real_requirements_files_read_as_pip_reads_them(path: Path, monkeypatch) -> None:
    monkeypatch.chdir(path.parent)  # pip reads a local path (`-e .`) from where it runs
    pip_named, pip_urls = _pip_reading(path)
    ours_named, ours_urls = _envlock_reading(path)
    # an editable VCS checkout (-e git+…#egg=pip) is named by pip from #egg=: no specifier
    assert ours_named == pip_named
    assert ours_urls == pip_urls


def _tree(tmp: Path) -> Path:
    """A project whose requirements include others, relative to each including file."""
    (tmp / "reqs" / "sub").mkdir(parents=True)
    (tmp / "reqs" / "base.txt").write_text("numpy==1.26.4\nscipy>=1.11\n-r sub/ml.txt\n")
    (tmp / "reqs" / "sub" / "ml.txt").write_text(
        "torch==2.3.1 ; sys_platform == 'linux'\n--requirement=../extra.txt\n")
    (tmp / "reqs" / "extra.txt").write_text("rich==13.7.1\n")
    (tmp / "reqs" / "pins.txt").write_text("numpy==1.26.4\nurllib3==2.2.1\n")
    main = tmp / "requirements.txt"
    main.write_text("-r reqs/base.txt\n-c reqs/pins.txt\nclick==8.1.7\n"
                    "git+https://github.com/pydantic/pydantic@v2.7.0\n"
                    "https://example.invalid/archive/main.zip\n")
    return main


def test_includes_are_followed_as_pip_follows_them(tmp_path: Path) -> None:
    main = _tree(tmp_path)
    pip_named, pip_urls = _pip_reading(main)
    assert len(pip_named) == 5  # numpy, scipy, torch, rich, click (constraints are not requirements)
    ours_named, ours_urls = _envlock_reading(main)
    assert ours_named == pip_named and ours_urls == pip_urls
    pkgs = {p["name"]: p for p in formats.read(main).data["pip"]["packages"]}
    assert pkgs["pydantic"]["named-by"] == "url" and pkgs["pydantic"]["vcs"] == "git"
    unnamed = pkgs["https://example.invalid/archive/main.zip"]
    assert unnamed["unnamed"] is True and unnamed["version"] == "unknown"
    assert "urllib3" not in pkgs  # only in the -c file: pip installs it only if required


def test_restore_reads_a_lockfile_without_following_its_includes(tmp_path: Path) -> None:
    main = _tree(tmp_path)
    names = {p["name"] for p in formats.read(main, includes=False).data["pip"]["packages"]}
    assert names == {"click", "pydantic", "https://example.invalid/archive/main.zip"}


def _one_error(args: list[str]) -> str:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


def test_a_cycle_a_missing_include_and_a_url_include_are_one_error_each(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "sub" / "b.txt"
    b.parent.mkdir()
    a.write_text("numpy==1.26.4\n-r sub/b.txt\n")
    b.write_text("scipy==1.13.0\n-r ../a.txt\n")
    for cmd in (["diff", str(a), str(a)], ["show", str(a)]):
        assert "a cycle: a.txt -> b.txt -> a.txt" in _one_error(cmd)
    b.write_text("-r missing.txt\n")
    assert "missing.txt: no such file" in _one_error(["show", str(a)])
    b.write_text("-r https://example.invalid/req.txt\n")
    assert "a URL include" in _one_error(["show", str(a)])


def test_includes_nest_boundedly(tmp_path: Path) -> None:
    from envlock.formats.pep508 import MAX_INCLUDE_DEPTH

    for i in range(MAX_INCLUDE_DEPTH + 3):
        (tmp_path / f"r{i}.txt").write_text(f"p{i}==1.0\n-r r{i + 1}.txt\n")
    (tmp_path / f"r{MAX_INCLUDE_DEPTH + 3}.txt").write_text("last==1.0\n")
    assert f"nest more than {MAX_INCLUDE_DEPTH} deep" in _one_error(["show", str(tmp_path / "r0.txt")])


def test_the_package_bound_counts_every_included_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(formats._reading, "MAX_PACKAGES", 10)  # the bound readers use
    (tmp_path / "a.txt").write_text("".join(f"a{i}==1.0\n" for i in range(6)))
    (tmp_path / "b.txt").write_text("".join(f"b{i}==1.0\n" for i in range(6)))
    main = tmp_path / "requirements.txt"
    main.write_text("-r a.txt\n-r b.txt\n")
    with pytest.raises(ManifestError, match="more than 10 requirements"):
        formats.read(main)


def test_two_specs_differing_only_in_a_vcs_url_differ(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "requirements.txt", tmp_path / "b" / "requirements.txt"
    for p, ref in ((a, ""), (b, "@v2.7.0")):
        p.parent.mkdir()
        p.write_text(f"numpy==1.26.4\ngit+https://github.com/pydantic/pydantic{ref}\n")
    res = CliRunner().invoke(cli, ["diff", "--format", "json", str(a), str(b)])
    assert res.exit_code == 1, res.output
    keys = [d["key"] for d in json.loads(res.output)["differences"]]
    assert keys == ["pydantic.url"]
    assert CliRunner().invoke(cli, ["diff", str(a), str(a)]).exit_code == 0


# -- pipenv ------------------------------------------------------------------------------------

def _pipenv_lines(lock: dict) -> list[Requirement]:
    deps_mod = pytest.importorskip("pipenv.utils.dependencies")
    out = []
    for section in [k for k in lock if k != "_meta"]:
        for line in deps_mod.requirements_from_lockfile(lock[section], include_hashes=False,
                                                        include_markers=True):
            out.append((section, Requirement(line)))
    return out


def _pipenv_install_reqs(path: Path, doc: dict, categories: tuple[str, ...]) -> list:
    """``(category, InstallRequirement)`` as ``pipenv install``/``sync`` takes them from the lock
    (``Lockfile.get_requirements`` per category, in ``do_install_dependencies``)."""
    locking = pytest.importorskip("pipenv.utils.locking")
    lf = locking.Lockfile.from_data(str(path), doc, meta_from_project=False)
    return [(cat, req) for cat in categories
            for req, _ in lf.get_requirements(dev=True, only=False, categories=[cat])]


def _pipenv_installs(path: Path, doc: dict, dev: bool, env: dict) -> set[str]:
    """The names ``pipenv sync [--dev]`` installs on a target with marker environment ``env``:
    ``dep.markers.evaluate(environment=...)``, a ``KeyError`` counted as a match
    (``pipenv/routines/install.py``)."""
    out = set()
    for _, req in _pipenv_install_reqs(path, doc, ("default", "develop") if dev else ("default",)):
        try:
            holds = not req.markers or req.markers.evaluate(environment=env)
        except KeyError:
            holds = True
        if holds:
            out.add(canonicalize_name(req.name))
    return out


@pytest.mark.parametrize("python", ["3.8.10", "3.12.3"])
@pytest.mark.parametrize("dev", [False, True])
def test_pipfile_lock_for_one_target_is_what_pipenv_sync_installs(python: str, dev: bool) -> None:
    from envlock.formats.markers import target_marker_env
    from envlock.verify.expected import read_lock

    path = PEERS / "other" / "pipenv-root__Pipfile.lock"
    doc = json.loads(path.read_text())
    env = target_marker_env(python, "cpython", machine="x86_64")
    theirs = _pipenv_installs(path, doc, dev, env)
    lock = read_lock(path, marker_env=env, dev=dev)
    ours = {p.name for p in lock.packages if dev or p.groups == (("", None),)}
    assert ours == theirs
    assert len(theirs) > (40 if dev else 2)


def test_pipfile_lock_reads_as_pipenv_reads_it() -> None:
    path = PEERS / "other" / "pipenv-root__Pipfile.lock"
    doc = json.loads(path.read_text())
    expected = {(s, canonicalize_name(r.name), str(r.specifier).removeprefix("=="),
                 str(r.marker) if r.marker else None) for s, r in _pipenv_lines(doc)}
    reading = formats.read(path)
    assert reading.kind == "Pipfile.lock" and reading.listing == "complete"
    lock = reading.lock
    got = {(g or "default", x.name, x.version, x.marker) for x in lock.packages for g, _ in x.groups}
    assert {(s, n, v) for s, n, v, _ in got} == {(s, n, v) for s, n, v, _ in expected}
    # the marker each is installed under: pipenv's own (a pylock's dependency_groups condition
    # is the category, which pipenv has applied before pip sees the line)
    installed_under = {(s, canonicalize_name(r.name), str(r.markers) if r.markers else None)
                       for s, r in _pipenv_install_reqs(path, doc, ("default", "develop"))}
    assert {(s, n, str(Requirement(f"x; {m}").marker) if m else None) for s, n, _, m in got} == \
        installed_under
    assert any("dependency_groups" in str(m) for *_, m in expected)  # the file has such markers
    # hashes: every hash pipenv passes to pip (--hash=) is in the reading
    _, entries, meta = pipenv_reader.read_pipfile_lock(doc, path.name)
    for e in entries:
        assert e["hashes"] == sorted(doc[e["category"]][next(
            k for k in doc[e["category"]] if canonicalize_name(k) == e["name"])]["hashes"])
    assert meta["sha256"] == doc["_meta"]["hash"]["sha256"]
    assert meta["sources"] == doc["_meta"]["sources"]


def test_pipfile_reads_as_pipenv_reads_it() -> None:
    deps_mod = pytest.importorskip("pipenv.utils.dependencies")
    plette = pytest.importorskip("pipenv.vendor.plette")
    path = PEERS / "other" / "pdm__Pipfile"
    with path.open() as fh:
        pf = plette.Pipfile.load(fh)
    expected = set()
    for cat in ("packages", "dev-packages"):
        section = pf._data.get(cat, {})
        for line in deps_mod.requirements_from_pipfile(dict(section), include_markers=True):
            r = Requirement(line)
            expected.add((canonicalize_name(r.name), str(r.specifier), str(r.marker) if r.marker else None))
    entries, meta = pipenv_reader.read_pipfile(formats._load.load_toml(path.read_text(), "Pipfile"),
                                               "Pipfile")
    got = {(e["name"], (e.get("constraint") or {}).get("version", e["version"]),
            str(Requirement(f"x; {e['marker']}").marker) if e.get("marker") else None) for e in entries}
    assert got == expected
    assert meta["requires"] == {"python_version": "3.6"}
    assert formats.read(path).listing == "partial"


def _local_tree(tmp: Path) -> Path:
    """A requirements file naming local projects of each kind pip knows, relative to it."""
    proj = tmp / "proj"
    (proj / "localpkg").mkdir(parents=True)
    (proj / "localpkg" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\n[project]\nname = "My_Local"\nversion = "0.3"\n')
    (proj / "cfgpkg").mkdir()
    (proj / "cfgpkg" / "setup.cfg").write_text("[metadata]\nname = cfg-pkg\nversion = attr: cfg.V\n")
    (proj / "cfgpkg" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (proj / "dist").mkdir()
    for f in ("dist/foo-1.2-py3-none-any.whl", "dist/bar_baz-2.0.tar.gz", "qux-1.3-py3-none-any.whl",
              "dist/plat-3.0-cp312-cp312-manylinux_2_17_x86_64.whl"):
        (proj / f).write_bytes(b"")
    req = proj / "requirements.txt"
    req.write_text(f"./localpkg\n-e cfgpkg\n./dist/foo-1.2-py3-none-any.whl\n"
                   f"{(proj / 'dist' / 'plat-3.0-cp312-cp312-manylinux_2_17_x86_64.whl').as_uri()}\n"
                   './dist/bar_baz-2.0.tar.gz ; python_version >= "3"\nqux-1.3-py3-none-any.whl\n'
                   "numpy==1.26.4\n")
    return req


def test_local_paths_read_as_pip_reads_them(tmp_path: Path, monkeypatch) -> None:
    """A directory, an editable directory, a wheel, an sdist, a bare wheel file name: pip names
    the wheels from their file names and links the rest (oracle: pip's own parser, run in the
    requirements file's directory); envlock names each, relative to the file, never drops one."""
    req = _local_tree(tmp_path)
    monkeypatch.chdir(req.parent)
    pip_named, pip_urls = _pip_reading(req)
    assert pip_named == {("foo", "1.2"), ("qux", "1.3"), ("plat", "3.0"), ("numpy", "1.26.4")}
    assert len(pip_urls) == 3
    assert _envlock_reading(req) == (pip_named, pip_urls)
    monkeypatch.chdir(tmp_path)  # read from elsewhere: still relative to the file
    pkgs = {p["name"]: p for p in formats.read(req).data["pip"]["packages"]}
    assert (pkgs["my-local"]["version"], pkgs["my-local"]["named-by"]) == ("0.3", "metadata")
    assert (pkgs["cfg-pkg"]["version"], pkgs["cfg-pkg"]["origin"]) == ("unknown", "editable")
    assert (pkgs["bar-baz"]["version"], pkgs["bar-baz"]["named-by"]) == ("2.0", "file-name")
    raw = {p["name"]: p for p in read_requirements(req.read_text(), "r", path=req)}
    assert raw["bar-baz"]["marker"] == 'python_version >= "3"'  # pip splits it off at ';'
    assert all(pkgs[n]["local"] for n in ("my-local", "cfg-pkg", "foo", "bar-baz", "qux", "plat"))
    out = CliRunner().invoke(cli, ["show", str(req), "--width", "400"]).output
    assert "packages: 0 conda, 7 pip; local paths: my-local (./localpkg), cfg-pkg (cfgpkg)" in out
    assert formats.read(req).platforms == ("linux-64",)  # the platform wheel's tag


def test_a_local_path_that_names_nothing_is_listed_unnamed(tmp_path: Path, monkeypatch) -> None:
    """pip refuses a directory without project metadata (and one that is not there); envlock
    lists it under its path, unnamed, and ``show`` says so: no line is dropped."""
    from pip._internal.exceptions import InstallationError

    (tmp_path / "noname").mkdir()
    req = tmp_path / "requirements.txt"
    req.write_text("./noname\n-e ./missing\nrich==13.7.1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InstallationError, match="not installable"):
        _pip_reading(req)
    pkgs = {p["name"]: p for p in formats.read(req).data["pip"]["packages"]}
    assert pkgs["./noname"]["unnamed"] is True and pkgs["./missing"]["origin"] == "editable"
    out = CliRunner().invoke(cli, ["show", str(req), "--width", "400"]).output
    assert "unnamed local paths (no project name found there): ./noname, ./missing" in out


def test_a_local_wheel_pip_cannot_name_is_one_error(tmp_path: Path, monkeypatch) -> None:
    from pip._internal.exceptions import InvalidWheelFilename

    req = tmp_path / "requirements.txt"
    req.write_text("rich==13.7.1\n./dist/foo.whl\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidWheelFilename):
        _pip_reading(req)
    assert "line 2: ./dist/foo.whl: not a wheel file name" in _one_error(["show", str(req)])


def test_an_environment_files_pip_include_is_followed_as_conda_env_create_does(
        tmp_path: Path, monkeypatch) -> None:
    """``conda env create`` writes the ``pip:`` list to a requirements file in the environment
    file's directory and runs ``pip install -r`` on it there (conda/env/installers/pip.py): its
    ``-r`` is followed relative to that directory.  Oracle: that file, read by pip's parser."""
    import yaml

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.txt").write_text("rich==13.7.1\n-r ../base.txt\n")
    (tmp_path / "base.txt").write_text("click==8.1.7\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "1"\n')
    pip_list = ["numpy==1.26.4", "-r sub/other.txt", "./pkg"]
    env = tmp_path / "environment.yml"
    env.write_text(yaml.safe_dump({"name": "x", "dependencies": ["python=3.11", {"pip": pip_list}]}))
    handed = tmp_path / "condaenv.abc.requirements.txt"  # what conda writes for pip
    handed.write_text("\n".join(pip_list))
    monkeypatch.chdir(tmp_path)  # conda runs pip there (cwd=pip_workdir)
    pip_named, pip_urls = _pip_reading(handed)
    handed.unlink()
    assert pip_named == {("numpy", "1.26.4"), ("rich", "13.7.1"), ("click", "8.1.7")}
    assert _envlock_reading(env) == (pip_named, pip_urls)
    # a cycle through the environment file, and a missing include: one error line each
    (tmp_path / "sub" / "other.txt").write_text("-r ../sub/other.txt\n")
    assert "a cycle: other.txt -> other.txt" in _one_error(["show", str(env)])
    (tmp_path / "sub" / "other.txt").unlink()
    assert "pip section: line 2: -r " in _one_error(["show", str(env)])


def test_conda_lock_refuses_a_pip_include(tmp_path: Path) -> None:
    """conda-lock's parse_environment_file is not the reference for ``-r`` in ``pip:``: it
    refuses the line (InvalidRequirement) where conda env create follows it."""
    pytest.importorskip("conda_lock")
    from conda_lock.src_parser.environment_yaml import parse_environment_file
    from packaging.requirements import InvalidRequirement

    (tmp_path / "other.txt").write_text("rich==13.7.1\n")
    env = tmp_path / "environment.yml"
    env.write_text("name: x\ndependencies:\n  - python=3.11\n  - pip:\n    - -r other.txt\n")
    mapping = tmp_path / "mapping.json"
    mapping.write_text("{}", encoding="utf-8")
    with pytest.raises(InvalidRequirement):
        parse_environment_file(env, platforms=["linux-64"], mapping_url=str(mapping))
    names = {p["name"] for p in formats.read(env).data["pip"]["packages"]}
    assert names == {"rich"}


def test_a_freezes_editable_installs_are_named_as_pip_freeze_named_them() -> None:
    """``pip freeze`` writes ``# Editable install with no version control (name==version)``
    above a ``-e <location>`` (pip/_internal/operations/freeze.py): the location is that
    distribution, whether or not the directory is here."""
    import re

    freeze = FOREIGN / "BELIV-ASU__GLANCE__pip_freeze.txt"
    said = dict(re.findall(r"^# Editable install with no version control \(([^=]+)==([^)]+)\)",
                           freeze.read_text(), re.MULTILINE))
    assert len(said) == 12
    pkgs = [p for p in formats.read(freeze).data["pip"]["packages"] if p.get("local")]
    assert {p["name"]: p["version"] for p in pkgs} == {canonicalize_name(n): v for n, v in said.items()}
    assert all(p["named-by"] == "pip-freeze" and p["origin"] == "editable" for p in pkgs)


def test_a_local_projects_metadata_is_read_boundedly(tmp_path: Path) -> None:
    """A dynamic version is unknown (known only once built); a pyproject.toml past the bound
    or malformed is one error naming it, as building it would fail."""
    from envlock.formats.localreq import MAX_METADATA_BYTES

    (tmp_path / "pkg").mkdir()
    pyproject = tmp_path / "pkg" / "pyproject.toml"
    pyproject.write_text('[project]\nname = "dyn"\ndynamic = ["version"]\n')
    req = tmp_path / "requirements.txt"
    req.write_text("rich==13.7.1\n./pkg\n")
    pkgs = {p["name"]: p for p in formats.read(req).data["pip"]["packages"]}
    assert pkgs["dyn"]["version"] == "unknown" and pkgs["dyn"]["named-by"] == "metadata"
    pyproject.write_text("# x\n" * (MAX_METADATA_BYTES // 4 + 1))
    assert f"{tmp_path}/pkg/pyproject.toml: too large" in _one_error(["show", str(req)])
    pyproject.write_text("[project\n")
    assert "malformed TOML" in _one_error(["show", str(req)])
