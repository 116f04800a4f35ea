"""``envlock lock -f environment.yml``: solve a conda spec into ``conda-lock.yml``.

Two solvers, neither written here:

* conda-lock itself, when a conda, mamba or micromamba executable exists (conda-lock needs
  one to solve);
* otherwise py-rattler's solver (resolvo), which reads channels' ``repodata.json`` directly:
  it works offline against ``file://`` channels and needs no conda installation.

With py-rattler, envlock reads the spec the way conda-lock does (platform selectors
``# [linux]`` filtered with conda-lock's own function), gives the solver the virtual packages
conda-lock would assume (its ``default-virtual-packages.yaml``, or a ``--virtual-package-spec``
file in conda-lock's format), resolves the ``pip:`` section with uv for the solved Python, and
writes the result with conda-lock's models.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock._run import Runner, run
from envlock._untrusted import check_channel, check_match_spec
from envlock.errors import LockError, ManifestError, SolveError
from envlock.lock import _conda_pypi, _condalock
from envlock.lock._pip import IndexOptions
from envlock.lock._tools import SOLVE_TIMEOUT, conda_lock_argv, require
from envlock._io import InputError, read_text
from envlock.formats import conda as conda_formats
from envlock.formats._load import load_yaml
import json
import re
import sys

__all__ = [
    "EnvSpec",
    "PLATFORMS",
    "read_environment_yml",
    "virtual_packages",
    "solve_platform",
    "render_spec_lock",
    "conda_lock_command",
    "uv_platform",
]

#: The platforms conda-lock's selector filter knows, and uv's ``--python-platform`` for each
#: (``None``: uv cannot resolve for it).
PLATFORMS: dict[str, str | None] = {
    "linux-64": "x86_64-unknown-linux-gnu",
    "linux-aarch64": "aarch64-unknown-linux-gnu",
    "linux-ppc64le": None,
    "osx-64": "x86_64-apple-darwin",
    "osx-arm64": "aarch64-apple-darwin",
    "win-64": "x86_64-pc-windows-msvc",
}

#: The manylinux glibc levels (2.x) uv accepts in ``--python-platform`` (uv 0.9–0.13).
_UV_MANYLINUX = (17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40)


def uv_platform(platform: str, glibc: str | None = None) -> str:
    """uv's ``--python-platform`` for a conda platform and the ``__glibc`` it assumes.

    Wheels are chosen by their manylinux tag (PEP 600: ``manylinux_2_X`` runs on glibc ≥
    2.X), so the highest level uv knows that does not exceed ``glibc`` is used.

    :raises LockError: uv cannot resolve for ``platform``.
    """
    target = PLATFORMS.get(platform)
    if target is None:
        raise LockError(f"uv cannot resolve a pip: section for {platform}")
    if glibc and target.endswith("-unknown-linux-gnu"):
        try:
            minor = int(glibc.split(".")[1])
        except (IndexError, ValueError):
            return target
        levels = [lv for lv in _UV_MANYLINUX if lv <= minor]
        if levels:
            return f"{target.split('-', 1)[0]}-manylinux_2_{levels[-1]}"
    return target


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvSpec:
    """An ``environment.yml`` read for one platform.

    :ivar channels: channel names or URLs (local directories turned into ``file://`` URLs),
        highest priority first; ``nodefaults`` removed.
    :ivar conda: conda match specs; ``pip``: requirement lines of the ``pip:`` section.
    :ivar platforms: the file's own ``platforms:`` list, if any.
    """

    path: Path
    name: str | None = None
    channels: tuple[str, ...] = ()
    conda: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    text: str = field(default="", repr=False)


def _channel_url(channel: str, base: Path) -> str:
    if "://" in channel:
        return channel
    local = Path(channel).expanduser()
    if not local.is_absolute():
        local = base / local
    if channel.startswith((".", "/", "~")) or local.is_dir():
        return local.resolve().as_uri()
    return channel


#: conda's ``defaults`` on Linux/macOS (``DEFAULT_CHANNELS_UNIX``): these URLs, not a channel
#: named "defaults" on anaconda.org.
DEFAULT_CHANNEL_URLS = {"pkgs/main": "https://repo.anaconda.com/pkgs/main",
                        "pkgs/r": "https://repo.anaconda.com/pkgs/r"}


def read_environment_yml(path: str | Path, platform: str | None = None) -> EnvSpec:
    """Read a conda environment file, keeping the lines whose selector matches ``platform``.

    The file is read with the shared reader (:mod:`envlock.formats`: bounded, regular files
    only), selectors (``# [linux]``) are applied with conda-lock's own
    ``filter_platform_selectors``, and every dependency is a conda match spec read the way
    conda reads it (py-rattler's lenient ``MatchSpec``: ``_libgcc_mutex=0.1=main``,
    ``pytorch~=2.3.1 *cuda12*``).  ``defaults`` becomes conda's default channels
    (:data:`DEFAULT_CHANNEL_URLS`); ``nodefaults`` is dropped.

    :raises ManifestError: the file is missing, is not YAML, or its ``channels`` /
        ``dependencies`` are not lists of match specs and a ``pip:`` list (one line naming the
        problem); an :class:`~envlock._untrusted.UntrustedValueError` when a spec or channel
        is an option or has characters conda's never have (docs/trust.md).
    """

    selectors = require("conda_lock.src_parser.selectors")
    path = Path(path)
    try:
        text = read_text(path)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    if platform is not None and platform not in PLATFORMS:
        raise ManifestError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")
    filtered = "\n".join(selectors.filter_platform_selectors(text, platform=platform))
    data = load_yaml(filtered, str(path))
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not a conda environment file (top level is not a mapping)")
    deps = data.get("dependencies")
    if not isinstance(deps, list) or not deps:
        raise ManifestError(f"{path}: 'dependencies' must be a non-empty list")
    channels = data.get("channels") or []
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise ManifestError(f"{path}: 'channels' must be a list of channel names or URLs")
    conda, pip = [], []
    for i, dep in enumerate(deps):
        if isinstance(dep, (str, int, float)) and not isinstance(dep, bool):
            try:
                conda_formats.parse_spec(str(dep))  # conda's grammar, lenient as conda is
            except ManifestError as exc:
                raise ManifestError(f"{path}: dependencies[{i}]: {exc}") from None
            text = str(dep).split("#", 1)[0].strip()
            check_match_spec(text, f"{path.name} dependencies[{i}]")  # data, never an option
            conda.append(text)
        elif isinstance(dep, dict) and set(dep) == {"pip"} and isinstance(dep["pip"], list):
            pip += [str(r).strip() for r in dep["pip"] if r is not None]
        elif isinstance(dep, dict) and set(dep) == {"pip"} and dep["pip"] is None:
            continue  # every line of the section filtered out by selectors
        else:
            raise ManifestError(
                f"{path}: dependencies[{i}] is neither a match spec nor a pip: list"
            )
    platforms = data.get("platforms") or []
    if not isinstance(platforms, list):
        raise ManifestError(f"{path}: 'platforms' must be a list")
    for i, channel in enumerate(channels):
        check_channel(channel, f"{path.name} channels[{i}]")
    expanded, _ = conda_formats.expand_channels(list(channels))
    name = data.get("name")
    return EnvSpec(
        path=path,
        name=str(name) if name is not None else None,
        channels=tuple(DEFAULT_CHANNEL_URLS.get(c) or _channel_url(c, path.parent)
                       for c in expanded),
        conda=tuple(conda),
        pip=tuple(pip),
        platforms=tuple(str(p) for p in platforms),
        text=text,
    )


def match_specs(spec: EnvSpec) -> list[Any]:
    """The conda dependencies of ``spec`` as py-rattler ``MatchSpec`` objects, parsed leniently
    (``strict=False``), as conda parses ``environment.yml`` (``=main`` build strings, ``1.0 py_0``
    without an operator).

    :raises ManifestError: a spec py-rattler cannot read even leniently.
    """
    rattler = require("rattler")
    out = []
    for text in spec.conda:
        try:
            out.append(rattler.MatchSpec(text, strict=False))
        except Exception as exc:  # noqa: BLE001 - py-rattler's own exception classes
            raise ManifestError(f"{spec.path}: not a conda match spec: {text} ({_first_line(exc)})"
                                ) from None
    return out


def virtual_packages(
    platform: str, *, spec_file: str | Path | None = None, cuda: str | None = None
) -> list[tuple[str, str, str]]:
    """The virtual packages (``__glibc``, ``__cuda``, …) assumed present on ``platform``.

    :param spec_file: a conda-lock virtual-package spec (``subdirs: {linux-64: {packages:
        {__cuda: "12.4", __glibc: "2.28"}}}``); default: conda-lock's
        ``default-virtual-packages.yaml``.
    :param cuda: override ``__cuda`` (``""`` removes it), like conda-lock's ``--with-cuda`` /
        ``--without-cuda``.
    :raises ManifestError: the spec file is malformed or has no entry for ``platform``.
    :returns: (name, version, build string) triples.
    """
    vp = require("conda_lock.virtual_package")
    pydantic = require("pydantic")
    path = Path(spec_file) if spec_file else Path(vp.DEFAULT_VIRTUAL_PACKAGES_YAML_PATH)

    try:
        data = load_yaml(read_text(path), str(path))
        spec = vp.VirtualPackageSpec.model_validate(data)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    except ManifestError as exc:
        raise ManifestError(f"{path}: cannot read virtual package spec ({exc})") from None
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise ManifestError(f"{path}: not a virtual package spec ({first['msg']})") from None
    subdir = spec.subdirs.get(platform)
    if subdir is None:
        raise ManifestError(f"{path}: no virtual packages given for platform {platform}")
    packages = dict(subdir.packages)
    if cuda is not None:
        packages.pop("__cuda", None)
        if cuda:
            packages["__cuda"] = cuda
    out = []
    for name, spec_text in sorted(packages.items()):
        version, _, build = str(spec_text).partition(" ")
        out.append((name, version, build))
    return out


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


@dataclass(frozen=True, slots=True)
class SolvedRecord:
    """One package of a solve: what the lockfile needs of py-rattler's ``RepoDataRecord``."""

    name: str
    version: str
    build: str
    url: str
    md5: str | None
    sha256: str | None
    depends: tuple[str, ...]
    #: package URLs of the record (``pkg:pypi/torch@2.3.1``), as its repodata gives them
    purls: tuple[str, ...] = ()


def solve_platform(
    spec: EnvSpec, platform: str, vpkgs: Sequence[tuple[str, str, str]], *,
    runner: Runner = run,
) -> list[SolvedRecord]:
    """Solve the conda part of ``spec`` for ``platform`` with py-rattler, in a child process
    (:mod:`envlock.lock._rattler_solve`: py-rattler's worker threads can abort an interpreter
    that exits while a failed solve's fetches are still in flight).

    :raises SolveError: no set of packages satisfies the spec (the solver's explanation).
    :raises LockError: a channel cannot be read (missing, unreachable, no network), or the
        solver process failed.
    :returns: the solved records.
    """

    require("rattler")
    if not spec.channels:
        raise ManifestError(f"{spec.path}: no channels given")
    match_specs(spec)  # a spec py-rattler cannot read: one line naming it, before solving
    request = {"channels": list(spec.channels), "specs": list(spec.conda), "platform": platform,
               "virtual": [list(v) for v in vpkgs]}
    result = runner([sys.executable, "-m", "envlock.lock._rattler_solve"],
                    timeout=SOLVE_TIMEOUT, input_text=json.dumps(request))
    try:
        answer = json.loads(result.stdout) if result.stdout.strip() else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        detail = result.detail or _first_line(Exception(result.stderr or "no answer"))
        raise LockError(f"the py-rattler solver process failed for {spec.path} ({detail})")
    if answer.get("error") == "solve":
        raise SolveError(f"{spec.path} cannot be solved for {platform}:\n{answer['message']}")
    if answer.get("error") == "channel":
        raise LockError(
            f"cannot read the channels of {spec.path} ({answer['message']}); "
            "check the channel names, or use a local channel mirror (file://)"
        )
    if answer.get("error"):
        raise ManifestError(f"{spec.path}: {answer['message']}")
    return [SolvedRecord(name=r["name"], version=r["version"], build=r["build"], url=r["url"],
                         md5=r["md5"], sha256=r["sha256"], depends=tuple(r["depends"]),
                         purls=tuple(r.get("purls") or ()))
            for r in answer["records"]]


def render_spec_lock(
    spec_path: str | Path,
    platforms: Sequence[str],
    lockfile: Path,
    *,
    channels: Sequence[str] = (),
    virtual_package_spec: str | Path | None = None,
    cuda: str | None = None,
    index: IndexOptions | None = None,
    runner: Runner = run,
    notes: list[str] | None = None,
) -> str:
    """Solve ``spec_path`` for each platform with py-rattler and return conda-lock.yml text.

    :param channels: use these channels instead of the file's; a spec's ``channel::`` pin
        naming none of them is dropped (:func:`unpin_channels`), and said in ``notes``.
    :param lockfile: where the text will be written (sources are recorded relative to it).
    :param notes: sentences for the user are appended here.
    :raises SolveError, LockError, ManifestError: see :func:`solve_platform`.
    """
    index = index or IndexOptions(source="uv defaults (PyPI)")
    entries: list[_condalock.Entry] = []
    hashes: dict[str, str] = {}
    chans: tuple[str, ...] = ()
    for platform in platforms:
        spec = read_environment_yml(spec_path, platform)
        if channels:
            urls = tuple(_channel_url(c, Path.cwd()) for c in channels)
            conda, dropped = unpin_channels(spec.conda, urls)
            spec = EnvSpec(**{**_fields(spec), "channels": urls, "conda": conda})
            said = f"channel pins dropped (-c replaces the file's channels): {', '.join(dropped)}"
            if dropped and notes is not None and said not in notes:
                notes.append(said)
        chans = spec.channels
        vpkgs = virtual_packages(platform, spec_file=virtual_package_spec, cuda=cuda)
        records = solve_platform(spec, platform, vpkgs, runner=runner)
        entries += _condalock.entries_from_records(records, platform)
        if spec.pip:
            glibc = next((v for n, v, _ in vpkgs if n == "__glibc"), None)
            entries += _conda_pypi.pip_entries(spec, platform, records,
                                               uv_platform(platform, glibc), index, runner)
        digest = hashlib.sha256(spec.text.encode())
        digest.update(repr((spec.channels, vpkgs)).encode())
        hashes[platform] = digest.hexdigest()
    source = os.path.relpath(Path(spec_path).resolve(), lockfile.resolve().parent)
    return _condalock.render(
        entries, platforms=list(platforms), channels=list(chans), sources=[source],
        content_hashes=hashes, custom={"envlock-solver": "py-rattler"},
    )


#: a match spec's channel pin: ``pytorch::pytorch``, ``conda-forge/linux-64::numpy`` (conda's
#: ``MatchSpec`` grammar: ``channel[/subdir]::name…``)
_CHANNEL_PIN = re.compile(r"^(?P<channel>[^\s:=<>!~\[]+)::(?P<rest>.+)$")


def unpin_channels(specs: Sequence[str], channels: Sequence[str]
                   ) -> tuple[tuple[str, ...], list[str]]:
    """The match specs to solve when ``-c`` replaces a file's channels: a ``channel::`` pin
    naming one of ``channels`` (by name, or as the last part of its URL) stays; any other is
    dropped, since the solver would otherwise refuse every candidate ("candidate not in
    requested channel") — the user's channels are the mirror of all the file's.

    :returns: the specs, and each dropped ``channel::name`` as written.
    """
    names = {c.rstrip("/").rsplit("/", 1)[-1] for c in channels} | {c.rstrip("/") for c in channels}
    out, dropped = [], []
    for text in specs:
        m = _CHANNEL_PIN.match(text.strip())
        if m is None:
            out.append(text)
            continue
        channel = m.group("channel").split("/")[0] if "://" not in m.group("channel") else (
            m.group("channel"))
        if channel.rstrip("/") in names or m.group("channel").rstrip("/") in names:
            out.append(text)
        else:
            out.append(m.group("rest"))
            dropped.append(text.strip())
    return tuple(out), dropped


def _fields(spec: EnvSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in spec.__slots__}  # type: ignore[attr-defined]


def conda_lock_command(
    spec_path: str | Path,
    platforms: Sequence[str],
    lockfile: Path,
    conda_exe: str,
    *,
    channels: Sequence[str] = (),
    virtual_package_spec: str | Path | None = None,
    cuda: str | None = None,
) -> list[str]:
    """The ``conda-lock lock`` command line that solves with a conda executable."""
    argv = [*conda_lock_argv(), "lock", "--file", str(spec_path), "--lockfile", str(lockfile),
            "--conda", conda_exe]
    for platform in platforms:
        argv += ["--platform", platform]
    for channel in channels:
        argv += ["--channel", channel]
    if virtual_package_spec:
        argv += ["--virtual-package-spec", str(virtual_package_spec)]
    if cuda == "":
        argv.append("--without-cuda")
    elif cuda:
        argv += ["--with-cuda", cuda]
    return argv


def solve_with_conda_lock(argv: Sequence[str], lockfile: Path, *, runner: Runner = run) -> str:
    """Run conda-lock (``argv`` from :func:`conda_lock_command`) and return the file it wrote.

    :raises SolveError: conda-lock reports the spec unsatisfiable.
    :raises LockError: conda-lock failed otherwise or timed out.
    """
    result = runner(list(argv), timeout=SOLVE_TIMEOUT)
    if not result.ok:
        text = (result.stderr or result.stdout).strip()
        # conda-lock reports failures as Python tracebacks: keep what it says, not its stack.
        said = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(" ")
                and not ln.startswith("Traceback")]
        tail = "\n".join(said[-8:])
        words = ("Unsatisfiable", "unsatisfiable", "conflict", "nothing provides")
        if any(w in text for w in words):
            raise SolveError(f"conda-lock cannot solve the spec:\n{tail}")
        raise LockError(f"conda-lock failed: {said[-1] if said else result.detail}")
    try:
        return lockfile.read_text(encoding="utf-8")
    except OSError as exc:
        raise LockError(f"conda-lock wrote no {lockfile}: {exc.strerror}") from None
