"""What ``envlock show`` prints for a manifest: the summary a person reads, every package
(``--all``), or the manifest itself as JSON (``--format json``).

The summary answers, in this order, the questions of ``docs/diff.md``'s impact classes: the
platform and CPU, Python, the numerical stack (frameworks and their builds), GPU and CUDA,
BLAS and threads, the code, numerics variables, then the other recorded areas and the key
packages.  Each line is ``label: text``, wrapped at spaces to the console width with a hanging
indent, so nothing is cut and no line is longer than the terminal.  Which variables are
"numerics variables" and which packages are "key" comes from the impact model
(``envlock/data/impact.toml``): its classes ``numerics-env`` and ``blas`` (thread counts) for
``[env]``, and ``platform``, ``gpu-runtime``, ``blas``, ``numerical-core`` and ``domain`` for
packages.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from envlock._kinds import STACK_AREAS
from envlock.manifest import AREAS, Manifest
from envlock.redact import redact_variable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["KEY_CLASSES", "NUMERICS_ENV_CLASSES", "render_show", "render_packages",
           "package_rows", "summary_lines", "lock_summary_lines", "foreign_lines", "foreign_rows",
           "foreign_json", "render_foreign"]

#: impact classes of the packages listed as "key packages".
KEY_CLASSES = frozenset({"platform", "gpu-runtime", "blas", "numerical-core", "domain"})

#: impact classes of the ``[env]`` variables listed as "numerics variables".
NUMERICS_ENV_CLASSES = frozenset({"numerics-env", "blas"})

#: key packages named before the count of the rest (CUDA wheels are summarised by "CUDA").
_KEY_LIMIT = 16

_SHOWN = {"envlock", "target", "python", "platform", "cpu", "env", "git", "conda", "pip",
          "libraries", "lockfiles"} | {a.name for a in STACK_AREAS if a.shown}


def _state(table: Any) -> str | None:
    """``None`` when a table is ok, else ``"<status> (<error>)"`` or ``"not recorded"``."""
    if table is None:
        return "not recorded"
    if table.status == "ok":
        return None
    return f"{table.status}" + (f" ({table.error})" if getattr(table, "error", None) else "")


def _fmt_bytes(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def _simd(flags: Iterable[str]) -> str:
    fl = set(flags)
    if "avx512f" in fl:
        return "AVX-512"
    return "AVX2, no AVX-512" if "avx2" in fl else "no AVX2"


def _kb() -> Any:
    from envlock.diff.impact import load_kb

    return load_kb()


def package_rows(m: Manifest) -> list[tuple[str, str, str]]:
    """Every package of the manifest as ``(name, version, from)``, sorted by name: the
    Python distributions (``pip list`` shows the same ones) and the conda packages that are
    not a Python distribution.

    ``from`` is ``"pip (index)"``, ``"pip (editable)"``, ``"conda (<conda name>)"`` for a
    distribution conda installed, or ``"conda <channel> <build>"``.
    """
    rows: dict[str, tuple[str, str, str]] = {}
    owned: set[str] = set()
    for p in m.pip.packages if m.pip else ():
        if p.origin == "conda":
            src = f"conda ({p.conda_package})"
            owned.add(p.conda_package or p.name)
        else:
            src = f"pip ({p.origin})"
        rows[p.name] = (p.name, p.version, src)
    for c in m.conda.packages if m.conda else ():
        if c.name in owned or c.name in rows:
            continue
        rows[c.name] = (c.name, c.version, f"conda {c.channel or '?'} {c.build}")
    return [rows[k] for k in sorted(rows)]


def _key_packages(m: Manifest) -> tuple[list[tuple[str, str, str]], int]:
    """The numerical packages (by impact class) and how many CUDA wheels/packages there are."""
    kb = _kb()
    key, cuda = [], 0
    for row in package_rows(m):
        name = kb.aliases.get(row[0], row[0])
        comp = kb.component("package", name)
        if comp.id == "cuda-libs":
            cuda += 1
        elif comp.cls in KEY_CLASSES:
            key.append(row)
    return key, cuda


def _gpu(m: Manifest) -> str:
    g = m.gpu
    if g is None:
        return "not recorded"
    if g.status == "absent":
        return f"none ({g.error})" if g.error else "none"
    if _state(g):
        return str(_state(g))
    names: dict[str, int] = {}
    for x in g.gpus:
        label = f"{x.name or '?'} (compute capability {x.compute_capability or '?'})"
        names[label] = names.get(label, 0) + 1
    gpus = ", ".join(f"{n} × {k}" for k, n in names.items()) or "no GPU listed"
    driver = f"driver {g.driver_version}" if g.driver_version else "driver ?"
    if g.cuda_driver_version:
        driver += f" (runs CUDA ≤ {g.cuda_driver_version})"
    vis = f"; CUDA_VISIBLE_DEVICES={g.visible_devices}" if g.visible_devices else ""
    return f"{gpus}; {driver}{vis}"


def _cuda(m: Manifest) -> str | None:
    c = m.cuda
    if c is None:
        return None
    if _state(c):
        return str(_state(c))
    parts = []
    kits = ", ".join(f"{k.version or '?'} ({k.origin})" for k in c.toolkits)
    if kits:
        parts.append(f"toolkits {kits}")
    if c.nvcc_version:
        parts.append(f"nvcc {c.nvcc_version}")
    seen: dict[str, str] = {}
    for lib in c.libraries:
        if lib.version and lib.name not in seen:
            seen[lib.name] = f"{lib.name} {lib.version} ({lib.origin})"
    if seen:
        parts.append("libraries " + ", ".join(seen.values()))
    return "; ".join(parts) or "no CUDA toolkit or library found"


def _frameworks(m: Manifest) -> list[str]:
    f = m.frameworks
    if f is None:
        return []
    if _state(f):
        return [f"frameworks: {_state(f)}"]
    out = []
    for p in f.packages:
        bits = [f"{p.name} {p.version or '?'}", f"{p.build or '?'} build"]
        if p.cuda:
            bits.append(f"CUDA {p.cuda}")
        if p.cudnn:
            bits.append(f"cuDNN {p.cudnn}")
        if p.hip:
            bits.append(f"ROCm {p.hip}")
        if p.cuda_archs:
            bits.append("GPU code for " + " ".join(p.cuda_archs))
        out.append("framework: " + ", ".join(bits))
    rt = f.runtime
    if rt is not None:
        if _state(rt):
            out.append(f"torch at run time (--import): {_state(rt)}")
        else:
            bits = []
            for label, v in (("CUDA available", rt.cuda_available),
                             ("TF32 matmul", rt.allow_tf32_matmul),
                             ("TF32 cuDNN", rt.allow_tf32_cudnn),
                             ("deterministic algorithms", rt.deterministic),
                             ("cuDNN benchmark", rt.cudnn_benchmark)):
                if v is not None:
                    bits.append(f"{label} {'yes' if v else 'no'}")
            if rt.device_count is not None:
                bits.append(f"{rt.device_count} device(s)")
            if rt.cudnn_version:
                bits.append(f"cuDNN loaded {rt.cudnn_version}")
            out.append("torch at run time (--import): " + (", ".join(bits) or "recorded"))
    return out


def _blas(m: Manifest) -> str | None:
    b = m.blas
    if b is None:
        return None
    if _state(b):
        return str(_state(b))
    libs = [f"{x.user}: {x.implementation or '?'} {x.version or ''}".rstrip() for x in b.libraries]
    omp = [f"OpenMP {o.name}" + (f" ({o.package})" if o.package else "") for o in b.openmp]
    return "; ".join(libs + omp) or "no BLAS library found"


def _threads(m: Manifest, env: dict[str, str], kb: Any) -> str:
    names = [n for n in env if kb.component("env", n).id == "thread-count"]
    parts = [f"{n}={env[n]}" for n in names]
    if "OMP_NUM_THREADS" not in env:
        cores = m.cpu.usable_cores if m.cpu and not _state(m.cpu) else None
        parts.append("OMP_NUM_THREADS unset" + (f" (one thread per usable core: {cores})"
                                                if cores else ""))
    rt = m.frameworks.runtime if m.frameworks is not None else None
    if rt is not None and not _state(rt):
        pools = [f"{p.internal_api or p.user_api} {p.num_threads}" for p in rt.threadpools
                 if p.num_threads is not None]
        if pools:
            parts.append("thread pools (--import): " + ", ".join(pools))
    return "; ".join(parts)


def _code(m: Manifest) -> list[str]:
    out = []
    g = m.git
    if g is None:
        out.append("code: no git checkout recorded")
    elif _state(g):
        out.append(f"code: git {_state(g)}")
    else:
        state = "clean" if not g.dirty else (
            f"uncommitted changes (sha256:{g.diff_sha256[:12]}…)" if g.diff_sha256
            else "uncommitted changes")
        untracked = f", {g.untracked} untracked files" if g.untracked else ""
        out.append(f"code: {g.path} at {(g.commit or 'no commit')[:12]} on "
                   f"{g.branch or 'detached HEAD'}, {state}{untracked}")
    for p in m.pip.packages if m.pip else ():
        if p.git is not None and p.git.status == "ok":
            dirty = "clean" if not p.git.dirty else "uncommitted changes"
            out.append(f"editable: {p.name} {p.version} at {(p.git.commit or '?')[:12]} "
                       f"({p.editable_path or p.git.path}), {dirty}")
    return out


def summary_lines(m: Manifest, *, path: str = "") -> list[str]:
    """The summary as ``label: text`` lines (not yet wrapped)."""
    kb = _kb()
    head = m.envlock
    out = [path or "manifest",
           f"snapshot: envlock {head.version}, schema {head.schema}, taken {head.created} on "
           f"{head.host}"]
    t = m.target
    out.append(f"target: {t.kind} {t.prefix} (chosen by {t.chosen_by})")
    if m.platform is not None:
        p = m.platform
        out.append(f"platform: {_state(p)}" if _state(p) else
                   f"platform: {p.os_name or p.os_id or '?'}, {p.machine}, glibc {p.glibc}, "
                   f"kernel {p.kernel}")
    if m.cpu is not None:
        c = m.cpu
        out.append(f"cpu: {_state(c)}" if _state(c) else
                   f"cpu: {c.model or '?'} ({c.vendor or '?'}), {c.usable_cores} usable of "
                   f"{c.logical_cores} logical cores, {_fmt_bytes(c.memory)}; {_simd(c.flags)} "
                   f"({' '.join(c.flags) or 'no flags'})")
    if m.python is not None:
        py = m.python
        out.append(f"python: {py.implementation} {py.version} at {py.executable}"
                   if py.status == "ok" else
                   f"python: not asked ({py.status}: {py.error}); packages read from "
                   f"{', '.join(py.path) or 'nowhere'}")
    out += _frameworks(m)
    key, n_cuda = _key_packages(m)
    by_name = {r[0]: r for r in key}
    core = [f"{n} {by_name[n][1]}" for n in ("torch", "numpy", "scipy", "jax", "jaxlib",
                                            "tensorflow", "cupy", "numba") if n in by_name]
    if core:
        out.append("numerical stack: " + ", ".join(core))
    out.append(f"gpu: {_gpu(m)}")
    cuda = _cuda(m)
    if cuda:
        out.append(f"cuda: {cuda}" + (f"; {n_cuda} CUDA packages" if n_cuda else ""))
    blas = _blas(m)
    if blas:
        out.append(f"blas: {blas}")
    env = ({n: redact_variable(n, v)[0] for n, v in m.env.vars.items()}  # foreign ones too
           if m.env is not None and not _state(m.env) else {})
    out.append(f"threads: {_threads(m, env, kb)}")
    out += _code(m)
    numerics = [f"{n}={v}" for n, v in sorted(env.items())
                if kb.component("env", n).cls in NUMERICS_ENV_CLASSES
                and kb.component("env", n).id != "thread-count"]
    out.append("numerics variables: " + (", ".join(numerics) or "none set"))
    others = [f"{n}={v}" for n, v in sorted(env.items())
              if kb.component("env", n).cls not in NUMERICS_ENV_CLASSES]
    if others:
        out.append("other variables: " + ", ".join(others))
    if m.slurm is not None:
        s = m.slurm
        if _state(s):
            out.append(f"batch job: {_state(s)}")
        else:
            bits = [f"{label} {v}" for label, v in (
                ("scheduler", s.scheduler), ("partition", s.partition),
                ("nodes", s.num_nodes), ("tasks", s.ntasks),
                ("CPUs per task", s.cpus_per_task), ("GPUs on node", s.gpus_on_node))
                if v is not None]
            out.append("batch job: " + ", ".join(bits))
    if m.toolchain is not None and not _state(m.toolchain):
        tools = ", ".join(f"{x.name} {x.version}" for x in m.toolchain.tools if x.version)
        out.append(f"toolchain: {tools or 'no compilers on PATH'}")
    if m.libraries is not None:
        lib = m.libraries
        if _state(lib):
            out.append(f"libraries: {_state(lib)}")
        else:
            moved = [r.soname for r in lib.resolved if r.rule in ("ld_library_path", "preload")]
            text = f"{len(lib.resolved)} libraries of {lib.module or '?'} resolved"
            if moved:
                text += " (through LD_LIBRARY_PATH/LD_PRELOAD: " + ", ".join(moved) + ")"
            if lib.findings:
                text += f"; {len(lib.findings)} finding(s): " + "; ".join(lib.findings)
            out.append(f"libraries: {text}")
    n_pip = len(m.pip.packages) if m.pip else 0
    n_conda = len(m.conda.packages) if m.conda else 0
    line = f"packages: {n_pip} Python distributions"
    if m.conda:
        line += f", {n_conda} conda packages"
    out.append(line + " (--all lists every one)")
    data = m.to_dict()
    for area in [a for a in AREAS if a not in _SHOWN] + list(m.extra):
        table = data.get(area)
        if area in ("run", "process") and isinstance(table, dict):  # envlock run / record
            from envlock.render import run as summary

            out.extend(getattr(summary, f"{area}_lines")(table))
        elif isinstance(table, dict):
            status = table.get("status", "ok")
            detail = f" ({table['error']})" if table.get("error") else ""
            out.append(f"{area}: {status}{detail}")
    if m.lockfiles is not None:
        lf = m.lockfiles
        out.append(f"lockfiles: {_state(lf)}" if _state(lf) else
                   "lockfiles: " + (", ".join(f.path for f in lf.files) or "none"))
    return out


def _wrap(line: str, width: int) -> list[str]:
    label, sep, _ = line.partition(": ")
    hang = len(label) + 2 if sep and len(label) < 22 else 4
    # a word longer than the line (a PATH) is broken too: no line is wider than the console
    return textwrap.wrap(line, width=max(width, 40), subsequent_indent=" " * hang,
                         break_long_words=True, break_on_hyphens=False) or [""]


def render_show(manifest: Manifest, console: Console, *, path: str = "") -> None:
    """Print the summary of ``manifest`` on ``console``, wrapped to its width, then the key
    packages (name, version, where from) and any warnings the snapshot recorded."""
    width = console.width
    m = manifest
    for line in summary_lines(m, path=path):
        for part in _wrap(line, width):
            console.print(part, markup=False, highlight=False, soft_wrap=True)
    key, n_cuda = _key_packages(m)
    if key:
        console.print("key packages" + (f" ({len(key) - _KEY_LIMIT} more with --all)"
                                        if len(key) > _KEY_LIMIT else ""), markup=False)
        _table(console, key[:_KEY_LIMIT])
    if m.envlock.warnings:
        console.print(f"{len(m.envlock.warnings)} warning(s) recorded:", markup=False,
                      style="yellow")
        for w in m.envlock.warnings:
            for part in textwrap.wrap(f"  - {w}", width=max(width, 40), subsequent_indent="    ",
                                      break_long_words=True, break_on_hyphens=False):
                console.print(part, markup=False, highlight=False, soft_wrap=True)


def _table(console: Console, rows: list[tuple[str, str, str]]) -> None:
    widths = [max(len(r[i]) for r in [("name", "version", "from"), *rows]) for i in range(3)]
    for r in [("name", "version", "from"), *rows]:
        console.print("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip(),
                      markup=False, highlight=False, soft_wrap=True)


def render_packages(manifest: Manifest, console: Console) -> None:
    """Print every package (``show --all``): one per line, name, version and where from."""
    rows = package_rows(manifest)
    console.print(f"every package ({len(rows)})", markup=False)
    _table(console, rows)


def lock_summary_lines(lock: Any, *, path: str = "") -> list[str]:
    """The summary of a lockfile ``show`` was given instead of a manifest
    (:class:`envlock.formats.locks.LockFile`): its kind, then per platform how many conda
    and pip packages it locks (a ``pixi.lock`` platform with its subdir and virtual packages),
    the groups only some installs take, and the project entries."""
    lines = [f"{lock.kind}: {path}" if path else lock.kind]
    pixi = {q.name: q for q in getattr(lock, "pixi_platforms", ())}
    plats = list(lock.platforms) or [None]
    for plat in plats:
        pkgs = [x for x in lock.packages if plat is None or x.platform == plat]
        conda = sum(1 for x in pkgs if x.manager == "conda")
        pip = len(pkgs) - conda
        label = f"platform {plat}" if plat else "packages"
        text = f"{conda} conda, {pip} pip" if conda else f"{pip} pip"
        q = pixi.get(plat) if plat else None
        if q is not None and (q.subdir != q.name or q.virtual_packages):
            text += f" (subdir {q.subdir}" + (f"; virtual packages {', '.join(q.virtual_packages)}"
                                                if q.virtual_packages else "") + ")"
        lines.append(f"{label}: {text}")
    groups: dict[str, set[str]] = {}
    for x in lock.packages:
        for g, _ in x.groups:
            if g:
                groups.setdefault(g, set()).add(x.name)
    if groups:
        lines.append("optional: " + ", ".join(f"{g.replace('extra:', 'extra ')} ({len(n)})"
                                               for g, n in sorted(groups.items())))
    if lock.projects:
        lines.append(f"project: {', '.join(lock.projects)}")
    return lines


# -- a file that is not a manifest (environment.yml, a lockfile, requirements, Pipfile) --------

#: what each listing of :class:`envlock.formats.Reading` means, in a reader's words.
_LISTINGS = {"complete": "a complete listing (a package it does not list is absent)",
             "partial": "a spec: what someone asked for (unlisted packages are not compared)",
             "conda": "complete for conda packages; says nothing about pip packages",
             "pip": "complete for Python distributions; says nothing about conda packages"}


def _python_of(reading: Any) -> str:
    """The Python a reading names: the conda ``python`` package, the lock's requires-python,
    a Pipfile's ``[requires]``, else ``"not stated"``."""
    py = reading.data.get("python") or {}
    conda_py = next((p for p in (reading.data.get("conda") or {}).get("packages", ())
                     if p.get("name") == "python"), None)
    if py.get("version"):
        return f"{py.get('implementation', 'cpython')} {py['version']} (the conda python package)"
    if conda_py is not None:
        spec = (conda_py.get("constraint") or {}).get("version") or conda_py.get("version")
        return f"python {spec or 'any version'} (a conda constraint)"
    req = reading.meta.get("requires") or {}
    pin = req.get("python_full_version") or req.get("python_version")
    if pin:
        return f"{pin} (the Pipfile's [requires])"
    rp = getattr(reading.lock, "requires_python", None)
    if rp:
        return f"requires-python {rp}"
    pip = (reading.data.get("pip") or {}).get("packages", ())
    marked = any("python_version" in str(p.get("marker", "")) or "python_full_version" in str(
        p.get("marker", "")) for p in pip)
    return "not stated" + (" (entries carry python_version markers)" if marked else "")


