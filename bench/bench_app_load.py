"""The app under load: rating latency while the generation queue is full (issue 7, item 6).

    python bench/bench_app_load.py            # writes bench/results/app_load.json
    python bench/bench_app_load.py --quick    # smoke run (< 1 min), writes app_load_quick.json

Starts `python -m app` as a child process on a free loopback port, with a temporary SQLite
database holding one open study and one invite, and a temporary MAGNET_CACHE_DIR that links the
de-quantized embedded model (so it starts in seconds). Everything is driven through
`gradio_client` from this process, as a browser would through the queue:

(a) idle: one rater opens the study and submits ratings back to back (`/rate_submit`, which
    stores the answers and returns the next item) -> latency p50 / p95. The baseline.
(b) load: 8 client threads each send an infill comparison (`/infill`: MAGNET + zero-shot +
    five-shot) and send the next one as soon as theirs returns, so the model's queue always
    holds 8 requests, while the same rater keeps submitting. Only ratings that start and end
    inside the window where all 8 infill requests are outstanding are counted.

Rows: rating p95 under load (target <= 200 ms), its ratio to the idle p95 of the same run,
p50 likewise, and failed requests of both kinds (target == 0). The infill latencies are in
the JSON. The child process is terminated on every exit path.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_process import (  # noqa: E402
    client,
    infill_args,
    make_study,
    run_app,
    submit_args,
    warm_cache,
)
from common import Row, app_dtype, write_report  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    """q-quantile by the nearest rank (no interpolation: a measured latency)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def rater_loop(url: str, token: str, stop: threading.Event, think: float) -> dict:
    """Open the study, then submit until stop; -> per submission (start, end, ok, error)."""
    c = client(url)
    shown = c.predict(token, api_name="/rate_open")[2]
    samples, errors = [], []
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            shown = c.predict(*submit_args(token, shown), api_name="/rate_submit")[2]
            ok = True
        except Exception as e:  # noqa: BLE001 - counted and reported
            ok = False
            errors.append(f"{type(e).__name__}: {e}"[:200])
        samples.append((t0, time.perf_counter(), ok))
        time.sleep(think)
    return {"samples": samples, "errors": errors}


def noop_round_trips(url: str, seconds: float) -> list[float]:
    """ms of `/rate_load` with no token: the same 26 outputs, no database: gradio_client's and
    Gradio's own cost of one request (gradio_client polls its messages every 50 ms)."""
    c = client(url)
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        c.predict("", api_name="/rate_load")
        out.append(1000 * (time.perf_counter() - t0))
    return out


def run_rater(url: str, token: str, seconds: float, think: float) -> dict:
    stop = threading.Event()
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(rater_loop(url, token, stop, think)))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return out


