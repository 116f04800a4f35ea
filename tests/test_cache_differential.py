"""The cache's rule, tested differentially: a cache may make envlock faster, never different.

A small world — a venv made with ``python -m venv --without-pip``, a ``torch`` package whose
extension and libraries are tiny ELF files built with gcc (``_C`` → ``libtorch_cuda.so`` →
``libcudnn.so.9`` through RUNPATHs), a dist-info for it — is observed by ``snapshot``,
``libs``, ``verify`` and ``diff``.  Then one input changes at a time: each environment
variable of the keys (``LD_LIBRARY_PATH``, ``LD_PRELOAD``, ``PYTHONPATH``, ``PYTHONHOME``,
``PYTHONNOUSERSITE``, ``PYTHONSAFEPATH``, ``PYTHONPLATLIBDIR``, ``PYTHONUSERBASE``, ``HOME``),
a file's content, a new file earlier on a search path, a symlink retargeted, a ``.pth``
file.  After each change every command runs with its caches (warm from the previous step)
and with ``--no-cache`` / ``ENVLOCK_NO_CACHE=1``; the outputs must be identical.  The changes
are chosen so that most of them change the answer — a stale cache would show.

``test_ld_library_path_selecting_another_libpython`` is the issue's case: an interpreter
linked against a libpython (RUNPATH) that ``LD_LIBRARY_PATH`` replaces with another build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock import cache
from envlock.cli import cli

GCC = shutil.which("gcc")
pytestmark = pytest.mark.skipif(GCC is None, reason="gcc builds the world's ELF files")

PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"
EXT = f"cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so"


def _cc(out: Path, *, soname: str | None = None, needed: tuple[Path, ...] = (), runpath: str | None = None,
        code: str = "int f(void) { return 1; }") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.name.replace(".", "_") + ".c")
    src.write_text(textwrap.dedent(code))
    argv = [GCC or "gcc", "-shared", "-fPIC", "-o", str(out), str(src)]
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    if runpath:
        argv += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    argv += ["-Wl,--no-as-needed", *map(str, needed)]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return out


class World:
    """The world and the commands that observe it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root / "venv"
        subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(self.venv)],  # type: ignore[attr-defined]
                       check=True, capture_output=True, timeout=120)
        self.python = self.venv / "bin" / "python"
        self.site = self.venv / "lib" / PY / "site-packages"
        cudnn_dir = self.site / "nvidia" / "cudnn" / "lib"
        self.cudnn_real = _cc(cudnn_dir / "libcudnn.so.9.1.0", soname="libcudnn.so.9")
        (cudnn_dir / "libcudnn.so.9").symlink_to("libcudnn.so.9.1.0")
        self.torch_cuda = self.site / "torch" / "lib" / "libtorch_cuda.so"
        self.build_torch_cuda()
        _cc(self.site / "torch" / f"_C.{EXT}", needed=(self.torch_cuda,), runpath="$ORIGIN/lib")
        (self.site / "torch" / "__init__.py").write_text("")
        info = self.site / "torch-2.0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.0.0\n")
        (info / "INSTALLER").write_text("pip\n")
        record = [f"{p.relative_to(self.site)},," for p in (self.site / "torch").rglob("*") if p.is_file()]
        (info / "RECORD").write_text("\n".join([*record, "torch-2.0.0.dist-info/RECORD,,"]) + "\n")
        self.cache = root / "cache"
        self.home = root / "home"
        self.home.mkdir()
        self.work = root / "work"
        self.work.mkdir()
        self.env: dict[str, str] = {"HOME": str(self.home), "XDG_CACHE_HOME": str(self.cache),
                                    "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.manifest0: Path | None = None

    def build_torch_cuda(self, *, code: str = "int f(void) { return 1; }", extra: tuple[Path, ...] = ()) -> None:
        cudnn = self.site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
        _cc(self.torch_cuda, soname="libtorch_cuda.so", needed=(cudnn, *extra),
            runpath="$ORIGIN/../../nvidia/cudnn/lib", code=code)

    # -- the commands ------------------------------------------------------------------------
    def _invoke(self, args: list[str], cached: bool) -> tuple[int, str]:
        env = {k: None for k in os.environ if k.startswith(("LD_", "PYTHON", "ENVLOCK_"))}
        env.update(self.env)  # type: ignore[arg-type]
        if not cached:
            env["ENVLOCK_NO_CACHE"] = "1"
        result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
        return result.exit_code, result.output

    def snapshot(self, cached: bool) -> str:
        out = self.root / f"m-{'c' if cached else 'n'}.json"
        code, text = self._invoke(["snapshot", "--python", str(self.python), "--repo", str(self.work),
                                   "-o", str(out), "--force", "-q"], cached)
        assert code == 0, text
        doc = json.loads(out.read_text())
        for volatile in ("created", "duration", "command"):
            doc["envlock"].pop(volatile, None)
        return json.dumps(doc, indent=1, sort_keys=True)

    def libs(self, cached: bool) -> str:
        args = ["libs", "torch", "--python", str(self.python), "--format", "json"]
        code, text = self._invoke(args if cached else [*args, "--no-cache"], cached)
        return f"exit {code}\n{text}"

    def verify(self, cached: bool) -> str:
        assert self.manifest0 is not None
        code, text = self._invoke(["verify", "--python", str(self.python), "--manifest", str(self.manifest0),
                                   "--format", "json"], cached)
        doc = json.loads(text)
        return f"exit {code}\n" + json.dumps(_drop_timing(doc), indent=1, sort_keys=True)

    def diff(self, cached: bool) -> str:
        """``diff`` of the first manifest and the one :meth:`snapshot` just wrote."""
        assert self.manifest0 is not None
        now = self.root / f"m-{'c' if cached else 'n'}.json"
        code, text = self._invoke(["diff", str(self.manifest0), str(now)], cached)
        return f"exit {code}\n" + re.sub(r"m-[cn]\.json", "m.json", text)

    def all_agree(self, step: str) -> dict[str, str]:
        """Run every command cached and uncached; assert the outputs are identical."""
        outputs = {}
        for name in ("snapshot", "libs", "verify", "diff"):
            command: Callable[[bool], str] = getattr(self, name)
            cached = command(True)
            fresh = command(False)
            assert cached == fresh, f"{name} after {step}: the cached output differs from --no-cache"
            outputs[name] = fresh
        return outputs


def _drop_timing(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_timing(v) for k, v in value.items()
                if k not in ("elapsed", "duration", "seconds", "took", "elapsed_s", "created")}
    if isinstance(value, list):
        return [_drop_timing(v) for v in value]
    return value


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = World(tmp_path_factory.mktemp("world"))
    m0 = w.root / "m0.json"
    w.env["ENVLOCK_NO_CACHE"] = "1"
    code, text = w._invoke(["snapshot", "--python", str(w.python), "--repo", str(w.work), "-o", str(m0), "-q"],
                           False)
    del w.env["ENVLOCK_NO_CACHE"]
    assert code == 0, text
    w.manifest0 = m0
    cwd = os.getcwd()
    os.chdir(w.work)
    try:
        yield w
    finally:
        os.chdir(cwd)


def test_cached_and_uncached_outputs_agree_as_inputs_change(world: World) -> None:
    w = world
    base = w.all_agree("the first run")
    assert w.all_agree("nothing") == base  # warm: the same
    assert list((w.cache / "envlock").glob("*/*.json")), "the caches were not filled"
    changed: set[str] = set()

    last = base

    def step(name: str, change: Callable[[], None]) -> None:
        nonlocal last
        change()
        # An input younger than RACY_NS vouches for no answer: the cached snapshot would then
        # omit [libraries.answer] and the fresh one, a moment later, record it.
        time.sleep(2 * cache.RACY_NS / 1e9)
        after = w.all_agree(name)
        changed.update(k for k in after if after[k] != last[k])
        last = after

    # -- environment variables of the keys, one at a time ---------------------------------
    llp = w.root / "llp"
    llp.mkdir()
    step("LD_LIBRARY_PATH set (an empty directory)", lambda: w.env.update(LD_LIBRARY_PATH=str(llp)))
    # A new file earlier on a search path: the cuDNN of a "cluster module".
    step("a new libcudnn.so.9 in an LD_LIBRARY_PATH directory",
         lambda: _cc(llp / "libcudnn.so.9", soname="libcudnn.so.9"))
    step("LD_LIBRARY_PATH unset", lambda: w.env.pop("LD_LIBRARY_PATH"))
    pre = _cc(w.root / "pre" / "libpre.so", soname="libpre.so")
    step("LD_PRELOAD", lambda: w.env.update(LD_PRELOAD=str(pre)))
    step("LD_PRELOAD unset", lambda: w.env.pop("LD_PRELOAD"))
    extra = w.root / "extra"
    (extra / "extra_pkg").mkdir(parents=True)
    (extra / "extra_pkg" / "__init__.py").write_text("")
    step("PYTHONPATH", lambda: w.env.update(PYTHONPATH=str(extra)))
    step("PYTHONSAFEPATH", lambda: w.env.update(PYTHONSAFEPATH="1"))
    userbase = w.root / "userbase"
    (userbase / "lib" / PY / "site-packages").mkdir(parents=True)
    step("PYTHONUSERBASE (with a user site)", lambda: w.env.update(PYTHONUSERBASE=str(userbase)))
    step("PYTHONNOUSERSITE", lambda: w.env.update(PYTHONNOUSERSITE="1"))
    step("PYTHONPLATLIBDIR (no such stdlib: the query fails)", lambda: w.env.update(PYTHONPLATLIBDIR="lib64"))
    step("PYTHONPLATLIBDIR unset", lambda: w.env.pop("PYTHONPLATLIBDIR"))
    step("PYTHONHOME (another standard library)", lambda: w.env.update(PYTHONHOME="/usr"))
    for name in ("PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONSAFEPATH",
                 "PYTHONPATH"):
        w.env.pop(name)
    # HOME: the user site directory moves with it (PEP 370).
    home2 = w.root / "home2"
    (home2 / ".local" / "lib" / PY / "site-packages").mkdir(parents=True)
    step("HOME (with a user site)", lambda: w.env.update(HOME=str(home2)))
    # -- files ---------------------------------------------------------------------------
    meta = w.site / "torch-2.0.0.dist-info" / "METADATA"
    step("torch's METADATA edited in place (the owner's version)",
         lambda: meta.write_text(meta.read_text().replace("2.0.0", "2.0.1")))
    step("a .pth file in site-packages", lambda: (w.site / "zz-extra.pth").write_text(str(extra) + "\n"))
    dep = _cc(w.root / "dep" / "libdep.so.1", soname="libdep.so.1")
    step("libtorch_cuda.so rebuilt with a new DT_NEEDED (content)", lambda: w.build_torch_cuda(extra=(dep,)))
    cudnn_dir = w.site / "nvidia" / "cudnn" / "lib"
    other = _cc(cudnn_dir / "libcudnn.so.9.2.0", soname="libcudnn.so.9")

    def retarget() -> None:
        (cudnn_dir / "libcudnn.so.9").unlink()
        (cudnn_dir / "libcudnn.so.9").symlink_to(other.name)

    step("libcudnn.so.9 symlink retargeted", retarget)

    def same_size_same_mtime() -> None:  # rewritten in place, size and mtime restored
        st = w.torch_cuda.stat()
        w.build_torch_cuda(code="int f(void) { return 2; }", extra=(dep,))
        assert w.torch_cuda.stat().st_size == st.st_size
        os.utime(w.torch_cuda, ns=(st.st_atime_ns, st.st_mtime_ns))

    step("libtorch_cuda.so rewritten with its old size and mtime", same_size_same_mtime)
    step("libdep.so.1 appears in an LD_LIBRARY_PATH directory",
         lambda: (w.env.update(LD_LIBRARY_PATH=str(llp)), shutil.copy(dep, llp / "libdep.so.1")))
    # The changes were real: the answers did move (a cache that ignored them would be caught).
    assert {"snapshot", "libs", "verify", "diff"} <= changed


def test_ld_library_path_selecting_another_libpython(tmp_path: Path) -> None:
    """The issue's case: ``LD_LIBRARY_PATH`` selects another libpython for an interpreter
    linked against one by RUNPATH; each snapshot records what that interpreter itself says in
    its environment (``platform.python_version()``), cached or not, in either order."""
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)],  # type: ignore[attr-defined]
                   check=True, capture_output=True, timeout=120)
    python = venv / "bin" / "python"
    ldd = subprocess.run(["ldd", str(python)], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"(libpython\S+\.so\S*) => (/\S+)", ldd)
    if not m:
        pytest.skip("this interpreter is not linked against a shared libpython")
    soname, own = m.group(1), m.group(2)
    others = [d for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
              if os.path.exists(os.path.join(d, soname)) and os.path.dirname(own) != d]
    if not others:
        pytest.skip(f"no other {soname} on this machine")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON", "ENVLOCK_"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    def own_version(extra: dict[str, str]) -> str:
        return subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                              env={**env, **extra}, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    with_llp = {"LD_LIBRARY_PATH": others[0]}
    if own_version(with_llp) == own_version({}):
        pytest.skip(f"{others[0]}/{soname} is the same Python release")
    runner = CliRunner()
    out = tmp_path / "m.json"
    for extra, cached in [(with_llp, True), ({}, True), (with_llp, True), ({}, False), (with_llp, False), ({}, True)]:
        run_env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("LD_", "PYTHON"))}
        run_env.update({**env, **extra})
        if not cached:
            run_env["ENVLOCK_NO_CACHE"] = "1"
        result = runner.invoke(cli, ["snapshot", "--python", str(python), "-o", str(out), "--force", "-q"],
                               env=run_env)
        assert result.exit_code == 0, result.output
        assert json.loads(out.read_text())["python"]["version"] == own_version(extra), (extra, cached)