def foreign_lines(reading: Any, *, path: str = "") -> list[str]:
    """The summary of a file that is not a manifest, as ``label: text`` lines: its kind and
    what its listing means, platforms, package counts (conda, pip; per platform for a lock of
    several), Python, channels or indexes, and what the format records besides
    (``Pipfile.lock``: its ``_meta`` hash, sources, categories).

    :param reading: an :class:`envlock.formats.Reading`.
    """
    out = [path or reading.kind, f"kind: {reading.kind}, {_LISTINGS.get(reading.listing, reading.listing)}"]
    lock = reading.lock
    plats = list(reading.platforms)
    chosen = (reading.data.get("subdir") or {}).get("subdir")
    if plats:
        out.append("platforms: " + ", ".join(plats) + (
            f" (the counts below are {chosen}'s)" if chosen and len(plats) > 1 else ""))
    elif lock is not None:
        envs = getattr(lock, "environments", ())
        out.append("platforms: any (entries carry PEP 508 markers)" + (
            "; environments " + "; ".join(envs) if envs else ""))
    else:
        out.append("platforms: not stated")
    conda_t = reading.data.get("conda") or {}
    pip_t = reading.data.get("pip") or {}
    n_conda = len(conda_t.get("packages") or ())
    n_pip = len(pip_t.get("packages") or ())
    pip_text = (f"not recorded ({pip_t.get('error')})" if pip_t.get("status") not in (None, "ok")
                else str(n_pip))
    line = f"packages: {n_conda} conda, {pip_text} pip"
    if lock is not None and len(plats) > 1:
        line += f"; {len(lock.packages)} entries on all {len(plats)} platforms"
    constraints = sum(1 for t in (conda_t, pip_t) for p in t.get("packages") or ()
                      if "constraint" in p)
    if constraints:
        line += f"; {constraints} of them constraints, not pins"
    unnamed = [p["url"] for p in pip_t.get("packages") or () if p.get("unnamed")]
    named = [p["name"] for p in pip_t.get("packages") or () if p.get("named-by") == "url"]
    if named:
        line += "; named from their URL: " + ", ".join(named)
    if unnamed:
        line += "; unnamed (a URL only): " + ", ".join(unnamed)
    out.append(line + " (--all lists every one)")
    out.append(f"python: {_python_of(reading)}")
    out += _two_builds_lines(reading)
    if conda_t.get("channels"):
        out.append("channels: " + ", ".join(str(c) for c in conda_t["channels"]))
    meta = reading.meta
    if meta.get("sources"):
        out.append("indexes: " + ", ".join(
            f"{s.get('name') or '?'} {s.get('url')}" + ("" if s.get("verify_ssl", True)
                                                         else " (TLS not verified)")
            for s in meta["sources"]))
    if meta.get("categories"):
        counts: dict[str, int] = {}
        for p in pip_t.get("packages") or ():
            counts[p.get("category", "?")] = counts.get(p.get("category", "?"), 0) + 1
        if lock is not None:  # a lock's own counts: an entry in two categories counts in both
            counts = {}
            for x in lock.packages:
                for g, _ in x.groups:
                    counts[g or "default"] = counts.get(g or "default", 0) + 1
        out.append("categories: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in meta["categories"]))
    if meta.get("sha256"):
        out.append(f"locked from: the Pipfile of sha256 {meta['sha256']}")
    if lock is not None:  # per platform, the groups some installs take, the projects
        # (a lock of no platform: its one count is the packages line above already)
        out += [ln for ln in lock_summary_lines(lock)[1:] if not ln.startswith("packages: ")]
    return out


def _two_builds_lines(reading: Any) -> list[str]:
    """``two builds: …`` for each distribution the file lists as a conda package and as a pip
    one of another version — the sentence diff reads the file with (:mod:`envlock.diff.facts`),
    so show and diff say the same; none when the file has not both."""
    if not (reading.data.get("conda") or {}).get("packages") or not (
            reading.data.get("pip") or {}).get("packages"):
        return []
    from envlock.diff.facts import extract
    from envlock.diff.impact import load_kb

    fs = extract(reading.data, label="", path="", kind=reading.kind,
                 aliases=load_kb(()).aliases, listing=reading.listing)
    return [f"two builds: {n.removeprefix(': ').removeprefix('two builds of ')}"
            for n in fs.notes if "two builds of " in n]


def foreign_rows(reading: Any) -> list[tuple[str, str, str]]:
    """Every package of a reading as ``(name, version, from)``: conda ``channel build``, pip
    with its marker or URL; constraints show their spec."""
    rows = []
    for p in (reading.data.get("conda") or {}).get("packages") or ():
        c = p.get("constraint")
        rows.append((p["name"], (c or {}).get("version") or p.get("version") or "(any)",
                     "conda " + " ".join(str(x) for x in (p.get("channel"), p.get("build")) if x)
                     + (" (constraint)" if c else "")))
    for p in (reading.data.get("pip") or {}).get("packages") or ():
        where = "pip" + (f" {p['url']}" if p.get("url") else "") + (
            f" ; {p['marker']}" if p.get("marker") else "") + (
            " (constraint)" if p.get("constraint") else "")
        rows.append((str(p["name"]), str(p.get("version") or "(any)"), where))
    return sorted(rows)


def foreign_json(reading: Any) -> dict[str, Any]:
    """``show --format json`` of a file that is not a manifest: ``kind``, ``listing``,
    ``platforms``, ``meta`` and ``data`` (the partial manifest it reads as)."""
    return {"kind": reading.kind, "listing": reading.listing, "platforms": list(reading.platforms),
            "meta": reading.meta, "data": reading.data}


def render_foreign(reading: Any, console: Console, *, path: str = "", show_all: bool = False) -> None:
    """Print :func:`foreign_lines` wrapped to the console, then (``--all``) every package."""
    for line in foreign_lines(reading, path=path):
        for part in _wrap(line, console.width):
            console.print(part, markup=False, highlight=False, soft_wrap=True)
    if show_all:
        rows = foreign_rows(reading)
        console.print(f"every package ({len(rows)})", markup=False)
        if rows:
            _table(console, rows)
