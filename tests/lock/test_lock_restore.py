"""``envlock restore``, ``find_lockfiles``, the conda part of ``--from-env`` and missing tools."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.errors import LockError, MissingDependencyError
from envlock.lock import _condalock, find_lockfiles
from envlock.lock._fromenv import lock_manifest
from envlock.lock._restore import plan_restore
from envlock.manifest import (
    CondaInfo,
    CondaPackage,
    CpuInfo,
    EnvlockInfo,
    EnvVars,
    GitInfo,
    LockfileRef,
    LockfilesInfo,
    Manifest,
    PipInfo,
    PipPackage,
    PlatformInfo,
    PythonInfo,
    Target,
)
from envlock.manifest.stacktables import CudaInfo, CudaToolkit, Gpu, GpuInfo, Tool, ToolchainInfo

PYLOCK = 'lock-version = "1.0"\ncreated-by = "test"\npackages = []\n'
HASHED = "alpha==1.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- find_lockfiles -------------------------------------------------------------------------

def test_find_lockfiles(tmp_path):
    files = {
        "conda-lock.yml": "version: 1\n",
        "gpu.conda-lock.yml": "version: 1\n",
        "conda-linux-64.lock": "# platform: linux-64\n@EXPLICIT\nhttps://x/a.conda#abc\n",
        "conda-notes.lock": "not an explicit file\n",
        "pylock.toml": PYLOCK,
        "pylock.dev.toml": PYLOCK,
        "pylock.a.b.toml": PYLOCK,  # PEP 751: the name part has no dot
        "requirements.txt": HASHED,
        "requirements-dev.txt": "alpha>=1\n",  # not hash-pinned: not a lock
        "environment.yml": "dependencies: [a]\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    info = find_lockfiles(tmp_path)
    assert info.status == "ok"
    assert info.source == str(tmp_path.resolve())
    got = {Path(f.path).name: (f.kind, f.sha256) for f in info.files}
    assert got == {
        name: (kind, sha(tmp_path / name)) for name, kind in [
            ("conda-linux-64.lock", "conda-explicit"), ("conda-lock.yml", "conda-lock"),
            ("gpu.conda-lock.yml", "conda-lock"), ("pylock.dev.toml", "pylock"),
            ("pylock.toml", "pylock"), ("requirements.txt", "requirements"),
        ]
    }


def test_find_lockfiles_none_and_missing(tmp_path):
    assert find_lockfiles(tmp_path) == LockfilesInfo(status="absent", source=str(tmp_path))
    missing = find_lockfiles(tmp_path / "nope")
    assert missing.status == "error"
    assert missing.source == f"{tmp_path / 'nope'}: No such file or directory"


# -- restore ---------------------------------------------------------------------------------

def manifest(tmp_path: Path, lockfiles: list[Path]) -> Manifest:
    return Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="node1"),
        target=Target(kind="venv", prefix="/old/env", python="/old/env/bin/python",
                      chosen_by="--python"),
        python=PythonInfo(version="3.11.7", implementation="cpython",
                          base_prefix="/opt/python/3.11.7"),
        platform=PlatformInfo(os_name="Debian GNU/Linux 12 (bookworm)", glibc="2.36",
                              kernel="6.1.0"),
        cpu=CpuInfo(model="AMD EPYC", usable_cores=2, flags=("avx2", "fma")),
        env=EnvVars(vars={"OMP_NUM_THREADS": "1"}),
        git=GitInfo(path="/src/proj", commit="f" * 40, dirty=True),
        pip=PipInfo(packages=(PipPackage(name="mylib", version="0.1", location="/s",
                                         origin="editable", editable_path="/src/mylib"),)),
        lockfiles=LockfilesInfo(files=tuple(
            LockfileRef(path=str(p), kind="pylock", sha256=sha(p)) for p in lockfiles)),
        gpu=GpuInfo(vendor="nvidia", driver_version="580.65.06", cuda_driver_version="13.0",
                    gpus=(Gpu(index=0, name="NVIDIA A100-SXM4-40GB", compute_capability="8.0"),)),
        cuda=CudaInfo(toolkits=(CudaToolkit(path="/usr/local/cuda-13.0", version="13.0",
                                            origin="/usr/local"),)),
        toolchain=ToolchainInfo(tools=(Tool(name="gcc", path="/usr/bin/gcc", version="12.2.0"),)),
        extra={"future-area": {"status": "ok"}},
    )


def test_restore_from_a_manifest(tmp_path):
    pylock = tmp_path / "pylock.toml"
    pylock.write_text(PYLOCK)
    mpath = tmp_path / "manifest.toml"
    manifest(tmp_path, [pylock]).write(mpath)
    result = CliRunner().invoke(cli, ["restore", str(mpath), "--prefix", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    new = tmp_path / "new"
    assert result.output.splitlines() == [
        "# Recreate the environment:",
        "# create a virtual environment",
        f"uv venv {new} --python 3.11.7",
        "# install the pip packages of pylock.toml",
        f"uv pip install --python {new}/bin/python -r {pylock}",
        "# Not restored by any lockfile (comes from the machine or the job):",
        ("#   operating system and C library: Debian GNU/Linux 12 (bookworm), glibc 2.36, "
        "kernel 6.1.0"),
        "#   CPU: AMD EPYC (2 usable cores; ISA flags avx2 fma)",
        ("#   the Python interpreter: cpython 3.11.7 (base /opt/python/3.11.7); a new venv uses "
        "whatever interpreter of that version the machine has"),
        ("#   GPU and NVIDIA driver 580.65.06, supports CUDA up to 13.0: NVIDIA A100-SXM4-40GB "
         "(compute capability 8.0)"),
        "#   system CUDA toolkit 13.0 at /usr/local/cuda-13.0",
        "#   compilers and build tools: gcc 12.2.0",
        "#   [future-area] as recorded in the manifest",
        "#   environment variables: OMP_NUM_THREADS (set them in the job script)",
        f"#   the code: git checkout {'f' * 12} of /src/proj plus uncommitted changes",
        "#   mylib 0.1: editable install of /src/mylib",
    ]


def test_restore_warns_about_changed_and_missing_lockfiles(tmp_path):
    pylock = tmp_path / "pylock.toml"
    pylock.write_text(PYLOCK)
    gone = tmp_path / "pylock.gone.toml"
    gone.write_text(PYLOCK)
    m = manifest(tmp_path, [pylock, gone])
    gone.unlink()
    pylock.write_text(PYLOCK + "# edited\n")
    mpath = tmp_path / "m.toml"
    m.write(mpath)
    plan = plan_restore([mpath], tmp_path / "new")
    assert plan.warnings[:2] == (
        f"{pylock}: changed since the manifest was taken (sha256 differs); not used",
        f"{gone}: recorded in the manifest but missing",
    )
    # no consistent lockfile is left: the plan comes from the manifest itself
    assert plan.manifests == (str(mpath),)
    assert all(s.lockfile is None for s in plan.steps)


def write_conda_lock(path: Path) -> Path:
    """A conda-lock.yml of one package, written by conda-lock's own models."""
    entry = _condalock.entry_from_conda_package(conda_pkg("zlib", "1.3.1"), "linux-64")
    path.write_text(_condalock.render([entry], platforms=["linux-64"],
                                      channels=["conda-forge"], sources=["environment.yml"],
                                      content_hashes={"linux-64": "0" * 64}))
    return path


