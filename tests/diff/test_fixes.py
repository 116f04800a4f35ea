"""Every fix text parses as the command it claims to be.

Commands are the backticked spans of the ``do`` texts: those of the shipped impact model
(with sample values for their placeholders) and those :mod:`envlock.diff.fixes` generates for
every torch build pair.  Each is split with :mod:`shlex`; ``pip install`` is parsed by pip's own
option parser and its requirements by :class:`packaging.requirements.Requirement`; ``conda
install`` specs by conda's MatchSpec grammar as py-rattler implements it.
"""

from __future__ import annotations

import functools
import itertools
import re
import shlex
import string
from typing import Any

import pytest
from packaging.requirements import Requirement

from envlock.diff.facts import Pkg
from envlock.diff.fixes import blas_fix, torch_fix
from envlock.diff.impact import _shipped  # the parsed impact.toml

#: commands the texts may name (anything else in backticks is a Python expression or a path)
_COMMANDS = {"pip", "conda", "env", "git", "envlock", "python"}

#: sample values for the placeholders of the texts
_SAMPLE = {"a": "1.26.4", "b": "2.0.1", "key": "numpy", "var": "LD_LIBRARY_PATH",
           "fix": "`pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/cpu`"}


def _fill(text: str) -> str:
    names = {f for _, f, _, _ in string.Formatter().parse(text) if f}
    return text.format_map({n: _SAMPLE.get(n, "x") for n in names})


def _spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


@functools.lru_cache(maxsize=1)
def _pip_install() -> Any:
    """pip's own ``install`` command, whose option parser is the oracle."""
    from pip._internal.commands import create_command

    return create_command("install")


def check_command(cmd: str) -> str:
    """Parse one command line as its tool does; return the tool's name.

    :raises AssertionError: it does not parse as the command it names.
    """
    argv = shlex.split(cmd)
    assert argv and argv[0] in _COMMANDS, cmd
    if argv[:2] == ["pip", "install"]:
        options, args = _pip_install().parse_args(argv[2:])
        assert args, cmd
        for spec in args:
            if spec != "." and not spec.startswith((".[", "-")):
                Requirement(spec)  # raises InvalidRequirement
        if "--index-url" in argv:
            assert options.index_url.startswith("https://download.pytorch.org/whl/"), cmd
    elif argv[:2] == ["conda", "install"]:
        from rattler import MatchSpec

        rest = argv[2:]
        specs = []
        while rest:
            tok = rest.pop(0)
            if tok in ("-c", "--channel"):
                assert rest and not rest[0].startswith("-"), cmd
                rest.pop(0)
            else:
                assert not tok.startswith("-"), cmd
                specs.append(tok)
        assert specs, cmd
        for spec in specs:
            MatchSpec(spec)
    elif argv[0] == "env":
        assert argv[1] == "-u" and re.fullmatch(r"[A-Z_][A-Z0-9_]*", argv[2]), cmd
        assert len(argv) > 3, cmd
    return argv[0]


def _model_texts() -> list[tuple[str, str]]:
    data = _shipped()
    out = [(f"rules.{rid}.do", body["do"]) for rid, body in data["rules"].items() if "do" in body]
    out += [(f"component[{c['id']}].do", c["do"]) for c in data["component"] if "do" in c]
    return out


def test_every_command_of_the_impact_model_parses() -> None:
    seen = []
    for where, text in _model_texts():
        for span in _spans(_fill(text)):
            if span.split(None, 1)[0] in _COMMANDS:
                seen.append((where, check_command(span)))
    tools = {t for _, t in seen}
    assert {"env", "git", "pip"} <= tools, seen


_VARIANTS = ["CPU-only", "CUDA 11.8", "CUDA 12.1", "CUDA 12.4", "CUDA 13.0", "ROCm 6.1"]
_PKGS = [None, Pkg("2.1.2", None, None, "pip", "torch"),
         Pkg("2.1.2", "cuda120_py311h25b6552_301", "conda-forge", "conda", "pytorch"),
         Pkg("2.1.2", "py3.11_cuda12.1_cudnn8.9.2_0", "pytorch", "conda", "pytorch"),
         Pkg("2.5.1", "py3.11_cpu_0", "pytorch", "conda", "pytorch")]


@pytest.mark.parametrize(("va", "vb"), [p for p in itertools.permutations(_VARIANTS, 2)])
def test_every_generated_torch_fix_parses(va: str, vb: str) -> None:
    for pa, pb in itertools.product(_PKGS, repeat=2):
        text = torch_fix((va, vb), ("a.toml", "b.toml"), (pa, pb))
        spans = _spans(text)
        assert spans and all(check_command(s) in ("pip", "conda") for s in spans), text
        assert "--index-url https://download.pytorch.org/whl/<variant>" in spans[0]
        # CUDA 13.0 (and every CUDA the pytorch channel never had) never gets pytorch-cuda
        for v, p in ((va, pa), (vb, pb)):
            if v in ("CUDA 13.0",) and p is not None and p.manager == "conda":
                assert "pytorch-cuda=13" not in text
        assert "pytorch-cuda=13.0" not in text


@pytest.mark.parametrize("channel", ["conda-forge", "pkgs/main", None])
def test_every_generated_blas_fix_parses(channel: str | None) -> None:
    pkg = Pkg("3.9.0", "21_linux64_mkl", channel, "conda", "libblas")
    for va, vb in itertools.permutations(["openblas", "mkl", "blis", "netlib", ""], 2):
        text = blas_fix((va, vb), (pkg, None))
        spans = _spans(text)
        assert all(check_command(s) == "conda" for s in spans), text
        assert len(spans) == len({va, vb} - {""}), text


def test_the_lock_extra_is_worded_as_the_readme() -> None:
    from pathlib import Path

    import envlock.lock._tools as tools

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "pip install '.[lock]'" in readme
    source = Path(tools.__file__).read_text(encoding="utf-8")
    assert "pip install 'envlock[lock]'" not in source
    check_command("pip install '.[lock]'")


def test_fix_text_for_a_package_on_one_side_or_a_constraint(tmp_path) -> None:
    """The "pin X=={b} or =={a}" templates only fit a version move: a package on one side and a
    spec's constraint get a fix that names what to do (no "==(absent)", no "==>=2")."""
    from envlock.diff import diff

    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("numpy==1.26.4\nscipy==1.11.4\n")
    b.write_text("numpy==1.26.4\nscipy==1.11.4\nmpmath==1.3.0\n")
    res = diff([str(a), str(b)])
    do = next(e.do for e in res.explanations if any(c.key == "mpmath" for c in e.changes))
    assert "==(absent)" not in do and "(absent)" not in do
    assert "mpmath is only in b.txt (1.3.0): install it in a.txt too (`pip install 'mpmath==1.3.0'`)" in do
    spec = tmp_path / "environment.yml"
    spec.write_text("name: x\ndependencies:\n  - numpy>=2\n  - pandas\n")
    res = diff([str(spec), str(a)])
    texts = " ".join(e.do for e in res.explanations)
    assert "==>=" not in texts and "==(any" not in texts
    assert "asks for pandas (any version) and a.txt does not have it" in texts
