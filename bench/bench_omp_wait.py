"""OMP_WAIT_POLICY and the engine's batch-1 decoding (issue 32, item 5).

    python bench/bench_omp_wait.py [--quick] [--threads 2] [--rounds 2] [--busy 1]

OpenMP's idle threads spin after every parallel region unless OMP_WAIT_POLICY=PASSIVE: on a
busy 2-core box that made llama.cpp take 634-1134 ms a step at 2 threads against 25 ms with
PASSIVE (issue 32). `python -m app` sets PASSIVE (app/settings.py; the app under load with and
without it: bench/results/app_load*.json). Does the torch engine's own decoding care? The
policy is read once, when torch loads OpenMP, so every figure is a fresh process: the same base
continuation and MAGNET span in the engine's CPU default (MAGNET_DTYPE), with the policy PASSIVE
and unset (OpenMP's default), alternating round by round; on the machine as it is ("quiet") and
with --busy processes spinning on a core each meanwhile (a box shared with other work). Rows:
tokens/s with PASSIVE against unset, best of each (least disturbed); every sample in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

from common import Row, model_spec, write_report

POLICIES = ("PASSIVE", None)  # None: unset, OpenMP's default (libgomp: spin a while, then sleep)
SPIN = "while True: pass"


def child(threads: int, new_tokens: int, span: int, repeat: int) -> dict:
    """In the measured process: best tokens/s of a continuation and of a MAGNET span."""
    import torch
    from bench_decode import infill_context

    from magnet_model.inference.engine import Engine

    torch.set_num_threads(threads)
    engine = Engine.from_spec(model_spec())
    text = infill_context()
    prompt = " ".join(text.split()[:40])
    engine.generate(prompt, max_new_tokens=4)  # warm-up
    has_magnet = "magnet" in engine.runner.adapter_names
    out = {"dtype": engine.runner.loaded.dtype_name, "continuation": 0.0, "infill": None}
    for _ in range(repeat):
        r = engine.generate(prompt, max_new_tokens=new_tokens)
        out["continuation"] = max(out["continuation"], r.tokens_per_second)
        if has_magnet:
            f = engine.infill(text, adapter="magnet", fixed_lengths=span)
            out["infill"] = max(out["infill"] or 0.0, f.tokens_per_second)
    return out


@contextmanager
def spinners(n: int):
    """n processes that each keep one core busy (nice 0, like the work they stand for)."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def measure(policy: str | None, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    cmd = [sys.executable, __file__, "--child", "--threads", str(args.threads)]
    cmd += ["--new-tokens", str(args.new_tokens), "--span", str(args.span)]
    cmd += ["--repeat", str(args.repeat)]
    load = os.getloadavg()[0]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{done.stderr[-2000:]}")
    # the 1-minute load average before it started: how busy "quiet" was
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load_before": load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short outputs, one round")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="processes per policy and load")
    parser.add_argument("--repeat", type=int, default=3, help="decodes per process (best kept)")
    parser.add_argument("--busy", type=int, default=1, help="spinning processes of the busy run")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--span", type=int, default=32)
    parser.add_argument("--out", default=None, help="results name or path (default omp_wait)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.threads, args.new_tokens, args.span, args.repeat)))
        return 0
    if args.quick:
        args.rounds, args.repeat, args.new_tokens, args.span = 1, 1, 16, 8
    samples: dict[str, dict[str, list[dict]]] = {}
    loads = {"quiet": 0, f"{args.busy} busy core(s)": args.busy} if args.busy else {"quiet": 0}
    for load, n in loads.items():
        samples[load] = {str(p): [] for p in POLICIES}
        with spinners(n):
            for _ in range(args.rounds):  # alternating: the machine's other work falls on both
                for policy in POLICIES:
                    got = measure(policy, args)
                    print(load, policy or "unset", got, flush=True)
                    samples[load][str(policy)].append(got)
    rows, dtype = [], None
    for load, by_policy in samples.items():
        for task, what in [
            ("continuation", f"{args.new_tokens}-token continuation, base"),
            ("infill", f"{args.span}-token MAGNET span"),
        ]:
            best = {p: max((s[task] or 0.0) for s in by_policy[str(p)]) for p in POLICIES}
            if not best["PASSIVE"]:
                continue
            dtype = by_policy["PASSIVE"][0]["dtype"]
            rows.append(
                Row(
                    f"{what} tok/s, OMP_WAIT_POLICY=PASSIVE, {load}",
                    best["PASSIVE"],
                    "tok/s",
                    best[None],
                    "unset, same run",
                    "",
                    f"{args.threads} threads, best of {args.rounds} processes x {args.repeat}",
                )
            )
    name = args.out or ("omp_wait_quick" if args.quick else "omp_wait")
    write_report(name, rows, {"samples": samples, "threads": args.threads}, "cpu", dtype)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
