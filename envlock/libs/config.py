"""The loader's configuration, read from the system root without running anything.

glibc decides where to look before any object is searched: the trusted default directories
(``Makeconfig`` ``SYSTEM_DIRS``, Debian's multiarch patch), ``ld.so.cache`` (written by
``ldconfig`` from ``/etc/ld.so.conf``; read by :mod:`envlock.libs.ldcache`), the
glibc-hwcaps and legacy hwcaps subdirectories tried inside every directory
(``elf/dl-hwcaps.c``, ``elf/dl-hwcaps_split.c``; the CPU as glibc sees it in
:mod:`envlock.libs.hwcaps`), the dynamic string tokens ``$ORIGIN``/``$PLATFORM``/``$LIB``
(``elf/dl-load.c`` ``_dl_dst_substitute``) and the environment (``LD_LIBRARY_PATH``,
``LD_PRELOAD``, ``GLIBC_TUNABLES``; ignored in secure mode, ``elf/rtld.c``).  The search
itself is :mod:`envlock.libs.search`; the link map :mod:`envlock.libs.linkmap`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from envlock.libs import hwcaps as x86
from envlock.libs.elf import HOST, HostAbi
from envlock.libs.ldcache import LdCache, read_ld_cache

__all__ = [
    "SearchConfig",
    "default_interpreter",
    "describe_tunables",
    "detect_config",
    "expand_dst",
    "in_root",
    "read_config_text",
    "split_path_list",
]

_MULTIARCH = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu", 3: "i386-linux-gnu",
              21: "powerpc64le-linux-gnu", 22: "s390x-linux-gnu", 243: "riscv64-linux-gnu"}
_PLATFORM = {62: "x86_64", 183: "aarch64", 3: "i686", 21: "ppc64le", 22: "s390x", 243: "riscv64"}

@dataclass(frozen=True, kw_only=True, slots=True)
class SearchConfig:
    """Everything the search depends on besides the objects themselves.

    :ivar root: system root; every absolute path is looked up under it (``"/"`` normally).
    :ivar ld_library_path: the ``LD_LIBRARY_PATH`` value at process start (``None``: unset).
    :ivar ld_preload: the ``LD_PRELOAD`` value (``None``: unset).
    :ivar secure: AT_SECURE (setuid) mode: LD_LIBRARY_PATH and LD_PRELOAD are ignored.
    :ivar cache: the parsed ``ld.so.cache`` (``None``: no cache).
    :ivar system_dirs: the trusted default directories in order.
    :ivar hwcaps_active: active glibc-hwcaps subdirectories, best first (``x86-64-v3``, …).
    :ivar subdirs: the subdirectories tried inside every search directory before the
        directory itself (``glibc-hwcaps/x86-64-v3``, …, legacy ``tls/x86_64``, … before 2.37).
    :ivar platform: the ``$PLATFORM`` value.
    :ivar tunables: the ``GLIBC_TUNABLES``/``LD_HWCAP_MASK`` settings that change the search
        (:func:`envlock.libs.hwcaps.read_tunables`).
    :ivar cpu_masked: the usable CPU features ``glibc.cpu.hwcaps`` turned off (glibc names,
        ``AVX512F``, …, including those ``init_cpu_features`` drops with them), sorted.
    :ivar lib: the ``$LIB`` value.
    :ivar glibc: the glibc version modelled, e.g. ``(2, 36)``.
    :ivar host: class, data encoding and machine of the process.
    :ivar cwd: directory that relative paths are relative to.
    """

    root: str = "/"
    ld_library_path: str | None = None
    ld_preload: str | None = None
    secure: bool = False
    cache: LdCache | None = None
    system_dirs: tuple[str, ...] = ("/lib", "/usr/lib")
    hwcaps_active: tuple[str, ...] = ()
    subdirs: tuple[str, ...] = ()
    platform: str = "x86_64"
    tunables: x86.Tunables = field(default_factory=x86.Tunables)
    cpu_masked: tuple[str, ...] = ()
    lib: str = "lib"
    glibc: tuple[int, int] = (2, 36)
    host: HostAbi = HOST
    cwd: str = "/"


def split_path_list(value: str, separators: str = ":") -> list[str]:
    """Split a search-path string the way ``fillin_rpath`` does.

    :param value: ``DT_RPATH``/``DT_RUNPATH`` (separator ``:``) or ``LD_LIBRARY_PATH``
        (separators ``:`` and ``;``).
    :returns: the elements, with trailing slashes removed; an empty element stands for the
        current directory and is returned as ``""``.
    """
    parts = value.split(":") if separators == ":" else re.split("[" + re.escape(separators) + "]", value)
    out = []
    for p in parts:
        q = p.rstrip("/")
        out.append(q if q or not p else "/")
    return out


_DST = re.compile(r"\$(\{(ORIGIN|PLATFORM|LIB)\}|(ORIGIN|PLATFORM|LIB)(?![A-Za-z0-9_]))")


def expand_dst(s: str, *, origin: str | None, platform: str, lib: str, secure: bool = False,
               is_path: bool = True, trusted: tuple[str, ...] | None = None) -> str | None:
    """Replace ``$ORIGIN``, ``$PLATFORM``, ``$LIB`` (and ``${…}``) in ``s``.

    In secure mode (``AT_SECURE``) ``$ORIGIN`` is substituted only at the very start of a
    search-path element (``is_path``), followed by ``/`` or nothing; anywhere else the element
    is dropped.  For the main program's own RPATH/RUNPATH in secure mode (``trusted``: the
    default directories) an element with ``$ORIGIN`` is kept only when it lies under one of
    them (glibc 2.36 ``elf/dl-load.c`` ``_dl_dst_substitute``, ``is_trusted_path_normalize``).

    :returns: the expanded string, or ``None`` when a token has no value (the loader then
        drops the element).
    """
    if "$" not in s:
        return s
    missing = False
    had_origin = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing, had_origin
        name = m.group(2) or m.group(3)
        if name == "ORIGIN":
            had_origin = True
            at_start = m.start() == 0 and (m.end() == len(s) or s[m.end()] == "/")
            if origin is None or (secure and not (is_path and at_start)):
                missing = True
                return ""
            return origin
        return platform if name == "PLATFORM" else lib

    out = _DST.sub(sub, s)
    if missing:
        return None
    if secure and had_origin and trusted is not None:
        norm = os.path.normpath(out) + "/"
        if not any(norm.startswith(d.rstrip("/") + "/") for d in trusted):
            return None
    return out



# -- configuration -------------------------------------------------------------------------


def read_config_text(path: str) -> str | None:
    """The text of a loader configuration file (``/etc/ld.so.preload``, ``/proc/cpuinfo``),
    undecodable bytes replaced; ``None`` when it cannot be read (the loader then ignores it)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def in_root(root: str, path: str) -> str:
    """Absolute loader path ``path`` as a path on this machine under system root ``root``."""
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))

