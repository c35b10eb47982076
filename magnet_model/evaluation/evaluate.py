"""python -m magnet_model.evaluation.evaluate: the paper's protocols, base / llm2vec / magnet /
MiniLM side by side, one Markdown table (results.md) and everything measured (results.json).

Tasks (--tasks, default all):
- infill      held-out passages (first 192 tokens) of two domains (--domains): Wikipedia, and
              the Lee background news corpus (gensim's; another source, never trained on), so
              that overfitting to Wikipedia shows. One span of 8-32 tokens (whole words,
              middle third, seeded) removed. Perplexity of the TRUE span: MAGNET in the
              hybrid layout (left + right context), the base model prompted zero- and five-shot
              (prompts.py), and every causal system from the left context only (reference).
              Then every infilling system fills the first --n-infills blanks greedily (cap 64
              tokens): MAGNET (each hybrid adapter) and the prompted base zero- and five-shot.
              What a reader sees, per system: the length against the true span's (tokens of
              the fill's text, counted as the span's are in the passage) and the share within
              +-30% of it, the share of empty fills, the share holding a token that is no text
              (a never-trained head row, <span_end>'s tie or any other special id; on the ids
              the system wrote); for MAGNET the share that stop by themselves (<span_end>), end
              where they run into the right context, or either; for the prompted baselines the
              share of replies that ended before the cap (a stop token or a line break). For
              MAGNET also the mean NLL of <span_end> at the TRUE end and the ROC AUC of
              p(<span_end>) at every position of the true span (the true end against the
              others; read as decoding reads it): whether the model knows where a span ends.
              The first domain's numbers sit at the top of a system's result, the news
              domain's under "news". Examples go to the JSON.
              Span perplexities divide by the span's token count in the passage for every
              system, so they compare the probability of the same text (scoring.py).
- sts         STS-B test (seeded sample), Spearman x 100 of cosine similarities. Pooling per
              system as the engine does it (MAGNET: last token + instruction, bidirectional;
              llm2vec: as recorded with the adapter; base: causal mean); all-MiniLM-L6-v2.
- retrieval   held-out vital-article extracts found by their short description (recall@1,
              MRR; retrieval.py says why this query and corpus), same vectors as for STS-B.
- probe       linear probe on frozen word features for POS, chunking, NER (probe.py).
- repetition  Rep-4 and Rep-Sen of greedy continuations (128 tokens), causal mask, adapter
              on, of two kinds of prompt: the first 32 tokens of held-out passages, and short
              open prompts ("The history of the printing press", OPEN_PROMPTS), where a model
              that loops shows it at once. Each kind is also reported on its own.
- knowledge   causal perplexity of held-out passages (first 256 tokens), adapter on vs base.

Systems that are not loaded (or a task does not apply to) are reported as n/a with the reason.
A system named ADAPTER@POOLING (magnet@mean, base@last) is that adapter with its sentence
pooling overridden, measured on the sentence tasks (sts, retrieval) only.
--quick shrinks every sample so the whole run takes a few minutes on 2 CPU cores: 6 passages
and 4 news passages (2 generated infills per system and domain), 100 STS-B pairs, 50 extracts
for retrieval, probe on 40 / 20 sentences, 2 continuations of 64 tokens (CPU decoding is the
slow part), 6 passages for perplexity.
Size flags override either mode.
--heldout FILE (one passage a line) replaces held-out Wikipedia in infill, repetition and
knowledge; with it and without minilm in --systems, neither gensim nor the MiniLM folder is needed
(the news domain, which needs gensim, then runs only when --domains names it).
"""

from __future__ import annotations

import argparse
import math
import random
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from .. import systems as table
from ..errors import ConfigError, MagnetError
from ..hardware import describe
from ..systems import ENCODER
from . import scoring
from .fills import fill_tokens, junk_ids
from .report import (
    DOMAINS,
    PROMPTED_KEYS,
    PROMPTED_ROWS,
    TASKS,
    check_targets,
    domain_key,
    write_outputs,
)
from .suites import run_suites

