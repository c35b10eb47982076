"""How long MAGNET's fills are, and whether telling the model a length fixes it (issue 35).

    python bench/bench_length_hints.py --adapter adapters/magnet [--fills 80]
        [--suites phrase,word,window] [--domains wikipedia,news]
        [--settings none,truth,4,12,24,best:4+12+24+none] [--scorer magnet]
        [--split heldout|dev]

A model trained with length hints (layout.GapRule: hint_share > 0) reads the positions left
between a <blank> and the text after it as the span's length; a blank of unknown length gets
the adapter's default gap (32 for the shipped adapter). Phrase and word blanks then run on and
random windows end early (docs/evaluation.md). This measures, on the evaluator's held-out cases
(unit suites, and random 8-32-token windows as the `infill` task cuts them; `--split dev`: the
training split's passages, to choose a setting before it is read on the held-out ones), greedy
fills under:
- `none`: no hint (the gap the adapter's rule gives a blank of unknown length: its default,
  or between sentences its sentence gap if it has one; what the app and studies do);
- `truth`: the true span's length as the hint (an oracle: the best a hint can do);
- `N`: a hint of N tokens for every blank;
- `best:A+B+...`: one fill per hint (`none` among them: the default gap), and the one kept
  after which the text that follows the blank reads best: the lowest NLL of the first
  RIGHT_TOKENS tokens after the blank, given the text before it and the fill, under the
  `--scorer` (the MAGNET adapter read causally, or the base model).
Per suite and setting: the hybrid span PPL of the true span with the text after the blank
where the setting puts it (against the base model reading the text before it only), the
written length against the truth (summed tokens, and the share of
fills within 0.5-2x the truth), the shape (one complete sentence for sentences, no sentence
end for phrases and words), fills stopped before the cap and with a repeated 3-gram, each
share with its 95% interval and paired against `none` (McNemar). Writes
bench/results/length_hints.json with the table and every fill. `--ppl-only`: the span PPL
alone, no fills (to sweep many gaps, e.g. `--suites sentence --settings
none,16,24,40,48,56,64,80,truth`).
"""

from __future__ import annotations

import time

from common import Row
from unit_fills import (
    CAP,
    WINDOW,
    finish,
    magnet_engine,
    md_head,
    md_row,
    right_logps,
    rule_fills,
    share_cells,
    share_row,
    split_sources,
    suite_cases,
    unit_parser,
)

from magnet_model.evaluation.scoring import causal_span_nll, hybrid_span_nll, span_perplexity

RIGHT_TOKENS = 8  # tokens after the blank that judge a fill in best:...


def hints_of(name: str, case) -> list:
    """A setting's hints for one case: one per fill it makes (None: the default gap)."""
    if name.startswith("best:"):
        return [h for part in name[5:].split("+") for h in hints_of(part, case)]
    if name == "none":
        return [None]
    if name == "truth":
        return [case.n_tokens]
    return [int(name)]


def right_nll(engine, scorer, case, result) -> float:
    """NLL of the first RIGHT_TOKENS tokens after the blank, read after the text before it
    and the fill (a causal reading, scorer: an adapter name or None for the base model)."""
    return -right_logps(engine, scorer, case, [result.spans[0].token_ids], RIGHT_TOKENS)[0]


def truth_ppl(engine, cases: list, name: str) -> float | None:
    """The hybrid span PPL of the true spans with the right context where a setting puts it
    (none: the rule's gap for a blank of unknown length; truth: the true length; N: N
    positions); None for best:..."""
    if name.startswith("best:"):
        return None
    gap = None if name in ("none", "truth") else int(name)
    return span_perplexity(hybrid_span_nll(engine, cases, "magnet", hint=name == "truth", gap=gap))


def fill_setting(engine, cases: list, name: str, scorer, made: dict) -> tuple[list, list]:
    """Each case's kept fill under one setting, and the hint it was made with (made: the
    fills made so far, by case and hint, reused across settings: greedy fills repeat)."""
    kept, chosen = [], []
    for i, c in enumerate(cases):
        text = c.blanked("[blank]")
        options = []
        for h in hints_of(name, c):
            if (i, h) not in made:
                made[i, h] = engine.infill(
                    text, adapter="magnet", max_span_tokens=CAP, length_hints=h
                )
            options.append((h, made[i, h]))
        if len(options) > 1:
            scores = [right_nll(engine, scorer, c, r) for _, r in options]
            h, r = options[min(range(len(options)), key=scores.__getitem__)]
        else:
            h, r = options[0]
        kept.append(r)
        chosen.append(h)
    return kept, chosen


