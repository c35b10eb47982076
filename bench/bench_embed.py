"""Sentence embeddings per parameter: the served model's pipeline against all-MiniLM-L6-v2
run by sentence-transformers, in the same process with the same threads (issue 7, item 4).

    python bench/bench_embed.py [--quick] [--sentences 256] [--repeat 3] [--threads N]

Sentences: unique STS-B test sentences, an evenly spaced sample (the whole length range).
Served: Engine.embed_sentences(texts, adapter, batch_size=32) for "magnet" (bidirectional,
instruction prefix, last token), "llm2vec" (bidirectional, prefix, mean) and base (causal
mean). Baseline: SentenceTransformer.encode(texts, batch_size=32) with its other defaults.
Rounds are interleaved (each round runs every system once) and the best time per system is
kept, so a neighbour's burst of load hits all systems alike.

Rows per system:
- sentences/s, against MiniLM's;
- efficiency = sentences/s x parameters of the model actually run (base + that adapter's
  LoRA; base alone for "base"; MiniLM's own), against MiniLM's; target >= 0.8;
- real tokens/s (tokens fed to the model, instruction prefix and special tokens included);
- padding waste = padded tokens computed / real tokens, against sentence-transformers'
  (its batches replayed: sorted by text length, padded to the longest in a batch);
- compute rate = real tokens/s x non-embedding parameters (a FLOP/s proxy: embedding
  tables are looked up, not multiplied), against MiniLM's. This row explains the efficiency
  row: efficiency ratio = compute-rate ratio x (params / non-embedding params, served over
  MiniLM) x (MiniLM tokens per sentence / served tokens per sentence).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import Row, model_spec, write_report

from magnet_model.data import load_sts_b
from magnet_model.inference.embedding import pack_rows
from magnet_model.inference.engine import BASE, Engine
from magnet_model.inference.search import MiniLMEncoder

SYSTEMS = ("magnet", "llm2vec", BASE)
TARGET = ">= 0.8"


def sts_sentences(n: int) -> list[str]:
    """n unique STS-B test sentences spread evenly over the file."""
    pairs = load_sts_b("test")
    unique = list(dict.fromkeys(t for p in pairs for t in (p.sentence1, p.sentence2) if t))
    step = max(1, len(unique) // n)
    return unique[::step][:n]


def served_params(engine: Engine, adapter: str) -> tuple[int, int]:
    """(all, non-embedding) parameters the forward for `adapter` uses: base weights (tied
    embedding counted once) + that adapter's LoRA; the LM head is never run for embeddings."""
    embed = engine.runner.lm.get_input_embeddings().weight
    seen, total, tables = set(), 0, 0
    for name, p in engine.runner.lm.named_parameters():
        if id(p) in seen or ("lora_" in name and f".{adapter}." not in name):
            continue
        seen.add(id(p))
        total += p.numel()
        if p is embed:
            tables += p.numel()
    return total, total - tables


def minilm_params(model) -> tuple[int, int]:
    """(all, non-embedding) parameters of the sentence-transformers model."""
    total = sum(p.numel() for p in model.parameters())
    tables = sum(p.numel() for n, p in model.named_parameters() if "embeddings." in n)
    return total, total - tables


def served_tokens(engine: Engine, adapter: str, texts: list[str], batch_size: int):
    """(real, padded) tokens of embed_sentences' batches (rows of packed sentences)."""
    rows = engine.sentence_rows(texts, engine.sentence_plan(adapter))
    lengths = [len(r) for r, _ in rows]
    padded = 0
    for batch in pack_rows(lengths, batch_size):
        fills = [sum(lengths[i] for i in row) for row in batch]
        padded += len(fills) * max(fills)
    return sum(lengths), padded


