"""Plain-text summaries of ``[run]`` and ``[process]`` for ``envlock show`` (raw tables in,
lines out; the tables may come from a newer envlock, so every key is optional)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envlock.runs.outcome import fmt_bytes, fmt_duration
from envlock.redact import redact_argv

__all__ = ["run_lines", "process_lines"]


def run_lines(t: Mapping[str, Any]) -> list[str]:
    """``run: failed (exit status 3) after 1.1 s: python job.py`` and the findings."""
    how = t.get("outcome", "?")
    if t.get("exit-status") is not None:
        how += f" (exit status {t['exit-status']})"
    elif t.get("signal"):
        how += f" ({t['signal']})"
    wall = t.get("wall")
    cmd = " ".join(redact_argv(map(str, t.get("command") or ())))  # a foreign record, maybe
    lines = [f"run: {how}" + (f" after {fmt_duration(float(wall))}" if isinstance(wall, (int, float))
                             else "") + f": {cmd}",
             f"run: {t.get('start', '?')} → {t.get('end', '?')} in {t.get('cwd', '?')}"]
    res = t.get("resources")
    if isinstance(res, Mapping) and isinstance(res.get("peak-rss"), int):
        cpu = (res.get("cpu-user") or 0) + (res.get("cpu-system") or 0)
        lines.append(f"run: peak RSS {fmt_bytes(res['peak-rss'])}, CPU {fmt_duration(cpu)}, "
                     f"{res.get('samples', 0)} samples, GPU sampling {res.get('gpu-status', '?')}")
    if t.get("manifest"):
        lines.append(f"run: environment {t['manifest']} (sha256 {str(t.get('manifest-sha256', ''))[:12]})")
    for f in t.get("findings") or ():
        if isinstance(f, Mapping):
            lines.append(f"  {f.get('severity', '?')}: {f.get('title', '')}")
    return lines


def process_lines(t: Mapping[str, Any]) -> list[str]:
    """``process: torch 2.13.0 cudnn.benchmark=yes deterministic=no …`` and thread pools."""
    lines = []
    torch = t.get("torch")
    if isinstance(torch, Mapping):
        flags = [f"{k}={'yes' if v else 'no'}" if isinstance(v, bool) else f"{k}={v}"
                 for k, v in torch.items() if k in (
                     "cudnn-benchmark", "cudnn-deterministic", "deterministic-algorithms",
                     "allow-tf32-matmul", "allow-tf32-cudnn", "float32-matmul-precision",
                     "num-threads")]
        seed = "default seed" if torch.get("seed-is-default") else f"seed {torch.get('initial-seed')}"
        lines.append(f"process: torch {torch.get('version', '?')}, {seed}; " + " ".join(flags))
    pools = [p for p in t.get("threadpools") or () if isinstance(p, Mapping)]
    if pools:
        lines.append("process: threads " + ", ".join(
            f"{p.get('internal-api')} {p.get('num-threads', '?')} ({str(p.get('path', '')).rsplit('/', 1)[-1]})"
            for p in pools))
    libs = t.get("libraries") or ()
    lines.append(f"process: pid {t.get('pid', '?')}, rank {t.get('rank', '-')}, "
                 f"{len(libs)} shared objects mapped, {t.get('threads', '?')} OS threads")
    return lines
