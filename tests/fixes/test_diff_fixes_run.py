"""Every generated ``do:`` of ``envlock diff`` runs as printed and removes its difference
(issue 25): the fix is run in bash in the world it was printed for, the side is snapshotted
again, and the diff no longer has that difference or any explanation it did not have before."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import World, ids, keys, pair, side_fix

#: (kind, variable, value, the package that makes the variable matter)
ENV_KINDS = [
    ("threads", "OMP_NUM_THREADS", "1", None),
    ("mkl-env", "MKL_CBWR", "COMPATIBLE", "mkl==2024.0.0"),
    ("numpy-env", "NPY_DISABLE_CPU_FEATURES", "AVX512_SKX", "numpy==2.0.0"),
    ("openblas-env", "OPENBLAS_CORETYPE", "Haswell", "numpy==2.0.0"),
    ("tensorflow-env", "TF_DETERMINISTIC_OPS", "1", "tensorflow==2.16.1"),
    ("xla-env", "XLA_FLAGS", "--xla_cpu_enable_fast_math=false", "jax==0.4.30"),
    ("determinism-env", "PYTHONHASHSEED", "0", None),
    ("other-env", "NUMBA_OPT", "0", None),
]


@pytest.mark.parametrize(("kind", "var", "value", "package"), ENV_KINDS,
                         ids=[k[0] for k in ENV_KINDS])
def test_env_fix_runs(world: World, kind: str, var: str, value: str, package: str | None) -> None:
    if package:
        world.wheel(*package.split("=="))
    venv = world.venv("env", [package] if package else [])
    a = world.snapshot(venv, world.root / "a.toml", {var: value})
    b = world.snapshot(venv, world.root / "b.toml")
    before = pair(a, b)
    ex = next(e for e in before.explanations if ("env", var) in {(c.area, c.key) for c in e.changes})
    assert ex.id.split(":", 1)[0] == kind
    # a choice: both sides' values are named, each a bash line
    to_a, to_b = side_fix(ex.do, "a.toml"), side_fix(ex.do, "b.toml")
    assert to_a == f"export {var}={value}" and to_b == f"unset {var}"
    # b's job, with the line run before the snapshot: the difference is gone, nothing new
    b2 = world.snapshot(venv, world.root / "b2.toml", fix=to_a)
    after = pair(a, b2)
    assert ("env", var) not in keys(after) and not after.changes, after.changes
    # and the other way: a's job unsets it (the `export` of a's shell is undone by the fix)
    a2 = world.snapshot(venv, world.root / "a2.toml", {var: value}, fix=to_b)
    assert not pair(b, a2).changes


#: (kind, package, version of a, version of b)
PACKAGE_KINDS = [
    ("numpy", "numpy", "1.26.4", "2.0.1"),
    ("scipy", "scipy", "1.11.4", "1.13.0"),
    ("torch", "torch", "2.1.2", "2.3.1"),
    ("frameworks", "jax", "0.4.23", "0.4.30"),
    ("domain", "pandas", "2.1.4", "2.2.1"),
    ("other", "mylab-tools", "0.1", "0.2"),
]


@pytest.mark.parametrize(("kind", "name", "va", "vb"), PACKAGE_KINDS,
                         ids=[k[0] for k in PACKAGE_KINDS])
def test_package_fix_runs(world: World, kind: str, name: str, va: str, vb: str) -> None:
    for v in (va, vb):
        world.wheel(name, v)
    venv_a = world.venv("a", [f"{name}=={va}"])
    venv_b = world.venv("b", [f"{name}=={vb}"])
    a = world.snapshot(venv_a, world.root / "a.toml")
    b = world.snapshot(venv_b, world.root / "b.toml")
    before = pair(a, b)
    ex = next(e for e in before.explanations if any(c.key == name for c in e.changes))
    assert ex.id.split(":", 1)[0] == kind
    to_a, to_b = side_fix(ex.do, "a.toml"), side_fix(ex.do, "b.toml")
    assert to_a == f"pip install {name}=={va}" and to_b == f"pip install {name}=={vb}"
    b2 = world.snapshot(venv_b, world.root / "b2.toml", fix=to_a)
    after = pair(a, b2)
    assert ("package", name) not in keys(after)
    assert ids(after) <= ids(before) - {ex.id}, (ids(before), ids(after))


def test_a_package_on_one_side_fix_runs(world: World) -> None:
    world.wheel("mpmath", "1.3.0")
    venv_a = world.venv("a")
    venv_b = world.venv("b", ["mpmath==1.3.0"])
    a = world.snapshot(venv_a, world.root / "a.toml")
    b = world.snapshot(venv_b, world.root / "b.toml")
    before = pair(a, b)
    ex = next(e for e in before.explanations if any(c.key == "mpmath" for c in e.changes))
    cmd = "pip install 'mpmath==1.3.0'"
    assert f"install it in a.toml too (`{cmd}`)" in ex.do
    a2 = world.snapshot(venv_a, world.root / "a2.toml", fix=cmd)
    after = pair(a2, b)
    assert ("package", "mpmath") not in keys(after)
    assert ids(after) <= ids(before) - {ex.id}


def _git(world: World, venv: Path, repo: Path, line: str) -> str:
    return world.sh(line, venv, cwd=repo).stdout.strip()


def test_code_fix_runs_in_a_real_checkout(world: World) -> None:
    venv = world.venv("env")
    repo = world.root / "proj"
    repo.mkdir()
    (repo / "train.py").write_text("print(1)\n")
    _git(world, venv, repo, "git init -q -b main && git add train.py && git commit -q -m one")
    first = _git(world, venv, repo, "git rev-parse HEAD")
    a = world.snapshot(venv, world.root / "a.toml", repo=repo)
    (repo / "train.py").write_text("print(2)\n")
    _git(world, venv, repo, "git commit -q -am two")
    b = world.snapshot(venv, world.root / "b.toml", repo=repo)
    before = pair(a, b)
    ex = next(e for e in before.explanations if e.id == "code")
    to_a = side_fix(ex.do, "a.toml")
    assert to_a == f"git checkout {first}"
    b2 = world.snapshot(venv, world.root / "b2.toml", repo=repo, fix=to_a)
    after = pair(a, b2)
    assert not [c for c in after.changes if c.area == "code" and not c.key.endswith(".branch")]
    assert "code" not in ids(after)
    # uncommitted changes on one side, the same commit: `git stash` runs the clean side's code
    _git(world, venv, repo, "git checkout -q main")
    clean = world.snapshot(venv, world.root / "clean.toml", repo=repo)
    (repo / "train.py").write_text("print(3)\n")
    dirty = world.snapshot(venv, world.root / "dirty.toml", repo=repo)
    ex = next(e for e in pair(clean, dirty).explanations if e.id == "code")
    to_clean = side_fix(ex.do, "clean.toml")
    assert to_clean == "git stash"
    assert "dirty.toml's uncommitted changes" in ex.do  # a patch only --save-patch keeps
    fixed = world.snapshot(venv, world.root / "fixed.toml", repo=repo, fix=to_clean)
    assert "code" not in ids(pair(clean, fixed))
