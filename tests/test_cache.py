"""envlock's one cache (:mod:`envlock.cache`): an answer is reused only while every input it
was computed from — as recorded by the code that read it — is unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from envlock import cache
from envlock.cache import Recorder, memo


@pytest.fixture(autouse=True)
def _not_racy(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests change files just before asking; the racy-witness margin is tested alone."""
    monkeypatch.setattr(cache, "RACY_NS", 0)


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}


class Counter:
    """A computation that reads what ``read`` says and counts its runs."""

    def __init__(self, read):
        self.read = read
        self.runs = 0

    def __call__(self, rec: Recorder):
        self.runs += 1
        return self.read(rec)


def test_file_witness_sees_content_size_and_in_place_rewrites(tmp_path: Path, env: dict[str, str]) -> None:
    f = tmp_path / "libx.so"
    f.write_bytes(b"one")
    c = Counter(lambda rec: (rec.file(f), f.read_bytes().decode())[1])
    assert memo("t", {"q": 1}, c, environ=env) == "one"
    assert memo("t", {"q": 1}, c, environ=env) == "one" and c.runs == 1
    f.write_bytes(b"two!")  # new size and mtime
    assert memo("t", {"q": 1}, c, environ=env) == "two!" and c.runs == 2
    st = f.stat()
    f.write_bytes(b"six!")  # same size, mtime put back: the ctime still moves
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert memo("t", {"q": 1}, c, environ=env) == "six!" and c.runs == 3
    f.unlink()  # a file that disappears
    c.read = lambda rec: rec.file(f)
    assert memo("t", {"q": 1}, c, environ=env) is None and c.runs == 4
    assert memo("t", {"q": 1}, c, environ=env) is None and c.runs == 4
    f.write_bytes(b"")  # a missing input that appears
    assert memo("t", {"q": 1}, c, environ=env) is not None and c.runs == 5


