"""Decoding at batch 1 against the memory-bandwidth bound, and the cached infill against the
reference that re-encodes everything (issue 7, items 1 and 2).

    python bench/bench_decode.py [--quick] [--threads N] [--repeat 3]

1. Tokens/s of a continuation (64 new tokens) and of an infill span (a fixed 32-token span in a
   ~256-token context), base model and the MAGNET adapter. The bound: at batch 1 every token
   reads every weight once (the tied embedding matrix as LM head included; the input embedding
   is a row lookup) plus the KV cache, so tokens/s <= copy bandwidth / bytes read per token,
   the bandwidth measured in this run (bench.common.copy_bandwidth, STREAM's Copy convention).
2. The same infill with the reference path (the whole layout re-encoded for every new token):
   speed-up of the cached path, and whether both produce identical tokens.
3. The decode paths (issue 14; magnet_model/inference/static_decode.py): the same continuation
   (base) and infill span (MAGNET adapter) with decode=eager, static (static KV cache) and, on CUDA,
   graph (static cache + CUDA graphs), runs of the paths alternating so a busy machine slows
   them alike: tokens/s against the bandwidth bound, the speed-up over eager measured in the
   same run, and whether the tokens are identical. On a CPU "graph" is the static path (CUDA
   graphs need CUDA), so it is not a row there.
4. `--only-levers` (issue 24; bench/levers.py), instead: each decode lever (engine float32,
   float16-weights, int8-dynamic, eager and on the static cache, bf16 where the CPU has it in
   hardware), HF generate and llama.cpp on the shipped Q4_1 GGUF (when llama-cpp-python is
   installed: bench/requirements.txt; in a process of its own, bench/levers.py) on the same
   continuation and MAGNET span, against llama.cpp and each against its own bandwidth bound;
   with sentence embeddings/s and the side-by-side study item (s/item) of the CPU default and
   of bf16 (where the CPU has it) against float32.

Default dtype and threads are the engine's (MAGNET_DTYPE, MAGNET_THREADS); the table says which.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from common import Row, copy_bandwidth, model_spec, timed, write_report
from levers import (
    LLAMA_CPP,
    LlamaCppFailed,
    gguf_bytes_per_token,
    hf_generate_rate,
    lever_rows,
    llama_cpp_env,
    llama_cpp_options,
    llama_cpp_rate,
)

from magnet_model import assets
from magnet_model.data import wikipedia_paragraphs
from magnet_model.hardware import has_fast_bf16
from magnet_model.inference.engine import Engine
from magnet_model.inference.static_decode import resolve_mode
from magnet_model.loading import load_model, resolve_dtype
from magnet_model.packed import PackedLinear
from magnet_model.packed import weight_bytes as packed_bytes


def bytes_per_token(engine: Engine, adapter: str | None, context: int) -> int:
    """Weights read by one decoding step (+ the KV cache of `context` tokens); weights packed
    for fbgemm (magnet_model/packed.py) count as packed, their float input embedding one row."""
    lm = engine.runner.lm
    embed = lm.get_input_embeddings().weight
    head_module = lm.get_output_embeddings()
    head = None if isinstance(head_module, PackedLinear) else head_module.weight
    seen, total = set(), packed_bytes(lm)
    for name, p in lm.named_parameters():
        if id(p) in seen or "lora_" in name:
            continue
        seen.add(id(p))
        if p is embed and p is not head:
            total += p[0].nbytes  # untied (or packed) head: the input embedding reads one row
        else:
            total += p.nbytes
    if adapter not in (None, "base"):
        total += sum(p.nbytes for n, p in lm.named_parameters() if f".{adapter}." in n)
    cfg = lm.config
    heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv = 2 * cfg.num_hidden_layers * heads * dim * engine.runner.dtype.itemsize * context
    return total + kv


def gemv_bandwidth(mbytes: int = 256, repeat: int = 5) -> float:
    """Bytes/s of weights read by torch's own matrix-vector product (the BLAS this machine's
    torch uses) on one large matrix: the ceiling any batch-1 decoder built on it can reach."""
    import torch

    cols = 4096
    w = torch.randn(mbytes * 2**20 // 4 // cols, cols)
    x = torch.randn(1, cols)
    return w.nbytes / timed(lambda: torch.nn.functional.linear(x, w), repeat=repeat)


def _tokens(result) -> list:
    """A continuation's tokens, or an infill's tokens per span."""
    spans = getattr(result, "spans", None)
    return result.token_ids if spans is None else [s.token_ids for s in spans]


def infill_context(n_words: int = 190) -> str:
    """About 256 tokens of held-out Wikipedia with one blank in the middle."""
    words = " ".join(wikipedia_paragraphs("heldout")[:4]).split()[:n_words]
    half = len(words) // 2
    return " ".join(words[:half]) + " [blank] " + " ".join(words[half:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short outputs, one repeat")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best is kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch)")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time the static cache with the model's forward under torch.compile (slow to "
        "compile; an experiment, not an engine mode)",
    )
    parser.add_argument(
        "--only-levers",
        action="store_true",
        help="instead, the table of decode levers against llama.cpp (bench/levers.py; results "
        "decode_levers.json)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="results name under bench/results/, or a path (default decode / decode-quick)",
    )
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    repeat = 1 if args.quick else args.repeat
    new_tokens, span = (16, 8) if args.quick else (64, 32)
    engine = Engine.from_spec(model_spec())
    bandwidth = copy_bandwidth()
    gemv = gemv_bandwidth()
    text = infill_context()
    prompt = " ".join(text.split()[:40])
    engine.generate(prompt, max_new_tokens=4)  # warm-up
    if args.only_levers:
        rows, lever_extra = measure_levers(engine, prompt, text, new_tokens, span, repeat)
        name = args.out or ("decode_levers-quick" if args.quick else "decode_levers")
        write_report(name, rows, {"levers": lever_extra}, engine.runner.device, _label(engine))
        return 0
    rows: list[Row] = []
    extra: dict = {"bandwidth_GBps": bandwidth / 1e9, "gemv_GBps": gemv / 1e9}
    rows.append(
        Row(
            "BLAS matrix-vector product, 256 MB fp32 matrix",
            gemv / 1e9,
            "GB/s",
            bandwidth / 1e9,
            "copy bandwidth",
            "",
            "the ceiling of batch-1 decoding here",
        )
    )
    for adapter in [None, "magnet"]:
        if adapter and adapter not in engine.runner.adapter_names:
            continue
        label = adapter or "base"
        runs = [
            engine.generate(prompt, adapter=adapter, max_new_tokens=new_tokens)
            for _ in range(repeat)
        ]
        c = max(runs, key=lambda r: r.tokens_per_second)
        ctx = c.prompt_tokens + len(c.token_ids) // 2
        bound = bandwidth / bytes_per_token(engine, adapter, ctx)
        rows.append(
            Row(
                f"continuation tokens/s, {label}",
                c.tokens_per_second,
                "tok/s",
                bound,
                "bandwidth bound",
                ">= 0.6",
                f"{len(c.token_ids)} tokens",
            )
        )
        fills = [engine.infill(text, adapter=adapter, fixed_lengths=span) for _ in range(repeat)]
        r = max(fills, key=lambda r: r.tokens_per_second)
        bound = bandwidth / bytes_per_token(engine, adapter, r.context_tokens + span // 2)
        rows.append(
            Row(
                f"infill span tokens/s, {label}",
                r.tokens_per_second,
                "tok/s",
                bound,
                "bandwidth bound",
                ">= 0.6",
                f"{span}-token span, {r.context_tokens}-token context",
            )
        )
        extra[f"bytes_per_token_{label}"] = bytes_per_token(engine, adapter, 0)
        if adapter is None:  # how close the model comes to what the BLAS allows
            ceiling = gemv / bytes_per_token(engine, adapter, ctx)
            rows.append(
                Row(
                    "continuation tokens/s, base, vs the BLAS ceiling",
                    c.tokens_per_second,
                    "tok/s",
                    ceiling,
                    "matrix-vector ceiling",
                    "",
                    "the model's matrices are 0.4-3.5 MB, read more slowly; plus per-op overhead",
                )
            )
    if "magnet" in engine.runner.adapter_names:
        t = time.perf_counter()
        cached = engine.infill(text, adapter="magnet", fixed_lengths=span)
        cached_s = time.perf_counter() - t
        t = time.perf_counter()
        slow = engine.infill_reference(text, adapter="magnet", fixed_lengths=span)
        slow_s = time.perf_counter() - t
        same = [s.token_ids for s in cached.spans] == [s.token_ids for s in slow.spans]
        rows.append(
            Row(
                "infill speed-up of the KV cache",
                slow_s,
                "s",
                cached_s,
                "cached infill",
                ">= 5",
                f"reference re-encodes; {cached.context_tokens}-token context, "
                f"{span}-token span; identical tokens: {'yes' if same else 'NO'}",
            )
        )
        extra["cached_equals_reference"] = same
    paths = ["eager", "static"] + (
        ["graph"] if resolve_mode("graph", engine.runner.device) == "graph" else []
    )
    mode = engine.runner.static_decoder.mode
    inner, plain_forward = engine.runner.decoder, engine.runner.decoder.forward
    compiled = None
    if args.compile:  # the decoder's forward compiled by inductor, timed on its first call
        paths.append("static+compile")
        compiled = torch.compile(plain_forward, dynamic=False)
        engine.runner.static_decoder.mode, inner.forward = "static", compiled
        t = time.perf_counter()
        engine.generate(prompt, max_new_tokens=new_tokens)
        engine.infill(text, adapter="magnet", fixed_lengths=span)
        compile_s = time.perf_counter() - t
        rows.append(Row("torch.compile: compiling (first calls)", compile_s, "s", note="inductor"))
        inner.forward = plain_forward
    best: dict[tuple, object] = {}
    for _ in range(max(repeat, 2)):  # alternating: neighbours' load falls on every path
        for path in paths:
            engine.runner.static_decoder.mode = path.split("+")[0]
            inner.forward = compiled if path == "static+compile" else plain_forward
            for what, call in [
                ("continuation", lambda: engine.generate(prompt, max_new_tokens=new_tokens)),
                ("infill", lambda: engine.infill(text, adapter="magnet", fixed_lengths=span)),
            ]:
                if what == "infill" and "magnet" not in engine.runner.adapter_names:
                    continue
                out = call()
                if (what, path) not in best or (
                    out.tokens_per_second > best[what, path].tokens_per_second
                ):
                    best[what, path] = out
    engine.runner.static_decoder.mode, inner.forward = mode, plain_forward
    for what, label, adapter in [("continuation", "base", None), ("infill", "magnet", "magnet")]:
        if (what, "eager") not in best:
            continue
        eager = best[what, "eager"]
        if what == "continuation":
            ctx, detail = eager.prompt_tokens + new_tokens // 2, f"{new_tokens} tokens"
        else:
            ctx = eager.context_tokens + span // 2
            detail = f"{span}-token span, {eager.context_tokens}-token context"
        bound = bandwidth / bytes_per_token(engine, adapter, ctx)
        for path in paths:
            r = best[what, path]
            rows.append(
                Row(
                    f"{what} tokens/s, {label}, decode={path}",
                    r.tokens_per_second,
                    "tok/s",
                    bound,
                    "bandwidth bound",
                    "",
                    detail,
                )
            )
            if path == "eager":
                continue
            same = _tokens(r) == _tokens(eager)
            rows.append(
                Row(
                    f"{what} speed-up of decode={path} over eager, {label}",
                    r.tokens_per_second,
                    "tok/s",
                    eager.tokens_per_second,
                    "eager, same run",
                    ">= 10" if path == "graph" else "",
                    f"identical tokens: {'yes' if same else 'NO'}",
                )
            )
            extra[f"{what}_{path}_equals_eager"] = same
    extra["decode_paths"] = paths
    name = args.out or ("decode-quick" if args.quick else "decode")
    write_report(name, rows, extra, engine.runner.device, _label(engine))
    return 0


def _label(engine: Engine) -> str:
    """The dtype as --dtype / MAGNET_DTYPE name it (so the report says how to run it again)."""
    return engine.runner.loaded.dtype_name


def levers_here() -> list[tuple[str, str, str]]:
    """(label, dtype, decode) of every engine lever this CPU can run: float32 (the old CPU
    default), float16 and int8 weights packed for fbgemm, each eager and with the static
    cache where it matters; bfloat16 only where the CPU has it in hardware (elsewhere torch
    emulates it in float32, slower than float32)."""
    out = [
        ("float32", "float32", "eager"),
        ("float32, static cache", "float32", "static"),
        ("float16-weights", "float16-weights", "eager"),
        ("float16-weights, static cache", "float16-weights", "static"),
        ("int8-dynamic", "int8-dynamic", "eager"),
    ]
    if has_fast_bf16():
        out.append(("bfloat16", "bfloat16", "eager"))
    return out


def measure_levers(engine: Engine, prompt: str, text: str, new_tokens: int, span: int, repeat):
    """The decode table of issue 24 (bench/levers.py), with sentence embeddings/s and the
    side-by-side study item (magnet, zero-shot, five-shot infill) per engine dtype."""
    import dataclasses

    import torch

    spec = engine.runner.loaded.spec
    default_dtype = resolve_dtype(spec, engine.runner.device.type)
    engines = {default_dtype: engine}
    for _, dtype, _ in levers_here():
        if dtype not in engines:
            engines[dtype] = Engine(load_model(dataclasses.replace(spec, dtype=dtype)))
    for e in engines.values():  # warm-up
        e.generate(prompt, max_new_tokens=4)
        e.infill(text, adapter="magnet", fixed_lengths=4)
    has_magnet = "magnet" in engine.runner.adapter_names
    best: dict[tuple, object] = {}
    modes = {dtype: e.runner.static_decoder.mode for dtype, e in engines.items()}
    for _ in range(max(repeat, 2)):  # alternating, as above
        for label, dtype, decode in levers_here():
            e = engines[dtype]
            e.runner.static_decoder.mode = decode
            out = e.generate(prompt, max_new_tokens=new_tokens)
            if best.get((label, "continuation")) is None or (
                out.tokens_per_second > best[label, "continuation"].tokens_per_second
            ):
                best[label, "continuation"] = out
            if has_magnet:
                out = e.infill(text, adapter="magnet", fixed_lengths=span)
                if best.get((label, "infill")) is None or (
                    out.tokens_per_second > best[label, "infill"].tokens_per_second
                ):
                    best[label, "infill"] = out
    for dtype, e in engines.items():
        e.runner.static_decoder.mode = modes[dtype]
    bandwidth = copy_bandwidth()
    results: dict[str, dict[str, tuple[float, int]]] = {}
    reference = best["float32", "continuation"]
    cont_ctx = reference.prompt_tokens + new_tokens // 2
    fill_ctx = best["float32", "infill"].context_tokens + span // 2 if has_magnet else 0
    for label, dtype, _ in levers_here():
        e = engines[dtype]
        results[label] = {
            "continuation": (
                best[label, "continuation"].tokens_per_second,
                bytes_per_token(e, None, cont_ctx),
            )
        }
        if has_magnet:
            results[label]["infill"] = (
                best[label, "infill"].tokens_per_second,
                bytes_per_token(e, "magnet", fill_ctx),
            )
    f32 = engines["float32"]
    prompt_ids = f32.runner.encode(prompt)
    results["HF generate, float32"] = {
        "continuation": (
            hf_generate_rate(f32.runner, prompt_ids, new_tokens, repeat),
            bytes_per_token(f32, None, cont_ctx),
        )
    }
    gguf, threads = assets.smollm2_gguf(), torch.get_num_threads()
    config = engine.runner.lm.config
    llama_cpp_failed = None
    try:
        cont = llama_cpp_rate(gguf, prompt, new_tokens, threads, repeat)
        if cont is not None:
            ctx = cont[1] + new_tokens // 2
            results[LLAMA_CPP] = {
                "continuation": (cont[0], gguf_bytes_per_token(gguf, config, ctx))
            }
            fill = llama_cpp_rate(gguf, text, span, threads, repeat) if has_magnet else None
            if fill is not None:
                ctx = fill[1] + span // 2
                results[LLAMA_CPP]["infill"] = (fill[0], gguf_bytes_per_token(gguf, config, ctx))
    except LlamaCppFailed as e:  # the engine's rows stand without it
        llama_cpp_failed = str(e)
        print(f"llama.cpp row left out: {e}", file=sys.stderr)
    default = next(lb for lb, dtype, decode in levers_here() if dtype == default_dtype)
    details = {
        "continuation": f"{new_tokens} greedy tokens",
        "infill": f"{span}-token span, ~{fill_ctx - span // 2}-token context (llama.cpp: a "
        "continuation from a prompt as long)",
    }
    missing = f"llama.cpp failed: {llama_cpp_failed}" if llama_cpp_failed else None
    rows = lever_rows(results, bandwidth, default, details, missing)
    extra = {
        "bandwidth_GBps": bandwidth / 1e9,
        "default": default,
        "llama_cpp": {
            **llama_cpp_options(),
            "OMP_WAIT_POLICY": llama_cpp_env(dict(os.environ))["OMP_WAIT_POLICY"],
            "failed": llama_cpp_failed,
        },
        "tokens_per_second": {k: {t: v[0] for t, v in r.items()} for k, r in results.items()},
        "bytes_per_token": {k: {t: v[1] for t, v in r.items()} for k, r in results.items()},
        "same_tokens_as_float32": {
            label: best[label, "continuation"].token_ids == reference.token_ids
            for label, _, _ in levers_here()
        },
    }
    batched = {d: e for d, e in engines.items() if d in ("float32", default_dtype, "bfloat16")}
    if len(batched) > 1:
        rows += throughput_rows(batched, extra)
    return rows, extra


def throughput_rows(engines: dict[str, Engine], extra: dict) -> list[Row]:
    """Sentence embeddings/s (batched) and the study item's side-by-side infill (s/item) of each
    engine dtype (the CPU default, bfloat16 where the CPU has it) against float32, measured
    alternately in this run: the batched work next to the batch-1 decoding above."""
    from bench_embed import sts_sentences
    from bench_side_by_side import SYSTEMS

    from magnet_model.data import wikipedia_paragraphs as paragraphs

    texts = sts_sentences(64)
    words = " ".join(paragraphs("heldout")[4:6]).split()[:60]
    item = " ".join(words[:30]) + " [blank] " + " ".join(words[30:])
    for e in engines.values():
        e.embed_sentences(texts[:8], adapter="magnet")
        e.compare_infill(item, SYSTEMS, max_span_tokens=2)
    emb: dict[str, list[float]] = {name: [] for name in engines}
    study: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(3):
        for name, e in engines.items():
            t = time.perf_counter()
            e.embed_sentences(texts, adapter="magnet", batch_size=32)
            emb[name].append(len(texts) / (time.perf_counter() - t))
            t = time.perf_counter()
            e.compare_infill(item, SYSTEMS, max_span_tokens=16)
            study[name].append(time.perf_counter() - t)
    extra["sentences_per_second"] = {name: max(v) for name, v in emb.items()}
    extra["study_item_seconds"] = {name: min(v) for name, v in study.items()}
    e32, s32 = extra["sentences_per_second"]["float32"], extra["study_item_seconds"]["float32"]
    rows = []
    for name in engines:
        if name == "float32":
            continue
        ef, sf = extra["sentences_per_second"][name], extra["study_item_seconds"][name]
        rows.append(
            Row(f"sentence embeddings/s, magnet, {name}", ef, "sent/s", e32, "float32, same run")
        )
        rows.append(
            Row(
                f"study item: side-by-side infill ({', '.join(SYSTEMS)}), {name}",
                sf,
                "s/item",
                s32,
                "float32, same run",
                "",
                "spans <= 16 tokens",
            )
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
