"""What an evaluation run means and how it reads: the issue's targets judged on a report, the
Markdown table (results.md) and the files a run writes (results.md, results.json).

A report is the dict `evaluate.evaluate` returns: tasks -> systems -> measured numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import systems as table
from . import domains
from .report_common import (  # noqa: F401 (the names other modules read here)
    DOMAINS,
    PRIMARY_DOMAIN,
    PROMPTED_KEYS,
    PROMPTED_ROWS,
    TASKS,
    Target,
    _cell,
    _cmp,
    _column,
    _get,
    _verdict,
    domain_key,
)
from .report_units import _paired_lines, render_units, unit_targets

# ---------------------------------------------------------------- targets


def check_targets(report: dict) -> list[Target]:
    """The issue's targets, each judged on what this run measured."""
    g = _get
    prompted = [g(report, "infill", "base", f"{k}_ppl") for k, _ in PROMPTED_KEYS]
    best = min((p for p in prompted if p is not None), default=None)
    base_rep = g(report, "repetition", "base", "rep_4")
    hybrid = g(report, "infill", "magnet", "hybrid_ppl")
    left = g(report, "infill", "base", "causal_left_ppl")
    out = [
        Target(
            "infill",
            "span PPL, hybrid layout (left + right context)",
            "magnet <= 0.70 x best prompted base",
            _cmp(hybrid, best, lambda m, b: m <= 0.7 * b),
        ),
        Target(
            "infill",
            "span PPL, hybrid layout (left + right context)",
            "magnet <= 0.80 x base left-only",
            _cmp(hybrid, left, lambda m, b: m <= 0.8 * b),
        ),
        Target(
            "sts",
            "Spearman x 100",
            "magnet >= 75",
            _cmp(g(report, "sts", "magnet", "spearman"), 75.0, lambda m, t: m >= t),
        ),
    ]
    for d in report.get("domains", [PRIMARY_DOMAIN]):
        out += _fill_targets(report, d)
    out += unit_targets(report)
    for task, row in (("pos", "POS accuracy"), ("chunk", "chunking accuracy")):
        m, b = (
            g(report, "probe", "magnet", task, "accuracy"),
            g(report, "probe", "base", task, "accuracy"),
        )
        out.append(Target("probe", row, "magnet > base", _cmp(m, b, lambda x, y: x > y)))
    m, b = g(report, "probe", "magnet", "ner", "f1"), g(report, "probe", "base", "ner", "f1")
    out.append(
        Target("probe", "NER F1 (non-O words)", "magnet > base", _cmp(m, b, lambda x, y: x > y))
    )
    out += [
        Target(
            "repetition",
            "Rep-4",
            "magnet <= 1.5 x base",
            _cmp(g(report, "repetition", "magnet", "rep_4"), base_rep, lambda m, b: m <= 1.5 * b),
        ),
        Target(
            "repetition",
            "Rep-4",
            "llm2vec > 1.5 x base",
            _cmp(g(report, "repetition", "llm2vec", "rep_4"), base_rep, lambda m, b: m > 1.5 * b),
        ),
        Target(
            "knowledge",
            "causal PPL / base",
            "magnet <= 1.05",
            _cmp(g(report, "knowledge", "magnet", "ratio_to_base"), 1.05, lambda m, t: m <= t),
        ),
    ]
    return out


def _label(label: str, domain: str) -> str:
    """A row's label in one infill domain: as it was for the first, ', news' for news."""
    return f"{label}, {domain}" if domain_key(domain) else label


