"""The World every probe observes: frozen, built once per snapshot."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import envlock
from envlock.probes import assemble as snapshot_mod
from envlock.probes import stack as stack_mod
from envlock.probes.condameta import probe_conda, read_conda_prefix
from envlock.probes.pip import probe_pip, scan_distributions
from envlock.probes.target import resolve_target
from envlock.probes.world import World, activated_path


def test_world_is_frozen_and_its_environment_read_only() -> None:
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "4"}
    w = World(environ=env, prefix="/envs/a", site_dirs=[Path("/envs/a/lib/site")], timeout=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.timeout = 9.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.prefix = "/elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        w.environ["OMP_NUM_THREADS"] = "1"  # type: ignore[index]
    with pytest.raises((AttributeError, TypeError)):
        w.color = "blue"  # type: ignore[attr-defined]  # slots: no new attributes either
    env["OMP_NUM_THREADS"] = "1"  # the caller's dict changing later does not reach the world
    assert w.environ["OMP_NUM_THREADS"] == "4"
    assert (w.root, w.site_dirs, w.timeout) == (Path("/"), ("/envs/a/lib/site",), 2.0)
    assert "OMP_NUM_THREADS" not in repr(w)  # values may be secrets: not in a repr


def test_path_dirs_are_the_activated_path_unless_given() -> None:
    env = {"PATH": "/usr/bin::/envs/a/bin:/bin"}
    assert World(environ=env, prefix="/envs/a").path_dirs == ("/envs/a/bin", "/usr/bin", "/bin")
    assert World(environ=env).path_dirs == ("/usr/bin", "/envs/a/bin", "/bin")
    assert World(environ=env, prefix="/envs/a", path_dirs=[]).path_dirs == ()
    assert activated_path("/envs/a", env) == World(environ=env, prefix="/envs/a").path_dirs


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout must be > 0"):
        World(timeout=0)


def test_world_of_a_resolved_target(conda_prefix: Path, tmp_path: Path) -> None:
    target = resolve_target(prefix=str(conda_prefix), environ={"PATH": "/usr/bin"})
    site = next(conda_prefix.glob("lib/python3*/site-packages"))
    w = World.of(target, environ={"PATH": "/usr/bin"}, sys_path=[str(tmp_path / "missing.zip"), str(site)])
    assert (w.prefix, w.python) == (target.prefix, target.python)
    assert w.site_dirs == (str(site),)  # only the directories of sys.path, in order
    assert w.path_dirs == (os.path.join(target.prefix, "bin"), "/usr/bin")
    assert probe_pip(w) == scan_distributions([str(site)])
    assert probe_conda(w) == read_conda_prefix(conda_prefix) and probe_conda(w) is not None
    assert probe_conda(World(prefix=None)) is None


def test_a_snapshot_builds_one_world_and_every_probe_sees_it(
    conda_prefix: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[World] = []
    real_init = World.__init__

    def counting_init(self: World, **kw: object) -> None:
        real_init(self, **kw)  # type: ignore[arg-type]
        built.append(self)

    monkeypatch.setattr(World, "__init__", counting_init)
    seen: dict[str, World] = {}

    def spy(module: object, name: str) -> None:
        real = getattr(module, name)

        def wrapped(world: World, **kw: object) -> object:
            seen[name] = world
            return real(world, **kw)

        monkeypatch.setattr(module, name, wrapped)

    for name in ("probe_platform", "probe_cpu", "probe_env", "probe_git", "probe_pip", "probe_conda"):
        spy(snapshot_mod, name)
    stack_probes = ("probe_gpu", "probe_cuda", "probe_frameworks", "probe_blas", "probe_toolchain", "probe_slurm",
                    "probe_build")
    for name in stack_probes:
        spy(stack_mod, name)
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4242", "OMP_NUM_THREADS": "3"}
    m = envlock.snapshot(prefix=str(conda_prefix), environ=env, repo=str(conda_prefix), libraries=False)

    assert len(built) == 1, built
    (world,) = built
    assert set(seen) == {"probe_platform", "probe_cpu", "probe_env", "probe_git", "probe_pip", "probe_conda",
                         *stack_probes}
    assert all(w is world for w in seen.values())
    # the one world is the target the manifest records, with the job's environment
    assert (world.prefix, world.python) == (m.target.prefix, m.target.python)
    assert dict(world.environ) == env
    assert world.site_dirs == tuple(d for d in m.python.path if os.path.isdir(d))
    assert world.path_dirs[0] == os.path.join(m.target.prefix, "bin")
    # and what the probes saw in it is what the manifest says
    assert m.slurm.job_id == "4242" and m.env.vars["OMP_NUM_THREADS"] == "3"
    assert m.conda is not None and m.conda.packages


def test_every_probe_is_a_function_of_a_world() -> None:
    """Each public ``probe_*`` of ``envlock/probes`` takes the World first and none of the
    world's inputs again as its own parameters (read from the source, nothing imported)."""
    import ast

    world_inputs = {"root", "env", "environ", "prefix", "site_dirs", "path_dirs", "runner", "timeout",
                    "python", "python_exe"}
    probes_dir = Path(envlock.__file__).parent / "probes"
    found = {}
    for path in sorted(probes_dir.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("probe_"):
                args = node.args
                first = args.posonlyargs + args.args
                own = {a.arg for a in first[1:] + args.kwonlyargs}
                found[node.name] = (
                    [a.arg for a in first[:1]], ast.unparse(first[0].annotation) if first and first[0].annotation else None,
                    sorted(own & world_inputs),
                )
    assert len(found) >= 15, sorted(found)
    bad = {name: got for name, got in found.items() if got != (["world"], "World", [])}
    assert not bad, bad
