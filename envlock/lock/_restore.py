"""``envlock restore``: the exact commands that recreate an environment, and what they cannot.

A plan is built from lockfiles (``conda-lock.yml``, ``pylock.toml``, hash-pinned
``requirements.txt``) or from a manifest, whose ``[lockfiles]`` table names the files the
environment was built from.  A manifest that names no lockfile (or whose recorded lockfiles are
missing or changed since the snapshot) is restored from its own tables: conda packages as
``name=version=build`` from the URLs and md5/sha256 of their ``conda-meta`` records (py-rattler,
nothing solved), pip packages at their exact versions with uv (``--no-deps``: the recorded set,
nothing added), VCS and editable packages from their recorded commit, and, for a venv, an
interpreter of the recorded version found on this machine (:func:`find_python`).  The plan is
printed as shell commands; ``--run`` runs them (through :func:`envlock._run.run`, with a generous
timeout), installing a conda-lock file with py-rattler when no conda/mamba/micromamba exists.

No lockfile restores the machine: the NVIDIA driver, a system CUDA, compilers, the C library,
the CPU and GPU, environment variables, uncommitted code.  The plan lists those, taken from
the manifest, so that nobody expects a lockfile to bring them back.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envlock._run import Runner, run
from envlock.errors import EnvlockError, LockError, ManifestError
from envlock.probes.lockfiles import _sha256, lockfile_kind

if TYPE_CHECKING:
    from envlock.lock._pip import IndexOptions, Skipped
    from envlock.manifest import Manifest, PipPackage

__all__ = [
    "Step",
    "RestorePlan",
    "PythonChoice",
    "plan_restore",
    "run_plan",
    "validate_lockfile",
    "find_python",
    "variant_index",
    "manifest_pins",
    "PYTORCH_INDEX",
    "RestoreCheck",
    "verify_restored",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One command of a restore.

    :ivar argv: the command as a user would type it (``conda-lock``/``uv`` by name).
    :ivar kind: ``"conda-lock"``, ``"uv-venv"``, ``"pylock"``, ``"requirements"``, or for a
        restore from the manifest alone ``"conda-manifest"`` (py-rattler installs the recorded
        conda files), ``"pip-pins"`` (uv installs exact versions), ``"git"`` (clone, checkout,
        apply a patch) and ``"editable"``.
    :ivar lockfile: the lockfile it installs, if any; ``manifest``: the manifest it restores
        from (``"conda-manifest"``).
    """

    title: str
    argv: tuple[str, ...]
    kind: str
    lockfile: str | None = None
    manifest: str | None = None

    @property
    def shell(self) -> str:
        """The command as one shell-quoted line."""
        return shlex.join(self.argv)


@dataclass(frozen=True, kw_only=True, slots=True)
class RestorePlan:
    """Commands in order, what they cannot restore, and problems met reading the inputs.

    :ivar manifests: the manifests the plan restores from their own tables (no lockfile), whose
        result :func:`verify_restored` checks.
    :ivar python: the interpreter chosen for a new venv restored from a manifest.
    :ivar notes: facts about the plan (which indexes serve which local-label variant).
    """

    prefix: str
    steps: tuple[Step, ...] = ()
    not_restored: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    manifests: tuple[str, ...] = ()
    python: PythonChoice | None = None
    notes: tuple[str, ...] = ()


#: Manifest tables that a lockfile restores (``frameworks`` and ``blas`` follow from the
#: packages), that describe the job rather than the environment (``slurm``), or that the plan
#: describes itself.
_COVERED = frozenset({"envlock", "target", "python", "platform", "cpu", "env", "git", "conda",
                      "pip", "lockfiles", "gpu", "cuda", "toolchain", "frameworks", "blas",
                      "slurm"})


def _machine_lines(manifest: Manifest) -> list[str]:
    """The GPU, driver, system CUDA and compilers a manifest records: none is in a lockfile."""
    out = []
    gpu = manifest.gpu
    if gpu is not None and gpu.status == "ok" and (gpu.driver_version or gpu.gpus):
        devices = ", ".join(
            f"{g.name or 'GPU'}" + (f" (compute capability {g.compute_capability})"
                                    if g.compute_capability else "")
            for g in gpu.gpus
        )
        driver = f"driver {gpu.driver_version}" if gpu.driver_version else "driver unknown"
        cuda = (f", supports CUDA up to {gpu.cuda_driver_version}"
                if gpu.cuda_driver_version else "")
        out.append(f"GPU and NVIDIA {driver}{cuda}" + (f": {devices}" if devices else ""))
    cuda_info = manifest.cuda
    if cuda_info is not None and cuda_info.status == "ok":
        for tk in cuda_info.toolkits:
            if tk.path:
                out.append(f"system CUDA toolkit {tk.version or '(version unknown)'} at {tk.path}")
    toolchain = manifest.toolchain
    if toolchain is not None and toolchain.status == "ok" and toolchain.tools:
        tools = ", ".join(f"{t.name} {t.version or '?'}" for t in toolchain.tools)
        out.append(f"compilers and build tools: {tools}")
    return out


