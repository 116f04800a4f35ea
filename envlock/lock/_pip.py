"""pip packages → ``pylock.toml`` (PEP 751), resolved by uv.

uv (``uv pip compile --format pylock.toml --generate-hashes``) finds each pinned file and its
hash; envlock decides *what* to pin.  From an environment: index installs are pinned
``name==version``, direct URL and VCS installs (PEP 610) become ``name @ url`` requirements,
which uv turns into the matching PEP 751 ``archive``/``vcs``/``directory`` entries.  Editable
installs and the dead ``file://`` URLs that conda-build leaves in ``direct_url.json`` (case
C12) are never written: they are reported with the reason.

Index options are never guessed: they come from the command line or, when none are given,
from the target's own pip configuration (``pip config list``), because uv does not read
``pip.conf``; either way they are recorded in the lockfile's ``[tool.envlock]`` table.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from envlock._io import write_file
from envlock._run import Runner, run
from envlock.errors import LockError, ManifestError, SolveError
from envlock.lock._tools import SOLVE_TIMEOUT, uv_bin
from envlock.probes.pip import CONDA_BUILD_URL
import os
from envlock._io import one_line
from envlock.redact import redact_url

if TYPE_CHECKING:
    from envlock.manifest import PipPackage

__all__ = [
    "IndexOptions",
    "Skipped",
    "pip_config_index",
    "requirement_for",
    "compile_requirements",
    "validate_pylock",
]

@dataclass(frozen=True, kw_only=True, slots=True)
class IndexOptions:
    """Where uv looks for packages, as pip's options name them.

    :ivar index_url: replaces PyPI (``--index-url``); ``None``: uv's default (PyPI).
    :ivar extra_index_urls: further indexes (``--extra-index-url``).
    :ivar find_links: directories or pages of distribution files (``--find-links``).
    :ivar no_index: use only ``find_links``.
    :ivar source: where these options came from (``"command line"``, ``"pip config of …"``).
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    source: str = "command line"

    @property
    def empty(self) -> bool:
        """No option is set (uv then uses PyPI)."""
        return not (self.index_url or self.extra_index_urls or self.find_links or self.no_index)

    def uv_args(self) -> list[str]:
        """Arguments for ``uv pip compile``/``install`` that give pip's behaviour.

        pip picks the best version across all its indexes; uv by default stops at the first
        index that has the project.  With several indexes, ``--index-strategy
        unsafe-best-match`` restores pip's rule (uv documentation, "Index strategy").
        """
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        if self.no_index:
            args.append("--no-index")
        if self.extra_index_urls and not self.no_index:
            args += ["--index-strategy", "unsafe-best-match"]
        return args

    def to_table(self) -> dict[str, Any]:
        """The options as a TOML table (kebab-case keys, empty values dropped).

        Credentials in URLs (``https://user:token@host/simple``) are removed: a lockfile is
        shared, a token is not.
        """
        table: dict[str, Any] = {"index-source": self.source}
        if self.index_url:
            table["index-url"] = redact_url(self.index_url)
        if self.extra_index_urls:
            table["extra-index-urls"] = [redact_url(u) for u in self.extra_index_urls]
        if self.find_links:
            table["find-links"] = [redact_url(u) for u in self.find_links]
        if self.no_index:
            table["no-index"] = True
        return table


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped:
    """A package left out of a lockfile, and why.

    :ivar kind: ``"conda"`` (it belongs to a conda package, locked in conda-lock.yml) or
        ``"not-reproducible"`` (no lockfile can restore it).
    """

    name: str
    version: str
    kind: str
    reason: str

    def to_table(self) -> dict[str, str]:
        """The entry as a TOML table."""
        return {"name": self.name, "version": self.version, "kind": self.kind,
                "reason": self.reason}


def pip_config_index(python: str, *, runner: Runner = run) -> IndexOptions | None:
    """Read the index options the target's pip would use (``python -m pip config list``).

    pip merges its configuration files and ``PIP_*`` variables (pip's "Configuration"
    documentation: environment variables override files, later files override earlier ones);
    ``pip config list`` prints every source, ``:env:`` ones marked.

    :param python: the target interpreter.
    :returns: the options, or ``None`` when pip is absent there or sets none.
    """
    result = runner([python, "-m", "pip", "config", "list"], timeout=30.0)
    if not result.ok:
        return None
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    # One ``section.option='value'`` per setting; a multi-line value spans several lines.
    for m in _CONFIG_LINE.finditer(result.stdout):
        section, _, option = m.group("key").rpartition(".")
        if section not in ("global", "install", ":env:", "download"):
            continue
        value = m.group("value").replace("\\n", "\n")  # pip prints newlines escaped
        (env if section == ":env:" else files)[option] = " ".join(value.split())
    merged = {**files, **env}
    opts = IndexOptions(
        index_url=merged.get("index-url") or None,
        extra_index_urls=tuple(merged.get("extra-index-url", "").split()),
        find_links=tuple(merged.get("find-links", "").split()),
        no_index=merged.get("no-index", "").lower() in ("1", "true", "yes", "on"),
        source=f"pip config of {python}",
    )
    return None if opts.empty else opts


