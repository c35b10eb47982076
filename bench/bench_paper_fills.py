"""MAGNET's fills of the Paper protocol's items: how many are one complete sentence.

    python bench/bench_paper_fills.py [--n 100] [--adapters magnet=adapters/magnet,...]

The Admin tab's "Paper protocol" removes one middle sentence from each of 100 held-out
passages (app/studies.py, sentence_items). This fills every item with each hybrid adapter
given (greedy, the study's cap of a sentence, SENTENCE_SPAN_TOKENS) and counts the fills that
are exactly one complete sentence (evaluation/fills.py), how they ended, and prints 10 of
them. Writes bench/results/paper_fills.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import torch
from common import RESULTS

from app.studies import sentence_items
from magnet_model.evaluation.fills import is_one_sentence, repeats_ngram
from magnet_model.inference.engine import Engine
from magnet_model.passages import SENTENCE_SPAN_TOKENS
from magnet_model.settings import ModelSpec, add_model_args


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100, help="items (the protocol's 100)")
    p.add_argument("--show", type=int, default=10, help="fills printed per adapter")
    p.add_argument("--out", default=str(RESULTS / "paper_fills.json"))
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    add_model_args(p)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.from_spec(ModelSpec.from_args(args))
    items = sentence_items(args.n, 0)
    tokens = [len(engine.runner.encode(it.text.replace("[blank]", it.original[0]))) for it in items]
    report = {
        "command": " ".join(["python", "bench/bench_paper_fills.py", *(argv or sys.argv[1:])]),
        "items": len(items),
        "passage_tokens": {"max": max(tokens), "mean": sum(tokens) / len(tokens)},
        "adapters": {},
    }
    for name in engine.runner.adapter_names:
        meta = engine.runner.meta(name)
        if meta is None or meta.attention != "hybrid" or "msg" not in meta.objectives:
            continue
        t0 = time.perf_counter()
        made = engine.infill_many([it.text for it in items], name, SENTENCE_SPAN_TOKENS)
        fills = [r.spans[0] for r in made]  # many items a batch (Engine.compare_infill_many)
        texts = [f.text.strip() for f in fills]
        one = sum(map(is_one_sentence, texts))
        report["adapters"][name] = {
            "one_sentence": one,
            "repeated_3gram": sum(map(repeats_ngram, texts)),
            "end_reasons": dict(Counter(f.end_reason for f in fills)),
            "seconds": round(time.perf_counter() - t0, 1),
            "examples": [
                {"truth": it.original[0], "fill": t} for it, t in zip(items, texts, strict=True)
            ][: args.show],
        }
        print(f"{name}: {one} of {len(items)} fills are one complete sentence", flush=True)
        for ex in report["adapters"][name]["examples"]:
            print(f"   truth «{ex['truth']}»\n   fill  «{ex['fill']}»")
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
