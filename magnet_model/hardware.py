"""What machine a number was measured on: every report (training, evaluation, bench) says it."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo; empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    """AVX-512 BF16 or AMX: bfloat16 products in hardware, not emulated in float32."""
    flags = cpu_flags() if flags is None else flags
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def describe(device=None, dtype=None) -> dict:
    """CPU, cores, torch threads, device (and GPU name), dtype, versions."""
    import torch

    dev = torch.device(device) if device is not None else torch.device("cpu")
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else None
    return {
        "cpu": cpu_model(),
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
