"""The MAGNET model library (torch + transformers + peft; no Gradio, no SQL).

Three wings over a shared ground floor; inference never imports training, training never
imports inference, and the ground floor imports neither (tests/test_layout.py):

    inference/   engine.py (the facade: infill, compare_*, continue_text, generate, embed_*),
                 runner.py (model + lock + adapters + forward), infill.py (MAGNET span lanes),
                 prompted.py (zero/N-shot baselines), generation.py, embedding.py,
                 batching.py, static_decode.py, multi_lora.py (peft internals), search.py,
                 vector_index.py, sampling.py, blanks.py, guard.py (the fills' loop guard)
    training/    views.py (batches) -> objectives.py (losses) -> train.py (the trainer CLI),
                 watch.py (STS-B dev at checkpoints), sweep.py, card.py, publish.py
    evaluation/  evaluate.py (the evaluator CLI; config.py, runs.py, infill_task.py, suites.py),
                 report.py (targets, results.md), stats.py (intervals, paired tests),
                 baselines.py (prompted baselines computed once), scoring.py, probe.py,
                 retrieval.py, speed.py, calibrate.py (the <span_end> calibration)
    (ground)     tokens, layout, masks, pooling, loading, assets, settings, errors, data,
                 metrics, systems (the one table of systems), adapter_meta, span_end, ...

The public API is re-exported here, `from magnet_model import Engine`; it is imported on first
use, so `import magnet_model.settings` stays light (no torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import (
        ConfigError,
        EmptyInputError,
        InputError,
        InputTooLongError,
        MagnetError,
        ModelLoadError,
        NoBlankError,
        TooManyBlanksError,
        UnknownAdapterError,
    )
    from .inference.blanks import FilledSpan, InfillResult
    from .inference.engine import Continuation, Engine, EngineConfig, Sampling, TokenVectors
    from .settings import ModelSpec
    from .systems import SYSTEMS, System

# name -> module it lives in (relative to this package)
_PUBLIC = {
    **dict.fromkeys(
        (
            "ConfigError",
            "EmptyInputError",
            "InputError",
            "InputTooLongError",
            "MagnetError",
            "ModelLoadError",
            "NoBlankError",
            "TooManyBlanksError",
            "UnknownAdapterError",
        ),
        ".errors",
    ),
    **dict.fromkeys(("FilledSpan", "InfillResult"), ".inference.blanks"),
    **dict.fromkeys(
        ("Continuation", "Engine", "EngineConfig", "Sampling", "TokenVectors"),
        ".inference.engine",
    ),
    "ModelSpec": ".settings",
    "SYSTEMS": ".systems",
    "System": ".systems",
}

__all__ = [
    "ConfigError",
    "Continuation",
    "EmptyInputError",
    "Engine",
    "EngineConfig",
    "FilledSpan",
    "InfillResult",
    "InputError",
    "InputTooLongError",
    "MagnetError",
    "ModelLoadError",
    "ModelSpec",
    "NoBlankError",
    "SYSTEMS",
    "Sampling",
    "System",
    "TokenVectors",
    "TooManyBlanksError",
    "UnknownAdapterError",
]


assert set(__all__) == set(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
