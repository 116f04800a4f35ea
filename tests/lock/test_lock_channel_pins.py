"""``lock -f environment.yml -c LOCAL`` asks the same question of both solvers (issue 23): the
file's ``channel::`` pins that name no given channel are dropped on the py-rattler path and on
the conda-lock path alike, and said the same way.

No conda, mamba or micromamba can be installed here (none is on PyPI or in Debian's archive),
so the conda-lock path runs the real conda-lock with a stand-in ``micromamba`` that records the
command lines conda-lock gives it: what it is asked to solve is conda-lock's own
``create --dry-run … SPECS`` line.  The py-rattler path solves for real, from a ``file://``
channel (the ``conda_channel`` fixture)."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.lock._unpinned import unpin_text

SPEC = textwrap.dedent("""\
    channels: [pytorch, nvidia, conda-forge]
    dependencies:
      - pytorch::tool      # the framework
      - "nvidia::appcuda"
      - zlib-ng  # [linux]
      - conda-forge::zlib-ng  # [win]
    """)

_FAKE = """#!{python}
import json, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:] == ["--version"]:
    print("1.5.8")
    sys.exit(0)
if "config" in sys.argv:
    print(json.dumps({{"pkgs_dirs": [{pkgs!r}]}}))
    sys.exit(0)
print(json.dumps({{"message": "stand-in: recorded, not solved"}}))
sys.exit(1)
"""


@pytest.fixture
def micromamba(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``micromamba`` on PATH that logs each command line (JSON, one a line) to the path
    returned."""
    import sys

    log, bindir = tmp_path / "calls.jsonl", tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "micromamba"
    fake.write_text(_FAKE.format(python=sys.executable, log=str(log), pkgs=str(tmp_path / "pkgs")))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for var in ("CONDA_EXE", "MAMBA_EXE"):
        monkeypatch.delenv(var, raising=False)
    return log


def _solved_specs(log: Path) -> list[str]:
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    create = [c for c in calls if "create" in c]
    assert create, calls
    args = create[0]
    return [a for a in args[args.index("--json") + 1:] if not a.startswith("-")
            and "://" not in a and a not in ("linux-64",) and args[args.index(a) - 1] not in
            ("--channel", "-c", "--platform", "--override-channels")]


def test_the_conda_lock_path_drops_the_pins_the_py_rattler_path_drops(
        tmp_path: Path, conda_channel: Path, micromamba: Path) -> None:
    spec = tmp_path / "environment.yml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["lock", "-f", str(spec), "-o", str(out), "-p", "linux-64",
                                   "-c", conda_channel.as_uri(), "--solver", "conda-lock"])
    assert res.exit_code == 2, res.output  # the stand-in solves nothing
    specs = _solved_specs(micromamba)
    assert not any("::" in s for s in specs), specs
    assert {s.split()[0] for s in specs} == {"tool", "appcuda", "zlib-ng"}, specs
    assert sorted(tmp_path.glob(".envlock-*")) == []  # the rewritten copy is gone
    assert spec.read_text() == SPEC  # and the user's file untouched

    # the py-rattler path, for real, from the local channel: the same pins dropped, said alike
    vspec = tmp_path / "vp.yml"  # appcuda needs __cuda
    vspec.write_text("subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.28'\n"
                     "      __cuda: '12.4'\n")
    res = CliRunner().invoke(cli, ["lock", "-f", str(spec), "-o", str(out), "-p", "linux-64",
                                   "-c", conda_channel.as_uri(), "--solver", "rattler",
                                   "--virtual-package-spec", str(vspec)])
    assert res.exit_code == 0, res.output
    said = "channel pins dropped (-c replaces the file's channels): pytorch::tool, nvidia::appcuda"
    assert said in " ".join(res.output.split())
    from conda_lock.lockfile import parse_conda_lock_file

    solved = {p.name for p in parse_conda_lock_file(out / "conda-lock.yml").package}
    assert {"tool", "appcuda", "zlib-ng"} <= solved


def test_without_channels_the_pins_reach_conda_lock_unchanged(
        tmp_path: Path, micromamba: Path) -> None:
    spec = tmp_path / "environment.yml"
    spec.write_text(SPEC)
    res = CliRunner().invoke(cli, ["lock", "-f", str(spec), "-o", str(tmp_path / "o"),
                                   "-p", "linux-64", "--solver", "conda-lock"])
    assert res.exit_code == 2, res.output
    specs = _solved_specs(micromamba)
    assert {"pytorch::tool", "nvidia::appcuda"} <= {s.split()[0] for s in specs}, specs


def test_unpin_text_keeps_layout_comments_and_selectors() -> None:
    got = unpin_text(SPEC, ["pytorch::tool", "nvidia::appcuda"])
    assert got == SPEC.replace("pytorch::tool", "tool").replace('"nvidia::appcuda"', '"appcuda"')
    flow = "dependencies: ['pytorch::tool', nvidia::appcuda, pytorch::tool>=1, python]\n"
    assert unpin_text(flow, ["pytorch::tool", "nvidia::appcuda", "pytorch::tool>=1"]) == (
        "dependencies: ['tool', appcuda, tool>=1, python]\n")
