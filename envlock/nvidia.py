"""NVIDIA compatibility rules as pure functions: driver ↔ CUDA runtime, GPU ↔ build architectures.

Sources (see also ``/work/shared/reference/loader-and-cuda.md`` §4–5):

* **Toolkit driver table** — CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding
  Driver Versions" (Linux x86_64), https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/ :
  the driver each toolkit release ships with, i.e. the driver needed for *all* features of
  that toolkit.  We use the first (GA) release of each ``major.minor``.  The 7.0–9.2 rows are
  from older editions of the same table.
* **Minor-version compatibility** — release notes Table 2 and
  https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html : from
  CUDA 11, an application built with any ``X.y`` toolkit runs on a driver of at least the
  major's floor (11.x: 450.80.02, 12.x: 525.60.13, 13.x: the 580 branch, for which we use
  580.65.06, the 13.0 GA driver), with limits: some APIs return
  ``cudaErrorCallRequiresNewerDriver`` and **PTX from a newer toolkit cannot be JIT-compiled**.
  CUDA 10.x and older have no such rule: the toolkit's own driver is needed.
* **Binary/PTX compatibility** — CUDA C++ Programming Guide, "Binary Compatibility" and "PTX
  Compatibility"; NVIDIA blog "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce
  Family-Specific Architecture Features": SASS for ``sm_XY`` runs on compute capability
  ``X.Z`` with ``Z ≥ Y`` (same major only); PTX for ``compute_XY`` can be JIT-compiled for any
  compute capability ≥ ``X.Y``; ``sm_XYa``/``compute_XYa`` run only on ``X.Y`` itself;
  ``sm_XYf`` runs within its family (same major, ``Z ≥ Y``).

Versions are strings (``"550.54.14"``, ``"570.26"``, ``"12.4"``); they are compared
numerically, field by field.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = [
    "TOOLKIT_DRIVERS",
    "MINOR_COMPAT_FLOOR",
    "vtuple",
    "cuda_major_minor",
    "max_cuda_for_driver",
    "toolkit_driver",
    "DriverVerdict",
    "assess_driver",
    "Arch",
    "parse_arch",
    "ArchVerdict",
    "assess_arch",
]

#: ``(CUDA major.minor, minimum Linux x86_64 driver)`` of each toolkit's GA release, newest
#: first (CUDA Toolkit release notes, Table 3).
TOOLKIT_DRIVERS: tuple[tuple[str, str], ...] = (
    ("13.2", "595.45.04"),
    ("13.1", "590.44.01"),
    ("13.0", "580.65.06"),
    ("12.9", "575.51.03"),
    ("12.8", "570.26"),
    ("12.6", "560.28.03"),
    ("12.5", "555.42.02"),
    ("12.4", "550.54.14"),
    ("12.3", "545.23.06"),
    ("12.2", "535.54.03"),
    ("12.1", "530.30.02"),
    ("12.0", "525.60.13"),
    ("11.8", "520.61.05"),
    ("11.7", "515.43.04"),
    ("11.6", "510.39.01"),
    ("11.5", "495.29.05"),
    ("11.4", "470.42.01"),
    ("11.3", "465.19.01"),
    ("11.2", "460.27.03"),
    ("11.1", "455.23"),
    ("11.0", "450.36.06"),
    ("10.2", "440.33"),
    ("10.1", "418.39"),
    ("10.0", "410.48"),
    ("9.2", "396.26"),
    ("9.1", "390.46"),
    ("9.0", "384.81"),
    ("8.0", "367.48"),
    ("7.5", "352.31"),
    ("7.0", "346.46"),
)

#: Smallest driver that runs *any* toolkit of a CUDA major under minor-version compatibility
#: (release notes Table 2).  For 13.x NVIDIA gives only the branch (≥ 580); 580.65.06 is the
#: 13.0 GA driver.
MINOR_COMPAT_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

_VERSION = re.compile(r"^\s*(\d+(?:\.\d+)*)")


def vtuple(version: str) -> tuple[int, ...]:
    """``"550.54.14"`` → ``(550, 54, 14)``; the leading numeric part only (``"12.4.127"`` works).

    :raises ValueError: the string does not start with a number.
    """
    m = _VERSION.match(version)
    if not m:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def cuda_major_minor(cuda: str) -> tuple[int, int | None]:
    """``"10.0.130"`` → ``(10, 0)``, ``"12.4"`` → ``(12, 4)``, ``"12"`` → ``(12, None)``.

    :raises ValueError: not a version.
    """
    t = vtuple(cuda)
    return t[0], (t[1] if len(t) > 1 else None)


def _fmt(t: tuple[int, int]) -> str:
    return f"{t[0]}.{t[1]}"


def max_cuda_for_driver(driver: str) -> str | None:
    """The newest CUDA ``"major.minor"`` whose toolkit driver is ≤ ``driver`` (Table 3).

    A driver newer than the newest row supports at least that row's version (the answer is
    then that row, e.g. ``"13.2"``).

    :returns: ``None`` for a driver older than CUDA 7.0's or an unparsable version.
    """
    try:
        d = vtuple(driver)
    except ValueError:
        return None
    for cuda, minimum in TOOLKIT_DRIVERS:
        if d >= vtuple(minimum):
            return cuda
    return None


def toolkit_driver(cuda: str) -> str | None:
    """The driver that CUDA ``major.minor`` ships with (Table 3); ``None`` when not in the table.

    A version given as a major only (``"12"``) means that major's first release (``"12.0"``).
    """
    major, minor = cuda_major_minor(cuda)
    key = f"{major}.{minor if minor is not None else 0}"
    for c, d in TOOLKIT_DRIVERS:
        if c == key:
            return d
    return None


class DriverVerdict(NamedTuple):
    """Can a driver run code built with a CUDA runtime?

    :ivar status: ``"ok"`` (driver ≥ the toolkit's own driver: every feature works),
        ``"minor-compat"`` (it runs under minor-version compatibility: no JIT of the build's
        PTX, some newer APIs fail), ``"too-old"`` (``cudaErrorInsufficientDriver``) or
        ``"unknown"`` (a CUDA version or driver not in the tables).
    :ivar cuda: the build's CUDA version as ``major.minor``.
    :ivar driver: the driver version given.
    :ivar supports: the newest CUDA the driver supports (:func:`max_cuda_for_driver`).
    :ivar needs: the smallest driver that runs the build at all (the minor-compat floor when
        the rule applies, else the toolkit driver).
    :ivar full: the toolkit's own driver (all features, PTX JIT), when known.
    """

    status: str
    cuda: str
    driver: str
    supports: str | None
    needs: str | None
    full: str | None


def assess_driver(cuda: str, driver: str) -> DriverVerdict:
    """Judge whether ``driver`` runs code built with CUDA ``cuda`` (C06).

    Rules: the toolkit driver (Table 3) runs everything; for CUDA 11.x/12.x/13.x a driver of
    at least :data:`MINOR_COMPAT_FLOOR` runs it under minor-version compatibility (for 11.0,
    whose own driver predates the floor, the toolkit driver suffices); anything older is too
    old.  CUDA ≤ 10.x needs its toolkit driver.

    :param cuda: the build's CUDA version (``"10.0"``, ``"10.0.130"``, ``"12.4"``, ``"12"``).
    :param driver: the kernel driver version (``"410.48"``, ``"550.54.14"``).
    :raises ValueError: either string is not a version.
    """
    major, minor = cuda_major_minor(cuda)
    cuda_mm = f"{major}.{minor if minor is not None else 0}"
    d = vtuple(driver)
    supports = max_cuda_for_driver(driver)
    full = toolkit_driver(cuda_mm)
    floor = MINOR_COMPAT_FLOOR.get(major)
    needs: str | None
    if floor is not None:
        needs = floor if full is None or vtuple(full) > vtuple(floor) else full
    else:
        needs = full
    if needs is None:
        return DriverVerdict("unknown", cuda_mm, driver, supports, None, None)
    if full is not None and d >= vtuple(full):
        return DriverVerdict("ok", cuda_mm, driver, supports, needs, full)
    if d >= vtuple(needs):
        return DriverVerdict("minor-compat" if floor is not None else "ok", cuda_mm, driver, supports, needs, full)
    return DriverVerdict("too-old", cuda_mm, driver, supports, needs, full)


# -- architectures ---------------------------------------------------------------------------
class Arch(NamedTuple):
    """A GPU code target of a build.

    :ivar kind: ``"sass"`` (``sm_XY``, a cubin) or ``"ptx"`` (``compute_XY``).
    :ivar major, minor: the compute capability it targets.
    :ivar suffix: ``""``, ``"a"`` (architecture-specific) or ``"f"`` (family-specific).
    :ivar text: as written in the build (``"sm_86"``, ``"compute_90"``, ``"8.6+PTX"``).
    """

    kind: str
    major: int
    minor: int
    suffix: str
    text: str

    @property
    def cc(self) -> tuple[int, int]:
        """``(major, minor)``."""
        return (self.major, self.minor)


_SM = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")
_CC = re.compile(r"^(\d+)\.(\d+)([af]?)(\+ptx)?$", re.I)


def parse_arch(text: str) -> tuple[Arch, ...]:
    """Parse one architecture entry as builds write them.

    Accepted forms: ``sm_86``, ``sm_90a``, ``sm_100f``, ``compute_90`` (nvcc / fatbin /
    ``torch.cuda.get_arch_list()``), ``8.6`` and ``8.6+PTX`` (``TORCH_CUDA_ARCH_LIST``; the
    ``+PTX`` form gives both SASS and PTX).  ``sm_XY``: the last digit is the minor
    (``sm_120`` → 12.0, ``sm_103`` → 10.3).

    :returns: the targets (empty for text in no known form).
    """
    t = text.strip()
    m = _SM.match(t.lower())
    if m:
        digits = m.group(2)
        if len(digits) < 2:
            return ()
        kind = "sass" if m.group(1) == "sm" else "ptx"
        if m.group(1) == "lto":
            return ()
        return (Arch(kind, int(digits[:-1]), int(digits[-1]), m.group(3), t),)
    m = _CC.match(t)
    if m:
        major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3).lower()
        out = [Arch("sass", major, minor, suffix, t)]
        if m.group(4):
            out.append(Arch("ptx", major, minor, suffix, t))
        return tuple(out)
    return ()


class ArchVerdict(NamedTuple):
    """How a GPU of a compute capability can run a build.

    :ivar mode: ``"sass"`` (native code for it), ``"ptx"`` (only by JIT-compiling PTX: needs a
        driver at least as new as the build's toolkit; slow first start) or ``"none"`` ("no
        kernel image is available for execution on the device").
    :ivar via: the build's target that serves it (``"sm_80"``, ``"compute_90"``), or ``None``.
    :ivar reason: for ``"none"``: ``"too-new"`` (newer major than every SASS, no usable PTX),
        ``"too-old"`` (older than every target) or ``"gap"``.
    """

    mode: str
    via: str | None
    reason: str | None = None


def assess_arch(cc: str, archs: tuple[str, ...] | list[str]) -> ArchVerdict:
    """Judge whether a GPU of compute capability ``cc`` (``"8.6"``) can run a build (C07).

    :param cc: ``"major.minor"``.
    :param archs: the build's targets (any form :func:`parse_arch` accepts).
    :raises ValueError: ``cc`` is not ``major.minor``.
    """
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cc)
    if not m:
        raise ValueError(f"not a compute capability: {cc!r}")
    gpu = (int(m.group(1)), int(m.group(2)))
    parsed = [a for text in archs for a in parse_arch(text)]
    best_sass = None
    for a in parsed:
        if a.kind != "sass":
            continue
        if a.suffix == "a":
            ok = a.cc == gpu
        else:  # plain and family-specific SASS: same major, minor ≤ the GPU's
            ok = a.major == gpu[0] and a.minor <= gpu[1]
        if ok and (best_sass is None or a.cc > best_sass.cc):
            best_sass = a
    if best_sass is not None:
        name = (best_sass.text if best_sass.text.startswith("sm_")
                else f"sm_{best_sass.major}{best_sass.minor}{best_sass.suffix}")
        return ArchVerdict("sass", name)
    best_ptx = None
    for a in parsed:
        if a.kind != "ptx":
            continue
        ok = a.cc == gpu if a.suffix == "a" else a.cc <= gpu
        if ok and (best_ptx is None or a.cc > best_ptx.cc):
            best_ptx = a
    if best_ptx is not None:
        return ArchVerdict("ptx", f"compute_{best_ptx.major}{best_ptx.minor}{best_ptx.suffix}")
    if not parsed:
        return ArchVerdict("none", None, "gap")
    lowest = min(a.cc for a in parsed)
    highest = max(a.cc for a in parsed)
    if gpu < lowest:
        reason = "too-old"
    elif gpu[0] > highest[0]:
        reason = "too-new"
    else:
        reason = "gap"
    return ArchVerdict("none", None, reason)


def sm_name(cc: str) -> str:
    """``"8.6"`` → ``"sm_86"``, ``"12.0"`` → ``"sm_120"``."""
    major, _, minor = cc.partition(".")
    return f"sm_{major}{minor}"


# -- host compilers (nvcc) -------------------------------------------------------------------
# Source: NVIDIA CUDA Installation Guide for Linux, section "Host Compiler Support Policy" /
# table "Supported Compilers" (x86_64 column), one edition per CUDA release,
# https://docs.nvidia.com/cuda/archive/<X.Y.Z>/cuda-installation-guide-linux/ .  Each row is the
# documented range of GCC and Clang host compilers for ``nvcc`` of that release.  The gate
# nvcc itself applies is ``include/crt/host_config.h`` of the toolkit ("unsupported GNU
# version! gcc versions later than N are not supported!"): it checks only the major version,
# and :mod:`envlock.probes.buildenv` reads it from the toolkit when present; this table is used
# when that header cannot be read, and to name the documented range.

class HostCompilerRange(NamedTuple):
    """The host compilers NVIDIA documents for one CUDA release (x86_64 Linux).

    :ivar cuda: ``"major.minor"``.
    :ivar gcc_min, gcc_max: oldest / newest supported GCC, as NVIDIA writes it (``"6"``,
        ``"13.2"``); a major-only value means every release of that major.
    :ivar clang_min, clang_max: likewise for Clang.
    """

    cuda: str
    gcc_min: str
    gcc_max: str
    clang_min: str
    clang_max: str


#: Newest CUDA release first (CUDA Installation Guide for Linux, "Supported Compilers").
HOST_COMPILERS: tuple[HostCompilerRange, ...] = (
    HostCompilerRange("13.0", "6", "15", "7", "20"),
    HostCompilerRange("12.9", "6", "14", "7", "19"),
    HostCompilerRange("12.8", "6", "14", "7", "19"),
    HostCompilerRange("12.6", "6", "13.2", "7", "18"),
    HostCompilerRange("12.5", "6", "13.2", "7", "17"),
    HostCompilerRange("12.4", "6", "13.2", "7", "17"),
    HostCompilerRange("12.3", "6", "12.2", "7", "16"),
    HostCompilerRange("12.2", "6", "12.2", "7", "15"),
    HostCompilerRange("12.1", "6", "12.2", "7", "15"),
    HostCompilerRange("12.0", "6", "12.1", "7", "14"),
    HostCompilerRange("11.8", "6", "11", "7", "14"),
    HostCompilerRange("11.7", "6", "11", "7", "13"),
    HostCompilerRange("11.6", "6", "11", "7", "13"),
    HostCompilerRange("11.5", "6", "11", "7", "12"),
    HostCompilerRange("11.4", "6", "11", "7", "12"),
    HostCompilerRange("11.3", "5", "10", "3.3", "11"),
    HostCompilerRange("11.2", "5", "10", "3.3", "11"),
    HostCompilerRange("11.1", "5", "10", "3.3", "10"),
    HostCompilerRange("11.0", "5", "9", "3.3", "9"),
    HostCompilerRange("10.2", "5", "8", "3.3", "8"),
    HostCompilerRange("10.1", "5", "8", "3.3", "8"),
    HostCompilerRange("10.0", "5", "7", "3.3", "6"),
)


def host_compiler_range(cuda: str) -> HostCompilerRange | None:
    """The documented host-compiler range of CUDA ``major.minor`` (:data:`HOST_COMPILERS`).

    :param cuda: ``"12.4"``, ``"12.4.131"``.
    :returns: ``None`` for a release not in the table.
    :raises ValueError: ``cuda`` is not a version.
    """
    major, minor = cuda_major_minor(cuda)
    key = f"{major}.{minor if minor is not None else 0}"
    return next((r for r in HOST_COMPILERS if r.cuda == key), None)


def assess_host_compiler(cuda: str, vendor: str, version: str) -> str | None:
    """Judge a host compiler against :data:`HOST_COMPILERS` for CUDA ``cuda``.

    Compared as NVIDIA writes the bounds: a major-only bound covers the whole major
    (``"15"`` admits 15.2.0), a ``major.minor`` bound is compared on major and minor.

    :param vendor: ``"gcc"`` or ``"clang"`` (others are not judged).
    :param version: the compiler's version (``"13.2.0"``).
    :returns: ``"too-new"``, ``"too-old"``, ``"ok"``, or ``None`` when the release or vendor
        is not in the table.
    :raises ValueError: a version string is not a version.
    """
    row = host_compiler_range(cuda)
    if row is None or vendor not in ("gcc", "clang"):
        return None
    low, high = (row.gcc_min, row.gcc_max) if vendor == "gcc" else (row.clang_min, row.clang_max)
    have = vtuple(version)
    hi = vtuple(high)
    lo = vtuple(low)
    if have[: len(hi)] > hi:
        return "too-new"
    if have[: len(lo)] < lo:
        return "too-old"
    return "ok"


__all__ += ["HostCompilerRange", "HOST_COMPILERS", "host_compiler_range", "assess_host_compiler"]
