"""The two kinds of CPU this project's machines and CI have, faked for a test: what
magnet_model/hardware.py reads (/proc/cpuinfo) and what torch reports (its CPU capability, which
decides whether fbgemm runs: magnet_model/packed.py), so a rule that depends on the CPU is
checked for each kind on any machine, never only for the one the suite happens to run on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from magnet_model import hardware

# (model name, the flags that matter among a real line's, torch's capability)
CPUS = {
    "epyc-avx2": (
        "AMD EPYC",
        "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni",
        "AVX2",
    ),
    "xeon-amx": (
        "Intel(R) Xeon(R) Platinum 8481C",
        "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512bw avx512_vnni "
        "avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8",
        "AVX512",
    ),
    "no-x86-simd": ("Neoverse-N1", "fp asimd", "DEFAULT"),  # no fbgemm (an ARM server)
}


def fake_cpu(monkeypatch, tmp_path: Path, kind: str) -> None:
    """Make this process see the CPU `kind` (a key of CPUS) until the test ends."""
    name, flags, capability = CPUS[kind]
    if capability != "DEFAULT" and "fbgemm" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch is built without fbgemm (not an x86 build)")
    cpuinfo = tmp_path / f"cpuinfo-{kind}"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: {name}\nflags\t\t: {flags}\n")
    monkeypatch.setattr(hardware, "CPUINFO", cpuinfo)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