_CONFIG_LINE = re.compile(
    r"^(?P<key>[^\s=]+)=(?P<q>['\"])(?P<value>.*?)(?P=q)$", re.MULTILINE | re.DOTALL
)


def _url_path(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def requirement_for(pkg: PipPackage) -> str | Skipped:
    """Decide how one installed distribution is locked.

    :returns: a requirement line for uv (``name==version`` or ``name @ url``), or a
        :class:`Skipped` with the reason it is not written.
    """
    name, version = pkg.name, pkg.version
    if pkg.origin == "conda":
        owner = pkg.conda_package or "a conda package"
        return Skipped(
            name=name, version=version, kind="conda",
            reason=f"installed by conda package {owner}; locked in conda-lock.yml",
        )
    if pkg.origin == "editable":
        where = pkg.editable_path or pkg.url or "a local directory"
        state = ""
        if pkg.git is not None and pkg.git.commit:
            dirty = ", uncommitted changes" if pkg.git.dirty else ""
            state = f" (git {pkg.git.commit[:12]}{dirty})"
        return Skipped(
            name=name, version=version, kind="not-reproducible",
            reason=f"editable install of {where}{state}; reinstall it from its source",
        )
    if pkg.origin == "index":
        from packaging.version import InvalidVersion, Version

        try:
            Version(version)
        except InvalidVersion:
            return Skipped(
                name=name, version=version, kind="not-reproducible",
                reason=f"version {version!r} is not a PEP 440 version; no index can pin it"
                + (f" ({pkg.error})" if pkg.error else ""),
            )
        return f"{name}=={version}"
    url = pkg.url or ""
    if pkg.origin == "vcs":
        if not url or not pkg.commit:
            return Skipped(name=name, version=version, kind="not-reproducible",
                           reason="VCS install without a recorded URL and commit")
        vcs = pkg.vcs or "git"
        return f"{name} @ {vcs}+{url}@{pkg.commit}"
    local = _url_path(url) if url else None
    if local is not None and CONDA_BUILD_URL.match(url):
        return Skipped(
            name=name, version=version, kind="not-reproducible",
            reason=f"direct_url.json points at a conda-build work directory ({url}), which "
            "exists only where the package was built; install the conda package instead",
        )
    if not url or (local is not None and not local.exists()):
        return Skipped(
            name=name, version=version, kind="not-reproducible",
            reason=f"installed from {url or 'an unknown location'}, which no longer exists",
        )
    return f"{name} @ {url}"


def compile_requirements(
    requirements: Sequence[str] | Path,
    *,
    index: IndexOptions,
    python: str | None = None,
    python_version: str | None = None,
    python_platform: str | None = None,
    no_deps: bool = False,
    fmt: str = "pylock.toml",
    extra: Sequence[str] = (),
    what: str | None = None,
    one_line: bool = False,
    runner: Runner = run,
) -> str:
    """Resolve requirements with ``uv pip compile`` and return the lockfile text.

    :param requirements: requirement lines, or a file (``requirements.in``, ``pyproject.toml``).
    :param python: the interpreter whose markers and tags to resolve for.
    :param python_version, python_platform: resolve for another Python/platform instead
        (uv's ``--python-version``/``--python-platform``).
    :param no_deps: pin exactly these requirements (a freeze), without adding dependencies.
    :param fmt: ``"pylock.toml"`` or ``"requirements.txt"`` (both with hashes).
    :param extra: further ``uv pip compile`` options.
    :param what: how error messages name the requirements (default: the file's name).
    :param one_line: errors are one line (uv's whole explanation joined), not uv's lines.
    :raises SolveError: uv found no solution; the message holds uv's explanation.
    :raises LockError: uv failed otherwise (index unreachable, build failure, timeout).
    """
    with tempfile.TemporaryDirectory(prefix="envlock-uv-") as tmp:
        temp: Path | None = None
        if isinstance(requirements, Path):
            source = requirements
        else:
            source = temp = Path(tmp) / "requirements.in"
            write_file(source, "".join(r + "\n" for r in requirements))
        out = Path(tmp) / ("pylock.toml" if fmt == "pylock.toml" else "requirements.txt")
        argv = [uv_bin(), "pip", "compile", str(source), "--format", fmt, "--generate-hashes",
                "--quiet", "--no-header", "-o", str(out), *index.uv_args()]
        if python:
            argv += ["--python", python]
        if python_version:
            argv += ["--python-version", python_version]
        if python_platform:
            argv += ["--python-platform", python_platform]
        if no_deps:
            argv.append("--no-deps")
        argv += list(extra)
        result = runner(argv, timeout=SOLVE_TIMEOUT, env=_uv_env())
        if not result.ok:
            raise _uv_error(result, what or (source.name if temp is None else "the requirements"),
                            one_line=one_line, temp=temp)
        return out.read_text(encoding="utf-8")


def _uv_env() -> dict[str, str]:
    env = dict(os.environ)
    # uv's pylock.toml support is marked preview; say so explicitly rather than see a warning.
    env.setdefault("UV_PREVIEW_FEATURES", "pylock")
    env["NO_COLOR"] = "1"
    return env


#: how long uv's own explanation may be in an error (lines; characters on one line)
_MAX_LINES, _MAX_CHARS = 40, 4000


def _uv_said(text: str, temp: Path | None, what: str) -> list[str]:
    """uv's message, every line of it (its causes come before its conclusion), without the
    tree decoration; the requirements file envlock wrote for uv (``temp``) is named as the user
    knows it (``what``), never as a ``requirements.in`` they did not write."""
    if temp is not None:
        text = text.replace(str(temp), what).replace(f"`{temp.name}`", what)
    out = []
    for line in text.splitlines():
        clean = line.strip().lstrip("×╰─▶│ ").strip()
        if clean:
            out.append(clean)
    return out


def _uv_error(result: Any, what: str, *, one_line: bool = False,
              temp: Path | None = None) -> LockError:
    """uv's failure as one envlock error, with uv's whole explanation: as it printed it (its
    lines), or on one line (``one_line``), bounded (:data:`_MAX_LINES`, :data:`_MAX_CHARS`)."""
    if result.status == "absent":
        return LockError(f"uv could not be run: {result.detail}")
    if result.status == "timeout":
        return LockError(f"uv did not finish resolving {what}: {result.detail}")
    text = (result.stderr or result.stdout).strip()
    lines = _uv_said(text, temp, what)
    said = (_one(" ".join(lines), _MAX_CHARS) if one_line
            else "\n".join(lines[:_MAX_LINES] + (["…"] if len(lines) > _MAX_LINES else [])))
    said = said or result.detail
    sep = " " if one_line else "\n"
    if "No solution found" in text or "unsatisfiable" in text:
        if one_line:  # "No solution found when resolving dependencies:" is the heading above
            said = _one(" ".join(ln.removeprefix("cause: ") for ln in lines
                                 if not ln.startswith("error: No solution found")), _MAX_CHARS)
        return SolveError(f"uv found no solution for {what}:{sep}{said}")
    causes = [ln.removeprefix("cause: ").removeprefix("error: ") for ln in lines]
    fetch = next((c for c in causes if c.startswith("Failed to fetch")), None)
    if fetch is not None:
        return LockError(
            f"cannot reach the package index while resolving {what}: {fetch} ({causes[-1]}); "
            "check --index-url/--find-links, or use a local wheel directory "
            "(--no-index --find-links DIR)"
        )
    return LockError(f"uv could not resolve {what}:{sep}{said}")


def _one(text: str, limit: int = 300) -> str:
    return one_line(text, limit)


def validate_pylock(data: dict[str, Any], name: str = "pylock.toml") -> Any:
    """Check a parsed pylock.toml with packaging's reference PEP 751 parser.

    :raises ManifestError: packaging rejects it (the message has its key path).
    :returns: the :class:`packaging.pylock.Pylock`.
    """
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:  # packaging < 25.0 has no PEP 751 support
        raise ManifestError("checking pylock.toml needs packaging >= 25.0") from None
    try:
        return Pylock.from_dict(data)
    except PylockValidationError as exc:
        raise ManifestError(f"{name}: not a valid PEP 751 lock file ({exc})") from None
