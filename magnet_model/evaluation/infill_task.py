"""The evaluator's `infill` task: a random window removed from held-out passages of each
domain (domains.py), its perplexity per system, and what a reader sees of each system's fills
(python -m magnet_model.evaluation.evaluate, whose docstring describes every task)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from . import scoring
from .domains import n_passages
from .fills import fill_tokens, junk_ids
from .report import PROMPTED_KEYS, PROMPTED_ROWS, domain_key
from .runs import Entry, Run, _hybrid, _llm_only, _per_system, domain_passages
from .stats import paired_nll, paired_shares, share

PROMPTED = {s.shots: f"base {s.name}" for s in PROMPTED_ROWS}  # shots -> its fills' name


def _fits(engine, cases: list, tokenizer) -> list:
    """Cases whose five-shot prompt (the longest input of the task) fits the model's context."""
    rows = scoring.prompted_rows(tokenizer, cases, 5)
    cap = engine.max_input_tokens - engine.config.max_span_tokens
    return [c for c, (r, _) in zip(cases, rows, strict=True) if len(r.ids) <= cap]


def _domain_cases(run: Run, domain: str) -> list:
    e, z = run.engine, run.cfg.sizes
    n = n_passages(z, domain)
    passages = domain_passages(run.cfg, domain)
    cases = scoring.span_cases(e.tokenizer, passages, n, run.cfg.seed, z.passage_tokens)
    cases = _fits(e, cases, e.tokenizer)
    if not cases:
        raise ConfigError(f"No held-out {domain} passage is long enough for an infill case.")
    return cases