SENTENCE_TASKS = ("sts", "retrieval")
DEFAULT_SYSTEMS = table.for_task("evaluate")
PROMPTED = {s.shots: f"base {s.name}" for s in PROMPTED_ROWS}  # shots -> its fills' name
DEFAULT_OUTPUT = "artifacts/eval"


# ---------------------------------------------------------------- configuration


@dataclass
class Sizes:
    """How much of each data set a run uses (0 for n_sts: the whole STS-B test set)."""

    n_passages: int = 100  # infill: passages scored
    n_news_passages: int = 100  # infill: Lee news passages scored (the second domain)
    n_infills: int = 30  # infill: of those, filled by generation (stop share; decoding is slow)
    n_examples: int = 3  # infill: examples (with prompted infills) kept in the JSON
    passage_tokens: int = 192
    max_span_tokens: int = 64  # cap of a generated infill
    unit_tokens: int = 256  # units: passage length (the trained length)
    unit_fills: int = 20  # units: cases filled by each system, per suite and domain
    unit_examples: int = 10  # units: fills kept per suite for reading
    n_sts: int = 0
    n_retrieval: int = 500  # retrieval: held-out vital extracts in the corpus (0 = all ~1000)
    n_probe_train: int = 500  # CoNLL-2003 train sentences
    n_probe_test: int = 200  # CoNLL-2003 test sentences
    n_prompts: int = 12  # repetition: continuations per system (12 x 128 tokens each) ...
    n_open_prompts: int = 8  # ... plus this many of the short open prompts (OPEN_PROMPTS)
    prompt_tokens: int = 32
    max_new_tokens: int = 128
    n_ppl: int = 100  # knowledge: held-out passages
    ppl_tokens: int = 256


QUICK = Sizes(  # CPU decoding reads every weight per token: generation is kept short
    n_passages=6,
    n_news_passages=4,
    n_infills=2,
    n_examples=1,
    unit_fills=2,
    unit_examples=2,
    n_sts=100,
    n_retrieval=50,
    n_probe_train=40,
    n_probe_test=20,
    n_prompts=2,
    n_open_prompts=2,
    max_new_tokens=64,
    n_ppl=6,
)

SIZE_FLAGS = {  # flag -> (Sizes field, help)
    "--n-passages": ("n_passages", "infill: held-out passages scored"),
    "--n-news-passages": ("n_news_passages", "infill: held-out Lee news passages scored"),
    "--n-infills": ("n_infills", "infill: of those, filled by each system (per domain)"),
    "--n-examples": ("n_examples", "infill: examples kept in the JSON"),
    "--unit-fills": ("unit_fills", "units: cases filled per suite, domain and system"),
    "--unit-examples": ("unit_examples", "units: fills kept per suite for reading"),
    "--n-sts": ("n_sts", "STS-B test pairs (0 = all 1379)"),
    "--n-retrieval": ("n_retrieval", "retrieval: held-out vital extracts (0 = all)"),
    "--n-probe-train": ("n_probe_train", "probe: CoNLL-2003 train sentences"),
    "--n-probe-test": ("n_probe_test", "probe: CoNLL-2003 test sentences"),
    "--n-prompts": ("n_prompts", "repetition: passage-start continuations per system"),
    "--n-open-prompts": ("n_open_prompts", "repetition: short open prompts per system"),
    "--max-new-tokens": ("max_new_tokens", "repetition: tokens per continuation"),
    "--n-ppl": ("n_ppl", "knowledge: held-out passages"),
}


@dataclass
class EvalConfig:
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    systems: list[str] = field(default_factory=lambda: list(DEFAULT_SYSTEMS))
    sizes: Sizes = field(default_factory=Sizes)
    quick: bool = False
    seed: int = 0
    batch_size: int = 8
    output: Path = Path(DEFAULT_OUTPUT)
    progress: bool = True
    heldout: Path | None = None  # one passage per line instead of held-out Wikipedia (no gensim)
    domains: list[str] = field(default_factory=lambda: list(DOMAINS))  # of the infill task


