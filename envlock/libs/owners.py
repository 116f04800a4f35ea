"""Which package installed a file, and which versions a package expects of its libraries.

Owners are found by reading package databases, never by running a package manager:

* pip (and any PEP 376 installer): ``<site>/<name>-<version>.dist-info/RECORD``;
* conda: ``<prefix>/conda-meta/<name>-<version>-<build>.json`` (``files``, relative paths);
* Debian/Ubuntu: ``<root>/var/lib/dpkg/info/<package>[:arch].list`` (absolute paths;
  a merged-/usr system is handled by also trying the ``/usr`` or non-``/usr`` twin).

Expectations come from static metadata: ``Requires-Dist`` pins in a wheel's METADATA
(PEP 566/508; e.g. torch's ``nvidia-cudnn-cu13==9.24.0.43``, followed one level through
extras such as ``cuda-toolkit[cublas]==13.0.3``) and a conda record's ``depends``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from envlock._names import canonicalize

__all__ = ["Owner", "OwnerIndex", "Pin", "normalize_name", "read_pins"]


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """A version a package requires of another: ``requirer`` needs ``name`` ``specifier``.

    :ivar kind: the package world of ``name``: ``"pip"`` (a PEP 440 specifier) or ``"conda"``
        (a conda match-spec version, translated to PEP 440 where possible).
    """

    requirer: str
    name: str
    specifier: str
    kind: str = "pip"


def conda_pins(index: OwnerIndex, package: str) -> list[Pin]:
    """The ``depends`` of conda package ``package`` (e.g. ``pytorch``) as :class:`Pin` objects.

    Version parts are translated to PEP 440 specifiers: ``>=8.3.2,<9.0a0`` unchanged, a bare
    ``8.3.2`` → ``==8.3.2``, ``8.3.*``/``8.3*`` → ``==8.3.*``; alternatives (``|``) are skipped.
    """
    out = []
    for rec in index.conda_records():
        if rec.get("name") != package:
            continue
        requirer = f"{package} {rec.get('version', '')} (conda)"
        for dep in rec.get("depends") or ():
            parts = str(dep).split()
            if len(parts) < 2 or "|" in parts[1]:
                continue
            spec = ",".join(_conda_to_pep440(x) for x in parts[1].split(","))
            out.append(Pin(requirer=requirer, name=parts[0], specifier=spec, kind="conda"))
    return out


def _conda_to_pep440(part: str) -> str:
    if part[:1] in "<>=!~":
        return part
    if part.endswith("*"):
        return "==" + part.rstrip("*").rstrip(".") + ".*"
    return "==" + part


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
        import hashlib  # noqa: PLC0415

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
                        from envlock._io import read_text as _read  # noqa: PLC0415

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
            for rec in self.conda_records():
                owner = Owner(kind="conda", name=str(rec.get("name")),
                              version=str(rec.get("version", "")) or None,
                              detail=str(rec.get("build", "")))
                for rel in rec.get("files") or ():
                    if isinstance(rel, str):
                        index.setdefault(os.path.normpath(os.path.join(self.prefix or "/", rel)), owner)
            self._conda = index
        return self._conda

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
        from envlock import cache  # noqa: PLC0415

        return cache.load(self._entry(key))

    def _store_cache(self, key: str, data: object) -> None:
        """Keep ``data`` as entry ``key`` (envlock's one writer: atomic, bounded, never a
        secret, not under ``ENVLOCK_NO_CACHE``); the key names the stat of what was read."""
        if self.cache_dir is None:
            return
        from envlock import cache  # noqa: PLC0415

        cache.store(self._entry(key), [], data)

    def _entry(self, key: str) -> str:
        """The file of entry ``key``: the name also holds envlock's version and code."""
        import hashlib  # noqa: PLC0415

        from envlock.cache import code_stamp  # noqa: PLC0415

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
                    return hit
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


