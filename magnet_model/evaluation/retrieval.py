"""Retrieval check: held-out Wikipedia vital-article extracts found by their short description.

What is fair and not trivial here:
- Documents are the held-out extracts (data.vital_articles("heldout"): never trained on, and
  no training text shares a run of 8 words with them), whole, as they come (~100 tokens).
- The query is the article's Wikipedia short description alone ("1968 film by Stanley
  Kubrick" for "2001: A Space Odyssey"), never its title: every extract opens with its title,
  so a title in the query would turn the check into string matching.
- Only informative descriptions are asked: at least MIN_QUERY_WORDS words ("Art movement" is
  not) and unique in the corpus, case aside ("Species of bird" has no single right answer).
  The other extracts stay in the corpus as distractors.
- Queries and documents are embedded by the same function (the system's sentence embedding,
  as for STS-B); the score is the cosine. recall@1: the share of queries whose own extract
  ranks first; MRR: the mean of 1 / its rank (ties count against it).
- Two adapters in one run are compared query by query (paired): the MRR difference with its
  bootstrap interval and Wilcoxon p, recall@1's with McNemar's, so that "no lower than" is
  judged against the noise of 472 queries rather than by two means.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_QUERY_WORDS = 3


@dataclass(frozen=True)
class RetrievalSet:
    documents: tuple[str, ...]
    queries: tuple[str, ...]
    answers: tuple[int, ...]  # the index in documents of each query's extract


def retrieval_set(articles: Sequence, n: int = 0, seed: int = 0) -> RetrievalSet:
    """n articles (a seeded sample in their order; 0 = all) as documents; queries as above.

    articles: data.VitalArticle-like objects (extract, description)."""
    if 0 < n < len(articles):
        keep = sorted(random.Random(f"{seed}-retrieval").sample(range(len(articles)), n))
        articles = [articles[i] for i in keep]
    counts = Counter(a.description.casefold() for a in articles)
    queries, answers = [], []
    for i, a in enumerate(articles):
        desc = a.description.strip()
        if len(desc.split()) >= MIN_QUERY_WORDS and counts[desc.casefold()] == 1:
            queries.append(desc)
            answers.append(i)
    return RetrievalSet(tuple(a.extract for a in articles), tuple(queries), tuple(answers))


def answer_ranks(queries: np.ndarray, documents: np.ndarray, answers: Sequence[int]) -> np.ndarray:
    """The 1-based rank of each query's answer among all documents by dot product (the cosine
    for normalised vectors); documents scoring the same as the answer rank before it."""
    scores = queries @ documents.T
    right = scores[np.arange(len(answers)), np.asarray(answers)]
    return (scores >= right[:, None]).sum(axis=1)  # the answer itself counts: rank >= 1


def metrics(ranks: np.ndarray) -> dict:
    return {
        "recall_at_1": float(np.mean(ranks == 1)),
        "mrr": float(np.mean(1.0 / ranks)),
    }


def evaluate(encode: Callable[[list[str]], np.ndarray], rs: RetrievalSet) -> dict:
    """recall@1 and MRR of one encoder (texts -> L2-normalised vectors) on a RetrievalSet,
    and each query's rank (for paired comparisons)."""
    if not rs.queries:
        raise ValueError("The retrieval set has no query; use more documents.")
    docs = encode(list(rs.documents))
    queries = encode(list(rs.queries))
    ranks = answer_ranks(queries, docs, rs.answers)
    return {**metrics(ranks), "ranks": [int(r) for r in ranks]}


def paired(first: dict, other: dict) -> dict:
    """Two systems' results (evaluate) on the same queries: MRR's difference (first - other)
    with its interval and Wilcoxon p, recall@1's with its interval and McNemar p."""
    from .stats import paired_means, paired_shares

    a, b = np.asarray(first["ranks"]), np.asarray(other["ranks"])
    return {
        "mrr": paired_means(1.0 / a, 1.0 / b),
        "recall_at_1_share": paired_shares(a == 1, b == 1),
    }
