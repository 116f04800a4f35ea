"""Shared fixtures.

The ``realenv`` group runs envlock against real virtual environments with PyTorch:

* ``cpu_venv``: torch 2.13.0 (CPU build), numpy 1.24.4, scipy 1.10.1;
* ``cuda_venv``: torch 2.14.1 (CUDA 13.0 build, ``nvidia-*`` wheels), numpy 2.4.1, scipy 1.17.0.

They are created on first use with ``pip install`` under ``$ENVLOCK_TEST_VENVS`` (default
``~/.cache/envlock-test-venvs``), one pair per interpreter that runs the tests (``_realenv.py``:
keyed by its path, version and build; about 6.7 GB a pair), and reused afterwards.  The group
is skipped unless ``--realenv`` is given; the README's test command and CI give it.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _prefixes import make_conda_prefix
from _realenv import REAL_VENVS, ready_text, venv_dir

# A test run started in the background by a non-interactive shell (`pytest &` in a script, a CI
# runner without job control) inherits SIGINT and SIGQUIT ignored (POSIX, "asynchronous lists"),
# and every envlock a test starts would inherit that too: the Ctrl-C and SIGQUIT tests would then
# see no signal at all.  The tests start envlock as a terminal does.
for _sig, _handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--realenv",
        action="store_true",
        default=False,
        help="also run the checks on the real torch venvs (creating them on first use)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--realenv"):
        return
    skip = pytest.mark.skip(reason="real torch venv check; run with --realenv")
    for item in items:
        if "realenv" in item.keywords:
            item.add_marker(skip)


def _ensure_venv(name: str) -> Path:
    venv = venv_dir(name)
    marker = venv / ".envlock-ready"
    want = ready_text(name)
    if marker.exists() and marker.read_text() == want and (venv / "bin" / "python").exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *REAL_VENVS[name]],
        check=True,
        timeout=3000,
    )
    marker.write_text(want)
    return venv


@pytest.fixture(scope="session")
def cpu_venv() -> Path:
    """A venv with torch 2.13.0+cpu, numpy 1.24.4 and scipy 1.10.1 (created once)."""
    return _ensure_venv("cpu")


@pytest.fixture(scope="session")
def cuda_venv() -> Path:
    """A venv with torch 2.14.1 (CUDA 13.0), numpy 2.4.1 and scipy 1.17.0 (created once)."""
    return _ensure_venv("cuda")




@pytest.fixture()
def conda_prefix(tmp_path: Path) -> Path:
    """A copy of ``fixtures/conda-prefix`` with a real interpreter (:mod:`_prefixes`)."""
    return make_conda_prefix(tmp_path / "md")
