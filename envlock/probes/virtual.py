"""conda's virtual packages as the solver would see them on this node, and every override.

conda injects *virtual packages* into every solve (conda docs, "Managing virtual packages";
the plugins in ``conda/plugins/virtual_packages/``):

* ``__cuda``: the CUDA version the driver supports — conda loads ``libcuda.so`` in a child
  process and asks ``cuDriverGetVersion``; no driver, no ``__cuda``.  envlock does not load
  ``libcuda``: it takes the driver's CUDA version from the GPU probe (NVML, else NVIDIA's table
  of toolkit drivers, :func:`envlock.nvidia.max_cuda_for_driver`).
* ``__glibc``: glibc's own answer on this machine (:func:`envlock.libs.glibc.detect_glibc`, which asks
  ``confstr`` as conda's ``linux_get_libc_version`` does).
* ``__linux``: ``platform.release()`` cut to its leading ``X.Y[.Z[.W]]`` (``6.1.0-18-amd64`` →
  ``6.1.0``); ``__unix`` on every Linux.
* ``__archspec``: version ``1``, build = the host microarchitecture from ``archspec``
  (``archspec.cpu.host()``); where ``archspec`` is not installed for envlock, the machine name.

``CONDA_OVERRIDE_<NAME>`` replaces what conda detects: ``CONDA_OVERRIDE_CUDA=12.4`` makes the
solver believe in CUDA 12.4 with no driver at all, ``CONDA_OVERRIDE_CUDA=""`` hides a real one;
an empty ``CONDA_OVERRIDE_GLIBC`` drops ``__glibc``, an empty ``CONDA_OVERRIDE_LINUX`` gives
``__linux=0``, an empty ``CONDA_OVERRIDE_ARCHSPEC`` drops ``__archspec``.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Mapping

from envlock.manifest.buildtable import VirtualPackage
from envlock.probes.world import World

__all__ = ["probe_virtual", "conda_overrides", "linux_version", "OVERRIDE_PREFIX"]

#: Environment variables that replace a detected virtual package start with this.
OVERRIDE_PREFIX = "CONDA_OVERRIDE_"

_LINUX = re.compile(r"\d+\.\d+(\.\d+)?(\.\d+)?")


def conda_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Every ``CONDA_OVERRIDE_*`` variable of ``environ`` with its value, sorted by name."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(OVERRIDE_PREFIX)}


def linux_version(release: str) -> str | None:
    """conda's ``__linux`` version of a kernel release: ``"6.1.0-18-amd64"`` → ``"6.1.0"``
    (``linux_version_validate`` in conda's ``linux.py``); ``None`` when it does not start with
    ``X.Y``."""
    m = _LINUX.match(release)
    return m.group() if m else None


def _archspec_name() -> tuple[str | None, str]:
    try:
        import archspec.cpu  # optional; envlock's own dependency if installed
    except ImportError:
        return platform.machine() or None, "platform.machine() (archspec not installed)"
    try:
        return str(archspec.cpu.host()), "archspec.cpu.host()"
    except Exception as exc:  # noqa: BLE001 - a detection failure is recorded, not raised
        return None, f"archspec.cpu.host() failed: {type(exc).__name__}"


def probe_virtual(
    world: World,
    *,
    driver_cuda: str | None,
    driver_version: str | None = None,
    glibc: str | None = None,
    release: str | None = None,
    system: str | None = None,
    archspec: Callable[[], tuple[str | None, str]] = _archspec_name,
) -> tuple[VirtualPackage, ...]:
    """The virtual packages conda's solver would see with ``world.environ`` on this node.

    :param world: what is observed: only ``environ`` is read (its ``CONDA_OVERRIDE_*``
        variables); glibc, the kernel and the CPU are this machine's, as conda sees them.
    :param driver_cuda: the CUDA version the NVIDIA driver supports (``"12.4"``), ``None``
        without a driver.
    :param driver_version: the driver version, for the ``source`` text.
    :param glibc: the glibc version (default: :func:`envlock.libs.glibc.detect_glibc` of ``/``).
    :param release: the kernel release (default :func:`platform.release`).
    :param system: ``"Linux"``… (default :func:`platform.system`); non-Linux gives only
        ``__cuda`` and ``__archspec``.
    :param archspec: returns ``(microarchitecture, source)``.
    :returns: the packages, in the order ``__cuda``, ``__glibc``, ``__linux``, ``__unix``,
        ``__archspec`` (absent ones left out).  Never raises.
    """
    out: list[VirtualPackage] = []
    over = conda_overrides(world.environ)

    # __cuda
    if "CONDA_OVERRIDE_CUDA" in over:
        v = over["CONDA_OVERRIDE_CUDA"].strip()
        if v:
            out.append(VirtualPackage(name="__cuda", version=v, build="0", source="CONDA_OVERRIDE_CUDA",
                                      override="CONDA_OVERRIDE_CUDA"))
    elif driver_cuda:
        src = f"driver {driver_version}" if driver_version else "NVIDIA driver"
        out.append(VirtualPackage(name="__cuda", version=driver_cuda, build="0", source=src))

    if (system or platform.system()) == "Linux":
        # __glibc
        if "CONDA_OVERRIDE_GLIBC" in over:
            v = over["CONDA_OVERRIDE_GLIBC"].strip()
            if v:
                out.append(VirtualPackage(name="__glibc", version=v, build="0", source="CONDA_OVERRIDE_GLIBC",
                                          override="CONDA_OVERRIDE_GLIBC"))
        else:
            g = glibc
            src = "glibc"
            if g is None:
                from envlock.libs.glibc import detect_glibc

                found = detect_glibc("/")
                g, src = (found.version, found.source) if found else (None, src)
            if g:
                out.append(VirtualPackage(name="__glibc", version=g, build="0", source=src))
        # __linux
        if "CONDA_OVERRIDE_LINUX" in over:
            v = over["CONDA_OVERRIDE_LINUX"].strip()
            out.append(VirtualPackage(name="__linux", version=(linux_version(v) or "0") if v else "0",
                                      build="0", source="CONDA_OVERRIDE_LINUX", override="CONDA_OVERRIDE_LINUX"))
        else:
            rel = release if release is not None else platform.release()
            out.append(VirtualPackage(name="__linux", version=linux_version(rel) or "0", build="0",
                                      source=f"platform.release() {rel!r}"))
        out.append(VirtualPackage(name="__unix", version="0", build="0", source="Linux"))

    # __archspec
    if "CONDA_OVERRIDE_ARCHSPEC" in over:
        v = over["CONDA_OVERRIDE_ARCHSPEC"].strip()
        if v:
            out.append(VirtualPackage(name="__archspec", version="1", build=v, source="CONDA_OVERRIDE_ARCHSPEC",
                                      override="CONDA_OVERRIDE_ARCHSPEC"))
    else:
        name, src = archspec()
        if name:
            out.append(VirtualPackage(name="__archspec", version="1", build=name, source=src))
    return tuple(out)