def detect_config(
    *,
    root: str = "/",
    env: Mapping[str, str] | None = None,
    secure: bool = False,
    host: HostAbi = HOST,
    cpu_flags: frozenset[str] | None = None,
    vendor: str | None = None,
    cwd: str | None = None,
) -> SearchConfig:
    """Work out the loader's configuration for a system root without running anything.

    * default directories: Debian-style multiarch (``/lib/<triplet>``, ``/usr/lib/<triplet>``,
      ``/lib``, ``/usr/lib``) when ``<root>/lib/<triplet>/libc.so.6`` exists, else
      ``/lib64``, ``/usr/lib64`` when ``<root>/lib64/libc.so.6`` exists (RHEL, upstream
      x86-64), else ``/lib``, ``/usr/lib`` (glibc ``Makeconfig`` ``SYSTEM_DIRS``);
    * ``$LIB``: the last component of the first default directory (``slibdir``), or
      ``lib/<triplet>`` on Debian-style multiarch systems;
    * the glibc version: the ``ld.so.cache`` generator string, else the highest
      ``GLIBC_2.x`` defined by ``libc.so.6``;
    * glibc-hwcaps subdirectories (2.33+) from the CPU's usable features as glibc's
      ``cpu_features`` sees them after the target's ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-…``
      (:mod:`envlock.libs.hwcaps`), and before 2.37 the legacy ``tls``/platform/hwcap
      subdirectories (glibc ``elf/dl-hwcaps.c``), which also follow the vendor and
      ``glibc.cpu.hwcap_mask``/``LD_HWCAP_MASK``.  ``ld.so --glibc-hwcaps-mask`` and
      ``--glibc-hwcaps-prepend`` exist only for ``ld.so`` run as a command: not modelled.

    :param root: the system root.
    :param env: the target's environment (``LD_LIBRARY_PATH``, ``LD_PRELOAD``,
        ``GLIBC_TUNABLES``, ``LD_HWCAP_MASK``); ``os.environ`` when ``None``.
    :param secure: model AT_SECURE mode (those four variables are then ignored).
    :param host: the process's ELF class, data encoding and machine (a 32-bit program is
        a 32-bit process: its own default directories and hwcaps).
    :param cpu_flags: CPU feature names as in ``/proc/cpuinfo``; read from it when ``None``.
    :param vendor: CPU vendor id (``GenuineIntel`` selects the ``haswell``/``xeon_phi``
        platforms and the ``avx512_1`` hwcap; read from ``/proc/cpuinfo`` when ``None``).
    :param cwd: the process's working directory (default: this process's).
    :returns: a :class:`SearchConfig`.
    """
    env = os.environ if env is None else env
    system_dirs, lib = _system_dirs(root, host)
    cache = read_ld_cache(root)
    glibc = _glibc_version(root, cache, system_dirs)
    cpu_flags, vendor = _cpu(cpu_flags, vendor)
    tunables = x86.read_tunables(env, secure=secure, glibc=glibc)
    platform, hwcaps, subdirs, masked = _hwcaps(host, glibc, cpu_flags, vendor, tunables)
    return SearchConfig(
        root=root,
        ld_library_path=None if secure else env.get("LD_LIBRARY_PATH"),
        ld_preload=None if secure else env.get("LD_PRELOAD"),
        secure=secure,
        cache=cache if cache.error is None else None,
        system_dirs=system_dirs,
        hwcaps_active=tuple(hwcaps),
        subdirs=tuple(subdirs),
        platform=platform,
        tunables=tunables,
        cpu_masked=tuple(sorted(masked)),
        lib=lib,
        glibc=glibc,
        host=host,
        cwd=cwd or os.getcwd(),
    )


