"""A real conda-prefix layout for tests: ``fixtures/conda-prefix`` (conda-meta JSON, history,
site-packages; cases C11 and C12) copied to a directory, with a real interpreter made by
``python -m venv --without-pip`` over it (its ``bin/python`` sees the fixture's site-packages;
``conda-meta/`` makes it a conda target).  Used by tests/conftest.py and tests/find/conftest.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def make_conda_prefix(prefix: Path) -> Path:
    """Build the prefix at ``prefix`` (which must not exist) for the running interpreter's
    ``lib/pythonX.Y`` and return it."""
    shutil.copytree(FIXTURES / "conda-prefix", prefix, symlinks=True)
    want = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    lib = prefix / "lib"
    if not (lib / want).exists():
        (lib / "python3.11").rename(lib / want)
        for meta in (prefix / "conda-meta").glob("*.json"):
            meta.write_text(meta.read_text().replace("python3.11/", f"{want}/"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=300)
    return prefix
