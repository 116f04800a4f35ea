"""One producer per fact: the NVIDIA tables are one object wherever they are used."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import envlock.nvidia as nvidia
from envlock.cli import cli
from envlock.probes import gpu

PKG = Path(__file__).resolve().parents[1] / "envlock"


def test_driver_answer_is_the_nvidia_table() -> None:
    for cuda, minimum in nvidia.TOOLKIT_DRIVERS:
        assert gpu.cuda_for_driver(minimum) == nvidia.max_cuda_for_driver(minimum) == cuda
    assert gpu.cuda_for_driver("396.26") == "9.2"  # the two tables once disagreed here


def test_no_second_driver_table() -> None:
    """No module but envlock/nvidia.py spells out a driver → CUDA table (a tuple of 410.48-like
    driver versions next to CUDA releases)."""
    drivers = {d for _, d in nvidia.TOOLKIT_DRIVERS}
    for p in PKG.rglob("*.py"):
        if p.name == "nvidia.py" and p.parent == PKG:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in drivers}
        found |= {".".join(str(e.value) for e in n.elts) for n in ast.walk(tree)
                  if isinstance(n, ast.Tuple) and n.elts and all(isinstance(e, ast.Constant)
                                                                  and isinstance(e.value, int) for e in n.elts)
                  and ".".join(str(e.value) for e in n.elts) in drivers}
        assert len(found) < 3, f"{p}: looks like another driver table: {sorted(found)}"


def test_one_nvidia_smi_reader() -> None:
    """Only envlock/probes/nvsmi.py builds nvidia-smi queries; the [gpu] probe and verify use it."""
    from envlock.probes import nvsmi
    from envlock.verify import live

    for p in PKG.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if p.name != "nvsmi.py":
            assert "--query-gpu=" not in text and "--query-compute-apps=" not in text, p
    assert live.read_compute_apps is nvsmi.read_compute_apps
    assert gpu.SMI_FIELDS is nvsmi.SMI_FIELDS


def test_one_glibc_detector() -> None:
    for p in PKG.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if p.name != "glibc.py":
            assert "CS_GNU_LIBC_VERSION" not in text and "libc-2." not in text, p


# --- one TOML reader ---------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent / "data" / "manifest.example.toml"


def _parser_calls(tree: ast.AST) -> set[str]:
    """Names of TOML parser modules ``tree`` imports (``tomllib``, ``tomli``, ``rtoml``, ``toml``,
    ``tomlkit``): importing one is the only way to call it."""
    parsers = {"tomllib", "tomli", "rtoml", "toml", "tomlkit"}
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            found |= {a.name.split(".")[0] for a in n.names} & parsers
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            found |= {n.module.split(".")[0]} & parsers
    return found


def test_one_toml_reader() -> None:
    """Only envlock/manifest/_toml.py imports a TOML parser; every other module parses TOML with
    its load_toml, so every input has the same depth rule (once show/verify accepted 150 levels
    that diff refused)."""
    from envlock.diff import foreign
    from envlock.formats import _load
    from envlock.manifest import _toml

    reader = PKG / "manifest" / "_toml.py"
    assert _parser_calls(ast.parse(reader.read_text(encoding="utf-8"))) == {"tomllib", "tomli", "rtoml"}
    for p in PKG.rglob("*.py"):
        if p != reader:
            assert not _parser_calls(ast.parse(p.read_text(encoding="utf-8"))), p
    assert _load.load_toml is _toml.load_toml and _load.load_json is _toml.load_json
    assert _load.MAX_DEPTH == _toml.MAX_DEPTH
    text = EXAMPLE.read_text(encoding="utf-8")
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
        import tomli as tomllib

    assert _toml.loads(text) == foreign.parse_toml(text, "m") == tomllib.loads(text)


def _nested(tmp_path: Path, name: str, extra: str) -> Path:
    p = tmp_path / name
    p.write_text(EXAMPLE.read_text(encoding="utf-8") + "\n[extra]\n" + extra + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize(("name", "extra", "ok"), [
    ("arrays-99.toml", "x = " + "[" * 99 + "1" + "]" * 99, True),     # [extra] + 99 = 100 levels
    ("arrays-150.toml", "x = " + "[" * 150 + "1" + "]" * 150, False),
    ("arrays-2000.toml", "x = " + "[" * 2000 + "1" + "]" * 2000, False),
    ("inline-150.toml", "x = " + "{a = " * 150 + "1" + "}" * 150, False),
    ("dotted-5000.toml", "x." + ".".join(["a"] * 5000) + " = 1", False),  # no bracket nests
    ("header-5000.toml", "[extra." + ".".join(["a"] * 5000) + "]\nq = 1", False),
])
def test_same_depth_answer_in_show_verify_diff(tmp_path: Path, name: str, extra: str, ok: bool) -> None:
    """The same nested manifest gets the same answer from show, verify --manifest and diff: read,
    or one ``Error: … nested more than 100 levels deep`` line and exit 2 (never a
    RecursionError traceback, which show once gave for 5000 dotted keys)."""
    p = _nested(tmp_path, name, extra)
    runner = CliRunner()
    for argv in (["show", str(p)], ["verify", "--manifest", str(p)], ["diff", str(p), str(EXAMPLE)]):
        res = runner.invoke(cli, argv)
        assert res.exception is None or isinstance(res.exception, SystemExit), (argv, res.exception)
        errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
        if ok:
            assert not errors, (argv, errors)
            assert res.exit_code in (0, 1), (argv, res.output[-400:])
        else:
            assert res.exit_code == 2, (argv, res.output[-400:])
            assert errors == [errors[0]] and "nested more than 100 levels deep" in errors[0], argv
            assert errors[0].startswith(f"Error: {p}"), errors[0]



def _depth(data: object) -> int:
    """How many tables/arrays below the top-level table ``data`` nests (iteratively)."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


