"""What every findings rule reads: the analysed process and the target, and the helpers rules
share (who owns a file, which lists were searched, where stray copies lie).

A rule (:mod:`envlock.libs.rules_request`, :mod:`envlock.libs.rules_process`) is a small
function of a :class:`Context`; :mod:`envlock.libs.diagnose` holds the table of rules and runs
it.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envlock.libs.config import SearchConfig
from envlock.libs.elfread import read_elf
from envlock.libs.objects import LoadedObject, Resolution
from envlock.libs.owners import OwnerIndex
from envlock.libs.pins import Pin, read_pins
from envlock.libs.linkmap import Process
from envlock.libs.report import LibEntry, RuntimeResult
from envlock.libs.runtime import TorchPlan

__all__ = ["Context", "find_by_soname", "max_version", "owner_text", "pin_for", "search_dirs_of",
           "searched_summary", "soname_link_fix", "stray_dirs"]

#: ``ldconfig`` by its path: glibc installs it in ``/sbin`` (``rootsbindir``), which a merged-/usr
#: system keeps as a link to ``/usr/sbin``; a user's ``PATH`` often has neither.
LDCONFIG = "/sbin/ldconfig"


@dataclass(frozen=True, kw_only=True)
class Context:
    """The inputs of the findings rules.

    :ivar proc: the loader model after the module's import.
    :ivar entries: its objects as reported.
    :ivar runtime: the run-time dlopens resolved.
    :ivar index: who owns each file (``None``: not looked up).
    :ivar plan: torch's preload plan (``None``: not torch).
    :ivar sys_path: the target's ``sys.path``; ``prefix`` its prefix; ``cfg`` the loader's
        configuration.
    :ivar seen: keys of the findings made so far (a rule that may repeat adds its own).
    """

    proc: Process
    entries: list[LibEntry]
    runtime: list[RuntimeResult]
    index: OwnerIndex | None
    plan: TorchPlan | None
    sys_path: Sequence[str]
    prefix: str | None
    cfg: SearchConfig
    seen: set[tuple[str, ...]] = field(default_factory=set)
    _memo: dict[str, Any] = field(default_factory=dict)

    def runtime_of(self, res: Resolution) -> RuntimeResult | None:
        """The run-time dlopen that made request ``res``, if one did."""
        by_res = self._memo.get("runtime")
        if by_res is None:
            by_res = self._memo["runtime"] = {id(r.resolution): r for r in self.runtime}
        return by_res.get(id(res))  # type: ignore[no-any-return]

    def object_at(self, path: str) -> LoadedObject | None:
        """The loaded object whose ``l_name`` is ``path``."""
        by_path = self._memo.get("objects")
        if by_path is None:
            by_path = self._memo["objects"] = {o.path: o for o in self.proc.objects}
        return by_path.get(path)  # type: ignore[no-any-return]

    def strays(self) -> list[str]:
        """:func:`stray_dirs` of the target (computed once)."""
        got = self._memo.get("strays")
        if got is None:
            got = self._memo["strays"] = stray_dirs(self.sys_path, self.prefix, self.cfg.root)
        return got  # type: ignore[no-any-return]


def owner_text(index: OwnerIndex | None, path: str) -> str:
    """``"from package torch 2.13.0 (pip)"``, ``"owned by no package"`` or ``"owner not
    looked up"``."""
    if index is None:
        return "owner not looked up"
    o = index.owner(path)
    return f"from package {o.label()}" if o else "owned by no package"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def max_version(names: Sequence[str], prefix: str) -> str | None:
    """The highest of ``names`` starting with ``prefix`` (``GLIBCXX_3.4.30`` > ``…3.4.9``)."""
    same = [n for n in names if n.startswith(prefix)]
    return max(same, key=_version_key) if same else None


