"""Mutant check at scale (issue 22, item 8): N seeded mutants of real libraries, each against
``ld.so --list`` and a real ``dlopen(RTLD_NOW)`` under ``LD_BIND_NOW=1``.

The default run of ``tests/libs/test_fuzz.py`` checks a few hundred; this runs the issue's
10,000 (or ``--count N``) with the same mutator and prints every disagreement, grouped by kind:
``ld.so:*`` against ``ld.so --list`` (verdict, message, dependency names), ``dlopen:*``
against the probe of ``tests/libs/dlopen_oracle.py`` (verdict, dependency paths),
``*:not-modelled`` where the real loader crashed, asserted, hung or an mmap failed, and
``dlopen:relocations`` (a relocation of a type glibc does not know: envlock does not check
relocation types), counted, not failures.

Run: ``nice python benchmarks/bench_mutants.py [--count 10000] [--seed 20261203]`` from the
repository root (needs gcc and ``/lib64/ld-linux-x86-64.so.2``).  Exit status 1 when any
disagreement other than ``not-modelled`` is found.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.libs.dlopen_oracle import build_probe, compare
from tests.libs.test_fuzz import SEEDS, ld_so_disagreement, mutate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seeds = [Path(p).read_bytes() for p in SEEDS]
    found: dict[str, list[str]] = collections.defaultdict(list)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        probe = build_probe(root)
        for n in range(args.count):
            path = root / f"m{n % 8}.so"
            path.write_bytes(mutate(rng.choice(seeds), rng))
            for side, got in (("ld.so", ld_so_disagreement(path)), ("dlopen", compare(probe, path))):
                if got is not None:
                    found[f"{side}:{got[0]}"].append(f"mutant {n}: {got[1]}")
    elapsed = time.perf_counter() - t0
    print(f"{args.count} mutants (seed {args.seed}) in {elapsed:.0f} s")
    for kind in sorted(found):
        print(f"{kind}: {len(found[kind])}")
        for line in found[kind]:
            print("   ", line)
    return 1 if any(not k.endswith(("not-modelled", "relocations")) for k in found) else 0


if __name__ == "__main__":
    sys.exit(main())
