"""The files an extension build is decided by, read as their own tools read them.

``torch/utils/cpp_extension.py`` (the CUDA-home order of ``_find_cuda_home``, the GCC bounds
of ``_check_abi``/``get_compiler_abi_compatibility_and_version``, parsed with :mod:`ast`), the
toolkit's ``include/crt/host_config.h`` (the newest GCC/Clang major nvcc accepts, from its
``#error`` lines), ``nvcc --version`` (``release X.Y, VX.Y.Z``), the ``.dynstr`` of torch's
``libc10.so`` (its C++ ABI), and the libstdc++ manual's GCC → ``GLIBCXX_`` table.
:func:`envlock.probes.buildenv.probe_build` uses them.
"""

from __future__ import annotations

import ast
import os
import re
import struct
from collections.abc import Mapping
from pathlib import Path

from envlock.probes._stackutil import read_text

__all__ = [
    "DEFAULT_CUDA_HOME_ORDER",
    "read_cuda_home_order",
    "read_torch_gcc_bounds",
    "parse_host_config",
    "parse_nvcc_release",
    "read_cxx11_abi",
    "GCC_GLIBCXX",
    "glibcxx_for_gcc",
]

#: ``_find_cuda_home``'s order in torch 1.x–2.14 (read from torch 2.14.1's
#: ``torch/utils/cpp_extension.py``), used when the target's copy cannot be read.
DEFAULT_CUDA_HOME_ORDER: tuple[str, ...] = ("CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda")

#: ``(GCC release, highest GLIBCXX_ symbol version its libstdc++ defines)``, newest first.
#: Source: the libstdc++ manual, "ABI Policy and Guidelines", section "Symbol versioning"
#: (https://gcc.gnu.org/onlinedocs/libstdc++/manual/abi.html).  Code compiled by that GCC may
#: reference symbols up to that version.
GCC_GLIBCXX: tuple[tuple[str, str], ...] = (
    ("15.1", "3.4.34"),
    ("14.1", "3.4.33"),
    ("13.2", "3.4.32"),
    ("13.1", "3.4.31"),
    ("12.1", "3.4.30"),
    ("11.1", "3.4.29"),
    ("10.1", "3.4.28"),
    ("9.3", "3.4.28"),
    ("9.2", "3.4.27"),
    ("9.1", "3.4.26"),
    ("8.1", "3.4.25"),
    ("7.2", "3.4.24"),
    ("7.1", "3.4.23"),
    ("6.1", "3.4.22"),
    ("5.1", "3.4.21"),
    ("4.9", "3.4.20"),
    ("4.8.3", "3.4.19"),
)

def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def glibcxx_for_gcc(version: str) -> str | None:
    """The highest ``GLIBCXX_`` version GCC ``version`` ships (:data:`GCC_GLIBCXX`):
    ``"13.2.0"`` → ``"3.4.32"``; ``None`` for GCC older than 4.8.3."""
    have = _vt(version)
    for gcc, glibcxx in GCC_GLIBCXX:
        if have >= _vt(gcc):
            return glibcxx
    return None


# -- reading torch's cpp_extension.py ----------------------------------------------------------
def _function_source(text: str, name: str) -> str | None:
    m = re.search(rf"^def {re.escape(name)}\(.*?(?=^\S)", text + "\nEOF", re.S | re.M)
    return m.group(0) if m else None


def read_cuda_home_order(text: str) -> tuple[str, ...] | None:
    """The CUDA-home lookup order of a ``cpp_extension.py``: ``_find_cuda_home``'s steps in
    source order, e.g. ``("CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda")``.

    Steps recognised: an environment variable read (``os.environ.get("X")``,
    ``os.getenv("X")``, ``os.environ["X"]``) → ``"X"``; ``shutil.which("nvcc")`` or a
    ``which``/``where`` command with ``nvcc`` → ``"nvcc on PATH"``; the literal
    ``"/usr/local/cuda"``.  ``ROCM_*`` and Windows paths are ignored.

    :returns: ``None`` when the function is missing or does not parse.
    """
    src = _function_source(text, "_find_cuda_home")
    if src is None:
        return None
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        pos = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if isinstance(node, ast.Call):
            fn = ast.unparse(node.func)
            args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if fn in ("os.environ.get", "os.getenv") and args:
                found.append((*pos, args[0]))
            elif fn.endswith("which") and "nvcc" in args:
                found.append((*pos, "nvcc on PATH"))
            elif any(isinstance(a, ast.List) and "nvcc" in ast.unparse(a) for a in node.args):
                found.append((*pos, "nvcc on PATH"))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.append((*pos, key.value))
        elif isinstance(node, ast.Constant) and node.value == "/usr/local/cuda":
            found.append((*pos, "/usr/local/cuda"))
    order: list[str] = []
    for _l, _c, step in sorted(found):
        if step not in order and not step.startswith("ROCM"):
            order.append(step)
    return tuple(order) or None


def _literal(node: ast.AST, names: Mapping[str, object]) -> object:
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, names) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {_literal(k, names): _literal(v, names) for k, v in zip(node.keys, node.values) if k is not None}
    return ast.literal_eval(node)


