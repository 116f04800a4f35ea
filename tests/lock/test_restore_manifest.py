"""``envlock restore MANIFEST`` from the manifest alone, and ``envlock lock --from-manifest``.

Real environments throughout: venvs made by uv from wheels built here, conda prefixes installed
by py-rattler from a local ``file://`` channel, snapshots taken by envlock itself; uv runs
offline (``--no-index --find-links``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.lock._from_manifest import find_python, variant_index
from envlock.lock._restore import plan_restore
from envlock.manifest import (
    EnvlockInfo,
    GitInfo,
    GitRemote,
    Manifest,
    PipInfo,
    PipPackage,
    PythonInfo,
    Target,
)

pytestmark = pytest.mark.usefixtures("offline_pip", "no_conda")


def snapshot(tmp_path: Path, name: str, **target: str) -> Path:
    out = tmp_path / f"{name}.toml"
    result = CliRunner().invoke(cli, ["snapshot", *sum(([f"--{k}", v] for k, v in target.items()),
                                                       []), "-o", str(out), "-q",
                                      "--repo", str(tmp_path)])
    assert result.exit_code == 0, result.output
    return out


def conda_meta(prefix: Path) -> dict[str, tuple[str, str]]:
    return {(r := json.loads(p.read_text()))["name"]: (r["version"], r["build"])
            for p in (prefix / "conda-meta").glob("*.json")}


def test_venv_restored_from_its_manifest_alone(tmp_path, wheelhouse, h):
    old = h.make_venv(tmp_path / "old", wheelhouse, "gamma-pkg==0.3", "beta==2.0")
    mpath = snapshot(tmp_path, "old", python=str(old / "bin" / "python"))
    new = tmp_path / "new"
    args = ["restore", str(mpath), "--into", str(new), "--no-index", "--find-links",
            str(wheelhouse)]
    plan = CliRunner().invoke(cli, args)
    assert plan.exit_code == 0, plan.output
    assert "uv pip install --quiet --python" in plan.stdout
    assert "alpha==1.0 beta==2.0 gamma-pkg==0.3" in plan.stdout
    assert not new.exists()
    result = CliRunner().invoke(cli, [*args, "--run"])
    assert result.exit_code == 0, result.output
    assert h.installed(new) == h.installed(old) == {"alpha": "1.0", "beta": "2.0",
                                                    "gamma-pkg": "0.3"}
    assert "# Came back exactly: 3 package(s)" in result.stdout
    assert "# Packages and Python that differ from the manifest: none" in result.stdout
    assert "# A rebuild can never restore" in result.stdout
    # verify and diff agree: the same environment, at another path
    check = CliRunner().invoke(cli, ["verify", "--manifest", str(mpath), "--python",
                                     str(new / "bin" / "python")])
    assert check.exit_code == 0, check.output
    again = snapshot(tmp_path, "new", python=str(new / "bin" / "python"))
    same = CliRunner().invoke(cli, ["diff", str(mpath), str(again), "--format", "json"])
    assert same.exit_code == 0, same.output


def test_default_into_is_beside_the_manifest_and_run_refuses_a_missing_python(tmp_path):
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix="/old/env", python="/old/env/bin/python",
                      chosen_by="--python"),
        python=PythonInfo(version="3.11.99", implementation="cpython",
                          base_prefix="/opt/nowhere"),
        pip=PipInfo(packages=(PipPackage(name="alpha", version="1.0", location="/s"),)),
    )
    mpath = m.write(tmp_path / "exp.toml")
    result = CliRunner().invoke(cli, ["restore", str(mpath), "--run"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: cannot create the venv: no Python 3.11.99 on this machine (tried: "
        "uv python find 3.11.99: none); the manifest names /opt/nowhere/bin/python3.11 (not "
        "run: a manifest is data; --python /opt/nowhere/bin/python3.11 uses it); install it "
        "(e.g. `uv python install 3.11.99`) or give --python PATH")
    assert not (tmp_path / "exp-restored").exists()
    dry = CliRunner().invoke(cli, ["restore", str(mpath)])
    assert f"uv venv --quiet {tmp_path / 'exp-restored'} --python 3.11.99" in dry.stdout
    assert "warning: no Python 3.11.99 on this machine" in dry.stderr


def test_find_python_names_what_it_found_and_never_another(tmp_path, monkeypatch):
    """uv finds this interpreter where PATH offers it (the test puts its bin directory first,
    whatever the host's PATH holds); where PATH and uv's own installs offer none, only
    ``own_last`` (restore's and bisect's choice) finds envlock's own interpreter, and the
    manifest's base-prefix, though it exists, is never run: only proposed."""
    here = ".".join(map(str, sys.version_info[:3]))
    mm = f"{sys.version_info[0]}.{sys.version_info[1]}"
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-managed-pythons"))
    monkeypatch.setenv("PATH", f"{sys.base_prefix}/bin{os.pathsep}{os.environ['PATH']}")
    found = find_python(here, base_prefix=sys.base_prefix)
    assert found.exact and Path(found.path).exists()
    assert found.how == "uv python find"  # the machine's, not the manifest's (never run)
    assert found.proposed == f"{sys.base_prefix}/bin/python{mm}"
    assert found.describe().startswith(f"Python {here} at {found.path} (uv python find; the "
                                       "recorded version)")
    other = find_python("3.0.1", explicit=sys.executable)
    assert other.path == sys.executable and not other.exact
    assert "NOT the recorded 3.0.1" in other.describe()

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    (tmp_path / "empty-bin").mkdir()
    none = find_python(here, base_prefix=sys.base_prefix)
    assert none.path is None and none.looked == (f"uv python find {here}: none",)
    assert f"the manifest names {sys.base_prefix}/bin/python{mm} (not run" in none.describe()
    own = find_python(here, base_prefix=sys.base_prefix, own_last=True)
    assert own.exact and own.how == "envlock's own" and own.path == f"{sys.base_prefix}/bin/python{mm}"
    assert own.describe() == f"Python {here} at {own.path} (envlock's own; the recorded version)"
    assert find_python("3.0.1", own_last=True).looked == ("uv python find 3.0.1: none",)


def torch_manifest(*versions: str) -> Manifest:
    return Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix="/old/env", chosen_by="--python"),
        python=PythonInfo(version=".".join(map(str, sys.version_info[:3])),
                          base_prefix=sys.base_prefix),
        pip=PipInfo(packages=tuple(
            PipPackage(name=n, version=v, location="/s")
            for n, v in (x.split("==") for x in versions))),
    )


