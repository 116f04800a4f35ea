"""``--ignore`` globs and the impact model's noise leave out exactly the facts fnmatch matches.

The filter of :func:`envlock.diff.pairwise.compare_pair` matches each area only against its own
``area:`` globs and the unprefixed ones; :func:`fnmatch.fnmatchcase` over ``area:key`` or
``key`` (what ``--ignore`` documents) is the oracle.
"""

from __future__ import annotations

import itertools
from fnmatch import fnmatchcase

from envlock.diff.impact import load_kb
from envlock.diff.pairwise import _Filter

AREAS = ["package", "env", "slurm", "build", "cpu", "code", "libraries", "sl", "env:x"]
KEYS = ["torch", "SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
        "numpy-source", "torch-location", "CONDA_SHLVL", "pip", "env:PMI_SIZE", "slurm:SLURM_CONF",
        "repository.commit", "a:b:c", "", "libcudart.so.12", "torch ; python_version < '3.9'",
        "x:SLURM_JOB_ID", "Env:PMI_1"]
PATTERNS = [*load_kb(()).noise, "package:pip", "SLURM_*", "*:torch", "env:*", "[ep]*:PMI_*",
            "*SHLVL", "?lurm:SLURM_CONF", "torch", "a:b:*", "cpu", "s[l]urm:*_ID", "env:x:*"]


def test_filter_is_fnmatch_over_area_key_or_key() -> None:
    for n in (0, 1, 2, len(PATTERNS)):
        for ignore in ([PATTERNS[i] for i in range(n)], PATTERNS[-n:] if n else []):
            f = _Filter((), ignore)
            for area, key in itertools.product(AREAS, KEYS):
                want = not any(fnmatchcase(f"{area}:{key}", p) or fnmatchcase(key, p)
                               for p in ignore)
                assert f.keep(area, key) is want, (area, key, ignore)


def test_only_keeps_its_areas() -> None:
    f = _Filter(("package", "env"), ["env:PMI_*"])
    assert f.keep("package", "torch") and f.keep("env", "PATH")
    assert not f.keep("env", "PMI_RANK") and not f.keep("cpu", "model")
