"""Fixtures for the verify tests: real venvs with dist-info layouts as pip writes them, a fake
``root`` with ``/proc/driver/nvidia/version``, and fake ``nvidia-smi`` programs on a test PATH."""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

#: ``/proc/driver/nvidia/version`` of a proprietary 396.44 driver (CUDA 9.2 era).
PROC_396 = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.44  Wed Jul 11 16:51:49 PDT 2018\n"
            "GCC version:  gcc version 7.3.0 (Ubuntu 7.3.0-16ubuntu3)\n")
#: ... of an open-module 580.95.05 driver (CUDA 13.0).
PROC_580_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
                 "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:51:25 UTC 2025\n"
                 "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")

TORCH_VERSION_PY = '''from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = {version!r}
debug = False
cuda: Optional[str] = {cuda!r}
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
'''


def site_packages(venv: Path) -> Path:
    """``<venv>/lib/pythonX.Y/site-packages``."""
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def install_dist(site: Path, name: str, version: str, *, files: dict[str, str] | None = None,
                 installer: str = "pip", requires: Sequence[str] = ()) -> Path:
    """Lay out a distribution as pip installs a wheel: ``<name>-<version>.dist-info`` with
    METADATA, INSTALLER, WHEEL, RECORD, plus the package files."""
    dist = name.replace("-", "_")
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    (info / "METADATA").write_text(meta + "\nA package.\n")
    (info / "INSTALLER").write_text(installer + "\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: bdist_wheel (0.41.2)\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for rel, text in (files or {f"{dist}/__init__.py": f"__version__ = {version!r}\n"}).items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        record.append(f"{rel},,")
    record += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def remove_dist(site: Path, name: str) -> None:
    """Uninstall: remove the dist-info and the package directory."""
    import shutil

    dist = name.replace("-", "_")
    for p in site.glob(f"{dist}-*.dist-info"):
        shutil.rmtree(p)
    if (site / dist).exists():
        shutil.rmtree(site / dist)


def install_torch(site: Path, version: str, cuda: str | None, requires: Sequence[str] = ()) -> None:
    """A torch distribution with the ``torch/version.py`` torch's build generates."""
    install_dist(site, "torch", version.split("+")[0] if cuda and "+" not in version else version,
                 files={"torch/__init__.py": "", "torch/version.py": TORCH_VERSION_PY.format(version=version, cuda=cuda)},
                 requires=requires)


@pytest.fixture()
def venv(tmp_path: Path) -> Path:
    """A real venv (``python -m venv --without-pip``) with numpy 1.26.4 and requests 2.31.0."""
    v = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True, timeout=120)
    site = site_packages(v)
    install_dist(site, "numpy", "1.26.4")
    install_dist(site, "requests", "2.31.0")
    return v


@pytest.fixture()
def job_env(tmp_path: Path) -> dict[str, str]:
    """A minimal job environment: a test PATH directory (for fake programs) and /usr/bin."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LC_ALL": "C"}


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvidia_smi(bindir: Path, gpus: Sequence[str], apps: Sequence[str] = (), *, hang: bool = False) -> Path:
    """An ``nvidia-smi`` answering ``--query-gpu=…`` and ``--query-compute-apps=…`` in
    ``--format=csv,noheader,nounits`` (the lines given, as the real tool prints them)."""
    if hang:
        return write_exe(bindir / "nvidia-smi", "#!/bin/sh\nexec sleep 60\n")
    script = (
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=*) cat <<'EOF'\n" + "".join(line + "\n" for line in gpus) + "EOF\n    ;;\n"
        "  --query-compute-apps=*) cat <<'EOF'\n" + "".join(line + "\n" for line in apps) + "EOF\n    ;;\n"
        '  *) echo "unexpected arguments: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )
    return write_exe(bindir / "nvidia-smi", script)


def fake_root(tmp_path: Path, proc_version: str | None) -> Path:
    """A directory standing for ``/``, with ``proc/driver/nvidia/version`` when given."""
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True, exist_ok=True)
    if proc_version is not None:
        (root / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
        (root / "proc/driver/nvidia/version").write_text(proc_version)
    return root


def snapshot_to(venv: Path, path: Path, environ: dict[str, str] | None = None, **kw: object) -> Path:
    """Take a real snapshot of ``venv`` into ``path`` (what a user would have done earlier)."""
    import envlock

    env = dict(environ or {"PATH": "/usr/bin:/bin"})
    m = envlock.snapshot(python=str(venv / "bin" / "python"), environ=env, command=["envlock", "snapshot"], **kw)
    m.write(path, force=True)
    return path


def gpu_line(index: int, name: str, uuid: str, mem_mib: int, cc: str, driver: str) -> str:
    """One ``--query-gpu`` CSV line in :data:`envlock.probes.gpu.SMI_FIELDS` order."""
    return f"{index}, {name}, {uuid}, {mem_mib}, {cc}, [N/A], {driver}"

