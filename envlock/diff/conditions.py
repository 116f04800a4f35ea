"""When an explanation can change numbers at all: the ``needs`` of a rule or component.

An explanation is only a *possible* cause.  Each kind of explanation that can change the
numbers only under a condition names it in the impact model (``needs = "gpu"`` on a
``[rules.*]`` table or a ``[[component]]``; docs/diff.md, "When a cause can change numbers"),
and the condition is checked against **both** sides' facts: a difference whose condition holds
on neither side is not an explanation, only a note of the context ("CUBLAS_WORKSPACE_CONFIG
differs, but it changes numbers only with a GPU on either side, and neither side has one").

A condition is known *not* to hold only from evidence: an input that did not record its GPUs
(a requirements file) or its packages (a partial listing) may have them, so there the
explanation stays.

The conditions (:data:`NEEDS`):

* ``gpu`` — a GPU on either side: cuBLAS/cuDNN settings (``CUBLAS_WORKSPACE_CONFIG``,
  ``NVIDIA_TF32_OVERRIDE``, TF32 flags, ``torch.backends.cudnn.*``), CUDA library versions,
  the driver, "a CUDA build runs kernels on the GPU" (NVIDIA cuBLAS docs, "Results
  reproducibility"; PyTorch docs, "Reproducibility" and "TensorFloat-32");
* ``mkl`` — MKL can be loaded on either side: an ``mkl`` package, an MKL ``[blas]`` entry or
  ``libmkl*`` library, or torch (x86-64 builds link MKL statically; pytorch/builder) —
  ``MKL_CBWR``, ``MKL_ENABLE_INSTRUCTIONS``, ``MKL_DEBUG_CPU_TYPE`` (Intel oneMKL developer
  guide, "Conditional Numerical Reproducibility");
* ``openblas`` — OpenBLAS on either side (``OPENBLAS_CORETYPE``; OpenBLAS README, "Setting
  the number of threads" / DYNAMIC_ARCH);
* ``numpy`` — numpy on either side (``NPY_DISABLE_CPU_FEATURES``; numpy docs, "CPU build
  options" / runtime dispatch);
* ``tensorflow`` — TensorFlow on either side (``TF_*`` variables);
* ``xla`` — JAX or TensorFlow on either side (``XLA_FLAGS``, ``JAX_*``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from envlock.diff.factset import FactSet, Impl, Pkg

__all__ = ["NEEDS", "Condition", "unmet"]


def _recorded_no_gpu(s: FactSet) -> bool:
    return s.areas.get("gpu") == "" and not any(
        area == "gpu" and key in ("models", "compute-capability") for area, key in s.facts)


def _complete_packages(s: FactSet) -> bool:
    return s.areas.get("package") == "" and s.listing == "complete"


def _has_package(s: FactSet, *names: str) -> bool:
    return any(("package", n) in s.facts for n in names)


def _mkl(s: FactSet) -> bool:
    if _has_package(s, "mkl", "mkl-service", "libmkl-rt", "intel-openmp", "torch"):
        return True
    for (area, key), v in s.facts.items():
        if area == "blas" and isinstance(v, Impl) and v.name == "mkl":
            return True
        if area == "libraries" and "libmkl" in key:
            return True
        if area == "package" and isinstance(v, Pkg) and key in ("libblas", "blas") \
                and v.build and re.search(r"(^|_)mkl($|_)", v.build):
            return True
    return False


def _openblas(s: FactSet) -> bool:
    if _has_package(s, "libopenblas", "openblas", "numpy", "scipy", "scipy-openblas32",
                    "scipy-openblas64"):
        return True  # numpy and scipy wheels bundle OpenBLAS
    return any((area == "blas" and isinstance(v, Impl) and v.name == "openblas")
               or (area == "libraries" and "openblas" in key) for (area, key), v in s.facts.items())


class Condition:
    """One condition: its text and how to tell, from one side's facts, that it cannot hold.

    :ivar text: what must be true, as the note says it (``"a GPU on either side"``).
    :ivar absent: the words for "neither side has it" (``"neither side has a GPU"``).
    :ivar present: ``FactSet → bool``: this side may have it (evidence or no record).
    """

    __slots__ = ("absent", "present", "text")

    def __init__(self, text: str, absent: str, present: Callable[[FactSet], bool]) -> None:
        self.text, self.absent, self.present = text, absent, present


def _gpu(s: FactSet) -> bool:
    return not _recorded_no_gpu(s)


def _pkg_condition(check: Callable[[FactSet], bool]) -> Callable[[FactSet], bool]:
    return lambda s: not _complete_packages(s) or check(s)


#: the conditions an impact model's ``needs`` may name.
NEEDS: dict[str, Condition] = {
    "gpu": Condition("a GPU on either side", "neither side has a GPU (no NVIDIA driver or "
                     "device recorded)", _gpu),
    "mkl": Condition("MKL loaded on either side", "neither side has MKL (no mkl package, "
                     "MKL BLAS or torch)", _pkg_condition(_mkl)),
    "openblas": Condition("OpenBLAS on either side", "neither side has OpenBLAS",
                          _pkg_condition(_openblas)),
    "numpy": Condition("numpy on either side", "neither side has numpy",
                       _pkg_condition(lambda s: _has_package(s, "numpy"))),
    "tensorflow": Condition("TensorFlow on either side", "neither side has TensorFlow",
                            _pkg_condition(lambda s: any(
                                a == "package" and k.startswith("tensorflow")
                                for a, k in s.facts))),
    "xla": Condition("JAX or TensorFlow on either side", "neither side has JAX or TensorFlow",
                     _pkg_condition(lambda s: any(
                         a == "package" and (k.startswith(("tensorflow", "jax")))
                         for a, k in s.facts))),
}


def unmet(needs: str | Sequence[str] | None, sides: Sequence[FactSet]) -> Condition | None:
    """The first condition of ``needs`` that holds on none of ``sides``, or ``None``.

    :param needs: a condition name of :data:`NEEDS`, several (all must be possible), or none.
    :param sides: the inputs compared (both sides of a pair; a majority and a deviant).
    :raises KeyError: an unknown condition name (the impact model's checker refuses them).
    """
    if not needs:
        return None
    for name in [needs] if isinstance(needs, str) else needs:
        cond = NEEDS[name]
        if not any(cond.present(s) for s in sides):
            return cond
    return None
