"""The trainer in 2 processes (torchrun, gloo) against 1, on the embedded model, same global batch.

    python bench/bench_distributed.py           # 4 + 4 steps, global batch 8, 128 tokens
    python bench/bench_distributed.py --quick   # 2 + 2 steps, global batch 4, 32 tokens

Both runs are `python -m magnet_model.training.train` as a user starts it: one process at
--batch-size 2B with every core, and `torchrun --standalone --nproc-per-node 2` at --batch-size
B, each rank with half the cores (OMP_NUM_THREADS). A step's time is the trainer's own
(train_log.jsonl "seconds"), the first step of each stage left out (warm-up); the table gives
2 ranks' seconds per step over 1 process's, per stage. On a 2-core CPU 2 ranks are not faster
(each has half the cores, and they exchange gradients and SSCL embeddings every step); the
point of the run is that the same command scales across devices and computes the same thing,
so the report also gives the largest relative difference between the two runs' losses
(dropout off in both, so that they may agree number for number).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_training import _corpus_file  # noqa: E402
from bench.common import Row, write_report  # noqa: E402

OBJECTIVES = ("mntp", "msg", "msg_end", "sscl")


def run(out: Path, corpus: Path, batch: int, length: int, steps: int, ranks: int, cores: int):
    """One training run; returns its log records."""
    flags = [
        "--output", str(out), "--corpus", str(corpus), "--device", "cpu", "--dtype", "float32",
        "--batch-size", str(batch), "--max-length", str(length), "--sscl-max-length",
        str(min(64, length)), "--stage1-steps", str(steps), "--stage2-steps", str(steps),
        "--save-every", "1000000", "--lora-dropout", "0", "--sscl-dropout", "0",
        "--no-progress", "--overwrite",
    ]  # fmt: skip
    train = ["-m", "magnet_model.training.train", *flags]
    if ranks > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={ranks}", *train]  # fmt: skip
    else:
        cmd = [sys.executable, *train]
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, cores // ranks)), PYTHONPATH=str(ROOT))
    env.pop("WORLD_SIZE", None)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the {ranks}-process run failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return [json.loads(ln) for ln in (out / "train_log.jsonl").read_text().splitlines()]


def per_stage(log: list[dict]) -> dict[int, float]:
    """Median seconds per step of each stage, its first step left out."""
    out = {}
    for stage in (1, 2):
        secs = [r["seconds"] for r in log if r["stage"] == stage]
        out[stage] = statistics.median(secs[1:] or secs)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="2 + 2 steps, global batch 4, 32 tokens")
    p.add_argument("--steps", type=int, default=None, help="steps per stage (default 4)")
    p.add_argument("--out", default=None, help="result name (default distributed[_quick])")
    args = p.parse_args(argv)
    steps = args.steps or (2 if args.quick else 4)
    batch, length = (2, 32) if args.quick else (4, 128)  # per rank; one process: twice that
    cores = os.cpu_count() or 1
    corpus = _corpus_file(200)
    tmp = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    try:
        one = run(tmp / "one", corpus, 2 * batch, length, steps, 1, cores)
        two = run(tmp / "two", corpus, batch, length, steps, 2, cores)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(corpus.parent, ignore_errors=True)
    diffs = [
        abs(a[k] - b[k]) / max(abs(b[k]), 1e-12)
        for a, b in zip(two, one, strict=True)
        for k in OBJECTIVES
        if k in a and k in b
    ]
    t1, t2 = per_stage(one), per_stage(two)
    what = f"global batch {2 * batch}x{length}, {cores} cores"
    rows = [
        Row(
            f"training step, stage {stage}: 2 ranks (gloo) vs 1 process",
            t2[stage],
            "s/step",
            t1[stage],
            f"1 process, {what}",
            "",
            f"{t2[stage]:.2f} vs {t1[stage]:.2f} s/step (median of {steps - 1 or 1})",
        )
        for stage in (1, 2)
    ]
    rows.append(
        Row(
            "largest relative loss difference, 2 ranks vs 1 process",
            max(diffs),
            "",
            None,
            "",
            "",
            f"over {len(diffs)} losses of {len(one)} steps (every objective, dropout off)",
        )
    )
    name = args.out or ("distributed_quick" if args.quick else "distributed")
    extra = {"one_process": one, "two_ranks": two, "steps_per_stage": steps}
    write_report(name, rows, extra, device="cpu", dtype="float32")


if __name__ == "__main__":
    main()
