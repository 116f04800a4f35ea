"""Which package installed a file.

Owners are found by reading package databases, never by running a package manager:

* pip (and any PEP 376 installer): ``<site>/<name>-<version>.dist-info/RECORD``;
* conda: ``<prefix>/conda-meta/<name>-<version>-<build>.json`` (``files``, relative paths);
* Debian/Ubuntu: ``<root>/var/lib/dpkg/info/<package>[:arch].list`` (absolute paths;
  a merged-/usr system is handled by also trying the ``/usr`` or non-``/usr`` twin).

The versions a package expects of its libraries (its pins) are :mod:`envlock.libs.pins`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from envlock._names import canonicalize
from envlock.libs.condadist import conda_dist_dir


__all__ = ["Owner", "OwnerIndex", "normalize_name"]


def normalize_name(name: str) -> str:
    """PEP 503 normalized project name (``Nvidia_CUDNN.cu13`` → ``nvidia-cudnn-cu13``);
    the project's one normalizer, :func:`envlock._names.canonicalize`."""
    return canonicalize(name)


@dataclass(frozen=True, kw_only=True, slots=True)
class Owner:
    """The package a file belongs to.

    :ivar kind: ``"pip"``, ``"conda"`` or ``"dpkg"``.
    :ivar name: the package name (normalized for pip).
    :ivar version: its version string (``None`` for dpkg, whose lists carry none).
    :ivar detail: where the claim comes from (the RECORD or list file), or the conda build.
    """

    kind: str
    name: str
    version: str | None = None
    detail: str = ""

    def label(self) -> str:
        """``"nvidia-cudnn-cu13 9.24.0.43 (pip)"``."""
        ver = f" {self.version}" if self.version else ""
        return f"{self.name}{ver} ({self.kind})"


_DIST_RE = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+)\.dist-info$")


