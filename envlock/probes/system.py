"""Operating system, C library, CPU and memory, read from files under a ``root``.

Sources: ``<root>/etc/os-release`` (os-release(5)), ``<root>/proc/cpuinfo``,
``<root>/proc/meminfo``; the kernel release and machine from :func:`os.uname`, and the glibc
version from :func:`envlock.libs.glibc.detect_glibc` (glibc's own answer on this machine; the
``ld.so.cache`` generator or the ``libc.so.6`` banner under another ``root``).
"""

from __future__ import annotations

import os
from pathlib import Path

from envlock.manifest import CpuInfo, PlatformInfo
from envlock.probes.world import World

__all__ = ["ISA_FLAGS", "probe_platform", "probe_cpu", "parse_cpuinfo", "parse_os_release"]

#: CPU feature flags that change which numerical kernels run (x86 ``flags``, Arm ``Features``).
ISA_FLAGS = frozenset(
    {
        "sse4_2", "avx", "avx2", "fma", "f16c",
        "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
        "avx512_bf16", "avx512_vnni", "avx512_fp16", "avx_vnni",
        "amx_bf16", "amx_tile", "amx_int8", "amx_fp16",
        "asimd", "asimddp", "asimdhp", "sve", "sve2", "bf16", "i8mm", "sme",
    }
)
_ARM_NEON = {"asimd", "neon"}


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release(5) ``KEY=value`` lines (quotes removed).

    >>> parse_os_release('ID=debian\\nVERSION_ID="12"\\n')['VERSION_ID']
    '12'
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[key] = value
    return out


def _glibc_version(root: Path) -> str | None:
    from envlock.libs.glibc import detect_glibc

    found = detect_glibc(root)
    return found.version if found else None


def probe_platform(world: World) -> PlatformInfo:
    """Read the ``[platform]`` table from ``world.root`` (``etc/os-release``, glibc) and
    :func:`os.uname`.  Never raises; a missing os-release gives ``status="error"``."""
    r = world.root
    uname = os.uname()
    error = None
    release: dict[str, str] = {}
    for candidate in (r / "etc/os-release", r / "usr/lib/os-release"):
        try:
            release = parse_os_release(candidate.read_text(encoding="utf-8", errors="replace"))
            source = str(candidate)
            break
        except OSError:
            continue
    else:
        source = "uname"
        error = "no /etc/os-release"
    return PlatformInfo(
        status="ok" if error is None else "error",
        source=source,
        error=error,
        os_id=release.get("ID"),
        os_version=release.get("VERSION_ID"),
        os_name=release.get("PRETTY_NAME"),
        kernel=uname.release,
        machine=uname.machine,
        glibc=_glibc_version(r),
    )


def parse_cpuinfo(text: str) -> dict[str, object]:
    """Extract vendor, model and ISA flags from ``/proc/cpuinfo`` text (first processor).

    :returns: ``{"vendor": str|None, "model": str|None, "flags": tuple[str, ...]}`` with only
        the flags in :data:`ISA_FLAGS` (``neon`` is reported for Arm ``asimd``).
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields.get("flags") or fields.get("features"):
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    raw = set((fields.get("flags") or fields.get("features") or "").split())
    flags = set(raw & ISA_FLAGS)
    if raw & _ARM_NEON:
        flags.add("neon")
    vendor = fields.get("vendor_id") or fields.get("cpu implementer")
    model = fields.get("model name") or fields.get("hardware") or fields.get("cpu part")
    return {"vendor": vendor, "model": model, "flags": tuple(sorted(flags))}


def probe_cpu(world: World) -> CpuInfo:
    """Read the ``[cpu]`` table from ``<world.root>/proc/cpuinfo`` and ``<world.root>/proc/meminfo``
    (memory in bytes) and this process's CPU affinity.  Never raises."""
    r = world.root
    try:
        parsed = parse_cpuinfo((r / "proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        return CpuInfo(status="error", source="/proc/cpuinfo", error=str(exc), logical_cores=os.cpu_count())
    memory = None
    try:
        for line in (r / "proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024  # the file says kB, meaning KiB
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return CpuInfo(
        status="ok",
        source="/proc/cpuinfo",
        vendor=parsed["vendor"],  # type: ignore[arg-type]
        model=parsed["model"],  # type: ignore[arg-type]
        logical_cores=os.cpu_count(),
        usable_cores=usable,
        flags=parsed["flags"],  # type: ignore[arg-type]
        memory=memory,
    )
