"""magnet_model.inference.vector_index: exact search equals numpy brute force, the IVF index keeps
recall@10 on clustered data, bad input raises typed errors; search.top_k on top of it."""

from __future__ import annotations

import numpy as np
import pytest

from magnet_model.errors import InputError, MagnetError
from magnet_model.inference import search, vector_index
from magnet_model.inference.vector_index import DimensionError, EmptyIndexError, VectorIndex


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, d: int, centres: int, noise: float, seed: int, queries: int = 0):
    """n stored vectors (and `queries` held-out ones) around the same random unit centres."""
    rng = np.random.default_rng(seed)
    c = unit(rng.standard_normal((centres, d)))
    m = n + queries
    x = unit(c[rng.integers(0, centres, m)] + noise * unit(rng.standard_normal((m, d))))
    return (x[:n], x[n:]) if queries else x


def brute_force(vectors: np.ndarray, query: np.ndarray, k: int):
    scores = vectors @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return scores[order], order


def test_exact_search_equals_numpy_brute_force():
    rng = np.random.default_rng(0)
    vecs = unit(rng.standard_normal((3000, 24)))
    queries = unit(rng.standard_normal((7, 24)))
    index = VectorIndex(vecs)
    assert index.kind == "exact"
    for k in (1, 10, 3000, 5000):
        scores, ids = index.search(queries, k)  # a batch
        assert ids.shape == (7, min(k, 3000))
        for q, s_row, i_row in zip(queries, scores, ids, strict=True):
            want_s, want_i = brute_force(vecs, q, k)
            np.testing.assert_allclose(s_row, want_s, rtol=1e-5, atol=1e-6)
            if k <= 10:  # no near-ties up top: the very same ids in the same order
                np.testing.assert_array_equal(i_row, want_i)
            else:  # further down, two scores a rounding error apart may swap places
                assert sorted(i_row) == sorted(want_i)
                np.testing.assert_allclose(vecs[i_row] @ q, want_s, atol=1e-6)
        s1, i1 = index.search(queries[3], k)  # one query, as the app asks
        np.testing.assert_array_equal(i1[0], ids[3])


def test_exact_search_breaks_ties_by_id_across_blocks(monkeypatch):
    monkeypatch.setattr(vector_index, "EXACT_BLOCK_ROWS", 4)  # ties straddle block borders
    vecs = np.zeros((11, 3), dtype=np.float32)
    vecs[:, 0] = [0.5, 1, 0.2, 1, 0.5, 1, 0.5, 0.9, 1, 0.1, 1]
    scores, ids = VectorIndex(vecs).search(np.array([1.0, 0, 0]), 6)
    assert ids[0].tolist() == [1, 3, 5, 8, 10, 7]
    np.testing.assert_allclose(scores[0], [1, 1, 1, 1, 1, 0.9])


def test_ivf_index_keeps_recall_on_clustered_data():
    vecs, queries = clustered(6000, 32, centres=60, noise=0.9, seed=1, queries=200)
    index = VectorIndex(vecs, exact_max=1000)
    assert index.kind == "ivf" and index.nlist == round(np.sqrt(6000))
    assert 1 <= index.nprobe < index.nlist  # approximate: it does not scan every list
    assert index.calibrated_recall >= vector_index.TARGET_RECALL
    scores, ids = index.search(queries, 10)
    _, truth = VectorIndex(vecs).search(queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth, strict=True)])
    assert recall >= 0.9
    # the scores it returns are the true inner products of the ids it returns
    np.testing.assert_allclose(scores, np.einsum("md,mkd->mk", queries, vecs[ids]), atol=1e-5)
    assert index.nbytes >= vecs.nbytes


def test_ivf_index_returns_k_even_when_probed_lists_are_short():
    vecs = clustered(2500, 16, centres=50, noise=0.3, seed=3)
    index = VectorIndex(vecs, exact_max=100)
    _, ids = index.search(vecs[:5], 2000)  # more than nprobe lists can hold
    assert ids.shape == (5, 2000) and (ids >= 0).all()
    assert all(len(set(row)) == 2000 for row in ids.tolist())


def test_errors_are_typed_and_readable():
    vecs = unit(np.random.default_rng(0).standard_normal((10, 8)))
    with pytest.raises(EmptyIndexError, match="no stored vectors"):
        VectorIndex(np.zeros((0, 8), dtype=np.float32))
    with pytest.raises(vector_index.VectorIndexError, match="2-D"):
        VectorIndex(np.zeros(8))
    with pytest.raises(vector_index.VectorIndexError, match="NaN"):
        VectorIndex(np.full((2, 8), np.nan))
    with pytest.raises(vector_index.VectorIndexError, match="numbers"):
        VectorIndex(np.array([["a", "b"]]))
    index = VectorIndex(vecs)
    with pytest.raises(DimensionError, match="dimension 9 but the stored vectors have 8"):
        index.search(np.ones(9), 3)
    with pytest.raises(vector_index.VectorIndexError, match="k must be"):
        index.search(vecs[0], 0)
    with pytest.raises(vector_index.VectorIndexError, match="NaN"):
        index.search(np.full(8, np.inf), 3)
    assert issubclass(vector_index.VectorIndexError, InputError)
    assert issubclass(InputError, MagnetError)


def test_top_k_over_an_array_and_over_a_built_index():
    vecs = clustered(300, 16, centres=10, noise=0.5, seed=4)
    corpus = search.Corpus("c", tuple(f"passage {i}" for i in range(300)))
    q = vecs[42]
    hits = search.top_k(q, vecs, corpus, 5)
    _, want = brute_force(vecs, q, 5)
    assert [h.index for h in hits] == want.tolist() and hits[0].index == 42
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5] and hits[0].text == "passage 42"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    built = VectorIndex(vecs, exact_max=100)  # an IVF index built once, reused per query
    assert search.top_k(q, built, corpus, 5)[0].index == 42
    with pytest.raises(MagnetError, match="empty"):
        search.top_k(q, np.zeros((0, 16), dtype=np.float32), search.Corpus("e", ()), 5)
    with pytest.raises(MagnetError, match="300 vectors for 2 passages"):
        search.top_k(q, vecs, search.Corpus("short", ("a", "b")), 5)
    with pytest.raises(DimensionError):
        search.top_k(np.ones(8), vecs, corpus, 5)