@pytest.mark.realenv
def test_real_torch_venv_cached_equals_uncached(cpu_venv: Path, tmp_path: Path) -> None:
    """The same on the real torch venv (read-only): as it is, with an ``LD_LIBRARY_PATH``
    directory, and after a copy of one of torch's libraries appears in that directory."""
    w = World.__new__(World)
    w.root, w.venv, w.python = tmp_path, cpu_venv, cpu_venv / "bin" / "python"
    w.cache, w.work = tmp_path / "cache", tmp_path / "work"
    w.work.mkdir()
    w.env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(w.cache), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    w.manifest0 = tmp_path / "m0.json"
    code, text = w._invoke(["snapshot", "--python", str(w.python), "--repo", str(w.work), "-o", str(w.manifest0),
                            "-q"], False)
    assert code == 0, text
    w.all_agree("the first run")
    w.all_agree("nothing")
    llp = tmp_path / "llp"
    llp.mkdir()
    w.env["LD_LIBRARY_PATH"] = str(llp)
    before = w.all_agree("LD_LIBRARY_PATH")
    gomp = sorted((cpu_venv / "lib").glob("python3*/site-packages/torch/lib/libgomp*.so*"))
    if not gomp:
        pytest.skip("no libgomp in this torch build")
    shutil.copy(gomp[0], llp / gomp[0].name)
    after = w.all_agree("a copy of torch's libgomp in LD_LIBRARY_PATH")
    assert after["libs"] != before["libs"]


