"""``envlock bisect``: real venvs built by uv from wheels written here (offline), real runs of
the interpreter, manifests taken by envlock; the numbers are what the wheels compute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.reproduce import Judge, bisect
from envlock.reproduce.changes import Change, Group, merge_infeasible
from envlock.reproduce.ddmin import FAIL, PASS, ddmin

from .conftest import CMD, UNRELATED

pytestmark = pytest.mark.usefixtures("offline")

METRIC = r"sum=(\S+)"


def command() -> list[str]:
    return ["python", "-c", CMD]


def run_cli(good: Path, bad: Path, wheels: Path, *extra: str, fmt: str = "json",
            cmd: list[str] | None = None):
    result = CliRunner().invoke(cli, ["bisect", str(good), str(bad), "--no-index",
                                      "--find-links", str(wheels), "--format", fmt, *extra,
                                      "--", *(cmd or command())])
    return result


def test_one_package_among_twelve_and_two_variables(env_from, wheels, tmp_path):
    # zsum computes as numsum does, as a minor release like the eleven others, and sorts last:
    # nothing ranks it first, the bisection reaches it last (5 builds measured)
    culprit, new = "zsum", "1.1"
    good = env_from("good", [f"{culprit}==1.0", *(f"{p}==1.0" for p in UNRELATED)],
                    {"OMP_NUM_THREADS": "1"})
    bad = env_from("bad", [f"{culprit}=={new}", *(f"{p}==1.1" for p in UNRELATED)],
                   {"OMP_NUM_THREADS": "4", "MKL_CBWR": "COMPATIBLE"})
    cmd = ["python", "-c", CMD.replace("numsum", culprit)]
    result = run_cli(good, bad, wheels, "--metric", METRIC, "--workdir", str(tmp_path / "w"),
                     cmd=cmd)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["groups"]) == 14
    assert doc["good_value"] == 0.0 and doc["bad_value"] == 1.0
    assert [g["label"] for g in doc["culprit"]] == [f"{culprit} 1.0 → {new}"]
    assert doc["envs_built"] <= 6, doc["steps"]
    assert doc["envs_built"] == sum(s["built"] for s in doc["steps"])
    # GOOD and BAD ran in their own venvs (they match their manifests): no build for them
    assert [s["built"] for s in doc["steps"][:2]] == [False, False]
    assert all(Path(log).is_file() for s in doc["steps"] for log in s["logs"])
    assert not (tmp_path / "w" / "envs").exists()  # removed without --keep
    step = next(s for s in doc["steps"] if s["applied"] == [f"{culprit} 1.0 → {new}"])
    assert step["value"] == 1.0 and step["outcome"] == "fail"
    assert any(line.startswith("uv pip install --quiet --python culprit-env/bin/python "
                               "--no-deps --find-links") and f"{culprit}=={new}" in line
               for line in doc["rebuild"])


def test_text_and_markdown_reports(env_from, wheels, tmp_path):
    good = env_from("good", ["numsum==1.0", "p01==1.0", "p02==1.0"])
    bad = env_from("bad", ["numsum==2.0", "p01==1.1", "p02==1.1"], {"OMP_NUM_THREADS": "2"})
    text = run_cli(good, bad, wheels, "--metric", METRIC, "--keep", "--workdir",
                   str(tmp_path / "w"), fmt="text")
    assert text.exit_code == 0, text.output
    out = text.stdout
    assert "GOOD's value 0, BAD's 1 (--metric 'sum=(\\S+)', rtol 1e-09, atol 0)" in out
    assert "Culprit (1 of 4 group(s)): numsum 1.0 → 2.0" in out
    assert "Rebuild the culprit's two environments:" in out
    assert list((tmp_path / "w" / "envs").iterdir())  # --keep


def test_an_interacting_pair_is_found_as_a_pair(env_from, wheels):
    good = env_from("good", ["numsum==1.0", "flipa==1.0", "flipb==1.0", "p01==1.0",
                             "p02==1.0", "p03==1.0"])
    bad = env_from("bad", ["numsum==1.0", "flipa==2.0", "flipb==2.0", "p01==1.1",
                           "p02==1.1", "p03==1.1"])
    result = run_cli(good, bad, wheels, "--metric", METRIC)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted(g["label"] for g in doc["culprit"]) == ["flipa 1.0 → 2.0", "flipb 1.0 → 2.0"]
    # the text says the pair acts only together; the steps' "applied to GOOD" column is whole
    # (two steps never look identical), and with stderr not a terminal (a batch job's log)
    # every build and run is one progress line there (issue 25)
    text = run_cli(good, bad, wheels, "--metric", METRIC, fmt="text")
    assert "  only together: GOOD with both gives BAD's result; without any one of them it " \
        "gives GOOD's" in text.stdout
    steps = text.stdout[text.stdout.index("Steps:"):].split("\n\n", 1)[0]
    for s in doc["steps"]:
        for label in s["applied"] if s["phase"] != "BAD" else ():  # "(everything: BAD)"
            assert all(word in steps for word in label.split()), (label, steps)
    assert max(len(line) for line in steps.splitlines()) <= 160
    progress = [line for line in text.stderr.splitlines() if line.startswith("envlock bisect: ")]
    assert len(progress) >= len(doc["steps"]), text.stderr
    # what the text says no rebuild changes is in the JSON too
    assert doc["never_toggled"] == ["the NVIDIA driver", "GPU", "CPU", "kernel", "system libraries"]


def test_infeasible_groups_are_merged_and_said(env_from, wheels):
    good = env_from("good", ["numsum==1.0", "tied==1.0", "tiedto==1.0", "p01==1.0"])
    bad = env_from("bad", ["numsum==2.0", "tied==2.0", "tiedto==2.0", "p01==1.1"])
    result = run_cli(good, bad, wheels, "--metric", METRIC)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    labels = [g["label"] for g in doc["groups"]]
    assert "tied 1.0 → 2.0, tiedto 1.0 → 2.0" in labels
    merged = next(n for n in doc["notes"] if n.startswith("merged "))
    assert "tied 1.0 → 2.0 + tiedto 1.0 → 2.0" in merged and "tiedto>=2" in merged
    assert "Because" in merged  # uv's own explanation
    assert [g["label"] for g in doc["culprit"]] == ["numsum 1.0 → 2.0"]


def test_same_result_is_said_with_what_cannot_be_toggled(env_from, wheels):
    good = env_from("good", ["numsum==1.0", "p01==1.0"])
    bad = env_from("bad", ["numsum==1.0", "p01==1.1"], {"OMP_NUM_THREADS": "8"})
    result = run_cli(good, bad, wheels, "--metric", METRIC, fmt="markdown")
    assert result.exit_code == 1, result.output
    assert ("GOOD and BAD give the same result: the cause is not in the packages or variables "
            "bisect can toggle.") in result.stdout
    assert "the NVIDIA driver, GPU, CPU, kernel, system libraries" in result.stdout
    assert "| # | phase | applied to GOOD | env | result | verdict | as | note |" in result.stdout
    assert "| 2 | BAD | (everything: BAD) | reused | 0 | good | pass |  |" in result.stdout


def test_exit_status_verdicts_and_requirements_inputs(tmp_path, wheels):
    """GOOD/BAD as pip-freeze files (any input diff reads): both ends are built; 0 good,
    1 bad, as git bisect run."""
    (tmp_path / "good.txt").write_text("numsum==1.0\np01==1.0\np02==1.0\n")
    (tmp_path / "bad.txt").write_text("numsum==2.0\np01==1.1\np02==1.1\n")
    check = ["python", "-c", "import numsum, sys; sys.exit(numsum.total([1.0, 1e16, -1e16]) != 0)"]
    result = bisect(str(tmp_path / "good.txt"), str(tmp_path / "bad.txt"), check,
                    no_index=True, find_links=[str(wheels)], judge=Judge(repeat=2))
    assert result.status == "found"
    assert [g.label for g in result.culprit] == ["numsum 1.0 → 2.0"]
    assert [s.codes for s in result.steps[:2]] == [(0, 0), (1, 1)]
    assert result.steps[0].built and result.steps[1].built
    assert result.runs == 2 * len(result.steps)
    assert "records no Python version: envlock's own is used" in result.notes[-2]


def test_ddmin_finds_single_culprits_and_pairs():
    for culprit in ({3}, {0}, {13}, {2, 9}, {5, 6, 11}):
        seen: dict[frozenset[int], str] = {}

        def test(s, culprit=culprit, seen=seen):
            k = frozenset(s)
            seen.setdefault(k, FAIL if culprit <= k else PASS)
            return seen[k]

        assert set(ddmin(list(range(14)), test)) == culprit


def _announced(g: int, culprit: set[int]) -> tuple[list[int], list[frozenset[int]]]:
    """ddmin over ``g`` groups with ``ahead``: its answer, and the tests not announced first."""
    told: set[frozenset[int]] = set()
    late: list[frozenset[int]] = []

    def test(s):
        k = frozenset(s)
        if k not in told:
            late.append(k)
        return FAIL if culprit <= k else PASS

    got = ddmin(list(range(g)), test, ahead=lambda subsets: told.update(frozenset(x) for x in subsets))
    return got, late


def test_ddmin_announces_each_bisection_test_before_it_and_answers_the_same():
    """``ahead`` (bisect asks the resolver about those subsets meanwhile) is told every subset
    the optimistic bisection tests before it tests it, and changes no answer."""
    for g in (2, 3, 5, 8, 14):
        for culprit in [{i} for i in range(g)] + [{0, g - 1}]:
            got, late = _announced(g, culprit)
            plain = ddmin(list(range(g)), lambda s, culprit=culprit: FAIL if culprit <= set(s) else PASS)
            assert set(got) == set(plain) == culprit
            if len(culprit) == 1:  # one culprit: only the bisection tests, each announced
                assert late == [], (g, culprit, late)


def test_merge_asks_the_resolver():
    a = Group(changes=(Change(kind="pip", name="a", good="1", bad="2", bad_req="a==2"),))
    b = Group(changes=(Change(kind="pip", name="b", good="1", bad="2", bad_req="b==2"),))
    c = Group(changes=(Change(kind="pip", name="c", good="1", bad="2", bad_req="c==2"),))

    def check(groups):
        names = {n for g in groups for n in g.names}
        return None if "a" not in names or "b" in names else "Because a==2 depends on b>=2 …"

    groups, notes = merge_infeasible([a, b, c], check)
    assert [g.label for g in groups] == ["a 1 → 2, b 1 → 2", "c 1 → 2"]
    assert notes == ["merged a 1 → 2 + b 1 → 2: GOOD with a 1 → 2 alone cannot be installed "
                     "(uv: Because a==2 depends on b>=2 …)"]


def test_cuda_variant_travels_with_its_nvidia_wheels_and_triton():
    from envlock.reproduce.changes import group_changes

    def pip(name, good, bad):
        return Change(kind="pip", name=name, good=good, bad=bad, good_req=f"{name}=={good}",
                      bad_req=f"{name}=={bad}")

    changes = [pip("torch", "2.13.0+cu128", "2.14.1+cu130"),
               pip("nvidia-cublas-cu13", "13.0.0", "13.1.0"), pip("triton", "3.4.0", "3.5.0"),
               pip("numpy", "1.24.4", "2.4.1"),
               Change(kind="env", name="CUBLAS_WORKSPACE_CONFIG", good=None, bad=":4096:8")]
    groups = group_changes(changes)
    cuda = next(g for g in groups if len(g.changes) > 1)
    assert cuda.names == {"torch", "nvidia-cublas-cu13", "triton"}
    assert cuda.why.startswith("the CUDA variant (torch 2.13.0+cu128 → 2.14.1+cu130)")
    assert len(groups) == 3


def test_ctrl_c_leaves_nothing_half_built(tmp_path, wheels):
    import sys

    from envlock._run import run
    from envlock.reproduce.envs import Builder

    def interrupted(argv, **kw):
        if argv[1:3] == ["pip", "install"]:
            raise KeyboardInterrupt
        return run(argv, **kw)

    builder = Builder(tmp_path / "envs", sys.executable, ["--no-index", "--find-links",
                                                          str(wheels)], runner=interrupted)
    with pytest.raises(KeyboardInterrupt):
        builder.get(["numsum==1.0"])
    assert (tmp_path / "envs").exists() and not list((tmp_path / "envs").iterdir())


def test_bad_inputs_are_one_line(tmp_path):
    spec = tmp_path / "req.txt"
    spec.write_text("numpy>=1.24\n")
    pinned = tmp_path / "pinned.txt"
    pinned.write_text("numpy==1.24.4\n")
    result = CliRunner().invoke(cli, ["bisect", str(spec), str(pinned), "--", "true"])
    assert result.exit_code == 2
    assert result.output == (f"Error: {spec}: numpy is not pinned to one version (>=1.24); "
                             "bisect needs exact versions\n")
    result = CliRunner().invoke(cli, ["bisect", str(pinned), str(pinned), "--metric", "(",
                                      "--", "true"])
    assert result.exit_code == 2
    assert result.output.startswith("Error: --metric '(': not a regular expression")


def test_good_whose_own_pins_do_not_resolve(env_from, wheels):
    # installed with --no-deps: tied 2.0 wants tiedto>=2, the env has 1.0 (pip check fails)
    good = env_from("good", ["numsum==1.0", "tied==2.0", "tiedto==1.0", "p01==1.0"])
    bad = env_from("bad", ["numsum==2.0", "tied==2.0", "tiedto==1.0", "p01==1.1"])
    result = run_cli(good, bad, wheels, "--metric", METRIC)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any(n.startswith("GOOD's own pins do not resolve together (uv: Because")
               for n in doc["notes"])
    assert [g["label"] for g in doc["culprit"]] == ["numsum 1.0 → 2.0"]


def test_the_text_table_never_cuts_the_applied_column():
    """Steps whose "applied to GOOD" lists differ only past 60 columns stay distinguishable:
    the cell wraps in its column (issue 25)."""
    from envlock.render.bisectreport import render_text
    from envlock.reproduce.model import BisectResult, Judge, Step

    long = tuple(f"nvidia-cusparselt-cu13 0.6.{i} → 0.8.1" for i in range(3))
    steps = (Step(number=1, phase="bisect", applied=long[:2], env="e1", built=True,
                  verdict="good", outcome="pass"),
             Step(number=2, phase="bisect", applied=long[:2] + ("zlast 1.0 → 2.0",), env="e2",
                  built=True, verdict="bad", outcome="fail"))
    r = BisectResult(status="found", good="good.toml", bad="bad.toml", command=("python", "t.py"),
                     judge=Judge(), groups=(), culprit=(), steps=steps, envs_built=2, runs=2)
    table = render_text(r).split("Steps:\n", 1)[1].split("\n\n", 1)[0]
    rows = table.splitlines()
    assert "zlast" in table
    assert len(rows) > 3 and max(len(x) for x in rows) < 120


def test_merge_asks_the_first_questions_at_once_with_the_same_answer():
    """Each group alone on GOOD is asked concurrently (issue 26); merges and notes are those of
    asking one after the other."""
    import threading
    import time

    groups = [Group(changes=(Change(kind="pip", name=n, good="1", bad="2", bad_req=f"{n}==2"),))
              for n in "abcdef"]
    running, peak, lock = [0], [0], threading.Lock()

    def check(gs):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        names = {n for g in gs for n in g.names}
        if "a" in names and "b" not in names:
            return "Because a==2 depends on b>=2 …"
        if "d" in names and "e" not in names:
            return "Because d==2 depends on e==2 …"
        return None

    par = merge_infeasible(groups, check, workers=4)
    assert peak[0] > 1
    peak[0] = 0
    seq = merge_infeasible(groups, check, workers=1)
    assert peak[0] == 1
    assert par == seq
    assert [g.label for g in par[0]] == ["a 1 → 2, b 1 → 2", "c 1 → 2", "d 1 → 2, e 1 → 2", "f 1 → 2"]


def test_environments_are_removed_after_the_answer(tmp_path):
    """The environments' directory is gone at once (renamed) and deleted by a thread that the
    interpreter waits for at exit: no file is left, nothing outlives the process."""
    import threading

    from envlock.reproduce import remove_in_background

    envs = tmp_path / "envs"
    for i in range(50):
        d = envs / f"env-{i}" / "lib"
        d.mkdir(parents=True)
        (d / "f.py").write_text("x = 1\n")
    remove_in_background(envs)
    assert not envs.exists()
    workers = [t for t in threading.enumerate() if t.name == "envlock-remove-envs"]
    assert all(not t.daemon for t in workers)
    for t in workers:
        t.join(timeout=60)
    assert list(tmp_path.iterdir()) == []
    remove_in_background(tmp_path / "missing")  # nothing there: nothing to do, no error


def test_good_and_bad_environments_given(env_from, wheels, tmp_path):
    """``--good-env DIR`` runs GOOD in DIR instead of building it when DIR is a venv of the
    interpreter every subset uses and matches GOOD (GOOD's own environment is gone here); a
    ``--bad-env`` that does not match BAD is said, and BAD is built."""
    import shutil

    good = env_from("good", ["numsum==1.0", "p01==1.0"])
    bad = env_from("bad", ["numsum==2.0", "p01==1.1"])
    env_from("good-copy", ["numsum==1.0", "p01==1.0"])
    shutil.rmtree(tmp_path / "good")  # GOOD's recorded environment is gone
    copy = tmp_path / "good-copy"
    result = run_cli(good, bad, wheels, "--metric", METRIC, "--good-env", str(copy),
                     "--bad-env", str(copy))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [g["label"] for g in doc["culprit"]] == ["numsum 1.0 → 2.0"]
    assert [s["built"] for s in doc["steps"][:2]] == [False, True]
    assert doc["steps"][0]["env"] == str(copy)
    assert f"GOOD ran in the environment given, {copy} (it matches {good})" in doc["notes"]
    assert any(n.startswith(f"--bad-env {copy}: not a venv of ") and n.endswith("BAD was built")
               for n in doc["notes"]), doc["notes"]
    assert doc["envs_built"] == sum(s["built"] for s in doc["steps"])
