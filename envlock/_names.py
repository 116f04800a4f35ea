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
#: distributions to uv by it, and diff's impact model takes it as aliases).  Sources, checked
#: by ``tests/formats/test_conda_names.py``: grayskull's PyPI → conda-forge table
#: (``grayskull/strategy/config.yaml`` in its wheel, 3.2.0; regro's ``grayskull_pypi_mapping.json``,
#: which conda-lock downloads as ``conda_lock.lookup.DEFAULT_MAPPING_URL``, is built from the
#: same feedstock metadata) for every entry it covers; the rest are outputs of one conda-forge
#: feedstock that installs the PyPI project (``pytorch-cpu``/``pytorch-gpu`` of pytorch-cpu,
#: ``py-opencv`` of opencv, ``py-xgboost`` of xgboost, ``tensorflow-base`` of tensorflow) or
#: conda's unnormalized spelling of the PyPI name (``ruamel.yaml``).  The entries past the
#: first thirteen are those grayskull gives for conda packages of the real files in
#: ``shared/cases`` (pangeo's pytorch-notebook lock, conda-lock's and rattler's fixtures).
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
    "dask-core": "dask",
    "docker-py": "docker",
    "h3-py": "h3",
    "opencv": "opencv-python",
    "python-build": "build",
    "python-duckdb": "duckdb",
    "python-eccodes": "eccodes",
    "python-fastjsonschema": "fastjsonschema",
    "python-graphviz": "graphviz",
    "python-installer": "installer",
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
