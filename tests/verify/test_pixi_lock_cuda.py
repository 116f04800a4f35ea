"""A v7 ``pixi.lock`` platform's ``virtual-packages`` (``__cuda=12``) is a requirement verify
compares with this node's driver, as a package's ``__cuda`` dependency is (NVIDIA's
driver → CUDA table, :mod:`envlock.nvidia`); py-rattler is the oracle for the platform."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from envlock._names import canonicalize

rattler = pytest.importorskip("rattler")

MULTI = Path("/work/shared/cases/peers/pixilock/multi-machine__pixi.lock")


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_a_cuda_platform_is_checked_against_the_driver(tmp_path: Path, venv: Path,
                                                       job_env: dict[str, str]) -> None:
    """A v7 lock whose only linux-64 platform is ``p2`` (virtual package ``__cuda=12``): on a
    node whose driver supports CUDA 11.4, verify says the platform needs a newer driver."""
    from envlock.formats.conda import current_subdir
    from envlock.verify import verify
    from envlock.verify.checks import CHECKS
    from envlock.verify.expected import read_lock
    from tests.verify.conftest import fake_nvidia_smi, fake_root, gpu_line

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")

    def only_p2(d: dict[str, Any]) -> None:
        d["platforms"] = [p for p in d["platforms"] if p["name"] != "linux-64"]
        d["environments"]["default"]["packages"].pop("linux-64")

    data = yaml.safe_load(MULTI.read_text())
    only_p2(data)
    path = tmp_path / "pixi.lock"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    p2 = next(p for p in rattler.LockFile.from_path(path).platforms() if p.name == "p2")
    assert str(p2.subdir) == "linux-64" and "__cuda=12" in p2.virtual_packages
    lock = read_lock(path)
    assert (lock.lock_platform, lock.cuda, lock.platforms) == ("p2", "12", (
        "win-64", "linux-64", "osx-arm64"))
    assert len(lock.packages) == 133
    root = fake_root(tmp_path / "n", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  "
                                     "Tue Oct 26 2021\n")
    fake_nvidia_smi(tmp_path / "bin", [gpu_line(0, "Tesla V100-SXM2-32GB", "GPU-aa", 32510, "7.0",
                                                "470.82.01")])
    r = verify(python=str(venv / "bin/python"), locks=[str(path)], environ=job_env, root=str(root),
               checks=[c for c in CHECKS if c[0] == "driver"])
    (f,) = [f for f in r.findings if f.id == "gpu.driver-too-old"]
    assert "platform p2 of" in f.title and "driver 470.82.01 supports up to CUDA 11.4" in f.title


def _rattler_platforms(path: Path, env: str = "default") -> dict[str, tuple[str, tuple[str, ...], set[tuple[str, str]]]]:
    """``{platform name: (subdir, virtual packages, {(name, version)})}`` as py-rattler reads them."""
    lf = rattler.LockFile.from_path(path)
    vps = {p.name: (str(p.subdir), tuple(p.virtual_packages)) for p in lf.platforms()}
    out = {}
    for name, e in lf.environments():
        if name != env:
            continue
        for plat in e.platforms():
            pkgs = set()
            for q in e.packages(plat):
                rec = getattr(q, "package_record", None)
                if type(q).__name__ == "CondaLockedBinaryPackage":
                    pkgs.add((rec.name.normalized, str(rec.version)))
                elif type(q).__name__ == "PypiLockedPackage":
                    pkgs.add((canonicalize(q.name), str(q.version)))
            out[plat.name] = (*vps[plat.name], pkgs)
    return out


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_every_platform_of_the_real_multi_platform_lock_can_be_chosen() -> None:
    """The unmodified v7 lock (platforms linux-64, p1 = win-64 + __cuda=12, p2 = linux-64 +
    __cuda=12, p3 = osx-arm64, win-64): ``--platform NAME`` reads that entry's packages and
    ``__cuda`` as py-rattler reads them; by default this subdir's own-named entry, said."""
    from envlock.verify.expected import read_lock

    oracle = _rattler_platforms(MULTI)
    assert {"p1", "p2", "p3", "linux-64"} <= set(oracle)
    for name, (subdir, vps, pkgs) in oracle.items():
        lock = read_lock(MULTI, lock_platform=name)
        cuda = next((v.split("=")[1] for v in vps if v.startswith("__cuda=")), None)
        assert (lock.lock_platform, lock.platform, lock.cuda) == (name, subdir, cuda)
        assert {(x.name, x.version) for x in lock.packages} == pkgs
    default = read_lock(MULTI, platform="linux-64")
    assert (default.lock_platform, default.cuda) == ("linux-64", None)
    assert any(e.startswith("not read: platform p2 (linux-64; __cuda=12") for e in default.selection)
    chosen = read_lock(MULTI, platform="linux-64", lock_platform="p2")
    assert any(e.startswith("read: platform p2 (linux-64; __cuda=12") for e in chosen.selection)


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_p2_of_the_real_lock_is_checked_against_the_driver_when_chosen(
        tmp_path: Path, venv: Path, job_env: dict[str, str]) -> None:
    from envlock.formats.conda import current_subdir
    from envlock.verify import verify
    from envlock.verify.checks import CHECKS
    from tests.verify.conftest import fake_nvidia_smi, fake_root, gpu_line

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")
    root = fake_root(tmp_path / "n", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  "
                                     "Tue Oct 26 2021\n")
    fake_nvidia_smi(tmp_path / "bin", [gpu_line(0, "Tesla V100-SXM2-32GB", "GPU-aa", 32510, "7.0",
                                                "470.82.01")])
    checks = [c for c in CHECKS if c[0] in ("driver", "locks")]
    ids = {}
    for chosen in (None, "p2"):
        r = verify(python=str(venv / "bin/python"), locks=[str(MULTI)], environ=job_env,
                   root=str(root), checks=checks, lock_platform=chosen)
        ids[chosen] = {f.id: f for f in r.findings}
    assert "gpu.driver-too-old" not in ids[None]  # linux-64 has no __cuda: nothing to compare
    said = ids[None]["packages.lock-selection"]
    assert said.title.endswith("read for environment default, platform linux-64 (linux-64)")
    f = ids["p2"]["gpu.driver-too-old"]
    assert "platform p2 of" in f.title and "driver 470.82.01 supports up to CUDA 11.4" in f.title
    assert ids["p2"]["packages.lock-selection"].title.endswith("platform p2 (linux-64)")


