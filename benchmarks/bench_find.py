"""``envlock find`` at scale: 100,000 manifests (issue 28's acceptance).

The manifests are generated from a real one — ``envlock snapshot`` of the interpreter running
this script (or ``--from FILE``) — with varied facts: host and time per file; numpy, torch and
scipy versions; a ``[gpu]`` table of one of five compute-capability sets and two drivers; a
``[frameworks]`` torch build; ``OMP_NUM_THREADS``; a ``[process]`` table (TF32, determinism,
``CUBLAS_WORKSPACE_CONFIG``) on a third of them.  Measured, each in this one run:

* cold index (an empty index, every file read), with the peak RSS of the indexing processes;
* re-index after 1 % of the files changed (rewritten with another numpy version);
* warm queries (the index as it is, ``update=False``; median of 5): in this process, the
  first 50 matches (the text table) and every match built (``--format json``), and the whole
  command ``envlock find --no-update`` from cached bytecode (start-up included); then a
  full ``find`` including the rescan of the unchanged tree;
* per-file cost of reading one manifest, single core: diff's plain reading (``formats.read`` +
  shape check + ``extract``) and find's, whose sections the other files share
  (:mod:`envlock.find.sections`).

Targets (issue 28): cold ≤ 60 s, re-index ≤ 5 s, warm query ≤ 200 ms, memory bounded.

    python benchmarks/bench_find.py            # 100,000 manifests (minutes; ~1.3 GB of files)
    python benchmarks/bench_find.py -n 10000   # a smaller run
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import bench_env, envlock_argv, time_command

QUERIES = ["torch < 1.12", "numpy >= 2 and gpu.arch >= sm_80", "torch.tf32.matmul == true",
           "CUBLAS_WORKSPACE_CONFIG unset", "host == n0004217", "gpu.driver < 550 or not numpy ~= 1.26"]


def _base(path: str | None, tmp: Path) -> str:
    if path:
        return Path(path).read_text()
    out = tmp / "base.toml"
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python", sys.executable, "-o",
                    str(out), "-q"], check=True, timeout=300)
    return out.read_text()


def _variant(base: str, i: int, numpy_shift: int = 0) -> str:
    import tomllib

    from envlock.manifest import _toml

    d = tomllib.loads(base)
    d["envlock"]["host"] = f"n{i:07d}"
    d["envlock"]["created"] = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
    pkgs = {p["name"].lower(): p for p in d["pip"]["packages"]}
    for name, versions in (("numpy", ["1.24.4", "1.26.4", "2.0.1", "2.4.1"]),
                           ("torch", ["1.10.2", "1.13.1", "2.13.0+cpu", "2.14.1"]),
                           ("scipy", ["1.10.1", "1.17.0"])):
        v = versions[(i // (7 if name == "torch" else 3) + (numpy_shift if name == "numpy" else 0))
                     % len(versions)]
        if name in pkgs:
            pkgs[name]["version"] = v
        else:
            d["pip"]["packages"].append({"name": name, "version": v})
    cc = [["7.5"], ["8.0"] * 4, ["8.6"], ["9.0"] * 8, ["8.0", "8.6"]][i % 5]
    d["gpu"] = {"status": "ok", "source": "nvidia-smi", "vendor": "nvidia",
                "driver-version": "535.104.05" if i % 11 == 0 else "550.54.14",
                "cuda-driver-version": "12.4",
                "gpus": [{"index": k, "name": "NVIDIA GPU", "compute-capability": c}
                         for k, c in enumerate(cc)]}
    d["frameworks"] = {"status": "ok", "source": "dist-info",
                       "packages": [{"name": "torch", "version": "2", "build": "cuda" if i % 2 else "cpu"}]}
    d.setdefault("env", {"status": "ok", "source": "allow-list"}).setdefault("vars", {})[
        "OMP_NUM_THREADS"] = str([1, 4, 8][i % 3])
    if i % 3 == 0:
        d["process"] = {"schema": 1, "created": d["envlock"]["created"], "torch": {
            "allow-tf32-matmul": i % 2 == 0, "allow-tf32-cudnn": True,
            "deterministic-algorithms": i % 4 == 0, "cudnn-benchmark": i % 5 == 0}}
        if i % 9 == 0:
            d["process"]["cublas-workspace-config"] = ":4096:8"
    return _toml.dumps(d)


def _generate(base: str, root: Path, n: int) -> float:
    t0 = time.perf_counter()
    # one variant per (versions, gpu, process) combination, then host/time substituted: the
    # files differ as real results differ, and writing 100,000 takes seconds, not minutes
    templates = {}
    for i in range(n):
        key = i % 2520  # lcm of the variation periods (7·3·4, 5, 11 … within 2520 ≈ all mixes)
        if key not in templates:
            templates[key] = _variant(base, key)
        text = templates[key].replace(f'"n{key:07d}"', f'"n{i:07d}"')
        d = root / f"{i // 1000:03d}" / f"r{i:06d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "manifest.toml").write_text(text)
    return time.perf_counter() - t0


def _child_peak() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def _per_file(path: Path, reps: int = 200, *, plain: bool = False) -> float:
    from envlock.find.entry import read_result

    read_result(str(path), None, plain=plain)
    t0 = time.perf_counter()
    for _ in range(reps):
        read_result(str(path), None, plain=plain)
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--from", dest="base", default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    from envlock.find import find
    from envlock.find.index import Index

    tmp = Path(tempfile.mkdtemp(prefix="bench-find-"))
    try:
        base = _base(args.base, tmp)
        root = tmp / "results"
        gen = _generate(base, root, args.n)
        size = sum(f.stat().st_size for f in root.rglob("*.toml"))
        print(f"generated {args.n} manifests ({size / 2**20:.0f} MiB) in {gen:.1f} s")
        first = next(root.rglob("manifest.toml"))
        print(f"reading one manifest, single core: diff's plain reading {_per_file(first, plain=True) * 1e3:.2f} ms, "
              f"find's with its sections shared {_per_file(first) * 1e3:.2f} ms")
        cpus = len(os.sched_getaffinity(0))
        idx = str(tmp / "index.sqlite")
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        time.sleep(0.05)
        with Index(idx) as ix:
            t0 = time.perf_counter()
            rep = ix.update([str(root)], jobs=args.jobs)
            cold = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"cold index: {cold:.1f} s for {rep.read} files on {cpus} CPUs "
              f"({cold / max(rep.read, 1) * 1e3:.2f} ms/file wall; target ≤ 60 s for 100,000); "
              f"peak RSS: main {rss / 2**20:.0f} MiB (before {rss0 / 2**20:.0f} MiB), "
              f"a reader process {_child_peak() / 2**20:.0f} MiB; index {os.path.getsize(idx) / 2**20:.0f} MiB")
        changed = sorted(root.rglob("manifest.toml"))[:: 100]
        for j, p in enumerate(changed):
            p.write_text(_variant(base, j, numpy_shift=1).replace(f'"n{j:07d}"', f'"c{j:07d}"'))
        time.sleep(0.05)
        with Index(idx) as ix:
            t0 = time.perf_counter()
            rep = ix.update([str(root)], jobs=args.jobs)
            re_index = time.perf_counter() - t0
        print(f"re-index after 1 % changed: {re_index:.2f} s ({rep.read} read, {rep.unchanged} "
              f"unchanged; target ≤ 5 s)")
        for q in QUERIES:
            times, every = [], []
            for _ in range(5):
                t0 = time.perf_counter()
                ans = find([root], q, index=idx, update=False, limit=50)  # the text table's rows
                times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                find([root], q, index=idx, update=False)  # every match built (--format json)
                every.append(time.perf_counter() - t0)
            cli = time_command([*envlock_argv(), "find", "--no-update", "--index", idx, str(root), q],
                               runs=5, env=bench_env())
            print(f"warm query {q!r}: {statistics.median(times) * 1e3:.0f} ms median, every match "
                  f"built {statistics.median(every) * 1e3:.0f} ms ({ans.count} of {ans.searched} match; "
                  f"target ≤ 200 ms); the command `envlock find --no-update` (its table of 50) "
                  f"{(cli or float('nan')) * 1e3:.0f} ms")
        t0 = time.perf_counter()
        ans = find([root], QUERIES[0], index=idx, update=True, limit=50)
        print(f"find with rescan of the unchanged tree: {(time.perf_counter() - t0) * 1e3:.0f} ms "
              f"({ans.count} match)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")


if __name__ == "__main__":
    main()
