"""The retrieval check: which descriptions become queries, ranks with ties, the metrics."""

from __future__ import annotations

import numpy as np
import pytest

from magnet_model.data import VitalArticle
from magnet_model.evaluation import retrieval

ARTICLES = [
    VitalArticle(
        "Troy", "Troy was an ancient city in Asia Minor.", "Ancient city in Asia Minor", ""
    ),
    VitalArticle("Art", "Art is a range of human activities.", "Human activity", ""),  # 2 words
    VitalArticle("Robin", "The robin is a small bird of Europe.", "Species of bird", ""),
    VitalArticle("Wren", "The wren is a tiny brown bird.", "species of Bird", ""),  # same, case
    VitalArticle("Rome", "Rome is the capital city of Italy.", "Capital city of Italy", ""),
    VitalArticle("Nil", "Nil is nothing at all.", "", ""),
]


def test_queries_are_unique_informative_descriptions_without_the_title():
    rs = retrieval.retrieval_set(ARTICLES)
    assert rs.documents == tuple(a.extract for a in ARTICLES)  # every extract is a distractor
    assert rs.queries == ("Ancient city in Asia Minor", "Capital city of Italy")
    assert rs.answers == (0, 4)
    assert not any(ARTICLES[i].title in q for q, i in zip(rs.queries, rs.answers, strict=True))


def test_a_sample_is_seeded_and_in_order():
    many = [VitalArticle(f"T{i}", f"text {i}", f"description number {i}", "") for i in range(30)]
    a, b = retrieval.retrieval_set(many, 10, seed=1), retrieval.retrieval_set(many, 10, seed=1)
    assert a == b and len(a.documents) == 10 and len(a.queries) == 10
    assert list(a.documents) == sorted(a.documents, key=lambda t: int(t.split()[1]))
    assert retrieval.retrieval_set(many, 10, seed=2) != a


def test_ranks_count_ties_against_the_answer():
    docs = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    queries = np.array([[0.0, 1.0], [1.0, 0.0]])
    ranks = retrieval.answer_ranks(queries, docs, [1, 0])
    assert ranks.tolist() == [1, 2]  # doc 2 scores the same as the answer 0: rank 2
    assert retrieval.metrics(ranks) == {"recall_at_1": 0.5, "mrr": pytest.approx(0.75)}


def test_bag_of_words_finds_what_shares_words_and_a_constant_encoder_finds_nothing():
    rs = retrieval.retrieval_set(ARTICLES)
    vocab = sorted({w.lower() for t in rs.documents + rs.queries for w in t.split()})

    def bag(texts):
        v = np.array([[t.lower().split().count(w) for w in vocab] for t in texts], float)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    found = retrieval.evaluate(bag, rs)
    assert found == {"recall_at_1": 1.0, "mrr": 1.0, "ranks": [1] * len(rs.queries)}
    flat = retrieval.evaluate(lambda texts: np.ones((len(texts), 3)) / np.sqrt(3), rs)
    assert flat["recall_at_1"] == 0.0 and flat["mrr"] == pytest.approx(1 / len(ARTICLES))
    # compared query by query: the bag finds every answer the constant encoder ranks last
    pair = retrieval.paired(found, flat)
    assert pair["mrr"]["diff"] == pytest.approx(1 - 1 / len(ARTICLES))
    assert pair["recall_at_1_share"]["diff"] == 1.0 and pair["mrr"]["n"] == len(rs.queries)
    with pytest.raises(ValueError, match="no query"):
        retrieval.evaluate(bag, retrieval.retrieval_set(ARTICLES[1:4]))