def _metadata_requires(dist_dir: str) -> list[str]:
    try:
        with open(os.path.join(dist_dir, "METADATA"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines()
            if line.lower().startswith("requires-dist:")]


def read_pins(index: OwnerIndex, dist: str) -> list[Pin]:
    """Exact version pins (``==``) that pip distribution ``dist`` declares, for Linux.

    Follows one level of extras (``cuda-toolkit[cublas]==13.0.3`` → the requirements that
    ``cuda-toolkit`` declares for extra ``cublas``).  Markers are evaluated for this
    machine (PEP 508); requirements that are only in other extras of ``dist`` are ignored.

    :param index: where the distributions are.
    :param dist: the requiring distribution (e.g. ``"torch"``).
    :returns: the pins, in METADATA order.
    """
    got = index.dists().get(normalize_name(dist))
    if got is None:
        return []
    try:
        import hashlib  # noqa: PLC0415

        st = os.stat(os.path.join(got[1], "METADATA"))
        # Pins followed through extras come from other distributions' METADATA: their
        # installed versions are part of the key too.
        versions = hashlib.sha256(json.dumps(sorted(
            (n, v[0]) for n, v in index.dists().items())).encode()).hexdigest()[:12]
        key = (f"pins-{normalize_name(dist)}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
               f"-{st.st_ctime_ns:x}-{versions}")
    except OSError:
        key = ""
    cached = index._load_cache(key) if key else None
    if isinstance(cached, list):
        try:
            return [Pin(requirer=a, name=b, specifier=c) for a, b, c in cached]
        except (TypeError, ValueError):
            pass
    pins = _compute_pins(index, dist, got[1])
    if key:
        index._store_cache(key, [[p.requirer, p.name, p.specifier] for p in pins])
    return pins


@dataclass(frozen=True, slots=True)
class _Req:
    """A parsed Requires-Dist line (the parts :func:`_compute_pins` uses)."""

    name: str
    extras: tuple[str, ...]
    specs: tuple[str, ...]
    marker: str | None

    @property
    def specifier(self) -> str:
        return ",".join(sorted(self.specs))

    def exact(self) -> bool:
        return any(x.startswith("==") for x in self.specs)


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?([^;()]*)\)?\s*(?:;(.*))?$")
_SPEC = re.compile(r"^(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+$")
_CLAUSE = re.compile(r"^\s*(platform_system|sys_platform|platform_machine|os_name|extra)"
                     r"""\s*(==|!=)\s*(['"])([^'"]*)\3\s*$""")


def _parse_requirement(line: str) -> _Req | None:
    """A PEP 508 line in the plain form METADATA files use (``name[extras] specs ;
    marker``), or ``None`` for anything else (the caller then asks ``packaging``)."""
    m = _REQ.match(line)
    if not m:
        return None
    specs = tuple(x.strip() for x in m.group(3).split(",") if x.strip())
    if not all(_SPEC.match(x) for x in specs):
        return None
    extras = tuple(sorted(e.strip() for e in (m.group(2) or "").split(",") if e.strip()))
    marker = m.group(4).strip() if m.group(4) else None
    return _Req(name=m.group(1), extras=extras, specs=tuple(x.replace(" ", "") for x in specs),
                marker=marker)


_MTOKEN = re.compile(r"\s*(?:(\()|(\))|(and|or)\b|"
                     r"(platform_system|sys_platform|platform_machine|os_name|extra|python_version|python_full_version)"
                     r"""\s*(==|!=|<=|>=|<|>)\s*(['"])([^'"]*)\6)""")
_NUMERIC = re.compile(r"^\d+(\.\d+)*$")


@functools.lru_cache(maxsize=1)
def _marker_env() -> dict[str, str]:
    """PEP 508 environment markers of this interpreter (as ``packaging`` computes them)."""
    import platform  # noqa: PLC0415

    return {"platform_system": platform.system(), "sys_platform": sys.platform,
            "platform_machine": platform.machine(), "os_name": os.name}


def _marker_value(marker: str, extra: str) -> bool | None:
    """Evaluate a PEP 508 marker made of ``VAR ==|!= "value"`` clauses (and ``python_version``
    compared with a plain dotted release), ``and``, ``or`` and parentheses (``and`` binds
    tighter) for this interpreter, as ``packaging.markers`` does; ``None`` for any other
    form (the caller then asks ``packaging``).  A marker is tokenised once
    (:func:`_marker_tokens`); only its ``extra`` clauses depend on ``extra``."""
    parsed = _marker_tokens(marker)
    if parsed is None:
        return None
    # The value depends only on which of the marker's own extra names (if any) ``extra`` is.
    want = normalize_name(extra)
    named = want if any(isinstance(t, tuple) and t[2] == want for t in parsed) else None
    return _decided(marker, named)


@functools.lru_cache(maxsize=4096)
def _decided(marker: str, extra: str | None) -> bool | None:
    """:func:`_marker_value` of ``marker`` for an extra named ``extra`` (normalized), or for
    one that none of its ``extra`` clauses names (``None``)."""
    parsed = _marker_tokens(marker)
    assert parsed is not None
    tokens = [(t[2] == extra) == (t[1] == "==") if isinstance(t, tuple) else t for t in parsed]
    return _evaluate(tokens)


