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

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from common import Row

from magnet_model.hardware import has_amx

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
    missing: str | None = None,
) -> list[Row]:
    """Rows of the decode table. results: lever -> task -> (tokens/s, bytes read per token);
    the lever named LLAMA_CPP, when present, is every row's baseline (else the row's own
    bandwidth bound is, and `missing` says why llama.cpp is not). default: the lever the
    engine's "auto" picks here (it gets the target). details: task -> what was decoded."""
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
                why = missing or "llama-cpp-python not installed"
                base, what, target = bound, f"bandwidth bound; {why}", ""
            rows.append(Row(f"{label} tok/s, {lever}", tps, "tok/s", base, what, target, note))
    return rows


CHILD = Path(__file__)  # llama.cpp's process runs this file with --llama-cpp


def llama_cpp_installed() -> bool:
    """Whether the bench-only extra llama-cpp-python is installed (bench/requirements.txt)."""
    return importlib.util.find_spec("llama_cpp") is not None


class LlamaCppFailed(RuntimeError):
    """llama.cpp's process died or failed; the message says how (the bench goes on without it)."""


def llama_cpp_options(flags: frozenset[str] | None = None) -> dict[str, bool]:
    """How llama.cpp is run on this CPU. extra_bufts: llama.cpp's extra weight buffer types
    (AMX and repacked layouts) on, except on a CPU with AMX, where `llama_decode` segfaulted on
    every quantised GGUF until they were off (issue 32, an AMX Xeon review)."""
    return {"extra_bufts": not has_amx(flags)}


def llama_cpp_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment of llama.cpp's process: OMP_WAIT_POLICY=PASSIVE unless set (even empty).
    Its OpenMP threads otherwise spin after every step: on a busy 2-core box 634-1134 ms a step
    at 2 threads against 25 ms with PASSIVE (issue 32). OpenMP reads it once, when it loads, so
    it takes a process of its own (this one loaded torch's OpenMP long before)."""
    env = dict(environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def llama_cpp_rate(
    gguf: Path, prompt: str, new_tokens: int, threads: int, repeat: int
) -> tuple[float, int] | None:
    """(best tokens/s after the first token, prompt tokens) of llama.cpp decoding greedily
    from prompt, or None without llama-cpp-python. Timed as the engine times itself: from
    the first new token to the last. Runs in a child process (llama_cpp_env,
    llama_cpp_options), so a crash of llama.cpp is a LlamaCppFailed here, not the bench's end."""
    if not llama_cpp_installed():
        return None
    job = {"gguf": str(gguf), "prompt": prompt, "new_tokens": new_tokens, "threads": threads}
    job |= {"repeat": repeat, **llama_cpp_options()}
    try:
        done = subprocess.run(
            [sys.executable, str(CHILD), "--llama-cpp"],
            input=json.dumps(job),
            env=llama_cpp_env(dict(os.environ)),
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired as e:
        raise LlamaCppFailed(f"llama.cpp did not finish in {e.timeout:.0f} s") from None
    if done.returncode != 0:
        how = (
            f"was killed by signal {-done.returncode} ({signal.Signals(-done.returncode).name})"
            if done.returncode < 0
            else f"exited with status {done.returncode}"
        )
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise LlamaCppFailed(f"llama.cpp {how} {tail[0]}".strip())
    rate, prompt_tokens = json.loads(done.stdout.strip().splitlines()[-1])
    return rate, prompt_tokens


def _llama_cpp_child(job: dict) -> tuple[float, int]:
    """In llama.cpp's own process: llama_cpp_rate's measurement."""
    import llama_cpp
    from llama_cpp import Llama

    defaults = llama_cpp.llama_cpp.llama_model_default_params

    def params():  # Llama() has no argument for it: its model parameters start from these
        p = defaults()
        if not any(name == "use_extra_bufts" for name, *_ in type(p)._fields_):
            raise RuntimeError("this llama-cpp-python has no use_extra_bufts model parameter")
        p.use_extra_bufts = job["extra_bufts"]
        return p

    llama_cpp.llama_cpp.llama_model_default_params = params
    llm = Llama(model_path=job["gguf"], n_ctx=1024, n_threads=job["threads"], verbose=False, seed=0)
    ids = llm.tokenize(job["prompt"].encode(), add_bos=True)
    best = 0.0
    for _ in range(job["repeat"] + 1):  # the first run warms up
        llm.reset()
        n, first = 0, 0.0
        for _tok in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, reset=True):
            n += 1
            if n == 1:
                first = time.perf_counter()
            if n == job["new_tokens"]:
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


if __name__ == "__main__" and sys.argv[1:] == ["--llama-cpp"]:
    print(json.dumps(_llama_cpp_child(json.loads(sys.stdin.read()))))
