"""Fix texts generated from the facts: the install commands an explanation's "do" gives.

Each command is written so that it parses as what it claims to be (``tests/diff/test_fixes.py``
checks them with :mod:`shlex`, :class:`packaging.requirements.Requirement` for pip's
requirement specifiers and conda's MatchSpec through py-rattler):

* PyTorch publishes one pip index per build variant, ``https://download.pytorch.org/whl/<variant>``
  (``cpu``, ``cu118``, ``cu121``, ``cu130``, ``rocm6.1``; the list and its source are
  :data:`envlock.variants.PYTORCH_INDEXES`): a ``+cpu`` or ``+cu130`` build is only on that
  index, so the command names it, with ``<variant>`` left as a visible placeholder and its value
  for each input spelled out; a variant PyTorch has no index for (CUDA 11.2, 8.0) is said so,
  with the indexes of that CUDA major to choose from;
* conda-forge selects the BLAS by the build string of its ``libblas`` "mutex" package
  (``libblas=*=*openblas``, ``*mkl``, ``*blis``; conda-forge docs, "Switching BLAS
  implementation"); the defaults channel by the ``blas`` metapackage (``blas=*=mkl``,
  ``blas=*=openblas``);
* conda-forge selects the variant by build string and the ``cuda-version`` metapackage
  (``pytorch * cuda*``, ``cuda-version=13.0``; conda-forge docs, "CUDA builds"); the
  ``pytorch`` channel used ``pytorch-cuda=<x.y>`` and ``cpuonly``, only for CUDA 11.6–12.4
  (its last release, torch 2.5): never for a CUDA 13.0 build.  ``cuda-version=<x.y>`` is named
  only for the versions conda-forge has (:data:`envlock.variants.CONDA_FORGE_CUDA_VERSIONS`).
"""

from __future__ import annotations

import re
import shlex

from envlock.diff.results import Change
from envlock.diff.factset import Pkg, display
from envlock.variants import (
    PYTORCH_CUDA_CHANNEL,
    conda_forge_cuda_version,
    cuda_indexes,
    pytorch_index_url,
)

__all__ = ["variant_tag", "torch_fix", "blas_fix", "env_fix", "package_fix", "code_fix",
           "PYTORCH_INDEX", "PYTORCH_CUDA_CHANNEL"]

#: PyTorch's per-variant pip index; ``<variant>`` is the placeholder the user fills in.
PYTORCH_INDEX = "https://download.pytorch.org/whl/<variant>"



def variant_tag(variant: str) -> str | None:
    """The index name of a torch build variant: ``"CPU-only"`` → ``"cpu"``, ``"CUDA 13.0"`` →
    ``"cu130"`` (also ``"CUDA 13.0 (cuDNN 9)"``), ``"ROCm 6.1"`` → ``"rocm6.1"``; ``None`` when the
    variant is not known."""
    if variant == "CPU-only":
        return "cpu"
    m = re.match(r"CUDA (\d+)\.(\d+)(?:$| )", variant)  # "CUDA 13.0", "CUDA 13.0 (cuDNN 9)"
    if m:
        return f"cu{m.group(1)}{m.group(2)}"
    m = re.fullmatch(r"ROCm (\d+(?:\.\d+)*)", variant)
    return f"rocm{m.group(1)}" if m else None


def _public(version: str | None) -> str | None:
    return version.split("+", 1)[0] if version else None


def _conda(variant: str, channel: str | None) -> str | None:
    """The conda command that installs ``variant`` from the channel the manifest used."""
    cuda = re.match(r"CUDA (\d+\.\d+)(?:$| )", variant)
    if channel in ("pytorch", "defaults", "anaconda", "pkgs/main"):
        if variant == "CPU-only":
            return "conda install -c pytorch pytorch cpuonly"
        if cuda and cuda.group(1) in PYTORCH_CUDA_CHANNEL:
            return (f"conda install -c pytorch -c nvidia pytorch "
                    f"{shlex.quote('pytorch-cuda=' + cuda.group(1))}")
    if variant == "CPU-only":
        return "conda install -c conda-forge 'pytorch * cpu*'"
    if cuda and conda_forge_cuda_version(cuda.group(1)):
        return (f"conda install -c conda-forge 'pytorch * cuda*' "
                f"{shlex.quote('cuda-version=' + cuda.group(1))}")
    return None


