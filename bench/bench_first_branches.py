"""Whether a fill should weigh other first tokens than the greedy one (issue 35: word blanks get
a clause where a word stood, 1.6-1.7x the truth, and no stop rule along the greedy path cuts
them short: bench/bench_stop_rules.py).

    python bench/bench_first_branches.py --adapter adapters/magnet [--fills 40]
        [--suites sentence,phrase,word] [--domains wikipedia,news] [--branches 4]
        [--length-bonus 0.3,0.8]

The stop rule "join" (inference/stops.py) picks where a fill ends along the one path greedy
decoding took, so a fill that opens a clause ("The term was used by" for "There") can only be
cut inside the clause. Here each case is filled `--branches` times, as the app fills it (the
loop guard and the sentence rule on, a cap of CAP tokens): once greedily, and once from each
of the next likeliest first tokens (the first step's logits after every rule of the decoder;
the rest of the fill greedy). Every branch's stops are candidates, scored as "join" scores
them (span + end + the first RIGHT_TOKENS tokens after the blank read causally by the adapter
+ a length prior per token), and each rule keeps one:
- `join`: the best stop of the greedy branch, LENGTH_BONUS per token (`--fill-branches 1`);
- `branches`: the best stop over all branches, BRANCH_LENGTH_BONUS per token (what the
  decoder does with `--fill-branches K` for a free blank inside a sentence; a sentence blank
  is never branched there, so the sentence suite here says what it would do);
- `branches+B` (one per `--length-bonus B`): the same with B per token instead (B is chosen
  on `--split dev`, the training split's passages, and only then read on the held-out ones).
Per suite and rule: length against the truth, fills within 0.5-2x it, the shape (one complete
sentence / no sentence end inside), repeated 3-grams, the fill equal to the truth (case and
edge punctuation aside), each paired against `join`; and seconds per fill. Writes
bench/results/first_branches.json with the table, every fill, every branch's tokens and every
stop's score without the prior (so that another prior can be read offline). `--decoder`
also fills each case as the app does (`fill={"branches": K}` and 1): the time per fill of each, and
in how many cases the decoder's fill is the offline `branches` rule's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
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
    split_sources,
    suite_cases,
    unit_parser,
)

from magnet_model.inference.blanks import DEFAULT_MARKER, InfillResult
from magnet_model.inference.infill import infill_job, infill_lane
from magnet_model.inference.sampling import Sampling
from magnet_model.inference.stops import BRANCH_LENGTH_BONUS, LENGTH_BONUS
from magnet_model.units import between_sentences

EDGE = " .,;:!?\"'()"


@dataclass
class FirstToken(Sampling):
    """Greedy decoding of a one-blank fill whose first token is `first` (None: the greedy
    one); the first step's `k` likeliest tokens, after every rule, are kept in `top`."""

    first: int | None = None
    k: int = 4
    top: list = field(default_factory=list)  # shared by the started copy (a reference)
    steps: list = field(default_factory=list)

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        picks = logits.argmax(-1)
        if not self.steps:
            finite = int(torch.isfinite(logits[0]).sum())
            self.top[:] = logits[0].topk(min(self.k, finite)).indices.tolist()
            if self.first is not None:
                picks[0] = self.first
        self.steps.append(1)
        return picks


def branch_fill(engine, text: str, first: int | None, k: int) -> tuple[InfillResult, list]:
    """One fill of a one-blank text under the rule "model" (its trace kept), from `first`."""
    s = FirstToken(first=first, k=k)
    fill = engine.magnet_fill({"stop": "model"})
    job = infill_job(engine.runner, text, DEFAULT_MARKER, "magnet", CAP, None, fill)
    lane = infill_lane(engine.runner, job, "magnet", s)
    return engine.runner.run_one(lane), s.top


def same_words(fill: str, truth: str) -> bool:
    return fill.strip(EDGE).lower() == truth.strip(EDGE).lower()


