"""Examples for the prompted baselines chosen per passage (the `nearest` prompt formats).

Five fixed hand-written examples teach a small model the wrong things: it quotes them in the
middle of an unrelated passage ("The next day, a happy family came to take it home."). Here
the examples of each prompt are the training-split passages nearest to the query, of the same
kind of blank:

- the pool: Wikipedia paragraphs of the training split (data.wikipedia_paragraphs("train"):
  no held-out article, so neither the evaluator's Wikipedia passages nor the Paper protocol's
  are ever an example; the news domain, Lee, is no Wikipedia at all). From each paragraph,
  three consecutive sentences make two examples: one with the middle sentence removed (kind
  "sentence") and one with a phrase or a word of the middle sentence removed ("inside").
- the kind of the query's blank: "sentence" where whole sentences go (units.between_sentences),
  else "inside".
- nearness: TF-IDF cosine of the texts (scikit-learn, English stop words dropped, sublinear
  term counts); ties go to the earlier paragraph. The nearest example comes last, next to the
  query.

Deterministic: the same query always gets the same examples. The default pool is built once
per process, on the first call (a few seconds).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .units import between_sentences, phrase_spans, sentence_spans, word_spans

BLANK = "___"
SENTENCE, INSIDE = "sentence", "inside"
POOL_PARAGRAPHS = 6000  # training paragraphs drawn (seeded) for the default pool
MAX_SENTENCE_WORDS = 35  # a longer sentence in a window makes no example (prompts stay short)
MIN_SENTENCE_WORDS = 5


@dataclass(frozen=True)
class Example:
    text: str  # the passage with BLANK where the answer was
    answer: str
    kind: str  # SENTENCE or INSIDE


def blank_kind(query: str) -> str:
    """SENTENCE where whole sentences go around the query's (first) BLANK, else INSIDE."""
    left, _, right = query.partition(BLANK)
    return SENTENCE if between_sentences(left, right) else INSIDE


def paragraph_examples(paragraph: str, rng: random.Random) -> list[Example]:
    """Up to two examples from one paragraph: a window of three sentences (a seeded choice),
    its middle sentence removed, and the same window with a phrase or word of the middle
    sentence removed. None when no window has sentences of a usable length."""
    spans = sentence_spans(paragraph)
    windows = [
        i
        for i in range(1, len(spans) - 1)
        if all(
            MIN_SENTENCE_WORDS <= len(paragraph[a:b].split()) <= MAX_SENTENCE_WORDS
            for a, b in spans[i - 1 : i + 2]
        )
    ]
    if not windows:
        return []
    i = rng.choice(windows)
    (a0, _), (m0, m1), (_, b1) = spans[i - 1], spans[i], spans[i + 1]
    out = [
        Example(
            f"{paragraph[a0:m0].rstrip()} {BLANK} {paragraph[m1:b1].lstrip()}",
            paragraph[m0:m1],
            SENTENCE,
        )
    ]
    pieces = phrase_spans(paragraph, (m0, m1)) if rng.random() < 0.5 else []
    pieces = pieces or word_spans(paragraph, (m0, m1))
    if pieces:
        p0, p1 = rng.choice(pieces)
        text = paragraph[a0:p0] + BLANK + paragraph[p1:b1]
        out.append(Example(text, paragraph[p0:p1], INSIDE))
    return out


class ExamplePool:
    """Examples of both kinds with a TF-IDF index over their texts (module docstring)."""

    def __init__(self, paragraphs: Sequence[str], seed: int = 0):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.examples: list[Example] = []
        for k, paragraph in enumerate(paragraphs):
            self.examples.extend(paragraph_examples(paragraph, random.Random(f"{seed}-{k}")))
        if not self.examples:
            raise ValueError("no paragraph gave an example (three sentences of 5-35 words)")
        self.vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(
            [e.text.replace(BLANK, " ") for e in self.examples]
        )
        self.kinds = [e.kind for e in self.examples]

    def __len__(self) -> int:
        return len(self.examples)

    def nearest(self, query: str, k: int) -> list[Example]:
        """The k examples of the query's blank kind nearest to it, the nearest last."""
        if k <= 0:
            return []
        import numpy as np

        kind = blank_kind(query)
        q = self.vectorizer.transform([query.replace(BLANK, " ")])
        scores = (self.matrix @ q.T).toarray()[:, 0]
        scores = np.where(np.array(self.kinds) == kind, scores, -1.0)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.examples[i] for i in reversed(order.tolist()) if scores[i] >= 0]


@lru_cache(maxsize=1)
def default_pool() -> ExamplePool:
    """The pool of POOL_PARAGRAPHS Wikipedia training paragraphs (a seeded draw)."""
    from .data import wikipedia_paragraphs

    paragraphs = wikipedia_paragraphs("train")
    rng = random.Random(0)
    if len(paragraphs) > POOL_PARAGRAPHS:
        paragraphs = rng.sample(paragraphs, POOL_PARAGRAPHS)
    return ExamplePool(paragraphs)