def test_local_label_variants_get_their_index(tmp_path):
    assert variant_index("cu130", {}) == "https://download.pytorch.org/whl/cu130"
    assert variant_index("rocm6.2", {}) == "https://download.pytorch.org/whl/rocm6.2"
    assert variant_index("cpu", {"cpu": "https://mirror/cpu"}) == "https://mirror/cpu"
    assert variant_index("mylab1", {}) is None
    mpath = torch_manifest("torch==2.14.1+cu130", "numpy==2.4.1", "odd==1.0+mylab1").write(
        tmp_path / "m.toml")
    plan = plan_restore([mpath], tmp_path / "new", index_map={"cu130": "https://mirror/cu130"})
    pins = next(s for s in plan.steps if s.kind == "pip-pins")
    assert pins.shell.endswith("--no-deps --extra-index-url https://mirror/cu130 --index-strategy "
                               "unsafe-best-match -- torch==2.14.1+cu130 numpy==2.4.1 odd==1.0+mylab1")
    assert "+cu130 packages (torch) from https://mirror/cu130 (--index)" in plan.notes
    assert ("no index is known for the local label +mylab1 (odd); give --index mylab1=URL or "
            "--find-links DIR") in plan.warnings
    default = plan_restore([mpath], tmp_path / "new")
    assert "--extra-index-url https://download.pytorch.org/whl/cu130" in default.steps[-1].shell