def minilm_tokens(model, texts: list[str], batch_size: int):
    """(real, padded) tokens of SentenceTransformer.encode's batches: it sorts by text length
    (characters) and pads each batch to its longest (special tokens included)."""
    limit = model.max_seq_length
    ids = model.tokenizer(texts, truncation=True, max_length=limit).input_ids
    lengths = [len(x) for x in ids]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return sum(lengths), sum(len(b) * max(lengths[i] for i in b) for b in batches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="48 sentences, one round")
    parser.add_argument("--sentences", type=int, default=256, help="STS-B sentences timed")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch)")
    parser.add_argument("--out", default=None, help="results name (default embed / embed-quick)")
    args = parser.parse_args(argv)
    engine = Engine.from_spec(model_spec())
    if args.threads:  # after loading: MAGNET_THREADS, applied by the loader, is overridden
        torch.set_num_threads(args.threads)
    n, repeat = (48, 1) if args.quick else (args.sentences, args.repeat)
    texts = sts_sentences(n)
    bs = args.batch_size
    systems = [s for s in SYSTEMS if s == BASE or s in engine.runner.adapter_names]
    minilm = MiniLMEncoder()._load()

    runs = {"MiniLM": lambda t: minilm.encode(t, batch_size=bs)}
    for s in systems:
        runs[s] = lambda t, s=s: engine.embed_sentences(t, adapter=s, batch_size=bs)
    for run in runs.values():  # warm-up: first-call allocations, lazy imports
        run(texts[:8])
    seconds: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeat):
        for key, run in runs.items():
            t0 = time.perf_counter()
            run(texts)
            seconds[key].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in seconds.items()}

    m_all, m_work = minilm_params(minilm)
    m_real, m_padded = minilm_tokens(minilm, texts, bs)
    m_sps = n / best["MiniLM"]
    mini = "all-MiniLM-L6-v2, sentence-transformers"
    rows, extra = [], {"sentences": n, "batch_size": bs, "rounds": repeat, "systems": {}}
    for s in systems:
        p_all, p_work = served_params(engine, s)
        real, padded = served_tokens(engine, s, texts, bs)
        sps = n / best[s]
        per_round = [
            (n / a * p_all) / (n / b * m_all)
            for a, b in zip(seconds[s], seconds["MiniLM"], strict=True)
        ]
        rows += [
            Row(f"{s}: sentences/s", sps, "sent/s", m_sps, mini),
            Row(
                f"{s}: efficiency, sentences/s x params",
                sps * p_all / 1e6,
                "sent/s x M params",
                m_sps * m_all / 1e6,
                mini,
                TARGET,
                f"{p_all / 1e6:.1f}M vs {m_all / 1e6:.1f}M params",
            ),
            Row(
                f"{s}: real tokens/s",
                real / best[s],
                "tok/s",
                m_real / best["MiniLM"],
                mini,
                note=f"{real / n:.1f} vs {m_real / n:.1f} tokens per sentence",
            ),
            Row(
                f"{s}: padding waste, padded / real tokens",
                padded / real,
                "",
                m_padded / m_real,
                mini,
            ),
            Row(
                f"{s}: compute rate, real tokens/s x non-embedding params",
                real / best[s] * p_work / 1e9,
                "G tok-params/s",
                m_real / best["MiniLM"] * m_work / 1e9,
                mini,
                note=f"{p_work / 1e6:.1f}M vs {m_work / 1e6:.1f}M",
            ),
        ]
        extra["systems"][s] = {
            "seconds": seconds[s],
            "params": p_all,
            "non_embedding_params": p_work,
            "real_tokens": real,
            "padded_tokens": padded,
            "efficiency_ratio_median_of_rounds": statistics.median(per_round),
        }
    extra["systems"]["MiniLM"] = {
        "seconds": seconds["MiniLM"],
        "params": m_all,
        "non_embedding_params": m_work,
        "real_tokens": m_real,
        "padded_tokens": m_padded,
    }
    name = args.out or ("embed-quick" if args.quick else "embed")
    write_report(name, rows, extra, engine.runner.device, engine.runner.loaded.dtype_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