class OwnerIndex:
    """Lazy index from file paths to owning packages.

    :param sys_path: the target interpreter's ``sys.path`` (directories searched for
        ``.dist-info``).
    :param prefix: the environment prefix (for ``conda-meta``), or ``None``.
    :param root: the system root (for dpkg lists).
    :param cache_dir: a directory for the dpkg index (keyed by the lists directory's
        mtime), or ``None`` for no disk cache.
    """

    def __init__(self, sys_path: Iterable[str], *, prefix: str | None = None, root: str = "/",
                 cache_dir: str | None = None) -> None:
        self.sys_path = [p for p in dict.fromkeys(sys_path) if p and os.path.isdir(p)]
        self.prefix = prefix
        self.root = root
        self._pip: dict[str, Owner] | None = None
        self._dists: dict[str, tuple[str, str, str]] | None = None
        self._conda: dict[str, Owner] | None = None
        self._conda_dists: dict[str, Owner] = {}
        self._conda_records: list[dict] | None = None
        self._dpkg: dict[str, str] | None = None
        self._dpkg_partial: dict[str, str] = {}
        self._dpkg_todo: list[str] | None = None
        self._dpkg_todo_set: set[str] | None = None
        self.cache_dir = cache_dir

    # -- pip -------------------------------------------------------------------------------
    def dists(self) -> dict[str, tuple[str, str, str]]:
        """``{normalized name: (version, dist-info dir, site dir)}``, first on sys.path wins."""
        if self._dists is None:
            out: dict[str, tuple[str, str, str]] = {}
            for site in self.sys_path:
                try:
                    names = sorted(os.listdir(site))
                except OSError:
                    continue
                for n in names:
                    m = _DIST_RE.match(n)
                    if m:
                        key = normalize_name(m.group("name"))
                        out.setdefault(key, (m.group("version"), os.path.join(site, n), site))
            self._dists = out
        return self._dists

    def _pip_index(self) -> dict[str, Owner]:
        """``{normalized path of a shared object: owner}`` from every RECORD (cached on disk,
        keyed by the stat of every RECORD file)."""
        if self._pip is not None:
            return self._pip
        records = []
        for name, (version, dist_dir, site) in self.dists().items():
            record = os.path.join(dist_dir, "RECORD")
            try:
                st = os.stat(record)
            except OSError:
                continue
            records.append((name, version, record, site,
                            [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]))
        import hashlib

        key = "pip-" + hashlib.sha256(
            json.dumps([[r[2], r[4]] for r in records]).encode()).hexdigest()[:24]
        cached = self._load_cache(key)
        owners = {name: Owner(kind="pip", name=name, version=version, detail=record)
                  for name, version, record, _site, _st in records}
        if isinstance(cached, dict):
            try:
                self._pip = {path: owners[name] for path, name in cached.items()}
                return self._pip
            except KeyError:
                pass
        flat: dict[str, str] = {}
        for name, _version, record, site, _st in records:
            try:
                lines = _so_lines(record)  # shared objects only: all the loader can map
            except OSError:
                continue
            for line in lines:
                rel = line.split(",", 1)[0].strip('"')
                flat.setdefault(os.path.normpath(os.path.join(site, rel)), name)
        self._store_cache(key, flat)
        self._pip = {path: owners[name] for path, name in flat.items()}
        return self._pip

    # -- conda -----------------------------------------------------------------------------
    def conda_records(self) -> list[dict]:
        """The prefix's ``conda-meta/*.json`` records (empty when not a conda prefix)."""
        if self._conda_records is None:
            recs: list[dict] = []
            meta = os.path.join(self.prefix, "conda-meta") if self.prefix else None
            if meta and os.path.isdir(meta):
                for n in sorted(os.listdir(meta)):
                    if not n.endswith(".json"):
                        continue
                    try:  # a regular file only: a FIFO record must not hang the snapshot
                        from envlock._io import read_text as _read

                        data = json.loads(_read(os.path.join(meta, n)))
                    except (OSError, ValueError):
                        continue
                    if isinstance(data, dict) and "name" in data:
                        recs.append(data)
            self._conda_records = recs
        return self._conda_records

    def _conda_index(self) -> dict[str, Owner]:
        if self._conda is None:
            index: dict[str, Owner] = {}
            dists: dict[str, Owner] = {}
            for rec in self.conda_records():
                owner = Owner(kind="conda", name=str(rec.get("name")),
                              version=str(rec.get("version", "")) or None,
                              detail=str(rec.get("build", "")))
                for rel in rec.get("files") or ():
                    if isinstance(rel, str):
                        index.setdefault(os.path.normpath(os.path.join(self.prefix or "/", rel)), owner)
                        d = conda_dist_dir(rel)
                        if d is not None:
                            dists.setdefault(os.path.normpath(os.path.join(self.prefix or "/", d)), owner)
            self._conda, self._conda_dists = index, dists
        return self._conda

    def _conda_dist_owner(self, owner: Owner) -> Owner:
        """``owner`` (a pip RECORD's claim), or the conda package listing that dist-info
        (:func:`conda_dist_dir`: the manifest's rule, so both name one owner)."""
        if owner.kind != "pip" or not self.prefix:
            return owner
        self._conda_index()
        return self._conda_dists.get(os.path.dirname(owner.detail), owner)

    # -- dpkg ------------------------------------------------------------------------------
    def _dpkg_index(self) -> dict[str, str]:
        """``{path of a shared object: package}`` from every ``*.list`` (cached on disk)."""
        if self._dpkg is not None:
            return self._dpkg
        info = os.path.join(self.root, "var/lib/dpkg/info")
        try:
            st = os.stat(info)
        except OSError:
            self._dpkg = {}
            return self._dpkg
        key = f"dpkg-{st.st_dev:x}-{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"
        cached = self._load_cache(key)
        if isinstance(cached, dict):
            self._dpkg = cached
            return cached
        while self._dpkg_read_next(None):
            pass
        index = self._dpkg_partial
        self._dpkg = index
        self._store_cache(key, index)
        return index

    def _dpkg_lists(self) -> list[str]:
        if self._dpkg_todo is None:
            info = os.path.join(self.root, "var/lib/dpkg/info")
            try:
                self._dpkg_todo = sorted(n for n in os.listdir(info) if n.endswith(".list"))
            except OSError:
                self._dpkg_todo = []
        return self._dpkg_todo

    def _dpkg_read_next(self, guesses: Sequence[str] | None) -> bool:
        """Read one more ``*.list`` into the partial index (a guessed one first); ``False``
        when every list has been read."""
        todo = self._dpkg_lists()
        if not todo:
            return False
        todo_set = cast("set[str]", self._dpkg_todo_set)  # set by _dpkg_lookup before the first read
        pick = None
        for g in guesses or ():
            for n in (f"{g}.list", f"{g}:{_DPKG_ARCH}.list"):
                if n in todo_set:
                    pick = n
                    break
            if pick:
                break
        if pick is None:
            pick = next(n for n in todo if n in todo_set)
        todo_set.discard(pick)
        if not todo_set:
            self._dpkg_todo = []
        try:
            lines = _so_lines(os.path.join(self.root, "var/lib/dpkg/info", pick))
        except OSError:
            return True
        pkg = pick[: -len(".list")]
        for line in lines:
            self._dpkg_partial.setdefault(line, pkg)
        return True

    def _dpkg_lookup(self, path: str) -> Owner | None:
        """The dpkg package listing ``path``: the ``*.list`` files are read only until it is
        found, the package that Debian policy 8.1 names after the file first
        (``libfoo.so.6`` → ``libfoo6``), then ``libc6``, then packages whose name holds the
        library's stem (``libz`` → ``zlib1g``), then the rest; a path under a
        directory dpkg never installs into (``/home``, ``/root``, ``/tmp``, ``/usr/local``,
        …) is not looked up at all."""
        twins = [path, path[4:] if path.startswith("/usr/") else "/usr" + path]
        top = path.split("/", 2)[1] if path.startswith("/") else ""
        if top not in _DPKG_TOPS or path.startswith("/usr/local/"):
            return None
        if self._dpkg is None and self._dpkg_todo_set is None:
            info = os.path.join(self.root, "var/lib/dpkg/info")
            try:
                st = os.stat(info)
                cached = self._load_cache(f"dpkg-{st.st_dev:x}-{st.st_ino:x}-{st.st_mtime_ns:x}")
            except OSError:
                cached = {}
            if isinstance(cached, dict):
                self._dpkg = cached
            else:
                self._dpkg_todo_set = set(self._dpkg_lists())
        index = self._dpkg if self._dpkg is not None else self._dpkg_partial
        guesses = _debian_package_guesses(os.path.basename(path))
        if self._dpkg is None and self._dpkg_todo_set:
            # Then packages whose name holds the library's stem (libz.so.1 → zlib1g).
            core = re.sub(r"^lib", "", os.path.basename(path).split(".so")[0]).lower()
            if len(core) >= 1:
                near = sorted((n[: -len(".list")].split(":")[0] for n in self._dpkg_todo_set
                               if core in n.split(":")[0]), key=len)
                guesses += near
        while True:
            for t in twins:
                pkg = index.get(t)
                if pkg:
                    return Owner(kind="dpkg", name=pkg,
                                 detail=os.path.join(self.root, "var/lib/dpkg/info", pkg + ".list"))
            if self._dpkg is not None or not self._dpkg_read_next(guesses):
                break
        if self._dpkg is None and not self._dpkg_todo_set:
            self._dpkg = self._dpkg_partial  # every list read: complete, keep it
            try:
                st = os.stat(os.path.join(self.root, "var/lib/dpkg/info"))
                self._store_cache(f"dpkg-{st.st_dev:x}-{st.st_ino:x}-{st.st_mtime_ns:x}", self._dpkg)
            except OSError:
                pass
        return None

    def _load_cache(self, key: str) -> object:
        """The entry ``key`` of the owner cache (:func:`envlock.cache.load`), or ``None``."""
        if self.cache_dir is None:
            return None
        from envlock import cache

        return cache.load(self._entry(key))

    def _store_cache(self, key: str, data: object) -> None:
        """Keep ``data`` as entry ``key`` (envlock's one writer: atomic, bounded, never a
        secret, not under ``ENVLOCK_NO_CACHE``); the key names the stat of what was read."""
        if self.cache_dir is None:
            return
        from envlock import cache

        cache.store(self._entry(key), [], data)

    def _entry(self, key: str) -> str:
        """The file of entry ``key``: the name also holds envlock's version and code."""
        import hashlib

        from envlock.cache import code_stamp

        stamp = hashlib.sha256(code_stamp().encode()).hexdigest()[:10]
        return os.path.join(str(self.cache_dir), f"{key}-{stamp}.json")

    # -- public ----------------------------------------------------------------------------
    def owner(self, path: str) -> Owner | None:
        """The package owning the file at loader path ``path`` (``None`` when none does).

        The path is normalized (``..`` removed) and, failing that, resolved through symlinks;
        a SONAME symlink counts as owned by the package owning it or its target.
        """
        host = path if self.root in ("", "/") else os.path.join(self.root, path.lstrip("/"))
        candidates = [os.path.normpath(host)]
        real = os.path.realpath(host)
        if real not in candidates:
            candidates.append(real)
        for cand in candidates:
            if self.sys_path and any(cand.startswith(s.rstrip("/") + "/") for s in self.sys_path):
                hit = self._pip_index().get(cand)
                if hit:
                    return self._conda_dist_owner(hit)
            if self.prefix and cand.startswith(self.prefix.rstrip("/") + "/"):
                hit = self._conda_index().get(cand)
                if hit:
                    return hit
        for cand in candidates:
            loader_path = cand if self.root in ("", "/") else "/" + os.path.relpath(cand, self.root)
            hit = self._dpkg_lookup(loader_path)
            if hit:
                return hit
        return None

    def version_of(self, name: str) -> str | None:
        """Installed version of pip distribution ``name`` (normalized), if any."""
        got = self.dists().get(normalize_name(name))
        return got[0] if got else None