def main(argv: list[str] | None = None) -> int:
    p = unit_parser(
        __doc__, 40, "sentence,phrase,word", "first_branches", split=True, bonus_rule="branches"
    )
    p.add_argument("--branches", type=int, default=4, help="first tokens tried per blank")
    p.add_argument(
        "--decoder",
        action="store_true",
        help="also fill each case as the app does, with --fill-branches K and 1 (time, and "
        "whether the decoder's fill is the offline `branches` rule's)",
    )
    args = p.parse_args(argv)
    rules = ["join", "branches"] + [f"branches+{b:g}" for b in args.length_bonus]

    engine = magnet_engine(args.adapter, args.threads)
    sources = split_sources(args.split)
    report = {"adapter": args.adapter, "fills": args.fills, "split": args.split, "suites": {}}
    report.update(rules=rules, branches=args.branches)
    head = ("length / truth", "within 0.5-2x", "shape", "repeated 3-gram", "= truth")
    lines = md_head("suite", "rule", *head)
    rows: list[Row] = []
    t0 = time.perf_counter()
    for domain in args.domains.split(","):
        for key, kind, cases in suite_cases(args, engine, sources, domain):
            truth = [c.n_tokens for c in cases]
            kept: dict[str, list] = {r: [] for r in rules}
            picked_branch = []
            scored = []  # per case: every stop (branch, t, its score without the prior)
            paths = []  # per case: every branch's tokens
            seconds = {"greedy": 0.0, "all": 0.0, "decoder": 0.0, "decoder_1": 0.0}
            decoded = []
            # whether the decoder branches the blank at all (not between sentences: infill.py)
            inside = [
                not between_sentences(*c.blanked(DEFAULT_MARKER).split(DEFAULT_MARKER))
                for c in cases
            ]
            for c in cases:
                text = c.blanked(DEFAULT_MARKER)
                first, top = branch_fill(engine, text, None, args.branches)
                results = [first]
                results += [branch_fill(engine, text, t, 1)[0] for t in top[1:]]
                # every branch's stops: (branch, t, span + end + join log P)
                cands = []
                for b, r in enumerate(results):
                    stops = scored_stops(engine, "magnet", c, r)
                    cands += [(b, t, a + e + q) for t, a, e, q in stops]
                scored.append([(b, t, round(x, 4)) for b, t, x in cands])
                paths.append([list(r.spans[0].token_ids) for r in results])
                if args.decoder:
                    kw = dict(adapter="magnet", max_span_tokens=CAP)
                    made = engine.infill(
                        text, fill={"stop": "join", "branches": args.branches}, **kw
                    )
                    seconds["decoder"] += made.seconds
                    seconds["decoder_1"] += engine.infill(
                        text, fill={"stop": "join", "branches": 1}, **kw
                    ).seconds
                    decoded.append(made.spans[0].text.strip())
                seconds["greedy"] += first.seconds
                seconds["all"] += sum(r.seconds for r in results)
                for rule in rules:
                    bonus = {"join": LENGTH_BONUS, "branches": BRANCH_LENGTH_BONUS}.get(rule)
                    bonus = float(rule[9:]) if bonus is None else bonus
                    pool = [x for x in cands if x[0] == 0] if rule == "join" else cands
                    b, t, _ = max(pool, key=lambda x: x[2] + bonus * x[1])
                    kept[rule].append(cut(engine, results[b], t))
                    if rule == "branches":
                        picked_branch.append(b)
            shape = "one_sentence" if kind == "sentence" else "no_sentence_end"
            per = {}
            truths = [c.span_text.strip() for c in cases]
            for rule in rules:
                per[rule] = r = rule_fills(engine, kind, kept[rule], truth)
                pairs = zip(r["fills"], truths, strict=True)
                r["flags"]["exact"] = [same_words(f, t) for f, t in pairs]
            report["suites"][key] = {"truths": truths, **per, "seconds": seconds}
            report["suites"][key].update(picked_branch=picked_branch, stops=scored, paths=paths)
            off = per["join"]
            for rule, r in per.items():
                ref = off if rule != "join" else None
                flags = ("within_2x", shape, "repeat_3gram", "exact")
                cells = share_cells(r, flags, ref, "paired_vs_join")
                lines.append(
                    md_row(f"{key} ({len(cases)})", rule, f"{r['length_ratio']:.2f}", *cells)
                )
                if rule != "join":
                    rows.append(
                        Row(
                            f"{key}: length / truth, {rule} vs join",
                            r["length_ratio"],
                            "ratio",
                            off["length_ratio"],
                            "join (the greedy branch's best stop), same cases",
                        )
                    )
            measure = f"{key}: seconds per fill, {args.branches} branches vs greedy"
            what = "the greedy branch alone (its stop chosen offline), same process"
            rows.append(seconds_row(measure, seconds, "all", "greedy", len(cases), what))
            if args.decoder:
                pairs = zip(decoded, per["branches"]["fills"], inside, strict=True)
                same = sum(a == b for a, b, i in pairs if i)
                report["suites"][key].update(
                    decoder_fills=decoded,
                    decoder_branched=sum(inside),
                    decoder_equals_branches=same,
                )
                print(
                    f"{key}: the decoder's fill is the offline rule's in {same} of the "
                    f"{sum(inside)} blanks it branches ({len(cases) - sum(inside)} between "
                    "sentences, which it decodes from the greedy first token only)"
                )
                measure = f"{key}: seconds per fill, decoder with {args.branches} first tokens vs 1"
                what = "the decoder from the greedy first token only, same cases, same process"
                rows.append(seconds_row(measure, seconds, "decoder", "decoder_1", len(cases), what))
            other = sum(b > 0 for b in picked_branch)
            print(f"{key}: another branch than the greedy one kept in {other} of {len(cases)}")
            print("\n".join(lines[-len(per) :]), flush=True)
    finish(args, engine, rows, report, lines, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