def test_an_input_changed_during_or_just_before_the_computation_is_no_witness(
        tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """git's "racily clean" rule: a witness whose ctime is within RACY_NS of the start (or
    later) may have changed after it was read; the answer is not stored."""
    monkeypatch.setattr(cache, "RACY_NS", 10**9)  # one second
    f = tmp_path / "input"
    f.write_text("a")

    def read_then_change(rec: Recorder) -> str:
        value = f.read_text()
        rec.file(f)
        return value

    c = Counter(read_then_change)
    memo("t", 1, c, environ=env)
    memo("t", 1, c, environ=env)
    assert c.runs == 2 and not (tmp_path / "cache").exists()  # changed a moment ago: not kept
    monkeypatch.setattr(cache, "RACY_NS", 0)
    memo("t", 1, c, environ=env)
    memo("t", 1, c, environ=env)
    assert c.runs == 3  # stable since before the start: kept

    def change_while_computing(rec: Recorder) -> str:
        f.write_text("b")  # changed while the answer is computed, then recorded
        rec.file(f)
        return "stale"

    memo("t", 2, change_while_computing, environ=env)
    assert memo("t", 2, lambda rec: "fresh", environ=env) == "fresh"


def test_directory_listing_link_target_and_variables(tmp_path: Path, env: dict[str, str]) -> None:
    d = tmp_path / "lib"
    d.mkdir()
    (d / "a.so").write_text("")
    (tmp_path / "one").write_text("1")
    (tmp_path / "two").write_text("22")
    link = tmp_path / "current"
    link.symlink_to("one")
    env = {**env, "OMP_NUM_THREADS": "4"}

    def read(rec: Recorder) -> list:
        return [rec.listdir(d), rec.link(link), rec.env("OMP_NUM_THREADS")]

    c = Counter(read)
    assert memo("t", "k", c, environ=env) == [["a.so"], "one", "4"]
    memo("t", "k", c, environ=env)
    assert c.runs == 1
    (d / "b.so").write_text("")  # a new file in a listed directory
    assert memo("t", "k", c, environ=env)[0] == ["a.so", "b.so"] and c.runs == 2
    link.unlink()
    link.symlink_to("two")  # retargeted
    assert memo("t", "k", c, environ=env)[1] == "two" and c.runs == 3
    env["OMP_NUM_THREADS"] = "8"
    assert memo("t", "k", c, environ=env)[2] == "8" and c.runs == 4
    del env["OMP_NUM_THREADS"]
    assert memo("t", "k", c, environ=env)[2] is None and c.runs == 5
    entry = json.loads(next(Path(env["XDG_CACHE_HOME"], "envlock", "t").glob("*.json")).read_text())
    assert {w[0] for w in entry["witness"]} == {"dir", "link", "env"}


def test_whole_environment_witness(env: dict[str, str]) -> None:
    c = Counter(lambda rec: rec.environment())
    memo("t", 1, c, environ=env)
    memo("t", 1, c, environ=env)
    assert c.runs == 1
    memo("t", 1, c, environ={**env, "ANYTHING": "x"})  # a variable nobody named
    assert c.runs == 2


def test_key_namespace_and_version_separate_answers(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    c = Counter(lambda rec: c.runs)
    assert memo("t", {"a": 1}, c, environ=env) == 1
    assert memo("t", {"a": 2}, c, environ=env) == 2
    assert memo("u", {"a": 1}, c, environ=env) == 3
    assert memo("t", {"a": 1}, c, environ=env) == 1
    # envlock's version is in every key: another version never reuses this one's answers
    import envlock._version

    monkeypatch.setattr(envlock._version, "__version__", "99.0")
    cache.code_stamp.cache_clear()
    try:
        assert memo("t", {"a": 1}, c, environ=env) == 4
    finally:
        monkeypatch.undo()
        cache.code_stamp.cache_clear()


def test_uncacheable_disabled_and_damaged_entries(tmp_path: Path, env: dict[str, str]) -> None:
    def refuse(rec: Recorder) -> int:
        rec.uncacheable("reads a socket")
        return 1

    c = Counter(refuse)
    memo("t", 1, c, environ=env)
    memo("t", 1, c, environ=env)
    assert c.runs == 2 and not (tmp_path / "cache").exists()
    ok = Counter(lambda rec: 7)
    for kwargs in ({"enabled": False}, {"environ": {**env, "ENVLOCK_NO_CACHE": "1"}}):
        memo("t", 2, ok, **({"environ": env} | kwargs))  # type: ignore[arg-type]
    assert ok.runs == 2 and not (tmp_path / "cache").exists()
    memo("t", 2, ok, environ=env)
    entry = next((tmp_path / "cache/envlock/t").glob("*.json"))
    entry.write_text("{not json")
    assert memo("t", 2, ok, environ=env) == 7 and ok.runs == 4
    # a value the decoder rejects is recomputed, never returned
    assert memo("t", 2, ok, environ=env, decode=lambda v: int("x")) == 7 and ok.runs == 5
    assert not list((tmp_path / "cache/envlock/t").glob(".tmp-*"))  # the writer leaves no temporaries


def test_a_secret_never_reaches_the_cache(tmp_path: Path, env: dict[str, str]) -> None:
    token = "ghp_S3cr3tT0k3nValue"
    # a directory whose name holds a URL with credentials (the manifest's [env] redacts it)
    llp = f"{tmp_path}/https://user:{token}@host/lib"
    os.makedirs(llp)
    env = {**env, "LD_LIBRARY_PATH": llp, "HF_TOKEN": "hf_" + token}
    memo("t", 1, lambda rec: rec.env("HF_TOKEN"), environ=env)  # a secret-named variable's value
    memo("t", 2, lambda rec: "https://user:" + token + "@example.org/simple", environ=env)
    memo("t", 3, lambda rec: rec.listdir(llp), environ=env)  # a witness path holding the token
    memo("t", 4, lambda rec: [rec.env("HF_TOKEN") is not None, rec.env("LD_LIBRARY_PATH") is not None],
         environ=env)  # the values only hashed: kept
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1
    for f in files:
        assert token not in f.read_text()


def test_size_bound_evicts_least_recently_used(env: dict[str, str]) -> None:
    env = {**env, "ENVLOCK_CACHE_MAX_MB": str(20_000 / 1024 / 1024)}  # about 20 kB
    for i in range(40):
        memo("big", i, lambda rec: "x" * 1000, environ=env)
        if i == 0:
            first = cache.entry_path("big", 0, env)
        os.utime(first)  # entry 0 is used all the time: kept
    directory = Path(cache.cache_dir("big", env))
    total = sum(p.stat().st_size for p in directory.glob("*.json"))
    assert total <= 20_000
    assert Path(first).exists()
    assert Path(cache.entry_path("big", 39, env)).exists()
    assert not Path(cache.entry_path("big", 1, env)).exists()


def test_nested_answers_inherit_inputs(tmp_path: Path, env: dict[str, str]) -> None:
    f = tmp_path / "inner-input"
    f.write_text("a")
    inner = Counter(lambda rec: (rec.file(f), f.read_text())[1])
    outer = Counter(lambda rec: "outer(" + memo("inner", 1, inner, environ=env) + ")")
    assert memo("outer", 1, outer, environ=env) == "outer(a)"
    assert memo("outer", 1, outer, environ=env) == "outer(a)" and outer.runs == 1
    f.write_text("bb")  # the inner answer's input changes: the outer answer is stale too
    assert memo("outer", 1, outer, environ=env) == "outer(bb)" and outer.runs == 2
    assert inner.runs == 2
    # an inner computation that cannot be cached makes the outer one uncacheable
    refusing = Counter(lambda rec: (rec.uncacheable("no"), "r")[1])
    outer2 = Counter(lambda rec: memo("inner2", 1, refusing, environ=env))
    memo("outer2", 1, outer2, environ=env)
    memo("outer2", 1, outer2, environ=env)
    assert outer2.runs == 2


def test_entry_at_a_time_wrappers(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The older interface (kept until every caller is on memo) shares format, writer and rules."""
    lib = tmp_path / "lib"
    lib.mkdir()
    f = lib / "libx.so"
    f.write_bytes(b"one")
    entry = cache.entry_path("test", {"q": 1}, env)
    assert entry.startswith(str(tmp_path / "cache" / "envlock" / "test"))
    assert cache.load(entry) is None
    cache.store(entry, [str(f), str(lib), str(lib / "missing.so")], {"answer": [1, 2]})
    assert cache.load(entry) == {"answer": [1, 2]}
    (lib / "missing.so").write_bytes(b"")
    assert cache.load(entry) is None
    cache.store(entry, [str(f)], "v2")
    assert cache.load(entry) == "v2"
    f.write_bytes(b"two!")
    assert cache.load(entry) is None
    assert cache.signature(str(f))[2] == 4 and len(cache.signature(str(f))) == 5
    Path(entry).write_text('{"witness": 3, "value": 1}')
    assert cache.load(entry) is None
    (tmp_path / "blocker").write_text("")
    cache.store(str(tmp_path / "blocker" / "e.json"), [], 1)  # cannot create: ignored
    monkeypatch.setenv("ENVLOCK_NO_CACHE", "1")
    cache.store(entry, [], "v3")
    assert cache.load(entry) is None


# -- the interpreter query -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)],  # type: ignore[attr-defined]
                   check=True, capture_output=True, timeout=120)
    return venv


def _query(python: Path, env: dict[str, str]):
    from envlock.probes.target import query_interpreter_cached, resolve_target

    return query_interpreter_cached(resolve_target(python=str(python)), environ=env)


def test_query_key_holds_the_variables_that_change_sys_path(tiny_venv: Path, tmp_path: Path,
                                                             env: dict[str, str]) -> None:
    base = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_"))}, **env}
    python = tiny_venv / "bin" / "python"
    extra = tmp_path / "extra"
    extra.mkdir()
    first = _query(python, base)
    assert first.status == "ok" and str(extra) not in first.path
    assert list((tmp_path / "cache/envlock/python-query").glob("*.json"))
    assert _query(python, {**base, "PYTHONPATH": str(extra)}).path[0] == str(extra)
    assert _query(python, base) == first
    # Another standard library: a home of its own whose lib/pythonX.Y is this one's (a base prefix
    # that is the interpreter's own, /usr for Debian's python3, would change nothing).
    other = tmp_path / "home"
    (other / "lib").mkdir(parents=True)
    stdlib = sysconfig.get_paths()["stdlib"]
    (other / "lib" / os.path.basename(stdlib)).symlink_to(stdlib)
    home = _query(python, {**base, "PYTHONHOME": str(other)})
    assert home.status == "ok", home.error
    assert home.base_prefix == str(other) != first.base_prefix
    assert _query(python, base) == first


def test_query_of_a_wrapper_script_is_not_cached(tiny_venv: Path, tmp_path: Path, env: dict[str, str]) -> None:
    shim = tmp_path / "shim" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{tiny_venv}/bin/python" "$@"\n')
    shim.chmod(0o755)
    base = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_"))}, **env}
    assert _query(shim, base).status == "ok"
    assert not (tmp_path / "cache" / "envlock" / "python-query").exists()


def test_query_witnesses_the_loaded_libpython(tiny_venv: Path, env: dict[str, str], tmp_path: Path) -> None:
    """The mapped objects (the interpreter, libpython where it is shared, libc) are inputs."""
    base = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_"))}, **env}
    _query(tiny_venv / "bin" / "python", base)
    entry = json.loads(next((tmp_path / "cache/envlock/python-query").glob("*.json")).read_text())
    files = {w[1] for w in entry["witness"] if w[0] == "file"}
    assert any(os.path.basename(p).startswith("libc.so") for p in files)
    ldd = subprocess.run(["ldd", os.path.realpath(tiny_venv / "bin" / "python")], capture_output=True,
                         text=True, timeout=30).stdout
    for line in ldd.splitlines():
        if "libpython" in line and "=>" in line:
            assert os.path.realpath(line.split("=>")[1].split()[0]) in files
    assert "/etc/ld.so.cache" in files


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_tool_version_cache_is_keyed_on_the_loader_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock._run import RunResult
    from envlock.probes.toolchain import _version_output

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []

    def call(*args: str) -> RunResult:
        calls.append(args)
        return RunResult(argv=("gcc", *args), status="ok", returncode=0, stdout=f"gcc {len(calls)}\n",
                         stderr="")

    gcc = shutil.which("gcc") or "gcc"
    assert _version_output("gcc", gcc, call, cache=True, env={}) == "gcc 1\n"
    assert _version_output("gcc", gcc, call, cache=True, env={}) == "gcc 1\n"
    assert _version_output("gcc", gcc, call, cache=True, env={"LD_LIBRARY_PATH": str(tmp_path)}) == "gcc 2\n"
    assert _version_output("clang", gcc, call, cache=True, env={}) == "gcc 3\n"  # never cached
    assert _version_output("clang", gcc, call, cache=True, env={}) == "gcc 4\n"


def test_snapshot_and_libs_leave_no_secret_in_their_caches(tiny_venv: Path, tmp_path: Path) -> None:
    """An ``LD_LIBRARY_PATH`` directory whose name holds a credential, and secret-named
    variables: the commands run, and no cache file holds any of it."""
    from click.testing import CliRunner

    from envlock.cli import cli

    secret_dir = f"{tmp_path}/srv/https://u:ld15SECRET@h/lib"
    os.makedirs(secret_dir)
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("PYTHON", "LD_", "ENVLOCK_"))}
    env.update({"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "LD_LIBRARY_PATH": f"/opt/x/lib:{secret_dir}", "HF_TOKEN": "hf_n1SECRETvalue",
                "PIP_INDEX_URL": "https://alice:pw1SECRET@pypi.example.org/simple"})
    python = str(tiny_venv / "bin" / "python")
    runner = CliRunner()
    for args in (["snapshot", "--python", python, "-o", str(tmp_path / "m.toml"), "-q"],
                 ["libs", "--python", python, "--format", "json"]):
        result = runner.invoke(cli, args, env=env)
        assert result.exit_code in (0, 1), result.output
    env["LD_LIBRARY_PATH"] = "/opt/x/lib"  # without the secret directory the caches fill
    assert runner.invoke(cli, ["libs", "--python", python, "--format", "json"], env=env).exit_code in (0, 1)
    files = [f for f in (tmp_path / "cache").rglob("*") if f.is_file()]
    assert any("libs-answers" in str(f) for f in files)
    for f in files:
        text = f.read_bytes().decode("utf-8", "replace")
        for secret in ("ld15SECRET", "n1SECRET", "pw1SECRET"):
            assert secret not in text, f


def test_libs_answer_follows_a_new_python3_earlier_on_path(tiny_venv: Path, tmp_path: Path) -> None:
    """``envlock libs`` without ``--python`` takes the first ``python3`` on ``PATH``: one that
    appears in an earlier directory changes the answer, cached or not."""
    from click.testing import CliRunner

    from envlock.cli import cli

    other = tmp_path / "other"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(other)],  # type: ignore[attr-defined]
                   check=True, capture_output=True, timeout=120)
    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    late.mkdir()
    (late / "python3").symlink_to(tiny_venv / "bin" / "python")
    env: dict[str, str | None] = {k: None for k in os.environ
                                  if k.startswith(("PYTHON", "LD_", "ENVLOCK_", "CONDA_", "VIRTUAL_ENV"))}
    env.update({"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "PATH": f"{early}:{late}:/usr/bin:/bin"})
    runner = CliRunner()

    def both() -> str:
        cached = runner.invoke(cli, ["libs", "--format", "json"], env=env)
        fresh = runner.invoke(cli, ["libs", "--format", "json", "--no-cache"], env=env)
        assert cached.output == fresh.output
        return fresh.output

    first = both()
    assert both() == first
    (early / "python3").symlink_to(other / "bin" / "python")
    assert both() != first


def test_libraries_table_is_looked_up_once_on_a_miss(tiny_venv: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold snapshot reads the ``[libraries]`` entry once, then computes it (no second
    lookup inside the loader model); a warm one reads it once and computes nothing."""
    import envlock
    from envlock.libs import analysis

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    reads: list[str] = []
    computed: list[int] = []
    real_read, real_probe = cache._read, analysis.probe_libraries
    monkeypatch.setattr(cache, "_read", lambda path, environ: (reads.append(path), real_read(path, environ))[1])
    monkeypatch.setattr(analysis, "probe_libraries",
                        lambda **kw: (computed.append(1), real_probe(**kw))[1])
    for expected_computed in (1, 1):
        reads.clear()
        envlock.snapshot(python=str(tiny_venv / "bin" / "python"), stack=False)
        assert sum("/snapshot-libs/" in p for p in reads) == 1
        assert len(computed) == expected_computed


def _trees() -> list:
    """JSON-like trees around every secret of the corpus: alone, inside big texts, beside many
    clean strings, under secret and clean variable names, with undecodable bytes, tuples."""
    from tests.probes.test_secrets_corpus import CORPUS, SECRET_NAMES

    clean = [f"/opt/venv/lib/python3.11/site-packages/pkg{i}/lib/libx.so.{i}" for i in range(300)]
    trees: list = [None, 1, 2.5, True, "", "plain", [], {}, clean, {"a": clean, "b": [clean, {"c": 3}]},
                   "a\nb:c@d", "x:y\n@z", "line one\nkey\n", "https\n://h/x", {"PATH": "/usr/bin"},
                   {"path": "TOKEN"}, {"HOME": "<redacted>"}, {"HF_TOKEN": "<redacted>"},
                   {"MY_SESSION": "v"}, {"Session": "v"}, {"GITHUB_PAT": "v"}, {"PATH_X": "v"},
                   {1: "x", None: ["y"]}, ("tuple",), ["a", ("b",)], "bad \udcff byte", ["ok", "\udce9"],
                   "K\u212aelvin token", "to\u212aen=abc --to\u212aen=abc", "caf\u00e9 ?x=1"]
    for text, _secrets, kept in CORPUS:
        big = "\n".join([*clean[:50], text, *clean[50:]])
        trees += [text, kept, [*clean, text], {"k": [clean, {"v": text}]}, big, big.replace("\n", " "),
                  {"stdout": big, "exit": 0}, f"x{text}x", text.replace(" ", "\n"),
                  ["x=1", "key", text, "y=2", "?"], {"a": "k=v", "b": [text, "auth"], "c": "p=q"}]
    for name, value in SECRET_NAMES.items():
        trees += [{name: value}, {name.lower(): value}, {name: [value]}, {"env": {name: value, "PATH": "/bin"}}]
    return trees


def test_secret_check_is_redact_tree_exactly() -> None:
    """The cache's fast check finds exactly what comparing with ``redact_tree`` finds."""
    from envlock.redact import redact_tree

    trees = _trees()
    verdicts = [cache._redaction_changes(t) for t in trees]
    assert verdicts == [redact_tree(t) != t for t in trees]
    assert sum(verdicts) > len(trees) // 3 and not all(verdicts)  # both kinds are exercised


def test_every_corpus_secret_is_refused_by_the_writer(tmp_path: Path, env: dict[str, str]) -> None:
    from tests.probes.test_secrets_corpus import CORPUS

    clean = [f"/site-packages/pkg{i}/libx.so" for i in range(200)]
    for i, (text, _secrets, _kept) in enumerate(CORPUS):
        path = str(tmp_path / f"e{i}.json")
        assert not cache._write(path, [], {"stdout": "\n".join([*clean, text]), "exit": 0}, env)
        assert not os.path.exists(path)
    assert cache._write(str(tmp_path / "ok.json"), [], {"stdout": "\n".join(clean)}, env)


def test_a_thread_of_a_computation_records_for_it(tmp_path: Path, env: dict[str, str]) -> None:
    """Work handed to a thread with ``in_thread`` is recorded for the computation that started
    it (a file read there, an answer taken from the cache there); without it, nothing is."""
    import threading

    from envlock.cache import in_thread

    f = tmp_path / "read-in-thread"
    f.write_text("one")

    def compute(rec: Recorder, bind: bool) -> str:
        out: list[str] = []

        def work() -> None:
            inner = memo("inner", str(f), lambda r: (r.file(f), f.read_text())[1], environ=env)
            out.append(inner)

        t = threading.Thread(target=in_thread(work) if bind else work)
        t.start()
        t.join()
        return out[0]

    bound = Counter(lambda rec: compute(rec, True))
    assert memo("outer", 1, bound, environ=env) == "one"
    f.write_text("two!")
    assert memo("outer", 1, bound, environ=env) == "two!" and bound.runs == 2
    loose = Counter(lambda rec: compute(rec, False))
    memo("outer", 2, loose, environ=env)
    f.write_text("three")
    assert memo("outer", 2, loose, environ=env) == "two!"  # the thread's read was not recorded


def _redact_all_rules(text: str) -> str:
    """``redact_text`` as it was before its rules got literal pre-checks: every rule runs."""
    from envlock import redact as r

    if not text or not r._TRIGGER.search(text):
        return text
    text = r._userinfo_out(text)
    text = r._SPLIT_USERINFO.sub(lambda m: f"{m.group('user')}@", text)
    text = r._URL_IN_TEXT.sub(lambda m: r._url_in_text(m.group(0)), text)
    text = r._QUERY_IN_TEXT.sub(r._query_value, text)
    text = r._NETRC.sub(r._keyed, text)
    text = r._OPTION.sub(r._keyed, text)
    text = r._ASSIGN.sub(r._assign, text)
    text = r._BEARER.sub(r._keyed, text)
    return r._TOKEN_SHAPES.sub(r.REDACTED, text)


def test_redaction_pre_checks_change_nothing() -> None:
    """The redaction written to cache entries and output (``redact_text`` with its cheap
    pre-checks) gives what running every rule gives, on the secrets corpus, case and Unicode
    variants of it, and long clean texts around it."""
    from envlock.redact import redact_text
    from tests.probes.test_secrets_corpus import CORPUS, SECRET_NAMES

    texts = [t for t, _s, _k in CORPUS] + [f"{k}={v} run" for k, v in SECRET_NAMES.items()]
    texts += ["PASSWORD s3cr3t", "Password s3cr3t", "pa\u017f\u017fword s3cr3t", "--API-KEY=abc x",
              "--\u212aey=abc", "-x --auth tok", "bearer abcdefghijk", "BEARER abcdefghijk",
              "Authorization: Basic dXNlcjpwYXNz", "ghp_" + "a" * 30, "xoxb-1234567890a", "AKIA" + "A" * 16,
              "sk-" + "a" * 40, "u:p@h/x", "/u:pw1234@host/lib", "a=b", "?a=b&token=c", "https://h/t/tok/x",
              "caf\u00e9 https://u:p@h/x", "ACCOUNT me", "key", "=", "-", "://"]
    clean = "\n".join(f"  libx{i}.so.{i} => /opt/venv/lib/libx{i}.so.{i} (rpath)" for i in range(400))
    texts += [f"{clean}\n{t}\n{clean}" for t in texts] + [clean, clean.upper()]
    for t in texts:
        assert redact_text(t) == _redact_all_rules(t), t[:80]


def test_trigger_positions_find_exactly_the_lines_the_trigger_matches() -> None:
    import bisect

    from envlock.redact import _TRIGGER
    from tests.probes.test_secrets_corpus import CORPUS

    lines = [t for t, _s, _k in CORPUS] + ["plain /usr/lib/libc.so.6", "x:y@z", "x:y z@w", "ghp_x", "ghq_x",
                                          "PASS", "KeY", "Authorization", "a?b", "a&b", "c=d", "sk-", "AKIA",
                                          "glpat-", "xox", "hf_", "github_pat_", "://", ":@", "::@", ":a/b@",
                                          "\u2502 \u251c\u2500 lib => /x", "caf\u00e9 t\u00d6ken", "\u00c9 key"]
    lines = [ln for t in lines for ln in t.split("\n")]
    text = "\n".join(lines)
    starts = []
    pos = 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    got = {bisect.bisect_right(starts, h) - 1 for h in cache._trigger_hits(text)}
    assert got == {i for i, ln in enumerate(lines) if _TRIGGER.search(ln)}
    assert 0 < len(got) < len(lines)


def test_case_special_characters_are_those_of_this_python() -> None:
    """The characters outside ASCII that ``(?i)`` matches to an ASCII letter, and those whose
    lower case is not one character or is ASCII, are exactly ``redact._CASE_SPECIAL``."""
    import re

    from envlock.redact import _CASE_SPECIAL

    every = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    matched = {m.group(0) for m in re.finditer(r"(?i)[a-z]", every)}
    odd = {c for c in every if len(c.lower()) != 1 or c.lower().isascii()}
    assert matched | odd == set(_CASE_SPECIAL)


_FIFO_CHILD = r'''
import json, os, sys
from envlock import cache
cache.RACY_NS = 0
env = {"XDG_CACHE_HOME": sys.argv[1], "HOME": sys.argv[1]}
path = cache.entry_path("t", "fifo", env)
os.makedirs(os.path.dirname(path), exist_ok=True)
os.mkfifo(path)
runs = []
first = cache.memo("t", "fifo", lambda rec: runs.append(1) or 41, environ=env)
regular = os.path.isfile(path) and not os.path.islink(path)
second = cache.memo("t", "fifo", lambda rec: runs.append(1) or 42, environ=env)
os.unlink(path)
os.mkfifo(path)
os.environ.update(env)
old = cache.load(path)
print(json.dumps([first, second, len(runs), regular, old]))
'''


def test_a_fifo_where_an_entry_would_be_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    """A FIFO planted at an entry's path (nobody writes to it): ``memo`` computes the answer at
    once and replaces the FIFO by a real entry, which the next call finds; ``load`` of a FIFO is
    ``None``.  In a child process with a deadline: a plain ``open()`` would wait for ever."""
    env = {k: v for k, v in os.environ.items() if k != "ENVLOCK_NO_CACHE"}
    r = subprocess.run([sys.executable, "-c", _FIFO_CHILD, str(tmp_path / "cache")], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [41, 41, 1, True, None]


def test_snapshot_with_fifos_for_every_cache_entry(tiny_venv: Path, tmp_path: Path) -> None:
    """``envlock snapshot`` fills its caches; each entry is then replaced by a FIFO; a second
    snapshot finishes within its deadline and writes the same tables as the first."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
        import tomli as tomllib

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ENVLOCK_"))}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))

    def snap(out: str) -> dict:
        r = subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                            str(tiny_venv / "bin" / "python"), "-o", str(tmp_path / out), "-q"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1), r.stderr
        doc = tomllib.loads((tmp_path / out).read_text())
        doc.pop("envlock")  # its creation time
        return doc

    first = snap("a.toml")
    entries = [p for p in (tmp_path / "cache").rglob("*.json") if p.is_file()]
    assert entries
    for p in entries:
        p.unlink()
        os.mkfifo(p)
    assert snap("b.toml") == first
