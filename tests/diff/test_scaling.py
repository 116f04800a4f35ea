"""``envlock diff`` of large inputs: memory proportional to the input, time linear in it.

A 3-million-line pip freeze once took 9.4 GB and 6 minutes (per-line ``packaging``
Requirements, lists of every line kept twice, a path string built per checked value); the
full-size case is ``benchmarks/bench_diff_large.py``, these tests its scaled-down guard."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.errors import ManifestError
from envlock.formats import MAX_PACKAGES, pep508


def _freeze(path: Path, n: int, variant: int) -> int:
    """A pip freeze of ``n`` pins; ``variant`` 1 bumps every 50th; returns its size in bytes."""
    lines = [f"pkg{i:07d}=={i % 7}.{i % 13}.{i % 5}{'.1' if variant and i % 50 == 0 else ''}\n"
             for i in range(n)]
    text = "".join(lines)
    path.write_text(text)
    return len(text.encode())


_CHILD = r"""
import json, resource, sys, time
from envlock.diff import compare_pair, load_inputs
from envlock.diff.impact import load_kb
kb = load_kb(())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.process_time()
sets = load_inputs(sys.argv[1:3], kb)
pair = compare_pair(sets[0], sets[1], kb, only=(), ignore=list(kb.noise))
cpu = time.process_time() - t0
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(json.dumps([cpu, grown, len(pair.changes)]))
"""


def _diff_cost(tmp_path: Path, n: int) -> tuple[int, float, int, int]:
    """(input bytes, CPU seconds, growth of the peak RSS, changes) of load + compare of two
    freezes of ``n`` lines, in a child process (its own ``ru_maxrss``, measured after the
    imports)."""
    a, b = tmp_path / f"a{n}.txt", tmp_path / f"b{n}.txt"
    size = _freeze(a, n, 0) + _freeze(b, n, 1)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(a), str(b)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cpu, grown, changes = json.loads(r.stdout)
    return size, cpu, grown, changes


def test_a_large_freeze_costs_memory_in_proportion_and_time_linearly(tmp_path: Path) -> None:
    """Two freezes of 30,000 and of 90,000 lines each (under ``MAX_PACKAGES``): every 50th pin
    differs and is found;
    the peak RSS grows by under 40 bytes per input byte (a pin of ~20 characters becomes an
    entry, a fact and their strings: ~500 bytes at the peak; the 9.4 GB of a 61 MB freeze
    were ~150), and three times the input costs under 6 times the CPU time (linear is 3,
    quadratic 9: room for a busy machine; the costs this guards against grew faster)."""
    # each size twice, interleaved, the lower CPU time kept: a busy machine slows single runs
    runs = [_diff_cost(tmp_path, n) for n in (30_000, 90_000, 30_000, 90_000)]
    small = min(runs[0::2], key=lambda r: r[1])
    large = min(runs[1::2], key=lambda r: r[1])
    assert small[3] == 600 and large[3] == 1_800
    assert large[2] < 40 * large[0], (large, large[2] / large[0])
    ratio = large[1] / small[1]
    # linear is 3, quadratic 9: under 6 is linear with room for a busy machine
    assert ratio < 6, (small, large, ratio)


#: pins the fast path takes, and lines next to them that it must leave to packaging
PINS = ["numpy==1.26.4", "Foo_Bar.baz==2.0", "a==1", "x-y==1.0rc1", "x==1.0.post2", "x==1.0.dev3",
        "x==1.0a1.post2.dev3", "torch==2.3.1+cu121", "x == 1.0", "x==\t1.0", "A1==0.0.0.1",
        "z==1.0b2+local.7", "x==01.0"]
NOT_FAST = ["x==1.0.*", "x===1.0", "x==1.0RC1", "x==v1.0", "x==1.0-1", "x==1.0 ; python_version<'3'",
            "x[extra]==1.0", "x==1.0,>=0.5", "-x==1.0", "x.==1.0", "x==1.0+Local", "x==1.0 --hash=sha256:ab"]


@pytest.mark.parametrize("line", PINS + NOT_FAST)
def test_fast_pins_read_as_packaging_reads_them(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``name==version`` lines taken without :mod:`packaging` give the entry the packaging path
    gives; lines outside the fast path's grammar do not take it."""
    def read() -> object:
        try:
            return pep508.parse_line(line)
        except ManifestError:
            return "not a requirement"

    assert (pep508.SIMPLE_PIN.fullmatch(line) is not None) is (line in PINS)
    fast = read()
    monkeypatch.setattr(pep508, "SIMPLE_PIN", pep508.re.compile(r"(?!)"))
    assert read() == fast


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\n\nb", "a\r\nb\rc", "a\x0bb\x0cc\x1cd", "é\u2028x\n",
                                  "a\n\\\nb", "\n\n"])
