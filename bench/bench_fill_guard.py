"""The decoding rules of MAGNET fills, chosen by measurement (issue 35, point 2).

    python bench/bench_fill_guard.py --adapter adapters/magnet [--fills 80]
        [--suites sentence,phrase,word] [--domains wikipedia,news] [--settings 0,3,4,3-plain]

The evaluator's unit suites (the same held-out cases, seeded), each filled greedily by one
adapter under every setting: 0 (off, the model's own output), n (no n-gram of tokens twice
in a fill, a token that continues a word never banned: inference/guard.py), n-plain (the same
ban on every token, transformers' no_repeat_ngram_size); a "+close" suffix (0+close, 3+close)
adds the sentence rule (a blank between sentences ends only where its fill ends a sentence:
inference/infill.py), which is off in every setting without it. Per suite and setting: the
share of fills with a repeated word 3-gram, exactly one complete sentence (sentence suite) or
no sentence end (phrase, word), stopped before the cap, and the length against the truth,
each share with its 95% interval; against the setting `--against` names (default 0: all
off), each difference on the same fills with its interval and McNemar p. Span PPL is the same
under every setting by construction (scoring reads the true span; the rules only change what
is decoded), so it is not re-measured.
Writes bench/results/fill_guard.json (the table, every fill's flags and text) and prints the
table (Markdown).
"""

from __future__ import annotations

import time

from common import Row
from unit_fills import (
    CAP,
    finish,
    heldout_sources,
    magnet_engine,
    md_head,
    md_row,
    rule_fills,
    share_cells,
    share_row,
    suite_cases,
    unit_parser,
)

from magnet_model.evaluation.suites import SUITES


def setting(name: str) -> tuple[int, bool, bool]:
    """'3' -> (3, word-aware, no sentence rule), '3-plain' -> (3, every token, no rule),
    '3+close' -> (3, word-aware, sentence rule), '0' -> all off."""
    name, _, close = name.partition("+")
    n, _, plain = name.partition("-")
    return int(n), plain == "plain", close == "close"


def fill_all(engine, adapter: str, cases: list, name: str) -> list:
    n, plain, close = setting(name)
    runner = engine.runner
    saved = runner._continuations
    if plain:  # the ban on every token: no token counts as a word's continuation
        runner._continuations = [False] * len(engine.tokenizer)
    try:
        texts = [c.blanked("[blank]") for c in cases]  # many a batch: compare_infill_many
        return engine.infill_many(texts, adapter, CAP, {"no_repeat": n, "close_sentences": close})
    finally:
        runner._continuations = saved


def main(argv: list[str] | None = None) -> int:
    p = unit_parser(__doc__, 80, ",".join(SUITES), "fill_guard", adapter_required=True)
    p.add_argument("--settings", default="0,3,4,3-plain")
    p.add_argument("--against", default="0", help="the setting the others are paired with")
    args = p.parse_args(argv)

    engine = magnet_engine(args.adapter, args.threads)
    sources = heldout_sources()
    names = [s.strip() for s in args.settings.split(",") if s.strip()]
    report: dict = {"adapter": args.adapter, "fills": args.fills, "settings": names, "suites": {}}
    rows: list[Row] = []
    lines = md_head("suite", "setting", *_HEAD)
    t0 = time.perf_counter()
    for domain in args.domains.split(","):
        for key, kind, cases in suite_cases(args, engine, sources, domain):
            truth = [c.n_tokens for c in cases]
            per: dict = {}
            for name in names:
                per[name] = rule_fills(engine, kind, fill_all(engine, "magnet", cases, name), truth)
            off = per.get(args.against)
            for name, r in per.items():
                shape = "one_sentence" if kind == "sentence" else "no_sentence_end"
                ref = off if name != args.against else None
                cells = share_cells(r, ("repeat_3gram", shape, "stopped"), ref, "paired_vs_off")
                lines.append(
                    md_row(f"{key} ({len(cases)})", name, *cells, f"{r['length_ratio']:.2f}")
                )
                if ref is not None:
                    measure = f"{key}: fills with a repeated 3-gram, {name} vs {args.against}"
                    what = f"{args.against}, same fills"
                    rows.append(share_row(measure, r, off, "repeat_3gram", what))
            report["suites"][key] = per
    finish(args, engine, rows, report, lines, t0)
    return 0


_HEAD = ("repeated 3-gram", "one sentence / no sentence end", "stopped", "length / truth")


if __name__ == "__main__":
    raise SystemExit(main())