@functools.lru_cache(maxsize=4096)
def _marker_tokens(marker: str) -> tuple[Any, ...] | None:
    """The tokens of :func:`_marker_value`'s marker form: ``(``, ``)``, ``and``, ``or``, the
    truth of each clause on this interpreter, and ``("extra", op, normalized value)`` for the
    clauses on ``extra``; ``None`` for any other form."""
    env = _marker_env()
    tokens: list[Any] = []
    pos = 0
    text = marker.rstrip()
    while pos < len(text):
        m = _MTOKEN.match(text, pos)
        if not m or m.end() == pos:
            return None
        pos = m.end()
        if m.group(1) or m.group(2) or m.group(3):
            tokens.append(m.group(1) or m.group(2) or m.group(3))
        else:
            var, op, value = m.group(4), m.group(5), m.group(7)
            if var.startswith("python_"):
                # Versions compared as numbers (PEP 440 for plain dotted releases).
                if not _NUMERIC.match(value):
                    return None
                vi = sys.version_info
                mine = (vi[0], vi[1]) if var == "python_version" else (vi[0], vi[1], vi[2])
                want = tuple(int(x) for x in value.split("."))
                n = max(len(mine), len(want))
                a, b = mine + (0,) * (n - len(mine)), want + (0,) * (n - len(want))
                tokens.append({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                               ">=": a >= b}[op])
                continue
            if op not in ("==", "!="):
                return None
            if var == "extra":
                tokens.append(("extra", op, normalize_name(value)))
                continue
            have = env[var]
            tokens.append((have == value) if op == "==" else (have != value))
    return tuple(tokens)


def _evaluate(tokens: list[Any]) -> bool | None:
    """The value of a token list of :func:`_marker_tokens` with its clauses decided
    (``and`` binds tighter than ``or``); ``None`` when it is not well formed."""
    i = 0

    def expr() -> bool | None:
        nonlocal i
        v = term()
        while v is not None and i < len(tokens) and tokens[i] == "or":
            i += 1
            w = term()
            v = None if w is None else (v or w)
        return v

    def term() -> bool | None:
        nonlocal i
        v = factor()
        while v is not None and i < len(tokens) and tokens[i] == "and":
            i += 1
            w = factor()
            v = None if w is None else (v and w)
        return v

    def factor() -> bool | None:
        nonlocal i
        if i >= len(tokens):
            return None
        t = tokens[i]
        i += 1
        if t == "(":
            v = expr()
            if i >= len(tokens) or tokens[i] != ")":
                return None
            i += 1
            return v
        return t if isinstance(t, bool) else None

    value = expr()
    return value if i == len(tokens) else None


def _compute_pins(index: OwnerIndex, dist: str, dist_dir: str) -> list[Pin]:
    got = (None, dist_dir)
    pins: list[Pin] = []

    def parse(line: str) -> tuple[_Req | None, Any]:
        fast = _parse_requirement(line)
        if fast is not None:
            return fast, None
        from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

        try:
            req = Requirement(line)
        except InvalidRequirement:
            return None, None
        return _Req(name=req.name, extras=tuple(sorted(req.extras)),
                    specs=tuple(str(x) for x in req.specifier),
                    marker=str(req.marker) if req.marker is not None else None), req

    def collect(requirer: str, dist_dir: str, extras: tuple[str, ...]) -> list[_Req]:
        out = []
        for line in _metadata_requires(dist_dir):
            # Only exact pins, and requirements with extras to follow, can matter here.
            spec = line.split(";", 1)[0]
            if "==" not in spec and "[" not in spec:
                continue
            req, full = parse(line)
            if req is None:
                continue
            if req.marker is not None:
                values = [_marker_value(req.marker, e) for e in (extras or ("",))]
                if any(v is None for v in values):
                    if full is None:
                        from packaging.requirements import Requirement  # noqa: PLC0415

                        full = Requirement(line)
                    envs = [{"extra": e} for e in extras] or [{"extra": ""}]
                    if not any(full.marker.evaluate(e) for e in envs):
                        continue
                elif not any(values):
                    continue
            out.append(req)
        return out

    for req in collect(dist, got[1], ()):
        name = normalize_name(req.name)
        if req.exact():
            pins.append(Pin(requirer=dist, name=name, specifier=req.specifier))
        if req.extras:
            sub = index.dists().get(name)
            if sub is None:
                continue
            for req2 in collect(name, sub[1], req.extras):
                if req2.marker is None or "extra" not in req2.marker:
                    continue
                if req2.exact():
                    pins.append(Pin(requirer=f"{dist} via {name}[{','.join(req.extras)}]",
                                    name=normalize_name(req2.name), specifier=req2.specifier))
    return pins
