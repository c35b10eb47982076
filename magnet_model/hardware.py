"""What machine a number was measured on: every report (training, evaluation, bench) says it."""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")  # Linux's; elsewhere absent (tests point it at a fake one)


def cpu_model() -> str:
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo; empty where there is none)."""
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    """AVX-512 BF16 or AMX: bfloat16 products in hardware, not emulated in float32 (the bench
    measures bfloat16 only there; the CPU default does not follow it: loading.cpu_auto_dtype)."""
    flags = cpu_flags() if flags is None else flags
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def has_amx(flags: frozenset[str] | None = None) -> bool:
    """Intel AMX tile products (Sapphire Rapids and later Xeons)."""
    flags = cpu_flags() if flags is None else flags
    return bool(flags & {"amx_tile", "amx_bf16", "amx_int8"})


def cpu_features(flags: frozenset[str] | None = None) -> str:
    """The vector features that decide which dtype is fast here (docs/performance.md): the
    widest of AVX2 / AVX-512, and bfloat16 / AMX where the CPU has them."""
    flags = cpu_flags() if flags is None else flags
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
    return " ".join(f for f in wanted if f in flags) or "none of avx2, avx512f"


def describe(device=None, dtype=None) -> dict:
    """CPU, cores, torch threads, device (and GPU name), dtype, versions."""
    import torch

    dev = torch.device(device) if device is not None else torch.device("cpu")
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else None
    return {
        "cpu": cpu_model(),
        "cpu_features": cpu_features(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(dev),
        "gpu": gpu,
        "dtype": str(dtype).replace("torch.", "") if dtype is not None else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def one_line(info: dict) -> str:
    where = info["gpu"] or f"{info['cpu']}, {info['cores']} cores"
    return f"{where} ({info['device']}, {info['torch_threads']} torch threads)"
