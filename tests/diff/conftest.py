"""Builders of realistic manifests for the diff tests.

A manifest is built with the model of :mod:`envlock.manifest` (so it is what ``envlock
snapshot`` writes) and written as TOML; the stack tables (``[gpu]``, ``[frameworks]``,
``[blas]``) follow the field names of ``envlock/stack_model.py`` (branch ``stack``) and are
added as plain tables, which the manifest keeps in ``extra``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from envlock.manifest import _model

from envlock.manifest import _toml
from envlock.manifest import (
    CondaInfo,
    CondaPackage,
    CpuInfo,
    EnvlockInfo,
    EnvVars,
    GitInfo,
    Manifest,
    PipInfo,
    PipPackage,
    PlatformInfo,
    PythonInfo,
    Target,
)

PREFIX = "/home/ana/miniforge3/envs/proj"
SITE = f"{PREFIX}/lib/python3.11/site-packages"
FORGE = "conda-forge"

#: (name, version, build) of a conda-forge Python 3.11 env with PyTorch (CUDA 12.0 build).
CONDA_PACKAGES: list[tuple[str, str, str]] = [
    ("_libgcc_mutex", "0.1", "conda_forge"),
    ("_openmp_mutex", "4.5", "2_gnu"),
    ("bzip2", "1.0.8", "hd590300_5"),
    ("ca-certificates", "2024.2.2", "hbcca054_0"),
    ("cuda-version", "12.0", "hffde075_2"),
    ("cudnn", "8.9.7.29", "hbc23b4c_3"),
    ("filelock", "3.13.1", "pyhd8ed1ab_0"),
    ("libblas", "3.9.0", "21_linux64_openblas"),
    ("libcblas", "3.9.0", "21_linux64_openblas"),
    ("libcublas", "12.0.1.189", "hd3aeb46_3"),
    ("libgcc-ng", "13.2.0", "h807b86a_5"),
    ("libgfortran5", "13.2.0", "ha4646dd_5"),
    ("liblapack", "3.9.0", "21_linux64_openblas"),
    ("libopenblas", "0.3.26", "pthreads_h413a1c8_0"),
    ("libstdcxx-ng", "13.2.0", "h7e041cc_5"),
    ("nccl", "2.20.3.1", "h3a97aeb_0"),
    ("numpy", "1.26.4", "py311h64a7726_0"),
    ("openssl", "3.2.1", "hd590300_1"),
    ("pandas", "2.2.1", "py311h320fe9a_0"),
    ("pip", "24.0", "pyhd8ed1ab_0"),
    ("python", "3.11.8", "hab00c5b_0_cpython"),
    ("python_abi", "3.11", "4_cp311"),
    ("pytorch", "2.1.2", "cuda120_py311h25b6552_301"),
    ("scikit-learn", "1.4.1.post1", "py311hc009520_0"),
    ("scipy", "1.12.0", "py311h64a7726_2"),
    ("setuptools", "69.1.1", "pyhd8ed1ab_0"),
    ("sympy", "1.12", "pypyh9d50eac_103"),
    ("wheel", "0.42.0", "pyhd8ed1ab_0"),
]

#: conda name → the dist-info name Python sees (for conda packages that install one).
_PY_DISTS = {"filelock": "filelock", "numpy": "numpy", "pandas": "pandas", "pip": "pip",
             "pytorch": "torch", "scikit-learn": "scikit-learn", "scipy": "scipy",
             "setuptools": "setuptools", "sympy": "sympy", "wheel": "wheel"}

AVX2 = ("avx", "avx2", "f16c", "fma", "sse4_2")
AVX512 = (*AVX2, "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl", "avx512_vnni")


def conda_record(name: str, version: str, build: str, channel: str = FORGE) -> CondaPackage:
    """A conda-meta record as the snapshot stores it."""
    subdir = "noarch" if build.startswith(("pyh", "pypy")) else "linux-64"
    number = build.rsplit("_", 1)[-1]
    return CondaPackage(
        name=name, version=version, build=build,
        build_number=int(number) if number.isdigit() else 0, channel=channel, subdir=subdir,
        url=f"https://conda.anaconda.org/{channel}/{subdir}/{name}-{version}-{build}.conda",
        python_dist=(f"{_PY_DISTS[name]}-{version}.dist-info" if name in _PY_DISTS else None))


def build_manifest(
    *,
    host: str = "ws01",
    conda: Sequence[tuple[str, str, str]] = tuple(CONDA_PACKAGES),
    extra_pip: Sequence[PipPackage] = (),
    cpu_model: str = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
    flags: Sequence[str] = AVX512,
    usable_cores: int = 40,
    env: Mapping[str, str] | None = None,
    git: GitInfo | None = None,
    stack: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return the dict of a realistic manifest of a conda env (what ``to_dict`` gives)."""
    records = tuple(conda_record(*p) for p in sorted(conda))
    pip = [PipPackage(name=_PY_DISTS[r.name], version=r.version, location=SITE,
                      installer="conda", origin="conda", conda_package=r.name)
           for r in records if r.name in _PY_DISTS]
    pip.extend(extra_pip)
    pip.sort(key=lambda p: p.name)
    m = Manifest(
        envlock=EnvlockInfo(version="0.1.0", created="2026-11-29T23:58:00Z", host=host,
                            command=("envlock", "snapshot"), duration=1.8),
        target=Target(kind="conda", prefix=PREFIX, python=f"{PREFIX}/bin/python",
                      chosen_by="CONDA_PREFIX"),
        python=PythonInfo(source="interpreter", version="3.11.8", implementation="cpython",
                          executable=f"{PREFIX}/bin/python", prefix=PREFIX,
                          base_prefix=PREFIX, path=(f"{PREFIX}/lib/python311.zip", SITE)),
        platform=PlatformInfo(source="/etc/os-release", os_id="rocky", os_version="8.9",
                              os_name="Rocky Linux 8.9 (Green Obsidian)",
                              kernel="4.18.0-513.9.1.el8_9.x86_64", machine="x86_64",
                              glibc="2.28"),
        cpu=CpuInfo(source="/proc/cpuinfo", vendor="GenuineIntel", model=cpu_model,
                    logical_cores=80, usable_cores=usable_cores, flags=tuple(sorted(flags)),
                    memory=404_000_000_000),
        env=EnvVars(vars=_model.freeze_mapping({"CONDA_DEFAULT_ENV": "proj",
                                                "CONDA_PREFIX": PREFIX, **(env or {})})),
        git=git or GitInfo(source="git", path="/home/ana/proj", commit="9" * 40, branch="main",
                           describe="v0.3-4-g9999999", dirty=False, untracked=0),
        conda=CondaInfo(source="conda-meta", requested=("numpy", "python=3.11", "pytorch"),
                        packages=records),
        pip=PipInfo(source="sys.path", packages=tuple(pip)),
    )
    data = m.to_dict()
    data.update(stack or {})
    return data


