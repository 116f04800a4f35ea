"""The findings of an ``envlock libs`` analysis, as a table of rules.

Each finding says what glibc would do and why (``elf/dl-load.c``'s refusals with their own
messages, the search order of ``docs/libs.md``), the object that needs it, and a fix.  A rule
is a small function of a :class:`~envlock.libs.ruleset.Context`:

* for each request that failed, the first of :data:`~envlock.libs.rules_request.MISSING_RULES`
  that answers (refused, invalid ELF, wrong class, SONAME under another name, not found);
* for each request that succeeded, :func:`~envlock.libs.rules_request.shadowed`;
* then :data:`~envlock.libs.rules_process.PROCESS_RULES` over the whole process (missing
  symbol versions, SONAME links, skipped files, unreadable objects, ``LD_PRELOAD`` entries
  ignored, duplicate SONAMEs, two OpenMP runtimes, torch's CUDA pins).

Missing symbols are :func:`envlock.libs.binding.symbol_findings`; glibc's order of failure
(the first fatal error ends the load) is :mod:`envlock.libs.loadorder`'s.
:func:`envlock.libs.analysis.analyze_module` calls :func:`report_findings`.
"""

from __future__ import annotations

from collections.abc import Sequence

from envlock.findings import Finding
from envlock.libs.config import SearchConfig
from envlock.libs.owners import OwnerIndex
from envlock.libs.linkmap import Process
from envlock.libs.report import LibEntry, RuntimeResult
from envlock.libs.rules_process import PROCESS_RULES
from envlock.libs.rules_request import MISSING_RULES, Missing, shadowed
from envlock.libs.ruleset import Context
from envlock.libs.runtime import TorchPlan

__all__ = ["report_findings"]

_RANK = {"error": 0, "warning": 1, "info": 2}


def report_findings(
    proc: Process, entries: list[LibEntry], runtime: list[RuntimeResult],
    index: OwnerIndex | None, plan: TorchPlan | None, sys_path: Sequence[str],
    prefix: str | None, cfg: SearchConfig,
) -> list[Finding]:
    """The findings of one analysed process (``FINDING_IDS`` of :mod:`envlock.libs.report`
    but the symbol ones), errors first, then warnings, then notes (in rule order within each).

    :param proc: the loader model after the module's import; ``entries``: its objects as
        reported; ``runtime``: the run-time dlopens resolved.
    :param index: who owns each file (``None``: not looked up); ``plan``: torch's preload plan.
    :param sys_path, prefix, cfg: the target's ``sys.path``, prefix and loader configuration.
    """
    ctx = Context(proc=proc, entries=entries, runtime=runtime, index=index, plan=plan,
                  sys_path=sys_path, prefix=prefix, cfg=cfg)
    out: list[Finding] = []
    for res in proc.resolutions:
        if res.path is not None:
            found = shadowed(ctx, res)
            if found is not None:
                out.append(found)
            continue
        if res.kind == "preload" or res.filtee is not None:
            continue  # preload_failed, and envlock.libs.loadorder's filter rules
        key = ("missing", res.name, res.requester)
        if key in ctx.seen:
            continue
        ctx.seen.add(key)
        missing = Missing.of(ctx, res)
        for rule in MISSING_RULES:
            finding = rule(ctx, missing)
            if finding is not None:
                out.append(finding)
                break
    for process_rule in PROCESS_RULES:
        out += process_rule(ctx)
    out.sort(key=lambda f: _RANK.get(f.severity, 3))
    return out
