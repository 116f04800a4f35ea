"""A py-rattler solve in its own process: ``python -m envlock.lock._rattler_solve``.

py-rattler runs its network fetches on tokio worker threads.  When a solve fails (a channel
unreachable), fetches of other subdirs may still be in flight when the Python interpreter
finalizes; such a thread then releases a Python thread state that is no longer current and
CPython aborts the process (``Fatal Python error: PyGILState_Release``, exit status 134) —
after envlock has printed its error, but with the wrong exit status and a crash report.

Solving here, in a child process that ends with ``os._exit`` once its answer is written,
removes the interpreter finalization from the path entirely; the parent (``envlock lock``)
never loads py-rattler's runtime for a solve.  The child reads one JSON request on stdin —
``{"channels": [...], "specs": [...], "platform": "linux-64", "virtual": [[name, version,
build], ...]}`` — and writes one JSON answer: ``{"records": [...]}`` or ``{"error": kind,
"message": text}`` with kind ``solve``, ``channel`` or ``spec``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = ["solve_request", "main"]


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def solve_request(req: dict[str, Any]) -> dict[str, Any]:
    """Solve one request in this process (see the module docstring) and return the answer."""
    import asyncio

    import rattler
    from rattler import exceptions

    try:
        specs = [rattler.MatchSpec(s, strict=False) for s in req["specs"]]
        virtual = [rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v),
                                                 rattler.BuildString(b or "0"))
                   for n, v, b in req["virtual"]]
        records = asyncio.run(rattler.solve(
            sources=list(req["channels"]), specs=specs,
            platforms=[req["platform"], "noarch"], virtual_packages=virtual,
            channel_relations="disabled"))
    except exceptions.SolverError as exc:
        return {"error": "solve", "message": str(exc).strip()}
    except (exceptions.GatewayError, exceptions.FetchRepoDataError) as exc:
        causes = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        reason = causes[-1].removeprefix("Caused by: ") if causes else ""
        return {"error": "channel", "message": f"{_first_line(exc)}: {reason}"}
    except Exception as exc:  # noqa: BLE001 - invalid spec/channel/version classes of py-rattler
        return {"error": "spec", "message": _first_line(exc)}
    return {"records": [{
        "name": r.name.normalized, "version": str(r.version), "build": str(r.build),
        "url": str(r.url), "md5": r.md5.hex() if r.md5 else None,
        "sha256": r.sha256.hex() if r.sha256 else None, "depends": list(r.depends),
        "purls": json.loads(r.to_json()).get("purls") or [],  # no attribute in py-rattler 0.28
    } for r in records]}


def main() -> None:
    """Read a request on stdin, write the answer on stdout, and leave without finalizing."""
    try:
        answer = solve_request(json.loads(sys.stdin.read()))
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        answer = {"error": "spec", "message": _first_line(exc)}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter finalization while py-rattler's threads may still run


if __name__ == "__main__":
    main()
