"""Benchmark: the N-way ``envlock diff`` of a fleet of node manifests (issue 24, cluster scale).

The fleet is made from one real manifest (``envlock snapshot`` of the CUDA test venv, ~33 KB;
or ``--manifest FILE``): node ``nNNNN`` is that manifest with its own host, creation time and
Slurm node name and ids, as ``srun envlock snapshot -o 'runs/{job}/{node}.toml'`` writes them.
A few nodes deviate as real fleets do:

* one with another ``LD_LIBRARY_PATH`` (a module tree in front of the venv's libraries);
* one with another torch build (``+cpu`` instead of the CUDA wheel, ``[frameworks]`` too);
* one with ``OMP_NUM_THREADS`` set;
* one with an older numpy.

Each round runs, in one paired run, ``envlock diff --format json`` of the whole fleet (this
tree, and ``--a OLD`` when given) and the yardsticks: the same diff of four nodes (the fixed
cost: interpreter, imports, rendering) and a bare parse of every file of the fleet with
``rtoml`` (the floor of reading them).  Every command is a fresh child process; its peak RSS
is ``ru_maxrss`` of that child.  Printed: medians of wall time and peak RSS per fleet size,
and the ratios against the yardsticks (issue 24's targets: 4,096 nodes ≤ 2 s and ≤ 200 MB,
1,024 nodes ≤ 0.5 s).

Run: ``python benchmarks/bench_nway.py [--nodes 1024 4096] [--rounds 3] [--a OLD_TREE]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: a fresh parent per command: ``RUSAGE_CHILDREN``'s ``ru_maxrss`` is the largest of all its
#: children, so each command gets its own.
_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t0 = time.perf_counter()\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
    "dt = time.perf_counter() - t0\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(dt, u.ru_maxrss * 1024, r.returncode)\n"
    "sys.stderr.write(r.stderr[-2000:])\n"
)

_PARSE = ("import os, sys, rtoml\n"
          "d = sys.argv[1]\n"
          "for n in sorted(os.listdir(d)):\n"
          "    with open(os.path.join(d, n)) as f:\n"
          "        rtoml.load(f)\n")


def base_manifest(path: str | None) -> dict[str, Any]:
    """The real manifest the fleet is made of: ``path``, else a snapshot of the CUDA test venv."""
    from envlock.manifest._toml import load_file

    if path:
        return load_file(path)
    from _timing import default_venv

    venv = default_venv("cuda")
    out = Path(tempfile.mkdtemp(prefix="envlock-nway-")) / "base.toml"
    subprocess.run([sys.executable, "-m", "envlock", "snapshot", "--python",
                    str(venv / "bin" / "python"), "-o", str(out), "--force"], check=True,
                   capture_output=True, timeout=600, cwd=out.parent)
    data = load_file(out)
    shutil.rmtree(out.parent, ignore_errors=True)
    return data


def _node(base: dict[str, Any], i: int) -> dict[str, Any]:
    name = f"n{i:04d}"
    data = copy.deepcopy(base)
    data["envlock"]["host"] = "vm"  # all nodes of this fleet share one host, as in tests/slurm
    data["envlock"]["created"] = f"2026-12-02T22:{(i // 60) % 60:02d}:{i % 60:02d}Z"
    data["slurm"] = {"status": "ok", "source": "SLURM_* environment", "job-id": "4815162",
                     "node": name, "nodelist": "n[0001-4096]", "num-nodes": 4096,
                     "ntasks": 4096, "cpus-per-task": 2}
    env = data.setdefault("env", {"status": "ok", "source": "allow-list"}).setdefault("vars", {})
    env.update({"SLURM_JOB_ID": "4815162", "SLURM_NODEID": str(i), "SLURM_PROCID": str(i),
                "SLURM_TOPOLOGY_ADDR": name})
    return data


def _deviate(data: dict[str, Any], kind: str) -> None:
    """Make one node deviate the way ``kind`` says (see the module docstring)."""
    env = data["env"]["vars"]
    if kind == "ld-library-path":
        env["LD_LIBRARY_PATH"] = "/cvmfs/soft.example.org/cuda-12.2/lib64"
        for r in (data.get("libraries") or {}).get("resolved") or ():
            if str(r.get("soname", "")).startswith("libcudart"):
                r["path"] = r["realpath"] = "/cvmfs/soft.example.org/cuda-12.2/lib64/libcudart.so.12"
                r.pop("owner", None)
                r.pop("owner-kind", None)
                r["rule"] = "ld_library_path"
    elif kind == "torch-build":
        for p in data["pip"]["packages"]:
            if p.get("name") == "torch":
                p["version"] = str(p["version"]).split("+")[0] + "+cpu"
        fw = data.get("frameworks") or {}
        for p in fw.get("packages") or ():
            if p.get("name") == "torch":
                p["build"] = "cpu"
                p["version"] = str(p["version"]).split("+")[0] + "+cpu"
                p.pop("cuda", None)
                p.pop("cudnn", None)
    elif kind == "omp":
        env["OMP_NUM_THREADS"] = "1"
    elif kind == "numpy":
        for p in data["pip"]["packages"]:
            if p.get("name") == "numpy":
                p["version"] = "2.3.5"


DEVIANTS = {17: "ld-library-path", 100: "torch-build", 500: "omp", 1000: "numpy"}
#: the deviant of a small fleet (the 4-node yardstick)
SMALL = {2: "ld-library-path"}


def write_fleet(base: dict[str, Any], directory: Path, n: int) -> int:
    """Write ``n`` node manifests into ``directory``; returns their total size in bytes."""
    from envlock.manifest._toml import dumps

    directory.mkdir(parents=True, exist_ok=True)
    common = dumps(_node(base, 0), "toml")
    total = 0
    for i in range(1, n + 1):
        kind = (DEVIANTS if n > 4 else SMALL).get(i)
        if kind is not None:
            data = _node(base, i)
            _deviate(data, kind)
            text = dumps(data, "toml")
        else:  # the same text with this node's own names (tomli_w is slow for 4,096 files)
            name = f"n{i:04d}"
            text = (common.replace('node = "n0000"', f'node = "{name}"')
                    .replace('SLURM_TOPOLOGY_ADDR = "n0000"', f'SLURM_TOPOLOGY_ADDR = "{name}"')
                    .replace('SLURM_NODEID = "0"', f'SLURM_NODEID = "{i}"')
                    .replace('SLURM_PROCID = "0"', f'SLURM_PROCID = "{i}"')
                    .replace("22:00:00Z", f"22:{(i // 60) % 60:02d}:{i % 60:02d}Z"))
        path = directory / f"n{i:04d}.toml"
        path.write_text(text)
        total += len(text)
    return total


def _measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int] | None:
    # ``python -m`` puts the working directory first on sys.path, before PYTHONPATH: run
    # from a checkout, both trees would import that checkout's envlock.
    r = subprocess.run([sys.executable, "-c", _WRAP, *argv], capture_output=True, text=True,
                       env=env, timeout=900, cwd=cwd)
    wall, rss, code = r.stdout.split()
    if int(code) not in (0, 1):
        sys.stderr.write(f"  ! {' '.join(argv[:6])}… exited {code}: {r.stderr.strip()[-400:]}\n")
        return None
    return float(wall), int(rss)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--manifest", help="the real manifest to make the fleet of (default: a "
                    "snapshot of the CUDA test venv)")
    ap.add_argument("--a", help="an older envlock tree to pair with this one")
    args = ap.parse_args()
    base = base_manifest(args.manifest)
    work = Path(tempfile.mkdtemp(prefix="envlock-nway-"))
    trees = {"B": str(ROOT)}
    if args.a:
        trees["A"] = str(Path(args.a).resolve())

    def env(k: str) -> dict[str, str]:
        e = {x: v for x, v in os.environ.items() if x != "PYTHONDONTWRITEBYTECODE"}
        e["PYTHONPATH"] = trees[k]
        return e

    try:
        fleets = {}
        for n in [4, *args.nodes]:
            size = write_fleet(base, work / f"fleet-{n}", n)
            fleets[n] = work / f"fleet-{n}"
            print(f"fleet of {n:5d} nodes: {size / 2**20:7.1f} MiB ({size / n / 1024:.1f} KB a node)")
        rows: dict[tuple[str, int], list[tuple[float, int]]] = {}
        floor: dict[int, list[float]] = {}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for n, d in fleets.items():
                for k in order:
                    got = _measure([sys.executable, "-m", "envlock", "diff", "--format", "json",
                                    str(d)], env(k), work)
                    if got is not None:
                        rows.setdefault((k, n), []).append(got)
                parse = _measure([sys.executable, "-c", _PARSE, str(d)], env("B"), work)
                if parse is not None:
                    floor.setdefault(n, []).append(parse[0])
        print(f"{args.rounds} rounds; B = {trees['B']}" + (f", A = {trees['A']}" if "A" in trees else ""))
        fixed = {k: statistics.median(t for t, _ in rows[(k, 4)]) for k in trees if (k, 4) in rows}
        fixed_rss = {k: statistics.median(m for _, m in rows[(k, 4)]) for k in trees if (k, 4) in rows}
        for n in fleets:
            for k in trees:
                got = rows.get((k, n))
                if not got:
                    print(f"{k} {n:5d} nodes: failed")
                    continue
                t = statistics.median(x for x, _ in got)
                m = statistics.median(x for _, x in got)
                parse_t = statistics.median(floor[n]) if n in floor else float("nan")
                print(f"{k} {n:5d} nodes: wall {t:6.2f} s  peak RSS {m / 2**20:7.1f} MiB   "
                      f"{t / fixed[k]:6.2f} x the 4-node diff ({fixed[k]:.2f} s), "
                      f"{t / parse_t:5.2f} x rtoml parse of the fleet ({parse_t:.2f} s), "
                      f"RSS {m / fixed_rss[k]:5.2f} x the 4-node diff's")
            if "A" in trees and rows.get(("A", n)) and rows.get(("B", n)):
                ta = statistics.median(x for x, _ in rows[("A", n)])
                tb = statistics.median(x for x, _ in rows[("B", n)])
                ma = statistics.median(x for _, x in rows[("A", n)])
                mb = statistics.median(x for _, x in rows[("B", n)])
                print(f"  {n:5d} nodes: B/A wall {tb / ta:5.2f}, B/A peak RSS {mb / ma:5.2f}")
        for n, limit_s, limit_mb in ((1024, 0.5, None), (4096, 2.0, 200)):
            got = rows.get(("B", n))
            if got:
                t = statistics.median(x for x, _ in got)
                m = statistics.median(x for _, x in got) / 2**20
                print(f"target {n} nodes: {t:.2f} s (<= {limit_s} s)"
                      + (f", {m:.0f} MiB (<= {limit_mb} MB)" if limit_mb else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