def _lockfiles_of(manifest_path: Path, manifest: Manifest) -> tuple[list[Path], list[str]]:
    files, warnings = [], []
    info = manifest.lockfiles
    for ref in info.files if info else ():
        path = Path(ref.path)
        if not path.is_absolute():
            path = manifest_path.parent / path
        if not path.exists():
            warnings.append(f"{path}: recorded in the manifest but missing")
            continue
        if _sha256(path) != ref.sha256:
            warnings.append(f"{path}: changed since the manifest was taken (sha256 differs); "
                            "not used")
            continue
        _refuse_contradiction(manifest_path, manifest, path)
        files.append(path)
    return files, warnings


def _refuse_contradiction(manifest_path: Path, manifest: Manifest, lock: Path) -> None:
    """Refuse a recorded lock that pins other packages than the manifest (probes.lockfiles)."""
    from envlock.errors import LockContradictionError  # noqa: PLC0415
    from envlock.probes.lockfiles import contradictions  # noqa: PLC0415

    try:
        bad = contradictions(manifest, lock)
    except ValueError as exc:  # InputError too: unreadable or malformed
        raise ManifestError(str(exc)) from None
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise LockContradictionError(
            f"{lock} contradicts the manifest {manifest_path}: " + "; ".join(bad[:5]) + more
            + "; it would build another environment, not restoring")


def _not_restored(manifest: Manifest) -> list[str]:
    out = []
    if manifest.platform and manifest.platform.status == "ok":
        p = manifest.platform
        out.append(f"operating system and C library: {p.os_name or p.os_id}, glibc {p.glibc}, "
                   f"kernel {p.kernel}")
    if manifest.cpu and manifest.cpu.status == "ok":
        c = manifest.cpu
        flags = " ".join(c.flags) or "none recorded"
        out.append(f"CPU: {c.model} ({c.usable_cores} usable cores; ISA flags {flags})")
    if manifest.target.kind != "conda" and manifest.python and manifest.python.version:
        py = manifest.python
        where = f" (base {py.base_prefix})" if py.base_prefix else ""
        out.append(f"the Python interpreter: {py.implementation or 'python'} {py.version}{where}; "
                   "a new venv uses whatever interpreter of that version the machine has")
    out += _machine_lines(manifest)
    for key, table in manifest.to_dict().items():
        if key in _COVERED or not isinstance(table, dict):
            continue
        out.append(f"[{key}] as recorded in the manifest")
    if manifest.env and manifest.env.vars:
        out.append("environment variables: " + ", ".join(manifest.env.vars)
                   + " (set them in the job script)")
    g = manifest.git
    if g and g.status == "ok" and g.commit:
        dirty = " plus uncommitted changes" if g.dirty else ""
        out.append(f"the code: git checkout {g.commit[:12]} of {g.path}{dirty}")
    for pkg in manifest.pip.packages if manifest.pip else ():
        if pkg.origin == "editable":
            out.append(f"{pkg.name} {pkg.version}: editable install of {pkg.editable_path or pkg.url}")
    return out


def _pylock_not_locked(path: Path) -> list[str]:
    from envlock.manifest._toml import load_file  # noqa: PLC0415

    data = load_file(path)
    table = data.get("tool", {}).get("envlock", {}) if isinstance(data.get("tool"), dict) else {}
    out = []
    for item in table.get("not-locked", []) if isinstance(table, dict) else []:
        if isinstance(item, dict) and item.get("kind") == "not-reproducible":
            out.append(f"{item.get('name')} {item.get('version')}: {item.get('reason')}")
    return out


def validate_lockfile(path: str | Path, kind: str) -> None:
    """Check that a lockfile is one its installer will accept, before anything runs.

    * ``conda-lock``: conda-lock's own parser (``conda_lock.lockfile.parse_conda_lock_file``);
      without conda-lock installed, a structural check of the same version-1 layout.
    * ``pylock``: packaging's reference PEP 751 parser (``packaging.pylock``, packaging >= 25),
      which also refuses a ``lock-version`` it does not support (PEP 751: a tool must not
      install from a major version it does not know).
    * ``conda-explicit``: UTF-8 text whose lines after ``@EXPLICIT`` are package URLs
      (conda's explicit-spec format).
    * ``requirements``: every requirement parses as a PEP 508 requirement
      (``packaging.requirements``).

    :param kind: as :func:`envlock.probes.lockfiles.lockfile_kind` names it.
    :raises ManifestError: one line naming the file and what is wrong with it.
    """
    from envlock.manifest._toml import read_text  # noqa: PLC0415

    path = Path(path)
    if kind in ("conda-lock", "pylock"):  # the shared readers: conda-lock's model, packaging
        from envlock import formats  # noqa: PLC0415

        formats.read_lock(path)
    elif kind == "conda-explicit":
        _check_explicit(path, read_text(path))
    elif kind == "requirements":
        _check_requirements(path, read_text(path))


