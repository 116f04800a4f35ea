"""A faithful model of how glibc's dynamic loader finds shared objects.

The model follows ``elf/dl-load.c`` (``_dl_map_object``, ``open_path``, ``open_verify``),
``elf/dl-deps.c`` (breadth-first dependency loading) and ``elf/dl-version.c`` (symbol
versions) of glibc 2.36, the version on Debian 12; see ``docs/libs.md`` for the order with
source references.  It never runs the code it looks at: it reads ELF headers (through
:mod:`envlock.libs.elf`), ``ld.so.cache`` (:mod:`envlock.libs.ldcache`) and directory entries.

Use :class:`Process`: :meth:`Process.start` models ``execve`` of a program (LD_PRELOAD,
then its DT_NEEDED breadth-first); :meth:`Process.dlopen` models ``dlopen`` from a caller
(by path, as Python imports extension modules, or by name, as ``ctypes.CDLL("libx.so.1")``
or a library's own runtime ``dlopen``).  Every lookup is recorded as a :class:`Resolution`
with the rule that found it and every file tried, in the loader's order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from envlock.libs import hwcaps as x86
from envlock.libs.elf import HOST, ElfCache, ElfInfo, HostAbi, check_ident, read_elf
from envlock.libs.ldcache import LdCache, read_ld_cache

__all__ = [
    "RULES",
    "ObjectKind",
    "RequestKind",
    "Rule",
    "Attempt",
    "LoadedObject",
    "Process",
    "Resolution",
    "SearchConfig",
    "VersionProblem",
    "breadth_first",
    "describe_tunables",
    "detect_config",
    "expand_dst",
    "split_path_list",
]

#: What found an object, or the list a tried file came from: a step of the loader's search
#: (:data:`RULES`), or ``"preload"`` for an ``LD_PRELOAD`` entry.
Rule = Literal["already-loaded", "slash", "rpath", "ld_library_path", "runpath", "ld.so.cache",
               "default", "preload"]

#: How a request was made: a ``DT_NEEDED`` entry, an ``LD_PRELOAD`` entry, a ``dlopen`` call.
RequestKind = Literal["needed", "preload", "dlopen"]

#: How an object came into the link map (:attr:`LoadedObject.kind`).
ObjectKind = Literal["executable", "interpreter", "preload", "needed", "dlopen"]

#: The rules that can find an object, in the order the loader applies them.
RULES: tuple[Rule, ...] = (
    "already-loaded",
    "slash",
    "rpath",
    "ld_library_path",
    "runpath",
    "ld.so.cache",
    "default",
)

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


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One file the loader tried.

    :ivar path: the path string as the loader builds it (not canonicalised).
    :ivar rule: the step it belongs to (see :data:`RULES`).
    :ivar source: which list it came from, e.g. ``"RPATH of /x/libtorch.so"``.
    :ivar outcome: ``"found"``, ``"absent"``, ``"wrong ELF class: ELFCLASS32"``,
        ``"wrong machine EM_AARCH64"`` or a fatal ``open_verify`` message.
    """

    path: str
    rule: Rule
    source: str
    outcome: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolution:
    """The answer to one request (a DT_NEEDED entry, a preload or a dlopen argument).

    :ivar name: the string requested.
    :ivar requester: path of the requesting object (``""`` for LD_PRELOAD).
    :ivar kind: ``"needed"``, ``"preload"`` or ``"dlopen"``.
    :ivar path: the path the object is known by (its ``l_name``), or ``None`` if not found.
    :ivar rule: what found it (see :data:`RULES`, plus ``"preload"``); ``None`` if not found.
    :ivar source: the list that held it (``"RPATH of …"``, ``"LD_LIBRARY_PATH"``, …).
    :ivar tried: every file tried, in order.
    :ivar error: the loader's error, e.g. ``"cannot open shared object file: No such file or
        directory"``.
    :ivar object_id: index of the object in :attr:`Process.objects`, or ``None``.
    :ivar filtee: ``"filter"`` (``DT_FILTER``: the load fails without it) or ``"auxiliary"``
        (``DT_AUXILIARY``: ignored when it cannot be loaded) when the name is a filter's
        filtee (glibc ``elf/dl-deps.c``), else ``None`` (``kind`` is then ``"needed"`` too).
    """

    name: str
    requester: str
    kind: RequestKind
    path: str | None = None
    rule: Rule | None = None
    source: str = ""
    tried: tuple[Attempt, ...] = ()
    error: str | None = None
    object_id: int | None = None
    filtee: Literal["filter", "auxiliary"] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionProblem:
    """A required symbol version the provider does not define (fatal in glibc).

    :ivar consumer: path of the object needing it.
    :ivar provider: path of the object that will be bound.
    :ivar file: the DT_NEEDED name of the provider (``vn_file``).
    :ivar version: the missing version, e.g. ``"GLIBCXX_3.4.30"``.
    :ivar message: glibc's text: ``<provider>: version `V' not found (required by <consumer>)``.
    """

    consumer: str
    provider: str
    file: str
    version: str
    message: str