@pytest.mark.parametrize("form", ["a.{} = 1", "[{}]\nq = 1", "[[{}]]\nq = 1", "t = {{ {} = 1 }}",
                                  "a . {} = 1"])
def test_a_long_key_gets_the_depth_answer_whichever_parser_reads_it(form: str) -> None:
    """A dotted key or header nesting past MAX_DEPTH is refused with the depth error before any
    parser sees it, so tomli 2.5 (Python 3.10's TOML parser, which refuses keys of more than
    ``sys.getrecursionlimit()`` parts in its own words) and 3.11's tomllib give one answer; a key
    just within the limit parses to what this Python's TOML parser (the oracle) reads, and the
    refused one nests past the limit by that parser's own reading.  Dots in quoted key parts,
    strings and comments are not parts."""
    from envlock.manifest import _toml
    from envlock.errors import ManifestError

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
        import tomli as tomllib

    limit = _toml.MAX_DEPTH
    for parts in (10, limit - 2, limit - 1, limit, limit + 1, limit + 2, 300, 5000):
        key = ".".join(["k"] * parts)
        text = 'note = "a.b.c" # x.y.z\n' + form.format(key)
        try:
            oracle_depth: int | None = _depth(tomllib.loads(text))
        except (tomllib.TOMLDecodeError, RecursionError):  # tomli 2.5: more parts than the recursion limit
            oracle_depth = None
        try:
            got = _toml.load_toml(text, "m.toml", exact=True)
        except ManifestError as exc:
            assert str(exc).startswith("m.toml: nested more than 100 levels deep"), (parts, form, exc)
            assert oracle_depth is None or oracle_depth > limit, (parts, form)
        else:
            assert oracle_depth is not None and oracle_depth <= limit, (parts, form)
            assert got == tomllib.loads(text), (parts, form)
    # quoted parts with dots in them are one part each: 100 parts, 100 levels, accepted
    quoted = ".".join(['"x.y"'] * (limit - 1) + ["'p.q'"])
    text = quoted + " = 1\n"
    assert _toml.load_toml(text, "m.toml", exact=True) == tomllib.loads(text)
    assert _depth(tomllib.loads(text)) == limit - 1


def test_the_long_key_check_is_linear() -> None:
    """check_key_parts on 2 MB built to make a backtracking pattern quadratic (long runs of blanks
    and of dots without an ``=``) answers in seconds (a quadratic one would take hours)."""
    import time

    from envlock.manifest import _toml

    texts = [" " * 1_000_000 + "." * 1_000_000, "[" + " " * 1_000_000 + "a." * 500_000,
             ",".join(["a." * 200] * 5000), "a . " * 500_000]
    for text in texts:
        t0 = time.monotonic()
        _toml.check_key_parts(text, "m")
        assert time.monotonic() - t0 < 10.0, text[:20]  # a quadratic scan takes hours


# --- one "this machine's conda platform" -------------------------------------------------------

