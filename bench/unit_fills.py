"""What the benchmarks of MAGNET's unit-suite fills share (bench_fill_guard.py,
bench_length_hints.py, bench_stop_rules.py, bench_first_branches.py): their common flags, the
engine with one adapter, the held-out (or training-split) passages per domain and the suites'
cases, the Markdown table's rows, the share cells of a setting with their intervals (paired with
a reference setting's), a row of a mean against the reference's, the causal reading of the text
after a blank, a fill's candidate stops scored as the decoder's `join` scores them, a fill cut
where a rule stops it, and the report's end."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence

from common import ROOT, Row, model_spec, write_report  # noqa: F401 (ROOT: the project on sys.path)

from magnet_model.evaluation.stats import paired_shares, share

CAP = 64  # the most tokens a fill may take, in every unit-fill benchmark
WINDOW = "window"  # a suite of the infill task's random 8-32-token windows (not a unit suite)


def unit_parser(
    doc: str,
    fills: int,
    suites: str,
    out: str,
    adapter_required: bool = False,
    split: bool = False,
    bonus_rule: str | None = None,
) -> argparse.ArgumentParser:
    """The flags every unit-fill benchmark takes (a benchmark adds its own); `split`: also
    --split (split_sources); `bonus_rule`: also --length-bonus, comma-separated per-token
    bonuses B, each a rule named bonus_rule+B (parsed into a list of floats)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    if adapter_required:
        p.add_argument("--adapter", required=True, help="the MAGNET adapter folder to fill with")
    else:
        p.add_argument("--adapter", default="adapters/magnet", help="the MAGNET adapter folder")
    p.add_argument("--fills", type=int, default=fills, help="cases per suite and domain")
    p.add_argument("--suites", default=suites)
    p.add_argument("--domains", default="wikipedia,news")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=out)
    if split:
        p.add_argument(
            "--split",
            default="heldout",
            choices=("heldout", "dev"),
            help="the evaluator's held-out passages, or the training split's (to choose a setting)",
        )
    if bonus_rule is not None:
        p.add_argument(
            "--length-bonus",
            type=lambda text: [float(b) for b in text.split(",") if b.strip()],
            default=[],
            help=f"comma-separated per-token bonuses B: rules {bonus_rule}+B",
        )
    return p


def magnet_engine(adapter: str, threads: int | None):
    """The default base model with `adapter` loaded as "magnet" (torch threads if given)."""
    import torch

    from magnet_model.inference.engine import Engine

    if threads:
        torch.set_num_threads(threads)
    return Engine.from_spec(model_spec({"magnet": adapter}))


def heldout_sources() -> dict:
    """Domain -> a function returning its held-out passages (the evaluator's)."""
    from magnet_model.data import lee_background_docs, wikipedia_paragraphs

    return {"wikipedia": lambda: wikipedia_paragraphs("heldout"), "news": lee_background_docs}


def dev_sources() -> dict:
    """Domain -> a function returning passages of the training split (never held out), in a
    fixed shuffled order (the cases are the first passages that hold a unit, and the split is
    in article order): for choosing a setting before it is read on the held-out cases."""
    import random

    from magnet_model.data import conll_news, wikipedia_paragraphs

    def shuffled(texts) -> list[str]:
        texts = list(texts)
        random.Random("dev").shuffle(texts)
        return texts

    return {
        "wikipedia": lambda: shuffled(wikipedia_paragraphs("train")),
        "news": lambda: shuffled(conll_news()),
    }


def split_sources(split: str) -> dict:
    """--split: heldout_sources or dev_sources."""
    return heldout_sources() if split == "heldout" else dev_sources()


def suite_cases(args, engine, sources: dict, domain: str) -> Iterator[tuple[str, str, list]]:
    """("domain/kind", kind, its cases) for every suite the flags name, on the domain's
    passages: the evaluator's unit cases (seeded), or for WINDOW the infill task's random
    windows."""
    from magnet_model.evaluation.scoring import span_cases
    from magnet_model.evaluation.suites import unit_cases

    passages = sources[domain]()
    for kind in args.suites.split(","):
        if kind == WINDOW:
            cases = span_cases(engine.tokenizer, passages, args.fills, args.seed, 192)
        else:
            cases = unit_cases(engine.tokenizer, passages, kind, args.fills, args.seed, 256)
        yield f"{domain}/{kind}", kind, cases


def md_row(*cells: str) -> str:
    """One row of a Markdown table."""
    return "| " + " | ".join(cells) + " |"


def md_head(*cells: str) -> list[str]:
    """A Markdown table's header row and its rule."""
    return [md_row(*cells), "|" + "---|" * len(cells)]


