"""What the benchmarks of MAGNET's unit-suite fills share (bench_fill_guard.py,
bench_length_hints.py, bench_stop_rules.py): their common flags, the engine with one adapter,
the held-out passages per domain, a table cell of a share with its interval (paired with a
reference setting's), the causal reading of the text after a blank, a fill cut where a rule
stops it, and the report's end."""

from __future__ import annotations

import argparse
import time

from common import ROOT, model_spec, write_report  # noqa: F401 (ROOT: the project on sys.path)

from magnet_model.evaluation.stats import paired_shares, share


def unit_parser(
    doc: str, fills: int, suites: str, out: str, adapter_required: bool = False
) -> argparse.ArgumentParser:
    """The flags every unit-fill benchmark takes (a benchmark adds its own)."""
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


def share_cell(flags: list[bool], against: list[bool] | None) -> tuple[str, dict | None]:
    """ "40% (26%–55%)", and with a reference's flags on the same cases the paired difference
    ", +8 pts (p=0.51)" -> (cell, the paired comparison or None)."""
    s = share(flags)
    cell = f"{s['share']:.0%} ({s['lo']:.0%}–{s['hi']:.0%})"
    if against is None:
        return cell, None
    d = paired_shares(flags, against)
    return cell + f", {100 * d['diff']:+.0f} pts (p={d['p']:.2g})", d


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
