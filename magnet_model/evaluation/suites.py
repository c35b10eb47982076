"""The evaluator's unit suites (task `units`): the blanks a reader makes, not random windows.

For each held-out domain (Wikipedia, Lee news, convention speeches: domains.py) and each suite,
one unit (units.py) is removed from the first `unit_tokens` tokens of a passage, away from its
edges:
- sentence: a whole sentence (the paper's human study: a story with one sentence removed);
- phrase: a clause or phrase between punctuation;
- word: a word or a name.
Per suite and system:
- span PPL of the true unit: MAGNET in the hybrid layout (left + right context, the gap its
  adapter records for a blank of unknown length), the base model prompted zero- and
  five-shot, and the base model from the left context only;
- on greedy fills (the first `unit_fills` cases): the share that stopped before the cap (for
  MAGNET also by <span_end> alone), the share that is exactly one complete sentence
  (sentence suite) or holds no sentence end (phrase and word suites), the length ratio
  against the truth, the share with a repeated 3-gram, the share with a token that is no
  text, and the base model's perplexity of the whole completed text (left + fill + right)
  against the original text's: the fluency a reader feels; for the prompted baselines also
  the share of chat or meta replies, of copies of the passage and of an example, and of
  fills where the copy guard refused a token (fills.prompt_flags);
- `unit_examples` fills per suite side by side with the truth, for reading by eye.
"""

from __future__ import annotations

import math
import random

import numpy as np

from .. import prompts
from ..tokens import word_edges, word_start_table
from ..units import token_units
from .domains import n_passages
from .fills import (
    fill_tokens,
    has_sentence_end,
    is_one_sentence,
    junk_ids,
    prompt_flags,
    repeats_ngram,
)
from .report import PROMPTED_KEYS, PROMPTED_ROWS
from .scoring import SpanCase, causal_nll, causal_span_nll, hybrid_span_nll, span_perplexity
from .stats import paired_nll, paired_shares, share

SUITES = ("sentence", "phrase", "word")
MIN_LEFT = 16  # tokens of context before a removed unit
MIN_RIGHT = 8  # ... and after it
MAX_UNIT = 64  # tokens: the fill cap of the evaluator


