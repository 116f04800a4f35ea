"""glibc's search for a shared object by name, file by file.

The model follows ``elf/dl-load.c`` of glibc 2.36, the version on Debian 12: ``_dl_map_object``'s
order (DT_RPATH of the loader chain and of the executable, ``LD_LIBRARY_PATH``, DT_RUNPATH,
``ld.so.cache``, the default directories, each with its hwcaps subdirectories), ``open_path``
(a list ends on an ``open`` error other than ``ENOENT``/``EACCES``), ``open_verify`` (wrong
ELF class or machine: the search goes on; a short read: the load fails) and
``_dl_init_paths``/``fillin_rpath`` for the directory lists; see ``docs/libs.md`` for the order
with source references.  It never runs the code it looks at: it reads ELF headers (through
:mod:`envlock.libs.elf`) and directory entries.

:class:`PathSearch` is the search state of one process; :class:`envlock.libs.linkmap.Process`
adds the link map on top of it.
"""

from __future__ import annotations

import os
from typing import Any

from envlock.libs.config import SearchConfig, expand_dst, in_root, split_path_list
from envlock.libs.elf import check_ident, ElfCache, ElfInfo
from envlock.libs.elfread import read_elf
from envlock.libs.objects import Attempt, LoadedObject, Rule
import dataclasses
import errno
import stat

__all__ = ["PathSearch"]


class PathSearch:
    """The search state of one modelled process: the directory lists, what each directory
    holds, what each candidate file is (cached for the process's life, as the loader's own
    ``r_search_path`` status bits are).

    :param config: the :class:`~envlock.libs.config.SearchConfig`.
    :param elf_cache: an :class:`~envlock.libs.elf.ElfCache` for parsed facts, or ``None``.
    """

    def __init__(self, config: SearchConfig, *, elf_cache: ElfCache | None = None) -> None:
        self.config = config
        self.elf_cache = elf_cache
        #: The link map, in load order (filled by :class:`~envlock.libs.linkmap.Process`).
        self.objects: list[LoadedObject] = []
        #: The main program's object, once known.
        self.main: LoadedObject | None = None
        self._dir_status: dict[tuple[str, int], bool] = {}
        self._listing: dict[str, frozenset[str] | None] = {}
        self._infos: dict[str, ElfInfo] = {}
        self._ids: dict[str, tuple[int, int]] = {}
        self._keys: dict[int, tuple[Any, ...]] = {}
        self._dirs_cache: dict[tuple[int, str], list[str]] = {}
        self._what_if: dict[tuple[Any, ...], tuple[str | None, Rule | None, str]] = {}
        self._env_dirs = self._parse_env_dirs(config.ld_library_path)

    def _host(self, path: str) -> str:
        """The real path on this machine of loader path ``path`` (prefix the root; a
        relative path is relative to the process's working directory, ``config.cwd``)."""
        if not path.startswith("/"):
            path = os.path.join(self.config.cwd, path) if path else self.config.cwd
        return in_root(self.config.root, path)

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
            e = expand_dst(d, origin=obj.origin, platform=self.config.platform, lib=self.config.lib,
                           secure=self.config.secure,
                           trusted=self.config.system_dirs if obj.kind == "executable" else None)
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
                            # pread with a negative off_t fails with EINVAL (lose_errno)
                            why = ": Invalid argument" if phoff >= 1 << 63 else ""
                            return ("fatal", "cannot read file data" + why)
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



def _with_path(info: ElfInfo, path: str) -> ElfInfo:
    if info.path == path:
        return info

    return dataclasses.replace(info, path=path)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _in_dirs(path: str, dirs: tuple[str, ...]) -> bool:
    d = os.path.dirname(path)
    return d in dirs
