"""Output checks: ``--output-dir`` exists, is writable, has free space and free inodes; the job
runs in the directory it was submitted from.

Free space is ``f_bavail × f_frsize`` and free inodes ``f_favail`` of :func:`os.statvfs`
(statvfs(3): what an unprivileged process may use).  File systems that do not count inodes
report ``f_files == 0`` (btrfs, some network file systems); their inode check is skipped.

Finding ids: ``output.missing``, ``output.not-writable``, ``output.low-space``,
``output.low-inodes``, ``output.workdir-differs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os

from envlock.findings import Finding
from envlock.errors import EnvlockError

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["check_output_dir", "check_workdir", "human_bytes"]


def human_bytes(n: int) -> str:
    """``1536`` → ``"1.5 KiB"`` (binary units)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def check_output_dir(ctx: Context) -> list[Finding]:
    """The directory the job will write to (``--output-dir``)."""
    d = ctx.output_dir
    if not d:
        return []
    if not os.path.isdir(d):
        parent = os.path.dirname(os.path.abspath(d))
        return [Finding(
            id="output.missing", severity="error",
            title=f"output directory {d} does not exist",
            cause="The job would fail when it first writes a result (or checkpoint).",
            evidence=(f"{d}: no such directory",
                      f"parent {parent} {'exists' if os.path.isdir(parent) else 'does not exist'}"),
            fix=(f"mkdir -p {d}  (in the job script, before the program starts)",),
        )]
    import secrets

    from envlock._io import write_file

    out: list[Finding] = []
    probe = os.path.join(d, f".envlock-verify-{secrets.token_hex(8)}")
    try:
        write_file(probe, b"")  # create-or-fail, as the job's first write would create a file
    except (OSError, EnvlockError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        out.append(Finding(
            id="output.not-writable", severity="error",
            title=f"cannot write to {d}: {reason}",
            cause="The job's results would be lost when it first writes (read-only mount, permissions, "
                  "quota exceeded).",
            evidence=(f"creating a file in {d}: {reason}",),
            fix=("Choose a directory you can write to (e.g. $SCRATCH), or fix its permissions/quota.",),
        ))
    else:
        try:
            os.unlink(probe)
        except OSError:
            pass
    try:
        st = ctx.statvfs(d)
    except OSError as exc:
        out.append(Finding(
            id="output.not-writable", severity="warning",
            title=f"cannot read the free space of {d}: {exc.strerror or exc}",
            cause="statvfs failed (a hung network file system?).",
            evidence=(str(exc),), fix=("Check the file system with df.",),
        ))
        return out
    free = st.f_bavail * st.f_frsize
    need = ctx.config.min_free_bytes
    if free < need:
        out.append(Finding(
            id="output.low-space", severity="error",
            title=f"{d} has {human_bytes(free)} free; at least {human_bytes(need)} required",
            cause="Writes fail with ENOSPC (\"No space left on device\") part-way, often leaving a "
                  "truncated checkpoint.",
            evidence=(f"statvfs({d}): f_bavail {st.f_bavail} × f_frsize {st.f_frsize} = {free} bytes",
                      f"threshold min-free-space = {need} bytes"
                      + (f" ({ctx.config.source})" if ctx.config.source else " (default)")),
            fix=("Free space or write elsewhere; lower min-free-space in [tool.envlock.verify] if the job "
                 "writes little.",),
        ))
    if st.f_files and st.f_favail < ctx.config.min_free_inodes:
        out.append(Finding(
            id="output.low-inodes", severity="error",
            title=f"{d} has {st.f_favail} free inodes; at least {ctx.config.min_free_inodes} required",
            cause="Creating files fails with ENOSPC although space remains (many small files, or an "
                  "inode quota).",
            evidence=(f"statvfs({d}): f_favail {st.f_favail} of f_files {st.f_files}",),
            fix=("Delete or archive small files (tar them), or write elsewhere.",),
        ))
    return out


def check_workdir(ctx: Context) -> list[Finding]:
    """The job runs in a directory other than the one it was submitted from."""
    submit = ctx.environ.get("SLURM_SUBMIT_DIR")
    if not submit:
        return []
    try:
        same = os.path.samefile(submit, ctx.cwd)
    except OSError:
        same = os.path.realpath(submit) == os.path.realpath(ctx.cwd)
    if same:
        return []
    return [Finding(
        id="output.workdir-differs", severity="warning",
        title=f"the job runs in {ctx.cwd}, not in the directory it was submitted from ({submit})",
        cause="Relative paths in the job (inputs, outputs, configs) resolve against the working "
              "directory, not where you ran sbatch.",
        evidence=(f"SLURM_SUBMIT_DIR={submit}", f"working directory: {ctx.cwd}"),
        fix=("cd \"$SLURM_SUBMIT_DIR\" in the job script, or use absolute paths "
             "(ignore this if --chdir was intended).",),
    )]
