"""The CPU as glibc's loader sees it on x86-64, and the tunables that change that view.

glibc does not read ``/proc/cpuinfo``: ``init_cpu_features`` (``sysdeps/x86/cpu-features.c``)
asks CPUID, marks each feature *usable* (``update_active``), then applies the
``glibc.cpu.hwcaps`` tunable (``TUNABLE_CALLBACK (set_hwcaps)``, ``sysdeps/x86/cpu-tunables.c``),
and only then derives the legacy ``dl_platform``/``dl_hwcap`` values; the ``glibc-hwcaps``
levels are computed later still, from the same usable bits (``sysdeps/x86_64/dl-hwcaps-subdirs.c``
calls ``get_isa_level``, ``sysdeps/x86/get-isa-level.h``).  This module reproduces that order
from the flags Linux prints (``arch/x86/include/asm/cpufeatures.h`` names them):

* :func:`usable_features` — ``/proc/cpuinfo`` flags to glibc ``cpu_features`` names;
* :func:`parse_tunables` / :func:`read_tunables` — ``GLIBC_TUNABLES`` (``elf/dl-tunables.c``
  ``parse_tunables``) and the ``LD_HWCAP_MASK`` alias (``elf/dl-tunables.list``), with AT_SECURE;
* :func:`mask_features` — ``glibc.cpu.hwcaps=-AVX512F,…``;
* :func:`isa_levels` — the active ``x86-64-v2``/``v3``/``v4`` subdirectories;
* :func:`legacy_caps` — ``$PLATFORM`` and the AT_HWCAP names of the legacy subdirectories.

``ld.so --glibc-hwcaps-mask`` and ``--glibc-hwcaps-prepend`` also change the glibc-hwcaps list,
but only when ``ld.so`` is run as a command (``elf/rtld.c``); a program started normally never
sees them, so they are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "CPUINFO_FLAG",
    "HWCAP_BITS",
    "HWCAP_IMPORTANT",
    "Tunables",
    "isa_levels",
    "legacy_caps",
    "mask_features",
    "parse_tunables",
    "read_tunables",
    "strtoul",
    "usable_features",
]

#: glibc ``cpu_features`` name (``sysdeps/x86/include/cpu-features.h``) → the ``/proc/cpuinfo``
#: flag Linux prints for the same CPUID bit (``arch/x86/include/asm/cpufeatures.h``): ``pni`` is
#: SSE3, ``lahf_lm`` LAHF64_SAHF64, ``abm`` LZCNT (CPUID 0x80000001 ECX bit 5 on Intel and AMD).
#: Linux prints no ``osxsave`` flag; it sets CR4.OSXSAVE whenever it uses XSAVE, so OSXSAVE is
#: usable exactly when ``xsave`` is listed — and Linux removes ``avx``/``avx512*`` from the list
#: when XCR0 lacks their register state, the test glibc's ``update_active`` makes with XGETBV.
#: Only the features that decide a library search are listed.
CPUINFO_FLAG: dict[str, str] = {
    # baseline (x86-64)
    "CMOV": "cmov", "CX8": "cx8", "FPU": "fpu", "FXSR": "fxsr", "MMX": "mmx", "SSE": "sse",
    "SSE2": "sse2",
    # x86-64-v2
    "CMPXCHG16B": "cx16", "LAHF64_SAHF64": "lahf_lm", "POPCNT": "popcnt", "SSE3": "pni",
    "SSSE3": "ssse3", "SSE4_1": "sse4_1", "SSE4_2": "sse4_2",
    # x86-64-v3
    "AVX": "avx", "AVX2": "avx2", "BMI1": "bmi1", "BMI2": "bmi2", "F16C": "f16c", "FMA": "fma",
    "LZCNT": "abm", "MOVBE": "movbe",
    # x86-64-v4 and the Xeon Phi platform
    "AVX512F": "avx512f", "AVX512BW": "avx512bw", "AVX512CD": "avx512cd", "AVX512DQ": "avx512dq",
    "AVX512VL": "avx512vl", "AVX512ER": "avx512er", "AVX512PF": "avx512pf",
    # the XSAVE state that AVX and AVX-512 need (see ``mask_features``)
    "OSXSAVE": "xsave", "XSAVE": "xsave", "XSAVEC": "xsavec",
}

#: ``get_isa_level`` (``sysdeps/x86/get-isa-level.h``): the usable features each level needs on
#: top of the one below; a level counts only when every lower one does.  FPU is tested as a CPUID
#: bit, the rest as usable bits.  BMI1 and BMI2 are in v3 since upstream commit b80f16adbd
#: (glibc 2.37), backported to the release/2.33–2.36 branches (18bec23cbb on 2.36) that distros
#: ship — Debian 12's 2.36-9+deb12u* has it (``glibc.cpu.hwcaps=-BMI1`` drops v3 there); an
#: unpatched 2.33–2.36 tarball would still count v3 without them.
_LEVELS: tuple[tuple[str | None, frozenset[str]], ...] = (
    (None, frozenset({"CMOV", "CX8", "FPU", "FXSR", "MMX", "SSE", "SSE2"})),
    ("x86-64-v2", frozenset({"CMPXCHG16B", "LAHF64_SAHF64", "POPCNT", "SSE3", "SSSE3", "SSE4_1",
                             "SSE4_2"})),
    ("x86-64-v3", frozenset({"AVX", "AVX2", "BMI1", "BMI2", "F16C", "FMA", "LZCNT", "MOVBE"})),
    ("x86-64-v4", frozenset({"AVX512F", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512VL"})),
)

#: The names ``set_hwcaps`` can turn off with ``-NAME`` in glibc 2.30–2.38 (``sysdeps/x86/
#: cpu-tunables.c``, ``CHECK_GLIBC_IFUNC_CPU_OFF`` plus the XSAVEC special case; ``XSAVE`` since
#: 2.34).  Names are case-sensitive; anything else (``+NAME``, ``Prefer_No_AVX512``, a typo) does
#: not change a usable bit.
_SET_HWCAPS_OFF = frozenset({
    "AVX", "CX8", "FMA", "HTT", "IBT", "RTM", "AVX2", "BMI1", "BMI2", "CMOV", "ERMS", "FMA4", "SSE2",
    "LZCNT", "MOVBE", "SHSTK", "SSSE3", "XSAVE", "POPCNT", "SSE4_1", "SSE4_2", "XSAVEC", "AVX512F",
    "OSXSAVE", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512ER", "AVX512PF", "AVX512VL",
})

#: What ``init_cpu_features`` unsets after the tunable when OSXSAVE is not usable, or neither
#: XSAVE nor XSAVEC is (only the features listed in :data:`CPUINFO_FLAG`).
_NEED_XSAVE = frozenset({"AVX", "AVX2", "FMA", "F16C", "AVX512F", "AVX512CD", "AVX512ER",
                         "AVX512PF", "AVX512VL", "AVX512DQ", "AVX512BW"})

#: AT_HWCAP bits glibc sets on x86-64 (``sysdeps/x86/dl-hwcap.h``), by legacy subdirectory name.
HWCAP_BITS = {"x86_64": 1 << 1, "avx512_1": 1 << 2}
#: ``HWCAP_IMPORTANT`` on x86-64: the default of ``glibc.cpu.hwcap_mask`` (``elf/dl-tunables.list``).
HWCAP_IMPORTANT = HWCAP_BITS["x86_64"] | HWCAP_BITS["avx512_1"]


def usable_features(cpu_flags: Iterable[str]) -> frozenset[str]:
    """The glibc ``cpu_features`` names usable on a CPU with these ``/proc/cpuinfo`` flags.

    :param cpu_flags: the ``flags`` field of ``/proc/cpuinfo``, split on spaces.
    :returns: names from :data:`CPUINFO_FLAG` (``"AVX512F"``, ``"LZCNT"``, …).
    """
    have = set(cpu_flags)
    return frozenset(name for name, flag in CPUINFO_FLAG.items() if flag in have)


def strtoul(text: str) -> int:
    """``_dl_strtoul`` (``elf/dl-misc.c``) as ``tunable_initialize`` calls it (no end pointer):
    leading blanks, a sign, ``0x`` hex, ``0`` octal or decimal, stopping at the first other
    character; ``0`` when there is no digit, 2**64-1 on overflow; a ``-`` negates modulo 2**64.
    """
    i, n = 0, len(text)
    while i < n and text[i] in " \t":
        i += 1
    negative = i < n and text[i] == "-"
    if i < n and text[i] in "+-":
        i += 1
    if i >= n or not "0" <= text[i] <= "9":
        return 0
    base = 10
    if text[i] == "0":
        if i + 1 < n and text[i + 1] in "xX":
            base, i = 16, i + 2
        else:
            base = 8
    digits = "0123456789abcdef"[:base]
    value = 0
    while i < n and text[i].lower() in digits:
        d = digits.index(text[i].lower())
        if value >= (2 ** 64 - 1 - d) // base:
            return 2 ** 64 - 1
        value = value * base + d
        i += 1
    return (-value) % 2 ** 64 if negative else value


def parse_tunables(value: str) -> dict[str, str]:
    """The ``name=value`` items of a ``GLIBC_TUNABLES`` string, as ``parse_tunables`` reads it.

    glibc 2.36 ``elf/dl-tunables.c``: items are separated by ``:``; a name ends at the first
    ``=`` (an item without one is skipped), its value at the next ``:`` (so it may hold ``=``
    and ``,``).  When a name repeats the last value wins (``tunable_initialize`` overwrites).
    Unknown names are returned too; glibc ignores them.

    :returns: name → value, e.g. ``{"glibc.cpu.hwcaps": "-AVX512F,-AVX2"}``.
    """
    out: dict[str, str] = {}
    for item in value.split(":"):
        name, eq, val = item.partition("=")
        if eq:
            out[name] = val
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Tunables:
    """The tunables of a target environment that change a library search.

    :ivar raw: the ``GLIBC_TUNABLES`` value (``None``: unset).
    :ivar hwcaps: the ``glibc.cpu.hwcaps`` value applied (``None``: not set, or ignored).
    :ivar hwcap_mask: ``glibc.cpu.hwcap_mask`` (alias ``LD_HWCAP_MASK``) applied, ``None``:
        the default, :data:`HWCAP_IMPORTANT`.
    :ivar ignored: why the variables were not applied (``"AT_SECURE"``), else ``None``.
    """

    raw: str | None = None
    hwcaps: str | None = None
    hwcap_mask: int | None = None
    ignored: str | None = None


def read_tunables(env: Mapping[str, str], *, secure: bool = False,
                  glibc: tuple[int, int] = (2, 36)) -> Tunables:
    """The search-relevant tunables in a target environment.

    * ``GLIBC_TUNABLES`` (glibc 2.26+, :func:`parse_tunables`): ``glibc.cpu.hwcaps`` and
      ``glibc.cpu.hwcap_mask`` — ``glibc.tune.*`` before 2.29 (``elf/dl-tunables.list``,
      ``sysdeps/x86/dl-tunables.list``).  The other x86 tunables (``x86_ibt``, ``x86_shstk``,
      cache sizes and string-function thresholds) change no library search.
    * ``LD_HWCAP_MASK``, the ``env_alias`` of ``glibc.cpu.hwcap_mask``; a value in
      ``GLIBC_TUNABLES`` takes precedence whatever the order (``__tunables_init``).
    * AT_SECURE: both tunables have the default security level ``SXID_ERASE`` (neither
      ``dl-tunables.list`` gives them another), so ``parse_tunables`` and ``__tunables_init``
      neither read them nor pass them on to children; both variables are also in
      ``UNSECURE_ENVVARS`` (``sysdeps/generic/unsecvars.h``).

    :param env: the target's environment.
    :param secure: model AT_SECURE (setuid) mode.
    :param glibc: the glibc version modelled.
    :returns: a :class:`Tunables`.
    """
    raw = env.get("GLIBC_TUNABLES")
    alias = env.get("LD_HWCAP_MASK")
    if glibc < (2, 26):
        return Tunables(raw=raw)
    if secure:
        return Tunables(raw=raw, ignored="AT_SECURE" if raw is not None or alias is not None else None)
    ns = "glibc.cpu" if glibc >= (2, 29) else "glibc.tune"
    items = parse_tunables(raw) if raw is not None else {}
    mask_text = items.get(f"{ns}.hwcap_mask", alias)
    return Tunables(raw=raw, hwcaps=items.get(f"{ns}.hwcaps"),
                    hwcap_mask=None if mask_text is None else strtoul(mask_text))


def mask_features(usable: frozenset[str], hwcaps: str | None, *,
                  glibc: tuple[int, int] = (2, 36)) -> frozenset[str]:
    """Apply a ``glibc.cpu.hwcaps`` value to the usable features.

    ``TUNABLE_CALLBACK (set_hwcaps)`` (``sysdeps/x86/cpu-tunables.c``): the value is split on
    ``,``; ``-NAME`` unsets the usable bit of NAME when NAME is one of :data:`_SET_HWCAPS_OFF`
    (exact, case-sensitive); it touches no other bit — ``-AVX512F`` leaves AVX512CD/BW/DQ/VL
    usable, so the legacy ``avx512_1`` hwcap stays while ``x86-64-v4`` goes.  Then
    ``init_cpu_features`` unsets AVX, AVX2, FMA, F16C and AVX-512 when OSXSAVE is not usable
    or neither XSAVE nor XSAVEC is.

    :param usable: from :func:`usable_features`.
    :param hwcaps: the tunable's value, or ``None``.
    :param glibc: the glibc version (``-XSAVE`` exists since 2.34).
    :returns: the usable features afterwards.
    """
    if hwcaps is None:
        return usable
    names = _SET_HWCAPS_OFF if glibc >= (2, 34) else _SET_HWCAPS_OFF - {"XSAVE"}
    off = {tok[1:] for tok in hwcaps.split(",") if tok.startswith("-") and tok[1:] in names}
    out = set(usable) - off
    if "OSXSAVE" not in out or not out & {"XSAVE", "XSAVEC"}:
        out -= _NEED_XSAVE
    return frozenset(out)


def isa_levels(usable: frozenset[str]) -> list[str]:
    """The glibc-hwcaps subdirectories active for these usable features, best first.

    ``_dl_hwcaps_subdirs_active`` (``sysdeps/x86_64/dl-hwcaps-subdirs.c``) over
    ``get_isa_level`` (``sysdeps/x86/get-isa-level.h``; see :data:`_LEVELS`).

    :returns: e.g. ``["x86-64-v3", "x86-64-v2"]``; ``[]`` below x86-64-v2.
    """
    out: list[str] = []
    for name, need in _LEVELS:
        if not need <= usable:
            break
        if name:
            out.append(name)
    return out[::-1]


def legacy_caps(vendor: str, usable: frozenset[str],
                hwcap_mask: int | None = None) -> tuple[str, list[str]]:
    """``$PLATFORM`` and the legacy AT_HWCAP subdirectory names glibc 2.26–2.36 uses on x86-64.

    ``init_cpu_features`` (``sysdeps/x86/cpu-features.c``), after the ``glibc.cpu.hwcaps``
    tunable: ``dl_hwcap`` is ``HWCAP_X86_64``; on Intel (``arch_kind_intel``) only, usable
    AVX512CD with AVX512ER and AVX512PF makes the platform ``xeon_phi``; AVX512CD without ER but
    with AVX512BW, AVX512DQ and AVX512VL adds ``HWCAP_X86_AVX512_1``; otherwise usable AVX2, FMA,
    BMI1, BMI2, LZCNT, MOVBE and POPCNT make it ``haswell``. Other vendors keep AT_PLATFORM
    (``x86_64``).  ``_dl_important_hwcaps`` (``elf/dl-hwcaps.c``) keeps the names whose bit is in
    ``dl_hwcap & glibc.cpu.hwcap_mask`` (default :data:`HWCAP_IMPORTANT`); the platform is kept
    whatever the mask.

    :param vendor: ``/proc/cpuinfo``'s ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``, …).
    :param usable: glibc feature names after :func:`mask_features`.
    :param hwcap_mask: ``glibc.cpu.hwcap_mask``, ``None`` for the default.
    :returns: ``(platform, names)``, the names from the highest bit down (``avx512_1``, ``x86_64``).
    """
    platform = "x86_64"
    names = ["x86_64"]
    if vendor == "GenuineIntel":
        xeon_phi = False
        if "AVX512CD" in usable:
            if "AVX512ER" in usable:
                xeon_phi = "AVX512PF" in usable
            elif {"AVX512BW", "AVX512DQ", "AVX512VL"} <= usable:
                names.insert(0, "avx512_1")
        if xeon_phi:
            platform = "xeon_phi"
        elif {"AVX2", "FMA", "BMI1", "BMI2", "LZCNT", "MOVBE", "POPCNT"} <= usable:
            platform = "haswell"
    mask = HWCAP_IMPORTANT if hwcap_mask is None else hwcap_mask
    return platform, [n for n in names if HWCAP_BITS[n] & mask]
