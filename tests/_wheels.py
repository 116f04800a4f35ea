"""Small pure-Python wheels (PEP 427) for the tests: one builder for lock, probes and reproduce.

Deterministic (fixed timestamps and modes), with a RECORD of sha256 digests as pip and uv check.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(dest: Path, name: str, version: str, requires: Iterable[str] = (), *, code: str = "",
               modules: Mapping[str, str | bytes] | None = None, summary: str = "",
               tag: str = "py3-none-any") -> Path:
    """Write ``<dist>-<version>-<tag>.whl`` into ``dest`` and return its path.

    :param requires: ``Requires-Dist`` lines (PEP 508).
    :param code: source appended to the package's ``__init__.py`` (after ``__version__``).
    :param modules: the files of the wheel besides its dist-info (default: ``<dist>/__init__.py``);
        text, or bytes (a gcc-built shared library).
    :param summary: a METADATA body.
    :param tag: the wheel's compatibility tag (PEP 425), e.g. ``py3-none-manylinux_2_17_x86_64``;
        it names the file and is the WHEEL ``Tag``.
    """
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files: dict[str, str | bytes] = (dict(modules) if modules else {
        f"{dist}/__init__.py": f"__version__ = {version!r}\n{code}"})
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires)
                                 + (f"\n{summary}\n" if summary else ""))
    files[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: envlock-tests\nRoot-Is-Purelib: true\n"
                              f"Tag: {tag}\n")
    data = {p: t.encode() if isinstance(t, str) else t for p, t in files.items()}
    record = "".join(f"{p},sha256={_b64(b)},{len(b)}\n" for p, b in data.items())
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, text in files.items():
            zi = zipfile.ZipInfo(member, (2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, text)
    return path