def _check_explicit(path: Path, text: str) -> None:
    from urllib.parse import urlparse  # noqa: PLC0415

    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "@EXPLICIT"), None)
    if start is None:
        raise ManifestError(f"{path}: not a conda explicit lock (no @EXPLICIT line)")
    for number, line in enumerate(lines[start + 1:], start + 2):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        url = entry.split("#", 1)[0]
        if not urlparse(url).scheme or not url.endswith((".conda", ".tar.bz2")):
            raise ManifestError(f"{path}: line {number} is not a conda package URL: {entry[:80]}")


def _check_requirements(path: Path, text: str) -> None:
    import re  # noqa: PLC0415

    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    for line in text.replace("\\\n", " ").splitlines():
        entry = line.strip()
        if not entry or entry.startswith(("#", "-")):
            continue
        req = re.sub(r"\s--hash[= ]\S+", "", entry).split(" #", 1)[0].strip()
        try:
            Requirement(req)
        except InvalidRequirement as exc:
            raise ManifestError(f"{path}: requirement {req[:80]!r} is not valid PEP 508 "
                                f"({str(exc).splitlines()[0]})") from None


def _kind_of(path: Path) -> str | None:
    """What ``path`` is, by its content, with the shared reader (:mod:`envlock.formats`: regular
    files only, bounded): ``None`` for an envlock manifest, else the lockfile kind restore
    installs (``conda-lock``, ``conda-explicit``, ``pylock``, ``requirements`` when every line is
    hash-pinned).

    :raises ManifestError: unreadable or malformed (one line), or a kind restore cannot install.
    """
    from envlock import formats  # noqa: PLC0415

    try:
        kind = formats.read(path, exact=True).kind
    except ManifestError as exc:
        if "unknown format" in str(exc):
            raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile"
                                ) from None
        raise
    if kind == "manifest":
        return None
    if kind in ("conda-lock", "conda-explicit", "pylock"):
        return kind
    if kind == "requirements" and lockfile_kind(path) == "requirements":
        return kind
    if kind == "requirements":  # not hash-pinned: a wish list, not a lock
        raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile")
    raise ManifestError(f"{path}: neither an envlock manifest nor a known lockfile (a {kind} is "
                        "not installed by restore: it installs conda-lock.yml, conda explicit "
                        "lists, pylock.toml and hash-pinned requirements.txt)")


def plan_restore(
    inputs: Sequence[str | Path],
    prefix: str | Path,
    *,
    python_version: str | None = None,
    index_map: Mapping[str, str] | None = None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    no_index: bool = False,
    python: str | None = None,
    runner: Runner = run,
) -> RestorePlan:
    """Build the restore plan for manifests and/or lockfiles.

    Lockfiles given, or recorded in a manifest's ``[lockfiles]`` and unchanged since (same
    sha256), are preferred.  Without any, the manifest is restored from its own tables
    (:func:`manifest_pins`, :func:`find_python`, the ``conda-meta`` records).

    :param inputs: manifest files (``.toml``/``.json`` with an ``[envlock]`` table) and
        lockfiles, in any order; conda lockfiles are installed before pip ones.
    :param prefix: the environment directory to create.
    :param python_version: Python for a new venv when there is no conda-lock file.
    :param index_map: local-version label → index URL (``{"cu130": "https://…"}``) for pip
        packages with that label; PyTorch's labels default to :data:`PYTORCH_INDEX`.
    :param index_url: replaces PyPI; ``find_links``: directories of wheels; ``no_index``: use
        only ``find_links`` (uv's options of the same names).
    :param python: the interpreter for a venv restored from a manifest (default: one of the
        recorded version found on this machine).
    :raises ManifestError: an input is neither a manifest nor a known lockfile, or a lockfile
        is malformed (see :func:`validate_lockfile`); nothing is run then.
    """
    from envlock.manifest import load  # noqa: PLC0415

    prefix = str(prefix)
    lockfiles: list[Path] = []
    warnings: list[str] = []
    missing: list[str] = []
    bare: list[tuple[Path, Manifest]] = []  # manifests that name no usable lockfile
    for item in inputs:
        path = Path(item)
        if not path.exists():
            raise ManifestError(f"{path}: no such file")
        kind = _kind_of(path)
        if kind is None:
            manifest = load(str(path))
            found, warns = _lockfiles_of(path, manifest)
            lockfiles += found
            warnings += warns
            missing += _not_restored(manifest)
            if python_version is None and manifest.python and manifest.python.version:
                python_version = manifest.python.version
            if not found:
                bare.append((path, manifest))
        else:
            lockfiles.append(path)
    if not lockfiles and bare:
        if len(bare) > 1:
            raise ManifestError("restore one manifest at a time when none records a lockfile "
                                f"({', '.join(str(p) for p, _ in bare)})")
        path, manifest = bare[0]
        return _plan_from_manifest(
            path, manifest, prefix, warnings=warnings, missing=missing,
            index=_index_options(manifest, index_map or {}, index_url, find_links, no_index),
            python=python, runner=runner)
    kinds = {p: _kind_of(p) for p in lockfiles}
    for p in dict.fromkeys(lockfiles):  # before any command is printed or run
        validate_lockfile(p, kinds[p] or "")
    order = {"conda-lock": 0, "conda-explicit": 0, "pylock": 1, "requirements": 2}
    lockfiles = sorted(dict.fromkeys(lockfiles), key=lambda p: order.get(kinds[p] or "", 3))
    python = f"{prefix}/bin/python"
    steps: list[Step] = []
    has_conda = any(kinds[p] in ("conda-lock", "conda-explicit") for p in lockfiles)
    if not has_conda and lockfiles:
        argv = ["uv", "venv", prefix] + (["--python", python_version] if python_version else [])
        steps.append(Step(title="create a virtual environment", argv=tuple(argv), kind="uv-venv"))
    for p in lockfiles:
        kind = kinds[p]
        if kind == "conda-lock":
            steps.append(Step(title=f"install the conda packages of {p.name}", kind="conda-lock",
                              argv=("conda-lock", "install", "--prefix", prefix, str(p)),
                              lockfile=str(p)))
        elif kind == "conda-explicit":
            steps.append(Step(title=f"install the explicit conda lock {p.name}", kind="conda-lock",
                              argv=("conda", "create", "--prefix", prefix, "--file", str(p)),
                              lockfile=str(p)))
        elif kind == "pylock":
            steps.append(Step(title=f"install the pip packages of {p.name}", kind="pylock",
                              argv=("uv", "pip", "install", "--python", python, "-r", str(p)),
                              lockfile=str(p)))
            missing += _pylock_not_locked(p)
        else:
            steps.append(Step(title=f"install the hash-pinned requirements {p.name}",
                              kind="requirements", lockfile=str(p),
                              argv=("uv", "pip", "install", "--python", python,
                                    "--require-hashes", "-r", str(p))))
    return RestorePlan(prefix=prefix, steps=tuple(steps),
                       not_restored=tuple(dict.fromkeys(missing)), warnings=tuple(warnings))


