"""``envlock diff`` options: --only, --ignore, --all, --kb; parsing without rtoml."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock import manifest
from envlock.cli import cli
from envlock.diff import diff, foreign
from envlock.diff.engine import PairDiff
from envlock.diff.facts import display
from envlock.errors import ManifestError

from .conftest import CONDA_PACKAGES, build_manifest, replace


@pytest.fixture
def drift(write) -> list[str]:
    """Two envs differing in pandas, scikit-learn, pip, one env var and the core count."""
    a = build_manifest(conda=replace(CONDA_PACKAGES, pandas=("2.1.4", "py311h320fe9a_0"),
                                     scikit_learn=("1.3.2", "py311hc009520_1"),
                                     pip=("23.3.1", "pyhd8ed1ab_0")))
    b = build_manifest(env={"MKL_CBWR": "COMPATIBLE"}, usable_cores=8)
    return [str(write("a.toml", a)), str(write("b.toml", b))]


def _json(args: list[str]) -> dict:
    res = CliRunner().invoke(cli, ["diff", *args, "--format", "json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.output)


def test_only_and_ignore(drift: list[str]) -> None:
    doc = _json([*drift, "--only", "package"])
    assert {d["area"] for d in doc["differences"]} == {"package"}
    assert [x["area"] for x in doc["not_compared"]] == []
    doc = _json([*drift, "--only", "env,cpu"])
    assert [(d["area"], d["key"]) for d in doc["differences"]] == [
        ("cpu", "usable-cores"), ("env", "MKL_CBWR")]
    doc = _json([*drift, "--ignore", "package:pandas", "--ignore", "scikit-*"])
    keys = [d["key"] for d in doc["differences"]]
    assert "pandas" not in keys and "scikit-learn" not in keys and "pip" in keys


def test_tooling_never_explains(drift: list[str]) -> None:
    doc = _json(drift)
    explained = {f["key"] for e in doc["explanations"] for f in e["facts"]}
    assert "pip" not in explained
    pip = next(d for d in doc["differences"] if d["key"] == "pip")
    assert (pip["change"], pip["class"]) == ("major", "tooling")


def test_limit_and_all(write) -> None:
    bumped = [(n, f"{v}.1" if n not in ("python", "python_abi") else v, b)
              for n, v, b in CONDA_PACKAGES]
    paths = [str(write("a.toml", build_manifest())),
             str(write("b.toml", build_manifest(conda=bumped)))]
    doc = _json(paths)
    assert len(doc["explanations"]) == 10
    assert doc["more_explanations"] > 0
    full = _json([*paths, "--all"])
    assert len(full["explanations"]) == 10 + doc["more_explanations"]


def test_kb_extends_the_model(drift: list[str], tmp_path: Path) -> None:
    kb = tmp_path / "lab.toml"
    kb.write_text('''schema = 1
[[component]]
id = "lab-critical"
class = "numerical-core"
match = ["package:scikit-learn"]
why = "Our pipeline's PCA comes from scikit-learn."
do = "Pin scikit-learn=={a}."
''')
    plain = [e["title"] for e in _json(drift)["explanations"]]
    assert plain.index("scikit-learn 1.3.2 → 1.4.1.post1 (minor)") > plain.index(
        "pandas 2.1.4 → 2.2.1 (minor)")
    doc = _json([*drift, "--kb", str(kb)])
    top = next(e for e in doc["explanations"] if e["id"].startswith("lab-critical"))
    assert top["why"] == "Our pipeline's PCA comes from scikit-learn."
    assert top["do"] == "Pin scikit-learn==1.3.2."
    titles = [e["title"] for e in doc["explanations"]]
    assert titles.index(top["title"]) < titles.index("pandas 2.1.4 → 2.2.1 (minor)")


def test_bad_kb_is_one_line(drift: list[str], tmp_path: Path) -> None:
    kb = tmp_path / "bad.toml"
    kb.write_text('[[component]]\nid = "x"\nclass = "nonsense"\nmatch = ["*"]\n')
    res = CliRunner().invoke(cli, ["diff", *drift, "--kb", str(kb)])
    assert res.exit_code == 2
    assert res.output == (f"Error: {kb}: 'component[0].class' names unknown class 'nonsense' "
                          "(known: blas, code, context, domain, gpu-runtime, interpreter, numerical-core, "
                          "numerics-env, other, platform, plumbing, process-algorithms, "
                          "process-determinism, process-precision, process-threads, run, tooling)\n")


def test_reader_schema_matches_model() -> None:
    assert foreign.SCHEMA == manifest.SCHEMA


def test_without_rtoml_tomllib_parses_the_same(drift: list[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fast = diff(drift)
    monkeypatch.setitem(sys.modules, "rtoml", None)  # import rtoml -> ImportError
    slow = diff(drift)
    assert isinstance(fast, PairDiff) and isinstance(slow, PairDiff)
    assert fast.a.facts == slow.a.facts and fast.b.facts == slow.b.facts


def test_malformed_toml_worded_by_tomllib(tmp_path: Path) -> None:
    bad = tmp_path / "m.toml"
    bad.write_text('[envlock]\nschema = 1\nhost = "x\n')
    with pytest.raises(ManifestError, match=r"m\.toml: malformed TOML \(.*line 3"):
        foreign.read(bad)


def test_only_unknown_area(drift: list[str]) -> None:
    res = CliRunner().invoke(cli, ["diff", *drift, "--only", "packages"])
    assert res.exit_code == 2
    assert res.output.startswith("Error: unknown area 'packages' for --only (these inputs have: "
                                 "code, package, python, cpu, env, platform, target)")


def test_compiler_rebuild_joins_the_package_explanation(write) -> None:
    def toolchain(gcc: str) -> dict:
        return {"toolchain": {"status": "ok", "built-with": [
            {"package": "numpy", "path": "/x/numpy/_core/_multiarray_umath.so",
             "compilers": [f"GCC: (GNU) {gcc}"]}]}}

    a = build_manifest(conda=replace(CONDA_PACKAGES, numpy=("1.24.4", "py311h64a7726_0")),
                       stack=toolchain("10.2.1 20210130 (Red Hat 10.2.1-11)"))
    b = build_manifest(stack=toolchain("14.2.1 20250110 (Red Hat 14.2.1-7)"))
    result = diff([write("a.toml", a), write("b.toml", b)])
    assert isinstance(result, PairDiff)
    assert [e.title for e in result.explanations] == ["numpy 1.24.4 → 1.26.4 (minor)"]
    assert [c.key for c in result.explanations[0].changes] == ["numpy", "numpy built with"]
    # the same compiler change without a version change is its own explanation
    b2 = build_manifest(conda=replace(CONDA_PACKAGES, numpy=("1.24.4", "py311h64a7726_0")),
                        stack=toolchain("14.2.1 20250110 (Red Hat 14.2.1-7)"))
    result = diff([write("a.toml", a), write("b2.toml", b2)])
    assert isinstance(result, PairDiff)
    assert result.explanations[0].id == "compilers:toolchain:numpy built with"


def test_failed_probes(write) -> None:
    a = build_manifest()
    b = build_manifest()
    b["git"] = {"status": "timeout", "source": "git", "error": "git status took over 10 s"}
    b["conda"] = {"status": "error", "source": "conda-meta", "error": "permission denied"}
    b["cpu"] = {"status": "error", "source": "/proc/cpuinfo", "error": "unreadable"}
    result = diff([write("a.toml", a), write("b.toml", b)])
    assert isinstance(result, PairDiff)
    assert ("cpu", "b.toml: cpu error: unreadable") in result.not_compared
    # conda failed, pip did not: the pip view is compared, conda-only packages are not removed
    assert result.b.listing == "partial"
    assert all(c.area != "package" for c in result.changes)
    assert result.unlisted["package"] == 17  # conda-only packages (python is a [python] fact)
    state = next(c for c in result.changes if c.key == "repository.state")
    assert state.values == (None, "git timeout: git status took over 10 s")


def test_unknown_table_is_compared_generically(write) -> None:
    def libs(cudnn: str) -> dict:
        # a table this envlock has no extractor for (from a newer envlock)
        return {"accelerators": {"status": "ok", "source": "loader model", "resolved": [
            {"soname": "libcudnn.so.9", "version": cudnn, "path": f"/opt/cudnn-{cudnn}/lib"},
            {"soname": "libstdc++.so.6", "version": "3.4.30", "path": "/usr/lib64"}],
            "search": {"ld-library-path": ["/opt/cudnn/lib"], "cache": "/etc/ld.so.cache"}}}

    result = diff([write("a.toml", build_manifest(stack=libs("9.1.0"))),
                   write("b.toml", build_manifest(stack=libs("9.5.1")))])
    assert isinstance(result, PairDiff)
    assert [(c.area, c.key, c.values, c.cls) for c in result.changes] == [
        ("accelerators", "resolved[libcudnn.so.9].version", ("9.1.0", "9.5.1"), "other")]
    assert result.identical["accelerators"] == 5  # sonames, libstdc++ version, search settings


def test_libraries_compared_by_owner_not_path(write) -> None:
    """[libraries]: the same package's copy under another prefix is no difference; a copy that
    no package owns (case C01: a module tree on LD_LIBRARY_PATH) is, and ranks as CUDA libs."""
    def libs(prefix: str, cudnn_owner: str | None, cudnn_path: str) -> dict:
        owned = {"owner": cudnn_owner, "owner-kind": "pip", "version": "9.24.0.43"} if cudnn_owner else {}
        return {"libraries": {"status": "ok", "module": "torch", "resolved": [
            {"soname": "libcudnn.so.9", "path": cudnn_path, "realpath": cudnn_path,
             "rule": "rpath" if cudnn_owner else "ld_library_path", **owned},
            {"soname": "libgomp.so.1", "path": f"{prefix}/torch/lib/libgomp.so.1",
             "realpath": f"{prefix}/torch/lib/libgomp.so.1", "rule": "rpath", "owner": "torch",
             "owner-kind": "pip", "version": "2.14.1"}]}}

    wheel_a = libs("/a", "nvidia-cudnn-cu13", "/a/nvidia/cudnn/lib/libcudnn.so.9")
    wheel_b = libs("/b", "nvidia-cudnn-cu13", "/b/nvidia/cudnn/lib/libcudnn.so.9")
    module = libs("/a", None, "/apps/cudnn/v8.0.3/lib64/libcudnn.so.9")
    same = diff([write("a.toml", build_manifest(stack=wheel_a)), write("b.toml", build_manifest(stack=wheel_b))])
    assert [c for c in same.changes if c.area == "libraries"] == []
    shadowed = diff([write("c.toml", build_manifest(stack=wheel_a)), write("d.toml", build_manifest(stack=module))])
    (change,) = [c for c in shadowed.changes if c.area == "libraries"]
    assert change.key == "libcudnn.so.9"
    assert [display(v) for v in change.values] == [
        "pip package nvidia-cudnn-cu13",
        "unowned file /apps/cudnn/v8.0.3/lib64/libcudnn.so.9 (via LD_LIBRARY_PATH)"]
    assert change.cls == "gpu-runtime"


def test_the_collector_is_back_after_a_diff(drift: list[str]) -> None:
    """``envlock diff`` runs without the cyclic garbage collector, and leaves it as it found it
    for a caller in the same process (text output, and an input error, exit 2)."""
    import gc

    assert gc.isenabled()
    res = CliRunner().invoke(cli, ["diff", *drift])
    assert res.exit_code == 1 and "envlock diff:" in res.output
    assert gc.isenabled()
    res = CliRunner().invoke(cli, ["diff", drift[0], drift[0] + ".missing"])
    assert res.exit_code == 2 and res.output.startswith("Error: ")
    assert gc.isenabled()
    gc.disable()
    try:
        CliRunner().invoke(cli, ["diff", *drift])
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
