"""A rough speed check of the engine: `python -m magnet_model.evaluation.speed` (one run, not a
benchmark).

Prints infill and continuation tokens/s and embedding sentences/s on built-in data."""

from __future__ import annotations

import time

import torch

from ..inference.engine import Engine
from ..settings import ModelSpec


def speed_check(engine: Engine, adapter: str | None, sentences: int = 256) -> dict[str, float]:
    """Infill and continuation tokens/s, embedding sentences/s on built-in data (rough: one run).

    Infill: a ~256-token Wikipedia context, one blank filled with a fixed 32-token span.
    """
    from ..data import load_sts_b, wikipedia_paragraphs

    words = " ".join(wikipedia_paragraphs("heldout")[:3]).split()
    context = " ".join(words[:100]) + " [blank] " + " ".join(words[100:200])
    engine.infill(context, adapter=adapter, fixed_lengths=4)  # warm-up
    r = engine.infill(context, adapter=adapter, fixed_lengths=32)
    c = engine.generate(" ".join(words[:20]), adapter=adapter, max_new_tokens=64)
    pairs = load_sts_b("test")
    texts = list(dict.fromkeys(t for p in pairs for t in (p.sentence1, p.sentence2)))[:sentences]
    t0 = time.perf_counter()
    engine.embed_sentences(texts, adapter=adapter, batch_size=32)
    embed_s = time.perf_counter() - t0
    return {
        "infill_context_tokens": r.context_tokens,
        "infill_encode_s": r.encode_seconds,
        "infill_tokens_per_s": r.tokens_per_second,
        "continue_tokens_per_s": c.tokens_per_second,
        "embed_sentences_per_s": len(texts) / embed_s,
    }


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    from ..settings import add_model_args

    parser = argparse.ArgumentParser(description="Rough speed check of the inference engine.")
    add_model_args(parser)
    parser.add_argument("--adapter", default=None, help="adapter to time (default: base)")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.from_spec(ModelSpec.from_args(args))
    report = speed_check(engine, args.adapter, args.sentences)
    report.update(device=str(engine.runner.device), dtype=str(engine.runner.dtype))
    report["threads"] = torch.get_num_threads()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