def _names(value: str, known: tuple[str, ...] | None, what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ConfigError(f"--{what} is empty; give a comma-separated list.")
    if known is not None:
        bad = [n for n in names if n not in known]
        if bad:
            raise ConfigError(f"Unknown {what}: {', '.join(bad)}; choose from {', '.join(known)}.")
    return list(dict.fromkeys(names))


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Flags -> EvalConfig; --quick sets the small sizes, explicit size flags still win."""
    sizes = replace(QUICK) if args.quick else Sizes()
    for flag, (name, _) in SIZE_FLAGS.items():
        value = getattr(args, name)
        if value is None:
            continue
        zero_ok = ("n_sts", "n_retrieval", "n_open_prompts", "n_examples", "unit_examples")
        if value < 0 or (value == 0 and name not in zero_ok):
            raise ConfigError(
                f"{flag} must be at least 1 (n-sts, n-retrieval: 0 = all; n-examples, "
                f"n-open-prompts: 0 = none), not {value}."
            )
        setattr(sizes, name, value)
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, not {args.batch_size}.")
    output = Path(args.output).expanduser()
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is a file; give a directory.")
    heldout = None
    if args.heldout:
        heldout = Path(args.heldout).expanduser()
        if not heldout.is_file():
            raise ConfigError(
                f"--heldout {heldout} is not a file; give a text file, one passage a line."
            )
    # --heldout promises a run without gensim: the news domain then only when asked for
    default = [DOMAINS[0]] if heldout else list(DOMAINS)
    domains = _names(args.domains, DOMAINS, "domains") if args.domains is not None else default
    return EvalConfig(
        heldout=heldout,
        domains=domains,
        tasks=_names(args.tasks, TASKS, "tasks"),
        systems=_names(args.systems, None, "systems"),
        sizes=sizes,
        quick=args.quick,
        seed=args.seed,
        batch_size=args.batch_size,
        output=output,
        progress=not args.no_progress,
    )


# ---------------------------------------------------------------- systems and hardware


@dataclass
class Entry:
    """A system as this run has it: its name as asked, how the evaluator runs it, and whether
    it can."""

    name: str
    kind: str  # "llm" (base or an adapter) or "encoder" (MiniLM): from the systems table
    reason: str = ""  # why it is not available; "" when it is
    pooling: str | None = None  # ADAPTER@POOLING: the sentence pooling overridden

    @property
    def available(self) -> bool:
        return not self.reason

    @property
    def adapter(self) -> str:
        return self.name.partition("@")[0]


def resolve_systems(engine, names: list[str]) -> list[Entry]:
    """Each asked-for name as a Entry: base, a loaded adapter, MiniLM, or n/a with the reason."""
    from ..pooling import POOLINGS

    loaded = engine.runner.adapter_names
    out = []
    for name in names:
        adapter, at, pooling = name.partition("@")
        if at:
            if pooling not in POOLINGS or table.get(adapter).kind == ENCODER:
                raise ConfigError(
                    f"{name}: a pooling variant is ADAPTER@{'|'.join(POOLINGS)} of base or an "
                    "adapter."
                )
            (plain,) = resolve_systems(engine, [adapter])
            out.append(replace(plain, name=name, pooling=pooling))
        elif table.get(name).kind == ENCODER:
            from .. import assets

            try:
                assets.minilm_dir()
                out.append(Entry(name, "encoder"))
            except MagnetError as e:
                out.append(Entry(name, "encoder", str(e)))
        elif table.get(name).kind == table.PROMPTED:
            raise ConfigError(
                f"{name} is a prompted baseline: the infill task runs it on the base model "
                "of every run; give --systems the LLMs and encoders."
            )
        elif name == table.BASE or name in loaded:
            out.append(Entry(name, "llm"))
        else:
            have = ", ".join(loaded) or "none"
            out.append(Entry(name, "llm", f"adapter not loaded (loaded adapters: {have})"))
    return out


def hardware(engine) -> dict:
    return describe(engine.runner.device, engine.runner.loaded.dtype_name)


# ---------------------------------------------------------------- one run


@dataclass
class Run:
    """What every task needs: the engine, the config, the systems, the progress bar."""

    engine: object
    cfg: EvalConfig
    systems: list[Entry]
    bar: object
    minilm: object = None

    def llm(self) -> list[Entry]:
        return [s for s in self.systems if s.kind == "llm"]

    def doing(self, what: str) -> None:
        self.bar.set_postfix_str(what)


def _na(reason: str) -> dict:
    return {"n/a": reason}


def _per_system(run: Run, task: str, fn: Callable, applies: Callable | None = None) -> dict:
    """fn(system) for every system the task applies to; n/a entries otherwise; timed."""
    out = {}
    for s in run.systems:
        run.doing(f"{task}: {s.name}")
        reason = s.reason or (applies(s) if applies else "")
        if not reason and s.pooling and task not in SENTENCE_TASKS:
            reason = "a pooling variant: measured on sentence tasks only"
        if reason:
            out[s.name] = _na(reason)
        else:
            t0 = time.perf_counter()
            out[s.name] = fn(s)
            out[s.name]["seconds"] = round(time.perf_counter() - t0, 2)
        run.bar.update(1)
    return out


def _llm_only(s: Entry) -> str:
    return "" if s.kind == "llm" else "a sentence encoder: no generation or token vectors"


def _hybrid(run: Run, s: Entry) -> bool:
    meta = run.engine.runner.meta(s.name) if s.kind == "llm" and s.available else None
    return meta is not None and meta.attention == "hybrid" and "msg" in meta.objectives


def _seeded_subset(items: list, n: int, seed: int, tag: str) -> list:
    """n items, a seeded sample kept in order (all when n is 0 or larger than the list)."""
    if n == 0 or n >= len(items):
        return list(items)
    keep = sorted(random.Random(f"{seed}-{tag}").sample(range(len(items)), n))
    return [items[i] for i in keep]


# ---------------------------------------------------------------- tasks


def _fits(engine, cases: list, tokenizer) -> list:
    """Cases whose five-shot prompt (the longest input of the task) fits the model's context."""
    rows = scoring.prompted_rows(tokenizer, cases, 5)
    cap = engine.max_input_tokens - engine.config.max_span_tokens
    return [c for c, (r, _) in zip(cases, rows, strict=True) if len(r.ids) <= cap]


def heldout_passages(cfg: EvalConfig) -> list[str]:
    """The held-out passages: the --heldout file's non-empty lines, else held-out Wikipedia."""
    if cfg.heldout is None:
        from ..data import wikipedia_paragraphs

        return wikipedia_paragraphs("heldout")
    lines = [ln.strip() for ln in cfg.heldout.read_text(encoding="utf-8").splitlines()]
    passages = [ln for ln in lines if ln]
    if not passages:
        raise ConfigError(f"--heldout {cfg.heldout} has no passage; give one passage a line.")
    return passages


def domain_passages(cfg: EvalConfig, domain: str) -> list[str]:
    """The held-out passages of one infill domain: Wikipedia (or the --heldout file), or the
    Lee background news corpus (gensim's; another source, never trained on)."""
    if domain == "news":
        from ..data import lee_background_docs

        return lee_background_docs()
    return heldout_passages(cfg)


def _domain_cases(run: Run, domain: str) -> list:
    e, z = run.engine, run.cfg.sizes
    n = z.n_news_passages if domain == "news" else z.n_passages
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

    def measure(s: Entry, cases: list, filled: dict[str, list]) -> dict:
        r = {
            "causal_left_ppl": scoring.span_perplexity(scoring.causal_span_nll(e, cases, s.name, b))
        }
        to_fill = cases[: z.n_infills]
        if s.name == "base":
            for (key, _), row in zip(PROMPTED_KEYS, PROMPTED_ROWS, strict=True):
                shots = row.shots
                nll = scoring.prompted_span_nll(e, cases, shots, max(1, b // 2))
                r[f"{key}_ppl"] = scoring.span_perplexity(nll)
                r[f"{key}_ppl_with_end"] = scoring.span_perplexity(nll, with_end=True)
                spans = [
                    e.infill_prompted(
                        c.blanked("[blank]"), shots=shots, max_span_tokens=z.max_span_tokens
                    ).spans[0]
                    for c in to_fill
                ]
                filled[PROMPTED[shots]] = spans
                r[f"{key}_fills"] = {
                    **fill_stats(e, spans, to_fill, None),
                    "ended_share": float(np.mean([not x.capped for x in spans])),
                }
        if _hybrid(run, s):
            nll = scoring.hybrid_span_nll(e, cases, s.name, b)
            r["hybrid_ppl"] = scoring.span_perplexity(nll)
            r["hybrid_ppl_with_end"] = scoring.span_perplexity(nll, with_end=True)
            spans = [
                e.infill(
                    c.blanked("[blank]"), adapter=s.name, max_span_tokens=z.max_span_tokens
                ).spans[0]
                for c in to_fill
            ]
            filled[s.name] = spans
            r["end_nll_mean"] = float(np.mean([x.end for x in nll]))
            r["end_auc"] = end_auc(nll)
            r.update(infill_stats(spans, to_fill))
            r.update(fill_stats(e, spans, to_fill, s.name))
        return r

    def one(s: Entry) -> dict:
        r: dict = {}
        for d, cases in domains.items():
            m = measure(s, cases, generated[d])
            if domain_key(d):
                r[domain_key(d)] = m
            else:
                r.update(m)
        return r

    systems = _per_system(run, "infill", one, _llm_only)
    out: dict = {"sizes": {}, "systems": systems, "examples": []}
    for d, cases in domains.items():
        at = f"{domain_key(d)}_" if domain_key(d) else ""
        out["sizes"][f"{at}passages"] = len(cases)
        out["sizes"][f"{at}span_tokens_mean"] = float(np.mean([c.n_tokens for c in cases]))
        out[f"{at}examples"] = _infill_examples(run, cases[: z.n_examples], generated[d])
    return out


def infill_stats(spans: list, cases: list) -> dict:
    """How MAGNET's infills end (one blank each): by <span_end>, or where they ran into the
    right context (a decoder rule), against the true spans they replace."""
    return {
        "stop_share": float(np.mean([s.stopped for s in spans])),  # <span_end> itself
        "joined_share": float(np.mean([s.end_reason == "joined" for s in spans])),
        "fit_share": float(np.mean([s.fits for s in spans])),  # ended inside the blank
    }


def fill_stats(engine, spans: list, cases: list, adapter: str | None) -> dict:
    """What a reader sees of one system's fills (one blank each) against the true spans: the
    length, empty fills, fills within +-30% of the true length (tokens, fill_tokens) and fills
    holding a token that is no text (junk_ids; on the ids the system wrote)."""
    lengths = [fill_tokens(engine, s.text) for s in spans]
    truth = [c.n_tokens for c in cases[: len(spans)]]
    junk = junk_ids(engine, adapter)
    written = [s.written_ids if s.written_ids is not None else s.token_ids for s in spans]
    return {
        "infill_tokens_mean": float(np.mean(lengths)),
        "true_span_tokens_mean": float(np.mean(truth)),
        "length_ratio": float(np.mean(lengths) / np.mean(truth)),
        "within_30_share": float(
            np.mean([abs(n / t - 1) <= 0.3 for n, t in zip(lengths, truth, strict=True)])
        ),
        "empty_share": float(np.mean([not s.text.strip() for s in spans])),
        "junk_share": float(np.mean([not junk.isdisjoint(w) for w in written])),
        "n_infills": len(spans),
    }


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
    e, cap = run.engine, run.cfg.sizes.max_span_tokens
    base_ok = any(s.name == "base" and s.available for s in run.systems)
    out = []
    for i, c in enumerate(cases):
        text = c.blanked("[blank]")
        ex = {"text": text, "truth": c.span_text.strip()}
        for name, spans in generated.items():
            if i < len(spans):
                ex[name] = {"infill": spans[i].text.strip(), "end_reason": spans[i].end_reason}
        for shots, key in PROMPTED.items():
            if base_ok and key not in ex:
                span = e.infill_prompted(text, shots=shots, max_span_tokens=cap).spans[0]
                ex[key] = {"infill": span.text, "end_reason": span.end_reason}
        out.append(ex)
    return out


def _load_minilm(run: Run):
    if run.minilm is None:
        from sentence_transformers import SentenceTransformer

        from .. import assets

        run.minilm = SentenceTransformer(str(assets.minilm_dir()), device="cpu")
    return run.minilm


def _sentence_vectors(run: Run, s: Entry, texts: list[str]) -> tuple[np.ndarray, str]:
    """Normalised sentence vectors of one system and a word on how they were pooled."""
    if s.kind == "encoder":
        vecs = _load_minilm(run).encode(texts, batch_size=64, normalize_embeddings=True)
        return vecs, "mean (sentence-transformers)"
    e = run.engine
    vecs = e.embed_sentences(
        texts, adapter=s.adapter, batch_size=run.cfg.batch_size * 4, pooling=s.pooling
    )
    plan = e.sentence_plan(s.adapter)
    pooling = s.pooling or plan.pooling
    return vecs, f"{pooling}, {plan.mode}" + (", instruction" if plan.prefix else "")


def task_units(run: Run) -> dict:
    """The unit suites (suites.py): sentences, phrases and words removed from held-out text."""
    base = [s for s in run.systems if s.name == table.BASE]
    if not base or not base[0].available:
        why = "the unit suites need the base system (prompted and left-only rows)"
        return {"systems": {}, "sizes": {}, "n/a": why}
    magnets = [s.name for s in run.systems if s.available and not s.pooling and _hybrid(run, s)]
    passages = {d: domain_passages(run.cfg, d) for d in run.cfg.domains}
    out = run_suites(run, passages, magnets)
    for s in run.systems:  # each system's numbers per suite, as the other tasks keep them
        if s.name == table.BASE or s.name in magnets:
            out["systems"][s.name] = {
                key: suite["systems"][s.name]
                for key, suite in out["suites"].items()
                if s.name in suite.get("systems", {})
            }
        else:
            why = s.reason or (
                "a pooling variant: measured on sentence tasks only" if s.pooling else ""
            )
            out["systems"][s.name] = _na(why or "not an infilling system (no MSG-trained hybrid)")
        run.bar.update(1)
    return out


def task_sts(run: Run) -> dict:
    from scipy.stats import spearmanr

    from ..data import load_sts_b

    pairs = _seeded_subset(load_sts_b("test"), run.cfg.sizes.n_sts, run.cfg.seed, "sts")
    texts = list(dict.fromkeys(t for p in pairs for t in (p.sentence1, p.sentence2)))
    index = {t: i for i, t in enumerate(texts)}
    i1 = [index[p.sentence1] for p in pairs]
    i2 = [index[p.sentence2] for p in pairs]
    gold = [p.score for p in pairs]

    def one(s: Entry) -> dict:
        vecs, pooling = _sentence_vectors(run, s, texts)
        cos = np.sum(vecs[i1] * vecs[i2], axis=1)  # both normalised: cosine
        return {"spearman": 100 * float(spearmanr(cos, gold).statistic), "pooling": pooling}

    return {"sizes": {"pairs": len(pairs)}, "systems": _per_system(run, "sts", one)}


def task_retrieval(run: Run) -> dict:
    from ..data import vital_articles
    from . import retrieval

    articles = vital_articles("heldout")
    rs = retrieval.retrieval_set(articles, run.cfg.sizes.n_retrieval, run.cfg.seed)

    def one(s: Entry) -> dict:
        pooling = []

        def encode(texts: list[str]) -> np.ndarray:
            vecs, how = _sentence_vectors(run, s, texts)
            pooling.append(how)
            return vecs

        return {**retrieval.evaluate(encode, rs), "pooling": pooling[0]}

    sizes = {"documents": len(rs.documents), "queries": len(rs.queries)}
    return {"sizes": sizes, "systems": _per_system(run, "retrieval", one)}


def task_probe(run: Run) -> dict:
    from . import probe

    z, seed = run.cfg.sizes, run.cfg.seed
    train = probe.conll_subset("train", z.n_probe_train, seed)
    test = probe.conll_subset("test", z.n_probe_test, seed)

    def one(s: Entry) -> dict:
        scores = probe.run_probe(run.engine, train, test, s.name, run.cfg.batch_size * 2)
        return {t: sc.to_dict() for t, sc in scores.items()}

    def applies(s: Entry) -> str:
        return "" if s.kind == "llm" else "a sentence encoder: not probed per word here"

    sizes = {"train_sentences": len(train), "test_sentences": len(test)}
    return {"sizes": sizes, "systems": _per_system(run, "probe", one, applies)}


def heldout_prompts(tokenizer, n: int, n_tokens: int, seed: int, passages=None) -> list[str]:
    """The first n_tokens tokens of n seeded held-out passages (that are long enough)."""
    if passages is None:
        from ..data import wikipedia_paragraphs

        passages = wikipedia_paragraphs("heldout")
    ids = tokenizer(passages, add_special_tokens=False).input_ids
    long = [x[:n_tokens] for x in ids if len(x) >= 2 * n_tokens]
    return [tokenizer.decode(x) for x in _seeded_subset(long, n, seed, "prompts")]


# Short open prompts: a topic and nothing else. A model that lost its causal mode loops here
# at once ("the printing press, the printing press, and the printing press"), where a passage
# start of 32 tokens still carries it along.
OPEN_PROMPTS = (
    "The history of the printing press",
    "The most important thing about learning a language is",
    "Volcanoes form when",
    "In the morning, the village",
    "The theory of evolution explains",
    "My favourite way to spend a weekend is",
    "The city of Rome",
    "Photosynthesis is the process by which",
    "The first computers were",
    "During the winter, many animals",
    "A good recipe for bread",
    "The ocean covers",
)


def task_repetition(run: Run) -> dict:
    from ..metrics import repetition_stats

    e, z = run.engine, run.cfg.sizes
    passages = heldout_prompts(
        e.tokenizer, z.n_prompts, z.prompt_tokens, run.cfg.seed, heldout_passages(run.cfg)
    )
    opens = list(OPEN_PROMPTS[: z.n_open_prompts])
    prompts = passages + opens

    def mean(stats: list[dict]) -> dict:
        return {k: float(np.mean([st[k] for st in stats])) for k in stats[0]} if stats else {}

    def one(s: Entry) -> dict:
        outs = [e.generate(p, adapter=s.name, max_new_tokens=z.max_new_tokens) for p in prompts]
        stats = [repetition_stats(o.text).to_dict() for o in outs]
        r = mean(stats)
        r["passage_prompts"] = mean(stats[: len(passages)])
        r["open_prompts"] = mean(stats[len(passages) :])
        r["tokens_mean"] = float(np.mean([len(o.token_ids) for o in outs]))
        r["examples"] = [
            {"prompt": p, "continuation": o.text}
            for p, o in list(zip(prompts, outs, strict=True))[:: max(1, len(prompts) // 4)]
        ]
        return r

    sizes = {
        "prompts": len(passages),
        "open_prompts": len(opens),
        "prompt_tokens": z.prompt_tokens,
        "new_tokens": z.max_new_tokens,
    }
    return {"sizes": sizes, "systems": _per_system(run, "repetition", one, _llm_only)}


def task_knowledge(run: Run) -> dict:
    e, z = run.engine, run.cfg.sizes
    texts = _seeded_subset(heldout_passages(run.cfg), z.n_ppl, run.cfg.seed, "ppl")

    def one(s: Entry) -> dict:
        nll, n = scoring.causal_nll(e, texts, s.name, z.ppl_tokens, run.cfg.batch_size)
        return {"ppl": scoring.perplexity(nll, n), "tokens": n}

    systems = _per_system(run, "knowledge", one, _llm_only)
    base = systems.get("base", {}).get("ppl")
    for r in systems.values():
        if "ppl" in r and base:
            r["ratio_to_base"] = r["ppl"] / base
    return {"sizes": {"passages": len(texts), "max_tokens": z.ppl_tokens}, "systems": systems}


TASK_FUNCS = {
    "infill": task_infill,
    "units": task_units,
    "sts": task_sts,
    "retrieval": task_retrieval,
    "probe": task_probe,
    "repetition": task_repetition,
    "knowledge": task_knowledge,
}


def evaluate(engine, cfg: EvalConfig, command: str = "") -> dict:
    """Run the selected tasks for the selected systems -> the report (what results.json holds)."""
    from tqdm.auto import tqdm

    systems = resolve_systems(engine, cfg.systems)
    total = len(cfg.tasks) * len(systems)
    with tqdm(total=total, desc="evaluate", disable=not cfg.progress, file=sys.stderr) as bar:
        run = Run(engine, cfg, systems, bar)
        tasks = {}
        for name in cfg.tasks:
            t0 = time.perf_counter()
            tasks[name] = TASK_FUNCS[name](run)
            tasks[name]["seconds"] = round(time.perf_counter() - t0, 2)
    report = {
        "command": command,
        "quick": cfg.quick,
        "seed": cfg.seed,
        "sizes": asdict(cfg.sizes),
        "domains": list(cfg.domains),
        "hardware": hardware(engine),
        "systems": {
            s.name: {"kind": s.kind, "available": s.available, "reason": s.reason} for s in systems
        },
        "tasks": tasks,
    }
    report["targets"] = [asdict(t) for t in check_targets(report)]
    return report


# ---------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    from ..settings import add_model_args

    p = argparse.ArgumentParser(
        prog="python -m magnet_model.evaluation.evaluate",
        description="Evaluate base / llm2vec / magnet (and all-MiniLM-L6-v2) with the paper's "
        "protocols; writes results.md and results.json.",
    )
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated: {','.join(TASKS)}")
    p.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help="comma-separated: base, adapter names, minilm (missing ones are reported n/a)",
    )
    p.add_argument("--quick", action="store_true", help="small samples (a few minutes on CPU)")
    for flag, (name, what) in SIZE_FLAGS.items():
        sizes = f"default {getattr(Sizes(), name)}, quick {getattr(QUICK, name)}"
        p.add_argument(flag, dest=name, type=int, default=None, help=f"{what} ({sizes})")
    p.add_argument("--seed", type=int, default=0, help="seed of every sample and span choice")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (overrides MAGNET_THREADS)"
    )
    p.add_argument("--output", default=DEFAULT_OUTPUT, help="directory for results.md/.json")
    p.add_argument(
        "--heldout",
        help="text file, one passage a line: the held-out passages of infill, repetition and "
        "knowledge instead of held-out Wikipedia (needs no gensim)",
    )
    p.add_argument(
        "--domains",
        default=None,
        help=f"infill: comma-separated held-out domains, {','.join(DOMAINS)} (default both; "
        "with --heldout, which replaces Wikipedia, only wikipedia: news needs gensim)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--no-stop-at-right-context",
        dest="stop_at_right_context",
        action="store_false",
        help="infills end only at <span_end> or the cap, not where they run into the right "
        "context (what the model does on its own)",
    )
    add_model_args(p)
    return p


def main(argv: list[str] | None = None, engine=None) -> int:
    """CLI entry; `engine` lets tests pass a ready engine (the model flags are then ignored)."""
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        if engine is None:
            from ..inference.engine import Engine
            from ..settings import ModelSpec

            # --threads is a model flag: the loader applies it, after (and over) MAGNET_THREADS
            engine = Engine.from_spec(ModelSpec.from_args(args))
        elif args.threads:
            torch.set_num_threads(args.threads)
        engine.config.stop_at_right_context = args.stop_at_right_context
        given = sys.argv[1:] if argv is None else argv
        report = evaluate(
            engine, cfg, shlex.join(["python", "-m", "magnet_model.evaluation.evaluate", *given])
        )
        md, js = write_outputs(report, cfg.output)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(md.read_text())
    print(f"Wrote {md} and {js}.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
