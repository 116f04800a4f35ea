"""The link map of one modelled process: mapping, dependencies, scopes, dlopen.

The model follows glibc 2.36's ``elf/dl-load.c`` ``_dl_map_object`` (an object already
loaded under the name, its SONAME or its file; a name with a slash; else the search of
:mod:`envlock.libs.search`) and ``_dl_map_object_from_fd`` (what a found file may still be
refused for, :meth:`envlock.libs.elf.ElfInfo.refusal`), ``elf/rtld.c`` (the program,
``LD_PRELOAD`` and ``/etc/ld.so.preload``), ``elf/dl-deps.c`` (breadth-first dependency
loading, filtees before their filter, ``l_searchlist``), ``elf/dl-open.c`` (``dlopen``, its own
local scope, ``RTLD_GLOBAL``'s ``add_to_global``) and ``elf/dl-version.c`` (symbol versions).

Use :class:`Process`: :meth:`Process.start` models ``execve`` of a program (LD_PRELOAD,
then its DT_NEEDED breadth-first); :meth:`Process.dlopen` models ``dlopen`` from a caller
(by path, as Python imports extension modules, or by name, as ``ctypes.CDLL("libx.so.1")``
or a library's own runtime ``dlopen``).  Every lookup is recorded as a
:class:`~envlock.libs.objects.Resolution` with the rule that found it and every file tried,
in the loader's order.  Symbol binding over these scopes is :mod:`envlock.libs.binding`.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from envlock.libs.config import SearchConfig, default_interpreter, expand_dst, in_root, read_config_text
from envlock.libs.elf import ElfCache
from envlock.libs.objects import (
    Attempt,
    LoadedObject,
    ObjectKind,
    RequestKind,
    Resolution,
    Rule,
    VersionProblem,
    breadth_first,
    describe_object,
)
from envlock.libs.search import PathSearch

__all__ = ["Process"]


class Process(PathSearch):
    """The link map of one modelled process, grown by :meth:`start` and :meth:`dlopen`.

    :param config: the :class:`~envlock.libs.config.SearchConfig`.
    :param elf_cache: an :class:`~envlock.libs.elf.ElfCache` for parsed facts, or ``None``.
    """

    def __init__(self, config: SearchConfig, *, elf_cache: ElfCache | None = None) -> None:
        super().__init__(config, elf_cache=elf_cache)
        self.resolutions: list[Resolution] = []
        self.version_problems: list[VersionProblem] = []
        self.preload_errors: list[str] = []
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
        e = expand_dst(name, origin=origin, platform=self.config.platform, lib=self.config.lib,
                       secure=self.config.secure, is_path=False)
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
                             rule="already-loaded", source=describe_object(hit), object_id=hit.id)
            self.resolutions.append(res)
            return res, hit, False
        rule: Rule | None
        if "/" in name:
            path, rule, source, tried, error = self._open_slash(name, requester)
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

    def _open_slash(
        self, name: str, requester: LoadedObject | None,
    ) -> tuple[str | None, Rule, str, list[Attempt], str | None]:
        """A name with a slash is opened as it is (``$ORIGIN`` & co. expanded), no search:
        ``(path or None, "slash", source, tried, error)`` (glibc ``_dl_map_object``)."""
        tried: list[Attempt] = []
        source = "the name contains a slash"
        path = self._expand_slash(name, requester)
        if path is None:
            return None, "slash", source, tried, "cannot expand dynamic string tokens"
        verdict, msg = self._verify(path)
        outcome = "found" if verdict == "ok" else (msg or "absent")
        tried.append(Attempt(path=path, rule="slash", source=source, outcome=outcome))
        if verdict == "ok":
            return path, "slash", source, tried, None
        if verdict in ("fatal", "skip"):
            error = msg  # skip: "wrong ELF class: ELFCLASS32" (open_verify's errstring)
        elif verdict == "error":
            error = f"cannot open shared object file: {msg}"
        else:
            error = ("cannot open shared object file: "
                     + ("Permission denied" if msg == "Permission denied" else "No such file or directory"))
        return None, "slash", source, tried, error

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
        # ld.so FILE opens it with open_verify first (e_ident, e_version, e_type, …).
        verdict, msg = self._verify(executable)
        if verdict in ("fatal", "skip"):
            self.main_error = msg or None
        elif main.info.ok:
            self.main_error = main.info.refusal(dlopen=False, main=True)
        interp = interpreter or main.info.interp or default_interpreter(self.config)
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
        preload_root = read_config_text(in_root(self.config.root, "/etc/ld.so.preload"))
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