def searched_summary(res: Resolution, cfg: SearchConfig) -> list[str]:
    """One line per list searched, in order: ``searched RPATH of X: /a, /b``."""
    groups: dict[str, list[str]] = {}
    for a in res.tried:
        d = os.path.dirname(a.path)
        for sub in cfg.subdirs:
            if d.endswith("/" + sub):
                d = d[: -len(sub) - 1]
                break
        dirs = groups.setdefault(a.source, [])
        if d not in dirs:
            dirs.append(d)
    out = []
    no_entry = (cfg.cache is not None and "/" not in res.name
                and not any(a.rule == "ld.so.cache" for a in res.tried))
    for source, dirs in groups.items():
        if res.tried and res.tried[0].rule == "slash":
            break  # a path is opened, not searched: the tried lines say it all
        if source == "system search path" and no_entry:
            out.append(f"searched {cfg.cache.path}: no entry for {res.name}")  # type: ignore[union-attr]
            no_entry = False
        if source.endswith("ld.so.cache"):
            out.append(f"searched {source}: entry {dirs[0]}")
        else:
            out.append(f"searched {source}: {', '.join(dirs)}")
    if no_entry:
        out.append(f"searched {cfg.cache.path}: no entry for {res.name}")  # type: ignore[union-attr]
    return out


def search_dirs_of(tried: Sequence[Any]) -> list[str]:
    """The directories of the files tried, in order, each once."""
    return list(dict.fromkeys(os.path.dirname(a.path) for a in tried))


def stray_dirs(sys_path: Sequence[str], prefix: str | None, root: str) -> list[str]:
    """Where stray copies of libraries usually lie, on no search path: the prefix's
    ``lib``/``lib64``, wheels' ``nvidia/*/lib``, ``torch/lib``, ``*.libs``, ``/usr/local/cuda*``."""
    dirs: list[str] = []
    if prefix:
        dirs += [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    for entry in sys_path:
        if entry and os.path.isdir(entry):
            dirs += sorted(glob.glob(os.path.join(glob.escape(entry), "nvidia", "*", "lib")))
            dirs += [os.path.join(entry, p, "lib") for p in ("torch", "tensorflow", "jaxlib")]
            dirs += sorted(glob.glob(os.path.join(glob.escape(entry), "*.libs")))
    r = root.rstrip("/")
    dirs += sorted(glob.glob(f"{r}/usr/local/cuda*/lib64")) + sorted(glob.glob(f"{r}/usr/local/cuda*/lib"))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]

def soname_link_fix(path: str, name: str, note: str = "") -> tuple[str, str]:
    """The two ways to give the file ``path`` the name ``name`` (its SONAME) in its directory:
    the link itself (``note`` appended), or ``ldconfig -n DIR``, which makes the SONAME link of
    every library of DIR (ldconfig(8))."""
    d = os.path.dirname(path)
    return (f"ln -s {os.path.basename(path)} {os.path.join(d, name)}{note}",
            f"or run: {LDCONFIG} -n {d}")


def find_by_soname(proc: Process, name: str, dirs: Sequence[str]) -> str | None:
    """A file in ``dirs`` whose DT_SONAME is ``name`` under another file name
    (``libstdc++.so.6.0.33`` without its ``libstdc++.so.6`` link), or ``None``."""
    stem = name.split(".so")[0]
    for d in dirs:
        listing = proc._listdir(d)
        if not listing:
            continue
        for n in sorted(listing):
            if n != name and n.startswith(stem + ".so"):
                info = read_elf(os.path.join(proc._host(d), n), cache=proc.elf_cache)
                if info.ok and info.soname == name:
                    return os.path.join(d, n)
    return None


def pin_for(index: OwnerIndex | None, plan: TorchPlan | None, path: str) -> Pin | None:
    """torch's pin of the pip package owning ``path``, if torch pins it."""
    if index is None or plan is None:
        return None
    o = index.owner(path)
    if o is None or o.kind != "pip":
        return None
    for p in read_pins(index, "torch"):
        if p.name == o.name:
            return p
    return None
