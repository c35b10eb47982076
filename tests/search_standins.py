"""Stand-ins for the sentence encoders in the search tests: cheap, deterministic, no model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from magnet_model.inference import search


class CountingEncoder(search.Encoder):
    """Bag of words over a fixed vocabulary; counts the texts it embeds."""

    key = "counting"

    def __init__(self, vocab: Sequence[str]):
        self.vocab = list(vocab)
        self.seen = 0

    def encode(self, texts, batch_size=16):
        self.seen += len(texts)
        v = np.array([[t.split().count(w) for w in self.vocab] for t in texts], dtype=np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