def _system_dirs(root: str, host: HostAbi) -> tuple[tuple[str, ...], str]:
    """The trusted default directories and the ``$LIB`` value for ``host`` under ``root``.

    ``$LIB`` is DL_DST_LIB: upstream the last component of slibdir (``lib64``); Debian's
    multiarch patch makes it ``lib/<triplet>`` (observed with ``LD_DEBUG=libs`` on Debian 12).
    """
    triplet = _MULTIARCH.get(host.machine, "")
    if triplet and os.path.exists(in_root(root, f"/lib/{triplet}/libc.so.6")):
        return (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib"), f"lib/{triplet}"
    if host.elfclass == 64 and os.path.exists(in_root(root, "/lib64/libc.so.6")):
        return ("/lib64", "/usr/lib64"), "lib64"
    return ("/lib", "/usr/lib"), "lib"


def _cpu(cpu_flags: frozenset[str] | None, vendor: str | None) -> tuple[frozenset[str], str]:
    """The CPU's feature flags and vendor id: those given, else ``/proc/cpuinfo``'s."""
    if cpu_flags is not None and vendor is not None:
        return cpu_flags, vendor
    text = read_config_text("/proc/cpuinfo") or ""
    if cpu_flags is None:
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
        cpu_flags = frozenset(m.group(1).split()) if m else frozenset()
    if vendor is None:
        v = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
        vendor = v.group(1) if v else ""
    return cpu_flags, vendor


def _hwcaps(
    host: HostAbi, glibc: tuple[int, int], cpu_flags: frozenset[str], vendor: str, tunables: x86.Tunables,
) -> tuple[str, list[str], list[str], frozenset[str]]:
    """``(platform, glibc-hwcaps names, subdirectories, masked features)`` for ``host``.

    The glibc-hwcaps levels come first (2.33+); before 2.37 the legacy hwcaps follow: every
    non-empty subset of (tls, the platform, the masked AT_HWCAP names from the highest bit
    down), the largest first and tls most significant (glibc ``elf/dl-hwcaps.c``,
    ``_dl_important_hwcaps``; ``LD_DEBUG=libs`` on 2.36).
    """
    platform = _PLATFORM.get(host.machine, os.uname().machine)
    hwcaps: list[str] = []
    legacy_hwcap: list[str] = []  # AT_HWCAP names under the hwcap mask, highest bit first
    masked: frozenset[str] = frozenset()
    if host.machine == 62:
        usable = x86.usable_features(cpu_flags)
        after = x86.mask_features(usable, tunables.hwcaps, glibc=glibc)
        masked = usable - after
        if glibc >= (2, 33):
            hwcaps = x86.isa_levels(after)
        platform, legacy_hwcap = x86.legacy_caps(vendor, after, tunables.hwcap_mask)
    subdirs = [f"glibc-hwcaps/{h}" for h in hwcaps]
    if glibc < (2, 37):
        comps = ["tls", platform, *legacy_hwcap] if host.machine == 62 else ["tls", platform]
        comps = [c for c in comps if c]
        n = len(comps)
        for mask in range((1 << n) - 1, 0, -1):
            subdirs.append("/".join(comps[i] for i in range(n) if mask & (1 << (n - 1 - i))))
    return platform, hwcaps, subdirs, masked


def describe_tunables(cfg: SearchConfig) -> str | None:
    """One line on what ``GLIBC_TUNABLES``/``LD_HWCAP_MASK`` did to the search, for
    ``envlock libs`` (text and ``--why``); ``None`` when neither was set.

    E.g. ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F: masks AVX512F; glibc-hwcaps searched:
    x86-64-v3, x86-64-v2; platform haswell``, or ``…: ignored (AT_SECURE)``.
    """
    t = cfg.tunables
    if t.raw is None and t.hwcap_mask is None and t.ignored is None:
        return None
    head = f"GLIBC_TUNABLES={t.raw}" if t.raw is not None else "LD_HWCAP_MASK"
    if t.ignored:
        return f"{head}: ignored ({t.ignored})"
    if t.hwcaps is None and t.hwcap_mask is None:
        return f"{head}: changes no library search (only glibc.cpu.hwcaps and glibc.cpu.hwcap_mask do)"
    bits = []
    if t.hwcaps is not None:
        bits.append(f"masks {', '.join(cfg.cpu_masked)}" if cfg.cpu_masked else
                    "glibc.cpu.hwcaps masks no usable CPU feature")
    if t.hwcap_mask is not None:
        bits.append(f"hwcap mask {t.hwcap_mask:#x}")
    searched = ", ".join(cfg.hwcaps_active) or "none"
    return f"{head}: {'; '.join(bits)}; glibc-hwcaps searched: {searched}; platform {cfg.platform}"


def _glibc_version(root: str, cache: LdCache, system_dirs: tuple[str, ...]) -> tuple[int, int]:
    """The glibc modelled: :func:`envlock.libs.glibc.detect_glibc` of ``root`` (the one glibc
    detector), searching the system directories found for this root first; 2.36 when nothing
    answers (the version this model was checked against)."""
    from envlock.libs.glibc import SYSTEM_LIB_DIRS, detect_glibc

    found = detect_glibc(root or "/", dirs=tuple(dict.fromkeys((*system_dirs, *SYSTEM_LIB_DIRS))))
    if found:
        m = re.match(r"(\d+)\.(\d+)", found.version)
        if m:
            return (int(m.group(1)), int(m.group(2)))
    return (2, 36)



def default_interpreter(config: SearchConfig) -> str | None:
    """The system's dynamic loader for ``config.host`` when a program names none
    (``PT_INTERP`` missing), if it exists under the root."""
    cands = {62: "/lib64/ld-linux-x86-64.so.2", 183: "/lib/ld-linux-aarch64.so.1",
             3: "/lib/ld-linux.so.2"}
    p = cands.get(config.host.machine)
    if p and os.path.exists(in_root(config.root, p)):
        return p
    return None
