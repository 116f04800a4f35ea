"""``--kb`` files are validated: every problem is one line ``Error: <file>: …``, exit 2.

The inputs are the mistakes a tester made with real-looking knowledge-base files: a binary
file, wrong value types, a positional placeholder, an empty file, a manifest given as the
knowledge base, a bad version specifier.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.diff.impact import _shipped, load_kb
from envlock.diff.kbcheck import validate
from envlock.errors import ManifestError

from .conftest import CONDA_PACKAGES, build_manifest, replace

COMPONENT = '''schema = 1
[[component]]
id = "lab"
class = "numerical-core"
match = {match}
why = {why}
do = {do}
'''


@pytest.fixture
def pair(write) -> list[str]:
    a = build_manifest(conda=replace(CONDA_PACKAGES, pandas=("2.1.4", "py311h320fe9a_0")))
    return [str(write("a.toml", a)), str(write("b.toml", build_manifest()))]


def _kb(tmp_path: Path, text: str | bytes, name: str = "lab.toml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _component(match: str = '["package:pandas"]', why: str = '"Our tables."',
               do: str = '"Pin pandas=={a}."') -> str:
    return COMPONENT.format(match=match, why=why, do=do)


CASES = [
    ("binary", gzip.compress(b"schema = 1\n" * 50), "not a text file (invalid UTF-8)"),
    ("empty", "\n  \n", "empty file"),
    ("match-int", _component(match="5"),
     "expected a string or an array of strings in 'component[0].match', got an integer (5)"),
    ("match-list-int", _component(match='["package:x", 5]'),
     "expected a string in 'component[0].match[1]', got an integer (5)"),
    ("aliases-int", "schema = 1\naliases = 3\n",
     "expected a table in 'aliases', got an integer (3)"),
    ("rules-simd-int", "schema = 1\n[rules]\nsimd = 4\n",
     "expected a table in 'rules.simd', got an integer (4)"),
    ("min-cc", 'schema = 1\n[rules.tf32]\nmin-cc = "abc"\n',
     "expected a number (e.g. \"8.0\") in 'rules.tf32.min-cc', got a string ('abc')"),
    ("positional", _component(do='"Pin {0}"'),
     "positional placeholder {0} in 'component[0].do'; use a named one ({a}, {b}, {fix}, {key})"),
    ("positional-empty", 'schema = 1\n[rules.threads]\ndo = "Set {} to 1"\n',
     "positional placeholder {} in 'rules.threads.do'; use a named one ({fix}, {what})"),
    ("unknown-placeholder", 'schema = 1\n[rules.blas-vendor]\ntitle = "BLAS {vendor}"\n',
     ("unknown placeholder {vendor} in 'rules.blas-vendor.title' (known: {a}, {b}, {fix}, "
     "{la}, {lb})")),
    ("unbalanced", _component(why='"costs {a"'),
     "bad placeholder in 'component[0].why': expected '}' before end of string"),
    ("why-int", _component(why="3"), "expected a string in 'component[0].why', got an integer"),
    ("torch-spec", 'schema = 1\n[rules.tf32]\ntorch = "not a specifier"\n',
     ("'rules.tf32.torch' is not a version specifier (PEP 440, e.g. \">=1.7,<1.12\"): "
     "'not a specifier'")),
    ("rank-str", 'schema = 1\n[classes.lab]\nrank = "high"\n',
     "expected an integer in 'classes.lab.rank', got a string ('high')"),
    ("rank-range", 'schema = 1\n[classes.lab]\nrank = 500\n',
     "expected an integer from 0 to 100 in 'classes.lab.rank', got 500"),
    ("unknown-rule", 'schema = 1\n[rules.mine]\ntitle = "x"\n',
     ("unknown rule 'rules.mine' (envlock implements: blas-vendor, code, loader-path, "
      "scheduler, simd, tf32, tf32-cudnn, threads, torch-variant, untracked)")),
    ("no-tables", 'schema = 1\n', "no impact-model table"),
    ("components-table", 'schema = 1\n[component]\nid = "x"\n',
     "expected an array of tables ([[component]]) in 'component', got a table"),
    ("needs-match", 'schema = 1\n[[component]]\nid = "x"\nclass = "other"\n',
     "'component[0]' needs id, class and match (lacks match)"),
    ("edge-when", 'schema = 1\n[[edge]]\ncause = "driver"\naccounts = ["gpu:*"]\nwhen = "x"\n',
     "unknown condition 'edge[0].when' = 'x' (known: one-side, moved, same-version)"),
    ("edge-needs-accounts", 'schema = 1\n[[edge]]\ncause = "driver"\n',
     "'edge[0]' needs cause and accounts (lacks accounts)"),
    ("edge-accounts-int", 'schema = 1\n[[edge]]\ncause = "driver"\naccounts = 3\n',
     "expected a string or an array of strings in 'edge[0].accounts', got an integer (3)"),
    ("typo", _component().replace("why =", "whyy ="),
     ("unknown key 'component[0].whyy' (expected one of: build-size, class, do, group, id, "
     "match, needs, size, title, why)")),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_kb_file_is_one_line(pair: list[str], tmp_path: Path, text: str | bytes,
                                 message: str) -> None:
    kb = _kb(tmp_path, text)
    res = CliRunner().invoke(cli, ["diff", *pair, "--kb", str(kb)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2
    assert res.output.startswith(f"Error: {kb}: {message}"), res.output
    assert res.output.count("\n") == 1


def test_manifest_given_as_kb(pair: list[str]) -> None:
    res = CliRunner().invoke(cli, ["diff", *pair, "--kb", pair[0]])
    assert res.exit_code == 2
    assert res.output == (f"Error: {pair[0]}: this is an envlock manifest, not an impact model "
                          "(--kb takes a file laid out like envlock/data/impact.toml; see "
                          "docs/diff.md)\n")


def test_valid_kb_with_every_kind_of_entry(pair: list[str], tmp_path: Path) -> None:
    kb = _kb(tmp_path, '''schema = 1
[classes.lab]
rank = 99
title = "our pipeline"
[sizes]
minor = 5
[aliases]
pandas-base = "pandas"
[noise]
patterns = ["env:MY_JOB_*"]
[rules.tf32]
torch = ">=1.7,<1.12"
min-cc = 8.0
[rules.threads]
vars = ["OMP_NUM_THREADS", "MY_LIB_THREADS"]
[[component]]
id = "lab"
class = "lab"
match = "package:pandas"
why = "Our tables come from pandas {key}."
do = "Pin pandas=={a} (not {b}); literal braces: {{x}}."
group = false
''')
    model = load_kb([kb])
    assert model.rank("lab") == 99
    res = CliRunner().invoke(cli, ["diff", *pair, "--kb", str(kb), "--format", "json"])
    assert res.exit_code == 1, res.output
    import json

    top = json.loads(res.output)["explanations"][0]
    assert top["class"] == "lab"
    assert top["why"] == "Our tables come from pandas pandas."
    assert top["do"] == "Pin pandas==2.1.4 (not 2.2.1); literal braces: {x}."


def test_shipped_model_passes_its_own_validation() -> None:
    validate(_shipped(), "impact.toml")
    with pytest.raises(ManifestError, match=r"^x\.toml: expected a table in 'sizes'"):
        validate({"sizes": [1]}, "x.toml")


def test_thread_count_component_and_threads_rule_name_the_same_variables() -> None:
    kb = load_kb()
    comp = next(c for c in kb.components if c.id == "thread-count")
    env = {p.split(":", 1)[1] for p in comp.patterns if p.startswith("env:")}
    assert env == set(kb.rules["threads"]["vars"])
    for name in env:
        assert kb.component("env", name).id == "thread-count"