def test_editable_from_its_recorded_commit_and_patch(tmp_path):
    commit = "c" * 40
    import hashlib

    patch_bytes = b"diff --git a/x b/x\n"
    git = GitInfo(path="/src/proj", commit=commit, dirty=True, patch="manifest.patch",
                  patch_sha256=hashlib.sha256(patch_bytes).hexdigest(),
                  remotes=(GitRemote(name="origin", url="https://git.example/proj.git"),))
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix="/old/env", chosen_by="--python"),
        python=PythonInfo(version=".".join(map(str, sys.version_info[:3])),
                          base_prefix=sys.base_prefix),
        git=git,
        pip=PipInfo(packages=(PipPackage(name="proj", version="0.1", location="/s",
                                         origin="editable", editable_path="/src/proj", git=git),
                              PipPackage(name="tool", version="2.0", location="/s", origin="vcs",
                                         vcs="git", url="https://git.example/tool.git",
                                         commit="d" * 40))),
    )
    mpath = m.write(tmp_path / "manifest.toml")
    (tmp_path / "manifest.patch").write_bytes(patch_bytes)
    new = tmp_path / "new"
    plan = plan_restore([mpath], new)
    shells = [s.shell for s in plan.steps]
    assert f"tool @ git+https://git.example/tool.git@{'d' * 40}" in shells[1]
    assert shells[2:] == [
        "git -c protocol.ext.allow=never clone --quiet --no-checkout -- "
        f"https://git.example/proj.git {new}/src/proj",
        f"git -C {new}/src/proj checkout --quiet --detach {commit}",
        f"git -C {new}/src/proj apply --binary -- {tmp_path / 'manifest.patch'}",
        f"uv pip install --python {new}/bin/python --no-deps -e {new}/src/proj",
    ]
    assert "git remote https://git.example/proj.git (proj)" in plan.contacts
    assert not any("editable install of" in n for n in plan.not_restored)


def test_conda_prefix_restored_from_its_manifest(tmp_path, conda_channel):
    spec = tmp_path / "environment.yml"
    spec.write_text(f"channels: [{conda_channel.as_uri()}]\n"
                    "dependencies: [tool, zlib-ng, docs-theme, pyfoo, python=3.11]\n")
    first = tmp_path / "first"
    made = CliRunner().invoke(cli, ["lock", "-f", str(spec), "-p", "linux-64", "-o",
                                    str(tmp_path / "lock")])
    assert made.exit_code == 0, made.output
    built = CliRunner().invoke(cli, ["restore", str(tmp_path / "lock" / "conda-lock.yml"),
                                     "--prefix", str(first), "--run"])
    assert built.exit_code == 0, built.output
    mpath = snapshot(tmp_path, "first", prefix=str(first))
    data = tomllib.loads(mpath.read_text())
    assert "lockfiles" not in data or not data["lockfiles"].get("files")
    locked = CliRunner().invoke(cli, ["lock", "--from-manifest", str(mpath), "-o",
                                      str(tmp_path / "relock")])
    assert locked.exit_code == 0, locked.output
    from envlock.lock import _condalock

    doc = _condalock.read(tmp_path / "relock" / "conda-lock.yml")
    assert {p.name: (p.version, p.build) for p in doc.package} == {
        n: tuple(vb) for n, vb in conda_meta(first).items()}
    assert not (tmp_path / "relock" / "pylock.toml").exists()  # pyfoo belongs to conda
    second = tmp_path / "second"
    dry = CliRunner().invoke(cli, ["restore", str(mpath), "--into", str(second)])
    assert dry.exit_code == 0, dry.output
    assert (f"conda create --prefix {second} --override-channels -c "
            f"{conda_channel.as_uri()}") in dry.stdout
    assert "liba=1.0=h0_0" in dry.stdout
    result = CliRunner().invoke(cli, ["restore", str(mpath), "--into", str(second), "--run"])
    assert "installed 6 conda packages with py-rattler" in result.stdout, result.output
    assert conda_meta(second) == conda_meta(first)
    assert set(conda_meta(first)) == {"docs-theme", "liba", "pyfoo", "python", "tool", "zlib-ng"}
    assert (second / "lib" / "python3.11" / "site-packages" / "pyfoo" / "__init__.py").exists()
    assert "# Came back exactly: 6 package(s)" in result.stdout
    # the channel's python is a stand-in without bin/python: verify says so, and only that
    differs = result.stdout.split("# Packages and Python that differ from the manifest:")[1].split("# A rebuild")[0]
    assert [ln for ln in differs.splitlines() if ln.strip()] == [
        f"#   error: the target interpreter did not answer: no bin/python in {second}"]
    assert result.exit_code == 1


