"""Many items' fills in one batch against one item at a time, in one run: the Paper protocol.

    python bench/bench_study_batches.py [--items 24] [--k 4,8,16] [--suite-fills 24] [--quick]

The study generation (and the remake of flagged outputs, the same path) makes each item's
outputs of MAGNET, zero-shot and five-shot, sampled as a study samples with each item's own
seed. For each K in `--k` this makes the same Paper-protocol items (app/studies.py,
sentence_items) K at a time two ways, group after group so that both meet the same load of a
shared machine: one item at a time (the baseline) and the K items' lanes stepped together
(Engine.compare_infill_many, items_per_batch=K). Then the evaluator's unit suites' path
(Engine.infill_many, greedy MAGNET fills of one blank per text) the same way on `--suite-fills`
other removed-sentence texts. Rows: outputs per minute, batched against one at a time (the
ratio is the speed-up), and how many outputs differ (the same seeds: in float32 none should;
float16 weights may round differently with the batch's shape). Writes
bench/results/study_batches.json with the hardware.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from common import Row, write_report

from app.studies import INFILL_SYSTEMS, STUDY_TEMPERATURE, STUDY_TOP_P, item_seed, sentence_items
from magnet_model.decoding import FillSettings
from magnet_model.inference.engine import Engine
from magnet_model.passages import SENTENCE_SPAN_TOKENS
from magnet_model.settings import ModelSpec, add_model_args


def study_outputs(engine: Engine, items, k: int) -> tuple[dict, float]:
    """Every item's outputs, K items a batch, sampled as a study samples: {(item, system):
    tokens}, seconds."""
    base = engine.fill_settings(
        FillSettings(SENTENCE_SPAN_TOKENS, True, STUDY_TEMPERATURE, STUDY_TOP_P)
    )
    requests = [
        (it.text, list(INFILL_SYSTEMS), base.but(seed=item_seed(11, it.key))) for it in items
    ]
    t0 = time.perf_counter()
    out = {}
    for i, j, r in engine.compare_infill_many(requests, items_per_batch=k):
        if isinstance(r, Exception):
            raise r
        out[items[i].key, INFILL_SYSTEMS[j]] = [s.token_ids for s in r.spans]
    return out, time.perf_counter() - t0


def suite_fills(engine: Engine, texts, k: int) -> tuple[dict, float]:
    t0 = time.perf_counter()
    made = engine.infill_many(texts, "magnet", 64, items_per_batch=k)
    return {t: [s.token_ids for s in r.spans] for t, r in zip(texts, made, strict=True)}, (
        time.perf_counter() - t0
    )


def interleaved(make, things, k: int) -> tuple[dict, dict, float, float]:
    """make(group, 1) and make(group, k) group after group of k things, so that both meet the
    same load of a shared machine: (outputs one at a time, batched, their seconds)."""
    one, many, t_one, t_many = {}, {}, 0.0, 0.0
    for start in range(0, len(things), k):
        group = things[start : start + k]
        got, s = make(group, 1)
        one.update(got)
        t_one += s
        got, s = make(group, k)
        many.update(got)
        t_many += s
    return one, many, t_one, t_many


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=24, help="Paper-protocol items (3 outputs each)")
    p.add_argument("--k", default="8", help="items per batch to try, each against one at a time")
    p.add_argument("--suite-fills", type=int, default=24, help="unit-suite texts (0: skip)")
    p.add_argument("--out", default="study_batches")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--quick", action="store_true", help="8 items, K 8, 8 suite texts")
    add_model_args(p)
    args = p.parse_args(argv)
    if args.quick:
        args.items, args.k, args.suite_fills = 8, "8", 8
    if args.threads:
        torch.set_num_threads(args.threads)
    ks = sorted({int(x) for x in args.k.split(",")})
    engine = Engine.from_spec(ModelSpec.from_args(args))
    items = sentence_items(args.items, 0)
    study_outputs(engine, items[:1], 1)  # warm-up: prompt heads, kernels
    rows = []
    texts = [it.text for it in sentence_items(args.suite_fills, 1)] if args.suite_fills else []
    chosen = engine.items_per_batch()
    cases = [
        ("study outputs/min, {k} items a batch", "outputs/min", "one item at a time", ">= 4",
         lambda group, kk: study_outputs(engine, group, kk), items),
        ("unit-suite MAGNET fills/min, {k} texts a batch", "fills/min", "one text at a time",
         ">= 3", lambda group, kk: suite_fills(engine, group, kk), texts),
    ]  # fmt: skip
    for k in [k for k in ks if k > 1]:
        for what, unit, against, target, make, things in cases:
            if not things:
                continue
            one, many, t_one, t_many = interleaved(make, things, k)
            differ = sum(many[key] != one[key] for key in one)
            print(f"{what.format(k=k)}: {t_many:.1f} s vs {t_one:.1f} s, differ {differ}")
            rows.append(
                Row(
                    what.format(k=k),
                    60 * len(many) / t_many,
                    unit,
                    60 * len(one) / t_one,
                    against,
                    target if k == chosen else "",
                    f"{differ} of {len(one)} differ from one at a time",
                )
            )
    extra = {"items": len(items), "systems": list(INFILL_SYSTEMS), "ks": ks}
    write_report(args.out, rows, extra, engine.runner.device, engine.runner.dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
