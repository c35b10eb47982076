"""Where the process's memory goes: RSS, peak RSS, and whether weights are one copy.

The served base model is loaded from the cached safetensors file, which transformers maps into
memory: the weights stay file-backed pages (one copy, shared with the page cache and with any
other process serving the same file) instead of anonymous memory. `file_backed_bytes` checks
that; `release_free_memory` hands memory freed by Python back to the operating system (glibc
keeps large freed blocks in its heap otherwise, and the RSS never comes down).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import resource
import sys
from pathlib import Path


def _status() -> dict[str, int]:
    """/proc/self/status sizes in bytes (empty where there is no /proc)."""
    out = {}
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0]) * 1024
    return out


def rss_bytes() -> dict[str, int]:
    """Current RSS, its anonymous and file-backed parts, and the peak (bytes).

    The peak is ru_maxrss (what the kernel kept as the high-water mark of this process)."""
    s = _status()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak *= 1 if sys.platform == "darwin" else 1024  # Linux reports KiB, macOS bytes
    return {
        "rss": s.get("VmRSS", 0),
        "anon": s.get("RssAnon", 0),
        "file": s.get("RssFile", 0),
        "peak": peak,
    }


def release_free_memory() -> None:
    """Collect garbage and ask glibc to return freed heap pages to the OS (no-op elsewhere)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _file_mappings(suffix: str) -> list[tuple[int, int]]:
    ranges = []
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return ranges
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[5].endswith(suffix):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((lo, hi))
    return ranges


def file_backed_bytes(tensors, suffix: str = ".safetensors") -> tuple[int, int]:
    """(bytes inside a memory-mapped *suffix file, bytes elsewhere) of distinct tensors.

    Tensors sharing storage (tied embeddings) count once. Linux only: elsewhere every byte
    counts as 'elsewhere'."""
    ranges = _file_mappings(suffix)
    seen, inside, outside = set(), 0, 0
    for t in tensors:
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        size = t.untyped_storage().nbytes()
        if any(lo <= ptr < hi for lo, hi in ranges):
            inside += size
        else:
            outside += size
    return inside, outside