SOLVE_GROUPS = Path("/work/shared/cases/peers/pixilock/solve-groups__pixi.lock")


@pytest.mark.skipif(not SOLVE_GROUPS.is_file(), reason="the peers cases are not here")
def test_an_environment_is_chosen_as_pixi_install_e_chooses_it() -> None:
    from envlock.formats.conda import current_subdir
    from envlock.verify.expected import read_lock

    envs = [n for n, _e in rattler.LockFile.from_path(SOLVE_GROUPS).environments()]
    assert len(envs) == 3
    for env in envs:
        oracle = _rattler_platforms(SOLVE_GROUPS, env)
        subdir = current_subdir() if current_subdir() in oracle else next(iter(oracle))
        lock = read_lock(SOLVE_GROUPS, platform=subdir, environment=env)
        assert lock.pixi_environment == env
        assert {(x.name, x.version) for x in lock.packages} == oracle[subdir][2]
        assert f"environment read: {env}" in lock.selection[0]


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
@pytest.mark.parametrize(("args", "names"), [
    (["--platform", "p9"], "(its platforms: linux-64, p1, p2, p3, win-64)"),
    (["--environment", "gpu"], "(its environments: default)"),
    (["-e", "gpu"], "(its environments: default)"),
])
def test_an_unknown_pixi_name_is_one_error_line_listing_the_locks(args: list[str], names: str) -> None:
    import subprocess
    import sys

    envlock = Path(sys.executable).with_name("envlock")
    r = subprocess.run([str(envlock), "verify", "--lock", str(MULTI), *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("Error: ") and line.endswith(names)


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_the_platform_read_is_said_in_the_one_line_verdict(tmp_path: Path) -> None:
    """An install of p2 verifies (a conda prefix holding exactly p2's conda packages, as
    py-rattler lists them) and the ok line says which environment and platform was read."""
    import json
    import subprocess
    import sys

    from envlock.formats.conda import current_subdir

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True,
                   timeout=300)
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta/history").write_text("")
    env = dict(rattler.LockFile.from_path(MULTI).environments())["default"]
    p2 = next(p for p in env.platforms() if p.name == "p2")
    for q in env.packages(p2):
        r = q.package_record
        rec = {"name": r.name.normalized, "version": str(r.version), "build": str(r.build),
               "build_number": r.build_number, "subdir": str(r.subdir), "md5": r.md5.hex()
               if r.md5 else None, "url": str(q.location), "depends": [], "files": []}
        (prefix / "conda-meta" / f"{rec['name']}-{rec['version']}-{rec['build']}.json").write_text(
            json.dumps(rec))
    envlock = Path(sys.executable).with_name("envlock")
    base = [str(envlock), "verify", "--prefix", str(prefix), "--lock", str(MULTI)]
    cfg = tmp_path / "envlock.toml"
    from envlock.verify.checks import CHECKS

    cfg.write_text("[verify]\nskip = [" + ", ".join(f'"{c[0]}"' for c in CHECKS if c[0] != "locks")
                   + "]\n")  # the packages of the lock only
    ok = subprocess.run([*base, "--platform", "p2"], capture_output=True, text=True, timeout=300,
                        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("envlock verify: ok") and len(ok.stdout.splitlines()) == 1, ok.stdout
    assert "lockfile multi-machine__pixi.lock read for environment default, platform p2 " \
           "(linux-64)" in ok.stdout


@pytest.mark.skipif(not MULTI.is_file(), reason="the peers cases are not here")
def test_a_platform_of_another_subdir_is_a_lock_target_error(venv: Path,
                                                             job_env: dict[str, str]) -> None:
    """``--platform p1`` of the real v7 lock, whose subdir py-rattler reads as win-64, on a
    linux-64 machine: the lock entry is for another platform than the target
    (``packages.lock-target``, as a conda-lock of other platforms is), not "no packages"; p2
    (linux-64 + __cuda=12) is this machine's subdir and no such error."""
    from envlock.formats.conda import current_subdir
    from envlock.verify import verify
    from envlock.verify.checks import CHECKS

    if current_subdir() != "linux-64":
        pytest.skip("the platform is linux-64")
    subdirs = {p.name: str(p.subdir) for p in rattler.LockFile.from_path(MULTI).platforms()}
    assert subdirs["p1"] == "win-64" and subdirs["p2"] == "linux-64"
    checks = [c for c in CHECKS if c[0] == "locks"]
    found = {}
    for chosen in ("p1", "p2"):
        r = verify(python=str(venv / "bin/python"), locks=[str(MULTI)], environ=job_env,
                   checks=checks, lock_platform=chosen)
        found[chosen] = [f for f in r.findings if f.id == "packages.lock-target"]
    (f,) = found["p1"]
    assert f.severity == "error"
    assert f.title.endswith("is not for this target: its platform p1 is win-64; this machine "
                            "is linux-64")
    assert f"{MULTI}: platform p1 (subdir win-64)" in f.evidence
    assert found["p2"] == []