# -- restoring from the manifest alone -----------------------------------------------------

#: Where PyTorch publishes each build variant (its local version label, PEP 440 "local
#: version identifier": ``2.13.0+cpu``, ``2.14.1+cu130``): one index per variant, as the
#: install selector on pytorch.org gives them (``--index-url https://download.pytorch.org/whl/cu130``).
PYTORCH_INDEX = "https://download.pytorch.org/whl/{label}"

#: Local labels PyTorch uses for its variant indexes: CPU-only, CUDA x.y, ROCm x.y, Intel XPU.
_PYTORCH_LABEL = re.compile(r"cpu|cu\d{2,3}|rocm\d+(?:\.\d+)*|xpu")


def variant_index(label: str, index_map: Mapping[str, str]) -> str | None:
    """The index URL serving pip packages whose version has local label ``label``.

    :param label: the local version label (``"cpu"``, ``"cu130"``).
    :param index_map: the user's ``--index LABEL=URL`` choices; they win.
    :returns: the URL, PyTorch's per-variant index (:data:`PYTORCH_INDEX`) for its labels, or
        ``None`` when no index is known for the label.
    """
    if label in index_map:
        return index_map[label]
    if _PYTORCH_LABEL.fullmatch(label):
        return PYTORCH_INDEX.format(label=label)
    return None


def _local_labels(manifest: Manifest) -> dict[str, list[str]]:
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415

    labels: dict[str, list[str]] = {}
    for p in manifest.pip.packages if manifest.pip else ():
        if p.origin != "index":
            continue
        try:
            local = Version(p.version).local
        except InvalidVersion:
            continue
        if local:
            labels.setdefault(local, []).append(p.name)
    return labels


def _index_options(
    manifest: Manifest,
    index_map: Mapping[str, str],
    index_url: str | None,
    find_links: Sequence[str],
    no_index: bool,
) -> tuple[IndexOptions, list[str], list[str]]:
    """uv's index options for a manifest's pip packages, and notes/warnings about them."""
    from envlock.lock._pip import IndexOptions  # noqa: PLC0415

    notes: list[str] = []
    warnings: list[str] = []
    extra: list[str] = []
    for label, names in sorted(_local_labels(manifest).items()):
        url = variant_index(label, index_map)
        who = ", ".join(names)
        if no_index:
            notes.append(f"+{label} packages ({who}) must be in --find-links (--no-index)")
        elif url is None:
            warnings.append(f"no index is known for the local label +{label} ({who}); give "
                            f"--index {label}=URL or --find-links DIR")
        else:
            source = "--index" if label in index_map else "PyTorch's variant index (default)"
            notes.append(f"+{label} packages ({who}) from {url} ({source})")
            if url not in extra:
                extra.append(url)
    opts = IndexOptions(index_url=index_url, extra_index_urls=tuple(extra),
                        find_links=tuple(str(Path(f).resolve()) if "://" not in f else f
                                         for f in find_links),
                        no_index=no_index, source="command line")
    return opts, notes, warnings