def editable(name: str, path: str, **git: Any) -> PipPackage:
    """An editable install of a git checkout (case C13)."""
    state = GitInfo(source="git", path=path, branch="main", **git)
    return PipPackage(name=name, version="0.3.1", location=SITE, installer="pip",
                      requested=True, origin="editable", url=f"file://{path}",
                      editable_path=path, git=state)


def replace(rows: Sequence[tuple[str, str, str]], **new: tuple[str, str] | None
            ) -> list[tuple[str, str, str]]:
    """Copy a conda package list, replacing (version, build) by name; ``None`` removes."""
    out = []
    for name, version, build in rows:
        key = name.replace("-", "_")
        if key in new:
            if new[key] is not None:
                out.append((name, *new[key]))  # type: ignore[misc]
        else:
            out.append((name, version, build))
    return out


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """``write(name, data)`` writes a manifest dict as TOML under ``tmp_path``."""

    def _write(name: str, data: Mapping[str, Any], directory: Path | None = None) -> Path:
        path = (directory or tmp_path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_toml.dumps(dict(data)), encoding="utf-8")
        return path

    return _write


def gpu_table(name: str, cc: str, *, driver: str = "470.182.03", count: int = 1
              ) -> dict[str, Any]:
    """A ``[gpu]`` table as the stack probe writes it."""
    return {"gpu": {"status": "ok", "source": "nvidia-smi", "vendor": "nvidia",
                    "driver-version": driver, "driver-kind": "proprietary",
                    "cuda-driver-version": "11.4", "cuda-driver-source": "nvidia-smi",
                    "gpus": [{"index": i, "name": name, "uuid": f"GPU-{i:08x}-0000",
                              "memory": 11_811_160_064, "compute-capability": cc}
                             for i in range(count)]}}