def torch_fix(variants: tuple[str, str], labels: tuple[str, str],
              packages: tuple[Pkg | None, Pkg | None]) -> str:
    """The install commands for torch's build, one per way the inputs installed it.

    :param variants: the two builds (:func:`envlock.diff.ruleparts.torch_variant`).
    :param labels: the two inputs' labels.
    :param packages: each side's ``torch`` package fact, if any (its manager and channel
        choose the conda command; its version goes into the pip one).
    :returns: text with the commands in backticks.
    """
    tags = [variant_tag(v) for v in variants]
    versions = [_public(p.version) if isinstance(p, Pkg) else None for p in packages]
    if versions[0] and versions[0] == versions[1]:
        spec, vnote = f"torch=={versions[0]}", ""
    elif all(versions):  # a placeholder would not parse as a requirement: b's, a's noted
        spec = f"torch=={versions[1]}"
        vnote = f"; torch=={versions[0]} for {labels[0]}'s version"
    else:
        spec, vnote = "torch", ""
    shown, missing = [], []
    for t, v, lab in zip(tags, variants, labels, strict=True):
        if t and pytorch_index_url(t):
            shown.append(f"{t} for the {v} build of {lab}")
        elif t:
            major = re.match(r"cu(\d+)\d$", t)
            near = cuda_indexes(major.group(1)) if major else ()
            missing.append(f"PyTorch has no {t} index for the {v} build of {lab}"
                           + (f" (choose one of its CUDA {major.group(1) if major else ''} "
                              f"indexes: {', '.join(near)})" if near else
                              " (choose a newer CUDA build: " + ", ".join(cuda_indexes()[-3:]) + ")"))
    if not shown:  # no index to name: the choice, spelled out
        return "pip: " + "; ".join(missing) + vnote
    parts = [f"pip: `pip install {shlex.quote(spec)} --index-url {PYTORCH_INDEX}` (<variant>: "
             + ", ".join(shown) + vnote + ")" + "".join(f"; {m}" for m in missing)]
    for p, v, lab in zip(packages, variants, labels, strict=True):
        if isinstance(p, Pkg) and p.manager == "conda":
            cmd = _conda(v, p.channel)
            if cmd:
                parts.append(f"conda ({p.channel or 'its channel'}, for {lab}'s build): `{cmd}`")
    return "; ".join(parts)


_DEFAULTS = ("defaults", "anaconda", "pkgs/main")


def blas_fix(vendors: tuple[str, str], packages: tuple[object, object]) -> str:
    """The conda command that selects each side's BLAS, in its channel's names.

    :param vendors: the two implementations (``"openblas"``, ``"mkl"``, ``"blis"``, …), each
        the single vendor of a side, or ``""`` when a side has several or none.
    :param packages: each side's ``libblas`` (conda-forge) or ``blas`` (defaults) package fact.
    :returns: text with the commands in backticks, e.g. ``conda-forge: `conda install -c
        conda-forge 'libblas=*=*mkl'` (MKL) or `… '*openblas'` (OpenBLAS)``.
    """
    channel = next((p.channel for p in packages if isinstance(p, Pkg) and p.channel), None)
    cmds = []
    for v in dict.fromkeys(x for x in vendors if x in ("openblas", "mkl", "blis", "netlib",
                                                        "accelerate")):
        if channel in _DEFAULTS and v in ("openblas", "mkl"):
            cmds.append(f"`conda install {shlex.quote('blas=*=' + v)}`")
        else:
            cmds.append(f"`conda install -c conda-forge {shlex.quote('libblas=*=*' + v)}`")
    where = "defaults" if channel in _DEFAULTS else "conda-forge"
    return f"conda ({where}): " + " or ".join(cmds) if cmds else \
        "pin the same BLAS build on both sides"