def test_lock_from_manifest_writes_lockfiles_without_building(tmp_path, wheelhouse, h):
    old = h.make_venv(tmp_path / "old", wheelhouse, "alpha==1.1", "beta==2.5")
    mpath = snapshot(tmp_path, "old", python=str(old / "bin" / "python"))
    out = tmp_path / "lock"
    result = CliRunner().invoke(cli, ["lock", "--from-manifest", str(mpath), "-o", str(out),
                                      "--no-index", "--find-links", str(wheelhouse)])
    assert result.exit_code == 0, result.output
    data = tomllib.loads((out / "pylock.toml").read_text())
    got = {p["name"]: (p["version"], p["wheels"][0]["hashes"]["sha256"])
           for p in data["packages"]}
    import hashlib

    assert got == {
        n: (v, hashlib.sha256((wheelhouse / f"{n}-{v}-py3-none-any.whl").read_bytes()).hexdigest())
        for n, v in (("alpha", "1.1"), ("beta", "2.5"))}
    assert data["tool"]["envlock"]["source"] == "envlock lock --from-manifest old.toml"
    assert not (tmp_path / "old-restored").exists()


#: A PEP 517/660 build backend kept in the project itself (``backend-path``), needing no
#: download: it writes a wheel (or an editable one, a ``.pth`` pointing at the source).
BACKEND = '''
import base64, hashlib, os, zipfile

NAME, VERSION = "proj", "0.1"
INFO = f"{NAME}-{VERSION}.dist-info"


def _wheel(directory, files):
    path = os.path.join(directory, f"{NAME}-{VERSION}-py3-none-any.whl")
    files = {**files,
             f"{INFO}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
             f"{INFO}/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
                              "Tag: py3-none-any\\n"}
    digest = lambda t: base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
    record = "".join(f"{p},sha256={digest(t)},{len(t.encode())}\\n" for p, t in files.items())
    files[f"{INFO}/RECORD"] = record + f"{INFO}/RECORD,,\\n"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return os.path.basename(path)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    src = open(os.path.join(NAME, "__init__.py")).read()
    return _wheel(wheel_directory, {f"{NAME}/__init__.py": src})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {f"{NAME}.pth": os.path.abspath(".") + "\\n"})
'''


