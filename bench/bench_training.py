"""Training speed: tokens/s of one optimizer step per objective against this CPU's FLOP bound.

    python bench/bench_training.py            # trainer defaults: batch 8, 128 tokens (~3-6 min)
    python bench/bench_training.py --quick    # batch 2, 32 tokens: a smoke run (< 1 min)
    python bench/bench_training.py --threads 1 --repeat 5

What runs: the real embedded SmolLM2-135M (float32, CPU) wrapped with a fresh LoRA adapter at
the trainer's defaults (magnet_model/training/config.py TrainConfig: r 16 on q,k,v,o,gate,up,down,
batch 8, 128 tokens), built by train.build_run, and train.train_step exactly as the trainer calls it
(views, forward, backward, clipping, AdamW, scheduler). Cases: MNTP alone, MSG alone, SSCL
alone, then stage 1 (MNTP + MSG, one forward) and stage 2 (MNTP + MSG, then SSCL) as the
default MAGNET run does them. Each case: one warm-up step, then --repeat steps; each step draws
the next batch, its tokens are counted from the batches the trainer collates.

Tokens: real (non-padding) tokens of every forward in the step (x_m rows for MNTP/MSG, the 2B
instruction + text rows for SSCL). Model FLOPs of a step (forward + backward, base frozen):

    F = sum over forwards of  n_tok * (4 N + 6 P_lora)        base matmuls + LoRA
                            + 12 L d_attn * sum_rows n_row^2   attention scores and values
                            + 4 V d * n_labels                 LM head (MNTP / MSG only)

    N       = matmul weights of the decoder layers (q,k,v,o,gate,up,down; no embeddings):
              2N forward, 2N backward for the activation gradients (frozen weights need no
              weight gradient)
    P_lora  = sum over LoRA'd linears of r (d_in + d_out): 2 forward, 2 + 2 backward
              (activation and weight gradients)
    12 L d_attn n^2 per row: QK^T and PV forward (2 * 2 n^2 d_attn per layer), twice that back
              (every query sees every real key: hybrid and bidirectional masks)
    4 V d   per labelled position: the head runs on labelled positions only, forward and
              activation gradient (the tied embedding is frozen)

Achieved FLOP/s = F / step time; the bound is bench.common.matmul_flops() (a 2048^3 float32
matmul) at the same thread count, measured in the same run before and after the steps (the
larger of the two: the less disturbed). Their ratio is the model FLOP utilisation (MFU).
Elementwise work (norms, SiLU, softmax, dropout, AdamW) counts no FLOPs: it is the overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, matmul_flops, write_report  # noqa: E402


def model_sizes(model) -> dict[str, int]:
    """N (decoder matmul weights), P_lora, layers, attention width, vocab, hidden size."""
    import torch

    base = model.get_base_model()
    cfg = base.config
    n = p_lora = 0
    for layer in base.get_decoder().layers:
        for mod in layer.modules():
            if isinstance(mod, torch.nn.Linear) and not _is_lora_part(mod, layer):
                n += mod.weight.numel()
            if hasattr(mod, "lora_A") and getattr(mod, "active_adapters", None):
                for name in mod.active_adapters:
                    if name in mod.lora_A:
                        a, b = mod.lora_A[name], mod.lora_B[name]
                        p_lora += a.weight.numel() + b.weight.numel()
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return {
        "N": n,
        "P_lora": p_lora,
        "layers": cfg.num_hidden_layers,
        "d_attn": cfg.num_attention_heads * head_dim,
        "vocab": cfg.vocab_size,
        "hidden": cfg.hidden_size,
    }


def _is_lora_part(mod, layer) -> bool:
    """LoRA's own A/B Linears are counted in P_lora, not N."""
    for m in layer.modules():
        for attr in ("lora_A", "lora_B"):
            d = getattr(m, attr, None)
            if d is not None and any(x is mod for x in d.values()):
                return True
    return False


def step_flops(sizes: dict, forwards: list[dict]) -> float:
    """Model FLOPs of one step from the forwards it ran (see the module docstring)."""
    total = 0.0
    for f in forwards:
        total += f["tokens"] * (4 * sizes["N"] + 6 * sizes["P_lora"])
        total += 12 * sizes["layers"] * sizes["d_attn"] * f["sum_sq"]
        total += 4 * sizes["vocab"] * sizes["hidden"] * f["labels"]
    return total


class Recorder:
    """Counts the tokens of every batch the trainer collates (wraps train's collate functions)."""

    def __init__(self, train_module):
        self.train = train_module
        self.forwards: list[dict] = []
        self._saved = {}

    def _wrap(self, name: str, labelled: bool):
        from magnet_model.layout import IGNORE

        fn = getattr(self.train, name)
        self._saved[name] = fn

        def wrapped(*args, **kwargs):
            batch = fn(*args, **kwargs)
            lengths = batch.attention_mask.sum(1)
            labels = 0
            if labelled:
                labels = int((batch.mntp_labels != IGNORE).sum())
                labels += int((batch.msg_labels != IGNORE).sum())
            self.forwards.append(
                {
                    "tokens": int(lengths.sum()),
                    "padded": int(batch.attention_mask.numel()),
                    "sum_sq": int((lengths**2).sum()),
                    "labels": labels,
                }
            )
            return batch

        setattr(self.train, name, wrapped)

    def __enter__(self):
        self._wrap("collate_masked", labelled=True)
        self._wrap("collate_sentences", labelled=False)
        return self

    def __exit__(self, *exc):
        for name, fn in self._saved.items():
            setattr(self.train, name, fn)

    def take(self) -> list[dict]:
        out, self.forwards = self.forwards, []
        return out