#: the thread-count variables one command sets together (the ``threads`` rule's fix when only
#: the cores differ and no count is set: BLAS and OpenMP then take one thread per core).
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _shell(sets: list[tuple[str, str]], unsets: list[str]) -> str:
    parts = []
    if sets:
        parts.append("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sets))
    if unsets:
        parts.append("unset " + " ".join(unsets))
    return "; ".join(parts)


def env_fix(changes: list[Change], labels: tuple[str, str]) -> str:
    """The shell lines that give one side the other's environment variables.

    The two sides hold different values, and which is right is the user's choice: the text
    names both, as bash lines to run before the job (``export OMP_NUM_THREADS=1``, ``unset
    MKL_CBWR``).  Changes of other areas (usable cores) are ignored; with no ``env`` change
    at all, one line sets every count of :data:`THREAD_VARS` to 1 on both sides.

    :param changes: the explanation's changes (``env`` ones are used).
    :param labels: the two inputs' labels (in a many-input diff, the majority's first).
    :returns: text with the commands in backticks.
    """
    env = [c for c in changes if c.area == "env"]
    if not env:
        return f"on both sides: `{_shell([(v, '1') for v in THREAD_VARS], [])}`"
    sides = []
    for i, lab in enumerate(labels):
        sets = [(c.key, display(c.values[i])) for c in env if c.values[i] is not None]
        unsets = [c.key for c in env if c.values[i] is None]
        sides.append(f"as in {lab}: `{_shell(sets, unsets)}`")
    return "choose one side's values — " + "; or ".join(sides)


def install_command(p: Pkg, key: str, build: bool = True) -> str:
    """The command that installs exactly package ``p`` with the manager that installed it
    (``conda install 'name==version=build'`` for a conda record, else ``pip install``).

    :param build: whether to pin the conda build string.  ``False`` when the command is for
        a machine of another conda platform (subdir): a build string names one platform's
        binary (``py311h7125741_0`` is osx-arm64's numpy), which conda cannot install on
        another, so there the version alone is pinned and conda picks that platform's build.
    """
    version = p.version
    if p.manager == "conda":
        name = p.name or key
        spec = f"{name}=={version}" + (f"={p.build}" if p.build and build else "")
        return f"conda install {shlex.quote(spec)}"
    return f"pip install {shlex.quote(f'{p.name or key}=={version}')}"


def package_fix(c: Change, labels: tuple[str, str], same_platform: bool = True) -> str:
    """The install commands that give one side the other's version of a package.

    Which version is right is the user's choice: both commands are named, each in the
    installer that recorded it (``pip install 'numpy==1.26.4'``; ``conda install
    'numpy==1.26.4=py311h64a7726_0'`` with the conda build string).

    :param same_platform: ``False`` when the two sides are of different conda subdirs: the
        commands then pin versions only (:func:`install_command`).
    :returns: text with the commands in backticks; a plain sentence when a side has no
        concrete version (a spec's constraint, or the package on one side only).
    """
    va, vb = c.values
    if not (isinstance(va, Pkg) and isinstance(vb, Pkg)) or va.constraint or vb.constraint:
        return f"install the same {c.key} on both sides"
    return (f"choose one side's version — as in {labels[0]}: "
            f"`{install_command(va, c.key, same_platform)}`; "
            f"or as in {labels[1]}: `{install_command(vb, c.key, same_platform)}`")


def code_fix(changes: list[Change], labels: tuple[str, str]) -> str:
    """The git commands that give one checkout the other's code, from the ``code`` facts.

    A commit move is ``git checkout <commit>`` (either side's: a choice, both named); the
    uncommitted changes are put aside with ``git stash`` to run a clean side's code; a dirty
    side's changes can only be reproduced from a saved patch (``envlock snapshot
    --save-patch``), so the text says so rather than naming a command that cannot work.
    """
    by = {c.key.rsplit(".", 1)[1]: c for c in changes}
    sides = []
    for i, lab in enumerate(labels):
        cmds, notes = [], []
        commit = by.get("commit")
        if commit is not None and isinstance(commit.values[i], str):
            cmds.append(f"git checkout {shlex.quote(commit.values[i])}")
        dirty = by.get("uncommitted")
        if dirty is not None:
            mine, other = dirty.values[i], dirty.values[1 - i]
            if mine == "none" and other not in (None, "none"):
                cmds.insert(0, "git stash")
            elif mine not in (None, "none"):
                notes.append(f"then apply {lab}'s uncommitted changes (its saved patch: "
                             "`git apply <manifest>.patch`, if it was taken with --save-patch)")
        if cmds or notes:
            line = f"as in {lab}: " + (f"`{' && '.join(cmds)}`" if cmds else "")
            sides.append(line + (", " if cmds and notes else "") + " ".join(notes))
    if not sides:
        return "run the same commit with the same uncommitted changes"
    return "choose one side's code — " + "; or ".join(sides)
