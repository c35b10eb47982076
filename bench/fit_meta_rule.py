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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
from fill_cases import FILLS, NO_CHAT_CONTEXT  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from annotation_db.stats import wilson_interval  # noqa: E402
from textrules.chat import speaks_as_assistant  # noqa: E402
from textrules.meta import FEATURES, features  # noqa: E402

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


def fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=1.0, max_iter=2000).fit(x, y)


def counts(flag: np.ndarray, y: np.ndarray) -> dict[str, int]:
    return {
        "positives": int(y.sum()),
        "flagged": int(flag.sum()),
        "true_positives": int((flag & y).sum()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", type=float, default=0.95, help="pooled precision to keep")
    ap.add_argument("--dry-run", action="store_true", help="measure only; write no weights")
    args = ap.parse_args(argv)

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    x = np.array([[features(r["fill"], context(r))[f] for f in FEATURES] for r in rows])
    y = np.array(["chat" in r["labels"] for r in rows])
    base = np.array([speaks_as_assistant(r["fill"], context(r)) for r in rows])
    batches = np.array([batch_of(r["id"]) for r in rows])
    names = list(dict.fromkeys(batches))

    held = np.zeros(len(rows))  # each row's score from the model fitted without its batch
    for b in names:
        out = batches == b
        held[out] = fit(x[~out], y[~out]).predict_proba(x[out])[:, 1]

    model = fit(x, y)
    written = model.predict_proba(
        np.array([[features(f, NO_CHAT_CONTEXT)[k] for k in FEATURES] for f in FILLS])
    )[:, 1]
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