#: Bytes that end a line for ``str.splitlines`` other than ``\n`` and ``\r`` (ASCII ones; any
#: non-ASCII byte sends a file the slow way too).
_OTHER_LINE_ENDS = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


def _so_lines(path: str) -> list[str]:
    """The lines of the text file ``path`` that contain ``.so`` — exactly those of
    ``open(path, encoding="utf-8", errors="replace").read().splitlines()`` (universal
    newlines: ``\r\n`` and ``\r`` end lines too) — found by searching for ``.so`` rather than
    splitting every line (torch's RECORD has 14,700 lines and 13 shared objects).

    :raises OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        data = f.read()
    crlf = data.count(b"\r\n")
    if (not data.isascii() or data.count(b"\r") != crlf
            or any(b in data for b in _OTHER_LINE_ENDS)):
        text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        return [line for line in text.splitlines() if ".so" in line]
    # ASCII, lines ended by "\n" or "\r\n" only
    text = data.decode("ascii")
    out = []
    i = text.find(".so")
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        end = text.find("\n", i)
        if end < 0:
            end = len(text)
        out.append(text[start:end - 1] if crlf and text[end - 1] == "\r" else text[start:end])
        i = text.find(".so", end)
    return out


#: Top-level directories dpkg installs into (FHS; /usr/local is left to the administrator).
_DPKG_TOPS = frozenset({"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "opt",
                        "var", "boot"})
_DPKG_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x",
              "i686": "i386", "riscv64": "riscv64"}.get(os.uname().machine, "amd64")


def _debian_package_guesses(basename: str) -> list[str]:
    """Package names Debian policy 8.1 gives a shared library file (``libfoo.so.6`` →
    ``libfoo6``, ``libfoo2.so.3`` → ``libfoo2-3``), then ``libc6`` (glibc's files)."""
    out = []
    m = re.match(r"^(lib[^/]*?)\.so\.(\d+)", basename)
    if m:
        name, major = m.group(1).lower().replace("_", "-"), m.group(2)
        out.append(f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}")
    out.append("libc6")
    return out