def test_one_conda_platform_function() -> None:
    """Only envlock/formats/conda.py maps an OS and machine to a conda subdir; lock, restore and
    verify ask its current_subdir() (once three functions, with py-rattler's, conda's and a
    linux-only rule)."""
    from envlock.formats import conda

    for p in PKG.rglob("*.py"):
        if p == PKG / "formats" / "conda.py":
            continue
        text = p.read_text(encoding="utf-8")
        tree = ast.parse(text)
        assert "Subdir.current" not in text, p
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef):
                assert not ("platform" in n.name and "current" in n.name), (p, n.name)
            if isinstance(n, ast.Dict):  # an OS/machine → subdir table
                values = {v.value for v in n.values if isinstance(v, ast.Constant)}
                keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
                assert not ({"x86_64", "aarch64"} <= keys and values & {"64", "linux-64"}), p
                assert not ("darwin" in keys and "osx" in values), p
    assert conda.current_subdir() in {"linux-64", "linux-aarch64", "linux-ppc64le", "osx-64",
                                      "osx-arm64", "win-64", "linux-s390x"}


def test_current_subdir_is_py_rattlers() -> None:
    """py-rattler's Subdir.current() (the platform rattler and pixi install for) is the oracle of
    this machine's subdir."""
    import rattler

    from envlock.formats.conda import current_subdir

    assert current_subdir() == str(rattler.Subdir.current())


@pytest.mark.parametrize(("system", "machine", "bits", "subdir"), [
    ("Linux", "x86_64", None, "linux-64"),
    ("linux", "x86_64", 32, "linux-32"),      # a 32-bit interpreter: conda's context.bits
    ("Linux", "aarch64", None, "linux-aarch64"),
    ("Linux", "ppc64le", 64, "linux-ppc64le"),
    ("Linux", "s390x", None, "linux-s390x"),
    ("Linux", "armv7l", 32, "linux-armv7l"),
    ("Linux", "i686", None, "linux-32"),
    ("Darwin", "arm64", 64, "osx-arm64"),
    ("darwin", "x86_64", 64, "osx-64"),
    ("Windows", "AMD64", None, "win-64"),
    ("win32", "AMD64", 64, "win-64"),
    ("Linux", "mips", None, None),
    ("SunOS", "x86_64", None, None),
])
def test_subdir_of_is_condas_rule(system: str, machine: str, bits: int | None,
                                  subdir: str | None) -> None:
    """conda's context.subdir rule (conda/base/context.py): non-x86 machines name themselves,
    x86 ones the interpreter's bits; every subdir it gives is one py-rattler knows."""
    import rattler

    from envlock.formats.conda import subdir_of

    assert subdir_of(system, machine, bits) == subdir
    if subdir:
        assert str(rattler.Subdir(subdir)) == subdir


# --- one FILE check of `libs` ------------------------------------------------------------------

def test_one_file_check_of_libs() -> None:
    """Whether a MODULE|FILE argument is a FILE, and whether that FILE is acceptable, is decided
    only by envlock/libs/argument.py's file_target: the library call behind the command
    (envlock/libs/runlibs.py's check_arguments) checks its arguments with it and the analysis finds
    its files with it (once two functions, with two rules)."""
    from envlock.libs import analysis, argument

    for p in PKG.rglob("*.py"):
        if p == PKG / "libs" / "argument.py":
            continue
        text = p.read_text(encoding="utf-8")
        assert "not a shared object" not in text, p
        assert "irregular(" not in text or p in (PKG / "_io.py", PKG / "_bounded.py"), p
    for module in (analysis, PKG / "libs" / "runlibs.py"):
        path = Path(module.__file__) if not isinstance(module, Path) else module
        tree = ast.parse(path.read_text(encoding="utf-8"))
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Name)}
        assert "file_target" in called, path
    assert analysis.file_target is argument.file_target


def test_snapshot_command_is_thin() -> None:
    """commands/snapshot.py parses, calls probes.assemble.snapshot and renders: the patch and the
    'not a Python' rule are the library's (envlock.snapshot(save_patch=True) works alone)."""
    from envlock.probes import assemble

    tree = ast.parse((PKG / "commands" / "snapshot.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "envlock.probes.git" not in imported and "hashlib" not in {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert not defined & {"_not_python", "_with_patch"}
    assert callable(assemble.with_patch) and callable(assemble.not_python)


def test_libs_command_is_thin() -> None:
    """commands/libs.py parses, resolves the target, calls envlock.libs.runlibs.run_libs once and
    renders: the loader model, the launcher rule and the exit status are the library's."""
    tree = ast.parse((PKG / "commands" / "libs.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "envlock.libs.runlibs" in imported
    assert not imported & {"envlock.libs.analysis", "envlock.libs.config", "envlock.libs.elf",
                           "envlock.libs.runtime", "envlock.libs.cachekey", "envlock._io"}
    called = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert called.count("run_libs") == 1 and "analyze_module" not in called
