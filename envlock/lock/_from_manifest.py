"""Restoring from a manifest alone: exact pins from its own tables, nothing solved.

conda packages as ``name=version=build`` from the URLs and md5/sha256 of their ``conda-meta``
records (py-rattler), pip packages at their exact versions with uv (``--no-deps``), the
variant's index for local-label builds (:func:`variant_index`: PyTorch's per-variant indexes),
VCS and editable packages from their recorded commit (plus ``--save-patch``'s patch), and, for
a venv, an interpreter of the recorded version found on this machine (:func:`find_python`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock._run import Runner, run
from envlock._untrusted import (
    UntrustedValueError,
    check_commit,
    check_conda_spec,
    check_file_name,
    check_git_source,
    check_name,
    check_requirement,
    check_url,
    contained,
)
from envlock.errors import EnvlockError
from envlock.lock._plan import PythonChoice, RestorePlan, Step
import os
from envlock._untrusted import check_python_version
import platform
import sys
import hashlib
from envlock._io import InputError, read_bytes
from envlock.errors import TargetError

if TYPE_CHECKING:
    from envlock.lock._pip import IndexOptions, Skipped
    from envlock.manifest import Manifest, PipPackage

__all__ = ["PYTORCH_INDEX", "PythonChoice", "find_python", "manifest_pins", "plan_from_manifest",
           "variant_index", "index_options", "check_pip_package"]


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
    from packaging.version import InvalidVersion, Version

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


def index_options(
    manifest: Manifest,
    index_map: Mapping[str, str],
    index_url: str | None,
    find_links: Sequence[str],
    no_index: bool,
) -> tuple[IndexOptions, list[str], list[str]]:
    """uv's index options for a manifest's pip packages, and notes/warnings about them.

    A local label's variant index (PyTorch's ``whl/cpu``, ``whl/cu130``) is added by default,
    except when ``find_links`` is given: local wheels mean an offline node, so only an explicit
    ``--index LABEL=URL`` adds an online one (issue 25)."""
    from envlock.lock._pip import IndexOptions

    notes: list[str] = []
    warnings: list[str] = []
    extra: list[str] = []
    for label, names in sorted(_local_labels(manifest).items()):
        url = variant_index(label, index_map)
        who = ", ".join(names)
        if no_index:
            notes.append(f"+{label} packages ({who}) must be in --find-links (--no-index)")
        elif find_links and label not in index_map:  # local wheels given: no online default
            notes.append(f"+{label} packages ({who}) from --find-links (PyTorch's online "
                         f"variant index is not added when --find-links is given; "
                         f"--index {label}=URL adds it)")
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


def _python_version_of(exe: str, runner: Runner) -> str | None:
    result = runner([exe, "-c", "import platform; print(platform.python_version())"],
                    timeout=20.0)
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def find_python(
    version: str | None,
    *,
    base_prefix: str | None = None,
    explicit: str | None = None,
    local_prefix: str | None = None,
    own_last: bool = False,
    runner: Runner = run,
) -> PythonChoice:
    """Find an interpreter of exactly ``version`` on this machine; never another silently.

    Only interpreters the user's machine offers are run: ``explicit`` (``--python``: used even
    when its version differs, and then said so), ``local_prefix`` (a prefix the caller trusts,
    such as envlock's own ``sys.base_prefix``) and what ``uv python find --system VERSION``
    finds (uv's managed interpreters and ``PATH``; downloads off), and with ``own_last``, when
    ``version`` is envlock's own, envlock's own interpreter (``sys.base_prefix``) after uv's:
    an interpreter that is not on ``PATH`` (a pyenv version that is not the global one, a conda
    env's) runs envlock and restores its own manifests.  Each is run to ask its
    ``platform.python_version()``.  The manifest's ``base_prefix`` is never run (a manifest is
    data, docs/trust.md): its ``bin/pythonX.Y`` is only a proposal the plan shows
    (:attr:`PythonChoice.proposed`), which ``--python`` can accept.

    :param version: the recorded version (``"3.11.7"``).
    :param base_prefix: the manifest's ``[python] base-prefix`` (shown, not run).
    :returns: the choice; ``path`` is ``None`` when no candidate has that version.
    :raises UntrustedValueError: ``version`` is not a Python version (it would reach uv's
        command line).
    """
    looked: list[str] = []
    if explicit:
        found = _python_version_of(explicit, runner)
        return PythonChoice(version=version, path=explicit if found else None,
                            found_version=found, how="--python",
                            looked=(f"{explicit}: {found or 'does not run'}",))
    if not version:
        return PythonChoice(version=None, path=None, looked=("the manifest records no version",))
    check_python_version(version, "[python] version")
    mm = ".".join(version.split(".")[:2])
    proposed = os.path.join(base_prefix, "bin", f"python{mm}") if base_prefix else None
    candidates: list[tuple[str, str]] = []
    if local_prefix:
        for name in (f"python{mm}", "python3"):
            candidates.append((os.path.join(local_prefix, "bin", name), "envlock's own"))
    uv_found, uv_miss = _uv_python_find(version, runner)
    if uv_found:
        candidates.append((uv_found, "uv python find"))
    if own_last and not local_prefix:

        if platform.python_version() == version:
            for name in (f"python{mm}", "python3"):
                candidates.append((os.path.join(sys.base_prefix, "bin", name), "envlock's own"))
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
                                looked=tuple(looked), proposed=proposed)
    return PythonChoice(version=version, path=None, proposed=proposed,
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
    from envlock.lock._pip import requirement_for

    pins: list[str] = []
    skipped: list[Skipped] = []
    editables: list[PipPackage] = []
    for pkg in manifest.pip.packages if manifest.pip else ():
        if pkg.origin == "conda":  # installed by its conda package, never by a pip command
            conda_req = requirement_for(pkg)
            if not isinstance(conda_req, str):
                skipped.append(conda_req)
            continue
        check_pip_package(pkg)
        if pkg.origin == "editable":
            editables.append(pkg)
            continue
        req = requirement_for(pkg)
        if isinstance(req, str):
            pins.append(check_requirement(req, f"[[pip.packages]] {pkg.name}"))
        else:
            skipped.append(req)
    return pins, skipped, editables


def check_pip_package(pkg: PipPackage) -> None:
    """Check the fields of one ``[[pip.packages]]`` entry that a restore puts on a command line
    (docs/trust.md): the name (PEP 508), a VCS install's URL (git's transports) and commit (full
    hex for git), an archive's URL, an editable's git remotes and commit.

    :raises UntrustedValueError: a field is not what it must be (one line naming it).
    """
    where = f"[[pip.packages]] {pkg.name!r}"
    check_name(pkg.name, f"{where} name")
    if pkg.origin == "vcs" and pkg.url:
        check_git_source(pkg.url, f"{where} url")
        if pkg.commit and (pkg.vcs or "git") == "git":
            check_commit(pkg.commit, f"{where} commit")
        if (pkg.vcs or "git") not in ("git", "hg", "svn", "bzr"):
            raise UntrustedValueError(f"{where} vcs: {pkg.vcs!r} is not git, hg, svn or bzr; "
                                      "nothing was run")
    elif pkg.origin in ("archive", "directory") and pkg.url:
        check_url(pkg.url, f"{where} url")
    if pkg.origin == "editable" and pkg.git is not None and pkg.git.commit:
        check_commit(pkg.git.commit, f"{where} git.commit")
        for remote in pkg.git.remotes:
            check_git_source(remote.url, f"{where} git.remotes {remote.name!r}")
        if not pkg.git.remotes and pkg.git.path:
            check_git_source(pkg.git.path, f"{where} git.path")


def _patch_for(manifest_path: Path, manifest: Manifest,
               pkg: PipPackage) -> tuple[Path | None, str, str | None]:
    """The patch ``envlock snapshot --save-patch`` recorded for this package's checkout (the
    manifest's own ``[git]``): ``(path, note, sha256)``.

    Only the file the manifest names (``[git] patch``, a bare name beside the manifest) is
    used, and only when its sha256 is the recorded ``patch-sha256``; any other ``*.patch`` is
    never applied.  ``path`` is ``None`` then, and ``note`` says why.
    """
    g = manifest.git
    if g is None or pkg.git is None or not g.path or g.path != pkg.git.path:
        return None, "", None
    if not g.patch:
        beside = manifest_path.with_suffix(".patch")
        extra = (f"; {beside.name} beside the manifest is not used (the manifest does not "
                 "record it)" if beside.exists() else "")
        return None, ("the manifest records no patch (`envlock snapshot --save-patch` keeps "
                      f"them){extra}"), None
    name = check_file_name(g.patch, "[git] patch")
    if not g.patch_sha256:
        return None, f"{name}: the manifest records no patch-sha256; not applied", None
    path = contained(manifest_path.resolve().parent, name, field="[git] patch")
    try:
        digest = hashlib.sha256(read_bytes(path)).hexdigest()
    except InputError as exc:
        return None, f"{exc}; not applied", None
    if digest != g.patch_sha256.lower():
        return None, (f"{name}: sha256 {digest[:12]}… is not the recorded patch-sha256 "
                      f"{g.patch_sha256[:12]}…; not applied"), None
    return path, "", digest


def _editable_steps(
    manifest_path: Path, manifest: Manifest, pkg: PipPackage, prefix: str, python: str,
    index_args: Sequence[str],
) -> tuple[list[Step], list[str], list[str]]:
    """The steps that restore an editable install from its recorded commit:
    ``(steps, notes, lost)``."""
    g = pkg.git
    if g is None or not g.commit:
        return [], [], []  # not_restored lists it: "editable install of …"
    remotes = sorted(g.remotes, key=lambda r: r.name != "origin")
    source = remotes[0].url if remotes else (g.path or "")
    if not source:
        return [], [], []
    dest = str(contained(prefix, "src", pkg.name, field=f"[[pip.packages]] {pkg.name!r} name"))
    steps = [
        Step(title=f"check out {pkg.name} at its recorded commit {g.commit[:12]} (fetches "
                   f"{source})", kind="git",
             argv=("git", "-c", "protocol.ext.allow=never", "clone", "--quiet",
                   "--no-checkout", "--", source, dest)),
        Step(title=f"  (commit {g.commit})", kind="git",
             argv=("git", "-C", dest, "checkout", "--quiet", "--detach", g.commit)),
    ]
    notes = []
    if g.dirty:
        patch, why, digest = _patch_for(manifest_path, manifest, pkg)
        if patch is not None:
            steps.append(Step(title=f"apply the uncommitted changes saved in {patch.name} "
                                    f"(sha256 {digest})",
                              kind="patch", sha256=digest,
                              argv=("git", "-C", dest, "apply", "--binary", "--", str(patch))))
        else:
            notes.append(f"{pkg.name} {pkg.version}: uncommitted changes of {g.path} are not "
                         f"restored: {why or 'no patch'}")
    steps.append(Step(title=f"install {pkg.name} editable from that checkout (runs its build "
                            "backend: code from that checkout)", kind="editable",
                      argv=("uv", "pip", "install", "--python", python, "--no-deps",
                            *index_args, "-e", dest)))
    return steps, notes, [source]


def plan_from_manifest(
    path: Path,
    manifest: Manifest,
    prefix: str,
    *,
    warnings: list[str],
    missing: list[str],
    index: tuple[IndexOptions, list[str], list[str]],
    python: str | None,
    runner: Runner,
    python_version: str | None = None,
) -> RestorePlan:
    """The plan that rebuilds ``manifest`` from its own tables (module docstring).

    :param python: ``--python``: the interpreter of the new venv (it must run).
    :param python_version: ``--python-version``: another version than the recorded one (the
        plan then says the restore is not exact).
    :raises TargetError: ``python`` does not run as a Python interpreter.
    """
    opts, notes, index_warnings = index
    warnings = [*warnings, *index_warnings]
    steps: list[Step] = []
    contacts: list[str] = []
    builds: list[str] = []
    choice: PythonChoice | None = None
    pins, skipped, editables = manifest_pins(manifest)  # every value checked before a step
    conda = manifest.conda.packages if manifest.conda else ()
    py = f"{prefix}/bin/python"
    if conda:
        steps.append(_conda_step(path, conda, prefix, warnings, contacts))
    elif manifest.pip and manifest.pip.packages:
        choice = _interpreter(manifest, python, python_version, warnings, runner)
        steps.append(Step(title="create a virtual environment with "
                          + (choice.describe() if choice.path else f"Python {choice.version}"),
                          argv=("uv", "venv", "--quiet", prefix, "--python",
                                choice.path or (choice.version or "3")), kind="uv-venv"))
    index_args = opts.uv_args()
    if pins:
        contacts += pip_contacts(opts)
        steps.append(_pins_step(path, pins, py, index_args, contacts, builds))
    for pkg in editables:
        more, more_notes, remotes = _editable_steps(path, manifest, pkg, prefix, py, index_args)
        steps += more
        notes += more_notes
        if more:
            contacts += [c for c in pip_contacts(opts) if c not in contacts]  # its build deps
            contacts += [f"git remote {r} ({pkg.name})" for r in remotes]
            builds.append(f"{pkg.name}: builds its checkout of {remotes[0]} (runs its build "
                          "backend)")
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
                       manifests=(str(path),), python=choice, notes=tuple(notes),
                       contacts=tuple(dict.fromkeys(contacts)), builds=tuple(dict.fromkeys(builds)))


def pip_contacts(opts: IndexOptions) -> list[str]:
    """What uv contacts for pip packages with these index options, one line each (the plan
    names them, docs/trust.md)."""
    out = []
    if not opts.no_index:
        out.append(f"pip index {opts.index_url}" if opts.index_url
                   else "pip index: uv's default (PyPI) or the one your uv/pip configuration sets")
        out += [f"pip index {u}" for u in opts.extra_index_urls]
    out += [f"find-links {f}" for f in opts.find_links]
    return out


def _conda_step(path: Path, conda: Any, prefix: str, warnings: list[str],
                contacts: list[str]) -> Step:
    """The ``conda create`` step of a manifest's conda packages (each spec and URL checked;
    their channels appended to ``contacts``, packages without url/md5 to ``warnings``)."""
    channels: list[str] = []
    for c in conda:
        check_conda_spec(c.name, c.version, c.build, f"[[conda.packages]] {c.name!r}")
        if c.url:
            check_url(c.url, f"[[conda.packages]] {c.name!r} url")
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
    argv += ["--yes", "--", *(f"{c.name}={c.version}={c.build}" for c in conda)]
    contacts += [f"conda channel {ch}" for ch in channels]
    return Step(title=f"install the {len(conda)} conda packages of {path.name} as name=version=build "
                      "(--run: py-rattler installs exactly these files, md5/sha256 checked)",
                argv=tuple(argv), kind="conda-manifest", manifest=str(path))


def _interpreter(manifest: Manifest, python: str | None, python_version: str | None,
                 warnings: list[str], runner: Runner) -> PythonChoice:
    """The interpreter of a venv rebuilt from ``manifest`` (:func:`find_python`); a version
    other than the recorded one, or an inexact choice, is a warning.

    :raises TargetError: ``python`` does not run as a Python interpreter.
    """
    info = manifest.python
    recorded = info.version if info else None
    if python_version and python_version != recorded:
        warnings.append(f"Python {python_version} asked for (--python-version); the manifest "
                        f"records {recorded or 'no version'}: not an exact restore")
    choice = find_python(python_version or recorded,
                         base_prefix=info.base_prefix if info and not python_version else None,
                         explicit=python, own_last=True, runner=runner)
    if python and choice.path is None:
        raise TargetError(f"--python {python}: does not run as a Python interpreter")
    if not choice.exact:
        warnings.append(choice.describe())
    return choice


def _uv_python_find(version: str, runner: Runner) -> tuple[str | None, str]:
    """What ``uv python find --system VERSION`` finds (downloads off), and else why not."""
    try:
        from envlock.lock._tools import uv_bin

        env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", NO_COLOR="1")
        result = runner([uv_bin(), "python", "find", "--system", "--", version], timeout=30.0,
                        env=env)
    except EnvlockError:
        return None, "uv python find: uv not installed"
    if result.ok and result.stdout.strip():
        return result.stdout.strip().splitlines()[-1], ""
    return None, f"uv python find {version}: none"


def _pins_step(path: Path, pins: list[str], py: str, index_args: list[str],
               contacts: list[str], builds: list[str]) -> Step:
    """The ``uv pip install --no-deps`` step of the recorded pins; direct URLs are appended to
    ``contacts``, what it builds from source to ``builds``."""
    for pin in pins:
        name, at, url = pin.partition(" @ ")
        if at:
            contacts.append(f"{url} ({name})")
            if url.startswith(("git+", "hg+", "svn+", "bzr+")) or not url.endswith(".whl"):
                builds.append(f"{name}: builds {url} (runs its build backend)")
    builds.append("any recorded version that has no wheel for this machine is built from "
                  "its sdist (runs its build backend)")
    return Step(title=f"install the {len(pins)} pip packages of {path.name} at their recorded "
                      "versions (--no-deps: exactly the recorded set)",
                argv=("uv", "pip", "install", "--quiet", "--python", py, "--no-deps", *index_args,
                      "--", *pins),
                kind="pip-pins")