@dataclass(kw_only=True, slots=True)
class LoadedObject:
    """One object in the modelled link map (mutable while the model runs).

    :ivar id: position in load order.
    :ivar path: ``l_name``: the path string the loader opened.
    :ivar info: the ELF facts.
    :ivar names: every name it was requested under (``l_libname``).
    :ivar loader: id of ``l_loader`` (the object whose DT_NEEDED loaded it); ``None`` for the
        executable and dlopen'ed objects.
    :ivar kind: ``"executable"``, ``"interpreter"``, ``"preload"``, ``"needed"``, ``"dlopen"``.
    :ivar origin: the ``$ORIGIN`` value for its strings.
    :ivar file_id: ``(st_dev, st_ino)``.
    :ivar deps: ids of the objects its DT_NEEDED entries resolved to, in order.
    :ivar resolution: the :class:`Resolution` that loaded it (``None`` for the executable).
    :ivar group: id of the object whose ``execve``/``dlopen`` first loaded it (the root of
        its local scope, ``l_searchlist``, used when its relocations are processed).
    :ivar filtees: ids of its filtees (``DT_FILTER``/``DT_AUXILIARY`` objects loaded), in
        order; they come before it in every search list.
    :ivar in_global: part of the global scope (the program's closure, LD_PRELOAD, and the
        closures of ``RTLD_GLOBAL`` dlopens; glibc ``elf/dl-open.c`` ``add_to_global``).
    """

    id: int
    path: str
    info: ElfInfo
    names: list[str] = field(default_factory=list)
    loader: int | None = None
    kind: ObjectKind = "needed"
    origin: str | None = None
    file_id: tuple[int, int] = (0, 0)
    deps: list[int] = field(default_factory=list)
    resolution: Resolution | None = None
    group: int | None = None
    in_global: bool = False
    filtees: list[int] = field(default_factory=list)

    @property
    def soname(self) -> str | None:
        """``DT_SONAME``."""
        return self.info.soname


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


def expand_dst(s: str, *, origin: str | None, platform: str, lib: str) -> str | None:
    """Replace ``$ORIGIN``, ``$PLATFORM``, ``$LIB`` (and ``${…}``) in ``s``.

    :returns: the expanded string, or ``None`` when a token has no value (the loader then
        drops the element).  Source: glibc ``elf/dl-load.c`` ``_dl_dst_substitute``.
    """
    if "$" not in s:
        return s
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        name = m.group(2) or m.group(3)
        if name == "ORIGIN":
            if origin is None:
                missing = True
                return ""
            return origin
        return platform if name == "PLATFORM" else lib

    out = _DST.sub(sub, s)
    return None if missing else out