def unit_case(
    tokenizer, text: str, kind: str, rng: random.Random, max_tokens: int, table
) -> SpanCase | None:
    """One unit of `kind` removed from the first max_tokens tokens of a passage (seeded
    choice among those with MIN_LEFT tokens before and MIN_RIGHT after); None if none."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc.input_ids[:max_tokens], enc.offset_mapping[:max_tokens]
    n = len(ids)
    if n < MIN_LEFT + MIN_RIGHT + 1:
        return None
    text = text[: offsets[-1][1]]
    units = [
        (a, b)
        for a, b, k in token_units(text, offsets, word_edges(ids, table))
        if k == kind and a >= MIN_LEFT and b <= n - MIN_RIGHT and b - a <= MAX_UNIT
    ]
    if not units:
        return None
    a, b = rng.choice(units)
    cs, ce = offsets[a][0], offsets[b][0]
    return SpanCase(ids[:a], ids[a:b], ids[b:], text[:cs], text[cs:ce], text[ce:])


def unit_cases(tokenizer, passages, kind: str, n: int, seed: int, max_tokens: int) -> list:
    """The first n passages that hold such a unit, each cut with its own seeded generator."""
    table = word_start_table(tokenizer)
    cases = []
    for i, text in enumerate(passages):
        case = unit_case(
            tokenizer, text, kind, random.Random(f"{seed}-{kind}-{i}"), max_tokens, table
        )
        if case is not None:
            cases.append(case)
        if len(cases) == n:
            break
    return cases


def fill_flags(
    engine, kind: str, results: list, adapter: str | None, prompted: tuple | None = None
) -> dict[str, list[bool]]:
    """Per fill (InfillResult per case, one blank each): what a reader sees, as flags, each a
    share of the suite (with its interval) and compared fill by fill between two adapters.
    The sentence suite reads one_sentence, the phrase and word suites no_sentence_end.
    prompted: (shots, prompt format) of a prompted system's fills, which also get
    fills.prompt_flags (chat replies, copies of the passage or of an example, the copy
    guard's interventions)."""
    spans = [r.spans[0] for r in results]
    texts = [s.text.strip() for s in spans]
    junk = junk_ids(engine, adapter)
    written = [s.written_ids if s.written_ids is not None else s.token_ids for s in spans]
    flags = {
        "stopped": [not s.capped for s in spans],
        "repeat_3gram": [repeats_ngram(t) for t in texts],
        "junk": [not junk.isdisjoint(w) for w in written],
        "empty": [not t for t in texts],
    }
    if kind == "sentence":
        flags["one_sentence"] = [is_one_sentence(t) for t in texts]
    else:
        flags["no_sentence_end"] = [not has_sentence_end(t) for t in texts]
        flags["stopped_no_sentence_end"] = [
            not s.capped and not has_sentence_end(t) for s, t in zip(spans, texts, strict=True)
        ]
    if adapter is not None:
        flags["span_end"] = [s.stopped for s in spans]
    if prompted is not None:
        flags.update(prompt_flags(results, *prompted))
    return flags


def fill_quality(
    engine, kind: str, cases: list, results: list, adapter: str | None, prompted=None
) -> dict:
    """What a reader sees of one system's fills of one suite (InfillResult per case): each
    share (`{flag}_share`) with its 95% interval (`intervals`), the length ratio (of the mean
    lengths, the targets' measure; and the median fill's, `length_ratio_median`), and the base
    model's perplexity of the completed text against the original's; `flags` keeps the
    per-fill flags for paired comparisons. prompted: as fill_flags."""
    flags = fill_flags(engine, kind, results, adapter, prompted)
    texts = [r.spans[0].text.strip() for r in results]
    lengths = [fill_tokens(engine, t) for t in texts]
    truth = [c.n_tokens for c in cases]
    originals = [c.left_text + c.span_text + c.right_text for c in cases]
    filled_nll, filled_n = causal_nll(engine, [r.filled for r in results], None, 10**6)
    orig_nll, orig_n = causal_nll(engine, originals, None, 10**6)
    out: dict = {"n_fills": len(results), "intervals": {}}
    for name, values in flags.items():
        s = share(values)
        out[f"{name}_share"] = s["share"]
        out["intervals"][f"{name}_share"] = [s["lo"], s["hi"]]
    out.update(
        length_ratio=float(np.mean(lengths) / np.mean(truth)),
        # the typical fill: one blank filled with a whole sentence moves the mean's ratio by a
        # quarter on a word suite (a 30-token fill among 80 words), the median not at all
        length_ratio_median=float(np.median(np.array(lengths) / np.array(truth))),
        completed_ppl=math.exp(filled_nll / filled_n),
        original_ppl=math.exp(orig_nll / orig_n),
        flags=flags,
    )
    out["completed_ppl_ratio"] = out["completed_ppl"] / out["original_ppl"]
    return out


def paired(first: dict, other: dict, kind: str) -> dict:
    """Two adapters' results on the same suite (the same cases): share differences with
    their interval and McNemar p (stats.paired_shares), and the hybrid span PPL ratio with
    its interval and Wilcoxon p (stats.paired_nll)."""
    out = {}
    names = ["one_sentence" if kind == "sentence" else "no_sentence_end", "repeat_3gram",
             "stopped"]  # fmt: skip
    for name in names:
        if name in first["flags"] and name in other["flags"]:
            out[f"{name}_share"] = paired_shares(first["flags"][name], other["flags"][name])
    a, b = first.get("span_nll"), other.get("span_nll")
    if a and b:
        out["hybrid_ppl"] = paired_nll(a["span"], b["span"], a["tokens"])
    return out


def suite_result(run, kind: str, cases: list, magnets: list) -> tuple[dict, list]:
    """One suite of one domain: every system's scores and fills, the paired comparisons of
    the adapters (the first against each other), and the examples. The prompted baselines
    come from run.baselines (computed once per set of conditions: baselines.py)."""
    e, z, b = run.engine, run.cfg.sizes, run.cfg.batch_size
    to_fill = cases[: z.unit_fills]
    blanked = [c.blanked("[blank]") for c in to_fill]
    cap = z.max_span_tokens
    systems: dict = {}
    fills: dict[str, list] = {}
    base = {"left_only_ppl": span_perplexity(causal_span_nll(e, cases, None, b))}
    prompted = zip(PROMPTED_KEYS, PROMPTED_ROWS, strict=True) if run.cfg.prompted else ()
    for (key, name), row in prompted:
        nll = run.baselines.span_nll(cases, row.shots, max(1, b // 2))
        base[f"{key}_ppl"] = span_perplexity(nll)
        results = run.baselines.fill_many(blanked, row.shots, cap)
        fills[name] = results
        fmt = prompts.get_format(e.runner.prompted_fill.format_of(name), row.shots, e.tokenizer)
        systems[name] = fill_quality(e, kind, to_fill, results, None, (row.shots, fmt))
        systems[name]["prompt_format"] = fmt.name
    systems["base"] = base
    for name in magnets:
        nll = hybrid_span_nll(e, cases, name, b)
        r = {
            "hybrid_ppl": span_perplexity(nll),
            "span_nll": {"span": [x.span for x in nll], "tokens": [x.n_tokens for x in nll]},
        }
        results = e.infill_many(blanked, name, cap)
        fills[name] = results
        r.update(fill_quality(e, kind, to_fill, results, name))
        systems[name] = r
    comparisons = {
        f"{first} vs {other}": paired(systems[first], systems[other], kind)
        for first, other in ((magnets[0], m) for m in magnets[1:])
    }
    examples = [
        {
            "text": t,
            "truth": c.span_text.strip(),
            **{name: rs[i].spans[0].text.strip() for name, rs in fills.items()},
        }
        for i, (t, c) in enumerate(zip(blanked, to_fill, strict=True))
    ][: z.unit_examples]
    sizes = {
        "cases": len(cases),
        "fills": len(to_fill),
        "span_tokens_mean": float(np.mean([c.n_tokens for c in cases])),
    }
    out = {"sizes": sizes, "systems": systems}
    if comparisons:
        out["paired"] = comparisons
    return out, examples


def run_suites(run, passages: dict[str, list[str]], magnets: list[str]) -> dict:
    """Every suite of every domain (the evaluator's `units` task): passages per domain, the
    hybrid adapters to fill with (the base model's rows are always there)."""
    e, z = run.engine, run.cfg.sizes
    out: dict = {"systems": {}, "sizes": {}, "suites": {}, "examples": {}}
    for domain, texts in passages.items():
        n = n_passages(z, domain)
        for kind in run.cfg.suites:
            run.doing(f"units: {domain} {kind}")
            cases = unit_cases(e.tokenizer, texts, kind, n, run.cfg.seed, z.unit_tokens)
            if not cases:
                out["suites"][f"{domain}/{kind}"] = {"n/a": f"no held-out {domain} {kind} unit"}
                continue
            result, examples = suite_result(run, kind, cases, magnets)
            out["suites"][f"{domain}/{kind}"] = result
            out["examples"][f"{domain}/{kind}"] = examples
            out["sizes"][f"{domain}/{kind}"] = result["sizes"]["cases"]
    return out