@dataclass(frozen=True, kw_only=True, slots=True)
class PythonChoice:
    """The interpreter a venv is restored with, and how it was found.

    :ivar version: the version the manifest records (``[python] version``).
    :ivar path: the interpreter found (``None``: none of that version on this machine).
    :ivar found_version: what that interpreter reports (``platform.python_version()``).
    :ivar how: where it was found (``"the manifest's base prefix"``, ``"uv python find"``,
        ``"--python"``).
    :ivar looked: every candidate tried, with what it reported.
    """

    version: str | None
    path: str | None
    found_version: str | None = None
    how: str = ""
    looked: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        """The interpreter found has exactly the recorded version."""
        return self.path is not None and self.found_version == self.version

    def describe(self) -> str:
        """One line: which interpreter, where, and whether it is the recorded version."""
        if self.path is None:
            tried = "; ".join(self.looked) or "nothing"
            return (f"no Python {self.version} on this machine (tried: {tried}); install it "
                    f"(e.g. `uv python install {self.version}`) or give --python PATH")
        same = ("the recorded version" if self.exact
                else f"NOT the recorded {self.version}")
        return f"Python {self.found_version} at {self.path} ({self.how}; {same})"


def _python_version_of(exe: str, runner: Runner) -> str | None:
    result = runner([exe, "-c", "import platform; print(platform.python_version())"],
                    timeout=20.0)
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def find_python(
    version: str | None,
    *,
    base_prefix: str | None = None,
    explicit: str | None = None,
    runner: Runner = run,
) -> PythonChoice:
    """Find an interpreter of exactly ``version`` on this machine; never another silently.

    Candidates, in order: ``explicit`` (``--python``: used even when its version differs, and
    then said so); the recorded ``sys.base_prefix`` (``bin/pythonX.Y``, ``bin/python3``); what
    ``uv python find --system VERSION`` finds (installed interpreters and ``PATH``; downloads
    off).  Each is run to ask its ``platform.python_version()``.

    :param version: the recorded version (``"3.11.7"``).
    :returns: the choice; ``path`` is ``None`` when no candidate has that version.
    """
    import os  # noqa: PLC0415

    looked: list[str] = []
    if explicit:
        found = _python_version_of(explicit, runner)
        return PythonChoice(version=version, path=explicit if found else None,
                            found_version=found, how="--python",
                            looked=(f"{explicit}: {found or 'does not run'}",))
    if not version:
        return PythonChoice(version=None, path=None, looked=("the manifest records no version",))
    mm = ".".join(version.split(".")[:2])
    candidates: list[tuple[str, str]] = []
    uv_miss = ""
    if base_prefix:
        for name in (f"python{mm}", "python3"):
            candidates.append((os.path.join(base_prefix, "bin", name),
                               "the manifest's base prefix"))
    try:
        from envlock.lock._tools import uv_bin  # noqa: PLC0415

        env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", NO_COLOR="1")
        result = runner([uv_bin(), "python", "find", "--system", version], timeout=30.0, env=env)
        if result.ok and result.stdout.strip():
            candidates.append((result.stdout.strip().splitlines()[-1], "uv python find"))
        else:
            uv_miss = f"uv python find {version}: none"
    except EnvlockError:
        uv_miss = "uv python find: uv not installed"
    seen: set[str] = set()
    for exe, how in candidates:
        if exe in seen:
            continue
        seen.add(exe)
        if not os.path.exists(exe):
            looked.append(f"{exe}: absent")
            continue
        found = _python_version_of(exe, runner)
        looked.append(f"{exe}: {found or 'does not run'}")
        if found == version:
            return PythonChoice(version=version, path=exe, found_version=found, how=how,
                                looked=tuple(looked))
    return PythonChoice(version=version, path=None,
                        looked=tuple(looked) + ((uv_miss,) if uv_miss else ()))


def manifest_pins(manifest: Manifest) -> tuple[list[str], list[Skipped], list[PipPackage]]:
    """The pip part of a manifest as uv requirements.

    Index installs become ``name==version`` (the local label included: ``torch==2.13.0+cpu``),
    archives ``name @ url``, VCS installs ``name @ git+url@commit`` (PEP 610's
    ``vcs_info.commit_id``), as :func:`envlock.lock._pip.requirement_for` decides.

    :returns: ``(requirements, skipped, editables)``: the lines; what is left out (conda-owned
        dist-infos, dead URLs) with the reason; editable installs, restored from their git
        checkout by separate steps.
    """
    from envlock.lock._pip import requirement_for  # noqa: PLC0415

    pins: list[str] = []
    skipped: list[Skipped] = []
    editables: list[PipPackage] = []
    for pkg in manifest.pip.packages if manifest.pip else ():
        if pkg.origin == "editable":
            editables.append(pkg)
            continue
        req = requirement_for(pkg)
        if isinstance(req, str):
            pins.append(req)
        else:
            skipped.append(req)
    return pins, skipped, editables


def _patch_for(manifest_path: Path, manifest: Manifest, pkg: PipPackage) -> Path | None:
    """``manifest.patch`` beside the manifest (``envlock snapshot --save-patch``), when it is
    the uncommitted diff of this package's checkout (the manifest's own ``[git]``)."""
    patch = manifest_path.with_suffix(".patch")
    g = manifest.git
    if not patch.is_file() or g is None or pkg.git is None:
        return None
    return patch if g.path and g.path == pkg.git.path else None


