"""The summary that ``envlock show`` prints for a manifest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envlock.manifest import AREAS, Manifest

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["KEY_PACKAGES", "render_show"]

#: Packages shown by name in the summary when present (normalized names; conda or pip).
KEY_PACKAGES = (
    "python", "numpy", "scipy", "torch", "pytorch", "jax", "jaxlib", "tensorflow", "cupy",
    "numba", "scikit-learn", "pandas", "mkl", "openblas", "libblas", "libopenblas",
    "cudatoolkit", "cuda-version", "cudnn", "nccl", "mpi4py",
)

_CORE = {"envlock", "target", "python", "platform", "cpu", "env", "git", "conda", "pip"}
_STACK = {"gpu", "cuda", "frameworks", "blas", "toolchain", "slurm"}


def _state(table: Any) -> str | None:
    """``None`` when a table is ok, else ``"<status> (<error>)"``."""
    if table is None:
        return "not recorded"
    if table.status == "ok":
        return None
    return f"{table.status}" + (f" ({table.error})" if getattr(table, "error", None) else "")


def _render_stack(m: Manifest, console: Console) -> None:
    """The numerical stack in a few lines: driver and GPUs, frameworks, CUDA libraries, BLAS."""
    out = console.print
    if m.gpu is not None:
        g = m.gpu
        if _state(g):
            out(f"gpu: {_state(g)}", markup=False)
        else:
            gpus = ", ".join(f"{x.index}: {x.name} (cc {x.compute_capability})" for x in g.gpus)
            out(f"gpu: driver {g.driver_version} (CUDA ≤ {g.cuda_driver_version}); {gpus or 'no GPU listed'}",
                markup=False)
    if m.frameworks is not None:
        for f in m.frameworks.packages:
            bits = [f"{f.name} {f.version}", f"{f.build or '?'} build"]
            if f.cuda:
                bits.append(f"CUDA {f.cuda}")
            if f.cuda_archs:
                bits.append("archs " + " ".join(f.cuda_archs))
            out("framework: " + ", ".join(bits), markup=False)
    if m.cuda is not None and m.cuda.libraries:
        seen: dict[str, str] = {}
        for lib in m.cuda.libraries:
            if lib.version and lib.name not in seen:
                seen[lib.name] = f"{lib.name} {lib.version} ({lib.origin})"
        out("cuda: " + ", ".join(seen.values()), markup=False)
    if m.blas is not None:
        for b in m.blas.libraries:
            out(f"blas: {b.user} → {b.implementation} {b.version or '?'}", markup=False)
    if m.toolchain is not None:
        tools = ", ".join(f"{t.name} {t.version}" for t in m.toolchain.tools if t.version)
        out(f"toolchain: glibc {m.toolchain.glibc}; {tools or 'no compilers on PATH'}", markup=False)
    if m.slurm is not None and not _state(m.slurm):
        out("batch job: " + _scalars({k: v for k, v in _as_dict(m.slurm).items()}), markup=False)


def _as_dict(obj: Any) -> dict[str, Any]:
    from envlock.manifest import _model  # noqa: PLC0415

    return _model.to_dict(obj)


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.1f} GiB"


def _scalars(table: dict[str, Any], limit: int = 6) -> str:
    items = [f"{k}={v}" for k, v in table.items()
             if k not in ("status", "source") and isinstance(v, (str, int, float, bool))]
    return ", ".join(items[:limit])


def render_show(manifest: Manifest, console: Console, *, path: str = "") -> None:
    """Print a summary of ``manifest`` on ``console``: provenance, target, Python, OS, CPU,
    git, package counts, the key numerical packages, other recorded areas, and warnings."""
    from rich.table import Table  # noqa: PLC0415

    m = manifest
    head = m.envlock
    console.print(f"[bold]{path or 'manifest'}[/bold]: envlock {head.version}, schema {head.schema}, "
                  f"taken {head.created} on {head.host}")
    t = m.target
    console.print(f"target: {t.kind} {t.prefix} (chosen by {t.chosen_by})")
    if m.python:
        py = m.python
        if py.status == "ok":
            console.print(f"python: {py.implementation} {py.version} at {py.executable}")
        else:
            console.print(f"python: not asked ({py.status}: {py.error}); packages read from "
                          f"{', '.join(py.path) or 'nowhere'}", markup=False)
    if m.platform:
        p = m.platform
        console.print(f"os: {p.os_name or p.os_id or '?'}, kernel {p.kernel}, {p.machine}, glibc {p.glibc}")
    if m.cpu:
        c = m.cpu
        console.print(f"cpu: {c.model or '?'} ({c.vendor or '?'}), {c.logical_cores} logical cores"
                      f" ({c.usable_cores} usable), {_fmt_bytes(c.memory)}; ISA: {' '.join(c.flags) or '-'}")
    if m.git:
        g = m.git
        if g.status == "ok":
            dirty = ", uncommitted changes" if g.dirty else ", clean"
            console.print(f"git: {g.path} at {(g.commit or 'no commit')[:12]} on {g.branch or 'detached HEAD'}{dirty}")
        else:
            console.print(f"git: {g.status} ({g.error})")
    n_pip = len(m.pip.packages) if m.pip else 0
    n_conda = len(m.conda.packages) if m.conda else 0
    line = f"packages: {n_pip} Python distributions"
    if m.conda:
        line += f", {n_conda} conda packages"
    console.print(line)

    table = Table(title="key packages", show_edge=False, box=None, pad_edge=False)
    table.add_column("name")
    table.add_column("version")
    table.add_column("from")
    pip = {p.name: p for p in (m.pip.packages if m.pip else ())}
    conda = {c.name: c for c in (m.conda.packages if m.conda else ())}
    for name in KEY_PACKAGES:
        if name in pip:
            p = pip[name]
            src = f"conda ({p.conda_package})" if p.origin == "conda" else f"pip ({p.origin})"
            table.add_row(name, p.version, src)
        elif name in conda:
            c = conda[name]
            table.add_row(name, c.version, f"conda {c.channel or '?'} {c.build}")
    if table.row_count:
        console.print(table)

    _render_stack(m, console)
    data = m.to_dict()
    for area in [a for a in AREAS if a not in _CORE | _STACK] + list(m.extra):
        table_data = data.get(area)
        if area in ("run", "process") and isinstance(table_data, dict):  # envlock run / record
            from envlock.record import summary  # noqa: PLC0415

            for line in getattr(summary, f"{area}_lines")(table_data):
                console.print(line, markup=False)
        elif isinstance(table_data, dict):
            status = table_data.get("status", "ok")
            detail = f"({table_data['error']})" if table_data.get("error") else _scalars(table_data)
            console.print(f"{area}: {status} {detail}".rstrip(), markup=False)
    if head.warnings:
        console.print(f"[yellow]{len(head.warnings)} warning(s) recorded:[/yellow]")
        for w in head.warnings:
            console.print(f"  - {w}", markup=False)