def _fill_targets(report: dict, domain: str) -> list[Target]:
    """The fill targets of one domain: MAGNET stops by <span_end> and writes spans of about
    the true length; no system's fill holds a token that is no text; prompted fills are not
    empty."""
    g, at = _get, (domain_key(domain),) if domain_key(domain) else ()
    out = [
        Target(
            "infill",
            _label("infills that stop by themselves (<span_end>)", domain),
            "magnet >= 80%",
            _cmp(g(report, "infill", "magnet", *at, "stop_share"), 0.8, lambda m, t: m >= t),
        ),
        Target(
            "infill",
            _label("infill length / true span length", domain),
            "magnet 0.7-1.5",
            _cmp(
                g(report, "infill", "magnet", *at, "length_ratio"),
                1.5,
                lambda m, t: 0.7 <= m <= t,
            ),
        ),
        Target(
            "infill",
            _label(WITHIN_30, domain),
            "magnet >= 50%",
            _cmp(g(report, "infill", "magnet", *at, "within_30_share"), 0.5, lambda m, t: m >= t),
        ),
        Target(
            "infill",
            _label(JUNK, domain),
            "magnet 0%",
            _cmp(g(report, "infill", "magnet", *at, "junk_share"), 0.0, lambda m, t: m == t),
        ),
    ]
    for key, name in PROMPTED_KEYS:
        fills = (*at, f"{key}_fills")
        out += [
            Target(
                "infill",
                _label(f"{JUNK}, prompted {name}", domain),
                "base 0%",
                _cmp(g(report, "infill", "base", *fills, "junk_share"), 0.0, lambda m, t: m == t),
            ),
            Target(
                "infill",
                _label(f"{EMPTY}, prompted {name}", domain),
                "base <= 5%",
                _cmp(g(report, "infill", "base", *fills, "empty_share"), 0.05, lambda m, t: m <= t),
            ),
        ]
    return out


# ---------------------------------------------------------------- Markdown


WITHIN_30 = "infills within ±30% of the true length (tokens)"
EMPTY = "empty infills"
JUNK = "infills with a never-trained or special token"
# (row label, path into a system's result, format) of one infill domain
FILL_ROWS = [
    ("infill length / true span length", ("length_ratio",), "{:.2f}"),
    (WITHIN_30, ("within_30_share",), "{:.0%}"),
    (EMPTY, ("empty_share",), "{:.0%}"),
    (JUNK, ("junk_share",), "{:.0%}"),
]
INFILL_ROWS = [
    ("span PPL, hybrid layout (left + right context)", ("hybrid_ppl",), "{:.2f}"),
    ("span PPL incl. end token, hybrid layout", ("hybrid_ppl_with_end",), "{:.2f}"),
    ("span PPL, prompted zero-shot", ("zero_shot_ppl",), "{:.2f}"),
    ("span PPL, prompted five-shot", ("five_shot_ppl",), "{:.2f}"),
    ("span PPL, left context only (causal)", ("causal_left_ppl",), "{:.2f}"),
    ("mean NLL of <span_end> at the true end (nats)", ("end_nll_mean",), "{:.2f}"),
    ("AUC of p(<span_end>): true end vs. the other span positions", ("end_auc",), "{:.3f}"),
    ("infills that stop by themselves (<span_end>)", ("stop_share",), "{:.0%}"),
    ("infills that stop where they run into the right context", ("joined_share",), "{:.0%}"),
    ("infills cut by the stop rule (`--fill-stop join`)", ("best_share",), "{:.0%}"),
    ("infills that end inside the blank (any of these)", ("fit_share",), "{:.0%}"),
    *FILL_ROWS,
    *(
        row
        for key, name in PROMPTED_KEYS
        for row in (
            (
                f"prompted {name} replies that ended before the cap (stop token or line break)",
                (f"{key}_fills", "ended_share"),
                "{:.0%}",
            ),
            *(
                (f"{label}, prompted {name}", (f"{key}_fills", *path), fmt)
                for label, path, fmt in FILL_ROWS
            ),
        )
    ),
]
# (task, row label, path into a system's result, format)
ROWS = [
    *(
        ("infill", _label(label, d), (*((domain_key(d),) if domain_key(d) else ()), *path), fmt)
        for d in DOMAINS
        for label, path, fmt in INFILL_ROWS
    ),
    ("sts", "Spearman x 100", ("spearman",), "{:.2f}"),
    ("retrieval", "recall@1 (description -> held-out extract)", ("recall_at_1",), "{:.1%}"),
    ("retrieval", "MRR", ("mrr",), "{:.3f}"),
    ("docsim", "Spearman x 100 (cosine vs. people's ratings)", ("spearman",), "{:.2f}"),
    ("docsim", "Pearson x 100 (cosine vs. people's ratings)", ("pearson",), "{:.2f}"),
    ("probe", "POS accuracy", ("pos", "accuracy"), "{:.2%}"),
    ("probe", "chunking accuracy", ("chunk", "accuracy"), "{:.2%}"),
    ("probe", "NER F1 (non-O words)", ("ner", "f1"), "{:.2%}"),
    ("probe", "NER accuracy", ("ner", "accuracy"), "{:.2%}"),
    ("repetition", "Rep-4", ("rep_4",), "{:.4f}"),
    ("repetition", "Rep-4, passage starts", ("passage_prompts", "rep_4"), "{:.4f}"),
    ("repetition", "Rep-4, short open prompts", ("open_prompts", "rep_4"), "{:.4f}"),
    ("repetition", "Rep-Sen", ("rep_sen",), "{:.4f}"),
    ("knowledge", "causal PPL", ("ppl",), "{:.2f}"),
    ("knowledge", "causal PPL / base", ("ratio_to_base",), "{:.3f}"),
]
TASK_TITLES = {
    "infill": "Infilling",
    "units": "Unit suites",
    "sts": "STS-B",
    "retrieval": "Retrieval",
    "docsim": "Document similarity (Lee)",
    "probe": "Token probe",
    "repetition": "Repetition",
    "knowledge": "Knowledge",
}


