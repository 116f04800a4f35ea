"""The facts the build-toolchain checks share (:mod:`envlock.verify.checks.build`,
:mod:`envlock.verify.checks.condavirtual`): the run's build probe, computed once, and how the
findings name what it found."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from envlock.probes.world import World

if TYPE_CHECKING:
    from envlock.verify.context import Context

__all__ = ["build_facts", "compilers_of", "gpu_of", "torch_label"]


def build_facts(ctx: Context, *, libraries: bool = False) -> Any:
    """The run's :class:`~envlock.manifest.buildtable.BuildInfo`, computed once (shared by the
    checks through the :class:`~envlock.verify.live.Live` fact cache).

    :param libraries: also the facts read from ELF files (torch's GCC and C++ ABI, the
        libstdc++ loaded); without them the ELF reader is not even imported.
    """
    live = ctx.live
    if not libraries and "build+libraries" in live._values:
        return live._values["build+libraries"]

    def compute() -> Any:
        from envlock.probes.buildenv import probe_build

        site = [p for p in live.python.path if os.path.isdir(p)]
        world = World(root=live.root, environ=live.environ, prefix=live.target.prefix, site_dirs=site,
                      runner=live.runner, timeout=live.command_timeout(5.0))
        return probe_build(world, virtual=(), libraries=libraries)
    return live._get("build+libraries" if libraries else "build", compute)  # Live's fact cache


def gpu_of(ctx: Context) -> Any:
    """The node's :class:`~envlock.manifest.stacktables.GpuInfo` (the run's shared fact)."""
    return ctx.live.gpu


def torch_label(b: Any) -> str:
    """``torch 2.14.1``, as the findings name the torch a build is for."""
    return f"torch {b.torch_version}" if b.torch_version else "torch"


def compilers_of(b: Any, role: str) -> list[Any]:
    """The compilers of ``b`` (:class:`~envlock.manifest.buildtable.BuildInfo`) in ``role``
    (``"c++"``, ``"nvcc-host"``) whose vendor and version were read."""
    return [c for c in b.compilers if c.role == role and c.version and c.vendor]