def task_infill(run: Run) -> dict:
    e, z, b = run.engine, run.cfg.sizes, run.cfg.batch_size
    domains = {d: _domain_cases(run, d) for d in run.cfg.domains}
    # domain -> system ("magnet", "base zero-shot", ...) -> the spans it filled
    generated: dict[str, dict[str, list]] = {d: {} for d in domains}
    # domain -> hybrid adapter -> its per-case span NLLs and fill flags (paired comparisons)
    per_case: dict[str, dict[str, dict]] = {d: {} for d in domains}

    def measure(s: Entry, domain: str, cases: list, filled: dict[str, list]) -> dict:
        r = {
            "causal_left_ppl": scoring.span_perplexity(scoring.causal_span_nll(e, cases, s.name, b))
        }
        to_fill = cases[: z.n_infills]
        if s.name == "base" and run.cfg.prompted:
            for (key, _), row in zip(PROMPTED_KEYS, PROMPTED_ROWS, strict=True):
                shots = row.shots
                nll = run.baselines.span_nll(cases, shots, max(1, b // 2))
                r[f"{key}_ppl"] = scoring.span_perplexity(nll)
                r[f"{key}_ppl_with_end"] = scoring.span_perplexity(nll, with_end=True)
                texts = [c.blanked("[blank]") for c in to_fill]
                made = run.baselines.fill_many(texts, shots, z.max_span_tokens)
                spans = [r.spans[0] for r in made]
                filled[PROMPTED[shots]] = spans
                ended = {"ended_share": [not x.capped for x in spans]}
                r[f"{key}_fills"] = add_shares(fill_stats(e, spans, to_fill, None), ended)
        if _hybrid(run, s):
            nll = scoring.hybrid_span_nll(e, cases, s.name, b)
            r["hybrid_ppl"] = scoring.span_perplexity(nll)
            r["hybrid_ppl_with_end"] = scoring.span_perplexity(nll, with_end=True)
            texts = [c.blanked("[blank]") for c in to_fill]
            spans = [r.spans[0] for r in e.infill_many(texts, s.name, z.max_span_tokens)]
            filled[s.name] = spans
            per_case[domain][s.name] = {
                "span": [x.span for x in nll],
                "tokens": [x.n_tokens for x in nll],
                "flags": {
                    "stop_share": [x.stopped for x in spans],
                    "fit_share": [x.fits for x in spans],
                },
            }
            r["end_nll_mean"] = float(np.mean([x.end for x in nll]))
            r["end_auc"] = end_auc(nll)
            infill_stats(spans, to_fill, r)
            fill_stats(e, spans, to_fill, s.name, r)
        return r

    def one(s: Entry) -> dict:
        r: dict = {}
        for d, cases in domains.items():
            m = measure(s, d, cases, generated[d])
            if domain_key(d):
                r[domain_key(d)] = m
            else:
                r.update(m)
        return r

    systems = _per_system(run, "infill", one, _llm_only)
    out: dict = {"sizes": {}, "systems": systems, "examples": []}
    paired = {d: _paired(per) for d, per in per_case.items() if len(per) > 1}
    if paired:
        out["paired"] = paired
    for d, cases in domains.items():
        at = f"{domain_key(d)}_" if domain_key(d) else ""
        out["sizes"][f"{at}passages"] = len(cases)
        out["sizes"][f"{at}span_tokens_mean"] = float(np.mean([c.n_tokens for c in cases]))
        out[f"{at}examples"] = _infill_examples(run, cases[: z.n_examples], generated[d])
    return out


def _paired(per: dict[str, dict]) -> dict:
    """The first hybrid adapter against each other one on the same cases (stats.py): hybrid
    span PPL ratio, and the stop and fit shares' differences."""
    names = list(per)
    first = per[names[0]]
    out = {}
    for name in names[1:]:
        other = per[name]
        comp = {"hybrid_ppl": paired_nll(first["span"], other["span"], first["tokens"])}
        for flag, values in first["flags"].items():
            comp[flag] = paired_shares(values, other["flags"][flag])
        out[f"{names[0]} vs {name}"] = comp
    return out


def add_shares(out: dict, flags: dict[str, list[bool]]) -> dict:
    """Each flag list as `name` -> its share in out, and its 95% interval under
    out["intervals"][name] (stats.share); returns out."""
    for name, values in flags.items():
        s = share(values)
        out[name] = s["share"]
        out.setdefault("intervals", {})[name] = [s["lo"], s["hi"]]
    return out


def infill_stats(spans: list, cases: list, out: dict | None = None) -> dict:
    """How MAGNET's infills end (one blank each): by <span_end>, where they ran into the
    right context, or where the stop rule cut them (decoder rules), against the true spans they
    replace; added to `out`."""
    flags = {
        "stop_share": [s.stopped for s in spans],  # <span_end> itself
        "joined_share": [s.end_reason == "joined" for s in spans],
        "best_share": [s.end_reason == "best" for s in spans],  # inference/stops.py
        "fit_share": [s.fits for s in spans],  # ended inside the blank
    }
    return add_shares({} if out is None else out, flags)


def fill_stats(engine, spans: list, cases: list, adapter: str | None, out=None) -> dict:
    """What a reader sees of one system's fills (one blank each) against the true spans: the
    length, empty fills, fills within +-30% of the true length (tokens, fill_tokens) and fills
    holding a token that is no text (junk_ids; on the ids the system wrote); added to `out`."""
    lengths = [fill_tokens(engine, s.text) for s in spans]
    truth = [c.n_tokens for c in cases[: len(spans)]]
    junk = junk_ids(engine, adapter)
    written = [s.written_ids if s.written_ids is not None else s.token_ids for s in spans]
    out = {} if out is None else out
    out.update(
        infill_tokens_mean=float(np.mean(lengths)),
        true_span_tokens_mean=float(np.mean(truth)),
        length_ratio=float(np.mean(lengths) / np.mean(truth)),
        n_infills=len(spans),
    )
    flags = {
        "within_30_share": [abs(n / t - 1) <= 0.3 for n, t in zip(lengths, truth, strict=True)],
        "empty_share": [not s.text.strip() for s in spans],
        "junk_share": [not junk.isdisjoint(w) for w in written],
    }
    return add_shares(out, flags)


def end_auc(scores: list) -> float:
    """How well p(<span_end>) finds the true end: ROC AUC over every span position of the
    true spans (SpanNLL.end_logp), the true end positive, the other positions negative;
    nan when there is no negative (every span one token long)."""
    from sklearn.metrics import roc_auc_score

    values = np.concatenate([s.end_logp for s in scores])
    labels = np.concatenate([np.arange(len(s.end_logp)) == len(s.end_logp) - 1 for s in scores])
    if labels.all():
        return math.nan
    return float(roc_auc_score(labels, values))


def _infill_examples(run: Run, cases: list, generated: dict[str, list]) -> list[dict]:
    """The blanked passage, the truth, each system's infill (prompted ones generated here
    when the fills measured did not cover the case)."""
    cap = run.cfg.sizes.max_span_tokens
    base_ok = run.cfg.prompted and any(s.name == "base" and s.available for s in run.systems)
    out = []
    for i, c in enumerate(cases):
        text = c.blanked("[blank]")
        ex = {"text": text, "truth": c.span_text.strip()}
        for name, spans in generated.items():
            if i < len(spans):
                ex[name] = {"infill": spans[i].text.strip(), "end_reason": spans[i].end_reason}
        for shots, key in PROMPTED.items():
            if base_ok and key not in ex:
                span = run.baselines.fill(text, shots, cap).spans[0]
                ex[key] = {"infill": span.text, "end_reason": span.end_reason}
        out.append(ex)
    return out
