"""Decode levers against llama.cpp on the same CPU (issue 24, part 2), for bench_decode.py.

Each lever (a dtype and a decode path of the engine, HF generate, llama.cpp itself) decodes
the same base continuation and, where it can, the same MAGNET span; each row is its tokens/s
against llama.cpp's measured in the same run (llama-cpp-python on the shipped Q4_1 GGUF, a
bench-only extra: bench/requirements.txt) and, in its note, against its own bandwidth bound
(bytes it reads per token / the copy bandwidth). llama.cpp cannot run the hybrid mask, so its
span figure is a plain continuation from a prompt as long as the infill's context: the same
weights and about the same KV cache read per token.
"""

from __future__ import annotations

import time
from pathlib import Path

from common import Row

LLAMA_CPP = "llama.cpp"
TASKS = {
    "continuation": "base continuation",
    "infill": "MAGNET span decoding",
}
TARGET = ">= 0.5"  # issue 24: at least half of llama.cpp's tokens/s


def lever_rows(
    results: dict[str, dict[str, tuple[float, int]]],
    bandwidth: float,
    default: str,
    details: dict[str, str] | None = None,
) -> list[Row]:
    """Rows of the decode table. results: lever -> task -> (tokens/s, bytes read per token);
    the lever named LLAMA_CPP, when present, is every row's baseline (else the row's own
    bandwidth bound is). default: the lever the engine's "auto" picks here (it gets the
    target). details: task -> what was decoded."""
    rows = []
    for task, label in TASKS.items():
        reference = results.get(LLAMA_CPP, {}).get(task)
        for lever, per_task in results.items():
            if task not in per_task:
                continue
            tps, nbytes = per_task[task]
            bound = bandwidth / nbytes
            mb = nbytes / 1e6
            note = f"{tps / bound:.2f}x its bandwidth bound, {bound:.0f} tok/s ({mb:.0f} MB/token)"
            if lever == default:
                note += "; the engine's CPU default here"
            if (details or {}).get(task):
                note = f"{details[task]}; {note}"
            if reference is not None:
                base, what = reference[0], "llama.cpp Q4_1, same run"
                target = TARGET if lever == default else ""
            else:
                base, what, target = bound, "bandwidth bound; llama-cpp-python not installed", ""
            rows.append(Row(f"{label} tok/s, {lever}", tps, "tok/s", base, what, target, note))
    return rows


def llama_cpp_rate(
    gguf: Path, prompt: str, new_tokens: int, threads: int, repeat: int
) -> tuple[float, int] | None:
    """(best tokens/s after the first token, prompt tokens) of llama.cpp decoding greedily
    from prompt, or None without llama-cpp-python. Timed as the engine times itself: from
    the first new token to the last."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(gguf), n_ctx=1024, n_threads=threads, verbose=False, seed=0)
    ids = llm.tokenize(prompt.encode(), add_bos=True)
    best = 0.0
    for _ in range(repeat + 1):  # the first run warms up
        llm.reset()
        n, first = 0, 0.0
        for _tok in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, reset=True):
            n += 1
            if n == 1:
                first = time.perf_counter()
            if n == new_tokens:
                break
        best = max(best, (n - 1) / (time.perf_counter() - first))
    llm.close()
    return best, len(ids)


def gguf_bytes_per_token(gguf: Path, config, context: int) -> int:
    """llama.cpp reads the whole file's tensors per token (its head is the tied embedding),
    plus a float16 KV cache of `context` tokens."""
    heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return gguf.stat().st_size + 2 * config.num_hidden_layers * heads * dim * 2 * context


def hf_generate_rate(runner, ids: list[int], new_tokens: int, repeat: int) -> float:
    """tokens/s of transformers' own generate (greedy, the adapter off) after the first token:
    (new_tokens - 1) / (time of new_tokens - time of 1)."""
    import torch

    x = torch.tensor([ids])

    def run(n: int) -> float:
        with runner.using("base"):
            t = time.perf_counter()
            runner.lm.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False)
            return time.perf_counter() - t

    run(2)
    one = min(run(1) for _ in range(repeat))
    many = min(run(new_tokens) for _ in range(repeat))
    return (new_tokens - 1) / max(many - one, 1e-9)