def test_editable_restored_from_commit_and_patch_for_real(tmp_path, h):
    import subprocess

    def git(*args: str, cwd: Path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True, timeout=60).stdout

    repo = tmp_path / "proj"
    (repo / "proj").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "proj"\nversion = "0.1"\n')
    (repo / "backend.py").write_text(BACKEND)
    (repo / "proj" / "__init__.py").write_text("VALUE = 1\n")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo).strip()
    (repo / "proj" / "__init__.py").write_text("VALUE = 2  # uncommitted\n")
    old = h.make_venv(tmp_path / "old", tmp_path)
    subprocess.run([h.uv(), "pip", "install", "-q", "--python", str(old / "bin" / "python"),
                    "--no-index", "-e", str(repo)], check=True, timeout=300)
    mpath = tmp_path / "manifest.toml"
    # `--save-patch` keeps the uncommitted diff beside the manifest and its sha256 in [git]
    result = CliRunner().invoke(cli, ["snapshot", "--python", str(old / "bin" / "python"),
                                      "-o", str(mpath), "-q", "--repo", str(repo),
                                      "--save-patch"])
    assert result.exit_code == 0, result.output
    new = tmp_path / "new"
    result = CliRunner().invoke(cli, ["restore", str(mpath), "--into", str(new), "--no-index",
                                      "--run"])
    assert f"git -C {new}/src/proj apply --binary -- {tmp_path / 'manifest.patch'}" in \
        result.stdout, result.output
    assert git("rev-parse", "HEAD", cwd=new / "src" / "proj").strip() == commit
    value = subprocess.run([str(new / "bin" / "python"), "-c", "import proj; print(proj.VALUE)"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert value.strip() == "2"
    assert "#   proj 0.1" in result.stdout  # came back exactly
    assert result.exit_code == 0, result.output


def test_ctrl_c_during_restore_leaves_nothing(tmp_path, wheelhouse):
    from envlock._run import run
    from envlock.lock._apply import run_plan

    mpath = torch_manifest("alpha==1.0", "beta==2.0").write(tmp_path / "m.toml")
    plan = plan_restore([mpath], tmp_path / "new", no_index=True,
                        find_links=[str(wheelhouse)])

    def interrupted(argv, **kw):
        if argv[1:3] == ["pip", "install"]:
            assert (tmp_path / "new" / "pyvenv.cfg").exists()  # the venv step ran for real
            raise KeyboardInterrupt
        return run(argv, **kw)

    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, runner=interrupted)
    assert not (tmp_path / "new").exists()


def test_a_version_no_longer_on_the_index_is_left_out_and_said(tmp_path, wheelhouse, h):
    mpath = torch_manifest("alpha==1.0", "beta==9.9", "zork==1.0").write(tmp_path / "m.toml")
    new = tmp_path / "new"
    result = CliRunner().invoke(cli, ["restore", str(mpath), "--into", str(new), "--no-index",
                                      "--find-links", str(wheelhouse), "--run"])
    assert result.exit_code == 1, result.output
    assert "not on the indexes given, left out: beta==9.9, zork==1.0" in result.stdout
    assert h.installed(new) == {"alpha": "1.0"}
    assert "#   error: 2 package(s) of the manifest (m.toml) not installed: beta, zork" in result.stdout


def test_python_version_and_python_options_of_a_manifest_restore(tmp_path):
    """--python-version is honoured (and the restore said not exact), a version that is not
    one is a usage error, a --python that does not run is an Error line — none ignored."""
    import platform

    mine = platform.python_version()
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix="/old/env", python="/old/env/bin/python",
                      chosen_by="--python"),
        python=PythonInfo(version="3.9.1", implementation="cpython", base_prefix="/opt/nowhere"),
        pip=PipInfo(packages=(PipPackage(name="alpha", version="1.0", location="/s"),)),
    )
    mpath = m.write(tmp_path / "exp.toml")
    dry = CliRunner().invoke(cli, ["restore", str(mpath), "--python-version", mine])
    assert dry.exit_code == 0, dry.output
    assert (f"warning: Python {mine} asked for (--python-version); the manifest records 3.9.1: "
            "not an exact restore") in dry.stderr
    assert f"--python {mine}" in dry.stdout or f"Python {mine} at " in dry.stdout
    bad = CliRunner().invoke(cli, ["restore", str(mpath), "--python-version", "banana"])
    assert bad.exit_code == 2 and "'banana' is not a Python version" in bad.output
    true = CliRunner().invoke(cli, ["restore", str(mpath), "--python", "/bin/true"])
    assert true.exit_code == 2
    assert true.output.strip().splitlines()[-1] == \
        "Error: --python /bin/true: does not run as a Python interpreter"


def test_find_links_adds_no_online_variant_index(tmp_path):
    """restore --find-links DIR on an offline node: PyTorch's online index is not added for a
    +cpu torch; --index cpu=URL still adds one (issue 25)."""
    from envlock.lock._from_manifest import index_options

    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="venv", prefix="/old/env", chosen_by="--python"),
        python=PythonInfo(version=".".join(map(str, sys.version_info[:3]))),
        pip=PipInfo(packages=(PipPackage(name="torch", version="2.13.0+cpu", location="/s",
                                         origin="index"),)))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    opts, notes, _ = index_options(m, {}, None, [str(wheels)], False)
    assert opts.extra_index_urls == () and opts.find_links == (str(wheels.resolve()),)
    assert any("+cpu packages (torch) from --find-links" in n for n in notes)
    opts, _, _ = index_options(m, {}, None, [], False)
    assert opts.extra_index_urls == ("https://download.pytorch.org/whl/cpu",)
    opts, _, _ = index_options(m, {"cpu": "https://mirror.example/cpu"}, None, [str(wheels)], False)
    assert opts.extra_index_urls == ("https://mirror.example/cpu",)
