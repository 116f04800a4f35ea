"""Platform and CPU probes against fake roots and this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envlock.probes.system import parse_cpuinfo, probe_cpu, probe_platform
from envlock.probes.world import World

SKYLAKE = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni
bugs\t\t: spectre_v1

processor\t: 1
vendor_id\t: GenuineIntel
flags\t\t: fpu
"""

GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
"""


def test_parse_skylake() -> None:
    got = parse_cpuinfo(SKYLAKE)
    assert got["vendor"] == "GenuineIntel"
    assert got["model"] == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
    assert got["flags"] == ("avx", "avx2", "avx512_vnni", "avx512bw", "avx512cd", "avx512dq", "avx512f",
                            "avx512vl", "f16c", "fma", "sse4_2")


def test_parse_graviton3() -> None:
    got = parse_cpuinfo(GRAVITON)
    assert got["vendor"] == "0x41"
    assert got["flags"] == ("asimd", "asimddp", "asimdhp", "bf16", "i8mm", "neon", "sve")


def test_parse_junk() -> None:
    assert parse_cpuinfo("garbage\n\x00\n") == {"vendor": None, "model": None, "flags": ()}


def test_fake_root(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(SKYLAKE)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       394607516 kB\nMemFree: 1 kB\n")
    (tmp_path / "etc" / "os-release").write_text(
        'NAME="Rocky Linux"\nVERSION_ID="9.3"\nID="rocky"\nPRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"\n')
    cpu = probe_cpu(World(root=tmp_path))
    assert cpu.memory == 394607516 * 1024
    assert "avx512f" in cpu.flags
    plat = probe_platform(World(root=tmp_path))
    assert (plat.os_id, plat.os_version, plat.os_name) == ("rocky", "9.3", "Rocky Linux 9.3 (Blue Onyx)")


def test_missing_files_recorded(tmp_path: Path) -> None:
    assert probe_cpu(World(root=tmp_path)).status == "error"
    plat = probe_platform(World(root=tmp_path))
    assert plat.status == "error" and plat.error == "no /etc/os-release"


def test_this_machine_glibc_matches_ldd() -> None:
    out = subprocess.run(["ldd", "--version"], capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0]  # "ldd (Debian GLIBC 2.36-9+deb12u9) 2.36"
    assert probe_platform(World(root="/")).glibc == first.split()[-1]


def test_this_machine_cpu() -> None:
    cpu = probe_cpu(World(root="/"))
    assert cpu.logical_cores == os.cpu_count()
    flags = set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].splitlines()[0].split())
    if "avx2" in flags:
        assert "avx2" in cpu.flags
    else:
        pytest.skip("no avx2 here")
