"""The ``--import`` run of the ``[frameworks]`` probe: the target interpreter itself, run once
with a timeout on a small self-contained script that imports torch and reports what only an
import can tell (:class:`~envlock.manifest.stacktables.FrameworkRuntime`: CUDA availability, device
count, cuDNN, TF32 and determinism flags, threadpoolctl's pools).  Opt-in: it runs the user's
code (docs/trust.md), which the static probe (:mod:`envlock.probes.frameworks`) never does.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from envlock._run import Runner
from envlock.manifest import Status
from envlock.manifest.stacktables import FrameworkRuntime, ThreadPool

__all__ = ["IMPORT_SCRIPT", "import_run", "parse_import_output"]


#: Script run by the target interpreter in ``--import`` mode.  Self-contained, prints one line
#: ``ENVLOCK-JSON:{…}``.
IMPORT_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
out = {}
try:
    import torch
except Exception as exc:
    out["absent" if isinstance(exc, ModuleNotFoundError) else "error"] = (
        "import torch: %s: %s" % (type(exc).__name__, exc))
else:
    def grab(key, fn):
        try:
            out[key] = fn()
        except Exception as exc:
            out.setdefault("errors", []).append("%s: %s: %s" % (key, type(exc).__name__, exc))
    grab("torch_version", lambda: str(torch.__version__))
    grab("cuda_available", lambda: bool(torch.cuda.is_available()))
    grab("device_count", lambda: int(torch.cuda.device_count()))
    grab("cudnn_version", lambda: torch.backends.cudnn.version())
    grab("arch_list", lambda: list(torch.cuda.get_arch_list()))
    grab("allow_tf32_matmul", lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    grab("allow_tf32_cudnn", lambda: bool(torch.backends.cudnn.allow_tf32))
    grab("deterministic", lambda: bool(torch.are_deterministic_algorithms_enabled()))
    grab("cudnn_benchmark", lambda: bool(torch.backends.cudnn.benchmark))
try:
    import threadpoolctl
except Exception:
    pass
else:
    try:
        import numpy
    except Exception:
        pass
    try:
        out["threadpools"] = threadpoolctl.threadpool_info()
    except Exception as exc:
        out.setdefault("errors", []).append("threadpoolctl: %s" % exc)
out["duration"] = time.perf_counter() - t0
sys.stdout.write("ENVLOCK-JSON:" + json.dumps(out) + "\n")
"""


def import_run(
    python_exe: str | None, env: Mapping[str, str] | None, runner: Runner, timeout: float
) -> FrameworkRuntime:
    """Run ``python_exe -c`` :data:`IMPORT_SCRIPT` (environment ``env``, else envlock's own;
    working directory ``/``; ``timeout`` seconds) and read its result.

    :returns: a :class:`~envlock.manifest.stacktables.FrameworkRuntime`; a missing interpreter, a
        failure or a timeout is its ``status``/``error``.  Never raises.
    """
    if not python_exe:
        return FrameworkRuntime(status="error", error="no target interpreter given for --import")
    t0 = time.monotonic()
    res = runner(
        [python_exe, "-c", IMPORT_SCRIPT],
        timeout=timeout,
        env=dict(os.environ if env is None else env),
        cwd="/",
    )
    elapsed = round(time.monotonic() - t0, 3)
    source = f"{python_exe} -c <import script>"
    if not res.ok:
        return FrameworkRuntime(
            status="timeout" if res.status == "timeout" else "error",
            source=source,
            error=res.detail,
            duration=elapsed,
        )
    return parse_import_output(res.stdout, source, elapsed)


def parse_import_output(
    stdout: str, source: str, elapsed: float | None = None
) -> FrameworkRuntime:
    """Turn the ``ENVLOCK-JSON:`` line of :data:`IMPORT_SCRIPT`'s output into a record."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith("ENVLOCK-JSON:")), None)
    if line is None:
        return FrameworkRuntime(
            status="error", source=source, error="import script printed no result"
        )
    try:
        data = json.loads(line[len("ENVLOCK-JSON:") :])
    except ValueError as exc:
        return FrameworkRuntime(
            status="error", source=source, error=f"import script result is not JSON: {exc}"
        )
    if not isinstance(data, dict):
        return FrameworkRuntime(
            status="error", source=source, error="import script result is not an object"
        )

    def typed(key: str, tp: type) -> object:
        v = data.get(key)
        if tp is int and isinstance(v, bool):
            return None
        return v if isinstance(v, tp) else None

    pools = []
    for p in data.get("threadpools") or []:
        if isinstance(p, dict) and isinstance(p.get("user_api"), str):
            pools.append(
                ThreadPool(
                    user_api=p["user_api"],
                    internal_api=p.get("internal_api")
                    if isinstance(p.get("internal_api"), str)
                    else None,
                    prefix=p.get("prefix") if isinstance(p.get("prefix"), str) else None,
                    filepath=p.get("filepath") if isinstance(p.get("filepath"), str) else None,
                    version=p.get("version") if isinstance(p.get("version"), str) else None,
                    num_threads=p.get("num_threads")
                    if isinstance(p.get("num_threads"), int)
                    else None,
                )
            )
    errors = [e for e in data.get("errors") or [] if isinstance(e, str)]
    status: Status = "ok"
    if isinstance(data.get("absent"), str):
        status = "absent"
        errors.insert(0, data["absent"])
    elif isinstance(data.get("error"), str):
        status = "error"
        errors.insert(0, data["error"])
    arch = data.get("arch_list")
    duration = data.get("duration")
    return FrameworkRuntime(
        status=status,
        source=source,
        error="; ".join(errors) or None,
        torch_version=typed("torch_version", str),  # type: ignore[arg-type]
        cuda_available=typed("cuda_available", bool),  # type: ignore[arg-type]
        device_count=typed("device_count", int),  # type: ignore[arg-type]
        cudnn_version=typed("cudnn_version", int),  # type: ignore[arg-type]
        arch_list=tuple(a for a in arch if isinstance(a, str)) if isinstance(arch, list) else (),
        allow_tf32_matmul=typed("allow_tf32_matmul", bool),  # type: ignore[arg-type]
        allow_tf32_cudnn=typed("allow_tf32_cudnn", bool),  # type: ignore[arg-type]
        deterministic=typed("deterministic", bool),  # type: ignore[arg-type]
        cudnn_benchmark=typed("cudnn_benchmark", bool),  # type: ignore[arg-type]
        threadpools=tuple(pools),
        duration=elapsed
        if elapsed is not None
        else (round(duration, 3) if isinstance(duration, (int, float)) else None),
    )
