"""uv's conflicting extras (its PyTorch ``cpu``/``cu124`` recipe) and markers compared as
markers, with the real ``uv`` as the oracle: the lock is ``uv lock``'s own, from local wheels,
the venvs are ``uv sync --extra X``'s, the pylock files ``uv export``'s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envlock.formats.markereq import markers_equivalent
from envlock.formats.markers import (Selection, conflict_item, marker_holds, target_marker_env,
                                     with_selection)
from envlock.lock._tools import uv_bin

from _wheels import make_wheel

FOREIGN = Path(__file__).resolve().parent / "foreign"
PEERS = Path("/work/shared/cases/peers/uvlock")
X86 = "py3-none-manylinux_2_17_x86_64"
MAC = "py3-none-macosx_11_0_arm64"


def _uv(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1"}
    r = subprocess.run([uv_bin(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's PyTorch recipe offline: extras cpu and cu124 declared conflicting, each taking
    torch/torchvision from its own (flat, local) index: +cpu / +cu124 builds for Linux x86-64,
    plain ones for macOS arm64 (so uv forks and writes conflict markers), nvidia-cublas-cu12
    and triton only for the CUDA build."""
    root = tmp_path_factory.mktemp("recipe")
    cu = "platform_machine == 'x86_64' and sys_platform == 'linux'"
    for v in ("cpu", "cu124"):
        reqs = ["filelock"] + ([f"nvidia-cublas-cu12==12.4.5.8; {cu}", f"triton==3.1.0; {cu}"]
                               if v == "cu124" else [])
        make_wheel(root / v, "torch", f"2.5.1+{v}", reqs, tag=X86)
        make_wheel(root / v, "torch", "2.5.1", ["filelock"], tag=MAC)
        make_wheel(root / v, "torchvision", f"0.20.1+{v}", ["torch==2.5.1", "numpy"], tag=X86)
        make_wheel(root / v, "torchvision", "0.20.1", ["torch==2.5.1", "numpy"], tag=MAC)
    for n, ver in (("filelock", "3.16.1"), ("nvidia-cublas-cu12", "12.4.5.8"),
                   ("triton", "3.1.0"), ("numpy", "2.0.2")):
        make_wheel(root / "common", n, ver)
    make_wheel(root / "wrong", "torch", "2.3.0+cu121", ["filelock"], tag=X86)
    proj = root / "project"
    proj.mkdir()
    envs = ('["sys_platform == \'linux\' and platform_machine == \'x86_64\'", '
            '"sys_platform == \'darwin\' and platform_machine == \'arm64\'"]')
    index = "".join(f'\n[[tool.uv.index]]\nname = "{n}"\nurl = "{root / d}"\nformat = "flat"\n{extra}\n'
                    for n, d, extra in (("pytorch-cpu", "cpu", "explicit = true"),
                                        ("pytorch-cu124", "cu124", "explicit = true"),
                                        ("common", "common", "default = true")))
    src = '[{ index = "pytorch-cpu", extra = "cpu" }, { index = "pytorch-cu124", extra = "cu124" }]'
    (proj / "pyproject.toml").write_text(f"""\
[project]
name = "project"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = []

[project.optional-dependencies]
cpu = ["torch>=2.5.1", "torchvision>=0.20.1"]
cu124 = ["torch>=2.5.1", "torchvision>=0.20.1"]

[tool.uv]
conflicts = [[{{ extra = "cpu" }}, {{ extra = "cu124" }}]]
environments = {envs}
required-environments = {envs}

[tool.uv.sources]
torch = {src}
torchvision = {src}
{index}""")
    _uv(["lock", "-q"], proj)
    assert "extra == 'extra-7-project-cu124'" in (proj / "uv.lock").read_text()  # uv's own markers
    return proj


