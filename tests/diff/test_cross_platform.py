"""A diff of two conda platforms (subdirs): builds are per platform (issue 25).

A build string names one platform's binary (``py311h7125741_0`` is osx-arm64's numpy 1.26.4),
so a fix that installs the other side's build on this one cannot run; conda's own solver is the
oracle for what ``conda install 'numpy==1.26.4=py311h7125741_0'`` means on linux-64 (no such
package).  The same version rebuilt for the other platform is the platform's consequence, not a
cause of its own.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from envlock.diff import PairDiff, diff

URL = "https://conda.anaconda.org/conda-forge"


def _explicit(path: Path, subdir: str, pkgs: list[tuple[str, str, str]]) -> Path:
    """A conda explicit file, as ``conda list --explicit`` writes it."""
    lines = [f"# platform: {subdir}", "@EXPLICIT"]
    lines += [f"{URL}/{subdir}/{n}-{v}-{b}.conda" for n, v, b in pkgs]
    path.write_text("\n".join(lines) + "\n")
    return path


def pair(a: Path, b: Path) -> PairDiff:
    res = diff([str(a), str(b)])
    assert isinstance(res, PairDiff)
    return res


def _commands(do: str) -> list[str]:
    return do.split("`")[1::2]


def test_same_version_other_build_is_the_platforms_consequence(tmp_path: Path) -> None:
    a = _explicit(tmp_path / "linux.txt", "linux-64",
                  [("numpy", "1.26.4", "py311h64a7726_0"), ("scipy", "1.11.4", "py311h64a7726_0")])
    b = _explicit(tmp_path / "mac.txt", "osx-arm64",
                  [("numpy", "1.26.4", "py311h7125741_0"), ("scipy", "1.12.0", "py311h2b215a9_0")])
    d = pair(a, b)
    ids = [e.id.split(":", 1)[0] for e in d.explanations]
    assert ids[0] == "subdir", ids
    sub = d.explanations[0]
    assert {c.key for c in sub.changes} >= {"numpy"}  # numpy's build moved with the platform
    assert not any(e.id.split(":", 1)[0] != "subdir" and any(c.key == "numpy" for c in e.changes)
                   for e in d.explanations)
    # scipy's version differs: its own explanation, with commands that pin the version only
    sc = next(e for e in d.explanations if any(c.key == "scipy" for c in e.changes)
              and e.id.split(":", 1)[0] != "subdir")
    cmds = _commands(sc.do)
    assert cmds == ["conda install scipy==1.11.4", "conda install scipy==1.12.0"], sc.do
    for cmd in cmds:  # conda's MatchSpec reading of the spec: a version, no build
        spec = shlex.split(cmd)[2]
        assert "=" not in spec.split("==", 1)[1]


def test_one_platform_keeps_the_build_string(tmp_path: Path) -> None:
    a = _explicit(tmp_path / "a.txt", "linux-64", [("scipy", "1.11.4", "py311h64a7726_0")])
    b = _explicit(tmp_path / "b.txt", "linux-64", [("scipy", "1.12.0", "py311h64a7726_0")])
    ex = next(e for e in pair(a, b).explanations if any(c.key == "scipy" for c in e.changes))
    assert _commands(ex.do) == ["conda install scipy==1.11.4=py311h64a7726_0",
                                "conda install scipy==1.12.0=py311h64a7726_0"], ex.do
