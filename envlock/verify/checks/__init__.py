"""verify's checks: each a plain function ``check_x(ctx) -> list[Finding]``.

``ctx`` is a :class:`envlock.verify.context.Context`: live facts (lazy, shared), expected facts
(manifest, lockfiles), the job's environment and the policy.  :data:`CHECKS` lists them in the
order their results are shown; ``docs/verify.md`` lists every finding id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envlock.verify.checks.allocation import check_gpu_processes, check_visible_devices
from envlock.verify.checks.build import DEFAULT_BUILD_CHECKS
from envlock.verify.checks.gpucompat import check_arch, check_cpu_build, check_driver
from envlock.verify.checks.isolation import check_isolation
from envlock.verify.checks.libraries import check_libraries
from envlock.verify.checks.numerics import check_numerics_env
from envlock.verify.checks.output import check_output_dir, check_workdir
from envlock.verify.checks.packages import (
    check_lock_packages,
    check_manifest_packages,
    check_overwritten,
    check_python_version,
    check_shadowed,
)

__all__ = ["CHECKS"]

#: ``(name, function)`` of every check, in display order.
CHECKS: tuple[tuple[str, Callable[[Any], list[Any]]], ...] = (
    ("python", check_python_version),
    ("packages", check_manifest_packages),
    ("locks", check_lock_packages),
    ("overwritten", check_overwritten),
    ("shadowed", check_shadowed),
    ("cpu-build", check_cpu_build),
    ("driver", check_driver),
    ("arch", check_arch),
    ("libraries", check_libraries),
    ("visible-devices", check_visible_devices),
    ("gpu-processes", check_gpu_processes),
    ("output-dir", check_output_dir),
    ("workdir", check_workdir),
    ("isolation", check_isolation),
    ("numerics-env", check_numerics_env),
    *DEFAULT_BUILD_CHECKS,
)