def render_markdown(report: dict) -> str:
    """The side-by-side table, then sizes, timings, hardware and the reasons for every n/a."""
    systems = list(report["systems"])
    targets = [Target(**t) for t in report["targets"]]
    head = ["task", "metric", *(_column(s) for s in systems), "target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task, label, path, fmt in ROWS:
        if task not in report["tasks"]:
            continue
        res = report["tasks"][task]["systems"]
        cells = [_cell(res.get(s), path, fmt) for s in systems]
        if all(c in ("–", "n/a", "") for c in cells):
            continue
        mine = [t for t in targets if t.task == task and t.row == label]
        target = "; ".join(t.text for t in mine)
        met = "; ".join(_verdict(t.met) for t in mine)
        lines.append(
            f"| {TASK_TITLES[task]} | {label} | " + " | ".join(cells) + f" | {target} | {met} |"
        )
    retrieval = report["tasks"].get("retrieval") or {}
    lines += _paired_lines(retrieval, "retrieval, ")
    infill = report["tasks"].get("infill") or {}
    for domain, pairs in (infill.get("paired") or {}).items():
        lines += _paired_lines({"paired": pairs}, f"random-window infill, {domain}: ")
    lines += render_units(report, targets)
    if {"infill", "units"} & set(report["tasks"]):
        lines += ["", _domains_note(report)]
    lines += ["", "n/a: " + _na_notes(report), ""]
    lines += _timing_table(report)
    hw = report["hardware"]
    lines += [
        "",
        f"Hardware: {hw['cpu']} ({hw['cores']} cores), torch {hw['torch']} with "
        f"{hw['torch_threads']} threads, device {hw['device']}"
        + (f" ({hw['gpu']})" if hw.get("gpu") else "")
        + f", {hw['dtype']}.",
        "",
        _guard_note(report.get("fill_no_repeat")),
        "",
        _close_note(report.get("fill_close_sentences")),
        "",
        _stop_note(report.get("fill_stop"), report.get("fill_branches")),
        "",
        _prompt_note(
            report.get("prompt_formats"), report.get("prompt_no_copy"), report.get("prompted")
        ),
        "",
        _cache_note(report.get("baseline_cache")),
        "",
        _commands_note(report),
    ]
    return "\n".join(lines) + "\n"


def _domains_note(report: dict) -> str:
    """Each held-out domain the infill and units tasks read, and whether it is out of training
    (domains.py): no training corpus holds its source."""
    read = [domains.BY_NAME[d] for d in report.get("domains", [PRIMARY_DOMAIN])]
    parts = [f"**{d.name}** ({d.text}): {d.training}" for d in read]
    return "Held-out domains (infill, units): " + "; ".join(parts) + "."


def _commands_note(report: dict) -> str:
    """The command behind the report, or each part's when it was run in parts (--add-to)."""
    quick = " (quick mode: small samples)" if report["quick"] else ""
    parts = report.get("commands") or [report["command"]]
    if len(parts) == 1:
        return f"Command: `{parts[0]}`{quick}"
    listed = "\n".join(f"{i}. `{c}`" for i, c in enumerate(parts, 1))
    return (
        f"Run in {len(parts)} parts on the same settings (`--add-to`; a task run again "
        f"keeps its latest part){quick}:\n\n{listed}"
    )


def _guard_note(n: int | None) -> str:
    """Which fill guard the MAGNET fills ran with (the continuations never use one)."""
    if n is None:
        return "MAGNET fills: loop guard not recorded (a report from before the guard)."
    if n == 0:
        return "MAGNET fills: no loop guard (`--fill-no-repeat 0`: the model's own output)."
    return (
        f"MAGNET fills: loop guard on, no {n}-gram of tokens twice in one fill "
        f"(`--fill-no-repeat {n}`); continuations (Rep-n) are the raw model's."
    )


def _close_note(close: bool | None) -> str:
    """Whether a MAGNET fill between sentences had to end one."""
    if close is None:
        return "MAGNET fills: sentence rule not recorded (a report from before the rule)."
    if not close:
        return (
            "MAGNET fills: no sentence rule (`--fill-close-sentences off`): a fill stops "
            "where the model ends it."
        )
    return (
        "MAGNET fills: a blank between sentences is filled until a sentence ends "
        "(`--fill-close-sentences on`); inside a sentence the model stops where it likes."
    )


def _stop_note(stop: str | None, branches: int | None = None) -> str:
    """Where the MAGNET fills of free length ended (and from how many first tokens)."""
    if stop == "join":
        note = (
            "MAGNET fills: each cut where the fill, its end and the text after the blank read "
            "likeliest, along what it wrote (`--fill-stop join`)"
        )
        if branches and branches > 1:
            return note + (
                f"; a blank inside a sentence filled from its {branches} likeliest first tokens, "
                f"the best of all their stops kept (`--fill-branches {branches}`)."
            )
        return note + (
            "; from the greedy first token only (`--fill-branches 1`)." if branches == 1 else "."
        )
    if stop == "model":
        return "MAGNET fills: each ends where the model ends it (`--fill-stop model`)."
    return "MAGNET fills: stop rule not recorded (a report from before it: the model's own end)."


def _prompt_note(formats: dict | None, no_copy: int | None, prompted: bool | None = True) -> str:
    """The prompted baselines' formats and copy guard (or that the run left them out)."""
    if prompted is False:
        return (
            "Prompted baselines: left out of the infill and units tasks (`--no-prompted`); "
            "the adapters are compared with each other and the base model's left-only rows."
        )
    if formats is None:
        return "Prompted baselines: formats not recorded (a report from before the formats)."
    asked = ", ".join(f"{table.title(s)} in `{f}`" for s, f in formats.items())
    guard = (
        f"no reply copies a run of {no_copy} words of its prompt (`--prompt-no-copy {no_copy}`)"
        if no_copy
        else "no copy guard (`--prompt-no-copy 0`: the prompts' own output)"
    )
    return f"Prompted baselines: {asked} (prompt formats: docs/method.md); {guard}."


def _cache_note(cache: dict | None) -> str:
    """How many of the prompted baselines' fills and scores this run reused."""
    if not cache:
        return "Prompted baselines: computed in this run."
    where = f" (`{cache['path']}`)" if cache.get("path") else " (no cache: --no-baseline-cache)"
    return (
        f"Prompted baselines: {cache['reused']} fills and span scores reused from earlier runs "
        f"under the same base weights, dtype, device and prompt code, {cache['computed']} "
        f"computed{where}."
    )


def _na_notes(report: dict) -> str:
    """One note per (system, reason), naming the tasks it covers."""
    notes: dict[tuple[str, str], list[str]] = {}
    for task, t in report["tasks"].items():
        for s, r in t["systems"].items():
            if "n/a" in r:
                notes.setdefault((_column(s), r["n/a"]), []).append(task)
    parts = [f"{s} ({', '.join(tasks)}): {reason}" for (s, reason), tasks in notes.items()]
    return "; ".join(parts) + "." if parts else "none."


def _timing_table(report: dict) -> list[str]:
    lines = ["| task | sizes | seconds |", "|---|---|---|"]
    for task, t in report["tasks"].items():
        sizes = ", ".join(f"{k} {_fmt_size(v)}" for k, v in t["sizes"].items())
        lines.append(f"| {TASK_TITLES[task]} | {sizes} | {t['seconds']:.1f} |")
    return lines


def _fmt_size(v) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def write_outputs(report: dict, output: Path) -> tuple[Path, Path]:
    output.mkdir(parents=True, exist_ok=True)
    md, js = output / "results.md", output / "results.json"
    md.write_text(render_markdown(report))
    js.write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    return md, js


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")