def main(argv: list[str] | None = None) -> int:
    p = unit_parser(__doc__, 80, "phrase,word,window", "length_hints", split=True)
    p.add_argument("--settings", default="none,truth,4,12,24,best:4+12+24+none")
    p.add_argument("--scorer", default="magnet", choices=("magnet", "base"))
    p.add_argument(
        "--ppl-only",
        action="store_true",
        help="score the true spans under each setting, make no fills (minutes, not an hour)",
    )
    args = p.parse_args(argv)

    engine = magnet_engine(args.adapter, args.threads)
    if not engine.runner.gap_rule("magnet").hints:
        raise SystemExit(f"{args.adapter} was not trained to read length hints (its gap rule).")
    scorer = "magnet" if args.scorer == "magnet" else None
    sources = split_sources(args.split)
    names = [s.strip() for s in args.settings.split(",") if s.strip()]
    report: dict = {
        "adapter": args.adapter,
        "fills": args.fills,
        "split": args.split,
        "settings": names,
        "suites": {},
    }
    head = (
        "span PPL of the truth (/ base left-only)",
        "length / truth",
        "within 0.5-2x",
        "shape",
        "stopped",
        "repeated 3-gram",
    )
    lines = md_head("suite", "setting", *head)
    if args.ppl_only:  # one row per suite: the span PPL under each setting
        lines = md_head("suite", "base left-only", *names)
    rows: list[Row] = []
    t0 = time.perf_counter()
    for domain in args.domains.split(","):
        for key, kind, cases in suite_cases(args, engine, sources, domain):
            truth = [c.n_tokens for c in cases]
            per: dict = {}
            made: dict = {}
            if args.ppl_only:
                left_only = span_perplexity(causal_span_nll(engine, cases, None))
                ppls = {name: truth_ppl(engine, cases, name) for name in names}
                report["suites"][key] = {"base_left_only_ppl": left_only, "span_ppl": ppls}
                cells = [
                    "–" if p is None else f"{p:.2f} ({p / left_only:.3f}x)" for p in ppls.values()
                ]
                lines.append(md_row(f"{key} ({len(cases)})", f"{left_only:.2f}", *cells))
                print(lines[-1], flush=True)
                continue
            for name in names:
                results, chosen = fill_setting(engine, cases, name, scorer, made)
                shape_kind = "phrase" if kind == WINDOW else kind  # a window: no sentence rule
                per[name] = rule_fills(engine, shape_kind, results, truth)
                per[name].update(span_ppl=truth_ppl(engine, cases, name), hints=chosen)
            if key not in report["suites"]:
                report["suites"][key] = {"truths": [c.span_text.strip() for c in cases]}
                left_only = span_perplexity(causal_span_nll(engine, cases, None))
                report["suites"][key]["base_left_only_ppl"] = left_only
            report["suites"][key].update(per)
            shape = "one_sentence" if kind == "sentence" else "no_sentence_end"
            off = per.get("none")
            left_only = report["suites"][key]["base_left_only_ppl"]
            for name, r in per.items():
                ppl = r["span_ppl"]
                cells = ["–" if ppl is None else f"{ppl:.2f} ({ppl / left_only:.3f}x)"]
                cells.append(f"{r['length_ratio']:.2f}")
                ref = off if name != "none" else None
                flags = ("within_2x", shape, "stopped", "repeat_3gram")
                cells += share_cells(r, flags, ref, "paired_vs_none")
                lines.append(md_row(f"{key} ({len(cases)})", name, *cells))
                if ref is not None:
                    measure = f"{key}: fills within 0.5-2x the true length, {name} vs none"
                    what = "none (no hint: the rule's gap), same cases"
                    rows.append(share_row(measure, r, off, "within_2x", what))
            print("\n".join(lines[-len(per) :]), flush=True)
    finish(args, engine, rows, report, lines, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
