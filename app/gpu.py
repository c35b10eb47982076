"""ZeroGPU support: `gpu` is `spaces.GPU` where the `spaces` package is importable, else a no-op.

On a ZeroGPU Space a GPU is attached only inside a decorated call, so each comparison (all
its systems) is one decorated call; everywhere else the decorator changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

try:  # pragma: no cover - only on Hugging Face Spaces
    import spaces

    def gpu(fn: F) -> F:
        return spaces.GPU(duration=120)(fn)

    HAS_SPACES = True
except ImportError:

    def gpu(fn: F) -> F:
        return fn

    HAS_SPACES = False
