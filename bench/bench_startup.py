"""Start-up of the app: process start to first answer, cold and warm cache (issue 7, item 8).

    python bench/bench_startup.py             # writes bench/results/startup.json
    python bench/bench_startup.py --quick     # warm cache once, no cold start (< 1 min);
                                              # writes startup_quick.json

Each start is a fresh `python -m app` child process on a free loopback port with a temporary
database. Two clocks from the moment before the process is spawned: the first HTTP 200 of the
page, and the first infill comparison answered through `gradio_client` (`/infill`, one-token
span; the client connects as soon as the page answers). Cold: an empty MAGNET_CACHE_DIR, so
the embedded GGUF is de-quantized first. Warm: a cache dir that links the de-quantized model.
The baseline, measured in the same run: a fresh `python -c "import torch, transformers,
gradio"`, the floor of any start of this app. The breakdown comes from the app's own log
(timestamps of "Loaded ... in", "Ready to launch after"): imports before main(), model load,
the rest of main (database, UI), launch to the first HTTP 200, and the first call.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_process import client, infill_args, run_app, warm_cache  # noqa: E402
from common import ROOT, Row, app_dtype, write_report  # noqa: E402

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+): (.*)$")


def import_seconds() -> float:
    """Wall time of a fresh interpreter importing the three heavy libraries, then exiting."""
    code = "import torch, transformers, gradio"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def log_times(log: str, spawned_wall: float) -> dict[str, float]:
    """Seconds after spawn at which the app logged its milestones (see main.py, loading.py)."""
    out: dict[str, float] = {}
    for line in log.splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        stamp, _, msg = m.groups()
        t = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() - spawned_wall
        if msg.startswith("De-quantizing"):
            out["dequantize_start"] = t
        elif msg.startswith("Loaded ") and (x := re.search(r" in ([\d.]+) s$", msg)):
            out["model_loaded"] = t
            out["model_load_s"] = float(x.group(1))
        elif x := re.match(r"Ready to launch after ([\d.]+) s", msg):
            out["ready"] = t
            out["main_start"] = t - float(x.group(1))
    return out


def one_start(tmp: Path, cache: Path, max_span: int) -> dict:
    db = tmp / f"db-{time.monotonic_ns()}.sqlite3"
    spawned_wall = time.time()
    with run_app(tmp, cache, db) as app:
        try:
            http = app.wait_http()
            c = client(app.url)
            t0 = time.perf_counter()
            c.predict(*infill_args(max_span), api_name="/infill")
            answer = time.perf_counter() - app.started
            call = time.perf_counter() - t0
        except BaseException:
            print(app.tail(), file=sys.stderr)
            raise
        marks = log_times(app.tail(200_000), spawned_wall)
    r = {"http_s": http, "first_answer_s": answer, "first_call_s": call, **marks}
    if "main_start" in marks and "ready" in marks:
        load_end = marks.get("model_loaded", marks["ready"])
        r["breakdown_s"] = {
            "imports (spawn to main)": marks["main_start"],
            "model load (incl. de-quantize)": load_end - marks["main_start"],
            "database + UI": marks["ready"] - load_end,
            "launch to HTTP 200": http - marks["ready"],
            "first infill call": call,
        }
    return r


def summary(runs: list[dict], key: str) -> float:
    return min(r[key] for r in runs)  # best: least disturbed by neighbours


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one warm start, no cold start")
    ap.add_argument("--cold", type=int, default=1, help="cold starts (each de-quantizes)")
    ap.add_argument("--warm", type=int, default=2, help="warm starts")
    ap.add_argument("--max-span", type=int, default=1, help="tokens per blank of the first call")
    ap.add_argument("--out", default=None, help="result name (default startup[_quick])")
    args = ap.parse_args()
    if args.quick:
        args.cold, args.warm = 0, 1
    name = args.out or ("startup_quick" if args.quick else "startup")

    imports = [import_seconds() for _ in range(2)]
    print(f"import torch, transformers, gradio: {min(imports):.2f} s", flush=True)
    runs: dict[str, list[dict]] = {"warm": [], "cold": []}
    with tempfile.TemporaryDirectory(prefix="magnet-startup-") as tmp_name:
        tmp = Path(tmp_name)
        warm = warm_cache(tmp / "warm-cache")
        for kind, n in (("warm", args.warm), ("cold", args.cold)):
            for i in range(n):
                cache = warm if kind == "warm" else tmp / f"cold-cache-{i}"
                r = one_start(tmp, cache, args.max_span)
                runs[kind].append(r)
                print(
                    f"{kind}: HTTP 200 after {r['http_s']:.1f} s, first answer after "
                    f"{r['first_answer_s']:.1f} s",
                    flush=True,
                )
    base = min(imports)
    w_http, w_ans = summary(runs["warm"], "http_s"), summary(runs["warm"], "first_answer_s")
    what = "fresh `import torch, transformers, gradio`"
    rows = [
        Row("warm cache: start to first HTTP 200", w_http, "s", base, what),
        Row("warm cache: start to first infill answer", w_ans, "s", base, what),
    ]
    if runs["cold"]:
        c_http, c_ans = summary(runs["cold"], "http_s"), summary(runs["cold"], "first_answer_s")
        rows += [
            Row("cold cache: start to first HTTP 200", c_http, "s", w_http, "warm cache"),
            Row("cold cache: start to first infill answer", c_ans, "s", w_ans, "warm cache"),
            Row("cold cache: start to first infill answer vs imports", c_ans, "s", base, what),
        ]
    best_warm = min(runs["warm"], key=lambda r: r["first_answer_s"])
    extra = {
        "settings": vars(args),
        "import_s": imports,
        "runs": runs,
        "warm_breakdown_s": best_warm.get("breakdown_s"),
        "cold_breakdown_s": (
            min(runs["cold"], key=lambda r: r["first_answer_s"]).get("breakdown_s")
            if runs["cold"]
            else None
        ),
    }
    write_report(name, rows, extra, dtype=app_dtype())
    for kind in ("warm", "cold"):
        if extra[f"{kind}_breakdown_s"]:
            parts = ", ".join(f"{k} {v:.1f}" for k, v in extra[f"{kind}_breakdown_s"].items())
            print(f"{kind} breakdown (s): {parts}")
    if len(runs["warm"]) > 1:
        spread = statistics.pstdev(r["first_answer_s"] for r in runs["warm"])
        print(f"warm first answer spread (std): {spread:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
