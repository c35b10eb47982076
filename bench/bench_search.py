"""Top-10 search latency over 10k, 100k and 1M stored vectors: the index vs exact brute force.

    python bench/bench_search.py            # 10k, 100k, 1M  -> bench/results/search.json
    python bench/bench_search.py --quick    # 10k, 100k      -> bench/results/search_quick.json
    options: --sizes 10000 100000 --queries 200 --baseline-queries 50 --threads 2

For each size n it builds magnet_model.inference.vector_index.VectorIndex (exact up to
EXACT_MAX_VECTORS, an IVF index above, nprobe calibrated at build time) and measures, in the
same run: the build time; the latency of single top-10 queries (one query at a time, as the
app's Search tab asks; each query's best of --repeat passes, then p50/p95 over the queries);
recall@10 against exact search; and the same latency for exact brute force (numpy matrix-vector
product + partial sort: what search.top_k did before the index, minus its full argsort).

The vectors are synthetic: embedding 1M real passages with the served model would take days on
this CPU. They imitate sentence embeddings: d=576 (SmolLM2-135M's hidden size), float32,
L2-normalised, clustered at two levels (64 topics, 4096 sub-topic centres around them) with
within-cluster variation in a shared 32-dimensional subspace plus isotropic noise, so a query's
10 nearest neighbours score about 0.5-0.6 while random pairs score about 0 and the nearest
neighbours straddle several clusters (IVF recall is not trivially 1). The held-out queries come
from the same distribution. Smaller sizes are prefixes of the 1M draw (rows are i.i.d.).

Rows: p95 per size (target <= 50 ms at 1M), speed-up of p95 over brute force, build time
against one brute-force query (how many queries pay the build back), latency and build growth
per size growth (<= 1.0: no worse than linear), recall@10, and the index's bytes against the
raw vectors'.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, write_report  # noqa: E402
from magnet_model.inference import vector_index  # noqa: E402
from magnet_model.inference.vector_index import VectorIndex, exact_search  # noqa: E402

D = 576
TOPICS, CENTRES, RANK = 64, 4096, 32
SUB, LOCAL, ISO = 0.6, 0.8, 0.6  # sub-topic spread, in-subspace variation, isotropic noise
K = 10
P95_TARGET_MS = 50.0
TARGET_AT = 1_000_000


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def synthetic(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n stored vectors and n_queries held-out queries from the same clustered distribution."""
    rng = np.random.default_rng(seed)
    topics = _unit(rng.standard_normal((TOPICS, D), dtype=np.float32))
    noise = _unit(rng.standard_normal((CENTRES, D), dtype=np.float32))
    centres = _unit(topics[rng.integers(0, TOPICS, CENTRES)] + np.float32(SUB) * noise)
    basis = rng.standard_normal((D, RANK), dtype=np.float32) / np.float32(np.sqrt(D))

    def draw(m: int) -> np.ndarray:
        out = np.empty((m, D), dtype=np.float32)
        for s in range(0, m, 100_000):  # in chunks: temporaries stay small
            c = min(m, s + 100_000) - s
            x = centres[rng.integers(0, CENTRES, c)]
            x += (
                np.float32(LOCAL)
                * _unit(rng.standard_normal((c, RANK), dtype=np.float32))
                @ (basis.T)
            )
            x += np.float32(ISO) * _unit(rng.standard_normal((c, D), dtype=np.float32))
            out[s : s + c] = _unit(x)
        return out

    return draw(n), draw(n_queries)


def latencies(search, queries: np.ndarray, repeat: int, warmup: int = 5) -> np.ndarray:
    """Seconds per single query: each query's best of `repeat` passes (least disturbed)."""
    for q in queries[:warmup]:
        search(q)
    best = np.full(len(queries), np.inf)
    for _ in range(repeat):
        for j, q in enumerate(queries):
            t = time.perf_counter()
            search(q)
            best[j] = min(best[j], time.perf_counter() - t)
    return best


def measure(vectors: np.ndarray, queries: np.ndarray, args) -> dict:
    n = len(vectors)
    _, truth = exact_search(vectors, queries, K)  # batched: the recall reference
    t = time.perf_counter()
    index = VectorIndex(vectors, seed=args.seed)
    build = time.perf_counter() - t
    found = np.stack([index.search(q, K)[1][0] for q in queries])
    recall = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, truth, strict=True)]))
    lat = latencies(lambda q: index.search(q, K), queries, args.repeat)
    nb = min(len(queries), args.baseline_queries)
    brute = latencies(lambda q: exact_search(vectors, q[None], K), queries[:nb], args.repeat)
    out = {
        "n": n,
        "kind": index.kind,
        "nlist": index.nlist,
        "nprobe": index.nprobe,
        "calibrated_recall": index.calibrated_recall,
        "build_s": build,
        "recall_at_10": recall,
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p95_ms": float(np.percentile(lat, 95) * 1e3),
        "brute_p50_ms": float(np.percentile(brute, 50) * 1e3),
        "brute_p95_ms": float(np.percentile(brute, 95) * 1e3),
        "brute_queries": nb,
        "index_bytes": index.nbytes,
        "vector_bytes": vectors.nbytes,
    }
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}, flush=True)
    return out


