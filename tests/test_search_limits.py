"""Issue 22, point 7, model side: the search-vector cache keeps to a size cap, and an uploaded
corpus that the csv or json modules cannot read is one sentence (CorpusError)."""

from __future__ import annotations

import numpy as np
import pytest

from magnet_model.inference import search


def test_the_search_cache_keeps_to_its_size_cap(tmp_path):
    """Every uploaded corpus added vector files that were never deleted."""

    class Fake(search.Encoder):
        key = "fake"

        def encode(self, texts, batch_size=16):
            return np.ones((len(texts), 64), dtype=np.float32) / 8

    corpora = [search.Corpus(f"c{i}", tuple(f"p{i} {j}" for j in range(100))) for i in range(4)]
    one = 100 * 64 * 4 + 128  # bytes of one cache file, header included
    for i, corpus in enumerate(corpora):
        search.corpus_vectors(Fake(), corpus, tmp_path, max_cache_bytes=int(2.5 * one))
        if i == 1:  # the first corpus is used again: the second is now the oldest
            search.corpus_vectors(Fake(), corpora[0], tmp_path, max_cache_bytes=int(2.5 * one))
    left = {p.name for p in (tmp_path / "search").glob("*.npy")}
    want = {search.cache_path(tmp_path, Fake(), c).name for c in (corpora[0], *corpora[2:])}
    assert len(left) == 2 and left <= want
    assert search.cache_path(tmp_path, Fake(), corpora[3]).is_file()  # the newest stays


def test_an_unreadable_corpus_file_is_one_sentence():
    """A CSV cell over the csv module's 128 KB limit, or JSON nested 200,000 deep, gave an
    empty error (`_csv.Error`, `RecursionError`)."""
    with pytest.raises(search.CorpusError, match=r"Line 2 of the \.csv file cannot be read"):
        search.parse_corpus("c.csv", ("text\n" + "w" * 200_000 + "\n").encode())
    deep = ("[" * 200_000 + "]" * 200_000 + "\n").encode()
    with pytest.raises(search.CorpusError, match="Line 1 of the .jsonl file is not JSON"):
        search.parse_corpus("d.jsonl", deep, max_bytes=None)
    ok = search.parse_corpus("c.csv", b"text\nthe cat sat\n")
    assert ok.passages == ("the cat sat",)
