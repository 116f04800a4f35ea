"""Project-name normalization (PEP 503), conda's names of PyPI projects and its metapackages,
in one place, importable without anything else (re-exported by :mod:`envlock.formats.conda`)."""

from __future__ import annotations

import re

__all__ = ["CONDA_TO_PYPI", "canonicalize", "is_metapackage"]

_CANON = re.compile(r"[-_.]+")


def canonicalize(name: str) -> str:
    """Normalize a project name as PEP 503 does (like ``packaging.utils.canonicalize_name``):
    lower case, every run of ``-``, ``_`` and ``.`` replaced by one ``-``.

    >>> canonicalize("Foo.Bar_baz")
    'foo-bar-baz'
    """
    if name.islower() and "_" not in name and "." not in name and "--" not in name:
        return name  # already normalized: every name a snapshot writes
    return _CANON.sub("-", name).lower()


#: conda name → PyPI name where they differ (the one table: ``lock -f`` gives conda's
#: distributions to uv by it, and diff's impact model takes it as aliases), from regro's
#: ``grayskull_pypi_mapping.json`` (the
#: mapping conda-lock downloads: ``conda_lock.lookup.DEFAULT_MAPPING_URL``).
CONDA_TO_PYPI = {
    "pytorch": "torch",
    "pytorch-cpu": "torch",
    "pytorch-gpu": "torch",
    "matplotlib-base": "matplotlib",
    "py-opencv": "opencv-python",
    "py-xgboost": "xgboost",
    "pytables": "tables",
    "msgpack-python": "msgpack",
    "python-xxhash": "xxhash",
    "python-flatbuffers": "flatbuffers",
    "pyqt": "pyqt5",
    "tensorflow-base": "tensorflow",
    "ruamel.yaml": "ruamel-yaml",
}


_METAPACKAGES = frozenset({"pytorch-gpu", "pytorch-cpu", "tensorflow-gpu", "tensorflow-cpu",
                           "_pytorch_select", "pytorch-mutex", "blas-devel-select",
                           "_tflow_select", "_tflow_190_select", "_tflow_1100_select"})


def is_metapackage(name: str) -> bool:
    """Whether conda package ``name`` only selects a variant of another (holds no code):
    ``pytorch-gpu``, ``tensorflow-gpu``, ``_pytorch_select``, ``_libgcc_mutex``,
    ``_openmp_mutex``, ``pytorch-mutex``, ``*_select``."""
    return (name in _METAPACKAGES or name.endswith(("_mutex", "-mutex", "_select"))
            or (name.startswith("_") and "select" in name))
