"""Top-k inner-product search over stored vectors: exact when few, an IVF index when many.

Vectors are L2-normalised sentence embeddings, so inner product = cosine. Up to
EXACT_MAX_VECTORS the index is the array itself and a search is one matrix-vector product (the
app's corpora, at most a few thousand passages, always take this path; faiss is not even
imported). Above it, a faiss IVF index (inverted lists around k-means centroids) scans only the
lists nearest the query; how many (nprobe) is calibrated at build time on a sample of the stored
vectors so that recall@10 against exact search reaches TARGET_RECALL.

    index = VectorIndex(vectors)                 # (n, d) float32, normalised
    scores, ids = index.search(query, k=10)      # query (d,) or (m, d) -> (m, k) arrays
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError

# Below this many vectors exact search wins: a flat scan of 20k x 576 float32 reads 46 MB
# (a few ms here), while training an IVF index costs seconds and gives up some recall.
EXACT_MAX_VECTORS = 20_000
# nlist = NLIST_PER_SQRT_N * sqrt(n). faiss suggests 4-16 sqrt(n) for very large collections; on
# 2 CPU cores k-means training (cost ~ nlist^2) dominates the build, and the search at sqrt(n)
# lists is already far under the latency target (it scans ~nprobe * sqrt(n) vectors).
NLIST_PER_SQRT_N = 1.0
# k-means is trained on this many sampled vectors per list (faiss warns below 39) for this many
# iterations: enough for stable centroids; more only lengthens the build.
TRAIN_POINTS_PER_LIST = 40
KMEANS_ITERATIONS = 10
# nprobe is the smallest candidate whose recall@10 on CALIBRATION_QUERIES stored vectors (their
# own entry left out) reaches TARGET_RECALL + CALIBRATION_MARGIN; the margin covers the sampling
# error of 100 queries x 10 neighbours (standard error about 0.007 at recall 0.95).
TARGET_RECALL = 0.95
CALIBRATION_MARGIN = 0.02
CALIBRATION_QUERIES = 100
CALIBRATION_K = 10
NPROBE_CANDIDATES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Exact scans go through the stored vectors in blocks of this many rows, so a batch of queries
# never materialises an (m, n) score matrix larger than m x 64k floats.
EXACT_BLOCK_ROWS = 65_536


class VectorIndexError(InputError):
    """Vectors or a query that cannot be searched (empty, wrong shape or dimension, not finite)."""


class EmptyIndexError(VectorIndexError):
    """There are no stored vectors to search."""


class DimensionError(VectorIndexError):
    """The query's dimension differs from the stored vectors'."""


def _as_matrix(x, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise VectorIndexError(f"The {what} must be numbers, not {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise VectorIndexError(f"The {what} contain NaN or infinite values.")
    return arr


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores and ids of the k largest inner products per query, highest first, ties broken by
    the lower id (the order of a stable argsort). vectors (n, d), queries (m, d), float32."""
    n, m = vectors.shape[0], queries.shape[0]
    k = min(k, n)
    cand_s: list[list[np.ndarray]] = [[] for _ in range(m)]
    cand_i: list[list[np.ndarray]] = [[] for _ in range(m)]
    for start in range(0, n, EXACT_BLOCK_ROWS):
        block = vectors[start : start + EXACT_BLOCK_ROWS]
        s = queries @ block.T if m > 1 else (block @ queries[0])[None]
        # the k-th largest score per row; every score tied with it stays a candidate, so the
        # tie-break by id below is exact
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1] if k < s.shape[1] else s.min(1)
        for row in range(m):
            keep = np.flatnonzero(s[row] >= kth[row])
            cand_s[row].append(s[row, keep])
            cand_i[row].append(keep + start)
    scores = np.empty((m, k), dtype=np.float32)
    ids = np.empty((m, k), dtype=np.int64)
    for row in range(m):
        rs, ri = np.concatenate(cand_s[row]), np.concatenate(cand_i[row])
        order = np.lexsort((ri, -rs))[:k]
        scores[row], ids[row] = rs[order], ri[order]
    return scores, ids


