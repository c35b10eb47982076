"""The evaluator's unit suites as a report reads them: their table rows, their targets (MAGNET's
and the prompted baselines'), their Markdown, and the paired comparisons of two systems."""

from __future__ import annotations

import math

from .. import systems as table
from . import domains
from .report_common import (
    PRIMARY_DOMAIN,
    PROMPTED_KEYS,
    Target,
    _cell,
    _cmp,
    _column,
    _verdict,
)

# ---------------------------------------------------------------- the unit suites

# (label, key, format) of a suite's table; the base model's rows hold its left-only PPL
UNIT_ROWS = [
    ("span PPL, hybrid (left + right)", "hybrid_ppl", "{:.2f}"),
    ("span PPL, prompted zero-shot", "zero_shot_ppl", "{:.2f}"),
    ("span PPL, prompted five-shot", "five_shot_ppl", "{:.2f}"),
    ("span PPL, base left-only", "left_only_ppl", "{:.2f}"),
    ("fills stopped before the cap", "stopped_share", "{:.0%}"),
    ("... by <span_end>", "span_end_share", "{:.0%}"),
    ("exactly one complete sentence", "one_sentence_share", "{:.0%}"),
    ("no sentence end inside", "no_sentence_end_share", "{:.0%}"),
    ("stopped, no sentence end inside", "stopped_no_sentence_end_share", "{:.0%}"),
    ("length / true length", "length_ratio", "{:.2f}"),
    ("... of the median fill", "length_ratio_median", "{:.2f}"),
    ("fills with a repeated 3-gram", "repeat_3gram_share", "{:.0%}"),
    ("fills with a token that is no text", "junk_share", "{:.0%}"),
    ("completed text PPL / original (base)", "completed_ppl_ratio", "{:.3f}"),
    ("chat or meta replies", "chat_share", "{:.0%}"),
    ("copies of 6+ words of the passage", "copy_share", "{:.0%}"),
    ("copies of an example", "example_copy_share", "{:.0%}"),
    ("fills the copy guard turned", "copy_blocked_share", "{:.0%}"),
]
UNIT_IN_DOMAIN = 0.9  # sentence suite: hybrid <= this x base left-only on Wikipedia ...
UNIT_OUT_OF_DOMAIN = 1.1  # ... and this on the others (MAGNET v2's ship targets, on news)
ONE_SENTENCE = 0.85  # sentence suite: fills that are exactly one complete sentence


def _suite(report: dict, key: str) -> dict | None:
    node = report["tasks"].get("units", {}).get("suites", {}).get(key)
    return node if isinstance(node, dict) and "systems" in node else None


def _sv(suite: dict | None, system: str, key: str):
    v = (suite or {}).get("systems", {}).get(system, {}).get(key)
    return v if isinstance(v, int | float) and not math.isnan(v) else None


def unit_targets(report: dict, system: str = "magnet") -> list[Target]:
    """The unit suites' targets (sentence, phrase and word blanks; both domains)."""
    out = []
    prompted = [name for _, name in PROMPTED_KEYS]
    for key in report["tasks"].get("units", {}).get("suites", {}):
        domain, kind = key.split("/")
        suite, row = _suite(report, key), f"units {key}"
        hybrid = _sv(suite, system, "hybrid_ppl")
        left = _sv(suite, "base", "left_only_ppl")
        if kind == "sentence":
            bound = UNIT_IN_DOMAIN if domain == PRIMARY_DOMAIN else UNIT_OUT_OF_DOMAIN
            five = _sv(suite, "base", "five_shot_ppl")
            ratios = [_sv(suite, p, "completed_ppl_ratio") for p in prompted]
            mine = _sv(suite, system, "completed_ppl_ratio")
            out += [
                Target("units", row, f"hybrid <= {bound} x base left-only",
                       _cmp(hybrid, left, lambda m, b, k=bound: m <= k * b)),
                Target("units", row, "hybrid < five-shot", _cmp(hybrid, five, lambda m, f: m < f)),
                Target("units", row, f">= {ONE_SENTENCE:.0%} one complete sentence",
                       _cmp(_sv(suite, system, "one_sentence_share"), ONE_SENTENCE,
                            lambda m, t: m >= t)),
                Target("units", row, "completed PPL <= 1.15 x original",
                       _cmp(mine, 1.15, lambda m, t: m <= t)),
                Target("units", row, "completed PPL below both prompted",
                       None if mine is None or None in ratios else all(mine < r for r in ratios)),
            ]  # fmt: skip
        else:
            ratio = _sv(suite, system, "length_ratio")
            out += [
                Target("units", row, ">= 80% with no sentence end inside",
                       _cmp(_sv(suite, system, "no_sentence_end_share"), 0.8,
                            lambda m, t: m >= t)),
                Target("units", row, "length ratio 0.7-1.5",
                       None if ratio is None else 0.7 <= ratio <= 1.5),
            ]  # fmt: skip
        out += [
            Target("units", row, "<= 10% repeated 3-gram",
                   _cmp(_sv(suite, system, "repeat_3gram_share"), 0.1, lambda m, t: m <= t)),
            Target("units", row, "0 fills with never-trained tokens",
                   _cmp(_sv(suite, system, "junk_share"), 0.0, lambda m, t: m <= t)),
        ]  # fmt: skip
    return out


BASELINE_CHAT = 0.05  # prompted baselines: at most this share of chat or meta replies ...
BASELINE_COPY = 0.10  # ... of copies of 6+ words of the passage, and no copy of an example
FIVE_SHOT_ONE_SENTENCE = 0.6  # five-shot fills of a removed sentence that are one sentence