# -- configuration -------------------------------------------------------------------------


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _in_root(root: str, path: str) -> str:
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
    :param cpu_flags: CPU feature names as in ``/proc/cpuinfo``; read from it when ``None``.
    :param vendor: CPU vendor id (``GenuineIntel`` selects the ``haswell``/``xeon_phi``
        platforms and the ``avx512_1`` hwcap; read from ``/proc/cpuinfo`` when ``None``).
    :returns: a :class:`SearchConfig`.
    """
    env = os.environ if env is None else env
    triplet = _MULTIARCH.get(host.machine, "")
    if triplet and os.path.exists(_in_root(root, f"/lib/{triplet}/libc.so.6")):
        system_dirs: tuple[str, ...] = (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib")
    elif host.elfclass == 64 and os.path.exists(_in_root(root, "/lib64/libc.so.6")):
        system_dirs = ("/lib64", "/usr/lib64")
    else:
        system_dirs = ("/lib", "/usr/lib")
    cache = read_ld_cache(root)
    glibc = _glibc_version(root, cache, system_dirs)
    if cpu_flags is None or vendor is None:
        text = _read_text("/proc/cpuinfo") or ""
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
        if cpu_flags is None:
            cpu_flags = frozenset(m.group(1).split()) if m else frozenset()
        if vendor is None:
            v = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
            vendor = v.group(1) if v else ""
    platform = _PLATFORM.get(host.machine, os.uname().machine)
    tunables = x86.read_tunables(env, secure=secure, glibc=glibc)
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
        # Legacy hwcaps (glibc elf/dl-hwcaps.c, _dl_important_hwcaps before 2.37): every
        # non-empty subset of (tls, the platform, the masked AT_HWCAP names from the highest
        # bit down), the largest first and tls most significant — LD_DEBUG=libs on 2.36.
        comps = ["tls", platform, *legacy_hwcap] if host.machine == 62 else ["tls", platform]
        comps = [c for c in comps if c]
        n = len(comps)
        for mask in range((1 << n) - 1, 0, -1):
            parts = [comps[i] for i in range(n) if mask & (1 << (n - 1 - i))]
            subdirs.append("/".join(parts))
    # $LIB is DL_DST_LIB: upstream the last component of slibdir ("lib64"); Debian's
    # multiarch patch makes it "lib/<triplet>" (observed with LD_DEBUG=libs on Debian 12).
    lib = system_dirs[0].lstrip("/") if triplet and system_dirs[0] == f"/lib/{triplet}" else (
        system_dirs[0].rsplit("/", 1)[-1])
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
    from envlock.libs.glibc import SYSTEM_LIB_DIRS, detect_glibc  # noqa: PLC0415

    found = detect_glibc(root or "/", dirs=tuple(dict.fromkeys((*system_dirs, *SYSTEM_LIB_DIRS))))
    if found:
        m = re.match(r"(\d+)\.(\d+)", found.version)
        if m:
            return (int(m.group(1)), int(m.group(2)))
    return (2, 36)


# -- the process model ---------------------------------------------------------------------


class _HasDeps(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def deps(self) -> Sequence[int]: ...


_Node = TypeVar("_Node", bound=_HasDeps)


def breadth_first(root: _Node, objects: Sequence[_Node]) -> list[_Node]:
    """``root`` and every object reachable through ``deps`` (indices into ``objects``),
    breadth-first, each once — the order of glibc's ``l_searchlist`` (``elf/dl-deps.c``).
    Iterative and linear in the number of edges."""
    out = [root]
    seen = {root.id}
    i = 0
    while i < len(out):
        for d in out[i].deps:
            if d not in seen:
                seen.add(d)
                out.append(objects[d])
        i += 1
    return out


class Process:
    """The link map of one modelled process, grown by :meth:`start` and :meth:`dlopen`.

    :param config: the :class:`SearchConfig`.
    :param elf_cache: an :class:`~envlock.libs.elf.ElfCache` for parsed facts, or ``None``.
    """

    def __init__(self, config: SearchConfig, *, elf_cache: ElfCache | None = None) -> None:
        self.config = config
        self.elf_cache = elf_cache
        self.objects: list[LoadedObject] = []
        self.resolutions: list[Resolution] = []
        self.version_problems: list[VersionProblem] = []
        self.preload_errors: list[str] = []
        self.main: LoadedObject | None = None
        self._dir_status: dict[tuple[str, int], bool] = {}
        self._listing: dict[str, frozenset[str] | None] = {}
        self._infos: dict[str, ElfInfo] = {}
        self._ids: dict[str, tuple[int, int]] = {}
        self._keys: dict[int, tuple[Any, ...]] = {}
        self._dirs_cache: dict[tuple[int, str], list[str]] = {}
        self._what_if: dict[tuple[Any, ...], tuple[str | None, Rule | None, str]] = {}
        self._env_dirs = self._parse_env_dirs(config.ld_library_path)
        #: True while a dlopen and its dependencies are loaded (``__RTLD_DLOPEN``).
        self._in_dlopen = False
        self._by_name: dict[str, int] = {}
        self._by_soname: dict[str, int] = {}
        self._by_fid: dict[tuple[int, int], int] = {}
        #: glibc's refusal of the main program itself (``ld.so FILE``), if any.
        self.main_error: str | None = None
        #: One entry per load operation (:meth:`start`, then each :meth:`dlopen`), in order:
        #: ``(index of its first request in resolutions, id of the object it loaded or None)``.
        self.loads: list[tuple[int, int | None]] = []

    # -- helpers ---------------------------------------------------------------------------
    def _host(self, path: str) -> str:
        """The real path on this machine of loader path ``path`` (prefix the root; a
        relative path is relative to the process's working directory, ``config.cwd``)."""
        if not path.startswith("/"):
            path = os.path.join(self.config.cwd, path) if path else self.config.cwd
        return _in_root(self.config.root, path)

    def absolute(self, path: str) -> str:
        """``path`` made absolute against the process's working directory, not normalised
        (what glibc does for ``l_origin``: ``/cwd/./sub`` stays so)."""
        return path if path.startswith("/") else f"{self.config.cwd.rstrip('/')}/{path}"

    def info(self, path: str) -> ElfInfo:
        """Parsed ELF facts of ``path`` (a loader path; cached per path)."""
        got = self._infos.get(path)
        if got is None:
            got = read_elf(self._host(path), cache=self.elf_cache)
            got = _with_path(got, path)
            self._infos[path] = got
        return got

    def _parse_env_dirs(self, value: str | None) -> list[str]:
        """``LD_LIBRARY_PATH`` as ``_dl_init_paths`` reads it: split on ``:``/``;``, dynamic
        string tokens expanded for the main program (``$ORIGIN`` is its directory; before the
        main program is known an element with ``$ORIGIN`` is dropped), relative elements kept
        relative (``ldd`` prints ``sub/libx.so``), an empty element for the current
        directory.  An empty value is ignored altogether."""
        if not value or self.config.secure:
            return []
        origin = self.main.origin if self.main is not None else None
        out = []
        for d in split_path_list(value, ":;"):
            e = expand_dst(d, origin=origin, platform=self.config.platform, lib=self.config.lib)
            if e is None:
                continue
            out.append(self._absolute(e))
        return _dedupe(out)

    def _absolute(self, d: str) -> str:
        """A search directory as the loader keeps it: as given (relative ones are opened
        relative to the working directory; ``""`` is the working directory itself)."""
        return d

    def _dirs_of(self, obj: LoadedObject, which: str) -> list[str]:
        key = (obj.id, which)
        got = self._dirs_cache.get(key)
        if got is None:
            got = self._dirs_cache[key] = self._compute_dirs(obj, which)
        return got

    def _compute_dirs(self, obj: LoadedObject, which: str) -> list[str]:
        raw = obj.info.effective_rpath if which == "rpath" else obj.info.runpath
        if not raw:
            return []
        out = []
        for d in split_path_list(raw):
            e = expand_dst(d, origin=obj.origin, platform=self.config.platform, lib=self.config.lib)
            if e is None or (e == "" and d != ""):
                continue
            out.append(self._absolute(e))
        return _dedupe(out)

    def _listdir(self, d: str, base: str | None = None) -> frozenset[str] | None:
        """Names in directory ``d`` (``None`` if it does not exist).  ``base``: a parent of
        ``d`` already listed; when ``d``'s first component below it is missing, ``d`` cannot
        exist and is not asked for (saves a system call per absent hwcaps subdirectory)."""
        if d in self._listing:
            return self._listing[d]
        if base is not None and d != base:
            parent = self._listdir(base)
            first = d[len(base) + 1:].split("/", 1)[0]
            if parent is None or first not in parent:
                self._listing[d] = None
                return None
        try:
            names: frozenset[str] | None = frozenset(os.listdir(self._host(d)))
        except OSError:
            names = None
        self._listing[d] = names
        return names

    def _verify(self, path: str) -> tuple[str, str]:
        """Open and check a candidate like ``open_verify``: (status, message).

        ``status`` is ``"ok"``, ``"skip"`` (wrong class/machine: the search goes on),
        ``"fatal"`` (the load fails), ``"absent"`` (``ENOENT``/``EACCES``: the search goes on;
        the message is ``"Permission denied"`` for the latter) or ``"error"`` (any other
        ``open`` error, e.g. ``ELOOP``: ``open_path`` stops searching the current list, glibc
        ``elf/dl-load.c``: "The file exists and is readable, but something went wrong").
        """
        import errno  # noqa: PLC0415

        import stat  # noqa: PLC0415

        try:
            # O_NONBLOCK: a FIFO on a search path would make ld.so wait for a writer forever;
            # the model says so instead of waiting with it
            fd = os.open(self._host(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
                os.close(fd)
                return ("fatal", "cannot read file data: not a regular file (ld.so would block "
                                 "reading it)")
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as f:
                head = f.read(64)
                v = check_ident(head, self.config.host)
                if v.status == "ok":
                    # open_verify then reads the program headers; a short read is fatal.
                    size = os.fstat(f.fileno()).st_size
                    if len(head) >= 64 and head[4] == 2:
                        e = "<" if head[5] == 1 else ">"
                        phoff = int.from_bytes(head[32:40], "little" if e == "<" else "big")
                        phent = int.from_bytes(head[54:56], "little" if e == "<" else "big")
                        phnum = int.from_bytes(head[56:58], "little" if e == "<" else "big")
                        if phoff + phent * phnum > size:
                            return ("fatal", "cannot read file data")
        except IsADirectoryError:
            # open(2) succeeds on a directory and read(2) fails with EISDIR: a fatal
            # open_verify error ("cannot read file data"), not a miss (glibc elf/dl-load.c).
            return ("fatal", "cannot read file data: Is a directory")
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return ("absent", "")
            if exc.errno == errno.EACCES:
                return ("absent", "Permission denied")
            return ("error", exc.strerror or str(exc))
        return (v.status, v.message)

    def _file_id(self, path: str) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of loader path ``path`` (``(0, 0)`` if it cannot be stat'ed)."""
        got = self._ids.get(path)
        if got is None:
            try:
                st = os.stat(self._host(path))
                got = (st.st_dev, st.st_ino)
            except OSError:
                got = (0, 0)
            self._ids[path] = got
        return got

    def same_file(self, a: str, b: str) -> bool:
        """Whether two loader paths name the same file (by device and inode)."""
        fa = self._file_id(a)
        return fa != (0, 0) and fa == self._file_id(b)

    # -- search ----------------------------------------------------------------------------
    def _try_dirs(
        self, name: str, dirs: list[str], rule: Rule, source: str, tried: list[Attempt],
        state: dict[str, Any],
    ) -> str | None:
        """``open_path``: try ``dir/subdir/name`` for each dir and subdir; first hit wins.

        After the subdirectories of one directory, an ``open`` error other than ``ENOENT`` or
        ``EACCES`` on the last file tried (a symlink loop: ``ELOOP``) ends this list
        (``state["stopped"]``); the caller goes on with the next step of the search, as
        ``_dl_map_object`` does.
        """
        for d in dirs:
            last_error = ""
            for idx, sub in enumerate((*self.config.subdirs, "")):
                sd = (f"{d}/{sub}" if d else sub) if sub else d
                key = (d, idx)
                status = self._dir_status.get(key)
                if status is False:
                    continue
                cand = f"{sd}/{name}" if sd else name
                listing = self._listdir(sd, d)
                if listing is None or name not in listing:
                    tried.append(Attempt(path=cand, rule=rule, source=source, outcome="absent"))
                    last_error = ""
                    if status is None:
                        self._dir_status[key] = listing is not None
                    continue
                verdict, msg = self._verify(cand)
                if status is None:
                    self._dir_status[key] = True
                last_error = msg if verdict == "error" else ""
                if verdict == "ok":
                    tried.append(Attempt(path=cand, rule=rule, source=source, outcome="found"))
                    return cand
                if verdict in ("absent", "error"):
                    tried.append(Attempt(path=cand, rule=rule, source=source, outcome=msg or "absent"))
                    continue
                tried.append(Attempt(path=cand, rule=rule, source=source, outcome=msg))
                if verdict == "skip":
                    if msg.startswith("wrong ELF class"):
                        state["other_class"] = msg
                    continue
                state["fatal"] = f"{cand}: {msg}"
                return None
            if last_error:
                state["stopped"] = f"{d}/{name}: {last_error}"
                return None
        return None

    def _chain(self, loader: LoadedObject | None) -> list[LoadedObject]:
        out = []
        seen: set[int] = set()
        obj = loader
        while obj is not None and obj.id not in seen:
            seen.add(obj.id)
            out.append(obj)
            obj = self.objects[obj.loader] if obj.loader is not None else None
        return out

    def search(
        self, name: str, loader: LoadedObject | None, *, preload: bool = False,
        use_env: bool = True,
    ) -> tuple[str | None, Rule | None, str, list[Attempt], str | None]:
        """Search for a bare ``name`` on behalf of ``loader`` (``_dl_map_object``'s order).

        :param use_env: honour LD_LIBRARY_PATH (``False`` answers "what if it were unset").
        :returns: ``(path, rule, source, tried, error)``.
        """
        tried: list[Attempt] = []
        state: dict[str, Any] = {}
        main = self.main
        cfg = self.config

        def done(path: str | None, rule: Rule | None, source: str) -> tuple[Any, ...]:
            return (path, rule, source, tried, state.get("fatal"))

        if loader is None or loader.info.runpath is None:
            did_main = False
            for obj in self._chain(loader):
                dirs = self._dirs_of(obj, "rpath")
                if dirs:
                    src = f"RPATH of {obj.path}"
                    hit = self._try_dirs(name, dirs, "rpath", src, tried, state)
                    if hit or "fatal" in state:
                        return done(hit, "rpath", src)
                    did_main |= obj is main
            if not did_main and main is not None and main.kind == "executable":
                dirs = self._dirs_of(main, "rpath")
                if dirs:
                    src = f"RPATH of {main.path} (the executable)"
                    hit = self._try_dirs(name, dirs, "rpath", src, tried, state)
                    if hit or "fatal" in state:
                        return done(hit, "rpath", src)
        if use_env and self._env_dirs:
            hit = self._try_dirs(name, self._env_dirs, "ld_library_path", "LD_LIBRARY_PATH", tried, state)
            if hit or "fatal" in state:
                return done(hit, "ld_library_path", "LD_LIBRARY_PATH")
        if loader is not None and loader.info.runpath is not None:
            dirs = self._dirs_of(loader, "runpath")
            if dirs:
                src = f"RUNPATH of {loader.path}"
                hit = self._try_dirs(name, dirs, "runpath", src, tried, state)
                if hit or "fatal" in state:
                    return done(hit, "runpath", src)
        deflib_obj = loader or main
        nodeflib = deflib_obj is not None and deflib_obj.info.nodeflib
        if cfg.cache is not None and not (cfg.secure and preload):
            entry = cfg.cache.lookup(name, machine=cfg.host.machine, hwcaps_active=cfg.hwcaps_active)
            if entry is not None and not (nodeflib and _in_dirs(entry.path, cfg.system_dirs)):
                verdict, msg = self._verify(entry.path)
                src = cfg.cache.path.replace(cfg.root.rstrip("/"), "", 1) if cfg.root != "/" else cfg.cache.path
                outcome = "found" if verdict == "ok" else (msg or "absent")
                tried.append(Attempt(path=entry.path, rule="ld.so.cache", source=src, outcome=outcome))
                if verdict == "ok":
                    return done(entry.path, "ld.so.cache", src)
                if verdict == "skip" and msg.startswith("wrong ELF class"):
                    state["other_class"] = msg
                elif verdict == "fatal":
                    state["fatal"] = f"{entry.path}: {msg}"
                    return done(None, "ld.so.cache", src)
        if not nodeflib:
            hit = self._try_dirs(name, list(cfg.system_dirs), "default", "system search path", tried, state)
            if hit or "fatal" in state:
                return done(hit, "default", "system search path")
        return (None, None, "", tried, state.get("other_class"))

    def what_if(
        self, name: str, requester: LoadedObject | None, *, ld_library_path: str | None,
    ) -> tuple[str | None, Rule | None, str]:
        """Search ``name`` for ``requester`` with another LD_LIBRARY_PATH, ignoring objects
        already loaded, without changing the model's state.

        :returns: ``(path, rule, source)`` — what the loader would pick then.
        """
        key = (name, ld_library_path, self._search_key(requester))
        if key in self._what_if:
            return self._what_if[key]
        saved = (dict(self._dir_status), self._env_dirs)
        try:
            self._env_dirs = self._parse_env_dirs(ld_library_path)
            path, rule, source, _tried, _err = self.search(name, requester)
        finally:
            self._dir_status, self._env_dirs = saved
        self._what_if[key] = (path, rule, source)
        return path, rule, source

    def _search_key(self, loader: LoadedObject | None) -> tuple[Any, ...]:
        """What a search's result depends on besides the name: the directory lists used."""
        lid = loader.id if loader is not None else -1
        got = self._keys.get(lid)
        if got is None:
            got = self._keys[lid] = self._compute_search_key(loader)
        return got

    def _compute_search_key(self, loader: LoadedObject | None) -> tuple[Any, ...]:
        if loader is not None and loader.info.runpath is not None:
            return ("runpath", tuple(self._dirs_of(loader, "runpath")), loader.info.nodeflib)
        chain = tuple(tuple(self._dirs_of(o, "rpath")) for o in self._chain(loader))
        main = tuple(self._dirs_of(self.main, "rpath")) if self.main is not None else ()
        who = loader or self.main
        nodeflib = who.info.nodeflib if who else False
        return ("rpath", chain, main, nodeflib)

    def _index(self, obj: LoadedObject) -> None:
        """Record ``obj``'s path, names, SONAME and file id in the lookup indexes."""
        self._by_name.setdefault(obj.path, obj.id)
        for n in obj.names:
            self._by_name.setdefault(n, obj.id)
        if obj.info.soname:
            self._by_soname.setdefault(obj.info.soname, obj.id)
        if obj.file_id != (0, 0):
            self._by_fid.setdefault(obj.file_id, obj.id)

    def _add_name(self, obj: LoadedObject, name: str) -> None:
        if name not in obj.names and name != obj.path:
            obj.names.append(name)
        self._by_name.setdefault(name, obj.id)

    def _match_loaded(self, name: str) -> LoadedObject | None:
        """``_dl_map_object``'s first loop: the first object in load order whose l_name or
        an l_libname is ``name``, or whose DT_SONAME is (which then joins its names).
        Indexed, so a long chain costs linear time."""
        a = self._by_name.get(name)
        b = self._by_soname.get(name)
        if a is None and b is None:
            return None
        if b is None or (a is not None and a <= b):
            return self.objects[a]  # type: ignore[index]
        obj = self.objects[b]
        self._add_name(obj, name)
        return obj

    def _expand_slash(self, name: str, requester: LoadedObject | None) -> str | None:
        origin = requester.origin if requester is not None else None
        e = expand_dst(name, origin=origin, platform=self.config.platform, lib=self.config.lib)
        if e is None:
            return None
        return e if e.startswith("/") else os.path.join(self.config.cwd, e)

    def _new_object(self, path: str, kind: ObjectKind, loader: LoadedObject | None, name: str | None,
                    origin_path: str | None = None) -> LoadedObject:
        info = self.info(path)
        origin_src = self.absolute(origin_path or path)
        obj = LoadedObject(
            id=len(self.objects), path=path, info=info,
            names=[name] if name and name != path else [],
            loader=loader.id if loader is not None else None, kind=kind,
            origin=os.path.dirname(origin_src) or "/", file_id=self._file_id(path),
        )
        self.objects.append(obj)
        self._index(obj)
        return obj

    def map_object(
        self, name: str, requester: LoadedObject | None, *, kind: RequestKind = "needed",
        caller: LoadedObject | None = None, filtee: Literal["filter", "auxiliary"] | None = None,
    ) -> tuple[Resolution, LoadedObject | None, bool]:
        """Find (or reuse) the object for ``name``; returns (resolution, object, is_new).

        :param requester: the object whose DT_NEEDED this is (or the dlopen caller).
        :param kind: ``"needed"``, ``"preload"`` or ``"dlopen"`` (``l_loader`` is then unset).
        """
        req_path = requester.path if requester is not None else ""
        hit = self._match_loaded(name)
        if hit is not None:
            res = Resolution(name=name, requester=req_path, kind=kind, filtee=filtee, path=hit.path,
                             rule="already-loaded", source=_describe(hit), object_id=hit.id)
            self.resolutions.append(res)
            return res, hit, False
        tried: list[Attempt] = []
        error = None
        rule: Rule | None
        if "/" in name:
            path = self._expand_slash(name, requester)
            rule, source = "slash", "the name contains a slash"
            if path is not None:
                verdict, msg = self._verify(path)
                outcome = "found" if verdict == "ok" else (msg or "absent")
                tried.append(Attempt(path=path, rule=rule, source=source, outcome=outcome))
                if verdict != "ok":
                    if verdict == "fatal":
                        error = msg
                    elif verdict == "error":
                        error = f"cannot open shared object file: {msg}"
                    else:
                        error = ("cannot open shared object file: "
                                 + ("Permission denied" if msg == "Permission denied"
                                    else "No such file or directory"))
                    path = None
            else:
                error = "cannot expand dynamic string tokens"
        else:
            path, rule, source, tried, error = self.search(
                name, requester, preload=kind == "preload")
            if path is None and error is None:
                error = "cannot open shared object file: No such file or directory"
        if path is None:
            res = Resolution(name=name, requester=req_path, kind=kind, filtee=filtee, rule=None, source="",
                             tried=tuple(tried), error=error)
            self.resolutions.append(res)
            return res, None, False
        fid = self._file_id(path)
        same = self._by_fid.get(fid) if fid != (0, 0) else None
        for obj in ([self.objects[same]] if same is not None else []):
            if obj.file_id == fid:
                self._add_name(obj, name)
                res = Resolution(name=name, requester=req_path, kind=kind, filtee=filtee, path=obj.path,
                                 rule=rule, source=f"{source}; same file as {obj.path} (already loaded)",
                                 tried=tuple(tried), object_id=obj.id)
                self.resolutions.append(res)
                return res, obj, False
        # _dl_map_object_from_fd: a file accepted by open_verify can still be refused when it
        # is mapped (no PT_LOAD, no PT_DYNAMIC, misaligned segments, ET_EXEC or a PIE outside
        # __RTLD_OPENEXEC, DF_1_NOOPEN under __RTLD_DLOPEN).  The load fails; nothing more
        # is searched; glibc names the request, not the file (glibc 2.36 elf/dl-load.c lose()).
        refusal = self.info(path).refusal(dlopen=kind == "dlopen" or self._in_dlopen)
        if refusal is not None:
            if tried and tried[-1].path == path:
                tried[-1] = Attempt(path=path, rule=tried[-1].rule, source=tried[-1].source,
                                    outcome=refusal)
            else:
                tried.append(Attempt(path=path, rule=rule or "slash", source=source, outcome=refusal))
            res = Resolution(name=name, requester=req_path, kind=kind, filtee=filtee, rule=None, source="",
                             tried=tuple(tried), error=f"{name}: {refusal}")
            self.resolutions.append(res)
            return res, None, False
        loader = requester if kind in ("needed", "preload") else None
        obj = self._new_object(path, kind, loader, name)
        rule_final: Rule | None
        if kind == "preload":
            rule_final = "preload"
        else:
            rule_final = rule
        res = Resolution(name=name, requester=req_path, kind=kind, filtee=filtee, path=path, rule=rule_final,
                         source=source, tried=tuple(tried), object_id=obj.id)
        obj.resolution = res
        self.resolutions.append(res)
        return res, obj, True

    def _load_deps(self, roots: list[LoadedObject]) -> list[LoadedObject]:
        """``_dl_map_object_deps``: breadth-first over DT_NEEDED, starting at ``roots``."""
        queue = list(roots)
        seen = {o.id for o in roots}
        new: list[LoadedObject] = []
        i = 0
        while i < len(queue):
            obj = queue[i]
            i += 1
            # A filter's DT_FILTER/DT_AUXILIARY entries are loaded in dynamic-section order
            # among its DT_NEEDED ones; each filtee is processed right after the filter.
            entries = obj.info.dyn_deps or tuple(("needed", n) for n in obj.info.needed)
            insert_at = i
            for tag, needed in entries:
                filtee = None if tag == "needed" else tag
                _res, dep, is_new = self.map_object(
                    needed, obj, filtee=filtee)  # type: ignore[arg-type]
                if dep is None:
                    continue
                obj.deps.append(dep.id)
                if is_new:
                    new.append(dep)
                if filtee is not None:
                    obj.filtees.append(dep.id)
                    if dep.id not in seen:
                        seen.add(dep.id)
                        queue.insert(insert_at, dep)
                        insert_at += 1
                    continue
                if dep.id not in seen:
                    seen.add(dep.id)
                    queue.append(dep)
        return new

    def start(self, executable: str, *, as_main_path: str | None = None,
              interpreter: str | None = None) -> LoadedObject:
        """Model ``execve(executable)``: the executable, LD_PRELOAD, then its dependencies.

        :param executable: the program (its real path: the kernel resolves symlinks, and
            glibc takes ``$ORIGIN`` from ``/proc/self/exe``).
        :param as_main_path: the main map's name when it differs (``ldd FILE`` uses FILE).
        :param interpreter: the dynamic loader's path (default: PT_INTERP, else the system's).
        :returns: the executable's object.
        """
        path = as_main_path or executable
        first_request = len(self.resolutions)
        main = self._new_object(path, "executable", None, None, origin_path=executable)
        self.loads.append((first_request, main.id))
        main.names = []
        self.main = main
        # The main map is created as "" (rtld.c: _dl_new_object ("", "", lt_executable, …)),
        # so an empty DT_NEEDED string is satisfied by the program itself.
        self._add_name(main, "")
        # LD_LIBRARY_PATH's $ORIGIN is the main program's (glibc _dl_init_paths, l = main map).
        self._env_dirs = self._parse_env_dirs(self.config.ld_library_path)
        self._keys.clear()
        # ld.so FILE maps the program with __RTLD_OPENEXEC: ET_EXEC and PIEs are fine, the
        # other refusals of _dl_map_object_from_fd are not.
        if main.info.ok:
            self.main_error = main.info.refusal(dlopen=False, main=True)
        interp = interpreter or main.info.interp or _default_interp(self.config)
        if interp:
            rtld_info = self.info(interp)
            if rtld_info.ok:
                rtld = self._new_object(interp, "interpreter", None, None)
                rtld.names = [n for n in {rtld_info.soname} if n]
                self._index(rtld)
        preloads: list[LoadedObject] = []
        if self.config.ld_preload and not self.config.secure:
            for p in re.split(r"[ :]+", self.config.ld_preload.strip()):
                if not p:
                    continue
                res, obj, is_new = self.map_object(p, main, kind="preload")
                if obj is None:
                    # glibc prints the error string without the errno text.
                    why = re.sub(r": (No such file or directory|Is a directory)$", "", res.error or "")
                    self.preload_errors.append(
                        f"ERROR: ld.so: object '{p}' from LD_PRELOAD cannot be preloaded "
                        f"({why}): ignored.")
                elif is_new:
                    preloads.append(obj)
        preload_root = _read_text(_in_root(self.config.root, "/etc/ld.so.preload"))
        if preload_root:
            for p in re.split(r"[ :\t\n]+", preload_root.strip()):
                if p:
                    res, obj, is_new = self.map_object(p, main, kind="preload")
                    if obj is None:
                        why = re.sub(r": (No such file or directory|Is a directory)$", "",
                                     res.error or "")
                        self.preload_errors.append(
                            f"ERROR: ld.so: object '{p}' from /etc/ld.so.preload cannot be "
                            f"preloaded ({why}): ignored.")
                    elif is_new:
                        preloads.append(obj)
        if self.main_error is not None:
            return main
        new = self._load_deps([main, *preloads])
        for o in self.objects:
            o.group = main.id
            o.in_global = o.kind != "interpreter" or o.in_global
        self._check_versions([main, *preloads, *new])
        return main

    def closure(self, root: LoadedObject) -> list[LoadedObject]:
        """``l_searchlist`` of ``root``: it and its dependencies, breadth-first, each once,
        each filter's filtees moved just before it (:meth:`filters_first`)."""
        return self.filters_first(breadth_first(root, self.objects))

    def filters_first(self, order: list[LoadedObject]) -> list[LoadedObject]:
        """``order`` with every filtee that comes after its filter moved to just before it,
        as glibc ``elf/dl-deps.c`` ``_dl_map_object_deps`` builds a search list (a filtee
        already earlier stays where it is); so a symbol the filtee defines is found there."""
        if not any(o.filtees for o in order):
            return order
        out = list(order)
        for filt in [o for o in order if o.filtees]:
            for fid in filt.filtees:
                pos = {o.id: k for k, o in enumerate(out)}
                if fid in pos and pos[fid] > pos[filt.id]:
                    dep = out.pop(pos[fid])
                    out.insert(pos[filt.id], dep)
        return out

    def scope(self, obj: LoadedObject) -> list[LoadedObject]:
        """The objects searched, in order, when ``obj``'s symbols are bound: the global
        scope, then the local scope of the dlopen that loaded it (glibc ``l_scope``)."""
        out = self.filters_first(
            [o for o in self.objects if o.in_global and o.kind != "interpreter"])
        rtld = [o for o in self.objects if o.kind == "interpreter"]
        if obj.group is not None and not obj.in_global:
            seen = {o.id for o in out}
            out += [o for o in self.closure(self.objects[obj.group]) if o.id not in seen]
        return out + rtld

    def dlopen(self, name: str, caller: LoadedObject | None = None, *,
               global_scope: bool = False) -> Resolution:
        """Model ``dlopen(name)`` called from ``caller`` (the executable when ``None``).

        The new object's ``l_loader`` is unset, so its dependencies search its own RPATH
        and then the executable's (glibc ``elf/dl-open.c``, ``__RTLD_CALLMAP``).

        :param global_scope: ``RTLD_GLOBAL``: the object and its dependencies join the global
            scope.
        :returns: the :class:`Resolution` of ``name``.
        """
        caller = caller or self.main
        self._in_dlopen = True
        first_request = len(self.resolutions)
        try:
            res, obj, is_new = self.map_object(name, caller, kind="dlopen")
            self.loads.append((first_request, obj.id if obj is not None and is_new else None))
            if obj is not None and is_new:
                new = self._load_deps([obj])
                for o in (obj, *new):
                    o.group = obj.id
                self._check_versions([obj, *new])
            if obj is not None and global_scope:
                for o in self.closure(obj):
                    o.in_global = True
        finally:
            self._in_dlopen = False
        return res

    # -- versions --------------------------------------------------------------------------
    def provider_of(self, obj: LoadedObject, file: str) -> LoadedObject | None:
        """The loaded dependency of ``obj`` that the name ``file`` refers to (``find_needed``)."""
        i = self._by_name.get(file)
        if i is not None:
            return self.objects[i]
        for dep_id in obj.deps:
            dep = self.objects[dep_id]
            if file == dep.info.soname:
                return dep
        return None

    def _check_versions(self, objs: list[LoadedObject]) -> None:
        """``_dl_check_map_versions``: each Verneed against the provider's Verdef."""
        for obj in objs:
            for need in obj.info.verneed:
                prov = self.provider_of(obj, need.file)
                if prov is None or not prov.info.verdef:
                    continue
                defined = {(d.hash, d.name) for d in prov.info.verdef}
                for v in need.versions:
                    if (v.hash, v.name) in defined or v.weak:
                        continue
                    self.version_problems.append(VersionProblem(
                        consumer=obj.path, provider=prov.path, file=need.file, version=v.name,
                        message=f"{prov.path}: version `{v.name}' not found (required by {obj.path})",
                    ))

    # -- queries ---------------------------------------------------------------------------
    def find(self, path_or_name: str) -> LoadedObject | None:
        """The loaded object known by this path, name or SONAME (no side effects)."""
        hits = [i for i in (self._by_name.get(path_or_name), self._by_soname.get(path_or_name))
                if i is not None]
        return self.objects[min(hits)] if hits else None


def _with_path(info: ElfInfo, path: str) -> ElfInfo:
    if info.path == path:
        return info
    import dataclasses  # noqa: PLC0415

    return dataclasses.replace(info, path=path)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _in_dirs(path: str, dirs: tuple[str, ...]) -> bool:
    d = os.path.dirname(path)
    return d in dirs


def _describe(obj: LoadedObject) -> str:
    how = {"executable": "the executable", "interpreter": "the dynamic loader",
           "preload": "preloaded", "dlopen": "dlopen'ed", "needed": "loaded"}[obj.kind]
    return f"{how} as {obj.path}"


def _default_interp(config: SearchConfig) -> str | None:
    cands = {62: "/lib64/ld-linux-x86-64.so.2", 183: "/lib/ld-linux-aarch64.so.1",
             3: "/lib/ld-linux.so.2"}
    p = cands.get(config.host.machine)
    if p and os.path.exists(_in_root(config.root, p)):
        return p
    return None
