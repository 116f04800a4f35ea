"""Seeded-mutation fuzzing of every input reader, run in its own process by ``test_fuzz.py``.

``python fuzz_driver.py OUT.json SEED N FILE...``: for each FILE, N mutants (byte flips, invalid
UTF-8, deleted/duplicated slices, structural tokens, 500-level nesting, YAML alias bombs,
truncation), each given to what ``diff``, ``show``, ``verify --lock`` and ``restore`` (dry) call,
and through the ``envlock`` CLI for ``diff``, ``show`` and ``restore``.  Writes a JSON report:
every failure (a traceback, an exit status other than 0/1/2, an error that is not one line of at
most 600 characters, a mutant slower than 5 s), the count of mutants, and the accept/reject
agreement of ``verify --lock`` and ``restore`` with conda-lock's and packaging's own parsers.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

TOKENS = [b"[", b"]", b"{", b"}", b":", b"- ", b"&a ", b"*a", b"\n", b"=", b'"', b"'", b"#",
          b"@", b"  ", b"\t", b"\x00", b"\xff\xfe", b"\xc3", b"-e", b"--editable", b"pip: 5",
          b"version: 2\n", b"lock-version = '9.0'\n", b"::", b"==", b"\\\n", b";", b"!!binary "]
BOMB = (b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        b"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
        b"i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One mutant of ``data``: 1–3 random edits."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(10)
        pos = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(pos, len(out) - 1)] = rng.randrange(256)
        elif op == 1:
            end = min(len(out), pos + rng.randint(1, 64))
            del out[pos:end]
        elif op == 2:
            end = min(len(out), pos + rng.randint(1, 256))
            out[pos:pos] = out[pos:end] * rng.randint(1, 4)
        elif op in (3, 4, 5):
            out[pos:pos] = rng.choice(TOKENS)
        elif op == 6:
            depth = rng.choice([50, 120, 500, 3000])
            opener, closer = rng.choice([(b"[", b"]"), (b"{", b"}"), (b"- ", b"")])
            out[pos:pos] = (b"x = " if rng.random() < 0.5 else b"") + opener * depth + closer * depth
        elif op == 7:
            out[pos:pos] = BOMB
        elif op == 8:
            del out[pos:]
        else:  # swap two lines
            lines = bytes(out).split(b"\n")
            if len(lines) > 2:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                out = bytearray(b"\n".join(lines))
    return bytes(out)


def _one_line(msg: str) -> bool:
    return "\n" not in msg.strip() and len(msg) <= 600 and "Traceback" not in msg


def _reference(path: Path) -> bool | None:
    """What the tool's own parser says: True (valid), False (invalid), None (not that kind)."""
    name = path.name
    if name.endswith("conda-lock.yml"):
        from conda_lock.lockfile import parse_conda_lock_file

        try:
            parse_conda_lock_file(path)
            return True
        except Exception:  # any refusal
            return False
    if name.startswith("pylock") and name.endswith(".toml"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
            import tomli as tomllib
        from packaging.pylock import Pylock

        try:
            Pylock.from_dict(tomllib.loads(path.read_text(encoding="utf-8")))
            return True
        except Exception:
            return False
    return None


def main() -> None:
    out_path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    files = [Path(f) for f in sys.argv[4:]]
    from click.testing import CliRunner

    from envlock import formats
    from envlock.cli import cli
    from envlock._untrusted import UntrustedValueError
    from envlock.errors import EnvlockError
    from envlock.lock._restore import plan_restore
    from envlock.verify.expected import read_lock

    runner = CliRunner()
    failures: list[dict] = []
    agree = {"conda-lock": [0, 0], "pylock": [0, 0]}  # [agreements, comparisons]
    count = 0
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            data = src.read_bytes()
            for i in range(n):
                mutant = mutate(data, rng)
                path = Path(tmp) / src.name
                path.write_bytes(mutant)
                count += 1
                start = time.monotonic()
                verdicts = {}
                for what, call in (
                        ("read", lambda p=path: formats.read(p)),
                        ("verify-lock", lambda p=path: read_lock(p, platform="linux-64")),
                        ("restore", lambda p=path: plan_restore([p], Path(tmp) / "env"))):
                    try:
                        call()
                        verdicts[what] = True
                    except UntrustedValueError as exc:
                        # read as its parser reads it, then refused as a value restore will
                        # not pass on (docs/trust.md): the parse agreed, the trust check spoke
                        verdicts[what] = True
                        if not _one_line(str(exc)):
                            failures.append({"file": src.name, "mutant": i, "what": what,
                                             "error": str(exc)[:2000]})
                    except EnvlockError as exc:
                        verdicts[what] = False
                        if not _one_line(str(exc)):
                            failures.append({"file": src.name, "mutant": i, "what": what,
                                             "error": str(exc)[:2000]})
                    except Exception:  # the defect this test looks for
                        verdicts[what] = None
                        failures.append({"file": src.name, "mutant": i, "what": what,
                                         "traceback": traceback.format_exc()[-2000:]})
                if i % 4 == 0:  # the CLI on a quarter of the mutants (it adds click's cost)
                    for argv in (["diff", str(path), str(src)], ["show", str(path)],
                                 ["restore", str(path), "--prefix", str(Path(tmp) / "env")]):
                        res = runner.invoke(cli, argv)
                        bad = res.exit_code not in (0, 1, 2) or (
                            res.exception is not None and not isinstance(res.exception, SystemExit))
                        if res.exit_code == 2:
                            errs = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
                            bad = bad or len(errs) != 1 or len(errs[0]) > 600
                        if bad:
                            failures.append({"file": src.name, "mutant": i, "what": argv[0],
                                             "exit": res.exit_code, "output": res.output[-1500:],
                                             "exception": repr(res.exception)[:500]})
                ref = _reference(path)
                if ref is not None:
                    kind = "conda-lock" if src.name.endswith("conda-lock.yml") else "pylock"
                    for what in ("verify-lock", "restore"):
                        if verdicts[what] is None:
                            continue  # a traceback, reported above
                        agree[kind][1] += 1
                        if verdicts[what] == ref:
                            agree[kind][0] += 1
                        else:
                            failures.append({"file": src.name, "mutant": i, "what": what,
                                             "disagrees": f"envlock {verdicts[what]}, "
                                                          f"{kind} parser {ref}",
                                             "head": mutant[:300].decode("utf-8", "replace")})
                took = time.monotonic() - start
                if took > 5:
                    failures.append({"file": src.name, "mutant": i, "slow": round(took, 2)})
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out_path).write_text(json.dumps({"count": count, "failures": failures,
                                          "agree": agree, "max_rss_mb": rss_mb}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
