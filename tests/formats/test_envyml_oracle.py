"""Every environment.yml of ``shared/cases/peers`` and ``tests/formats/foreign`` read as conda-lock reads it (issue 23):
``conda_lock.src_parser.environment_yaml.parse_environment_file`` for ``linux-64`` (its
selector rule applied) is the oracle for each conda spec (name, version, build, channel) and
each pip requirement (name, specifier).  One difference is pip's, on purpose: conda-lock drops
the ``-e …`` lines of a ``pip:`` section, which ``conda env create`` hands to ``pip install -r``
— envlock reads them as pip does (named by ``#egg=``), so they are left out of the comparison.
conda-lock's PyPI → conda name lookup is given an empty local table (it would download one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from envlock import formats

_HERE = Path(__file__).resolve().parents[2].parent / "shared" / "cases"
CASES = _HERE if _HERE.is_dir() else Path("/work/shared/cases")
FOREIGN = Path(__file__).resolve().parent / "foreign"
FILES = sorted([*((CASES / "peers" / "envyml").iterdir() if (CASES / "peers").is_dir() else ()),
                *FOREIGN.glob("*environment.yml")])

pytestmark = pytest.mark.skipif(not FILES, reason="the peers cases are not here")


def _conda_lock_view(path: Path, mapping: Path) -> tuple[set[tuple[Any, ...]], set[str]]:
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    spec = parse_environment_file(path, platforms=["linux-64"], mapping_url=str(mapping))
    conda, pip = set(), set()
    for d in spec.dependencies["linux-64"]:
        version = getattr(d, "version", None)
        if d.manager == "conda":
            conda.add((d.name, "" if version in ("", "*") else version, d.build or "",
                       d.conda_channel))
        elif version is not None:
            pip.add(f"{canonicalize_name(d.name)} {'' if version == '*' else version}")
        else:  # a VCS requirement (name @ git+…): named, no specifier
            pip.add(f"{canonicalize_name(d.name)} ")
    # conda-lock adds an unpinned pip when a pip: section exists; envlock lists it if written
    conda.discard(("pip", "", "", None))
    return conda, pip


def _conda_constraint(q: dict[str, Any]) -> tuple[str, str]:
    """``(version, build)`` as conda's ``MatchSpec`` prints them: an exact pin ``name=V=B`` is
    the entry's own version and build; ``==V`` is ``V`` to conda."""
    c = q.get("constraint")
    if c is None:
        return q["version"], q.get("build") or ""
    v = c["version"]
    return (v[2:] if v.startswith("==") and not any(op in v[2:] for op in "<>=!~,|") else v,
            c["build"])


def _envlock_view(path: Path) -> tuple[set[tuple[Any, ...]], set[str]]:
    data = formats.environment_with_selectors(path, "linux-64").data
    conda = {(q["name"], *_conda_constraint(q), q.get("channel"))
             for q in data.get("conda", {}).get("packages", [])}
    conda.discard(("pip", "", "", None))
    pip = set()
    for q in data.get("pip", {}).get("packages", []):
        if q.get("origin") == "editable":
            continue  # conda-lock drops -e lines (see the module's docstring)
        version = q.get("constraint", {}).get("version", q["version"])
        if q.get("url"):  # name @ URL: no specifier (envlock takes a version from a wheel's name)
            version = ""
        pip.add(f"{q['name']} {version if version[:1] in ('', '=', '>', '<', '!', '~') else '==' + version}")
    return conda, pip


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_an_environment_file_reads_as_conda_lock_reads_it(path: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_text("{}", encoding="utf-8")
    assert _envlock_view(path) == _conda_lock_view(path, mapping)


def _conda_lines(path: Path) -> list[str]:
    import yaml

    deps = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("dependencies") or []
    return [d for d in deps if isinstance(d, str)]


SPECS = sorted({line for p in FILES for line in _conda_lines(p)})


@pytest.mark.parametrize("line", SPECS)
def test_every_match_spec_keeps_its_version_text_as_conda_does(line: str) -> None:
    """Each conda ``dependencies:`` line of these files, one version-spec shape at a time:
    envlock's version is conda's own ``MatchSpec`` text (``=3.000`` is ``3.000.*``, not
    ``3.0.*``; an exact ``==V`` is ``V`` to conda), and the same versions as py-rattler's
    ``MatchSpec`` (its ``VersionSpec`` prints parsed numbers)."""
    from conda_lock._vendor.conda.models.match_spec import MatchSpec as CondaMatchSpec
    from rattler import MatchSpec, VersionSpec

    from envlock.formats.conda import parse_spec

    ours = parse_spec(line)
    conda = CondaMatchSpec(line)
    version = ours.version[2:] if ours.exact else ours.version
    assert version == str(conda.get("version") or "")
    assert ours.build == str(conda.get("build") or "")
    theirs = MatchSpec(line, strict=False).version
    assert (str(VersionSpec(ours.version, strict=False)) if ours.version else None) == (
        str(theirs) if theirs is not None else None)
