"""What raters would meet: the share of each system's study outputs that the checks before
inviting flag (annotation_db.fills), on Paper-protocol items, with the prompted baselines'
re-ask of a chat reply against the same items and seeds without it (issue 29, point 2).

    python bench/bench_fill_checks.py [--items 40] [--systems zero-shot] [--threads N]

Items: the Paper protocol's (one held-out sentence removed per passage, spans of up to
SENTENCE_SPAN_TOKENS tokens), decoded as a study decodes them (sampled at the study's
temperature and top-p, one seed per item). The baseline run is the same call with the re-ask
of a chat reply switched off (an empty reply is still asked again, as before); the target is a
chat-reply share of at most 5% for zero-shot after the re-ask.

    python bench/bench_fill_checks.py --asks 3,6 [--out fill_checks_asks]

compares numbers of attempts instead (prompted.ASKS; the first is the reference): with the same
seeds an item's first attempts are the same whatever the number, so the runs are paired.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

from common import Row, model_spec, write_report

from annotation_db import ItemIn, OutputIn, fill_counts, flagged_outputs
from app import studies
from magnet_model.inference import prompted
from magnet_model.inference.engine import Engine
from magnet_model.passages import SENTENCE_SPAN_TOKENS


def outputs(engine: Engine, items: list[ItemIn], systems: list[str]) -> list[OutputIn]:
    out = []
    for i, it in enumerate(items):
        results = engine.compare_infill(
            it.text,
            systems,
            marker=studies.MARKER,
            max_span_tokens=SENTENCE_SPAN_TOKENS,
            do_sample=True,
            temperature=studies.STUDY_TEMPERATURE,
            top_p=studies.STUDY_TOP_P,
            seed=studies.item_seed(29, it.key),
        )
        for system, r in zip(systems, results, strict=True):
            if isinstance(r, Exception):
                raise r
            out.append(OutputIn(it.key, system, r.filled, [s.text.strip() for s in r.spans]))
        print(f"  {i + 1}/{len(items)}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--systems", default="zero-shot", help="comma-separated")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--asks", default="", help="comma-separated attempt counts to compare")
    parser.add_argument("--out", default="fill_checks")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    systems = args.systems.split(",")
    items = studies.study_items("sentence", args.items, 0, len(systems)).items
    engine = Engine.from_spec(model_spec())
    runs = {}
    if args.asks:
        settings = [(f"{n} attempts", int(n)) for n in args.asks.split(",")]
    else:
        settings = [("without the re-ask", None), ("re-asked", prompted.ASKS)]
    for name, asks in settings:
        t0 = time.perf_counter()
        print(f"{name}:", flush=True)
        if asks is None:
            with mock.patch.object(prompted.prompts, "is_chat_reply", lambda *a, **k: False):
                outs = outputs(engine, items, systems)
        else:
            with mock.patch.object(prompted, "ASKS", asks):
                outs = outputs(engine, items, systems)
        runs[name] = (fill_counts(items, outs), time.perf_counter() - t0, outs)
    rows, extra = [], {"items": len(items), "systems": systems, "runs": {}}
    first, last = settings[0][0], settings[-1][0]
    before = {c.system: c for c in runs[first][0]}
    for c in runs[last][0]:
        b = before[c.system]
        target = "<= 0.05" if c.system == "zero-shot" else ""
        rows.append(
            Row(
                f"{c.system}: chat-reply share, {last}",
                c.chat / c.n_outputs,
                "share",
                target=target,
                note=f"{c.chat} of {c.n_outputs}",
            )  # fmt: skip
        )
        rows.append(
            Row(
                f"{c.system}: chat replies, {last} vs {first} (same items and seeds)",
                c.chat,
                "outputs",
                baseline=b.chat,
                baseline_what=first,
            )  # fmt: skip
        )
    for name, (counts, seconds, outs) in runs.items():
        flagged = flagged_outputs(items, outs)
        extra["runs"][name] = {
            "seconds": round(seconds, 1),
            "counts": {c.system: {"n": c.n_outputs, **c.counts} for c in counts},
            "chat_replies": [f"{f.system}: {f.fill}" for f in flagged if "chat" in f.problems],
            "fills": [f"{o.system} {o.item_key}: {' | '.join(o.fills or [])}" for o in outs],
        }
        print(name, [c.summary() for c in counts], *extra["runs"][name]["chat_replies"], sep="\n")
    write_report(args.out, rows, extra, device=str(engine.runner.device))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