def baseline_targets(report: dict, key: str) -> list[Target]:
    """The prompted baselines' targets on one suite (issue 36): few chat replies and copies,
    no copied example; five-shot writes one sentence where one was removed."""
    suite, row = _suite(report, key), f"units {key}"
    out = []
    for _, name in PROMPTED_KEYS:
        if _sv(suite, name, "chat_share") is None:
            continue  # a report from before these flags
        t = table.title(name)
        out += [
            Target("units", row, f"{t}: <= {BASELINE_CHAT:.0%} chat/meta",
                   _cmp(_sv(suite, name, "chat_share"), BASELINE_CHAT, lambda m, b: m <= b)),
            Target("units", row, f"{t}: <= {BASELINE_COPY:.0%} copies of the passage",
                   _cmp(_sv(suite, name, "copy_share"), BASELINE_COPY, lambda m, b: m <= b)),
            Target("units", row, f"{t}: no copy of an example",
                   _cmp(_sv(suite, name, "example_copy_share"), 0.0, lambda m, b: m <= b)),
        ]  # fmt: skip
        if key.endswith("/sentence") and table.BY_NAME[name].shots == 5:
            out.append(
                Target("units", row, f"{t}: >= {FIVE_SHOT_ONE_SENTENCE:.0%} one sentence",
                       _cmp(_sv(suite, name, "one_sentence_share"), FIVE_SHOT_ONE_SENTENCE,
                            lambda m, b: m >= b))
            )  # fmt: skip
    return out


def render_units(report: dict, targets: list[Target]) -> list[str]:
    """One table per suite (systems side by side), its targets, and fills to read by eye."""
    task = report["tasks"].get("units")
    if not task or "suites" not in task:
        return []
    lines = ["", "## Unit suites (sentences, phrases, words removed from held-out text)"]
    for key, suite in task["suites"].items():
        domain = domains.BY_NAME.get(key.split("/")[0])
        mark = " (out of training)" if domain and domain.out_of_training else ""
        lines += ["", f"### {key}{mark}"]
        if "systems" not in suite:
            lines.append(f"n/a: {suite.get('n/a', '')}")
            continue
        names = list(suite["systems"])
        lines += [
            f"{suite['sizes']['cases']} cases, true unit {suite['sizes']['span_tokens_mean']:.1f} "
            "tokens on average; fills on the first "
            f"{suite['sizes'].get('fills', '')} of them (greedy, cap 64); shares with their "
            "95% interval (Wilson).",
            "",
            "| metric | " + " | ".join(_column(n) for n in names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for label, k, fmt in UNIT_ROWS:
            cells = [_cell(suite["systems"][n], (k,), fmt) for n in names]
            if any(c not in ("–", "") for c in cells):
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += _paired_lines(suite)
        # each adapter of the adapted model is judged (a run may name several: v2, v3, ...)
        adapters = [n for n in names if n not in ("base", *(p for _, p in PROMPTED_KEYS))]
        for a in adapters:
            pool = targets if a == "magnet" else unit_targets(report, a)
            mine = [t for t in pool if t.row == f"units {key}"]
            if mine:
                head = "Targets" if adapters == ["magnet"] else f"Targets, {_column(a)}"
                verdicts = "; ".join(f"{t.text}: {_verdict(t.met)}" for t in mine)
                lines += ["", f"{head}: {verdicts}"]
        mine = baseline_targets(report, key)
        if mine:
            verdicts = "; ".join(f"{t.text}: {_verdict(t.met)}" for t in mine)
            lines += ["", f"Targets, prompted baselines: {verdicts}"]
        examples = task.get("examples", {}).get(key, [])
        if examples:
            lines += ["", "Fills (truth first):", ""]
            for i, ex in enumerate(examples, 1):
                left, _, right = ex["text"].partition("[blank]")
                fills = [f"{_column(n)} «{v}»" for n, v in ex.items() if n not in ("text", "truth")]
                lines.append(
                    f"{i}. …{left[-70:]}[…]{right[:50]}… — truth «{ex['truth']}»; "
                    + "; ".join(fills)
                )
    return lines


PAIRED_LABELS = {
    "one_sentence_share": "exactly one complete sentence",
    "no_sentence_end_share": "no sentence end inside",
    "repeat_3gram_share": "a repeated 3-gram",
    "stopped_share": "stopped before the cap",
    "stop_share": "stopped by <span_end>",
    "fit_share": "ended inside the blank",
    "recall_at_1_share": "recall@1",
}


def _paired_lines(suite: dict, where: str = "") -> list[str]:
    """Two adapters on the same cases: each share's difference in points with its interval
    and McNemar p, and the hybrid span PPL ratio with its interval and Wilcoxon p."""
    out = []
    for pair, comp in (suite.get("paired") or {}).items():
        parts = []
        for key, c in comp.items():
            if key == "mrr":
                parts.append(
                    f"MRR {c['diff']:+.3f} ({c['lo']:+.3f} to {c['hi']:+.3f}; "
                    f"Wilcoxon p = {c['p']:.2g})"
                )
            elif key == "hybrid_ppl":
                parts.append(
                    f"hybrid span PPL x{c['ppl_ratio']:.3f} ({c['lo']:.3f}–{c['hi']:.3f}; "
                    f"Wilcoxon p = {c['p']:.2g})"
                )
            else:
                parts.append(
                    f"{PAIRED_LABELS.get(key, key)} {100 * c['diff']:+.0f} points "
                    f"({100 * c['lo']:+.0f} to {100 * c['hi']:+.0f}; McNemar p = {c['p']:.2g})"
                )
        if parts:
            out += ["", f"Paired, {where}{pair} (the same cases): " + "; ".join(parts) + "."]
    return out