def _fake_root(base: Path) -> Path:
    """A system root that is this one but for ``/etc/ld.so.cache``, the test's own: every
    top-level entry and every file of ``/etc`` a symlink to the real one."""
    root = base / "root"
    (root / "etc").mkdir(parents=True)
    for name in os.listdir("/"):
        if name != "etc":
            (root / name).symlink_to(f"/{name}")
    for name in os.listdir("/etc"):
        if name != "ld.so.cache":
            (root / "etc" / name).symlink_to(f"/etc/{name}")
    return root


def _ldconfig(cache_file: Path, dirs: list[Path], base: Path) -> None:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    conf = base / "ld.so.conf"
    conf.write_text("".join(f"{d}\n" for d in dirs))
    subprocess.run([ldconfig, "-X", "-C", str(cache_file), "-f", str(conf)], check=True,
                   capture_output=True, timeout=120)


def test_verify_reuses_the_manifests_loader_answer_only_while_every_input_is_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``verify --manifest`` takes the loader's findings from the manifest's
    ``[libraries.answer]`` instead of running the model, and only while every input it was
    computed from is unchanged.  Differentially: a snapshot records the answer, then one input
    changes; verify with its own cache empty (only the manifest can answer) must give what
    verify computes with ``ENVLOCK_NO_CACHE=1``, and must have run the model.  Unchanged, the
    manifest answers (no model run), with the same findings.  The inputs: a library touched,
    ``LD_LIBRARY_PATH`` set, a new file in one of its directories, ``LD_PRELOAD``,
    ``GLIBC_TUNABLES``, the ``ld.so.cache`` replaced (the test's own, under a system root that
    is this one otherwise), a symlink retargeted, a library rewritten with its old size and
    mtime, the working directory; and a manifest without the record (an older one)."""
    from envlock.libs import analysis
    from envlock.probes.assemble import snapshot
    from envlock.verify import verify
    from envlock.verify.checks.libraries import check_libraries

    w = World(tmp_path)
    root = _fake_root(tmp_path)
    sysdir = tmp_path / "sys"
    extra = _cc(sysdir / "libextra.so.1", soname="libextra.so.1")
    _ldconfig(root / "etc" / "ld.so.cache", [sysdir], tmp_path)
    w.build_torch_cuda(extra=(extra,))  # libextra.so.1 is found through ld.so.cache only
    runs: list[str] = []
    real_analyze = analysis.analyze_module

    def counting(*args: object, **kwargs: object) -> object:
        runs.append(str(args[1]))
        return real_analyze(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analysis, "analyze_module", counting)
    monkeypatch.chdir(w.work)
    env = {**w.env}
    m = tmp_path / "m.json"
    caches = iter(range(1000))

    def record() -> None:
        time.sleep(2 * cache.RACY_NS / 1e9)  # inputs older than RACY_NS: the answer is recorded
        man = snapshot(python=str(w.python), environ={**env, "ENVLOCK_NO_CACHE": "1"}, root=str(root),
                       repo=str(w.work), stack=False, output=m)
        assert man.libraries is not None and man.libraries.answer is not None, man.libraries
        man.write(m, force=True)

    def check(cached: bool) -> tuple[list[dict[str, object]], int]:
        e = {**env, "XDG_CACHE_HOME": str(tmp_path / f"cache-{next(caches)}")}
        if not cached:
            e["ENVLOCK_NO_CACHE"] = "1"
        runs.clear()
        report = verify(manifest=str(m), python=str(w.python), environ=e, root=str(root),
                        checks=[("libraries", check_libraries)])
        return [f.to_json() for f in report.findings], len(runs)

    def agree(step: str, *, reused: bool) -> list[dict[str, object]]:
        got, model_runs = check(True)
        fresh, fresh_runs = check(False)
        assert fresh_runs == 1
        assert got == fresh, f"after {step}: the manifest's answer differs from a fresh one"
        assert model_runs == (0 if reused else 1), f"after {step}: reused={not model_runs}"
        return fresh

    answers: list[list[dict[str, object]]] = []

    def step(name: str, change: Callable[[], None]) -> None:
        record()
        agree(f"{name} (before)", reused=True)
        change()
        answers.append(agree(name, reused=False))

    record()
    answers.append(agree("nothing", reused=True))
    def older_manifest() -> None:  # written before [libraries.answer] existed
        doc = json.loads(m.read_text())
        del doc["libraries"]["answer"]
        m.write_text(json.dumps(doc))

    step("the answer removed (an older manifest)", older_manifest)
    step("libtorch_cuda.so touched", lambda: os.utime(w.torch_cuda))
    llp = tmp_path / "llp"
    llp.mkdir()
    step("LD_LIBRARY_PATH set", lambda: (_cc(llp / "libcudnn.so.9", soname="libcudnn.so.9"),
                                         env.update(LD_LIBRARY_PATH=str(llp))))
    step("a new libextra.so.1 in the LD_LIBRARY_PATH directory",
         lambda: _cc(llp / "libextra.so.1", soname="libextra.so.1"))
    pre = _cc(tmp_path / "pre" / "libpre.so", soname="libpre.so")
    step("LD_PRELOAD set", lambda: env.update(LD_PRELOAD=str(pre)))
    step("LD_LIBRARY_PATH and LD_PRELOAD unset", lambda: (env.pop("LD_LIBRARY_PATH"), env.pop("LD_PRELOAD")))
    step("GLIBC_TUNABLES set", lambda: env.update(GLIBC_TUNABLES="glibc.cpu.hwcaps=-AVX2"))
    step("ld.so.cache replaced (without libextra's directory)",
         lambda: _ldconfig(root / "etc" / "ld.so.cache", [w.root / "pre"], tmp_path))
    cudnn_dir = w.site / "nvidia" / "cudnn" / "lib"
    other = _cc(cudnn_dir / "libcudnn.so.9.2.0", soname="libcudnn.so.9")

    def retarget() -> None:
        (cudnn_dir / "libcudnn.so.9").unlink()
        (cudnn_dir / "libcudnn.so.9").symlink_to(other.name)

    step("libcudnn.so.9 symlink retargeted", retarget)

    def same_size_same_mtime() -> None:
        st = w.torch_cuda.stat()
        w.build_torch_cuda(code="int f(void) { return 2; }", extra=(extra,))
        assert w.torch_cuda.stat().st_size == st.st_size
        os.utime(w.torch_cuda, ns=(st.st_atime_ns, st.st_mtime_ns))

    step("libtorch_cuda.so rewritten with its old size and mtime", same_size_same_mtime)
    other_cwd = tmp_path / "elsewhere"
    other_cwd.mkdir()
    step("another working directory", lambda: os.chdir(other_cwd))
    # The changes were real: the findings moved (a stale reuse would have been caught).
    assert len({json.dumps(a, sort_keys=True) for a in answers}) >= 3, answers