class VectorIndex:
    """Top-k inner-product search over n stored d-dimensional vectors (see the module doc)."""

    def __init__(
        self,
        vectors,
        *,
        exact_max: int = EXACT_MAX_VECTORS,
        target_recall: float = TARGET_RECALL,
        seed: int = 0,
    ):
        arr = np.asarray(vectors)
        if arr.ndim != 2:
            raise VectorIndexError(f"Stored vectors must be a 2-D array (n, d), not {arr.shape}.")
        if arr.shape[0] == 0:
            raise EmptyIndexError("There are no stored vectors to search (the corpus is empty).")
        if arr.shape[1] == 0:
            raise VectorIndexError("Stored vectors have dimension 0.")
        self.vectors = _as_matrix(arr, "stored vectors")
        self.n, self.d = self.vectors.shape
        self.kind = "exact"
        self.nlist = 0
        self.nprobe = 0
        self.calibrated_recall: float | None = None
        self._ivf = None
        if self.n > exact_max:
            self._build_ivf(target_recall, seed)

    # ------------------------------------------------------------------ build

    def _build_ivf(self, target_recall: float, seed: int) -> None:
        import faiss

        self.kind = "ivf"
        self.nlist = max(1, round(NLIST_PER_SQRT_N * math.sqrt(self.n)))
        rng = np.random.default_rng(seed)
        n_train = min(self.n, TRAIN_POINTS_PER_LIST * self.nlist)
        train = self.vectors[np.sort(rng.choice(self.n, n_train, replace=False))]
        quantizer = faiss.IndexFlatIP(self.d)
        ivf = faiss.IndexIVFFlat(quantizer, self.d, self.nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.niter = KMEANS_ITERATIONS
        ivf.cp.spherical = True  # unit-norm centroids: the right centres for cosine
        ivf.cp.seed = seed
        ivf.cp.max_points_per_centroid = TRAIN_POINTS_PER_LIST
        ivf.train(train)
        ivf.add(self.vectors)
        self._quantizer = quantizer  # the IVF index does not own it from Python
        self._ivf = ivf
        self.nprobe, self.calibrated_recall = self._calibrate(target_recall, rng)
        self._ivf.nprobe = self.nprobe
        # the IVF index holds its own copy of the vectors; exact search uses only this index now
        self.vectors = None

    def _calibrate(self, target_recall: float, rng) -> tuple[int, float]:
        """Smallest nprobe whose recall@10 on stored vectors (self left out) reaches the target."""
        m = min(CALIBRATION_QUERIES, self.n)
        qi = rng.choice(self.n, m, replace=False)
        queries = self.vectors[qi]
        k = CALIBRATION_K + 1  # the query itself is found too; it is left out of both lists
        _, truth = exact_search(self.vectors, queries, k)
        want = target_recall + CALIBRATION_MARGIN
        recall = 0.0
        for nprobe in NPROBE_CANDIDATES:
            nprobe = min(nprobe, self.nlist)
            self._ivf.nprobe = nprobe
            _, got = self._ivf.search(queries, k)
            hits = total = 0
            for q, t, g in zip(qi, truth, got, strict=True):
                t_set = set(t.tolist()) - {q}
                hits += len(t_set & (set(g.tolist()) - {q}))
                total += len(t_set)
            recall = hits / max(1, total)
            if recall >= want or nprobe == self.nlist:
                break
        return nprobe, recall

    # ------------------------------------------------------------------ search

    def search(self, query, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Scores (m, k) and ids (m, k) of the k best stored vectors per query, best first.
        query: (d,) or (m, d). k larger than n gives n columns."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise VectorIndexError(f"k must be a whole number of at least 1, not {k!r}.")
        q = np.asarray(query)
        if q.ndim == 1:
            q = q[None]
        if q.ndim != 2:
            raise VectorIndexError(
                f"A query must be a vector (d,) or a matrix (m, d), not {q.shape}."
            )
        if q.shape[1] != self.d:
            raise DimensionError(
                f"The query has dimension {q.shape[1]} but the stored vectors have {self.d}: "
                "were they made by a different encoder?"
            )
        q = _as_matrix(q, "query values")
        k = min(int(k), self.n)
        if self._ivf is None:
            return exact_search(self.vectors, q, k)
        scores, ids = self._ivf.search(q, k)
        short = (ids < 0).any(1)
        if short.any():  # the probed lists held fewer than k vectors: widen to every list
            self._ivf.nprobe = self.nlist
            scores[short], ids[short] = self._ivf.search(q[short], k)
            self._ivf.nprobe = self.nprobe
        return scores, ids.astype(np.int64)

    def __len__(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        """Bytes held by the index: the vectors (IVF: its own copy, list ids and centroids)."""
        if self._ivf is None:
            return self.vectors.nbytes
        lists = self._ivf.invlists
        codes = sum(lists.list_size(i) for i in range(self.nlist))
        return codes * (self.d * 4 + 8) + self.nlist * self.d * 4

    def __repr__(self) -> str:
        extra = f", nlist={self.nlist}, nprobe={self.nprobe}" if self._ivf is not None else ""
        return f"VectorIndex(n={self.n}, d={self.d}, kind={self.kind!r}{extra})"