def read_torch_gcc_bounds(text: str) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """torch's own host-compiler bounds per CUDA release: ``CUDA_GCC_VERSIONS`` of
    ``cpp_extension.py`` (``{"12.4": ((6, 0, 0), (14, 0))}``: ``min ≤ gcc < max``, the upper
    bound exclusive).  ``_check_cuda_version`` raises ``RuntimeError`` outside them for a
    binary (release) torch unless ``TORCH_DONT_CHECK_COMPILER_ABI`` is set.

    :returns: ``{}`` when the table is missing or not literal.
    """
    start = text.find("\nCUDA_GCC_VERSIONS")
    if start < 0:
        return {}
    names: dict[str, object] = {}
    m: re.Match[str] | None
    for m in re.finditer(r"^(MINIMUM_\w+)\s*=\s*(\([^)\n]*\))", text[max(0, start - 4000):start], re.M):
        try:
            names[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
    m = re.match(r"\nCUDA_GCC_VERSIONS\b[^=\n]*=\s*(\{.*?^\})", text[start:start + 20000], re.M | re.S)
    if not m:
        return {}
    try:
        value = _literal(ast.parse(m.group(1), mode="eval").body, names)
    except (ValueError, SyntaxError, TypeError):
        return {}
    if not isinstance(value, dict):
        return {}
    out = {}
    for k, v in value.items():
        if isinstance(k, str) and isinstance(v, tuple) and len(v) == 2:
            out[k] = v
    return out


def parse_host_config(text: str) -> tuple[int | None, int | None]:
    """The newest GCC and Clang majors a toolkit's ``include/crt/host_config.h`` accepts, from
    nvcc's own errors: ``"gcc versions later than 15 are not supported!"`` → 15,
    ``"clang version must be less than 21"`` → 20 (the Grace and HOS clang checks are skipped).
    """
    gcc = re.search(r"unsupported GNU version! gcc versions later than (\d+)", text)
    clang = re.search(r"unsupported clang version! clang version must be less than (\d+)", text)
    return (int(gcc.group(1)) if gcc else None, int(clang.group(1)) - 1 if clang else None)


def parse_nvcc_release(text: str) -> tuple[str | None, str | None]:
    """``nvcc --version`` → ``(release, version)``: ``"release 12.4, V12.4.131"`` →
    ``("12.4", "12.4.131")`` (torch's ``_check_cuda_version`` takes ``release (\\d+[.]\\d+)``)."""
    m = re.search(r"release (\d+[.]\d+)(?:, V(\d+(?:\.\d+)+))?", text)
    return (m.group(1), m.group(2)) if m else (None, None)


# -- ELF .dynstr (the C++ ABI of torch's libraries) --------------------------------------------
def _dynstr(path: str | os.PathLike[str], limit: int = 16 << 20) -> bytes | None:
    """The ``.dynstr`` section of an ELF64 little-endian file (section headers only, bounded)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            if not shoff or shentsize < 64 or shnum > 4096 or shstrndx >= shnum:
                return None
            fh.seek(shoff)
            table = fh.read(shentsize * shnum)
            secs = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
            _n, _t, _f, _a, stroff, strsize = secs[shstrndx]
            fh.seek(stroff)
            names = fh.read(min(strsize, 1 << 20))
            for name_off, _typ, _flags, _addr, off, size in secs:
                end = names.find(b"\0", name_off)
                if names[name_off:end] == b".dynstr":
                    fh.seek(off)
                    return fh.read(min(size, limit))
    except (OSError, struct.error):
        return None
    return None


def read_cxx11_abi(torch_dir: Path) -> tuple[bool | None, str | None]:
    """torch's ``_GLIBCXX_USE_CXX11_ABI`` read without importing torch.

    First ``-D_GLIBCXX_USE_CXX11_ABI=N`` in ``share/cmake/Torch/TorchConfig.cmake`` (older
    torch releases write their ABI there for CMake users; the 2.13/2.14 wheels do not), else
    the mangled names in the ``.dynstr`` of ``lib/libc10.so`` (``lib/libtorch_cpu.so``): any
    ``__cxx11`` (``std::__cxx11::basic_string``, ``[abi:cxx11]``) → new ABI; ``Ss``
    (``std::string`` of the old ABI) and no ``__cxx11`` → old.

    :returns: ``(True = new ABI / False = old / None, how it was read)``.
    """
    cfg = torch_dir / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
    text = read_text(cfg, 1 << 18)
    if text:
        m = re.search(r"-D_GLIBCXX_USE_CXX11_ABI=([01])\b", text)
        if m:
            return m.group(1) == "1", f"{cfg}: -D_GLIBCXX_USE_CXX11_ABI={m.group(1)}"
    for name in ("libc10.so", "libtorch_cpu.so"):
        lib = torch_dir / "lib" / name
        data = _dynstr(lib)
        if not data:
            continue
        new = data.count(b"__cxx11")
        old = 0 if new else len(re.findall(rb"_Z\w*?(?:RKSs|Ss[EI_0-9])", data))
        if new:
            return True, f"{lib} .dynstr: {new} names with __cxx11 (std::__cxx11::basic_string)"
        if old:
            return False, f"{lib} .dynstr: {old} names with the old std::string (Ss), none with __cxx11"
    return None, None
