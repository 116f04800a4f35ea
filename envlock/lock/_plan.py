"""What a restore plan is: its steps, and what no lockfile brings back.

:class:`RestorePlan` is what :func:`envlock.lock._restore.plan_restore` returns (from lockfiles)
and :func:`envlock.lock._from_manifest.plan_from_manifest` builds (from a manifest alone);
:func:`envlock.lock._apply.run_plan` runs it.  :func:`not_restored` lists, from the manifest,
the machine parts (driver, system CUDA, compilers, the C library, CPU and GPU), variables and
code a lockfile cannot restore.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envlock._kinds import STACK_AREAS

if TYPE_CHECKING:
    from envlock.manifest import Manifest

__all__ = ["Step", "RestorePlan", "PythonChoice", "not_restored"]

@dataclass(frozen=True, kw_only=True, slots=True)
class PythonChoice:
    """The interpreter a venv is restored with, and how it was found.

    :ivar version: the version the manifest records (``[python] version``).
    :ivar path: the interpreter found (``None``: none of that version on this machine).
    :ivar found_version: what that interpreter reports (``platform.python_version()``).
    :ivar how: where it was found (``"envlock's own"``, ``"uv python find"``,
        ``"--python"``).
    :ivar looked: every candidate tried, with what it reported.
    :ivar proposed: the interpreter the manifest names (``[python] base-prefix``): a proposal
        shown in the plan, never run (docs/trust.md); ``--python`` accepts it.
    """

    version: str | None
    path: str | None
    found_version: str | None = None
    how: str = ""
    looked: tuple[str, ...] = ()
    proposed: str | None = None

    @property
    def exact(self) -> bool:
        """The interpreter found has exactly the recorded version."""
        return self.path is not None and self.found_version == self.version

    def describe(self) -> str:
        """One line: which interpreter, where, and whether it is the recorded version."""
        if self.path is None:
            tried = "; ".join(self.looked) or "nothing"
            named = (f"; the manifest names {self.proposed} (not run: a manifest is data; "
                     f"--python {self.proposed} uses it)" if self.proposed else "")
            return (f"no Python {self.version} on this machine (tried: {tried}){named}; install "
                    f"it (e.g. `uv python install {self.version}`) or give --python PATH")
        same = ("the recorded version" if self.exact
                else f"NOT the recorded {self.version}")
        return f"Python {self.found_version} at {self.path} ({self.how}; {same})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One command of a restore.

    :ivar argv: the command as a user would type it (``conda-lock``/``uv`` by name).
    :ivar kind: ``"conda-lock"``, ``"uv-venv"``, ``"pylock"``, ``"requirements"``, or for a
        restore from the manifest alone ``"conda-manifest"`` (py-rattler installs the recorded
        conda files), ``"pip-pins"`` (uv installs exact versions), ``"git"`` (clone, checkout,
        apply a patch: ``"patch"``) and ``"editable"``; ``"write"``: envlock writes
        :attr:`content` to ``argv[1]`` (a project lock converted for this target).
    :ivar lockfile: the lockfile it installs, if any; ``manifest``: the manifest it restores
        from (``"conda-manifest"``).
    :ivar sha256: for ``"patch"`` (``git apply`` of a ``--save-patch`` file): the digest the
        manifest records, checked again right before the patch is applied.
    :ivar content: for ``"write"``: the file's text.
    """

    title: str
    argv: tuple[str, ...]
    kind: str
    lockfile: str | None = None
    manifest: str | None = None
    sha256: str | None = None
    content: str | None = None

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
    :ivar contacts: every index, channel, URL and VCS remote ``--run`` contacts, one line each
        (docs/trust.md: the plan names them before anything runs).
    :ivar builds: what ``--run`` builds from source, which runs that source's build backend.
    """

    prefix: str
    steps: tuple[Step, ...] = ()
    not_restored: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    manifests: tuple[str, ...] = ()
    python: PythonChoice | None = None
    notes: tuple[str, ...] = ()
    contacts: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()


#: Manifest tables that a lockfile restores (``frameworks`` and ``blas`` follow from the
#: packages), that describe the job rather than the environment (``slurm``), or that the plan
#: describes itself.
_COVERED = frozenset({"envlock", "target", "python", "platform", "cpu", "env", "git", "conda",
                      "pip", "lockfiles"} | {a.name for a in STACK_AREAS if a.restored != "build"})


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


def not_restored(manifest: Manifest) -> list[str]:
    """What the manifest records that no lockfile restores, one line each (the OS and C
    library, the CPU, the interpreter of a venv, the GPU/driver/CUDA/compilers, tables envlock
    does not restore, variables, the code, editable installs)."""
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


