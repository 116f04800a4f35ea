"""What differs between GOOD and BAD, in units that can be applied one at a time.

A *side* (:class:`Side`) is what bisect reads from an input: the pip packages as uv
requirement lines, the numerics environment variables, the Python version, and the facts of the
machine that no rebuild toggles.  Inputs are manifests or any file ``envlock diff`` reads
(requirements.txt, pylock.toml, conda-lock.yml, environment.yml, ``conda list --explicit``).

A *change* (:class:`Change`) is one package or one variable that differs; a *group*
(:class:`Group`) is the smallest set of changes that can be installed on its own:

* the CUDA variant: a change of local version label (``torch 2.13.0+cpu`` → ``2.14.1+cu130``)
  travels with every ``nvidia-*``/``cuda-*`` wheel and ``triton`` that changed (PyTorch's wheels pin them
  exactly: the ``Requires-Dist`` of a CUDA ``torch`` wheel names ``nvidia-*==…``);
* packages whose pins tie them: uv's resolver is asked whether GOOD with one group applied is
  satisfiable (:func:`merge_infeasible`); when it is not, the packages its explanation names
  are merged into the group, as ``git bisect skip`` steps over commits that cannot be tested.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock._names import canonicalize
from envlock.errors import ManifestError

__all__ = ["Side", "Change", "Group", "read_side", "changes_between", "group_changes",
           "merge_infeasible", "NUMERIC_VARS", "is_numeric_var"]

#: Environment variables that change numerical results or their determinism without changing
#: a single file: thread counts and code paths of the BLAS/OpenMP runtimes (OpenMP spec,
#: oneMKL "Conditional Numerical Reproducibility", OpenBLAS README), cuBLAS/cuDNN determinism
#: (CUDA docs: ``CUBLAS_WORKSPACE_CONFIG``), TF32 (``NVIDIA_TF32_OVERRIDE``), NumPy's CPU
#: dispatch (``NPY_DISABLE_CPU_FEATURES``), hash seeds.  Prefixes end with ``_``.
NUMERIC_VARS = ("OMP_", "MKL_", "OPENBLAS_", "BLIS_", "KMP_", "GOMP_", "GOTO_", "VECLIB_",
                "NPY_", "NUMEXPR_", "CUBLAS_", "CUDNN_", "NVIDIA_TF32_OVERRIDE", "TORCH_",
                "PYTORCH_", "CUDA_LAUNCH_BLOCKING", "XLA_", "JAX_", "TF_DETERMINISTIC_OPS",
                "TF_ENABLE_ONEDNN_OPTS", "PYTHONHASHSEED", "NCCL_ALGO", "NCCL_PROTO",
                "ONEDNN_", "DNNL_")


def is_numeric_var(name: str) -> bool:
    """Whether bisect toggles variable ``name`` (:data:`NUMERIC_VARS`)."""
    return any(name.startswith(p) if p.endswith("_") else name == p for p in NUMERIC_VARS)


@dataclass(frozen=True, kw_only=True, slots=True)
class Side:
    """One input of bisect.

    :ivar path: the file read; ``kind``: its format (as ``envlock diff`` names it).
    :ivar pins: PEP 503 name → (version, uv requirement line).
    :ivar env: recorded environment variables (all of them; only numerics ones are toggled).
    :ivar python: the Python version (``None`` when the input does not say).
    :ivar base_prefix: where that interpreter lives (``sys.base_prefix``), if recorded.
    :ivar conda: conda package name → ``version build`` (not toggled by bisect).
    :ivar machine: label → value for the facts no rebuild changes (GPU, driver, CPU, kernel).
    :ivar lost: pip packages that cannot be installed from the input (editable, dead URLs).
    :ivar target_python: the recorded interpreter of the environment itself (manifests).
    """

    path: str
    kind: str
    pins: Mapping[str, tuple[str, str]]
    env: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None
    base_prefix: str | None = None
    conda: Mapping[str, str] = field(default_factory=dict)
    machine: Mapping[str, str] = field(default_factory=dict)
    lost: tuple[str, ...] = ()
    target_python: str | None = None


def _machine(data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    gpu = data.get("gpu") or {}
    if isinstance(gpu, Mapping):
        if gpu.get("driver-version"):
            out["NVIDIA driver"] = str(gpu["driver-version"])
        names = [str(g.get("name")) for g in gpu.get("gpus", []) if isinstance(g, Mapping)]
        if names:
            out["GPU"] = ", ".join(names)
    cpu = data.get("cpu") or {}
    if isinstance(cpu, Mapping) and cpu.get("model"):
        out["CPU"] = str(cpu["model"])
        if cpu.get("flags"):
            out["CPU ISA flags"] = " ".join(cpu["flags"])
    plat = data.get("platform") or {}
    if isinstance(plat, Mapping):
        for key, label in (("kernel", "kernel"), ("glibc", "glibc"), ("os-name", "OS")):
            if plat.get(key):
                out[label] = str(plat[key])
    cuda = data.get("cuda") or {}
    if isinstance(cuda, Mapping):
        tks = [f"{t.get('version')} at {t.get('path')}" for t in cuda.get("toolkits", [])
               if isinstance(t, Mapping) and t.get("path")]
        if tks:
            out["system CUDA toolkit"] = "; ".join(tks)
    return out


def read_side(path: str | Path) -> Side:
    """Read GOOD or BAD: a manifest, or any input ``envlock diff`` reads.

    :raises ManifestError: unreadable or of an unknown format (one line); an input that lists
        pip packages without exact versions (a spec such as ``numpy>=1.24``), which no
        environment can be built from.
    :raises UntrustedValueError: a name, URL, commit or the Python version is not what it must
        be (docs/trust.md: no value from a file becomes an option).
    """
    from envlock.diff import foreign  # the readers of every diff input
    from envlock.lock._pip import Skipped, requirement_for
    from envlock.manifest import PipPackage

    p = str(path)
    kind, data, _listing = foreign.read(p)
    pins: dict[str, tuple[str, str]] = {}
    lost: list[str] = []
    python = None
    base = None
    env: dict[str, str] = {}
    target_python = None
    if kind == "manifest":
        from envlock.manifest import Manifest

        m = Manifest.from_dict(data)
        packages = list(m.pip.packages if m.pip else ())
        python = m.python.version if m.python else None
        base = m.python.base_prefix if m.python else None
        env = dict(m.env.vars) if m.env else {}
        target_python = m.target.python
    else:
        packages = []
        for d in (data.get("pip") or {}).get("packages", []):
            version = str(d.get("version") or "")
            if version and not re.fullmatch(r"[A-Za-z0-9_.!+*-]+", version):
                raise ManifestError(f"{p}: {d.get('name')} is not pinned to one version "
                                    f"({version}); bisect needs exact versions")
            packages.append(PipPackage(
                name=canonicalize(str(d.get("name", ""))), version=version, location="",
                origin=("editable" if d.get("origin") == "editable" or d.get("editable")
                        else "vcs" if d.get("commit") and d.get("url")
                        else "archive" if d.get("url") else "index"),
                url=(str(d["url"]).removeprefix("git+").rsplit("@", 1)[0]
                     if d.get("commit") and d.get("url") else d.get("url")),
                vcs="git" if d.get("commit") else None, commit=d.get("commit")))
        py = data.get("python") or {}
        python = str(py.get("version")) if isinstance(py, Mapping) and py.get("version") else None
    from envlock._untrusted import (
        UntrustedValueError,
        check_python_version,
        check_requirement,
    )
    from envlock.lock._from_manifest import check_pip_package

    try:  # every value that reaches uv's command line is data (docs/trust.md)
        if python is not None:
            check_python_version(python, "[python] version")
        for pkg in packages:
            req = requirement_for(pkg)
            if isinstance(req, Skipped):
                if req.kind != "conda":
                    lost.append(f"{pkg.name} {pkg.version}: {req.reason}")
                continue
            check_pip_package(pkg)
            pins[canonicalize(pkg.name)] = (pkg.version, check_requirement(
                req, f"[[pip.packages]] {pkg.name!r}"))
    except UntrustedValueError as exc:
        raise UntrustedValueError(f"{p}: {exc}") from None
    conda = {str(c.get("name")): f"{c.get('version', '')} {c.get('build', '')}".strip()
             for c in (data.get("conda") or {}).get("packages", []) if isinstance(c, Mapping)}
    return Side(path=p, kind=kind, pins=pins, env=env, python=python, base_prefix=base,
                conda=conda, machine=_machine(data), lost=tuple(lost),
                target_python=target_python)


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One package or variable that differs.

    :ivar kind: ``"pip"`` or ``"env"``.
    :ivar good, bad: the version (pip) or value (env) on each side; ``None``: absent there.
    :ivar good_req, bad_req: the uv requirement line on each side (pip).
    """

    kind: str
    name: str
    good: str | None
    bad: str | None
    good_req: str | None = None
    bad_req: str | None = None

    @property
    def label(self) -> str:
        """``numpy 1.24.4 → 1.25.0``, ``+ foo 1.0``, ``OMP_NUM_THREADS 1 → 4``, ``OMP_X unset``."""
        def show(v: str | None) -> str:
            return "(unset)" if v is None else (repr(v) if self.kind == "env" and
                                                (v == "" or " " in v) else v)
        if self.kind == "pip" and self.good is None:
            return f"+ {self.name} {self.bad}"
        if self.kind == "pip" and self.bad is None:
            return f"- {self.name} {self.good}"
        return f"{self.name} {show(self.good)} → {show(self.bad)}"

    def to_json(self) -> dict[str, Any]:
        """The change as a JSON object."""
        return {"kind": self.kind, "name": self.name, "good": self.good, "bad": self.bad}


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Changes applied together; ``why`` says why they are one group."""

    changes: tuple[Change, ...]
    why: str = "one change"

    @property
    def needs_build(self) -> bool:
        """It changes packages (a variable alone needs no new environment)."""
        return any(c.kind == "pip" for c in self.changes)

    @property
    def label(self) -> str:
        """The changes, comma-separated."""
        return ", ".join(c.label for c in self.changes)

    @property
    def names(self) -> frozenset[str]:
        """The package and variable names it changes."""
        return frozenset(c.name for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        """The group as a JSON object."""
        return {"label": self.label, "why": self.why,
                "changes": [c.to_json() for c in self.changes]}


def changes_between(good: Side, bad: Side) -> tuple[list[Change], list[str]]:
    """Every pip package and numerics variable that differs, and what bisect cannot toggle.

    :returns: ``(changes, not_toggled)``; the second lists, one line each, the differences no
        environment built from GOOD can take on: the Python version, conda packages, other
        variables, redacted values, and the machine (driver, GPU, CPU, kernel, glibc).
    """
    from envlock.redact import REDACTED

    out: list[Change] = []
    for name in sorted(set(good.pins) | set(bad.pins)):
        gp, bp = good.pins.get(name), bad.pins.get(name)
        if (gp and gp[1]) == (bp and bp[1]):
            continue
        out.append(Change(kind="pip", name=name, good=gp[0] if gp else None,
                          bad=bp[0] if bp else None, good_req=gp[1] if gp else None,
                          bad_req=bp[1] if bp else None))
    lost: list[str] = []
    for name in sorted(set(good.env) | set(bad.env)):
        g, b = good.env.get(name), bad.env.get(name)
        if g == b:
            continue
        if not is_numeric_var(name):
            lost.append(f"variable {name}: {_short(g)} → {_short(b)} (not a numerics "
                        "variable; set it yourself if it matters)")
        elif REDACTED in (g, b):
            lost.append(f"variable {name}: its value was redacted in the manifest")
        else:
            out.append(Change(kind="env", name=name, good=g, bad=b))
    if good.python and bad.python and good.python != bad.python:
        lost.append(f"Python {good.python} → {bad.python} (every environment uses GOOD's)")
    for name in sorted(set(good.conda) | set(bad.conda)):
        if good.conda.get(name) != bad.conda.get(name):
            lost.append(f"conda package {name}: {good.conda.get(name) or '(absent)'} → "
                        f"{bad.conda.get(name) or '(absent)'}")
    for label in sorted(set(good.machine) | set(bad.machine)):
        g, b = good.machine.get(label), bad.machine.get(label)
        if g != b:
            lost.append(f"{label}: {g or '(not recorded)'} → {b or '(not recorded)'} "
                        "(the machine)")
    lost += [f"{item} (GOOD)" for item in good.lost] + [f"{item} (BAD)" for item in bad.lost]
    return out, lost


def _short(value: str | None, width: int = 60) -> str:
    if value is None:
        return "(unset)"
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _local(version: str | None) -> str | None:
    from packaging.version import InvalidVersion, Version

    if not version:
        return None
    try:
        return Version(version).local
    except InvalidVersion:
        return None


def _cuda_member(c: Change) -> bool:
    return c.kind == "pip" and (c.name.startswith(("nvidia-", "cuda-"))
                                or c.name in ("triton", "pytorch-triton"))


def group_changes(changes: Sequence[Change], rank: Mapping[str, int] | None = None) -> list[Group]:
    """One group per change, except the CUDA variant, which is one group; in impact order.

    :param rank: name → position in ``envlock diff``'s ranking (lower: more likely to move
        results); names it does not rank follow, variables first (they need no build).
    """
    rank = rank or {}
    variant = [c for c in changes if c.kind == "pip" and _local(c.good) != _local(c.bad)
               and c.good and c.bad]
    cuda = [c for c in changes if _cuda_member(c)]
    groups: list[Group] = []
    if cuda or any(re.fullmatch(r"cu\d+", _local(c.good) or "") or
                   re.fullmatch(r"cu\d+", _local(c.bad) or "") for c in variant):
        members = [c for c in changes if c in variant or c in cuda]
        labels = sorted({f"{c.name} {c.good} → {c.bad}" for c in variant})
        groups.append(Group(changes=tuple(members), why="the CUDA variant ("
                            + (", ".join(labels) or "nvidia-* wheels")
                            + ") with its nvidia-*/cuda-* wheels and triton, which it pins"))
    grouped = {c.name for g in groups for c in g.changes}
    groups += [Group(changes=(c,)) for c in changes if c.name not in grouped]

    def key(g: Group) -> tuple[int, int, str]:
        best = min((rank.get(n, 10_000) for n in g.names), default=10_000)
        return (best, 0 if not g.needs_build else 1, g.label)

    return sorted(groups, key=key)


_REQ_NAME = re.compile(r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:===?|>=|<=|!=|~=|<|>)")


def merge_infeasible(
    groups: list[Group],
    check: Callable[[Sequence[Group]], str | None],
    *,
    workers: int = 4,
    known: Mapping[int, str | None] | None = None,
) -> tuple[list[Group], list[str]]:
    """Merge groups that cannot be installed apart.

    :param check: applies groups to GOOD and asks the resolver; returns ``None`` when
        satisfiable, else the resolver's explanation (uv's "Because … depends on …" text).
    :param workers: how many of the first questions (each group alone on GOOD, independent of
        each other) are asked at once; each is one resolver process (issue 26: asked one after
        the other they were most of bisect's overhead).  The answers, merges and notes are those
        of asking in order: only the questions are asked early.
    :param known: those first answers already asked (position in ``groups`` → ``check``'s
        answer for that group alone), as :func:`envlock.reproduce.bisect` asks them together
        with GOOD's and BAD's own pins.
    :returns: the groups (merged ones at the position of the first) and one note per merge,
        quoting the resolver; a group that is infeasible even after merging everything the
        explanation names is kept and noted (its subsets are then skipped).
    """
    notes: list[str] = []
    out = list(groups)
    alone: dict[int, str | None] = {id(groups[i]): why for i, why in (known or {}).items()}
    todo = [g for g in out if g.needs_build and id(g) not in alone]
    if workers > 1 and len(todo) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            for g, why in zip(todo, pool.map(lambda h: check([h]), todo)):
                alone[id(g)] = why
    i = 0
    while i < len(out):
        g = out[i]
        if not g.needs_build:
            i += 1
            continue
        why = alone[id(g)] if id(g) in alone else check([g])
        tried = 0
        while why is not None and tried < len(out):
            tried += 1
            named = {canonicalize(m.group(1)) for m in _REQ_NAME.finditer(why)}
            partners = [h for h in out if h is not g and h.names & named]
            if not partners:
                notes.append(f"{g.label}: cannot be installed on GOOD, and the resolver names no "
                             f"other change ({_first(why)}); its subsets are skipped")
                break
            merged = Group(changes=tuple(c for h in [g, *partners] for c in h.changes),
                           why="merged: installable only together (uv: " + _first(why) + ")")
            notes.append(f"merged {' + '.join(h.label for h in [g, *partners])}: GOOD with "
                         f"{g.label} alone cannot be installed (uv: {_first(why)})")
            out = [merged if h is g else h for h in out if h not in partners]
            g = merged
            why = check([g])
        i += 1
    return out, notes


def _first(text: str) -> str:
    lines = [ln.strip().lstrip("×╰─▶│ ").strip().removeprefix("cause:").strip()
             for ln in text.splitlines()]
    useful = [ln for ln in lines if ln.startswith(("Because", "And because"))]
    return " ".join(useful or [ln for ln in lines if ln][:1]).strip()[:400]