def test_restore_orders_conda_before_pip(tmp_path):
    (tmp_path / "pylock.toml").write_text(PYLOCK)
    write_conda_lock(tmp_path / "conda-lock.yml")
    plan = plan_restore([tmp_path / "pylock.toml", tmp_path / "conda-lock.yml"], "/p")
    assert [s.shell for s in plan.steps] == [
        f"conda-lock install --prefix /p {tmp_path / 'conda-lock.yml'}",
        f"uv pip install --python /p/bin/python -r {tmp_path / 'pylock.toml'}",
    ]


def test_restore_rejects_unknown_inputs(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    result = CliRunner().invoke(cli, ["restore", str(other)])
    assert result.exit_code == 2
    assert result.output == f"Error: {other}: neither an envlock manifest nor a known lockfile\n"
    bad = tmp_path / "m.toml"
    bad.write_text("[envlock\n")
    result = CliRunner().invoke(cli, ["restore", str(bad)])
    assert result.exit_code == 2
    assert "malformed TOML" in result.output


# -- the conda part of --from-env (C11), from Manifest objects --------------------------------

def conda_pkg(name: str, version: str, **kw) -> CondaPackage:
    url = f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-h1_0.conda"
    return CondaPackage(**{"name": name, "version": version, "build": "h1_0", "build_number": 0,
                           "channel": "conda-forge", "subdir": "linux-64", "url": url,
                           "md5": "0" * 32, "sha256": "1" * 64, "depends": ("libzlib >=1.3",),
                           **kw})


def test_conda_part_from_conda_meta_records(tmp_path):
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-30T00:00:00Z", host="h"),
        target=Target(kind="conda", prefix="/envs/x", chosen_by="--prefix"),
        conda=CondaInfo(packages=(
            conda_pkg("twine", "1.10.0", overwritten_by_pip=True, pip_version="1.11.0"),
            conda_pkg("zlib", "1.3.1"),
            CondaPackage(name="localpkg", version="0.1", build="0", subdir="linux-64"),
        )),
    )
    result = lock_manifest(m, tmp_path)
    doc = _condalock.read(tmp_path / "conda-lock.yml")
    assert {p.name: (p.version, p.url, p.hash.md5) for p in doc.package} == {
        "twine": ("1.10.0", conda_pkg("twine", "1.10.0").url, "0" * 32),
        "zlib": ("1.3.1", conda_pkg("zlib", "1.3.1").url, "0" * 32),
    }
    assert doc.package[0].dependencies == {"libzlib": ">=1.3"}
    assert [c.url for c in doc.metadata.channels] == ["https://conda.anaconda.org/conda-forge"]
    assert [s.name for s in result.skipped] == ["localpkg"]
    assert "no url in conda-meta" in result.skipped[0].reason
    assert any("twine 1.10.0 was overwritten by pip (1.11.0)" in n for n in result.notes)


