"""Adapt a decoder LLM with MAGNET (or a baseline / ablation) using LoRA.

    python -m magnet_model.training.train --output adapters/magnet                       # MAGNET
    python -m magnet_model.training.train --output adapters/llm2vec --attention bidirectional \\
        --objectives mntp,sscl --stage2-objectives sscl                          # LLM2Vec-style

    torchrun --nproc-per-node 4 -m magnet_model.training.train --output adapters/magnet \\
        --device cuda --batch-size 8                       # 4 ranks: global batch 32

Stage 1 trains MNTP + MSG (teaches the model to use the future context), stage 2 adds SSCL.
Each optimizer step: x_m -> MNTP + MSG in one forward (backward), then the sentence pairs ->
SSCL in a second forward with attention dropout (backward); gradients add up.

Output: a standard PEFT adapter directory + magnet_config.json (adapter_meta) + train_log.jsonl
(one line per step: the losses), and checkpoints/step-N/ for --resume. Under torchrun or
`accelerate launch` each rank trains its slice of every global micro-batch and rank 0 alone
writes (distributed.py).

The parts, one idea a file: config.py (TrainConfig, its checks, the command line), corpus.py
(the texts and the Sampler), run.py (TrainingRun), loop.py (the model, one step, the run),
checkpoints.py (save and resume), distributed.py (the ranks).
"""

from __future__ import annotations

import atexit
import os
import sys

from ..errors import MagnetError
from ..settings import ModelSpec

# The trainer's parts, one idea a file (this module keeps the names importable from here):
from .checkpoints import (  # noqa: F401
    checkpoint_dir,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
    trim_log,
)
from .config import (  # noqa: F401
    FIRST_RECIPE,
    LOG_FILE,
    LORA_TARGETS,
    MIN_TOKENS,
    OBJECTIVES,
    RESUME_KEYS,
    SPAN_UNITS,
    SSCL_POSITIVES,
    STATE_FILE,
    TOKEN_OBJECTIVES,
    TrainConfig,
    build_parser,
    config_from_args,
    recorded_config,
    unit_shares,
    validate,
)
from .corpus import (  # noqa: F401
    Draws,
    Example,
    Sampler,
    _read_rows,
    chunk,
    default_rows,
    load_corpus,
    pack_rows,
    units_in,
)
from .distributed import launched_world
from .loop import (  # noqa: F401
    TrainingRun,
    build_run,
    init_from_adapter,
    lr_lambda,
    make_scheduler,
    micro_step,
    save_output,
    sentence_pairs,
    train,
    train_step,
    wrap_lora,
)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        validate(cfg, launched_world())
        spec = ModelSpec.from_args(args)
        out = train(cfg, spec)
    except MagnetError as e:  # the launchers set RANK: say which rank it was
        rank = f"rank {os.environ['RANK']}: " if "RANK" in os.environ else ""
        print(f"error: {rank}{e}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(f"adapter written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    code = main()
    if "RANK" in os.environ:
        # A launched rank has closed its process group and written what it writes; after the
        # exit handlers it ends here, skipping the interpreter's own teardown, where a gloo or
        # store thread still joinable at exit aborts the process now and then ("terminate
        # called without an active exception", SIGABRT after the adapter was written) and the
        # launcher then reports a finished run as failed.
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
