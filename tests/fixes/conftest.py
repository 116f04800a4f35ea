"""The worlds fixes are run in: real venvs with local wheels, bash, a real git checkout.

A fix is the backticked text of a ``do:`` (or a finding's fix line) exactly as printed; it is
run with ``bash -c`` in the world it was printed for, then the command that printed it runs
again (:func:`snapshot` + :func:`diff`, or ``verify``).  The world is offline: ``pip`` on
``PATH`` is this interpreter's pip working on the venv (``--python``), finding packages only
in the local wheel directory (``PIP_NO_INDEX``/``PIP_FIND_LINKS``; for uv a ``UV_CONFIG_FILE`` saying the same), so a
fix that names a package that does not exist fails here as it would for a user.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from envlock.diff import diff as _diff
from envlock.diff.engine import PairDiff
from tests._wheels import make_wheel

PY = Path(sys.executable)


def _uv_dir() -> str:
    from uv import find_uv_bin

    return str(Path(find_uv_bin()).parent)


class World:
    """One directory: a wheel house, venvs, and the environment fixes run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wheels = root / "wheels"
        self.wheels.mkdir(parents=True, exist_ok=True)
        self.uv_config = root / "uv.toml"  # uv's offline settings: no index, the wheel house
        self.uv_config.write_text(f'no-index = true\nfind-links = ["{self.wheels}"]\n')

    def wheel(self, name: str, version: str) -> None:
        """A pure-Python wheel ``name==version`` in the wheel house."""
        make_wheel(self.wheels, name, version)

    def venv(self, name: str, packages: Iterable[str] = ()) -> Path:
        """A venv (no pip inside, as uv makes them) with ``packages`` (``"numpy==1.0"``) from
        the wheel house, and a ``bin/pip`` that is pip for that venv."""
        path = self.root / name
        subprocess.run([str(PY), "-m", "venv", "--without-pip", str(path)], check=True,
                       timeout=120)
        shim = path / "bin" / "pip"
        shim.write_text(f'#!/bin/sh\nexec {PY} -m pip --python {path}/bin/python "$@"\n')
        shim.chmod(0o755)
        if packages:
            self.sh(f"pip install -q {' '.join(packages)}", path)
        return path

    def env(self, venv: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The job's environment: the venv first on PATH, offline package indexes."""
        env = {"PATH": f"{venv}/bin:{_uv_dir()}:/usr/bin:/bin", "HOME": str(self.root),
               "LANG": "C.UTF-8", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheels),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_CONFIG_FILE": str(self.uv_config),
               "UV_CACHE_DIR": str(self.root / "uv-cache"),
               "VIRTUAL_ENV": str(venv),
               "GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
               "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.org"}
        env.update(extra or {})
        return env

    def sh(self, line: str, venv: Path, extra: Mapping[str, str] | None = None,
           cwd: Path | None = None, then: str = "") -> subprocess.CompletedProcess[str]:
        """Run ``line`` (a fix, as printed) in bash in this world, then ``then`` in the same
        shell (so that ``export`` lines reach it); raise if either fails."""
        script = line + (f"\n{then}" if then else "")
        res = subprocess.run(["bash", "-e", "-c", script], env=self.env(venv, extra),
                             cwd=str(cwd or self.root), capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, f"{script!r} failed ({res.returncode}):\n{res.stderr}"
        return res

    def snapshot_cmd(self, venv: Path, out: Path, repo: Path | None = None) -> str:
        """The ``envlock snapshot`` command line for ``venv`` (run after a fix, same shell)."""
        repo_opt = f" --repo {repo}" if repo else ""
        return (f"{PY} -m envlock snapshot --python {venv}/bin/python{repo_opt} -o {out} "
                "--force >/dev/null 2>&1")

    def snapshot(self, venv: Path, out: Path, extra: Mapping[str, str] | None = None,
                 repo: Path | None = None, fix: str = ":") -> Path:
        """``envlock snapshot`` of ``venv`` in this world, after running ``fix``."""
        self.sh(fix, venv, extra, cwd=repo, then=self.snapshot_cmd(venv, out, repo))
        return out


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def pair(a: Path, b: Path) -> PairDiff:
    res = _diff([str(a), str(b)])
    assert isinstance(res, PairDiff)
    return res


def commands(text: str) -> list[str]:
    """The backticked commands of a fix text, as printed."""
    return re.findall(r"`([^`]+)`", text)


def side_fix(text: str, label: str) -> str:
    """The command of a choice (``as in a.toml: `…` ``) that gives a side ``label``'s values."""
    m = re.search(rf"as in {re.escape(label)}: `([^`]+)`", text)
    assert m, f"no fix 'as in {label}' in {text!r}"
    return m.group(1)


def ids(res: PairDiff) -> set[str]:
    return {e.id for e in res.explanations}


def keys(res: PairDiff) -> set[tuple[str, str]]:
    return {(c.area, c.key) for c in res.changes}