def test_entry_without_md5_cannot_be_locked():
    with pytest.raises(LockError, match="has no md5 in conda-meta"):
        _condalock.entry_from_conda_package(conda_pkg("x", "1", md5=None), "linux-64")


def test_split_depends():
    assert _condalock.split_depends(["python_abi 3.11.* *_cp311", "libgcc", " numpy >=1.22 "]) == (
        ("python_abi", "3.11.* *_cp311"), ("libgcc", ""), ("numpy", ">=1.22"))


def test_read_rejects_a_malformed_conda_lock(tmp_path):
    from envlock.errors import ManifestError

    bad = tmp_path / "conda-lock.yml"
    bad.write_text("version: 1\nmetadata: {}\npackage: []\n")
    with pytest.raises(ManifestError, match="not a valid conda-lock file"):
        _condalock.read(bad)
    bad.write_text("package: []\n")
    with pytest.raises(ManifestError, match="missing a version"):
        _condalock.read(bad)


# -- a missing optional dependency -----------------------------------------------------------

def test_missing_conda_lock_is_one_line(tmp_path, monkeypatch):
    for mod in [m for m in sys.modules if m == "conda_lock" or m.startswith("conda_lock.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "conda_lock", None)  # what an uninstalled package looks like
    with pytest.raises(MissingDependencyError):
        _condalock.read(tmp_path / "conda-lock.yml")
    spec = tmp_path / "environment.yml"
    spec.write_text("channels: [x]\ndependencies: [a]\n")
    result = CliRunner().invoke(cli, ["lock", "-f", str(spec), "-p", "linux-64"])
    assert result.exit_code == 2
    assert result.output == ("Error: conda-lock is not installed; install it with: "
                             "pip install '.[lock]' (in envlock's checkout)\n")


def test_lock_needs_exactly_one_source():
    result = CliRunner().invoke(cli, ["lock"])
    assert result.exit_code == 2
    assert result.output == ("Error: give exactly one of --from-env, --from-manifest, -f/--file, "
                             "-r/--requirements\n")


def test_pip_entries_of_a_conda_lock_are_hash_checked(tmp_path, wheelhouse, h):
    """What ``restore --run`` does with the pip entries of conda-lock.yml when conda is absent."""
    from envlock._run import run
    from envlock.lock._pip import _uv_env
    from envlock.lock._apply import _install_pip_lines

    venv = h.make_venv(tmp_path / "env", wheelhouse)
    wheel = wheelhouse / "beta-2.0-py3-none-any.whl"
    good = f"beta @ {wheel.as_uri()} --hash=sha256:{sha(wheel)}"
    bad = f"beta @ {wheel.as_uri()} --hash=sha256:{'0' * 64}"
    with pytest.raises(LockError, match="Hash mismatch"):
        _install_pip_lines(h.uv(), str(venv), [bad], run, 300, _uv_env())
    assert "beta" not in h.installed(venv)
    _install_pip_lines(h.uv(), str(venv), [good], run, 300, _uv_env())
    assert h.installed(venv)["beta"] == "2.0"


# -- --from-env on a conda prefix laid out as conda writes it ------------------------------

@pytest.mark.usefixtures("offline_pip")
def test_from_env_on_a_conda_prefix(tmp_path, conda_prefix, h):
    import json

    wheels = tmp_path / "wheels"
    h.make_wheel(wheels, "twine", "4.0.2")
    out = tmp_path / "lock"
    result = CliRunner().invoke(cli, ["lock", "--from-env", "--prefix", str(conda_prefix), "-o",
                                      str(out), "--no-index", "--find-links", str(wheels)])
    assert result.exit_code == 0, result.output
    records = [json.loads(p.read_text()) for p in (conda_prefix / "conda-meta").glob("*.json")]
    doc = _condalock.read(out / "conda-lock.yml")
    assert doc.metadata.platforms == ["linux-64"]
    got = {p.name: (p.version, p.build, p.hash.md5, p.hash.sha256) for p in doc.package}
    assert got == {r["name"]: (r["version"], r["build"], r["md5"], r.get("sha256"))
                   for r in records}
    text = (out / "conda-lock.yml").read_text()
    assert "xy-1234567890-abcdef" not in text  # the private channel's token
    mylab = next(p for p in doc.package if p.name == "mylab-tools")
    assert mylab.url == ("https://conda.anaconda.org/t/${CONDA_TOKEN}/private-chan/noarch/"
                         "mylab-tools-0.3.1-py_0.conda")
    # pylock.toml: only what pip installed (C11: twine 4.0.2 over conda's 1.10.0).
    data = tomllib.loads((out / "pylock.toml").read_text())
    assert [(p["name"], p["version"]) for p in data["packages"]] == [("twine", "4.0.2")]
    not_locked = {t["name"]: t for t in data["tool"]["envlock"]["not-locked"]}
    assert {n for n, t in not_locked.items() if t["kind"] == "conda"} == {
        "numpy", "requests", "mylab-tools"}
    assert not_locked["oddpkg"]["kind"] == "not-reproducible"  # C12 URL no conda package owns
    assert "conda-bld" not in json.dumps(data["packages"])
    assert "feedstock_root" not in json.dumps(data["packages"])
    assert ("note: conda package twine 1.10.0 was overwritten by pip (4.0.2); conda-lock.yml "
            "installs 1.10.0, then pylock.toml installs 4.0.2 over it") in result.output
    assert "set CONDA_TOKEN to it before installing conda-lock.yml" in result.output


def test_expand_url(monkeypatch):
    url = "https://conda.anaconda.org/t/${CONDA_TOKEN}/private-chan/noarch/x-1-0.conda"
    monkeypatch.delenv("CONDA_TOKEN", raising=False)
    with pytest.raises(LockError, match="needs the environment variable CONDA_TOKEN"):
        _condalock.expand_url(url)
    monkeypatch.setenv("CONDA_TOKEN", "tk-1")
    assert _condalock.expand_url(url) == (
        "https://conda.anaconda.org/t/tk-1/private-chan/noarch/x-1-0.conda")


def test_restore_run_never_overwrites_an_environment(tmp_path):
    (tmp_path / "pylock.toml").write_text(PYLOCK)
    existing = tmp_path / "env"
    existing.mkdir()
    (existing / "pyvenv.cfg").write_text("home = /usr/bin\n")
    result = CliRunner().invoke(cli, ["restore", str(tmp_path / "pylock.toml"), "--prefix",
                                      str(existing), "--run"])
    assert result.exit_code == 2
    assert result.output == (f"Error: {existing} exists and is not empty; "
                             "restore into a new --prefix\n")
    assert [p.name for p in existing.iterdir()] == ["pyvenv.cfg"]


def test_restore_a_manifest_without_lockfiles_plans_from_the_manifest(tmp_path):
    mpath = tmp_path / "manifest.toml"
    manifest(tmp_path, []).write(mpath)
    result = CliRunner().invoke(cli, ["restore", str(mpath)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# Recreate the environment from the manifest alone (dry run")
    # the only pip package is an editable install outside git: nothing pip can install, and
    # no interpreter of the recorded 3.11.7 under /opt/python exists: said, not replaced
    assert lines[2].startswith(f"uv venv --quiet {tmp_path / 'manifest-restored'} --python ")
    assert any("mylib 0.1: editable install of /src/mylib" in ln for ln in lines)
    assert any("glibc 2.36" in ln for ln in lines)
    assert not (tmp_path / "manifest-restored").exists()  # a dry run creates nothing


def test_a_lockfile_venv_uses_envlocks_own_python_where_uv_finds_none(tmp_path, monkeypatch):
    """Restoring a pylock.toml for this Python's version where neither PATH nor uv's own installs
    offer that version (a pyenv version that is not the global one): the venv is made with
    envlock's own interpreter, named in the plan, not handed to uv as a bare version (which uv
    would try to download)."""
    import os

    here = ".".join(map(str, sys.version_info[:3]))
    own = f"{sys.base_prefix}/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    pylock = tmp_path / "pylock.toml"
    pylock.write_text(PYLOCK)
    new = tmp_path / "new"
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-managed-pythons"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    venv = plan_restore([pylock], new, python_version=here).steps[0]
    assert venv.argv == ("uv", "venv", str(new), "--python", own)
    assert venv.title == (f"create a virtual environment with Python {here} at {own} "
                          "(envlock's own; the recorded version)")
    # with this interpreter on PATH, uv finds it again at --run: the version is passed as before
    monkeypatch.setenv("PATH", f"{sys.base_prefix}/bin{os.pathsep}{tmp_path / 'empty-bin'}")
    assert plan_restore([pylock], new, python_version=here).steps[0].argv == (
        "uv", "venv", str(new), "--python", here)
