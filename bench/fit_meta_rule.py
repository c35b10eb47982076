"""Fit the chat check's third rule (textrules/meta.py: talk about the task, scored) on the
hand-labelled real outputs, and say how well it does on rows it was not fitted on.

    python bench/fit_meta_rule.py            # measure, then write textrules/meta_weights.py
    python bench/fit_meta_rule.py --dry-run  # measure only

The labelled rows (tests/data/labelled_outputs.jsonl) come in batches, each labelled at one
time from one source (the evaluator's result files, then Paper-protocol studies `pp-`, `pp2-`,
`pp3-` to `pp5-`, the `fresh-` baseline fills; tests/data/labelled_outputs.md). Leave one batch
out: for each batch, a logistic regression (scikit-learn) on textrules.meta.features() is
fitted on the other batches and scores the left-out one. The threshold is the lowest at which
the whole chat check (the first two rules OR this one) keeps a pooled precision of at least
--precision on those left-out scores, and which the final fit (on every row) gives none of the
written fills that are no chat replies (tests/fill_cases.py's FILLS: "The sentence could be
reduced on appeal.", "The passage of the bill took two years.", a word of the task in its
other sense). The weights written are that final fit's.

    python bench/fit_meta_rule.py --words 5 --c 0.3  # measure only: with word features

--words N measures what a vocabulary would add, and writes nothing (the rule has no word
weights): beside the features, one per word of the fill (outside quotation marks) that the
passage does not hold, and one per first word, for the words at least N rows of the fitting
batches have, so each left-out batch is scored by words learned without it. A table then gives,
per threshold, the pooled precision and recall, the last batch's recall, and how many written
fills the final fit flags: what a lower threshold buys on real rows and costs on the written
ones.

Per batch the report gives the chat check's precision and recall (95% Wilson intervals)
without the third rule and with it (fitted without that batch), so the figures are estimates
on rows the weights never saw; the threshold, one number, was chosen on all of them. Writes
bench/results/meta_rule.json and prints a table. Pure text, no model: seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
from fill_cases import FILLS, NO_CHAT_CONTEXT  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from annotation_db.stats import wilson_interval  # noqa: E402
from textrules.chat import speaks_as_assistant  # noqa: E402
from textrules.copies import MARKER  # noqa: E402
from textrules.meta import FEATURES, features  # noqa: E402
from textrules.meta import _unquoted as meta_unquoted  # noqa: E402
from textrules.words import words  # noqa: E402

DATA = ROOT / "tests" / "data" / "labelled_outputs.jsonl"
WEIGHTS = ROOT / "textrules" / "meta_weights.py"
OUT = ROOT / "bench" / "results" / "meta_rule.json"
BATCH = re.compile(r"^(pp\d*|fresh)-")
THRESHOLDS = [round(t, 2) for t in np.arange(0.05, 0.991, 0.01)]


def batch_of(row_id: str) -> str:
    m = BATCH.match(row_id)
    return m.group(1) if m else "evaluator"


def context(row: dict) -> str:
    if row["left"] is None and row["right"] is None:
        return ""
    return f"{row['left'] or ''} [blank] {row['right'] or ''}".strip()


def share(k: int, n: int) -> str:
    if n == 0:
        return "n/a"
    ci = wilson_interval(k, n)
    return f"{k / n:.0%} [{ci.low:.0%}, {ci.high:.0%}]"


def word_keys(fill: str, ctx: str) -> set[str]:
    """--words: the fill's words outside quotation marks that the passage does not hold, and
    its first word."""
    new = set(words(meta_unquoted(fill))) - set(words(ctx.replace(MARKER, " ")))
    return {f"w:{w}" for w in new} | {f"first:{w}" for w in words(fill)[:1]}


def vocabulary(keys: list[set[str]], min_rows: int) -> list[str]:
    """The keys at least min_rows rows have (none when the rows have no keys: --words off)."""
    counted = Counter(k for row in keys for k in row)
    return sorted(k for k, n in counted.items() if n >= min_rows)


def with_words(x: np.ndarray, keys: list[set[str]], vocab: list[str]) -> np.ndarray:
    if not vocab:
        return x
    return np.hstack([x, np.array([[float(k in row) for k in vocab] for row in keys])])


def fit(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=5000).fit(x, y)


def counts(flag: np.ndarray, y: np.ndarray) -> dict[str, int]:
    return {
        "positives": int(y.sum()),
        "flagged": int(flag.sum()),
        "true_positives": int((flag & y).sum()),
    }


def trade_off(base, held, y, batches, last: str, written) -> str:
    """Per threshold: the chat check's pooled precision and recall on left-out scores, the
    last batch's recall, and the written fills the final fit flags."""
    lines = [
        f"| threshold | precision | recall | recall on {last} | written fills flagged |",
        "|---|---|---|---|---|",
    ]
    in_last = batches == last
    for t in (0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        flag = base | (held >= t)
        tp = int((flag & y).sum())
        lines.append(
            f"| {t:.2f} | {share(tp, int(flag.sum()))} | {share(tp, int(y.sum()))} "
            f"| {share(int((flag & y & in_last).sum()), int((y & in_last).sum()))} "
            f"| {int((written >= t).sum())} of {len(written)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", type=float, default=0.95, help="pooled precision to keep")
    ap.add_argument("--dry-run", action="store_true", help="measure only; write no weights")
    ap.add_argument(
        "--words",
        type=int,
        default=0,
        metavar="N",
        help="measure only: add word features (words in at least N fitting rows; see above)",
    )
    ap.add_argument("--c", type=float, default=1.0, help="inverse regularisation of the fit")
    args = ap.parse_args(argv)
    if args.words < 0:
        ap.error("--words takes a number of rows, 0 (off) or more")

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    x = np.array([[features(r["fill"], context(r))[f] for f in FEATURES] for r in rows])
    y = np.array(["chat" in r["labels"] for r in rows])
    base = np.array([speaks_as_assistant(r["fill"], context(r)) for r in rows])
    batches = np.array([batch_of(r["id"]) for r in rows])
    names = list(dict.fromkeys(batches))
    keys = [word_keys(r["fill"], context(r)) if args.words else set() for r in rows]

    held = np.zeros(len(rows))  # each row's score from the model fitted without its batch
    for b in names:
        out = batches == b
        fold = [k for k, o in zip(keys, out, strict=True) if not o]
        vocab = vocabulary(fold, args.words)
        model = fit(with_words(x[~out], fold, vocab), y[~out], args.c)
        left_out = [k for k, o in zip(keys, out, strict=True) if o]
        held[out] = model.predict_proba(with_words(x[out], left_out, vocab))[:, 1]

    vocab = vocabulary(keys, args.words)
    model = fit(with_words(x, keys, vocab), y, args.c)
    wx = np.array([[features(f, NO_CHAT_CONTEXT)[k] for k in FEATURES] for f in FILLS])
    wkeys = [word_keys(f, NO_CHAT_CONTEXT) if args.words else set() for f in FILLS]
    written = model.predict_proba(with_words(wx, wkeys, vocab))[:, 1]
    if args.words:
        print(trade_off(base, held, y, batches, names[-1], written))
        print()
    chosen = None
    for t in THRESHOLDS:
        c = counts(base | (held >= t), y)
        precise = c["flagged"] and c["true_positives"] / c["flagged"] >= args.precision
        if precise and (written < t).all():
            chosen = t
            break
    if chosen is None:
        print(
            f"no threshold keeps a pooled precision of {args.precision:.0%} and passes "
            "every written fill",
            file=sys.stderr,
        )
        return 1

    report = {"command": "python bench/fit_meta_rule.py", "threshold": chosen, "batches": {}}
    lines = [
        f"Chat check on each labelled batch, the third rule fitted without it (threshold "
        f"{chosen}: pooled precision >= {args.precision:.0%}, no written fill flagged):",
        "",
        "| batch | rows | chat | before: precision | before: recall | with it: precision "
        "| with it: recall |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in [*names, "all"]:
        sel = np.ones(len(rows), bool) if b == "all" else batches == b
        before = counts(base[sel], y[sel])
        after = counts(base[sel] | (held[sel] >= chosen), y[sel])
        report["batches"][b] = {"rows": int(sel.sum()), "before": before, "with_rule": after}
        lines.append(
            f"| {b} | {int(sel.sum())} | {before['positives']} "
            f"| {share(before['true_positives'], before['flagged'])} "
            f"| {share(before['true_positives'], before['positives'])} "
            f"| {share(after['true_positives'], after['flagged'])} "
            f"| {share(after['true_positives'], after['positives'])} |"
        )
    missed = [rows[i]["fill"][:100] for i in np.flatnonzero(y & ~base & (held < chosen))]
    wrong = [rows[i]["fill"][:100] for i in np.flatnonzero(~y & ~base & (held >= chosen))]
    report["missed"], report["false_positives"] = missed, wrong
    lines += ["", f"still missed ({len(missed)}):", *(f"- {m!r}" for m in missed)]
    lines += ["", f"flagged by the rule, not chat ({len(wrong)}):", *(f"- {w!r}" for w in wrong)]

    if args.words:  # the measurement only: the rule has no word weights to write
        print("\n".join(lines))
        return 0
    weights = dict(zip(FEATURES, (round(float(w), 4) for w in model.coef_[0]), strict=True))
    report["weights"], report["bias"] = weights, round(float(model.intercept_[0]), 4)
    print("\n".join(lines))
    OUT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if not args.dry_run:
        body = "\n".join(f"    {json.dumps(k)}: {v}," for k, v in weights.items())
        WEIGHTS.write_text(
            '"""Written by `python bench/fit_meta_rule.py` (do not edit): the logistic weights\n'
            "of textrules/meta.py's features, fitted on every row of\n"
            "tests/data/labelled_outputs.jsonl, and the threshold (bench/results/meta_rule.json)."
            '\n"""\n\n'
            f"BIAS = {report['bias']}\nTHRESHOLD = {chosen}\nWEIGHTS: dict[str, float] = {{\n"
            f"{body}\n}}\n",
            encoding="utf-8",
        )
        print(f"\nwrote {WEIGHTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