def rows_of(res: list[dict]) -> list[Row]:
    rows = []
    for r in res:
        n = f"n={r['n']:,}"
        what = f"{r['kind']}" + (
            f", nlist {r['nlist']}, nprobe {r['nprobe']}" if r["nlist"] else ""
        )
        rows += [
            Row(f"top-10 latency p50, {n}", r["p50_ms"], "ms", r["brute_p50_ms"], "brute force",
                note=what),
            Row(f"top-10 latency p95, {n}", r["p95_ms"], "ms",
                target=f"<= {P95_TARGET_MS:g}" if r["n"] >= TARGET_AT else ""),
            Row(f"p95 speed-up over exact brute force, {n}", r["brute_p95_ms"], "ms",
                r["p95_ms"], "index p95"),
            Row(f"recall@10 vs exact, {n}", r["recall_at_10"], "",
                target=f">= {vector_index.TARGET_RECALL}" if r["kind"] == "ivf" else ""),
            Row(f"index build, {n}", r["build_s"] * 1e3, "ms", r["brute_p50_ms"],
                "one brute-force query", note=f"{r['build_s'] / r['n'] * 1e6:.2f} us/vector"),
            Row(f"index memory, {n}", r["index_bytes"] / 2**20, "MiB", r["vector_bytes"] / 2**20,
                "raw float32 vectors"),
        ]  # fmt: skip
    for a, b in zip(res, res[1:], strict=False):
        grow = b["n"] / a["n"]
        span = f"{a['n']:,} -> {b['n']:,}"
        rows.append(
            Row(f"latency p50 growth, {span}", b["p50_ms"] / a["p50_ms"], "x", grow,
                "size growth", target="<= 1.0")
        )  # fmt: skip
        if a["kind"] == b["kind"] == "ivf":  # an exact 'build' is a copy: its growth says nothing
            rows.append(
                Row(f"build time growth, {span}", b["build_s"] / a["build_s"], "x", grow,
                    "size growth", target="<= 1.0")
            )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k and 100k only (< 1 min)")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--queries", type=int, default=200, help="held-out queries per size")
    ap.add_argument(
        "--baseline-queries",
        type=int,
        default=50,
        help="queries timed with brute force (it reads n x d x 4 bytes each)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="passes over the queries (best of)")
    ap.add_argument("--threads", type=int, default=2, help="faiss/BLAS/torch threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="result name (bench/results/<out>.json)")
    args = ap.parse_args(argv)  # fmt: skip
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    name = args.out or ("search_quick" if args.quick else "search")

    import faiss
    import torch
    from threadpoolctl import threadpool_limits

    faiss.omp_set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)  # numpy's BLAS, used by the brute-force baseline

    t = time.perf_counter()
    vectors, queries = synthetic(max(sizes), args.queries, args.seed)
    print(f"generated {vectors.shape} in {time.perf_counter() - t:.1f} s", flush=True)
    res = []
    for n in sorted(sizes):
        res.append(measure(vectors[:n], queries, args))
        gc.collect()  # the previous size's index goes before the next is built
    extra = {
        "threads": {
            "faiss_omp": faiss.omp_get_max_threads(),
            "torch": torch.get_num_threads(),
            "blas": args.threads,
        },
        "faiss": faiss.__version__,
        "data": {
            "kind": "synthetic clustered (see the module docstring)",
            "d": D,
            "topics": TOPICS,
            "centres": CENTRES,
            "subspace_rank": RANK,
            "spread": {"sub_topic": SUB, "local": LOCAL, "isotropic": ISO},
            "queries": args.queries,
        },
        "constants": {
            "EXACT_MAX_VECTORS": vector_index.EXACT_MAX_VECTORS,
            "NLIST_PER_SQRT_N": vector_index.NLIST_PER_SQRT_N,
            "TRAIN_POINTS_PER_LIST": vector_index.TRAIN_POINTS_PER_LIST,
            "KMEANS_ITERATIONS": vector_index.KMEANS_ITERATIONS,
            "TARGET_RECALL": vector_index.TARGET_RECALL,
        },
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "sizes": res,
    }
    write_report(name, rows_of(res), extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