# -- every diff of these tests, piped: every version string reaches the log whole ----------------
_VERSION_WORD = re.compile(r"\d+(?:\.\d+)+[\w.+!-]*")


def _versions(value: Any) -> list[str]:
    """The version strings of one fact value, as its text shows them."""
    from envlock.diff.facts import Impl, Pkg, display

    if isinstance(value, Pkg):
        return [value.version] if value.version else []
    if isinstance(value, Impl):
        return [value.version] if value.version else []
    if value is None:
        return []
    return [w for w in re.split(r"[\s,;()]+", display(value)) if _VERSION_WORD.fullmatch(w)]


def _check_plain(result: Any, rich_text: str) -> None:
    """The diff written without rich (:mod:`envlock.render.plainconsole`, what ``envlock diff
    … | cat`` prints) is rich's own output byte for byte, whenever it says it is exact; at 80
    columns (rich's output given) and at 40 and 200, rich rendering again."""
    import io

    from rich.console import Console

    from envlock.render.difftext import render_text
    from envlock.render.plainconsole import PlainConsole

    for width in (80, 40, 200):
        plain = PlainConsole(width)
        render_text(result, plain, show_all=True, cut=False)
        if not plain.exact():
            continue
        if width != 80:
            console = Console(file=io.StringIO(), width=width, highlight=False, soft_wrap=False,
                              color_system=None, force_terminal=False)
            render_text(result, console, show_all=True, cut=False)
            rich_text = console.file.getvalue()
        assert plain.text() == rich_text


def _check_piped(result: Any) -> None:
    """Render ``result`` as ``envlock diff … | cat`` does (not a terminal, 80 columns) and
    check that every version of every differing fact is in it, whole."""
    import io

    from rich.console import Console

    from envlock.diff.engine import ManyDiff
    from envlock.render.difftext import render_text

    console = Console(file=io.StringIO(), width=80, highlight=False, soft_wrap=False,
                      color_system=None, force_terminal=False)
    render_text(result, console, show_all=True)
    text = console.file.getvalue()
    _check_plain(result, text)
    words = set(re.split(r"[\s,;()]+", text))
    if isinstance(result, ManyDiff):
        values = [x for v in result.varying for x, _, _ in v.values]
    else:
        values = [x for c in result.changes for x in c.values]
    for value in values:
        for version in _versions(value):  # "git <sha>" (a VCS pin) is two words, each whole
            assert all(w in words for w in version.split()), (version, text)
    assert "…" not in text[text.find("Differences ("):] if "Differences (" in text else True


@pytest.fixture(autouse=True)
def _piped_output_holds_every_version(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every diff a test of this folder computes is also rendered as piped text and checked
    (the acceptance "piped output of every diff in the tests holds every version in full")."""
    import envlock.diff.api as api

    seen: list[Any] = []
    pair, many = api.compare_pair, api.compare_many

    def _pair(*args: Any, **kw: Any) -> Any:
        seen.append(pair(*args, **kw))
        return seen[-1]

    def _many(*args: Any, **kw: Any) -> Any:
        seen.append(many(*args, **kw))
        return seen[-1]

    monkeypatch.setattr(api, "compare_pair", _pair)
    monkeypatch.setattr(api, "compare_many", _many)
    yield seen
    for result in seen:
        _check_piped(result)