def _editable_steps(
    manifest_path: Path, manifest: Manifest, pkg: PipPackage, prefix: str, python: str,
    index_args: Sequence[str],
) -> tuple[list[Step], list[str]]:
    g = pkg.git
    where = pkg.editable_path or pkg.url or "a local directory"
    if g is None or not g.commit:
        return [], []  # _not_restored lists it: "editable install of …"
    remotes = sorted(g.remotes, key=lambda r: r.name != "origin")
    source = remotes[0].url if remotes else (g.path or where)
    dest = f"{prefix}/src/{pkg.name}"
    steps = [
        Step(title=f"check out {pkg.name} at its recorded commit {g.commit[:12]}", kind="git",
             argv=("git", "clone", "--quiet", "--no-checkout", source, dest)),
        Step(title=f"  (commit {g.commit})", kind="git",
             argv=("git", "-C", dest, "checkout", "--quiet", "--detach", g.commit)),
    ]
    notes = []
    if g.dirty:
        patch = _patch_for(manifest_path, manifest, pkg)
        if patch is not None:
            steps.append(Step(title=f"apply the uncommitted changes saved in {patch.name}",
                              kind="git", argv=("git", "-C", dest, "apply", str(patch))))
        else:
            notes.append(f"{pkg.name} {pkg.version}: uncommitted changes of {g.path} "
                         "(no manifest.patch beside the manifest: `envlock snapshot "
                         "--save-patch` keeps them)")
    steps.append(Step(title=f"install {pkg.name} editable from that checkout", kind="editable",
                      argv=("uv", "pip", "install", "--python", python, "--no-deps",
                            *index_args, "-e", dest)))
    return steps, notes


def _plan_from_manifest(
    path: Path,
    manifest: Manifest,
    prefix: str,
    *,
    warnings: list[str],
    missing: list[str],
    index: tuple[IndexOptions, list[str], list[str]],
    python: str | None,
    runner: Runner,
) -> RestorePlan:
    opts, notes, index_warnings = index
    warnings = [*warnings, *index_warnings]
    steps: list[Step] = []
    choice: PythonChoice | None = None
    conda = manifest.conda.packages if manifest.conda else ()
    py = f"{prefix}/bin/python"
    if conda:
        channels: list[str] = []
        for c in conda:
            if c.url and c.url.count("/") >= 3:
                base = c.url.rsplit("/", 2)[0]
                if base not in channels:
                    channels.append(base)
            if not c.url or not c.md5:
                warnings.append(f"conda package {c.name} {c.version} {c.build} has no "
                                f"{'url' if not c.url else 'md5'} in the manifest; it cannot be "
                                "restored (installed from a local file?)")
        argv = ["conda", "create", "--prefix", prefix, "--override-channels"]
        for ch in channels:
            argv += ["-c", ch]
        argv += ["--yes", *(f"{c.name}={c.version}={c.build}" for c in conda)]
        steps.append(Step(
            title=f"install the {len(conda)} conda packages of {path.name} as name=version=build "
                  "(--run: py-rattler installs exactly these files, md5/sha256 checked)",
            argv=tuple(argv), kind="conda-manifest", manifest=str(path)))
    elif manifest.pip and manifest.pip.packages:
        info = manifest.python
        choice = find_python(info.version if info else None,
                             base_prefix=info.base_prefix if info else None, explicit=python,
                             runner=runner)
        if not choice.exact:
            warnings.append(choice.describe())
        argv = ["uv", "venv", "--quiet", prefix, "--python",
                choice.path or (choice.version or "3")]
        steps.append(Step(title="create a virtual environment with "
                          + (choice.describe() if choice.path else f"Python {choice.version}"),
                          argv=tuple(argv), kind="uv-venv"))
    pins, skipped, editables = manifest_pins(manifest)
    index_args = opts.uv_args()
    if pins:
        steps.append(Step(
            title=f"install the {len(pins)} pip packages of {path.name} at their recorded "
                  "versions (--no-deps: exactly the recorded set)",
            argv=("uv", "pip", "install", "--quiet", "--python", py, "--no-deps", *index_args,
                  *pins),
            kind="pip-pins"))
    for pkg in editables:
        more, lost = _editable_steps(path, manifest, pkg, prefix, py, index_args)
        steps += more
        missing += lost
    for s in skipped:
        if s.kind != "conda":
            missing.append(f"{s.name} {s.version}: {s.reason}")
    if pins:
        notes.append("the manifest records no pip file hashes: uv checks versions, not files "
                     "(`envlock lock --from-manifest` pins the sha256 of the files found now)")
    if choice is not None:
        missing = [(f"the Python interpreter itself: {choice.describe()}; the venv links to it, "
                    "a rebuild does not make it") if m.startswith("the Python interpreter:")
                   else m for m in missing]
    from_git = {e.name for e in editables if e.git is not None and e.git.commit}
    missing = [m for m in missing if not ("editable install of" in m
                                          and m.split(" ", 1)[0] in from_git)]
    if not steps:
        warnings.append(f"{path}: the manifest records no conda or pip packages")
    return RestorePlan(prefix=prefix, steps=tuple(steps),
                       not_restored=tuple(dict.fromkeys(missing)), warnings=tuple(warnings),
                       manifests=(str(path),), python=choice, notes=tuple(notes))


