"""Run every performance benchmark in turn, then write bench/README.md from their JSON.

    python bench/run_all.py                  # all, full size (about 30-40 minutes here)
    python bench/run_all.py --quick          # smoke run of each (a few minutes)
    python bench/run_all.py --only decode search
    python bench/run_all.py --readme-only    # rebuild bench/README.md from bench/results/

Benchmarks run one after another in fresh processes (they would disturb each other's
timings). A benchmark that fails is reported and the others still run; the exit status says
whether all succeeded. The README is built from the full-size results only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import RESULTS, ROOT, Row, table

BENCH = Path(__file__).resolve().parent
# (results name, script, what the issue asks) in the order of issue 7
BENCHES = [
    ("decode", "bench_decode.py", "1-2. Decoding at batch 1 and the cached infill"),
    ("decode_levers", "bench_decode.py --only-levers", "1b. Decode levers against llama.cpp"),
    ("omp_wait", "bench_omp_wait.py", "1c. OMP_WAIT_POLICY and the engine's decoding"),
    ("side_by_side", "bench_side_by_side.py", "3. Side-by-side cost"),
    ("embed", "bench_embed.py", "4. Sentence embeddings per parameter"),
    ("search", "bench_search.py", "5. Search latency and index build"),
    ("app_load", "bench_app_load.py", "6. The app under load"),
    ("memory", "bench_memory.py", "7. Memory"),
    ("startup", "bench_startup.py", "8. Start-up"),
    ("first_search", "bench_first_search.py", "8b. The first Search of a fresh start"),
    ("training", "bench_training.py", "9. Training step against the FLOP bound"),
    ("distributed", "bench_distributed.py", "9b. The trainer in 2 processes (gloo) against 1"),
    ("study_batches", "bench_study_batches.py", "10. Many items' fills in one batch"),
]

HEAD = """# Benchmarks

Every figure is a ratio against something measured in the same run: a physical limit of this
machine (copy bandwidth, matmul FLOP/s) or a baseline implementation. Each benchmark prints its
table and writes `results/<name>.json` (rows, hardware, command, time). This page is written by

    python bench/run_all.py

(`--readme-only` rebuilds it from the JSON). A row's ratio is value / baseline; "met" checks the
target on the ratio (or on the value where there is no baseline). Absolute times on a shared
2-core machine vary from run to run; the ratios much less, since both sides share the run.
A benchmark that loads the model reads the `MAGNET_*` settings as the app does
(`MAGNET_DTYPE=float32`, `MAGNET_DEVICE=cuda`, `MAGNET_THREADS`; `bench_training.py` pins
its own), and records the dtype and device it ran in.
Rating throughput of annotation_db is measured separately by `python bench/bench_ratings.py`
(`results/ratings.json`); the share of study outputs the checks before inviting flag (chat
replies of the prompted baselines with and without their re-ask) by
`python bench/bench_fill_checks.py --items 40` (`results/fill_checks.json`); the loop guard of
MAGNET fills against no guard, on the same unit-suite fills, by
`python bench/bench_fill_guard.py --adapter DIR` (`results/fill_guard.json`); the prompted
baselines' prompt formats on the same suites by `python bench/bench_prompt_formats.py`
(`results/prompt_formats.json`); MAGNET fills' lengths with a length hint (the true one, a
fixed one, or the best of several by how the text after the blank reads) against none by
`python bench/bench_length_hints.py --adapter DIR` (`results/length_hints.json`); where MAGNET
fills end (the model's own end, the stop rule and its variants, on the same fills) by
`python bench/bench_stop_rules.py` (`results/stop_rules.json`); MAGNET fills kept from several
first tokens against the greedy path's best stop by `python bench/bench_first_branches.py`
(`results/first_branches.json`).
"""


def run(script: str, quick: bool) -> tuple[bool, float]:
    name, *options = script.split()
    cmd = [sys.executable, str(BENCH / name), *options] + (["--quick"] if quick else [])
    print(f"\n=== {' '.join(cmd[1:])}", flush=True)
    t = time.perf_counter()
    ok = subprocess.run(cmd, cwd=ROOT).returncode == 0
    return ok, time.perf_counter() - t


def section(name: str, title: str) -> str:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return f"## {title}\n\nNot run yet: `python bench/{dict(_scripts())[name]}`.\n"
    report = json.loads(path.read_text())
    rows = [Row(**{k: r[k] for k in Row.__dataclass_fields__}) for r in report["rows"]]
    hw = report.get("hardware", {})
    features = f" ({hw['cpu_features']})" if hw.get("cpu_features") else ""
    where = hw.get("gpu") or f"{hw.get('cpu', '?')}{features}, {hw.get('cores', '?')} cores"
    threads = hw.get("torch_threads")
    dtype = hw.get("dtype")  # the model's, as --dtype names it; none where no model runs
    return (
        f"## {title}\n\n`{_relative(report.get('command', ''))}` — {report.get('finished', '')}; "
        f"{where}, {hw.get('device', 'cpu')}{f', {dtype}' if dtype else ''}"
        f"{f', {threads} torch threads' if threads else ''}.\n\n{table(rows)}\n"
    )


def _scripts():
    return [(name, script) for name, script, _ in BENCHES]


def _relative(command: str) -> str:
    return command.replace(str(ROOT) + "/", "")


def readme() -> Path:
    parts = [HEAD]
    met = missed = 0
    for name, _, title in BENCHES:
        parts.append(section(name, title))
        path = RESULTS / f"{name}.json"
        if path.exists():
            for r in json.loads(path.read_text())["rows"]:
                met += r.get("met") is True
                missed += r.get("met") is False
    parts.insert(1, f"Targets in the tables below: {met} met, {missed} missed.\n")
    out = BENCH / "README.md"
    out.write_text("\n".join(parts))
    print(f"wrote {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke run")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"some of: {' '.join(n for n, _, _ in BENCHES)}",
    )
    parser.add_argument("--readme-only", action="store_true")
    args = parser.parse_args(argv)
    failed = []
    if not args.readme_only:
        names = args.only or [n for n, _, _ in BENCHES]
        unknown = set(names) - {n for n, _, _ in BENCHES}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        for name, script, _ in BENCHES:
            if name in names:
                ok, seconds = run(script, args.quick)
                print(f"=== {name}: {'ok' if ok else 'FAILED'} in {seconds:.0f} s", flush=True)
                if not ok:
                    failed.append(name)
    if not args.quick:
        readme()
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
