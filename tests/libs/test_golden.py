"""``envlock libs`` output held byte for byte: gcc-built fixture libraries and the real torch
venvs, text, ``--format json``, ``--why`` and ``--no-symbols`` (issue 27: the split of
``envlock/libs/`` into glibc's own rooms must change no output).

The golden files under ``tests/libs/golden/`` were written by the code before the split with
pyenv's python3 (``name.json``); those of Debian's python3 (``name.<digest>.json``) after it, when
the first Debian run showed that the interpreter's own DT_NEEDED are in every answer
(``ENVLOCK_WRITE_GOLDEN=1 pytest tests/libs/test_golden.py [--realenv]`` writes them again).
Paths that differ from run to run are normalized to placeholders: the fixture directory
``<TMP>``, a venv ``<VENV>``, the interpreter running the tests ``<PYTHON>``.  Each golden
holds the machine facts it was taken on (glibc, default directories, hwcaps subdirectories, the
base interpreter and its DT_NEEDED): a run compares with the golden taken on a machine like its
own, and is skipped, with the reason, where none was (the output depends on them by design).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

from .conftest import Builder

GOLDEN = Path(__file__).with_name("golden")
WRITE = os.environ.get("ENVLOCK_WRITE_GOLDEN") == "1"


def _machine() -> dict[str, object]:
    """What the loader model reads from this machine besides the files under test."""
    from envlock.libs.config import detect_config

    from envlock.libs.elfread import read_elf

    cfg = detect_config(root="/", env={}, cwd="/")
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    # the interpreter's own DT_NEEDED are in every answer ("interpreter start-up: ..."): pyenv's
    # python3 needs libpython3.11.so.1.0, Debian's is linked statically against it
    return {"glibc": list(cfg.glibc), "system_dirs": list(cfg.system_dirs),
            "subdirs": list(cfg.subdirs), "base": base, "base_needed": list(read_elf(base).needed)}


def _run(args: Sequence[str], cache: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    base: dict[str, str | None] = {"XDG_CACHE_HOME": str(cache), "LD_PRELOAD": None,
                                   "LD_LIBRARY_PATH": None, "GLIBC_TUNABLES": None, "LD_HWCAP_MASK": None}
    base.update(env or {})
    result = CliRunner().invoke(cli, ["libs", *args, "--no-cache"], env=base)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def _normalize(text: str, places: dict[str, str]) -> str:
    for path, name in sorted(places.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    return text


def _check(name: str, runs: dict[str, tuple[int, str]], places: dict[str, str]) -> None:
    """Compare with the golden of ``name`` taken on a machine like this one (``name.json`` or
    ``name.<digest>.json``: one per set of machine facts); skip where none was taken."""
    got = {"machine": _machine(),
           "runs": {k: {"status": code, "output": _normalize(out, places)} for k, (code, out) in runs.items()}}
    got["machine"] = json.loads(_normalize(json.dumps(got["machine"]), places))
    goldens = {p: json.loads(p.read_text()) for p in sorted(GOLDEN.glob(f"{name}*.json"))}
    path = next((p for p, g in goldens.items() if g["machine"] == got["machine"]), None)
    if WRITE:
        digest = hashlib.sha256(json.dumps(got["machine"], sort_keys=True).encode()).hexdigest()[:8]
        path = path or GOLDEN / f"{name}.{digest}.json"
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    if path is None:
        pytest.skip(f"no golden {name} was taken on a machine like this one: {got['machine']}")
    want = json.loads(path.read_text())
    for key, run in want["runs"].items():
        assert got["runs"][key] == run, key
    assert set(got["runs"]) == set(want["runs"])


# -- gcc-built fixtures ---------------------------------------------------------------------


def _fixtures(build: Builder) -> dict[str, Path]:
    """A small world of every kind of answer: a RPATH/RUNPATH chain, a library not found, a
    version not defined, a symbol no object defines, a filter."""
    build.lib("deep/libleaf.so.1", "int leaf(void) { return 1; }", soname="libleaf.so.1")
    build.lib("mid/libmid.so", "int leaf(void); int mid(void) { return leaf(); }", soname="libmid.so",
              needed=["deep/libleaf.so.1"], runpath="$ORIGIN/../deep")
    prog = build.exe("bin/prog", "int mid(void); int main(void) { return mid(); }",
                     needed=["mid/libmid.so"], rpath="$ORIGIN/../mid")
    build.lib("gone/libnothere.so.7", "int nothere(void) { return 7; }", soname="libnothere.so.7")
    top = build.lib("top/libtop.so", "int mid(void); int t(void) { return mid(); }", soname="libtop.so",
                    needed=["mid/libmid.so"], rpath="$ORIGIN/../mid")
    gone = build.lib("gone/libgone.so", "int nothere(void); int g(void) { return nothere(); }",
                     soname="libgone.so", needed=["gone/libnothere.so.7"])
    (build.root / "gone/libnothere.so.7").unlink()
    build.lib("v2/libprov.so.1", "int p(void) { return 2; } int q(void) { return 3; }", soname="libprov.so.1",
              version_script="PROV_1 { global: p; local: *; }; PROV_2 { global: q; } PROV_1;")
    build.lib("v1/libprov.so.1", "int p(void) { return 1; }", soname="libprov.so.1",
              version_script="PROV_1 { global: p; local: *; };")
    build.lib("v1/libuser.so", "int p(void); int q(void); int u(void) { return p() + q(); }", soname="libuser.so",
              needed=["v2/libprov.so.1"], runpath="$ORIGIN")
    build.lib("sym/libdef.so", "int other(void) { return 1; }", soname="libdef.so")
    build.lib("sym/libsym.so", "int missing_fn(void); int s(void) { return missing_fn(); }",
              soname="libsym.so", needed=["sym/libdef.so"], runpath="$ORIGIN")
    return {"prog": prog, "top": top, "gone": gone, "user": build.root / "v1/libuser.so",
            "sym": build.root / "sym/libsym.so"}


def test_fixture_outputs_are_the_golden_ones(build: Builder, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    files = _fixtures(build)
    cache = tmp_path / "cache"
    py = ["--python", sys.executable]
    runs: dict[str, tuple[int, str]] = {}
    for name, path in files.items():
        runs[f"{name} text"] = _run([str(path), *py], cache)
        runs[f"{name} json"] = _run([str(path), *py, "--format", "json"], cache)
        runs[f"{name} no-symbols"] = _run([str(path), *py, "--no-symbols"], cache)
    runs["top why"] = _run([str(files["top"]), *py, "--why", "libleaf.so.1"], cache)
    runs["gone why"] = _run([str(files["gone"]), *py, "--why", "libnothere.so.7"], cache)
    runs["all text"] = _run([*map(str, files.values()), *py], cache)
    runs["top ld_library_path"] = _run([str(files["top"]), *py],
                                        cache, {"LD_LIBRARY_PATH": str(build.root / "gone")})
    runs["top preload"] = _run([str(files["top"]), *py], cache,
                               {"LD_PRELOAD": f"{build.root}/deep/libleaf.so.1 {build.root}/nowhere.so"})
    runs["interpreter"] = _run(py, cache)
    places = {str(build.root): "<TMP>", sys.executable: "<PYTHON>",
              os.path.realpath(sys.executable): "<PYTHON-REAL>", sys.prefix: "<PREFIX>"}
    _check("fixtures", runs, places)


# -- the real torch venvs -------------------------------------------------------------------


@pytest.mark.realenv
@pytest.mark.parametrize("which", ["cpu", "cuda"])
def test_real_venv_outputs_are_the_golden_ones(which: str, request: pytest.FixtureRequest, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    venv: Path = request.getfixturevalue(f"{which}_venv")
    cache = tmp_path / "cache"
    py = ["--python", str(venv / "bin/python")]
    why = {"cpu": ["libgomp.so.1", "libstdc++.so.6"],
           "cuda": ["libcudart.so.13", "libnccl.so.2", "libgomp.so.1"]}[which]
    runs: dict[str, tuple[int, str]] = {}
    for module in ("torch", "numpy"):
        runs[f"{module} text"] = _run([module, *py], cache)
        runs[f"{module} json"] = _run([module, *py, "--format", "json"], cache)
        runs[f"{module} no-symbols"] = _run([module, *py, "--no-symbols"], cache)
    for soname in why:
        runs[f"torch why {soname}"] = _run(["torch", *py, "--why", soname], cache)
    runs["torch numpy text"] = _run(["torch", "numpy", *py], cache)
    places = {str(venv): "<VENV>", str(venv.resolve()): "<VENV>"}
    _check(f"venv-{which}", runs, places)