def run_plan(plan: RestorePlan, *, runner: Runner = run) -> list[str]:
    """Run a plan's steps in order.

    conda-lock files go through ``conda-lock install`` when a conda executable exists, else
    through py-rattler's installer (and their pip entries through uv); ``uv`` is the binary of
    the ``uv`` package.

    :raises LockError: the prefix exists and is not empty (a restore never overwrites an
        environment), or a step fails (its command's last lines are in the message).  What
        the failed restore created is removed first (the prefix, or the contents of the empty
        prefix it was given), and the message's first line says so, or says what is left.
    :raises KeyboardInterrupt: after removing what the restore created, likewise.
    :returns: one line per step done.
    """

    from envlock.errors import EnvlockError  # noqa: PLC0415

    prefix = Path(plan.prefix)
    if prefix.exists() and (not prefix.is_dir() or any(prefix.iterdir())):
        raise LockError(f"{prefix} exists and is not empty; restore into a new --prefix")
    if plan.python is not None and plan.python.path is None:
        raise LockError(f"cannot create the venv: {plan.python.describe()}")
    created = not prefix.exists()
    try:
        return _run_steps(plan, runner)
    except KeyboardInterrupt:
        _remove_partial(prefix, created)  # Ctrl-C leaves nothing half-built
        raise
    except (EnvlockError, OSError) as exc:
        note = _remove_partial(prefix, created)
        first, _, rest = (str(exc) if isinstance(exc, EnvlockError)
                          else f"{exc.filename or prefix}: {exc.strerror or exc}").partition("\n")
        raise LockError(f"{first.rstrip(':')}; {note}" + (f"\n{rest}" if rest else "")) from None


def _remove_partial(prefix: Path, created: bool) -> str:
    """Undo a failed restore: remove the prefix it created, or empty the one it was given."""
    import shutil  # noqa: PLC0415

    if not prefix.exists():
        return "nothing was created"
    try:
        if created:
            shutil.rmtree(prefix)
            return f"removed the partial environment {prefix}"
        for child in prefix.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return f"emptied {prefix} again"
    except OSError as exc:
        return (f"a partial environment is left at {prefix} (removing it failed: "
                f"{exc.strerror or exc}); delete it before restoring again")


def _run_steps(plan: RestorePlan, runner: Runner) -> list[str]:
    from envlock.lock import _condalock  # noqa: PLC0415
    from envlock.lock._pip import _uv_env  # noqa: PLC0415
    from envlock.lock._tools import (  # noqa: PLC0415
        INSTALL_TIMEOUT,
        conda_executable,
        conda_lock_argv,
        current_platform,
        uv_bin,
    )

    done = []
    for step in plan.steps:
        if step.kind == "conda-manifest":
            names = _install_conda_manifest(step.manifest or "", plan.prefix)
            done.append(f"installed {len(names)} conda packages with py-rattler from the "
                        "manifest's records (exact files, md5/sha256 checked)")
            continue
        if step.kind == "pip-pins":
            done += _install_pins(list(step.argv), runner, INSTALL_TIMEOUT, _uv_env())
            continue
        if step.kind == "conda-lock" and step.argv[0] == "conda-lock":
            exe = conda_executable()
            if exe is None:
                names = _condalock.install(step.lockfile or "", plan.prefix)
                platform = current_platform()
                pip_lines = _condalock.pip_requirements(step.lockfile or "", platform)
                if pip_lines:
                    _install_pip_lines(uv_bin(), plan.prefix, pip_lines, runner, INSTALL_TIMEOUT,
                                       _uv_env())
                done.append(f"installed {len(names)} conda packages with py-rattler "
                            "(no conda executable found)"
                            + (" and pip entries with uv" if pip_lines else ""))
                continue
            argv = [*conda_lock_argv(), *step.argv[1:], "--conda", exe]
            _run_checked(argv, runner, INSTALL_TIMEOUT, None)
        else:
            argv = list(step.argv)
            if argv[0] == "uv":
                argv[0] = uv_bin()
            _run_checked(argv, runner, INSTALL_TIMEOUT, _uv_env())
        done.append(f"done: {step.shell}")
    return done


#: How uv says that a pinned version is not on the indexes given (``uv pip install``).
_NOT_ON_INDEX = re.compile(r"no version of ([A-Za-z0-9][A-Za-z0-9._-]*)==|"
                           r"([A-Za-z0-9][A-Za-z0-9._-]*) was not found in")


