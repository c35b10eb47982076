"""Where a MAGNET fill should stop: the model's own <span_end> against rules that pick the stop
along the decoded path (issue 35: phrase and word blanks run on, 2-8x the truth).

    python bench/bench_stop_rules.py --adapter adapters/magnet [--fills 40]
        [--suites sentence,phrase,word] [--domains wikipedia,news] [--scorer magnet]

Each case is filled once, greedily, as the app fills it (the loop guard and the sentence rule
on, a cap of CAP tokens); the decoder records at every step the log-probability of the token
it picked and of <span_end> there (FilledSpan.trace). Every word boundary of the fill where
the end was allowed is a candidate stop (the fill cut there), and each rule keeps one:
- `model`: where the model ended it (what the app does today);
- `likeliest`: the stop with the highest probability of the span as a whole, the tokens
  before it and <span_end> after them (the most probable of the ended prefixes);
- `join-0`: likeliest, plus the log-probability of the first RIGHT_TOKENS tokens after the
  blank read causally after the text before it and the cut fill (`--scorer`: the adapter
  read causally, or the base model): the whole completed text, fill, end and what follows;
- `join`: join-0 plus stops.LENGTH_BONUS per token of the fill (the decoder's rule);
- `join-free`: the fill's tokens and what follows, without the end's probability;
- `join-mean`: join-0's sum divided by the tokens it reads (the fill's, the end, RIGHT_TOKENS):
  the joined text's mean log-probability per token, which does not favour fewer tokens;
- `join+B` (one per `--length-bonus B`): join-0 plus B per token of the fill, a length prior
  against join's pull toward short fills (each token costs log-probability); B is chosen on
  `--split dev` (passages of the training split, never the held-out ones) and only then read
  on the held-out cases;
- `decoder`: the fill the app makes (`fill={"stop": "join"}`, inference/stops.py: `join` computed
  inside the decoder, on the text as the user typed it): a check that the two agree
  (`--no-decoder` skips it, halving the time).
`--split dev` takes the cases from the training split's passages (Wikipedia training
paragraphs, the CoNLL-2003 training stories) instead of the evaluator's held-out ones.
Per suite and rule: length against the truth, fills within 0.5-2x it, the shape (one complete
sentence / no sentence end inside), repeated 3-grams, each paired against `model`. Writes
bench/results/stop_rules.json with the table and every fill.
"""

from __future__ import annotations

import time

from common import Row
from unit_fills import (
    CAP,
    cut,
    finish,
    magnet_engine,
    md_head,
    md_row,
    rule_fills,
    scored_stops,
    seconds_row,
    share_cells,
    share_row,
    split_sources,
    suite_cases,
    unit_parser,
)

from magnet_model.inference.stops import LENGTH_BONUS, RIGHT_TOKENS

RULES = ("model", "likeliest", "join-0", "join", "join-free", "join-mean", "decoder")


def main(argv: list[str] | None = None) -> int:
    p = unit_parser(
        __doc__, 40, "sentence,phrase,word", "stop_rules", split=True, bonus_rule="join"
    )
    p.add_argument("--scorer", default="magnet", choices=("magnet", "base"))
    p.add_argument("--no-decoder", action="store_true", help="skip the decoder's own fill")
    args = p.parse_args(argv)
    bonuses = args.length_bonus
    rules = [r for r in RULES if r != "decoder"] + [f"join+{b:g}" for b in bonuses]
    if not args.no_decoder:
        rules.append("decoder")

    engine = magnet_engine(args.adapter, args.threads)
    scorer = "magnet" if args.scorer == "magnet" else None
    sources = split_sources(args.split)
    report = {"adapter": args.adapter, "fills": args.fills, "split": args.split, "suites": {}}
    report["rules"] = rules
    lines = md_head("suite", "rule", "length / truth", "within 0.5-2x", "shape", "repeated 3-gram")
    rows: list[Row] = []
    t0 = time.perf_counter()
    for domain in args.domains.split(","):
        for key, kind, cases in suite_cases(args, engine, sources, domain):
            truth = [c.n_tokens for c in cases]
            kept: dict[str, list] = {r: [] for r in rules}
            seconds = {"model": 0.0, "decoder": 0.0}
            for c in cases:
                text = c.blanked("[blank]")
                r = engine.infill(
                    text, adapter="magnet", max_span_tokens=CAP, fill={"stop": "model"}
                )
                span = r.spans[0]
                stops = scored_stops(engine, scorer, c, r)
                ts = [t for t, _, _, _ in stops]
                score = {
                    "model": [1.0 if t == len(span.token_ids) else 0.0 for t in ts],
                    "likeliest": [a + e for _, a, e, _ in stops],
                    "join-0": [a + e + q for _, a, e, q in stops],
                    "join-free": [a + q for _, a, _, q in stops],
                    "join-mean": [(a + e + q) / (t + 1 + RIGHT_TOKENS) for t, a, e, q in stops],
                }
                for b in (LENGTH_BONUS, *bonuses):
                    join = zip(score["join-0"], ts, strict=True)
                    score[f"join+{b:g}"] = [j + b * t for j, t in join]
                score["join"] = score[f"join+{LENGTH_BONUS:g}"]
                for rule in rules:
                    if rule != "decoder":
                        best = max(range(len(ts)), key=score[rule].__getitem__)
                        kept[rule].append(cut(engine, r, ts[best]))
                seconds["model"] += r.seconds
                if not args.no_decoder:
                    made = engine.infill(
                        text, adapter="magnet", max_span_tokens=CAP, fill={"stop": "join"}
                    )
                    kept["decoder"].append(made)
                    seconds["decoder"] += made.seconds
            shape = "one_sentence" if kind == "sentence" else "no_sentence_end"
            per = {}
            for rule in rules:
                per[rule] = rule_fills(engine, kind, kept[rule], truth)
            report["suites"][key] = {"truths": [c.span_text.strip() for c in cases], **per}
            report["suites"][key]["seconds"] = seconds
            if not args.no_decoder:
                pairs = zip(per["join"]["fills"], per["decoder"]["fills"], strict=True)
                same = sum(a == b for a, b in pairs)
                report["suites"][key]["decoder_equals_join"] = same
                what = "the model's own end, same cases, same process"
                measure = f"{key}: seconds per fill, decoder (join) vs model"
                rows.append(seconds_row(measure, seconds, "decoder", "model", len(cases), what))
                print(f"{key}: the decoder's fill is the offline join's in {same} of {len(cases)}")
            off = per["model"]
            for rule, r in per.items():
                ref = off if rule != "model" else None
                cells = share_cells(r, ("within_2x", shape, "repeat_3gram"), ref, "paired_vs_model")
                lines.append(
                    md_row(f"{key} ({len(cases)})", rule, f"{r['length_ratio']:.2f}", *cells)
                )
                if ref is not None:
                    what = "the model's own end, same fills"
                    rows.append(share_row(f"{key}: {shape}, {rule} vs model", r, off, shape, what))
            print("\n".join(lines[-len(per) :]), flush=True)
    finish(args, engine, rows, report, lines, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
