"""What the project-lock tests share (restore of uv/pdm/poetry/pixi locks, pdm's oracle): the
peers cases, the target they are converted for, an offline PEP 503 index and uv run over it,
and a real pdm project around a lock, read with pdm's own API; uv's own lock of its PyTorch
recipe beside the pyproject.toml that declares it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envlock.formats.markers import target_marker_env
from envlock.lock._tools import uv_bin

_HERE = Path(__file__).resolve().parents[1].parent / "shared" / "cases"
#: the reference tools' own fixtures (../shared/cases/peers, index.tsv)
PEERS = (_HERE if _HERE.is_dir() else Path("/work/shared/cases")) / "peers"
#: the Python the project locks are converted for, and its marker environment
PY = "3.12.3"
TARGET = target_marker_env(PY, "cpython")
#: pdm's name of the Linux platform of :data:`TARGET` (dep_logic's)
PDM_LINUX = "manylinux_2_17_x86_64"


def simple_index(root: Path, wheels: Path) -> Path:
    """A PEP 503 index over ``wheels`` (``file://``, with sha256 fragments: uv records them)."""
    for w in wheels.glob("*.whl"):
        d = root / canonicalize_name(w.name.split("-")[0])
        d.mkdir(parents=True, exist_ok=True)
        link = f'<a href="{w.as_uri()}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
        with (d / "index.html").open("a", encoding="utf-8") as f:
            f.write(link)
    return root


def run_uv(args: list[str], cwd: Path) -> None:
    """``uv ARGS`` in ``cwd``, offline and without a cache; it must succeed."""
    env = {**os.environ, "NO_COLOR": "1", "UV_NO_CACHE": "1", "UV_OFFLINE": "1"}
    r = subprocess.run([uv_bin(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def pdm_project(lock_text: str, pyproject: str, tmp_path: Path, monkeypatch: Any) -> Any:
    """A pdm ``Project`` (pdm's own API) of a directory holding ``pdm.lock`` (``lock_text``) and
    ``pyproject.toml`` (``pyproject``), with pdm kept from venvs, update checks and the user's
    configuration."""
    from pdm.core import Core

    for var, value in (("PDM_USE_VENV", "false"), ("PDM_PYTHON", sys.executable),
                       ("PDM_CHECK_UPDATE", "false"), ("PDM_HOME", str(tmp_path / "home"))):
        monkeypatch.setenv(var, value)
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "pdm.lock").write_text(lock_text, encoding="utf-8")
    (proj / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return Core().create_project(proj, global_config=str(tmp_path / "config.toml"))


def pdm_installs(project: Any, groups: Sequence[str], py: str = PY,
                 platform: str = PDM_LINUX) -> dict[str, str]:
    """``{normalized name: version}`` that pdm installs of ``groups`` for Python ``py`` on
    ``platform``: its locked repository's candidates for that ``EnvSpec``."""
    from pdm.models.markers import EnvSpec

    spec = EnvSpec.from_spec(f"=={py}", platform, "cpython")
    return {canonicalize_name(p.candidate.name): p.candidate.version for p in
            project.get_locked_repository(spec).evaluate_candidates(list(groups))}


def pytorch_project(root: Path) -> Path:
    """uv's own lock of its PyTorch recipe (peers: astral-sh/uv lock_pytorch_cpu, extras
    ``cpu`` and ``cu124`` declared conflicting), its redacted ``[X]`` digits made 0, in the new
    directory ``root`` beside the pyproject.toml that declares its extras and conflicts."""
    lock = PEERS / "uvlock" / "inline__lock_pytorch_cpu__1__uv.lock"
    root.mkdir()
    (root / "uv.lock").write_text(re.sub(r"\.\[X\]", ".0", lock.read_text(encoding="utf-8")),
                                  encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "project"\nversion = "0.1.0"\nrequires-python = ">=3.12.0"\n'
        'dependencies = []\n\n[project.optional-dependencies]\ncpu = ["torch"]\n'
        'cu124 = ["torch"]\n\n[tool.uv]\nconflicts = [[{ extra = "cpu" }, { extra = "cu124" }]]\n',
        encoding="utf-8")
    return root