def _install_pins(argv: list[str], runner: Runner, timeout: float,
                  env: dict[str, str]) -> list[str]:
    """Install a manifest's pins; a version no index has any more is left out and reported
    (the verification after the restore lists it as missing), the rest is installed."""
    from envlock.lock._tools import uv_bin  # noqa: PLC0415
    from envlock.probes.pip import canonicalize  # noqa: PLC0415

    argv = [uv_bin(), *argv[1:]]
    left_out: list[str] = []
    while True:
        result = runner(argv, timeout=timeout, env=env)
        if result.ok:
            break
        text = (result.stderr or result.stdout)
        gone = {canonicalize(m.group(1) or m.group(2)) for m in _NOT_ON_INDEX.finditer(text)}
        drop = [a for a in argv if "==" in a and canonicalize(a.split("==")[0]) in gone]
        if not drop or result.status != "failed":
            tail = "\n".join(text.strip().splitlines()[-10:])
            raise LockError(f"{shlex.join(argv)} failed ({result.detail})"
                            + (f":\n{tail}" if tail else ""))
        left_out += drop
        argv = [a for a in argv if a not in drop]
    shown = shlex.join(["uv", *argv[1:]])
    lines = [f"done: {shown}"]
    if left_out:
        lines.append("not on the indexes given, left out: " + ", ".join(left_out))
    return lines


def _install_pip_lines(
    uv: str, prefix: str, lines: list[str], runner: Runner, timeout: float, env: dict[str, str]
) -> None:
    """Install ``name @ url --hash=…`` lines with uv, hashes checked, nothing else resolved."""
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        _run_checked([uv, "pip", "install", "--python", f"{prefix}/bin/python", "--no-deps",
                      "--require-hashes", "-r", str(req)], runner, timeout, env)


def _run_checked(
    argv: list[str], runner: Runner, timeout: float, env: dict[str, str] | None
) -> None:
    result = runner(argv, timeout=timeout, env=env)
    if not result.ok:
        text = (result.stderr or result.stdout).strip()
        tail = "\n".join(text.splitlines()[-10:])
        message = f"{shlex.join(argv)} failed ({result.detail})"
        raise LockError(message + (f":\n{tail}" if tail else ""))


def _install_conda_manifest(manifest_path: str, prefix: str) -> list[str]:
    """Install a manifest's conda packages with py-rattler: each record's own URL, md5 and
    sha256 (``conda-meta``), through a conda-lock file written with conda-lock's models."""
    import tempfile  # noqa: PLC0415

    from envlock.lock import _condalock  # noqa: PLC0415
    from envlock.lock._fromenv import _conda_part, environment_platform  # noqa: PLC0415
    from envlock.manifest import load  # noqa: PLC0415

    manifest = load(manifest_path)
    text, _skipped, _notes = _conda_part(manifest, manifest.target.prefix)
    if text is None:
        raise LockError(f"{manifest_path}: no conda package can be restored")
    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as tmp:
        lock = Path(tmp) / "conda-lock.yml"
        lock.write_text(text, encoding="utf-8")
        return _condalock.install(lock, prefix, platform=environment_platform(manifest))


@dataclass(frozen=True, kw_only=True, slots=True)
class RestoreCheck:
    """How a restored environment compares with its manifest (``envlock verify``'s checks).

    :ivar exact: packages that came back at their recorded version (and conda build).
    :ivar differs: what differs in the environment (package and Python findings' titles).
    :ivar machine: what a rebuild never restores: the machine and job findings of verify, then
        the plan's "not restored" list (driver, GPU, CPU, system libraries, kernel, …).
    :ivar exit_code: verify's: 0 when no error, 1 otherwise.
    """

    exact: tuple[str, ...]
    differs: tuple[str, ...]
    machine: tuple[str, ...]
    exit_code: int


#: verify's checks that judge the environment itself (the rest judge the machine and the job).
_ENV_CHECKS = ("python.", "packages.")


def verify_restored(plan: RestorePlan, *, runner: Runner = run) -> RestoreCheck:
    """Check a restored environment against the manifest it was restored from.

    Runs :func:`envlock.verify.verify` (all its checks) with the new environment as target and
    sorts its findings: ``python.*``/``packages.*`` are differences of the environment, the
    others (driver, GPU architecture, libraries, isolation, …) belong to the machine or job.

    :raises ManifestError: the plan restores no manifest.
    """
    from envlock.manifest import load  # noqa: PLC0415
    from envlock.verify import verify  # noqa: PLC0415

    if not plan.manifests:
        raise ManifestError("the restore used lockfiles only; nothing to verify against")
    path = plan.manifests[0]
    manifest = load(path)
    conda = bool(manifest.conda and manifest.conda.packages)
    report = verify(manifest=path, prefix=plan.prefix if conda else None,
                    python=None if conda else f"{plan.prefix}/bin/python", runner=runner)
    named: set[str] = set()
    differs, machine = [], []
    for f in report.findings:
        if f.id.startswith(_ENV_CHECKS):
            differs.append(f"{f.severity}: {f.title}")
            for ev in f.evidence:
                parts = ev.removeprefix("installed: ").split()
                if parts:
                    named.add(parts[0])
        elif f.severity != "info" or f.id.startswith("gpu."):
            machine.append(f"{f.severity}: {f.title}")
    exact = [f"{p.name} {p.version}" for p in (manifest.pip.packages if manifest.pip else ())
             if p.origin != "conda" and p.name not in named]
    exact += [f"{c.name} {c.version} {c.build}" for c in
              (manifest.conda.packages if manifest.conda else ()) if c.name not in named]
    return RestoreCheck(exact=tuple(exact), differs=tuple(differs),
                        machine=tuple(machine) + plan.not_restored, exit_code=report.exit_code)