def load_phase(url: str, token: str, args, stop_app) -> dict:
    """8 infill senders keep the model queue full while the rater submits.

    With args.drain the requests still queued when the window closes are waited for (and
    counted); without, the app is stopped (stop_app) and they are reported as abandoned."""
    n = args.clients
    clients = [client(url) for _ in range(n)]
    stop = threading.Event()
    lock = threading.Lock()
    infills: list[tuple[float, float, bool]] = []  # (sent, answered, ok)
    errors: list[str] = []
    first_sent = [None] * n

    def sender(i: int) -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            if first_sent[i] is None:
                first_sent[i] = t0
            try:
                clients[i].predict(*infill_args(args.max_span), api_name="/infill")
                ok = True
            except Exception as e:  # noqa: BLE001 - counted and reported
                ok = False
                with lock:
                    errors.append(f"{type(e).__name__}: {e}"[:200])
            with lock:
                infills.append((t0, time.perf_counter(), ok))

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    while any(s is None for s in first_sent):
        time.sleep(0.01)
    time.sleep(0.5)  # let the last joins reach the server's queue
    window_start = time.perf_counter()
    rater = run_rater(url, token, args.seconds, args.think)
    window_end = time.perf_counter()
    stop.set()  # no sender sends again; the window closes before the queue drains
    if not args.drain:
        stop_app()
    for t in threads:
        t.join()
    # Ratings sent after every sender had queued its first request and answered before any
    # sender stopped.
    inside = [(a, b, ok) for a, b, ok in rater["samples"] if window_start <= a and b <= window_end]

    # Fullness check: how many infill requests were in flight when each rating started.
    in_flight = [sum(1 for a, b, _ in infills if a <= s < b) for s, _, _ in inside]
    if not args.drain:  # the ones cut off by stopping the app are not the app's failures
        answered = [x for x in infills if x[1] <= window_end]
        abandoned = len(infills) - len(answered)
        infills[:] = answered
        errors[:] = errors[: sum(not ok for _, _, ok in answered)]
    else:
        abandoned = 0
    return {
        "window_s": window_end - window_start,
        "ratings": inside,
        "rating_errors": rater["errors"],
        "ratings_outside_window": len(rater["samples"]) - len(inside),
        "infills": infills,
        "infill_errors": errors,
        "abandoned": abandoned,
        "min_in_flight": min(in_flight) if in_flight else None,
        "mean_in_flight": statistics.fmean(in_flight) if in_flight else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: short windows, 2-token spans")
    ap.add_argument("--seconds", type=float, default=30.0, help="measuring window under load")
    ap.add_argument("--idle-seconds", type=float, default=15.0, help="idle rating window")
    ap.add_argument("--clients", type=int, default=8, help="concurrent infill senders")
    ap.add_argument("--max-span", type=int, default=4, help="tokens per blank of each infill")
    ap.add_argument("--think", type=float, default=0.05, help="rater pause between submissions")
    ap.add_argument(
        "--no-drain",
        dest="drain",
        action="store_false",
        help="stop the app when the window closes instead of waiting for the queued infills",
    )
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the app process")
    ap.add_argument("--out", default=None, help="result name (default app_load[_quick])")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.idle_seconds, args.max_span, args.drain = 8.0, 4.0, 1, False
    name = args.out or ("app_load_quick" if args.quick else "app_load")
    extra_env = dict(kv.split("=", 1) for kv in args.env)

    with tempfile.TemporaryDirectory(prefix="magnet-app-load-") as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "annotations.sqlite3"
        token = make_study(db, n_items=3000)
        cache = warm_cache(tmp / "cache")
        with run_app(tmp, cache, db, extra_env) as app:
            try:
                up = app.wait_http()
                c = client(app.url)
                t0 = time.perf_counter()
                c.predict(*infill_args(args.max_span), api_name="/infill")  # warm-up
                t1 = time.perf_counter()
                c.predict(*infill_args(args.max_span), api_name="/infill")
                single_infill = time.perf_counter() - t1
                print(
                    f"app up in {up:.1f} s; first infill {t1 - t0:.2f} s, second "
                    f"{single_infill:.2f} s",
                    flush=True,
                )
                floor = noop_round_trips(app.url, args.idle_seconds / 2)
                idle = run_rater(app.url, token, args.idle_seconds, args.think)
                idle_ms = [1000 * (b - a) for a, b, ok in idle["samples"] if ok]
                print(f"idle: {len(idle_ms)} ratings, p95 {pct(idle_ms, 0.95):.0f} ms", flush=True)
                load = load_phase(app.url, token, args, app.proc.terminate)
            except BaseException:
                print(app.tail(), file=sys.stderr)
                raise

    load_ms = [1000 * (b - a) for a, b, ok in load["ratings"] if ok]
    inf_ok = [b - a for a, b, ok in load["infills"] if ok]
    failed_ratings = sum(not ok for _, _, ok in idle["samples"]) + sum(
        not ok for _, _, ok in load["ratings"]
    )
    failed_infills = sum(not ok for _, _, ok in load["infills"])
    n_requests = len(idle["samples"]) + len(load["ratings"]) + len(load["infills"])
    p95_idle, p95_load = pct(idle_ms, 0.95), pct(load_ms, 0.95)
    p50_idle, p50_load = statistics.median(idle_ms), statistics.median(load_ms)
    queue = f"{args.clients} infills in flight, min {load['min_in_flight']}"
    rows = [
        Row("rating p95 under load", p95_load, "ms", target="<= 200", note=queue),
        Row("rating p95 under load vs idle", p95_load, "ms", p95_idle, "rating p95, app idle"),
        Row("rating p50 under load vs idle", p50_load, "ms", p50_idle, "rating p50, app idle"),
        Row(
            "failed requests",
            failed_ratings + failed_infills,
            "requests",
            target="== 0",
            note=f"of {n_requests}: {failed_infills} infill, {failed_ratings} rating"
            + (
                f"; {load['abandoned']} infills cut off at the end, not counted"
                if not args.drain
                else ""
            ),
        ),
        Row(
            "rating p95 idle vs a no-op request",
            p95_idle,
            "ms",
            pct(floor, 0.95),
            "p95 of /rate_load without token (no DB)",
            note="what the protocol and client cost",
        ),
        Row(
            "infill comparison p50 under load vs alone",
            statistics.median(inf_ok) if inf_ok else float("nan"),
            "s",
            single_infill,
            "one infill, queue empty",
            note=f"max span {args.max_span}; queued behind {args.clients - 1} others",
        ),
    ]
    extra = {
        "settings": vars(args),
        "app_up_s": up,
        "noop_request": {
            "n": len(floor),
            "p50_ms": statistics.median(floor),
            "p95_ms": pct(floor, 0.95),
        },
        "idle": {
            "n": len(idle_ms),
            "p50_ms": p50_idle,
            "p95_ms": p95_idle,
            "max_ms": max(idle_ms),
            "errors": idle["errors"][:5],
        },
        "load": {
            "window_s": load["window_s"],
            "n_ratings": len(load_ms),
            "ratings_outside_window": load["ratings_outside_window"],
            "p50_ms": p50_load,
            "p95_ms": p95_load,
            "max_ms": max(load_ms) if load_ms else None,
            "min_infills_in_flight": load["min_in_flight"],
            "mean_infills_in_flight": load["mean_in_flight"],
            "rating_errors": load["rating_errors"][:5],
        },
        "infill": {
            "ok": len(inf_ok),
            "failed": failed_infills,
            "p50_s": statistics.median(inf_ok) if inf_ok else None,
            "p95_s": pct(inf_ok, 0.95) if inf_ok else None,
            "single_s": single_infill,
            "errors": load["infill_errors"][:5],
        },
    }
    write_report(name, rows, extra, dtype=app_dtype(extra_env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
