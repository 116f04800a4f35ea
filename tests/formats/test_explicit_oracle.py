"""Every ``conda list --explicit`` file of ``shared/cases/peers`` and ``tests/formats/foreign`` read as conda reads it (issue
23): conda's own ``MatchSpec`` (the copy conda-lock vendors, ``conda_lock._vendor.conda``) of
each URL line, with the ``#<md5>`` conda's ``explicit()`` splits off and checks on install, is
the oracle for name, version, build, subdir and md5."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envlock.formats import read_lock

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
FOREIGN = Path(__file__).resolve().parent / "foreign"
FILES = sorted(p for p in [*(CASES / "peers" / "explicit").glob("*"),
                           *FOREIGN.glob("*spec-file.txt"), *FOREIGN.glob("*.lock")]
               if "@EXPLICIT" in p.read_text(encoding="utf-8"))

#: explicit-list files (conda-lock's render) that lack the ``@EXPLICIT`` line
UNMARKED = sorted(p for p in (CASES / "peers" / "explicit").glob("*")
                  if p not in FILES) if (CASES / "peers").is_dir() else []

pytestmark = pytest.mark.skipif(not FILES, reason="the peers cases are not here")


def _conda_view(path: Path) -> set[tuple[str, str, str, str | None, str]]:
    from conda_lock._vendor.conda.models.match_spec import MatchSpec

    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line == "@EXPLICIT":
            continue  # conda's specs_from_url: comments and the marker
        url, md5 = line, None
        m = re.fullmatch(r"(.+)#([0-9a-f]{32})", line)
        if m:
            url, md5 = m.group(1), m.group(2)
        ms = MatchSpec(url, md5=md5) if md5 else MatchSpec(url)
        out.add((ms.name, str(ms.version), ms.get("build"), ms.get("md5"), str(ms.get("subdir"))))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_an_explicit_file_reads_as_conda_reads_it(path: Path) -> None:
    ours = {(x.name, x.version, x.build, x.md5, x.subdir) for x in read_lock(path).packages}
    assert ours == _conda_view(path)
    # an md5 where the line has one (``conda list --explicit --md5``), none where it has none
    text = path.read_text(encoding="utf-8")
    assert sorted(md5 for *_, md5, _ in ours if md5) == sorted(
        re.findall(r"#([0-9a-f]{32})\s*$", text, re.MULTILINE))


@pytest.mark.parametrize("path", UNMARKED, ids=lambda p: p.name)
def test_an_explicit_file_without_its_marker_is_refused_as_conda_refuses_it(path: Path) -> None:
    """Without ``@EXPLICIT`` conda's ``specs_from_url`` hands each line to ``MatchSpec`` (a
    ``conda create --file`` spec list); conda's own ``MatchSpec`` of these URL lines gives names
    that no conda package can have (a ``/``, the URL's host), so conda cannot solve them — and
    envlock says so in one line rather than read them as pip URLs."""
    from conda_lock._vendor.conda.models.match_spec import MatchSpec

    from envlock.errors import ManifestError

    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    assert lines and "@EXPLICIT" not in lines
    names = [MatchSpec(ln).name for ln in lines]
    # conda's package-name rule (conda-build's, and the channel index's): no '/' or ':'
    assert not any(re.fullmatch(r"[a-z0-9_][a-z0-9_.\-]*", n) for n in names), names
    with pytest.raises(ManifestError, match="without its @EXPLICIT line.*is a URL") as exc:
        read_lock(path)
    assert "password" not in str(exc.value)  # its credentials are not printed