def test_lines_are_splitlines(text: str) -> None:
    assert list(pep508.iter_lines(text)) == text.splitlines()


_PEAK_CHILD = r"""
import json, resource, subprocess, sys
r = subprocess.run([sys.executable, "-m", "envlock", *sys.argv[1:]], capture_output=True,
                   text=True, timeout=300)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps([r.returncode, r.stdout, r.stderr, peak]))
"""


def _cli_peak(tmp_path: Path, *argv: str) -> tuple[int, str, str, int]:
    """``envlock ARGV`` in a grandchild: exit status, stdout, stderr and its peak RSS (bytes)."""
    r = subprocess.run([sys.executable, "-c", _PEAK_CHILD, *argv], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    code, out, err, peak = json.loads(r.stdout)
    return code, out, err, peak


def test_a_freeze_of_more_packages_than_any_environment_is_one_refusal(tmp_path: Path) -> None:
    """A 3-million-line freeze (55 MB, under the 64 MiB read cap) is refused while it is read,
    at its line MAX_PACKAGES + 1: one Error line naming the file, the line and the bound, exit
    2, and memory for MAX_PACKAGES entries only (not the 9.4 GB the whole file once took)."""
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    with open(big, "w") as f:
        for i in range(3_000_000):
            f.write(f"pkg{i:07d}=={i % 7}.{i % 13}.{i % 5}\n")
    _freeze(small, 10, 0)
    code, out, err, peak = _cli_peak(tmp_path, "diff", str(big), str(small))
    assert code == 2, (out, err)
    errors = [ln for ln in err.splitlines() if ln.startswith("Error:")]
    assert errors == [f"Error: {big}: line {MAX_PACKAGES + 1}: more than {MAX_PACKAGES} requirements; "
                      f"envlock reads at most {MAX_PACKAGES} packages from one file"], err
    assert "Traceback" not in err
    assert peak < 20 * big.stat().st_size, peak  # the text itself (55 MB, held as str) and 100k entries


def test_a_manifest_of_more_packages_than_any_environment_is_one_refusal(tmp_path: Path) -> None:
    """A manifest listing MAX_PACKAGES + 1 pip packages: diff and show's reader refuse it in
    one line (the count and the bound); one of MAX_PACKAGES is read."""
    from envlock import formats

    def manifest(path: Path, n: int) -> None:
        rows = "".join(f'[[pip.packages]]\nname = "p{i}"\nversion = "1.0"\nlocation = "/s"\n\n'
                       for i in range(n))
        path.write_text('[envlock]\nschema = 1\nversion = "0.1.0"\n\n[pip]\nstatus = "ok"\n\n' + rows)

    over, edge = tmp_path / "over.toml", tmp_path / "edge.toml"
    manifest(over, MAX_PACKAGES + 1)
    manifest(edge, MAX_PACKAGES)
    with pytest.raises(ManifestError) as exc:
        formats.read(over)
    assert str(exc.value) == (f"{over}: lists {MAX_PACKAGES + 1} packages; envlock reads at most "
                              f"{MAX_PACKAGES} from one file")
    assert len(formats.read(edge).data["pip"]["packages"]) == MAX_PACKAGES
