"""A setuptools src-layout project installed editable by real pip in a real venv (PEP 660 and
legacy ``setup.py develop``): its ``src/<name>.egg-info`` is the project's own build metadata,
not a second copy, so verify finds nothing shadowed (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.verify import verify
from tests.verify.test_packages import PACKAGE_CHECKS

SETUP_CFG = """\
[metadata]
name = srcproj
version = 0.3.1

[options]
package_dir =
    = src
packages = find:

[options.packages.find]
where = src
"""


def _project(root: Path) -> Path:
    proj = root / "srcproj"
    (proj / "src" / "srcproj").mkdir(parents=True)
    (proj / "src" / "srcproj" / "__init__.py").write_text("VALUE = 1\n")
    (proj / "setup.cfg").write_text(SETUP_CFG)
    (proj / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (proj / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\n'
                                         'build-backend = "setuptools.build_meta"\n')
    return proj


@pytest.mark.parametrize("mode", ["pep660", "legacy"])
def test_src_layout_editable_is_not_a_shadowed_copy(tmp_path: Path, mode: str) -> None:
    v = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(v)], check=True, timeout=300)
    py = str(v / "bin" / "python")
    proj = _project(tmp_path)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    if mode == "legacy":
        env["SETUPTOOLS_ENABLE_FEATURES"] = "legacy-editable"
    # the build backend's own needs, from the local indexes (setuptools 65's bdist_wheel is wheel's)
    subprocess.run([py, "-m", "pip", "install", "-q", "wheel"], capture_output=True, timeout=600,
                   env=env)
    cmd = [py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", str(proj)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        pytest.skip(f"pip install -e failed here: {r.stderr.strip()[-300:]}")
    if mode == "pep660":
        # PEP 660 builds its metadata elsewhere; an in-tree wheel build (``pip wheel .``, as
        # ``python -m build`` does) leaves src/srcproj.egg-info, which is what users have
        w = subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                            "-w", str(tmp_path / "dist"), str(proj)], capture_output=True,
                           text=True, timeout=600, env=env)
        assert w.returncode == 0, w.stderr
    assert (proj / "src" / "srcproj.egg-info").is_dir()  # the metadata that looked like a copy
    # the oracle: the venv's python imports the project from src, and pip lists it once as editable
    out = subprocess.run([py, "-c", "import srcproj; print(srcproj.__file__)"], capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    assert out == str(proj / "src" / "srcproj" / "__init__.py")
    listed = subprocess.run([py, "-m", "pip", "list", "-e", "--format=freeze"], capture_output=True,
                            text=True, timeout=120, check=True, env=env).stdout.split()
    assert listed == ["srcproj==0.3.1"]
    job = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LC_ALL": "C"}
    report = verify(python=py, environ=job, checks=PACKAGE_CHECKS, root=str(tmp_path))
    assert not [f for f in report.findings if f.id == "packages.shadowed"], report.findings
    assert not any("until one remains" in " ".join(f.fix) for f in report.findings)