def share_cell(flags: list[bool], against: list[bool] | None) -> tuple[str, dict | None]:
    """ "40% (26%–55%)", and with a reference's flags on the same cases the paired difference
    ", +8 pts (p=0.51)" -> (cell, the paired comparison or None)."""
    s = share(flags)
    cell = f"{s['share']:.0%} ({s['lo']:.0%}–{s['hi']:.0%})"
    if against is None:
        return cell, None
    d = paired_shares(flags, against)
    return cell + f", {100 * d['diff']:+.0f} pts (p={d['p']:.2g})", d


def share_cells(r: dict, flags: Sequence[str], ref: dict | None, paired_key: str) -> list[str]:
    """A setting's share cells, one per flag of its fills (r["flags"]), each paired with the
    reference setting's flags on the same cases (ref; None: not paired); the paired
    differences are kept in r[paired_key][flag]."""
    cells = []
    for flag in flags:
        cell, d = share_cell(r["flags"][flag], None if ref is None else ref["flags"][flag])
        if d is not None:
            r.setdefault(paired_key, {})[flag] = d
        cells.append(cell)
    return cells


def share_row(measure: str, r: dict, ref: dict, flag: str, what: str) -> Row:
    """A Row of the share of a setting's fills with `flag` set against the reference
    setting's on the same cases (`what` says what the reference is)."""
    n = len(r["flags"][flag])
    return Row(measure, sum(r["flags"][flag]) / n, "share", sum(ref["flags"][flag]) / n, what)


def seconds_row(measure: str, seconds: dict, name: str, ref: str, n: int, what: str) -> Row:
    """A Row of seconds per fill of `name` against `ref` (seconds: each one's total over the
    same n cases, in one process; `what` says what the reference is)."""
    return Row(measure, seconds[name] / n, "s", seconds[ref] / n, what)


def right_logps(engine, scorer, case, fills: list[list[int]], n: int) -> list[float]:
    """Per fill (token ids): log P of the first n tokens after the blank, read causally after
    the text before it and the fill (scorer: an adapter name, or None for the base model)."""
    from magnet_model.evaluation.scoring import Row as ScoreRow
    from magnet_model.evaluation.scoring import row_nlls
    from magnet_model.layout import IGNORE

    right = case.right_ids[:n]
    rows = []
    for fill in fills:
        ids = case.left_ids + list(fill) + right
        labels = [IGNORE] * (len(ids) - len(right) - 1) + right + [IGNORE]
        rows.append(ScoreRow(ids, labels))
    return [-float(x.sum()) for x in row_nlls(engine, rows, scorer, "causal", 8)]


def scored_stops(engine, scorer, case, result) -> list[tuple[int, float, float, float]]:
    """Every candidate stop of a one-blank fill as the decoder's `join` reads it
    (inference/stops.py): (t, log P of its first t tokens, of <span_end> after them, of the
    first RIGHT_TOKENS tokens after the blank read causally after the cut fill by `scorer`)."""
    from magnet_model.inference.stops import RIGHT_TOKENS, candidates

    span = result.spans[0]
    cands = candidates(span.trace, span.token_ids, span.end_reason, engine.runner.cut_points)
    fills = [span.token_ids[:t] for t, _, _ in cands]
    right = right_logps(engine, scorer, case, fills, RIGHT_TOKENS)
    return [(t, a, e, q) for (t, a, e), q in zip(cands, right, strict=True)]


def finish(args, engine, rows: list, report: dict, lines: list[str], t0: float) -> None:
    """Print the whole table and write the report (the table, the seconds it took, rows)."""
    table = "\n".join(lines)
    print(table)
    report["table"] = table
    report["seconds"] = round(time.perf_counter() - t0, 1)
    runner = engine.runner
    write_report(args.out, rows, report, runner.device, runner.loaded.dtype_name)


def cut(engine, result, t: int):
    """A one-blank InfillResult with its span cut after t tokens (a stop a rule picked)."""
    from magnet_model.inference.blanks import FilledSpan, InfillResult

    span = result.spans[0]
    if t == len(span.token_ids):
        return result
    ids = list(span.token_ids[:t])
    text = engine.tokenizer.decode(ids)
    s = FilledSpan(text, ids, 0, 0, "end", written=len(span.token_ids), trace=span.trace)
    return InfillResult(result.text, "", [s], "magnet", result.adapter, 0, 0.0, 0.0, 0.0)


def rule_fills(engine, kind: str, results: list, truth: list[int]) -> dict:
    """What a rule's fills (one-blank InfillResults) are, per case and in sum: the suite's flags
    (fill_flags) plus within_2x (0.5-2x the true length in tokens), the length ratio, the
    fills' text."""
    from magnet_model.evaluation.fills import fill_tokens
    from magnet_model.evaluation.suites import fill_flags

    flags = fill_flags(engine, kind, results, "magnet")
    texts = [x.spans[0].text.strip() for x in results]
    written = [fill_tokens(engine, t) for t in texts]
    flags["within_2x"] = [0.5 * t <= w <= 2 * t for w, t in zip(written, truth, strict=True)]
    return {"flags": flags, "length_ratio": sum(written) / sum(truth), "fills": texts}
