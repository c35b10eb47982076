"""ZeroGPU: each comparison (all its systems) is one `spaces.GPU` call; elsewhere a plain call.

On ZeroGPU hardware (a Gradio-SDK Space; the Space sets SPACES_ZERO_GPU) a GPU is attached only
while a decorated function runs, in a worker process forked from the server. So:
- the server keeps the model in CPU memory, in the dtype it will have on the GPU
  (`server_spec`), and never touches CUDA itself;
- a decorated call moves the model to the GPU first (`Engine.to_cuda_if_visible`); it stays
  there for later calls that reuse the same worker;
- arguments and results cross into and out of the worker pickled: the decorated functions are
  bound methods of MagnetApp (the fork carries the engine and the store), whose arguments are
  texts and plain dicts;
- each call asks for a duration that fits its work (`*_seconds` below): the shorter the
  request, the sooner ZeroGPU schedules it.
Where `spaces` is not installed, or installed but not on ZeroGPU (spaces.GPU then returns the
function unchanged), nothing of this changes what runs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TypeVar

from magnet_model.settings import ModelSpec

F = TypeVar("F", bound=Callable)

ZERO_GPU_ENV = "SPACES_ZERO_GPU"  # set by Hugging Face on ZeroGPU hardware

# Allowances (seconds, upper bounds rather than estimates) of one decorated call: starting the
# worker and moving the model to the GPU, then one decoding step of the batch that holds every
# system's rows, and one passage embedded by one encoder. A call that outruns its allowance
# is stopped by ZeroGPU, so they err on the long side; MAX_SECONDS caps a request.
START_SECONDS = 20
STEP_SECONDS = 0.25
PASSAGE_SECONDS = 0.05
MAX_SECONDS = 300


def zero_gpu(environ: dict[str, str] | None = None) -> bool:
    """Whether this process runs on ZeroGPU hardware (the same test as the spaces package)."""
    value = (os.environ if environ is None else environ).get(ZERO_GPU_ENV, "")
    return value.lower() in ("1", "t", "true")


def has_spaces() -> bool:
    try:
        import spaces  # noqa: F401
    except ImportError:
        return False
    return True


def gpu(fn: F, duration: Callable[..., int]) -> F:
    """`fn` as one ZeroGPU call asking for `duration(*args, **kwargs)` seconds where the
    `spaces` package is importable; `fn` itself elsewhere."""
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(fn, duration=duration)


def server_spec(spec: ModelSpec, environ: dict[str, str] | None = None) -> ModelSpec:
    """On ZeroGPU the server loads the model on the CPU ('auto' device) in bfloat16 ('auto'
    dtype), the dtype it gets on the GPU; a device or dtype set by the user is kept."""
    if not zero_gpu(environ):
        return spec
    return dataclasses.replace(
        spec,
        device="cpu" if spec.device == "auto" else spec.device,
        dtype="bfloat16" if spec.dtype == "auto" else spec.dtype,
    )


def _seconds(work: float) -> int:
    return int(min(MAX_SECONDS, START_SECONDS + work))


def infill_seconds(blanks: int, max_span_tokens: int) -> int:
    """MAGNET fills blank after blank, the prompted baselines answer every blank in turn, all
    as rows of one batch: about blanks x (span + its end token) steps."""
    return _seconds(STEP_SECONDS * max(1, blanks) * (max_span_tokens + 1))


def continue_seconds(max_new_tokens: int) -> int:
    """The three continuations grow as rows of one batch: one step per new token."""
    return _seconds(STEP_SECONDS * max_new_tokens)


def search_seconds(passages_to_embed: int) -> int:
    """Passages not in the cache yet (summed over the encoders), then the query."""
    return _seconds(PASSAGE_SECONDS * passages_to_embed)
