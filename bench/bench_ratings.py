"""Ratings per second sustained by annotation_db, 1 writer vs 16 concurrent writers.

Each writer is a rater doing what the Rate tab does: ``next_item`` then ``submit`` with answers
for the item's 3 outputs (MAGNET, base zero-shot, base five-shot), as fast as it can, for
``--seconds``. A rating is one (rater, output) row, so one submission stores 3 ratings.
Backends: SQLite with synchronous=NORMAL (the default) and FULL, and PostgreSQL when
``MAGNET_BENCH_PG_URL`` or ``MAGNET_TEST_PG_URL`` names a reachable server
(``source .ci/postgres.sh`` starts one).

    python bench/bench_ratings.py [--seconds 8] [--writers 1 16] [--out bench/results/ratings.json]

Prints a table; writes the numbers, ratios and hardware as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, text  # noqa: E402

from annotation_db import AnnotationStore, DBSettings, ItemIn, OutputIn  # noqa: E402
from annotation_db.migrate import drop_schema  # noqa: E402

SYSTEMS = ("magnet", "base-zero-shot", "base-five-shot")
QUESTIONS = ["appropriate", "likert:fluency", "preference"]


def make_study(store: AnnotationStore, n_items: int, writers: int) -> list[str]:
    items = [
        ItemIn(f"i{i}", f"Passage {i}: the river ___ through the valley.", ["winds"])
        for i in range(n_items)
    ]
    outputs = [
        OutputIn(
            f"i{i}",
            s,
            f"Passage {i}: the river {s}-fill through the valley.",
            model="bench",
            decoding={"temperature": 0.7},
            seed=i,
        )
        for i in range(n_items)
        for s in SYSTEMS
    ]
    store.create_study("bench", items, outputs, questions=QUESTIONS, raters_per_item=writers)
    return [inv.token for inv in store.invite_many("bench", [f"w{i}" for i in range(writers)])]


def run(store: AnnotationStore, writers: int, seconds: float, n_items: int) -> dict:
    tokens = make_study(store, n_items, writers)
    counts = [0] * writers
    latencies: list[list[float]] = [[] for _ in range(writers)]
    errors: list[str] = []
    start_barrier = threading.Barrier(writers + 1)
    stop = threading.Event()

    def work(w: int) -> None:
        tok = tokens[w]
        start_barrier.wait()
        try:
            while not stop.is_set():
                t0 = time.perf_counter()
                item = store.next_item(tok)
                if item is None:
                    errors.append("ran out of items; raise --items")
                    return
                ans = {o.label: {"appropriate": True, "fluency": 4} for o in item.outputs}
                store.submit(tok, item.assignment_id, ans, preference="A")
                latencies[w].append(time.perf_counter() - t0)
                counts[w] += 1
        except Exception as e:  # noqa: BLE001 - reported in the table
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    start_barrier.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    subs = sum(counts)
    lat = sorted(x for ls in latencies for x in ls)
    stored = store.progress("bench").judgments_done
    return {
        "writers": writers,
        "seconds": round(elapsed, 2),
        "submissions": subs,
        "ratings": subs * len(SYSTEMS),
        "ratings_per_s": round(subs * len(SYSTEMS) / elapsed, 1),
        "submissions_per_s": round(subs / elapsed, 1),
        "cycle_ms_p50": round(1000 * statistics.median(lat), 2) if lat else None,
        "cycle_ms_p95": round(1000 * lat[int(0.95 * (len(lat) - 1))], 2) if lat else None,
        "stored_check": stored == subs,
        "errors": errors[:3],
    }


def pg_url() -> str | None:
    url = os.environ.get("MAGNET_BENCH_PG_URL") or os.environ.get("MAGNET_TEST_PG_URL")
    if not url:
        return None
    try:
        eng = create_engine(url, connect_args={"connect_timeout": 3})
        with eng.connect() as c:
            c.execute(text("select 1"))
        eng.dispose()
        return url
    except Exception as e:  # noqa: BLE001
        print(f"PostgreSQL not reachable ({type(e).__name__}); skipping it", file=sys.stderr)
        return None


def hardware(pg: str | None) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_avg_1m_at_start": os.getloadavg()[0],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    if pg:
        eng = create_engine(pg)
        with eng.connect() as c:
            info["postgresql"] = c.execute(text("show server_version")).scalar()
        eng.dispose()
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="per configuration")
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 16])
    ap.add_argument(
        "--items", type=int, default=3000, help="items per study (enough to not run out)"
    )
    ap.add_argument("--workdir", default=None, help="where the SQLite files go (default: temp)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ratings.json"))
    args = ap.parse_args()

    pg = pg_url()
    configs: list[tuple[str, DBSettings | None]] = [("sqlite-normal", None), ("sqlite-full", None)]
    if pg:
        configs.append(("postgresql", DBSettings(url=pg)))
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for name, settings in configs:
            for w in args.writers:
                if name.startswith("sqlite"):
                    sync = name.split("-")[1].upper()
                    path = Path(tmp) / f"{name}-{w}.sqlite3"
                    settings = DBSettings(url=f"sqlite:///{path}", synchronous=sync)
                else:
                    eng = create_engine(settings.url)
                    drop_schema(eng)
                    eng.dispose()
                store = AnnotationStore(settings=settings)
                try:
                    r = run(store, w, args.seconds, args.items)
                finally:
                    store.close()
                r["backend"] = name
                rows.append(r)
                print(
                    f"  {name:14s} writers={w:<3d} {r['ratings_per_s']:8.1f} ratings/s", flush=True
                )

    base = {(r["backend"], r["writers"]): r["ratings_per_s"] for r in rows}
    ref = base.get(("sqlite-normal", args.writers[0]))
    for r in rows:
        one = base.get((r["backend"], args.writers[0]))
        r["vs_same_backend_1_writer"] = round(r["ratings_per_s"] / one, 2) if one else None
        r["vs_sqlite_normal_1_writer"] = round(r["ratings_per_s"] / ref, 2) if ref else None

    hw = hardware(pg)
    print()
    print(f"annotation_db ratings/s ({args.seconds:g} s per row; 3 ratings per submission)")
    print(
        f"hardware: {hw['cpu']}, {hw['cores']} cores, load {hw['load_avg_1m_at_start']:.1f};"
        f" sqlite {hw['sqlite']}" + (f"; postgresql {hw.get('postgresql')}" if pg else "")
    )
    hdr = (
        f"{'backend':14s} {'writers':>7s} {'ratings/s':>10s} {'subm/s':>8s} {'p50 ms':>8s}"
        f" {'p95 ms':>8s} {'x 1 writer':>10s} {'x sqlite-1':>10s}  ok"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(
            f"{r['backend']:14s} {r['writers']:7d} {r['ratings_per_s']:10.1f}"
            f" {r['submissions_per_s']:8.1f} {r['cycle_ms_p50']!s:>8s} {r['cycle_ms_p95']!s:>8s}"
            f" {r['vs_same_backend_1_writer']!s:>10s} {r['vs_sqlite_normal_1_writer']!s:>10s}"
            f"  {'yes' if r['stored_check'] and not r['errors'] else 'NO ' + str(r['errors'])}"
        )
    if not pg:
        print("(PostgreSQL skipped: set MAGNET_TEST_PG_URL, e.g. `source .ci/postgres.sh`)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "annotation_db ratings per second",
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "unit": "ratings (one per rater x output) per second, next_item + submit per item",
                "seconds_per_row": args.seconds,
                "hardware": hw,
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0 if all(r["stored_check"] and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