CASES = [  # (name, objectives of the run, which stage's step)
    ("MNTP", ["mntp"], 1),
    ("MSG", ["msg"], 1),
    ("SSCL", ["sscl"], 2),
    ("stage 1 step (MNTP + MSG)", None, 1),
    ("stage 2 step (MNTP + MSG, then SSCL)", None, 2),
]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="batch 2, 32 tokens, 2 steps per case")
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's own choice)"
    )
    p.add_argument(
        "--texts", type=int, default=400, help="Wikipedia training paragraphs to draw batches from"
    )
    p.add_argument("--repeat", type=int, default=None, help="timed steps per case (default 3)")
    p.add_argument("--batch-size", type=int, default=None, help="default: the trainer's")
    p.add_argument("--max-length", type=int, default=None, help="default: the trainer's")
    p.add_argument("--out", default=None, help="result name (default training / training_quick)")
    args = p.parse_args(argv)

    import torch

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # fixed already if parallel work ran before
        torch.set_num_interop_threads(1)  # a step has no parallel branches to run side by side
    from magnet_model.settings import ModelSpec
    from magnet_model.training import loop, train

    defaults = train.TrainConfig(output="")
    batch = args.batch_size or (2 if args.quick else defaults.batch_size)
    length = args.max_length or (32 if args.quick else defaults.max_length)
    repeat = args.repeat or (2 if args.quick else 3)
    peak_before = matmul_flops()

    spec = dataclasses.replace(
        ModelSpec.from_env(), adapters={}, device="cpu", dtype="float32", threads=threads
    )
    corpus = _corpus_file(args.texts)
    cfg = dataclasses.replace(
        defaults,
        output="",
        corpus=[str(corpus)],
        batch_size=batch,
        max_length=length,
        progress=False,
    )
    run = train.build_run(cfg, spec)
    shutil.rmtree(corpus.parent, ignore_errors=True)
    sizes = model_sizes(run.model)
    params = [q for q in run.model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = train.make_scheduler(optimizer, cfg)
    torch.manual_seed(cfg.seed)

    results = []
    with Recorder(loop) as rec:  # where train_step finds its collate functions
        for name, objectives, stage in CASES:
            case_cfg = cfg
            if objectives is not None:
                case_cfg = dataclasses.replace(cfg, objectives=objectives, stage2_objectives=None)
            case_run = dataclasses.replace(run, cfg=case_cfg)
            first = 0 if stage == 1 else cfg.stage1_steps
            timings = []
            for i in range(1 + repeat):
                rec.take()
                t = time.perf_counter()
                record = train.train_step(case_run, first + i, optimizer, scheduler)
                seconds = time.perf_counter() - t
                forwards = rec.take()
                if i == 0:
                    continue  # warm-up
                tokens = sum(f["tokens"] for f in forwards)
                padded = sum(f["padded"] for f in forwards)
                flops = step_flops(sizes, forwards)
                timings.append((seconds, tokens, padded, flops, record["loss"]))
            results.append((name, timings))
            best = min(timings, key=lambda x: x[0] / x[1])
            print(
                f"{name}: {best[1] / best[0]:.0f} tokens/s ({best[0]:.2f} s, {best[1]} tokens)",
                file=sys.stderr,
            )
    peak_after = matmul_flops()
    peak = max(peak_before, peak_after)

    rows = []
    cases = {}
    for name, timings in results:
        rates = [tok / s for s, tok, _, _, _ in timings]
        best = max(range(len(timings)), key=lambda k: rates[k])
        seconds, tokens, padded, flops, _ = timings[best]
        achieved = flops / seconds
        note = (
            f"{rates[best]:,.0f} tokens/s best of {len(rates)} (median "
            f"{statistics.median(rates):,.0f}); {tokens} tokens/step, "
            f"{1 - tokens / padded:.0%} padding; {flops / tokens / 1e6:,.0f} MFLOP/token"
        )
        rows.append(
            Row(
                f"training step, {name}: model FLOP/s vs matmul",
                achieved / 1e9,
                "GFLOP/s",
                peak / 1e9,
                f"{cfg.batch_size}x{cfg.max_length}, {threads} threads",
                "",
                note,
            )
        )
        cases[name] = {
            "tokens_per_s": rates,
            "best_tokens_per_s": rates[best],
            "step_seconds": [t[0] for t in timings],
            "tokens_per_step": [t[1] for t in timings],
            "padded_tokens_per_step": [t[2] for t in timings],
            "flops_per_step": [t[3] for t in timings],
            "mfu": achieved / peak,
        }
    name = args.out or ("training_quick" if args.quick else "training")
    write_report(
        name,
        rows,
        {
            "threads": threads,
            "interop_threads": torch.get_num_interop_threads(),
            "batch_size": cfg.batch_size,
            "max_length": cfg.max_length,
            "lora_r": cfg.lora_r,
            "model_sizes": sizes,
            "matmul_flops_before": peak_before,
            "matmul_flops_after": peak_after,
            "cases": cases,
        },
        device="cpu",
        dtype=torch.float32,
    )


def _corpus_file(n: int) -> Path:
    """The first n Wikipedia training paragraphs as a text file (the trainer's default corpus,
    cut so that tokenizing it takes a second, not a minute: a step's cost does not depend on
    how many texts it could have drawn)."""
    import tempfile

    from magnet_model.data import wikipedia_paragraphs

    paras = [" ".join(p.split()) for p in wikipedia_paragraphs("train")[:n]]
    path = Path(tempfile.mkdtemp(prefix="bench-training-")) / "corpus.txt"
    path.write_text("\n".join(paras) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    main()