def _sync(proj: Path, extra: str, venv: Path) -> Path:
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_NO_CACHE": "1"}
    r = subprocess.run([uv_bin(), "sync", "--frozen", "--extra", extra, "-q", "--python",
                        sys.executable], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return venv / "bin" / "python"


def _verify(py: Path, lock: Path, *args: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "envlock", "verify", "--python", str(py), "--lock",
                        str(lock), "--format", "json", *args],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def _pkg_findings(doc: dict) -> list[tuple[str, str]]:
    return [(f["id"], f["title"]) for f in doc["findings"] if f["id"].startswith("packages.")]


@pytest.mark.parametrize("extra", ["cpu", "cu124"])
def test_a_venv_synced_with_each_extra_verifies(recipe: Path, tmp_path: Path, extra: str) -> None:
    py = _sync(recipe, extra, tmp_path / "venv")
    lock = recipe / "uv.lock"
    installed = _uv(["pip", "list", "--python", str(py), "--format", "json"], recipe)
    torch = next(p["version"] for p in json.loads(installed) if p["name"] == "torch")
    assert torch == f"2.5.1+{extra}"  # uv's own choice for this machine
    code, doc = _verify(py, lock)
    assert code == 0, doc["findings"]
    assert _pkg_findings(doc) == [("packages.lock-selection", f"lockfile uv.lock read for --extra "
                                   f"{extra} (inferred from what is installed)")]
    code, doc = _verify(py, lock, "--extra", extra)
    assert code == 0 and _pkg_findings(doc) == [
        ("packages.lock-selection", f"lockfile uv.lock read for --extra {extra} (as given)")]
    # the other extra named: the build is wrong, and said so
    other = "cu124" if extra == "cpu" else "cpu"
    code, doc = _verify(py, lock, "--extra", other)
    assert code == 1
    assert any(i == "packages.build-mismatch" and t.startswith(f"torch 2.5.1+{extra} ")
               and f"has 2.5.1+{other}" in t for i, t in _pkg_findings(doc))


def test_the_wrong_torch_build_fails_and_is_named(recipe: Path, tmp_path: Path) -> None:
    py = _sync(recipe, "cu124", tmp_path / "venv")
    _uv(["pip", "install", "-q", "--python", str(py), "--no-deps",
         str(next((recipe.parent / "wrong").glob("torch-*.whl")))], recipe)
    code, doc = _verify(py, recipe / "uv.lock")
    assert code == 1
    assert ("packages.version-mismatch", "torch 2.3.0+cu121 is installed; lockfile uv.lock has "
            "2.5.1+cu124 (installed is a CUDA 12.1 build; lockfile uv.lock has a CUDA 12.4 build)"
            ) in _pkg_findings(doc)
    # still read for cu124: triton and nvidia-cublas-cu12 are not "extra" packages
    assert not any(i in ("packages.extra", "packages.missing") for i, _t in _pkg_findings(doc))


def test_uv_conflict_encoding_and_marker_reading() -> None:
    # uv-resolver universal_marker.rs: extra-{len(package)}-{package}-{extra}
    assert conflict_item("extra-7-project-cu124") == ("extra", "project", "cu124")
    assert conflict_item("group-5-my-pk-dev-x") == ("group", "my-pk", "dev-x")
    assert conflict_item("extra-9-project-cpu") is None and conflict_item("docs") is None
    env = target_marker_env("3.11.7", "cpython")
    m = "(sys_platform == 'linux' or extra == 'extra-7-project-cpu') and extra == 'extra-7-project-cu124'"
    linux = env["sys_platform"] == "linux"
    assert marker_holds(m, env, selection=Selection(frozenset({"extra:cu124"}))) == linux
    assert not marker_holds(m, env, selection=Selection(frozenset({"extra:cpu"})))
    assert not marker_holds(m, env)
    assert marker_holds("'cu124' in extras", env, selection=Selection(frozenset({"extra:cu124"})))


def test_a_marker_with_the_selection_decided() -> None:
    cpu, cu = Selection(frozenset({"extra:cpu"})), Selection(frozenset({"extra:cu124"}))
    m = ("(sys_platform == 'linux' and extra == 'extra-7-project-cpu' and "
         "extra != 'extra-7-project-cu124') or (sys_platform == 'darwin' and "
         "extra == 'extra-7-project-cpu')")
    assert with_selection(m, cpu) == 'sys_platform == "linux" or sys_platform == "darwin"'
    assert with_selection(m, cu) is False and with_selection(m, None) is False
    assert with_selection("extra == 'extra-7-project-cpu' or python_version < '3.13'", cpu) is True
    assert with_selection("'cpu' in extras and (os_name == 'nt' or os_name == 'nt')", cpu) \
        == 'os_name == "nt"'


def test_equivalent_markers_are_equal() -> None:
    assert markers_equivalent(
        "(python_full_version >= '3.15') or (python_full_version >= '3.12' and "
        "python_full_version < '3.15') or (python_full_version == '3.11.*')",
        'python_full_version >= "3.11"')
    assert markers_equivalent("python_version < '3.11'", 'python_full_version < "3.11"')
    assert not markers_equivalent("python_version < '3.11'", 'python_full_version < "3.11.2"')
    assert not markers_equivalent("sys_platform == 'linux'", "sys_platform != 'darwin'")
    assert markers_equivalent("sys_platform == 'linux' and extra == 'extra-7-project-cpu'",
                              '"cpu" in extras and sys_platform == "linux"')
    # only the Python versions the lock is for count
    assert not markers_equivalent("python_full_version >= '3.9'", "python_full_version >= '3.8'")
    assert markers_equivalent("python_full_version >= '3.9'", "python_full_version >= '3.8'",
                              requires_python=">=3.9")


def _uv_locks() -> list[Path]:
    return sorted([*PEERS.glob("*uv.lock"), *FOREIGN.glob("*uv.lock")])


@pytest.mark.parametrize("lock", _uv_locks(), ids=lambda p: p.name)
def test_diff_of_a_uv_lock_and_uvs_own_pylock_export_is_identical(lock: Path, tmp_path: Path) -> None:
    """Every uv.lock uv can export offline: ``uv export --format pylock.toml`` of every extra,
    group and member, diffed with the lock, 0 differences (markers written differently are
    the same markers).  The snapshots' redacted ``[X]`` digits are made ``0`` first."""
    text = re.sub(r"\.\[X\]", ".0", lock.read_text())
    data = tomllib.loads(text)
    if data.get("conflicts"):
        pytest.skip("conflicting extras: no one export holds them all "
                    "(test_diff_of_a_uv_lock_and_its_export_of_one_extra)")
    root = next((p for p in data.get("package", [])
                 if {"editable", "virtual"} & set(p.get("source", {}))
                 and "." in (p["source"].get("editable"), p["source"].get("virtual"))), None)
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "uv.lock").write_text(text)
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "{root["name"] if root else "x"}"\n'
        f'version = "{(root or {}).get("version", "0.1")}"\n'
        f'requires-python = "{data.get("requires-python", ">=3.8")}"\n')
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1", "UV_OFFLINE": "1"}
    r = subprocess.run([uv_bin(), "export", "--frozen", "--format", "pylock.toml", "--all-extras",
                        "--all-groups", "--all-packages", "-o", "pylock.toml", "-q"], cwd=proj,
                       env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"uv cannot export it offline: {r.stderr.strip().splitlines()[-1]}")
    d = subprocess.run([sys.executable, "-m", "envlock", "diff", str(proj / "uv.lock"),
                        str(proj / "pylock.toml"), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(d.stdout) if d.stdout.startswith("{") else {}
    if d.returncode == 2 and "nothing to compare" in d.stderr:
        pytest.skip("the lock has no package to compare")
    assert d.returncode == 0, doc.get("differences")
    assert doc["differences"] == []


def _conflicting_and_one_not() -> list[tuple[Path, str]]:
    """(lock, extra) for each extra of every stored uv.lock with conflicts, and of httpx's
    (five extras, none conflicting)."""
    out = []
    for lock in _uv_locks():
        data = tomllib.loads(re.sub(r"\.\[X\]", ".0", lock.read_text()))
        if data.get("conflicts") or lock.name.startswith("ecosystem__httpx"):
            root = _root(data)
            out += [(lock, x) for x in sorted((root or {}).get("optional-dependencies", {}))]
    return out


def _root(data: dict) -> dict | None:
    return next((p for p in data.get("package", [])
                 if {"editable", "virtual"} & set(p.get("source", {}))
                 and "." in (p["source"].get("editable"), p["source"].get("virtual"))), None)


def _export(lock: Path, extra: str, proj: Path, fmt: str = "pylock.toml",
            options: tuple[str, ...] = ()) -> Path:
    """``uv export --frozen --offline --extra EXTRA --format pylock.toml`` of ``lock`` in a
    project declaring its extras and conflicts (the snapshots' ``[X]`` digits made ``0``)."""
    text = re.sub(r"\.\[X\]", ".0", lock.read_text())
    data = tomllib.loads(text)
    root = _root(data) or {}
    proj.mkdir()
    (proj / "uv.lock").write_text(text)
    extras = "".join(f"{x} = []\n" for x in sorted(root.get("optional-dependencies", {})))
    groups = "".join(f"{g} = []\n" for g in sorted(root.get("dev-dependencies", {})))
    sets = ", ".join("[" + ", ".join(f'{{ extra = "{i["extra"]}" }}' for i in c if "extra" in i)
                     + "]" for c in data.get("conflicts", []))
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "{root.get("name", "x")}"\nversion = "{root.get("version", "0.1")}"\n'
        f'requires-python = "{data.get("requires-python", ">=3.8")}"\n'
        f"[project.optional-dependencies]\n{extras}[dependency-groups]\n{groups}"
        + (f"[tool.uv]\nconflicts = [{sets}]\n" if sets else ""))
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1", "UV_OFFLINE": "1"}
    out = f"pylock.{extra}.toml" if fmt == "pylock.toml" else f"requirements.{extra}.txt"
    r = subprocess.run([uv_bin(), "export", "--frozen", "--offline",
                        *(options or ("--extra", extra)), "--format", fmt, "-o", out, "-q"],
                       cwd=proj, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return proj / out


@pytest.mark.parametrize(("lock", "extra"), _conflicting_and_one_not(),
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_diff_of_a_uv_lock_and_its_export_of_one_extra(lock: Path, extra: str,
                                                        tmp_path: Path) -> None:
    """Issue 23: ``diff uv.lock pylock.X.toml --extra X`` reads the lock as ``uv export
    --extra X`` does (conflict markers decided, the other extra's packages out): identical;
    without ``--extra`` the selection is inferred from the export, and said."""
    pylock = _export(lock, extra, tmp_path / "p")
    uvlock = str(pylock.parent / "uv.lock")
    code, doc = _diff(uvlock, str(pylock), "--extra", extra)
    assert code == 0 and doc["differences"] == [], doc["differences"]
    assert f"uv.lock read for --extra {extra} (as given)" in doc["context"], doc["context"]
    code, doc = _diff(uvlock, str(pylock))
    assert code == 0 and doc["differences"] == [], doc["differences"]
    assert (f"uv.lock read for --extra {extra} (inferred from {pylock.name})"
            in doc["context"]), doc["context"]


@pytest.mark.parametrize("extra", ["cpu", "cu124"])
def test_diff_of_a_uv_lock_and_its_requirements_export(extra: str, tmp_path: Path) -> None:
    """The same for ``uv export --format requirements-txt``: no options, the one consistent
    selection inferred and said."""
    lock = PEERS / "inline__lock_pytorch_cpu__1__uv.lock"
    req = _export(lock, extra, tmp_path / "p", "requirements-txt")
    code, doc = _diff(str(req.parent / "uv.lock"), str(req))
    assert code == 0 and doc["differences"] == [], doc["differences"]
    assert f"uv.lock read for --extra {extra} (inferred from {req.name})" in doc["context"]


@pytest.mark.parametrize("options", [("--extra", "async"), ("--extra", "async", "--no-dev"),
                                     ("--group", "typing", "--no-dev"), ("--all-groups",)],
                         ids=" ".join)
def test_diff_of_a_uv_lock_and_its_export_of_some_groups(options: tuple[str, ...],
                                                         tmp_path: Path) -> None:
    """flask's uv.lock (2 extras, 7 groups; dev uv's default group): ``uv export`` with uv
    sync's options, diffed with them and without (inferred, and said), 0 differences."""
    pylock = _export(PEERS / "ecosystem__flask__uv.lock", "sel", tmp_path / "p",
                     options=options)
    uvlock = str(pylock.parent / "uv.lock")
    for args in (options, ()):
        code, doc = _diff(uvlock, str(pylock), *args)
        assert code == 0 and doc["differences"] == [], (args, doc["differences"])
        how = "as given" if args else f"inferred from {pylock.name}"
        assert any(c.startswith("uv.lock read for ") and c.endswith(f"({how})")
                   for c in doc["context"]), doc["context"]


def test_diff_of_the_wrong_extra_names_torchs_build(tmp_path: Path) -> None:
    lock = PEERS / "inline__lock_pytorch_cpu__1__uv.lock"
    pylock = _export(lock, "cpu", tmp_path / "p")
    code, doc = _diff(str(pylock.parent / "uv.lock"), str(pylock), "--extra", "cu124")
    assert code == 1
    assert "uv.lock read for --extra cu124 (as given)" in doc["context"]
    torch = {tuple(d["values"]) for d in doc["differences"] if d["key"].startswith("torch ;")}
    assert ("2.5.1+cu124", None) in torch and (None, "2.5.1+cpu") in torch, torch
    assert any(d["key"] == "nvidia-cublas-cu12" and d["change"] == "removed"
               for d in doc["differences"])
    # no conflict marker is left to key an entry by: the cu124 build's key is its marker in
    # uv's own export of --extra cu124
    assert not any("extra-7-project" in d["key"] for d in doc["differences"])
    cu = tomllib.loads(_export(lock, "cu124", tmp_path / "q").read_text())
    want = next(p["marker"] for p in cu["packages"] if p.get("version") == "2.5.1+cu124")
    key = next(d["key"] for d in doc["differences"] if d["values"] == ["2.5.1+cu124", None])
    assert markers_equivalent(key.split(" ; ", 1)[1], want, requires_python=">=3.12")


def _diff(*args: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "envlock", "diff", *args, "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


def test_diff_reads_the_lock_for_the_install_as_verify_does(recipe: Path, tmp_path: Path) -> None:
    """``diff uv.lock manifest`` takes uv sync's --extra/--group/--all-extras/--no-dev, and
    without them reads the install closest to the manifest (one rule with verify --lock)."""
    py = _sync(recipe, "cu124", tmp_path / "venv")
    manifest = tmp_path / "manifest.toml"
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python", str(py), "-o",
                    str(manifest)], check=True, capture_output=True, timeout=300)
    lock = str(recipe / "uv.lock")
    code, doc = _diff(lock, str(manifest))
    assert code == 0, doc["differences"]
    assert any("uv.lock read for --extra cu124 (inferred from what is installed)" in str(c)
               for c in doc["context"]), doc["context"]
    code, doc = _diff(lock, str(manifest), "--extra", "cu124")
    assert code == 0, doc["differences"]
    assert any("uv.lock read for --extra cu124 (as given)" in str(c) for c in doc["context"])
    code, doc = _diff(lock, str(manifest), "--extra", "cpu")
    assert code == 1
    torch = [d for d in doc["differences"] if d["area"] == "package" and d["key"] == "torch"]
    assert len(torch) == 1 and "2.5.1+cpu" in json.dumps(torch[0]) \
        and "2.5.1+cu124" in json.dumps(torch[0]), torch
