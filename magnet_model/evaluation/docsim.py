"""Document similarity against people's ratings (the evaluator's `docsim` task).

The 50 Lee news documents (Lee, Pincombe and Welsh 2005; gensim's test data: lee.cor and
similarities0-1.txt) were rated pair by pair by people; each of the 1,225 pairs has their mean
similarity. A system's vectors of the 50 documents, whole, are compared by cosine, and the
score is how well the cosines rank the pairs as people did (Spearman x 100; Pearson x 100 as
the study's own measure beside it).

Why this task beside STS-B and retrieval: it is not SSCL's own pair type. SSCL trains on a
short description against the extract it describes (title: description -> extract), and the
retrieval task asks that very pair; here two whole documents of the same kind meet, graded
by people rather than matched to one answer. No training corpus holds these documents (none
shares a run of 8 words with one), nor the Lee background corpus they are not part of.
"""

from __future__ import annotations

import numpy as np


def rated_pairs(ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (i, j) index arrays of every rated pair: the upper triangle, i < j."""
    n = ratings.shape[0]
    if ratings.shape != (n, n):
        raise ValueError(f"ratings must be a square matrix, not {ratings.shape}")
    return np.triu_indices(n, 1)


def correlations(vecs: np.ndarray, ratings: np.ndarray) -> dict:
    """Spearman and Pearson (x 100) of the documents' cosines against people's ratings, over
    every pair; vecs: one normalised vector a document, in the ratings' order."""
    from scipy.stats import pearsonr, spearmanr

    if len(vecs) != ratings.shape[0]:
        raise ValueError(f"{len(vecs)} vectors for {ratings.shape[0]} rated documents")
    i, j = rated_pairs(ratings)
    cos = np.sum(vecs[i] * vecs[j], axis=1)
    gold = ratings[i, j]
    return {
        "spearman": 100 * float(spearmanr(cos, gold).statistic),
        "pearson": 100 * float(pearsonr(cos, gold).statistic),
        "pairs": len(gold),
    }
